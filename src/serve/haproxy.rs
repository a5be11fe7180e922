//! A cluster's HAProxy from outside the daemon: the binary, validation
//! (`haproxy -c`) before a configuration replaces the working one, the pid file
//! (is it ours, stop it), graceful reloads (`SIGUSR2` to the master) and the
//! stats socket. The daemon's supervisor (`crate::daemon::haproxy`) runs the
//! process with these; `remove_bootstrap`, `forget_cluster` and status use them
//! when no serve runs or to read it.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::state::ClusterDir;

const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopped HAProxy has before `SIGKILL`.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);

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
