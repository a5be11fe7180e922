//! `shiftlab serve --install-unit`: a systemd unit for the daemon.

use std::path::Path;

use anyhow::{bail, Context, Result};

pub const UNIT_NAME: &str = "shiftlab-serve.service";

/// The unit's open-file limit (soft and hard).
pub const LIMIT_NOFILE: u64 = 65_536;

/// The unit text. `KillMode=mixed`: serve receives `SIGTERM` and stops its
/// HAProxy processes itself before systemd kills what remains.
/// `LimitNOFILE`: systemd's default soft limit (1,024) is what a connection
/// flood on the artifact port used up; serve keeps a reserve of it for itself
/// (`crate::fdlimit`).
pub fn unit_text(exe: &Path, state_root: &Path) -> String {
    format!(
        "[Unit]\n\
         Description=shiftlab host services (HAProxy load balancers, HTTP artifacts, host DNS)\n\
         Documentation=man:shiftlab-serve(1)\n\
         After=network-online.target libvirtd.service\n\
         Wants=network-online.target\n\
         \n\
         [Service]\n\
         Type=exec\n\
         ExecStart={} --state-dir {} serve\n\
         Restart=on-failure\n\
         RestartSec=2s\n\
         KillMode=mixed\n\
         TimeoutStopSec=20s\n\
         LimitNOFILE={LIMIT_NOFILE}\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n",
        exe.display(),
        state_root.display()
    )
}

/// `install` for this host and this shiftlab: `/run`, `/etc/systemd/system`, the
/// running executable, the state directory made absolute.
pub fn install_for(state: &crate::state::StateDir) -> Result<String> {
    let exe = std::env::current_exe().context("locating the shiftlab executable")?;
    let root = std::path::absolute(&state.root).context("resolving the state directory")?;
    install(
        Path::new("/run"),
        Path::new("/etc/systemd/system"),
        &exe,
        &root,
    )
}

/// Whether systemd is the init system (`sd_booted()`'s test).
pub fn systemd_booted(run: &Path) -> bool {
    run.join("systemd/system").is_dir()
}

/// Write the unit into `unit_dir`, then `systemctl daemon-reload` and
/// `systemctl enable --now`. Refuses, saying what to do instead, where
/// systemd is not PID 1.
pub fn install(run: &Path, unit_dir: &Path, exe: &Path, state_root: &Path) -> Result<String> {
    let text = unit_text(exe, state_root);
    if !systemd_booted(run) {
        bail!(
            "systemd is not the init system here, so no unit was installed: run `{} --state-dir {} serve` \
             under this host's service manager (or in a terminal); it stays in the foreground and logs to stderr",
            exe.display(),
            state_root.display()
        );
    }
    let path = unit_dir.join(UNIT_NAME);
    crate::files::write_atomic(&path, text.as_bytes())?;
    for args in [&["daemon-reload"][..], &["enable", "--now", UNIT_NAME][..]] {
        let out = std::process::Command::new("systemctl")
            .args(args)
            .output()
            .with_context(|| format!("running systemctl {}", args.join(" ")))?;
        if !out.status.success() {
            bail!(
                "systemctl {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(format!(
        "installed {} and started it (systemctl status {UNIT_NAME}; journalctl -u {UNIT_NAME})",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_runs_serve_with_the_state_dir() {
        let t = unit_text(
            Path::new("/usr/bin/shiftlab"),
            Path::new("/var/lib/shiftlab"),
        );
        assert!(t.contains("ExecStart=/usr/bin/shiftlab --state-dir /var/lib/shiftlab serve\n"));
        assert!(t.contains("KillMode=mixed"));
        assert!(t.contains("\nLimitNOFILE=65536\n"));
        assert!(t.contains("WantedBy=multi-user.target"));
    }

    #[test]
    fn without_systemd_it_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let e = install(
            dir.path(),
            &dir.path().join("units"),
            Path::new("/usr/bin/shiftlab"),
            Path::new("/var/lib/shiftlab"),
        )
        .unwrap_err();
        assert!(format!("{e}").contains("systemd is not the init system"));
        assert!(!dir.path().join("units").exists());
    }
}
