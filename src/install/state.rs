//! The install's persisted state: which targets are done, and which one was
//! started (its intent on disk before its side effects run). Versioned, written
//! atomically, and guarded by an exclusive lock so two shiftlabs never drive the
//! same cluster at once.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::files::write_atomic;

pub const STATE_FORMAT: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Started: its side effects may be partly done; running it again converges.
    Started,
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRecord {
    pub status: Status,
    /// Seconds since the epoch of the last change.
    pub at: u64,
    /// What the target was doing or found, for the user (`status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallState {
    pub format: u32,
    pub cluster: String,
    pub targets: BTreeMap<String, TargetRecord>,
    /// Facts later targets need (installer path, release version, …).
    #[serde(default)]
    pub facts: BTreeMap<String, String>,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// An exclusive hold on a cluster's state, released when dropped.
pub struct Locked {
    path: PathBuf,
    _lock: File,
    pub state: InstallState,
}

pub fn state_path(cluster_dir: &Path) -> PathBuf {
    cluster_dir.join("install-state.json")
}

/// Take the cluster's lock (failing at once if another shiftlab holds it) and read
/// its state.
pub fn lock(cluster_dir: &Path, cluster: &str) -> Result<Locked> {
    std::fs::create_dir_all(cluster_dir)
        .with_context(|| format!("creating {}", cluster_dir.display()))?;
    let lock_path = cluster_dir.join(".lock");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("opening {}", lock_path.display()))?;
    // SAFETY: flock on a file descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let holder = std::fs::read_to_string(&lock_path).unwrap_or_default();
        bail!(
            "another shiftlab is working on {cluster} (pid {}); wait for it or stop it",
            holder.trim()
        );
    }
    // The lock is held by this process: say who, for the message above.
    file.set_len(0)?;
    write!(file, "{}", std::process::id())?;
    let path = state_path(cluster_dir);
    let state = match std::fs::read_to_string(&path) {
        Ok(text) => {
            let s: InstallState = serde_json::from_str(&text)
                .with_context(|| format!("reading {}", path.display()))?;
            if s.format > STATE_FORMAT {
                bail!(
                    "{} was written by a newer shiftlab (format {}); upgrade shiftlab",
                    path.display(),
                    s.format
                );
            }
            s
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => InstallState {
            format: STATE_FORMAT,
            cluster: cluster.to_string(),
            ..InstallState::default()
        },
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(Locked {
        path,
        _lock: file,
        state,
    })
}

impl Locked {
    fn save(&self) -> Result<()> {
        let mut text = serde_json::to_string_pretty(&self.state)?;
        text.push('\n');
        write_atomic(&self.path, text.as_bytes())
    }

    pub fn is_done(&self, target: &str) -> bool {
        self.state
            .targets
            .get(target)
            .is_some_and(|r| r.status == Status::Done)
    }

    /// Record that `target` is about to run: on disk before any side effect.
    pub fn start(&mut self, target: &str, note: Option<String>) -> Result<()> {
        self.state.targets.insert(
            target.to_string(),
            TargetRecord {
                status: Status::Started,
                at: now(),
                note,
            },
        );
        self.save()
    }

    pub fn done(&mut self, target: &str, note: Option<String>) -> Result<()> {
        self.state.targets.insert(
            target.to_string(),
            TargetRecord {
                status: Status::Done,
                at: now(),
                note,
            },
        );
        self.save()
    }

    pub fn set_fact(&mut self, key: &str, value: &str) -> Result<()> {
        self.state.facts.insert(key.into(), value.into());
        self.save()
    }

    pub fn fact(&self, key: &str) -> Option<&str> {
        self.state.facts.get(key).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intent_then_done_persists_and_the_lock_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut l = lock(dir.path(), "lab1").unwrap();
            l.start("infra", None).unwrap();
            let again = lock(dir.path(), "lab1");
            assert!(again.is_err());
            assert!(format!("{:#}", again.err().unwrap()).contains("another shiftlab"));
        }
        let mut l = lock(dir.path(), "lab1").unwrap();
        assert_eq!(l.state.targets["infra"].status, Status::Started);
        assert!(!l.is_done("infra"));
        l.done("infra", Some("6 domains".into())).unwrap();
        drop(l);
        let l = lock(dir.path(), "lab1").unwrap();
        assert!(l.is_done("infra"));
    }

    #[test]
    fn a_newer_format_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            state_path(dir.path()),
            r#"{"format": 99, "cluster": "x", "targets": {}}"#,
        )
        .unwrap();
        assert!(lock(dir.path(), "x").is_err());
    }
}
