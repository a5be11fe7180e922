//! Where the installer and images come from: `openshift_install`, `mirror`,
//! `release_key`, and the CoreOS (or stand-in) `image`.

use std::path::{Path, PathBuf};

use super::Env;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;

pub struct Release {
    pub openshift_install: Option<PathBuf>,
    pub mirror: Option<String>,
    pub release_key: Option<PathBuf>,
    /// None in rehearsal is fine: `create infra` builds the stand-in image itself.
    pub image: Option<PathBuf>,
}

pub fn resolve(raw: &RawSpec, env: &Env, d: &mut Diagnostics) -> Release {
    let openshift_install = raw.openshift_install.as_ref().map(|s| {
        let path = env.path(&s.v);
        let executable = std::fs::metadata(&path)
            .map(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
            .unwrap_or(false);
        if !executable {
            d.error(
                &s.field,
                format!(
                    "{} is not an executable file (the openshift-install binary)",
                    path.display()
                ),
            );
        }
        path
    });
    let image = raw.image.as_ref().map(|s| {
        let path = env.path(&s.v);
        if !path.is_file() {
            d.error(
                &s.field,
                format!(
                    "{} is not a file: `image` is the path of a CoreOS qcow2 image (kcli's `image`, a template name, has no meaning here)",
                    path.display()
                ),
            );
        }
        path
    });
    let mirror = raw.mirror.as_ref().map(|s| {
        let v = s.v.trim_end_matches('/').to_string();
        let url = v.starts_with("http://") || v.starts_with("https://");
        if !url && !v.starts_with("file://") && !env.path(&v).is_dir() {
            d.error(
                &s.field,
                format!(
                    "{:?} is neither an http(s) URL nor an existing directory",
                    s.v
                ),
            );
        }
        if v.starts_with("http://") && raw.release_key.is_none() {
            d.warn(
                &s.field,
                format!(
                    "{v} is plain HTTP: the downloads are checked against its sha256sum.txt, which comes over the same plain HTTP, so anyone on the path can replace both; use https://, or set release_key to verify the list's signature"
                ),
            );
        }
        if url || v.starts_with("file://") {
            v
        } else {
            env.path(&v).display().to_string()
        }
    });
    let release_key = raw.release_key.as_ref().map(|s| {
        let path = env.path(&s.v);
        match crate::spec::read_input(&path).map(|_| ()).or_else(|e| {
            // A binary key is not text: read it as bytes, still bounded.
            if e.kind() == std::io::ErrorKind::InvalidData {
                std::fs::read(&path).map(|_| ())
            } else {
                Err(e)
            }
        }) {
            Ok(()) if looks_like_pgp_key(&path) => {}
            Ok(()) => d.error(
                &s.field,
                format!(
                    "{} is not an OpenPGP public key (armored `-----BEGIN PGP PUBLIC KEY BLOCK-----` or binary)",
                    path.display()
                ),
            ),
            Err(e) => d.error(&s.field, format!("cannot read {}: {e}", path.display())),
        }
        path
    });
    Release {
        openshift_install,
        mirror,
        release_key,
        image,
    }
}

/// An armored public key block, or a binary OpenPGP public-key packet (old or new
/// packet format, tag 6).
fn looks_like_pgp_key(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    if bytes.len() > crate::spec::MAX_INPUT_BYTES as usize {
        return false;
    }
    let text = String::from_utf8_lossy(&bytes);
    text.contains("-----BEGIN PGP PUBLIC KEY BLOCK-----")
        || matches!(bytes.first(), Some(b) if *b == 0xc6 || (*b & 0xfc) == 0x98)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_http_mirror_is_warned_about_unless_signatures_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.asc");
        std::fs::write(
            &key,
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n-----END PGP PUBLIC KEY BLOCK-----\n",
        )
        .unwrap();
        let env = Env {
            base_dir: dir.path().into(),
            ..Env::default()
        };
        let load = |extra: &str| {
            crate::spec::from_str(
                &format!(
                    "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n{extra}"
                ),
                "t.yaml",
                &env,
            )
            .unwrap()
            .warnings
        };
        let w = load("mirror: http://mirror.lab/pub\n");
        assert!(
            w.iter()
                .any(|d| d.field == "mirror" && d.message.contains("plain HTTP")),
            "{w:?}"
        );
        assert!(!load("mirror: https://mirror.lab/pub\n")
            .iter()
            .any(|d| d.field == "mirror"));
        assert!(
            !load("mirror: http://mirror.lab/pub\nrelease_key: key.asc\n")
                .iter()
                .any(|d| d.field == "mirror")
        );
        // A release_key that is not a key is an error naming the field.
        std::fs::write(dir.path().join("not-a-key"), "hello").unwrap();
        let e = crate::spec::from_str(
            "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\nrelease_key: not-a-key\n",
            "t.yaml",
            &env,
        )
        .unwrap_err();
        assert!(
            e.errors.iter().any(
                |d| d.field == "release_key" && d.message.contains("not an OpenPGP public key")
            ),
            "{e:?}"
        );
    }
}
