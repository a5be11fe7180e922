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
//! `.openshift_install.log` that repeats the line, and its state file
//! `.openshift_install_state.json`, which holds the kubeadmin password and every
//! CA's private key) are made 0600 after every run, failed or not
//! ([`protect_assets`]).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};

/// Make the installer's secret-bearing files 0600 (it writes them 0640:
/// pkg/asset/asset.go, `PersistToFile`; the state file too, pkg/asset/store).
pub fn protect_assets(assets: &Path) -> Result<()> {
    let mut files = vec![
        assets.join(".openshift_install.log"),
        assets.join(".openshift_install_state.json"),
    ];
    if let Ok(rd) = std::fs::read_dir(assets.join("auth")) {
        files.extend(rd.flatten().map(|e| e.path()));
    }
    for f in files {
        if f.is_file() {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("making {} private", f.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_files_become_private() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("auth")).unwrap();
        for f in [
            "auth/kubeadmin-password",
            "auth/kubeconfig",
            ".openshift_install.log",
            ".openshift_install_state.json",
        ] {
            let p = d.path().join(f);
            std::fs::write(&p, "x").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        protect_assets(d.path()).unwrap();
        for f in [
            "auth/kubeadmin-password",
            "auth/kubeconfig",
            ".openshift_install.log",
            ".openshift_install_state.json",
        ] {
            let m = std::fs::metadata(d.path().join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(m & 0o777, 0o600, "{f}");
        }
    }
}
