//! One HAProxy per cluster: validation (`haproxy -c`) before every (re)load,
//! master-worker mode in the foreground (`-W -db`), graceful reloads
//! (`SIGUSR2` to the master), restarts with backoff, and the stats socket.

use std::collections::VecDeque;
use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

use crate::state::ClusterDir;

const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A process that ran this long resets the backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(60);
const READY_TIMEOUT: Duration = Duration::from_secs(5);
const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The `haproxy` executable: `SHIFTLAB_HAPROXY`, else `PATH`, else `/usr/sbin`.
pub fn binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("SHIFTLAB_HAPROXY").filter(|p| !p.is_empty()) {
        return Ok(p.into());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into()])
        .map(|d| d.join("haproxy"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow!("haproxy not found: install the haproxy package (apt install haproxy, dnf install haproxy)")
        })
}

/// `haproxy -c`: the file parses and every reference resolves.
pub fn validate(bin: &Path, cfg: &Path) -> Result<()> {
    let out = std::process::Command::new(bin)
        .args(["-c", "-q", "-f"])
        .arg(cfg)
        .output()
        .with_context(|| format!("running {} -c", bin.display()))?;
    if !out.status.success() {
        bail!(
            "haproxy rejects {}: {}{}",
            cfg.display(),
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Write `text` as the cluster's configuration, but only once `haproxy -c`
/// accepts it: a rejected text never replaces a working file.
pub fn install_config(bin: &Path, files: &ClusterDir, text: &str) -> Result<()> {
    let candidate = files.haproxy_cfg_candidate();
    crate::files::write_private(&candidate, text.as_bytes())?;
    if let Err(e) = validate(bin, &candidate) {
        let _ = std::fs::remove_file(&candidate);
        return Err(e);
    }
    crate::files::rename_durably(&candidate, &files.haproxy_cfg())
        .with_context(|| format!("renaming into {}", files.haproxy_cfg().display()))
}

/// Whether `pid` is an HAProxy running our configuration file.
pub fn is_our_haproxy(pid: i32, cfg: &Path) -> bool {
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
    let is_haproxy = args.first().is_some_and(|a| {
        Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(a))
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("haproxy"))
    });
    let cfg = cfg.as_os_str().as_encoded_bytes();
    is_haproxy && args.windows(2).any(|w| w[0] == b"-f" && w[1] == cfg)
}

/// The master's pid from the cluster's pid file, if it is our HAProxy.
pub fn running_pid(files: &ClusterDir) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(files.haproxy_pid())
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (pid > 1 && is_our_haproxy(pid, &files.haproxy_cfg())).then_some(pid)
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let exists = unsafe { libc::kill(pid, 0) == 0 };
    exists
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
}

/// Stop the HAProxy of the pid file (not a child of ours): `SIGTERM`, then
/// `SIGKILL` after a grace period. Verifies it is ours first.
pub fn stop_by_pid_file(files: &ClusterDir) -> Result<bool> {
    let Some(pid) = running_pid(files) else {
        let _ = std::fs::remove_file(files.haproxy_pid());
        return Ok(false);
    };
    tracing::info!(pid, cfg = %files.haproxy_cfg().display(), "stopping haproxy");
    // SAFETY: signalling a process verified to be our HAProxy.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + STOP_TIMEOUT;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(pid) {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let _ = std::fs::remove_file(files.haproxy_pid());
    Ok(true)
}

/// One command on the stats socket; the answer up to end of stream.
pub fn stats_command(sock: &Path, cmd: &str) -> Result<String> {
    let mut s =
        UnixStream::connect(sock).with_context(|| format!("connecting to {}", sock.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(format!("{cmd}\n").as_bytes())
        .context("writing to the stats socket")?;
    let mut out = String::new();
    s.read_to_string(&mut out)
        .context("reading the stats socket")?;
    Ok(out)
}

/// The pid of the worker answering on the stats socket.
pub fn worker_pid(sock: &Path) -> Option<u32> {
    let info = stats_command(sock, "show info").ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("Pid: "))
        .and_then(|p| p.trim().parse().ok())
}

/// One row of `show stat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatRow {
    pub proxy: String,
    /// `FRONTEND`, `BACKEND`, or a server's name.
    pub server: String,
    /// `UP`, `DOWN`, `MAINT`, `no check`, `OPEN`, … (HAProxy's words).
    pub status: String,
    /// Last check result, e.g. `L7OK`, `L4CON`, `L7STS`.
    pub check_status: String,
    pub address: String,
}

/// Parse `show stat` CSV by its header line.
pub fn parse_stat(csv: &str) -> Vec<StatRow> {
    let mut lines = csv.lines();
    let Some(header) = lines.next().and_then(|h| h.strip_prefix("# ")) else {
        return Vec::new();
    };
    let cols: Vec<&str> = header.split(',').collect();
    let idx = |name: &str| cols.iter().position(|c| *c == name);
    let (Some(px), Some(sv), Some(st)) = (idx("pxname"), idx("svname"), idx("status")) else {
        return Vec::new();
    };
    let (chk, addr) = (idx("check_status"), idx("addr"));
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let get = |i: Option<usize>| i.and_then(|i| f.get(i)).unwrap_or(&"").to_string();
            StatRow {
                proxy: get(Some(px)),
                server: get(Some(sv)),
                status: get(Some(st)),
                check_status: get(chk),
                address: get(addr),
            }
        })
        .collect()
}

/// Backend servers' health from the stats socket.
pub fn show_stat(sock: &Path) -> Result<Vec<StatRow>> {
    Ok(parse_stat(&stats_command(sock, "show stat")?))
}

/// Graceful reload of a running master: `SIGUSR2`, then wait until a new
/// worker answers on the stats socket. Returns how long it took.
pub fn reload(master: i32, sock: &Path) -> Result<Duration> {
    let started = Instant::now();
    let old = worker_pid(sock);
    // SAFETY: signalling the HAProxy master we started.
    if unsafe { libc::kill(master, libc::SIGUSR2) } != 0 {
        return Err(std::io::Error::last_os_error()).context("signalling the haproxy master");
    }
    while started.elapsed() < RELOAD_TIMEOUT {
        match worker_pid(sock) {
            Some(p) if Some(p) != old => return Ok(started.elapsed()),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    bail!("haproxy did not start a new worker within {RELOAD_TIMEOUT:?} of the reload")
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_csv_parses_by_header() {
        let csv = "# pxname,svname,qcur,status,weight,check_status,addr,\n\
api,FRONTEND,,OPEN,,,,\n\
api,lab1-bootstrap,0,UP,1,L7OK,192.168.126.10:6443,\n\
api,lab1-ctlplane-0,0,DOWN,1,L4CON,192.168.126.11:6443,\n\
api,BACKEND,0,UP,1,,,\n\n";
        let rows = parse_stat(csv);
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[1].server, "lab1-bootstrap");
        assert_eq!(rows[1].status, "UP");
        assert_eq!(rows[2].check_status, "L4CON");
        assert_eq!(rows[2].address, "192.168.126.11:6443");
        assert!(parse_stat("garbage").is_empty());
    }

    #[test]
    fn our_haproxy_is_recognized_by_its_arguments() {
        // This test process is not HAProxy.
        assert!(!is_our_haproxy(std::process::id() as i32, Path::new("/x")));
        assert!(!is_our_haproxy(i32::MAX, Path::new("/x")));
    }
}
