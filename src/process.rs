//! A long child (`openshift-install`, `coreos-installer`): tied to shiftlab's
//! life, and recorded so that a rerun after `kill -9` stops one that is still
//! running rather than racing it.
//!
//! The child runs in its own process group with `PR_SET_PDEATHSIG` (SIGTERM when
//! the thread that spawned it dies, which here is the one that waits for it). The
//! record names its pid and its start time from `/proc/<pid>/stat`, so that a pid
//! reused by an unrelated process is never signalled.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    pub pid: i32,
    /// Its process group (its own: the pid).
    pub pgid: i32,
    /// Field 22 of `/proc/<pid>/stat`: clock ticks after boot.
    pub start_time: u64,
}

/// A process's start time, from `/proc/<pid>/stat` (the fields after the command
/// name, which may itself hold spaces and parentheses).
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    // `rest` starts at field 3 (state); start time is field 22.
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether `pid` runs (exists and is not a zombie waiting to be reaped).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// Spawn `cmd` in its own process group, to die with shiftlab.
pub fn spawn_tied(cmd: &mut Command) -> std::io::Result<Child> {
    cmd.process_group(0);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Write the record of a running child (before waiting for it).
pub fn record(path: &Path, child: &Child) -> Result<()> {
    let pid = child.id() as i32;
    let rec = Recorded {
        pid,
        pgid: pid,
        start_time: start_time(pid).unwrap_or_default(),
    };
    crate::files::write_atomic(path, &serde_json::to_vec(&rec)?)
}

/// Stop what `path` records if it still runs (SIGTERM to its group, SIGKILL after
/// `grace`), and forget it. Returns the pid stopped, if any.
pub fn stop_leftover(path: &Path, grace: Duration) -> Result<Option<i32>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(None);
    };
    let _ = std::fs::remove_file(path);
    let Ok(rec) = serde_json::from_str::<Recorded>(&text) else {
        return Ok(None);
    };
    let alive = || rec.pid > 0 && running(rec.pid) && start_time(rec.pid) == Some(rec.start_time);
    if !alive() {
        return Ok(None);
    }
    // SAFETY: kill(2) on a process group we recorded and checked just now.
    unsafe { libc::kill(-rec.pgid, libc::SIGTERM) };
    let until = Instant::now() + grace;
    while alive() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    if alive() {
        // SAFETY: as above.
        unsafe { libc::kill(-rec.pgid, libc::SIGKILL) };
        let until = Instant::now() + Duration::from_secs(5);
        while alive() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    if alive() {
        anyhow::bail!(
            "openshift-install (pid {}) left by an earlier run does not stop",
            rec.pid
        );
    }
    Ok(Some(rec.pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper() -> Child {
        spawn_tied(Command::new("sleep").arg("300")).unwrap()
    }

    #[test]
    fn start_times_are_read_from_proc() {
        let me = std::process::id() as i32;
        assert!(start_time(me).is_some());
        assert_eq!(start_time(i32::MAX), None);
    }

    #[test]
    fn a_recorded_child_that_still_runs_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("openshift-install.pid");
        let mut child = sleeper();
        record(&rec, &child).unwrap();
        let pid = child.id() as i32;
        assert_eq!(
            stop_leftover(&rec, Duration::from_secs(5)).unwrap(),
            Some(pid)
        );
        let status = child.wait().unwrap();
        assert!(!status.success(), "{status:?}");
        assert!(!rec.exists(), "the record is forgotten");
        assert_eq!(stop_leftover(&rec, Duration::from_secs(1)).unwrap(), None);
    }

    #[test]
    fn a_reused_pid_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("openshift-install.pid");
        let mut child = sleeper();
        let pid = child.id() as i32;
        // Same pid, another start time: not the process that was recorded.
        let wrong = Recorded {
            pid,
            pgid: pid,
            start_time: start_time(pid).unwrap() + 1,
        };
        std::fs::write(&rec, serde_json::to_vec(&wrong).unwrap()).unwrap();
        assert_eq!(stop_leftover(&rec, Duration::from_secs(1)).unwrap(), None);
        assert!(child.try_wait().unwrap().is_none(), "still running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn the_child_dies_with_its_parent_thread() {
        // PR_SET_PDEATHSIG fires when the spawning thread ends.
        let pid = std::thread::spawn(|| sleeper().id() as i32).join().unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        // The child is not ours to reap here; /proc shows it a zombie or gone.
        let gone = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
                .unwrap_or(true)
        };
        while !gone() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(gone(), "the child outlived the thread that spawned it");
    }
}
