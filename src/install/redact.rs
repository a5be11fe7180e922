//! The installer's output, made safe for shiftlab's own log and progress line.
//! `openshift-install wait-for install-complete` logs the kubeadmin password in
//! clear (openshift/installer cmd/openshift-install/command/waitfor.go,
//! `logComplete`: "Login to the console with user: \"kubeadmin\", and password:
//! \"…\""); shiftlab keeps the installer's output in the cluster's
//! `openshift-install.log` and shows its last line while it runs, so both go
//! through the one redactor ([`crate::redact::Redactor`], made from the
//! cluster's files): the password file's contents, wherever they appear, and
//! the value of that log line by its shape even before the file is read (its
//! test is there). The files themselves
//! (`auth/kubeadmin-password`, `auth/kubeconfig`, the installer's own
//! `.openshift_install.log` that repeats the line, its state file
//! `.openshift_install_state.json`, which holds the kubeadmin password and every
//! CA's private key, `bootstrap.ign` and the agent ISO, which embed the pull
//! secret, and the manifests holding the pull secret, the kubeadmin password's
//! hash and the BMC credentials) are made 0600 after every run, failed or not
//! ([`protect_assets`]): every file in the asset directory, since the installer
//! adds secret-bearing files with every release.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};

/// Make every file the installer leaves in `assets` owner-only (0600, owner
/// execute kept): it writes them 0640 (pkg/asset/asset.go, `PersistToFile`;
/// the state file too, pkg/asset/store), and they hold the pull secret, CA
/// keys and the kubeadmin password. Links are not followed; nothing but
/// shiftlab and the installer reads these files (nodes get their Ignition and
/// ISO through pool volumes and shiftlab's HTTP server).
pub fn protect_assets(assets: &Path) -> Result<()> {
    protect_tree(assets, 0)
}

/// Far deeper than the installer's layout (`openshift/`, `auth/`,
/// `cluster-manifests/`), and bounded.
const MAX_DEPTH: usize = 8;

fn protect_tree(dir: &Path, depth: usize) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() && depth < MAX_DEPTH {
            protect_tree(&path, depth + 1)?;
        } else if kind.is_file() {
            protect_file(&path).with_context(|| format!("making {} private", path.display()))?;
        }
    }
    Ok(())
}

/// chmod through the file's own descriptor, opened without following a link,
/// so a file swapped for a link meanwhile changes nothing elsewhere.
fn protect_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let mode = file.metadata()?.permissions().mode();
    let private = (mode & 0o700) | 0o600;
    if mode & 0o777 != private {
        file.set_permissions(std::fs::Permissions::from_mode(private))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_the_installer_leaves_becomes_private() {
        let d = tempfile::tempdir().unwrap();
        let files = [
            "auth/kubeadmin-password",
            "auth/kubeconfig",
            ".openshift_install.log",
            ".openshift_install_state.json",
            "bootstrap.ign",
            "agent.x86_64.iso",
            "openshift/99_kubeadmin-password-secret.yaml",
            "openshift/99_openshift-cluster-api_host-bmc-secrets-0.yaml",
            "manifests/openshift-config-secret-pull-secret.yaml",
            "cluster-manifests/pull-secret.yaml",
        ];
        for f in files {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "x").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        // A link out of the directory: its target is not the installer's.
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("elsewhere");
        std::fs::write(&target, "y").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("openshift/link.yaml")).unwrap();
        protect_assets(d.path()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        for f in files {
            assert_eq!(mode(&d.path().join(f)), 0o600, "{f}");
        }
        assert_eq!(mode(&target), 0o644);
        // Again: nothing to change, no error; and no asset directory yet is fine.
        protect_assets(d.path()).unwrap();
        protect_assets(&d.path().join("absent")).unwrap();
    }
}
