//! The cluster's NFS export (`storage: nfs`): serve runs one `ganesha.nfsd` per
//! cluster in the foreground as its child, with the configuration
//! `host::nfs::render_config` gives; a changed configuration restarts it, one
//! that exited is started again at the next reconcile (every scan), and it
//! stops with the cluster (forget, destroy) or with serve.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::process::Child;

use crate::host::nfs::{self, ServerFiles};
use crate::plan::Plan;
use crate::state::{ClusterDir, ClusterName, StateDir};

/// How long a start waits for the server to say it serves (it exits at once
/// when its address is not on the host yet).
const READY_TIMEOUT: Duration = Duration::from_secs(10);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// One running server.
pub struct Server {
    child: Child,
    config: String,
}

impl Server {
    /// Stop it: SIGTERM, then SIGKILL after a grace period.
    pub async fn stop(mut self, files: &ClusterDir) {
        if let Some(pid) = self.child.id() {
            // SAFETY: signalling our own child, not yet reaped.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        if tokio::time::timeout(STOP_TIMEOUT, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        let _ = std::fs::remove_file(ServerFiles::of(files).pid());
        tracing::info!(cluster = %files.name(), "nfs server stopped");
    }
}

/// Converge the cluster's server on its plan: `current` is what runs.
pub async fn ensure(
    state: &StateDir,
    files: &ClusterDir,
    plan: &Plan,
    current: &mut Option<Server>,
) -> Result<()> {
    let Some(export) = plan.storage.as_ref().and_then(|s| s.nfs.as_ref()) else {
        if let Some(s) = current.take() {
            s.stop(files).await;
        }
        return Ok(());
    };
    let name = ClusterName::parse(files.name())?;
    let data = nfs::ensure_data(state, &name)?;
    let sf = ServerFiles::of(files);
    let config = nfs::render_config(export, &data, &sf)?;
    if let Some(s) = current.as_mut() {
        match s.child.try_wait() {
            Ok(None) if s.config == config => return Ok(()),
            Ok(None) => {}
            Ok(Some(status)) => {
                tracing::warn!(cluster = %name, ?status, last = %last_line(&sf), "nfs server exited; starting it again")
            }
            Err(e) => tracing::warn!(cluster = %name, error = %e, "nfs server"),
        }
        if let Some(s) = current.take() {
            s.stop(files).await;
        }
    }
    // One left by a serve that was killed holds the address.
    let f = files.clone();
    tokio::task::spawn_blocking(move || nfs::stop_by_pid_file(&f)).await??;
    let server = start(files, &sf, config).await?;
    let listening = crate::host::sockets::listening_on(nfs::PORT);
    if let Some(problem) = nfs::bind_problem(&listening, export.server) {
        server.stop(files).await;
        bail!("{problem}");
    }
    *current = Some(server);
    tracing::info!(cluster = %name, server = %export.server, path = %export.path, clients = %export.clients, "nfs export served");
    Ok(())
}

async fn start(files: &ClusterDir, sf: &ServerFiles, config: String) -> Result<Server> {
    let bin = nfs::installed().with_context(|| {
        format!(
            "{} (and its VFS backend) not installed: sudo apt-get install {}",
            nfs::SERVER,
            nfs::PACKAGES
        )
    })?;
    std::fs::create_dir_all(sf.recovery())
        .with_context(|| format!("creating {}", sf.recovery().display()))?;
    crate::files::write_atomic(&sf.config(), config.as_bytes())?;
    // Each start's log is its own: readiness is read from it.
    let _ = std::fs::remove_file(sf.log());
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("-F")
        .arg("-f")
        .arg(sf.config())
        .arg("-L")
        .arg(sf.log())
        .arg("-p")
        .arg(sf.pid())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Its own group: a ^C to a serve in a terminal goes to serve, which stops it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = tokio::process::Command::from(cmd)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("{} exited ({status}): {}", nfs::SERVER, last_line(sf));
        }
        if std::fs::read_to_string(sf.log()).is_ok_and(|l| l.contains("NFS SERVER INITIALIZED")) {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(cluster = %files.name(), "nfs server not ready yet (still starting)");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Server { child, config })
}

/// Why the server ended, from its log.
fn last_line(sf: &ServerFiles) -> String {
    let log = std::fs::read_to_string(sf.log()).unwrap_or_default();
    nfs::why_exited(&log).unwrap_or_else(|| format!("see {}", sf.log().display()))
}
