//! One HAProxy per cluster, supervised by the daemon: master-worker mode in the
//! foreground (`-W -db`), every configuration validated (`haproxy -c`) before a
//! start or a graceful reload, restarts with backoff, its output in serve's log.
//! The operations on one HAProxy process (validate, reload, the pid file, the
//! stats socket) are the client's (`crate::serve::haproxy`): they also work
//! without a daemon.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

use crate::serve::haproxy::{install_config, reload, stop_by_pid_file, worker_pid, STOP_TIMEOUT};
use crate::state::ClusterDir;

const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A process that ran this long resets the backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(60);
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// What applying a configuration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Unchanged,
    Started,
    Reloaded(Duration),
}

enum Msg {
    Apply(String, oneshot::Sender<Result<Applied>>),
    /// Try a (re)start now instead of waiting out the backoff.
    Kick,
    Stop(oneshot::Sender<()>),
}

/// The supervisor task of one cluster's HAProxy.
pub struct Supervisor {
    tx: mpsc::Sender<Msg>,
    task: tokio::task::JoinHandle<()>,
}

impl Supervisor {
    pub fn spawn(cluster: String, files: ClusterDir, bin: PathBuf) -> Supervisor {
        let (tx, rx) = mpsc::channel(8);
        let task = tokio::spawn(supervise(cluster, files, bin, rx));
        Supervisor { tx, task }
    }

    /// Validate, write and (re)load `text`; starts HAProxy if it is not running.
    pub async fn apply(&self, text: String) -> Result<Applied> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Msg::Apply(text, tx))
            .await
            .map_err(|_| anyhow!("haproxy supervisor ended"))?;
        rx.await.map_err(|_| anyhow!("haproxy supervisor ended"))?
    }

    pub async fn kick(&self) {
        let _ = self.tx.send(Msg::Kick).await;
    }

    /// Stop HAProxy and end the task.
    pub async fn stop(self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Stop(tx)).await.is_ok() {
            let _ = rx.await;
        }
        let _ = self.task.await;
    }
}

struct Running {
    child: Child,
    pid: i32,
    since: Instant,
    tail: Arc<Mutex<VecDeque<String>>>,
}

async fn supervise(cluster: String, files: ClusterDir, bin: PathBuf, mut rx: mpsc::Receiver<Msg>) {
    // An HAProxy left by an earlier serve (killed without a chance to stop it)
    // is replaced: it holds our addresses.
    let f = files.clone();
    let _ = tokio::task::spawn_blocking(move || stop_by_pid_file(&f)).await;

    let mut running: Option<Running> = None;
    // What serve asked for, and what the running HAProxy was loaded with. They
    // differ after a failure (out of descriptors, a reload that timed out):
    // the configuration is applied again with backoff, without waiting for a
    // new plan.
    let mut desired: Option<String> = None;
    let mut current: Option<String> = None;
    let mut backoff = BACKOFF_MIN;
    let mut next_start: Option<tokio::time::Instant> = None;
    loop {
        if let Some(text) = desired.clone() {
            if next_start.is_some_and(|t| t <= tokio::time::Instant::now()) {
                next_start = None;
                match apply(&cluster, &files, &bin, &text, &mut current, &mut running).await {
                    Ok(Applied::Unchanged) => {}
                    Ok(a) => tracing::info!(%cluster, applied = ?a, "haproxy back"),
                    Err(e) => {
                        tracing::warn!(%cluster, error = %format!("{e:#}"), retry_in = ?backoff, "haproxy did not start");
                        next_start = Some(tokio::time::Instant::now() + backoff);
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                }
            }
        }
        let wake =
            next_start.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            status = async { running.as_mut().map(|r| r.child.wait()).unwrap().await }, if running.is_some() => {
                let r = running.take().unwrap_or_else(|| unreachable!());
                if r.since.elapsed() >= HEALTHY_RUN {
                    backoff = BACKOFF_MIN;
                }
                let last = r.tail.lock().map(|t| t.back().cloned().unwrap_or_default()).unwrap_or_default();
                tracing::warn!(%cluster, pid = r.pid, status = ?status.ok(), last_message = %last, restart_in = ?backoff, "haproxy exited");
                let _ = std::fs::remove_file(files.haproxy_pid());
                next_start = Some(tokio::time::Instant::now() + backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
            msg = rx.recv() => match msg {
                Some(Msg::Apply(text, reply)) => {
                    desired = Some(text.clone());
                    let result = apply(&cluster, &files, &bin, &text, &mut current, &mut running).await;
                    if result.is_err() {
                        next_start = Some(tokio::time::Instant::now() + backoff);
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    } else {
                        next_start = None;
                        backoff = BACKOFF_MIN;
                    }
                    let _ = reply.send(result);
                }
                Some(Msg::Kick) => {
                    if desired.is_some() && (running.is_none() || current != desired) {
                        backoff = BACKOFF_MIN;
                        next_start = Some(tokio::time::Instant::now());
                    }
                }
                Some(Msg::Stop(reply)) => {
                    if let Some(r) = running.take() {
                        stop_child(&cluster, r).await;
                    }
                    let _ = std::fs::remove_file(files.haproxy_pid());
                    let _ = reply.send(());
                    return;
                }
                None => {
                    if let Some(r) = running.take() {
                        stop_child(&cluster, r).await;
                    }
                    let _ = std::fs::remove_file(files.haproxy_pid());
                    return;
                }
            },
            // Only while a retry is due (set only with a configuration): a
            // deadline left over would fire at once on every turn (a busy loop).
            _ = tokio::time::sleep_until(wake), if next_start.is_some() && desired.is_some() => {}
        }
    }
}

async fn apply(
    cluster: &str,
    files: &ClusterDir,
    bin: &Path,
    text: &str,
    current: &mut Option<String>,
    running: &mut Option<Running>,
) -> Result<Applied> {
    if current.as_deref() == Some(text) && running.is_some() {
        return Ok(Applied::Unchanged);
    }
    let (b, f, t) = (bin.to_path_buf(), files.clone(), text.to_string());
    tokio::task::spawn_blocking(move || install_config(&b, &f, &t)).await??;
    *current = Some(text.to_string());
    match running {
        Some(r) => {
            let (pid, sock) = (r.pid, files.haproxy_sock());
            let reloaded = tokio::task::spawn_blocking(move || reload(pid, &sock))
                .await
                .map_err(|e| anyhow!("haproxy reload task: {e}"))
                .and_then(|r| r);
            let took = match reloaded {
                Ok(t) => t,
                Err(e) => {
                    // Not known to be loaded: the retry reloads again.
                    *current = None;
                    return Err(e);
                }
            };
            tracing::info!(%cluster, pid, reload_ms = took.as_secs_f64() * 1000.0, "haproxy reloaded");
            Ok(Applied::Reloaded(took))
        }
        None => {
            *running = Some(start(cluster, files, bin).await?);
            Ok(Applied::Started)
        }
    }
}

/// Start HAProxy on the installed configuration and wait until a worker
/// answers on the stats socket (or the process exits, e.g. a bind failure).
async fn start(cluster: &str, files: &ClusterDir, bin: &Path) -> Result<Running> {
    let cfg = files.haproxy_cfg();
    let mut cmd = Command::new(bin);
    cmd.args(["-W", "-db", "-f"])
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: prctl is async-signal-safe; HAProxy gets SIGTERM if serve dies
    // without stopping it.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let pid = child.id().map(|p| p as i32).unwrap_or(0);
    crate::files::write_atomic(&files.haproxy_pid(), format!("{pid}\n").as_bytes())?;
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    for (name, stream) in [
        (
            "stdout",
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ),
        (
            "stderr",
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ),
    ] {
        let Some(stream) = stream else { continue };
        let (cluster, tail) = (cluster.to_string(), tail.clone());
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(%cluster, stream = name, "haproxy: {line}");
                if let Ok(mut t) = tail.lock() {
                    if t.len() == 20 {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            }
        });
    }
    let sock = files.haproxy_sock();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().context("waiting for haproxy")? {
            let _ = std::fs::remove_file(files.haproxy_pid());
            // Give the log readers a moment to collect the reason.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let why = tail
                .lock()
                .map(|t| t.iter().cloned().collect::<Vec<_>>().join("; "))
                .unwrap_or_default();
            bail!("haproxy exited at start ({status}): {why}");
        }
        let s = sock.clone();
        if tokio::task::spawn_blocking(move || worker_pid(&s))
            .await
            .ok()
            .flatten()
            .is_some()
        {
            break;
        }
        if started.elapsed() > READY_TIMEOUT {
            let _ = child.start_kill();
            let _ = child.wait().await;
            let _ = std::fs::remove_file(files.haproxy_pid());
            bail!(
                "haproxy did not answer on {} within {READY_TIMEOUT:?}",
                sock.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::info!(%cluster, pid, start_ms = started.elapsed().as_secs_f64() * 1000.0, "haproxy running");
    Ok(Running {
        child,
        pid,
        since: Instant::now(),
        tail,
    })
}

async fn stop_child(cluster: &str, mut r: Running) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(r.pid, libc::SIGTERM) };
    if tokio::time::timeout(STOP_TIMEOUT, r.child.wait())
        .await
        .is_err()
    {
        let _ = r.child.start_kill();
        let _ = r.child.wait().await;
    }
    tracing::info!(%cluster, pid = r.pid, "haproxy stopped");
}
