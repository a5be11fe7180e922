//! The installer's own log bundle (`openshift-install gather bootstrap`'s
//! `log-bundle-*.tar.gz`) redacted entry by entry before it enters gather's
//! tarball; what cannot be redacted safely is left out and listed.
//!
//! The bundle (openshift/installer `data/data/bootstrap/files/usr/local/bin/
//! installer-gather.sh` and `installer-masters-gather.sh`) holds journals,
//! container logs, `*.inspect` JSON, the bootstrap's rendered assets and API
//! resources. The rendered assets include Kubernetes Secrets (the kubeadmin
//! password's, the worker user-data's) whose `data` keys are arbitrary, and
//! kubeconfigs; no key-based redaction can vouch for those, so:
//!
//! - a regular file of valid UTF-8 goes in through [`Redactor::redact`];
//! - left out, each with its reason: anything not UTF-8 (binaries, nested
//!   archives), a Kubernetes `Secret`, a kubeconfig, a file named like a key or
//!   a pull secret or auth file, and a file larger than [`MAX_ENTRY`];
//! - an entry whose path is absolute or climbs (`..`) is refused as a whole:
//!   the bundle is not what the installer writes.

use std::io::Read;
use std::path::{Component, Path};

use anyhow::{bail, Context, Result};

use crate::redact::Redactor;

/// Larger entries are left out (a journal that size is not read whole).
pub const MAX_ENTRY: u64 = 64 << 20;

/// What came out of a bundle: entries to add (path inside the bundle, redacted
/// bytes) and the ones left out with why.
#[derive(Debug, Default)]
pub struct Redacted {
    pub entries: Vec<(String, Vec<u8>)>,
    pub left_out: Vec<String>,
}

/// Why a text may not go in even redacted, if it may not.
fn unsafe_text(path: &str, text: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    if name.contains("kubeconfig") || text.contains("client-key-data") {
        return Some("a kubeconfig");
    }
    if name.ends_with(".key")
        || name.contains("pull-secret")
        || name.contains("pull_secret")
        || name.ends_with("auth.json")
        || name.contains("password")
    {
        return Some("named like a key, password or pull secret");
    }
    let secret_kind = text.lines().any(|l| {
        let l = l.trim().trim_matches(',');
        l == "kind: Secret" || l.replace(' ', "") == "\"kind\":\"Secret\""
    }) || text.contains("\"kind\":\"Secret\"");
    if secret_kind {
        return Some("a Kubernetes Secret (its data keys are arbitrary)");
    }
    None
}

/// Read the gzip'd tar at `bundle` and redact it.
pub fn redact_bundle(bundle: &Path, r: &Redactor) -> Result<Redacted> {
    let f = std::fs::File::open(bundle).with_context(|| format!("opening {}", bundle.display()))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(f));
    let mut out = Redacted::default();
    for entry in archive.entries().context("reading the log bundle")? {
        let mut entry = entry.context("reading the log bundle")?;
        let path = entry.path().context("a bundle entry's path")?.into_owned();
        if path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            bail!(
                "the log bundle has an entry outside it ({}): not the installer's bundle",
                path.display()
            );
        }
        let shown = path.to_string_lossy().into_owned();
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            continue;
        }
        if !kind.is_file() {
            out.left_out.push(format!("{shown}: not a regular file"));
            continue;
        }
        let size = entry.header().size().unwrap_or(u64::MAX);
        if size > MAX_ENTRY {
            out.left_out
                .push(format!("{shown}: {size} bytes, over {MAX_ENTRY}"));
            continue;
        }
        let mut bytes = Vec::with_capacity(size as usize);
        entry
            .read_to_end(&mut bytes)
            .with_context(|| format!("reading {shown} in the log bundle"))?;
        let Ok(text) = String::from_utf8(bytes) else {
            out.left_out
                .push(format!("{shown}: not text (cannot be redacted)"));
            continue;
        };
        if let Some(why) = unsafe_text(&shown, &text) {
            out.left_out.push(format!("{shown}: {why}"));
            continue;
        }
        out.entries.push((shown, r.redact(&text).into_bytes()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(dir: &Path, files: &[(&str, &[u8])]) -> std::path::PathBuf {
        let p = dir.join("log-bundle-20261123.tar.gz");
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&p).unwrap(),
            flate2::Compression::fast(),
        );
        let mut b = tar::Builder::new(gz);
        for (name, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap();
        p
    }

    #[test]
    fn planted_secrets_never_come_out() {
        let dir = tempfile::tempdir().unwrap();
        let planted = [
            "PLANTED-bmc-pw-4411",
            "UExBTlRFRC1rdWJlYWRtaW4=",
            "PLANTED-client-key",
            "PLANTED-pull-auth-9",
            "PLANTED-private-key-body",
        ];
        let p = bundle(
            dir.path(),
            &[
                (
                    "log-bundle/bootstrap/journals/bootkube.log",
                    b"Nov 23 bootkube: ironic bmc password PLANTED-bmc-pw-4411 rejected\nNov 23 ok\n",
                ),
                (
                    "log-bundle/rendered-assets/openshift/99_kubeadmin-password-secret.yaml",
                    b"apiVersion: v1\nkind: Secret\ndata:\n  kubeadmin: UExBTlRFRC1rdWJlYWRtaW4=\n",
                ),
                (
                    "log-bundle/rendered-assets/openshift/worker-user-data.json",
                    br#"{"apiVersion":"v1","kind":"Secret","data":{"userData":"UExBTlRFRC1rdWJlYWRtaW4="}}"#,
                ),
                (
                    "log-bundle/rendered-assets/auth/kubeconfig-loopback",
                    b"users:\n- user:\n    client-key-data: PLANTED-client-key\n",
                ),
                (
                    "log-bundle/bootstrap/containers/release-image.inspect",
                    br#"{"auths":{"quay.io":{"auth":"PLANTED-pull-auth-9"}}}"#,
                ),
                (
                    "log-bundle/bootstrap/etc/ssh/ssh_host_ed25519",
                    b"-----BEGIN OPENSSH PRIVATE KEY-----\nPLANTED-private-key-body\n-----END OPENSSH PRIVATE KEY-----\n",
                ),
                ("log-bundle/bootstrap/core.bin", b"\xff\xfe\x00PLANTED-bmc-pw-4411"),
            ],
        );
        let mut r = Redactor::default();
        r.add("PLANTED-bmc-pw-4411");
        let out = redact_bundle(&p, &r).unwrap();
        for (path, bytes) in &out.entries {
            let text = String::from_utf8_lossy(bytes);
            for s in planted {
                assert!(!text.contains(s), "{s} in {path}: {text}");
            }
        }
        let kept: Vec<&str> = out.entries.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            kept,
            [
                "log-bundle/bootstrap/journals/bootkube.log",
                "log-bundle/bootstrap/containers/release-image.inspect",
                "log-bundle/bootstrap/etc/ssh/ssh_host_ed25519",
            ]
        );
        assert!(String::from_utf8_lossy(&out.entries[0].1).contains("Nov 23 ok"));
        let why = out.left_out.join("\n");
        for (file, reason) in [
            ("99_kubeadmin-password-secret.yaml", "named like a key"),
            ("worker-user-data.json", "a Kubernetes Secret"),
            ("kubeconfig-loopback", "a kubeconfig"),
            ("core.bin", "not text"),
        ] {
            assert!(
                why.lines().any(|l| l.contains(file) && l.contains(reason)),
                "{file}: {why}"
            );
        }
    }

    #[test]
    fn an_entry_outside_the_bundle_refuses_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        // tar::Builder refuses `..` itself; write the raw name into the header.
        let p = dir.path().join("evil.tar.gz");
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&p).unwrap(),
            flate2::Compression::fast(),
        );
        let mut b = tar::Builder::new(gz);
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..12].copy_from_slice(b"../etc/x.log");
        h.set_size(2);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append(&h, &b"hi"[..]).unwrap();
        b.into_inner().unwrap().finish().unwrap();
        let e = redact_bundle(&p, &Redactor::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside it"), "{e}");
    }
}
