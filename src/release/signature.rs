//! `sha256sum.txt`'s detached OpenPGP signature, checked with `gpgv` against the
//! one key the cluster file names (`release_key`), in a keyring of its own: the
//! user's GnuPG keyrings are never read or changed.
//!
//! Red Hat signs each OCP client directory's `sha256sum.txt` with its release key
//! (Red Hat's "Securing the deployment of OpenShift Container Platform 4": verify
//! with `gpg --verify sha256sum.txt.sig sha256sum.txt` after importing the key from
//! /etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release or the Product Security page).

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use base64::Engine as _;

/// Names a mirror publishes the detached signature of `sha256sum.txt` under.
pub const SIGNATURE_NAMES: &[&str] = &["sha256sum.txt.gpg", "sha256sum.txt.sig"];

/// The binary packets of an armored OpenPGP block (`gpgv` reads binary keyrings);
/// binary input is returned as is.
pub fn dearmor(key: &[u8]) -> Result<Vec<u8>> {
    let text = match std::str::from_utf8(key) {
        Ok(t) if t.contains("-----BEGIN PGP") => t,
        _ => return Ok(key.to_vec()),
    };
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN PGP"));
    lines.next();
    // Armor headers ("Version: …") end at the first empty line.
    let body: String = lines
        .skip_while(|l| !l.trim().is_empty())
        .skip(1)
        .take_while(|l| !l.starts_with("-----END PGP") && !l.starts_with('='))
        .map(str::trim)
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .context("the key's armor is not valid base64")
}

/// Check that `signature` is a good signature of `data` by `key` (armored or
/// binary). `what` names the data in messages.
pub fn verify_detached(key: &Path, data: &[u8], signature: &[u8], what: &str) -> Result<()> {
    let key_bytes = std::fs::read(key).with_context(|| format!("reading {}", key.display()))?;
    let dir = tempdir()?;
    let keyring = dir.join("release-key.gpg");
    let (sig, signed) = (dir.join("signature"), dir.join("data"));
    std::fs::write(&keyring, dearmor(&key_bytes)?)?;
    std::fs::write(&sig, signature)?;
    std::fs::write(&signed, data)?;
    let out = Command::new("gpgv")
        .arg("--keyring")
        .arg(&keyring)
        .arg(&sig)
        .arg(&signed)
        .env("GNUPGHOME", &dir)
        .output()
        .context("running gpgv (Debian package gpgv)");
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    if !out.status.success() {
        bail!(
            "{what} is not signed by the key in {}: {}",
            key.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn tempdir() -> Result<std::path::PathBuf> {
    let base = std::env::temp_dir();
    for _ in 0..10 {
        let p = base.join(format!(
            "shiftlab-gpgv-{}-{}",
            std::process::id(),
            crate::files::random_secret(8)?
        ));
        match std::fs::create_dir(&p) {
            Ok(()) => {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700))?;
                return Ok(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", p.display())),
        }
    }
    bail!("cannot create a temporary directory in {}", base.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn armor_is_removed_and_binary_kept() {
        let armored = "-----BEGIN PGP PUBLIC KEY BLOCK-----\nVersion: x\n\naGVs\nbG8=\n=abcd\n-----END PGP PUBLIC KEY BLOCK-----\n";
        assert_eq!(dearmor(armored.as_bytes()).unwrap(), b"hello");
        assert_eq!(dearmor(&[0x99, 1, 2]).unwrap(), vec![0x99, 1, 2]);
    }
}
