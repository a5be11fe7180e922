//! Pure parsers: `release.txt`, `sha256sum.txt`, CoreOS stream metadata, and the
//! mapping from a requested version to a mirror directory.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use crate::spec::{Distribution, Version};

/// The fields of a client mirror's `release.txt` that shiftlab uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseTxt {
    /// `Name:` (the release name, normally the version).
    pub name: String,
    /// `Pull From:`: the release image pull spec (by digest on the real mirrors).
    pub pull_from: String,
    /// The indented `Version:` under `Release Metadata:` (falls back to `Name:`).
    pub version: String,
}

/// Parse `release.txt` as written by `oc adm release info` on the client mirrors.
pub fn parse_release_txt(text: &str) -> Result<ReleaseTxt> {
    let mut name = None;
    let mut pull_from = None;
    let mut version = None;
    let mut in_metadata = false;
    for line in text.lines() {
        let indented = line.starts_with(' ') || line.starts_with('\t');
        let trimmed = line.trim();
        if !indented && !trimmed.is_empty() {
            in_metadata = trimmed == "Release Metadata:";
        }
        if !indented {
            if let Some(v) = trimmed.strip_prefix("Name:") {
                name.get_or_insert_with(|| v.trim().to_string());
            } else if let Some(v) = trimmed.strip_prefix("Pull From:") {
                pull_from.get_or_insert_with(|| v.trim().to_string());
            }
        } else if in_metadata {
            if let Some(v) = trimmed.strip_prefix("Version:") {
                version.get_or_insert_with(|| v.trim().to_string());
            }
        }
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| anyhow!("release.txt has no `Name:` line"))?;
    let pull_from = pull_from
        .filter(|p| !p.is_empty())
        .ok_or_else(|| anyhow!("release.txt has no `Pull From:` line"))?;
    let version = version
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| name.clone());
    Ok(ReleaseTxt {
        name,
        pull_from,
        version,
    })
}

/// Parse `sha256sum.txt` (`<hex>  <file>` or `<hex> *<file>` per line) into file → digest.
pub fn parse_sha256sum(text: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (digest, file) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| anyhow!("sha256sum.txt line {}: expected `<sha256>  <file>`", i + 1))?;
        let digest =
            check_sha256(digest).with_context(|| format!("sha256sum.txt line {}", i + 1))?;
        let file = file.trim_start();
        let file = file.strip_prefix('*').unwrap_or(file);
        let file = file.strip_prefix("./").unwrap_or(file);
        if file.is_empty() {
            bail!("sha256sum.txt line {}: no file name", i + 1);
        }
        out.insert(file.to_string(), digest);
    }
    Ok(out)
}

/// A sha256 digest as 64 lowercase hex digits (an optional `sha256:` prefix is dropped).
pub fn check_sha256(s: &str) -> Result<String> {
    let s = s.trim();
    let s = s.strip_prefix("sha256:").unwrap_or(s);
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("`{s}` is not a sha256 digest (64 hex digits)");
    }
    Ok(s.to_ascii_lowercase())
}

/// The directory a version lives in: on the OCP client mirror
/// (`4.18.7`, `stable-4.18`, `candidate-4.19`, `latest`) or among the OKD release
/// downloads (exact tags only).
pub fn version_dir(dist: Distribution, version: &Version) -> Result<String> {
    match (dist, version) {
        (_, Version::Exact { version }) => {
            if version.is_empty() || version.contains('/') || version.starts_with('.') {
                bail!("`{version}` is not a release version");
            }
            Ok(version.clone())
        }
        (Distribution::Ocp, Version::Minor { minor }) => Ok(format!("stable-4.{minor}")),
        (Distribution::Ocp, v @ Version::Channel { .. }) => Ok(v.to_string()),
        (Distribution::Okd, v) => bail!(
            "OKD needs an exact version such as `4.17.0-okd-scos.0`, not `{v}`: OKD releases \
             are published per tag and have no channel or minor-version directories"
        ),
    }
}

/// Which CoreOS artifact to take from the stream metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreosKind {
    /// `qemu` `qcow2.gz` (else `qcow2.xz`): the disk image for UPI/IPI nodes.
    Qemu,
    /// `metal` `iso`: the live ISO (`sno`, `agent`).
    LiveIso,
}

impl std::fmt::Display for CoreosKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CoreosKind::Qemu => "qemu qcow2",
            CoreosKind::LiveIso => "metal live iso",
        })
    }
}

/// How a stream artifact is compressed (the suffix of its format name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    Xz,
}

/// The `qemu` formats shiftlab can import, best first: gzip decompresses several
/// times faster than xz, so `qcow2.gz` wins where the stream has both. Fedora
/// CoreOS streams (OKD before 4.19) have only `qcow2.xz`.
pub const QEMU_FORMATS: [(&str, Compression); 2] = [
    ("qcow2.gz", Compression::Gzip),
    ("qcow2.xz", Compression::Xz),
];

/// The `qemu` format to take among those the stream offers, if any.
pub fn choose_qemu_format(offered: &[&str]) -> Option<(&'static str, Compression)> {
    QEMU_FORMATS
        .into_iter()
        .find(|(name, _)| offered.contains(name))
}

/// One disk artifact of the stream metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamArtifact {
    /// The format taken (`qcow2.gz`, `qcow2.xz`, `iso`).
    pub format: String,
    /// How the file is compressed (`None`: used as downloaded).
    pub compression: Option<Compression>,
    pub location: String,
    /// Digest of the file as downloaded (the compressed file for `qcow2.*`).
    pub sha256: String,
    /// `uncompressed-sha256` (present for compressed formats).
    pub uncompressed_sha256: Option<String>,
}

/// The architecture shiftlab deploys (the host is x86_64 KVM).
pub const STREAM_ARCH: &str = "x86_64";

/// Pick an artifact out of `openshift-install coreos print-stream-json` output.
pub fn parse_stream(json: &str, kind: CoreosKind) -> Result<StreamArtifact> {
    let root: Value = serde_json::from_str(json).context("stream metadata is not JSON")?;
    let platform = match kind {
        CoreosKind::Qemu => "qemu",
        CoreosKind::LiveIso => "metal",
    };
    let formats_path = format!(".architectures.{STREAM_ARCH}.artifacts.{platform}.formats");
    let formats = root
        .get("architectures")
        .and_then(|a| a.get(STREAM_ARCH))
        .and_then(|a| a.get("artifacts"))
        .and_then(|a| a.get(platform))
        .and_then(|a| a.get("formats"))
        .and_then(Value::as_object);
    // Only formats with a disk count: a format without one offers nothing to import.
    let offered: Vec<&str> = formats
        .into_iter()
        .flatten()
        .filter(|(_, f)| f.get("disk").is_some())
        .map(|(name, _)| name.as_str())
        .collect();
    let (format, compression) = match kind {
        CoreosKind::Qemu => match choose_qemu_format(&offered) {
            Some((name, c)) => (name, Some(c)),
            None => bail!(
                "stream metadata has no {formats_path}[\"qcow2.gz\"].disk nor \
                 [\"qcow2.xz\"].disk (it offers: {})",
                if offered.is_empty() {
                    "nothing".to_string()
                } else {
                    offered.join(", ")
                }
            ),
        },
        CoreosKind::LiveIso => ("iso", None),
    };
    let path = format!("{formats_path}[\"{format}\"].disk");
    let disk = formats
        .and_then(|f| f.get(format))
        .and_then(|f| f.get("disk"))
        .ok_or_else(|| anyhow!("stream metadata has no {path}"))?;
    let field = |name: &str| -> Result<Option<String>> {
        match disk.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => bail!("stream metadata: {path}.{name} is not a string"),
        }
    };
    let location = field("location")?
        .filter(|l| !l.is_empty())
        .ok_or_else(|| anyhow!("stream metadata has no {path}.location"))?;
    let sha256 = field("sha256")?.ok_or_else(|| anyhow!("stream metadata has no {path}.sha256"))?;
    let sha256 = check_sha256(&sha256).with_context(|| format!("{path}.sha256"))?;
    let uncompressed_sha256 = field("uncompressed-sha256")?
        .map(|s| check_sha256(&s).with_context(|| format!("{path}.uncompressed-sha256")))
        .transpose()?;
    if kind == CoreosKind::Qemu && uncompressed_sha256.is_none() {
        bail!("stream metadata has no {path}.uncompressed-sha256");
    }
    Ok(StreamArtifact {
        format: format.to_string(),
        compression,
        location,
        sha256,
        uncompressed_sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Channel;

    const REAL: &str = "Client tools for OpenShift
--------------------------

These archives contain the client tooling for [OpenShift](https://docs.openshift.com).

---

Name:           4.18.7
Digest:         sha256:1111111111111111111111111111111111111111111111111111111111111111
Created:        2025-03-26T12:00:00Z
OS/Arch:        linux/amd64
Manifests:      742
Metadata files: 1

Pull From: quay.io/openshift-release-dev/ocp-release@sha256:1111111111111111111111111111111111111111111111111111111111111111

Release Metadata:
  Version:  4.18.7
  Upgrades: 4.17.16, 4.18.1
  Metadata:
    url: https://access.redhat.com/errata/RHSA-2025:0000

Component Versions:
  kubernetes 1.31.6
  machine-os 418.94.202503121207-0 Red Hat Enterprise Linux CoreOS
";

    #[test]
    fn release_txt_from_the_mirror() {
        let r = parse_release_txt(REAL).unwrap();
        assert_eq!(r.name, "4.18.7");
        assert_eq!(r.version, "4.18.7");
        assert!(r
            .pull_from
            .starts_with("quay.io/openshift-release-dev/ocp-release@sha256:1111"));
    }

    #[test]
    fn release_txt_version_comes_from_release_metadata() {
        let t = "Name: x\nVersion: wrong\nPull From: q/r:1\n\nRelease Metadata:\n  Version:  4.17.0-okd-scos.0\n\nComponent Versions:\n  Version: nope\n";
        let r = parse_release_txt(t).unwrap();
        assert_eq!(r.version, "4.17.0-okd-scos.0");
        assert_eq!(r.name, "x");
        let r = parse_release_txt("Name: 4.16.1\nPull From: q/r:1\n").unwrap();
        assert_eq!(r.version, "4.16.1");
    }

    #[test]
    fn release_txt_errors() {
        let e = parse_release_txt("Pull From: q\n").unwrap_err().to_string();
        assert!(e.contains("Name:"), "{e}");
        let e = parse_release_txt("Name: 4.1.1\n").unwrap_err().to_string();
        assert!(e.contains("Pull From:"), "{e}");
    }

    #[test]
    fn sha256sum() {
        let a = "a".repeat(64);
        let b = "B".repeat(64);
        let t = format!("{a}  openshift-install-linux-4.18.7.tar.gz\n\n{b} *openshift-client-linux-4.18.7.tar.gz\n");
        let m = parse_sha256sum(&t).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m["openshift-install-linux-4.18.7.tar.gz"], a);
        assert_eq!(m["openshift-client-linux-4.18.7.tar.gz"], "b".repeat(64));
        let e = parse_sha256sum("abc  file\n").unwrap_err();
        assert!(format!("{e:#}").contains("line 1"), "{e:#}");
        assert!(parse_sha256sum(&format!("{a}\n")).is_err());
    }

    #[test]
    fn version_dirs() {
        let ocp = Distribution::Ocp;
        let exact = Version::Exact {
            version: "4.18.7".into(),
        };
        assert_eq!(version_dir(ocp, &exact).unwrap(), "4.18.7");
        assert_eq!(
            version_dir(ocp, &Version::Minor { minor: 18 }).unwrap(),
            "stable-4.18"
        );
        let ch = |channel, minor| Version::Channel { channel, minor };
        assert_eq!(
            version_dir(ocp, &ch(Channel::Stable, Some(18))).unwrap(),
            "stable-4.18"
        );
        assert_eq!(
            version_dir(ocp, &ch(Channel::Candidate, Some(19))).unwrap(),
            "candidate-4.19"
        );
        assert_eq!(
            version_dir(ocp, &ch(Channel::Fast, Some(18))).unwrap(),
            "fast-4.18"
        );
        assert_eq!(
            version_dir(ocp, &ch(Channel::Latest, None)).unwrap(),
            "latest"
        );
        assert_eq!(
            version_dir(ocp, &ch(Channel::Stable, None)).unwrap(),
            "stable"
        );
        assert_eq!(
            version_dir(ocp, &ch(Channel::Candidate, None)).unwrap(),
            "candidate"
        );
        assert_eq!(version_dir(ocp, &ch(Channel::Fast, None)).unwrap(), "fast");
        let okd = Distribution::Okd;
        let tag = Version::Exact {
            version: "4.17.0-okd-scos.0".into(),
        };
        assert_eq!(version_dir(okd, &tag).unwrap(), "4.17.0-okd-scos.0");
        for v in [
            Version::Minor { minor: 17 },
            ch(Channel::Stable, Some(17)),
            ch(Channel::Latest, None),
        ] {
            let e = version_dir(okd, &v).unwrap_err().to_string();
            assert!(
                e.contains("OKD needs an exact version") && e.contains("4.17.0-okd-scos.0"),
                "{e}"
            );
        }
        assert!(version_dir(
            ocp,
            &Version::Exact {
                version: "../x".into()
            }
        )
        .is_err());
    }

    fn stream(qemu_disk: &str) -> String {
        format!(
            r#"{{"stream":"rhcos-4.18","architectures":{{"x86_64":{{"artifacts":{{
              "qemu":{{"release":"418.94","formats":{{"qcow2.gz":{{"disk":{qemu_disk}}}}}}},
              "metal":{{"release":"418.94","formats":{{
                 "iso":{{"disk":{{"location":"https://example.invalid/live.iso","sha256":"{c}"}}}},
                 "raw.gz":{{"disk":{{"location":"https://example.invalid/metal.raw.gz","sha256":"{c}"}}}}}}}}}}}}}}}}"#,
            c = "c".repeat(64)
        )
    }

    #[test]
    fn stream_metadata() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let json = stream(&format!(
            r#"{{"location":"https://example.invalid/rhcos-qemu.x86_64.qcow2.gz","sha256":"{a}","uncompressed-sha256":"{b}"}}"#
        ));
        let q = parse_stream(&json, CoreosKind::Qemu).unwrap();
        assert_eq!(
            q.location,
            "https://example.invalid/rhcos-qemu.x86_64.qcow2.gz"
        );
        assert_eq!(q.sha256, a);
        assert_eq!(q.uncompressed_sha256.as_deref(), Some(b.as_str()));
        let iso = parse_stream(&json, CoreosKind::LiveIso).unwrap();
        assert_eq!(iso.location, "https://example.invalid/live.iso");
        assert_eq!(iso.sha256, "c".repeat(64));
        assert_eq!(iso.uncompressed_sha256, None);

        let no_uncompressed = stream(&format!(r#"{{"location":"x","sha256":"{a}"}}"#));
        let e = parse_stream(&no_uncompressed, CoreosKind::Qemu)
            .unwrap_err()
            .to_string();
        assert!(e.contains("uncompressed-sha256"), "{e}");
        let e = parse_stream(r#"{"architectures":{"aarch64":{}}}"#, CoreosKind::Qemu)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(".architectures.x86_64.artifacts.qemu.formats[\"qcow2.gz\"].disk"),
            "{e}"
        );
        assert!(parse_stream("not json", CoreosKind::LiveIso).is_err());
    }

    #[test]
    fn qemu_format_choice() {
        use Compression::{Gzip, Xz};
        assert_eq!(choose_qemu_format(&["qcow2.gz"]), Some(("qcow2.gz", Gzip)));
        assert_eq!(choose_qemu_format(&["qcow2.xz"]), Some(("qcow2.xz", Xz)));
        // Both: gzip, whatever their order.
        assert_eq!(
            choose_qemu_format(&["qcow2.xz", "qcow2.gz"]),
            Some(("qcow2.gz", Gzip))
        );
        assert_eq!(choose_qemu_format(&["raw.xz", "vmdk.xz"]), None);
        assert_eq!(choose_qemu_format(&[]), None);
    }

    /// What OKD's 4.18 installer prints (`TAGS=scos`): Fedora CoreOS 39 `stable`,
    /// `qemu` with only `qcow2.xz` (its other fields as Fedora's stream has them).
    fn fcos39(qemu_formats: &str) -> String {
        format!(
            r#"{{"stream":"stable","architectures":{{"x86_64":{{"artifacts":{{
              "qemu":{{"release":"39.20231101.3.0","formats":{{{qemu_formats}}}}},
              "metal":{{"release":"39.20231101.3.0","formats":{{
                 "iso":{{"disk":{{"location":"https://example.invalid/fedora-coreos-live.x86_64.iso","sha256":"{c}"}}}}}}}}}}}}}}}}"#,
            c = "c".repeat(64)
        )
    }

    #[test]
    fn stream_metadata_with_only_qcow2_xz() {
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let xz = format!(
            r#""qcow2.xz":{{"disk":{{"location":"https://example.invalid/fedora-coreos-39.20231101.3.0-qemu.x86_64.qcow2.xz","signature":"https://example.invalid/x.sig","sha256":"{a}","uncompressed-sha256":"{b}"}}}}"#
        );
        let q = parse_stream(&fcos39(&xz), CoreosKind::Qemu).unwrap();
        assert_eq!(q.format, "qcow2.xz");
        assert_eq!(q.compression, Some(Compression::Xz));
        assert!(q.location.ends_with("-qemu.x86_64.qcow2.xz"), "{q:?}");
        assert_eq!(
            (q.sha256.as_str(), q.uncompressed_sha256.as_deref()),
            (a.as_str(), Some(b.as_str()))
        );
        let iso = parse_stream(&fcos39(&xz), CoreosKind::LiveIso).unwrap();
        assert_eq!((iso.format.as_str(), iso.compression), ("iso", None));

        // Both: the gz, its own digests.
        let gz = format!(
            r#""qcow2.gz":{{"disk":{{"location":"https://example.invalid/q.qcow2.gz","sha256":"{b}","uncompressed-sha256":"{a}"}}}}"#
        );
        let q = parse_stream(&fcos39(&format!("{xz},{gz}")), CoreosKind::Qemu).unwrap();
        assert_eq!(
            (q.format.as_str(), q.compression),
            ("qcow2.gz", Some(Compression::Gzip))
        );
        assert_eq!(q.sha256, b);

        // The xz's uncompressed digest is needed as the gz's is.
        let e = parse_stream(
            &fcos39(&format!(
                r#""qcow2.xz":{{"disk":{{"location":"x","sha256":"{a}"}}}}"#
            )),
            CoreosKind::Qemu,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(r#"formats["qcow2.xz"].disk.uncompressed-sha256"#),
            "{e}"
        );

        // Neither: the error says what the stream offers.
        let e = parse_stream(
            &fcos39(&format!(
                r#""raw.xz":{{"disk":{{"location":"x","sha256":"{a}"}}}}"#
            )),
            CoreosKind::Qemu,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(r#"formats["qcow2.gz"].disk nor ["qcow2.xz"].disk (it offers: raw.xz)"#),
            "{e}"
        );
    }
}
