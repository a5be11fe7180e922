//! Where shiftlab keeps its state on the host.

use std::path::{Path, PathBuf};

/// The root of shiftlab's state: `--state-dir`, else `SHIFTLAB_HOME`, else
/// `/var/lib/shiftlab` for root and `$XDG_DATA_HOME/shiftlab` (or
/// `~/.local/share/shiftlab`) for everyone else.
#[derive(Debug, Clone)]
pub struct StateDir {
    pub root: PathBuf,
}

impl StateDir {
    pub fn resolve(flag: Option<&Path>) -> Self {
        if let Some(p) = flag {
            return StateDir { root: p.into() };
        }
        if let Some(p) = std::env::var_os("SHIFTLAB_HOME").filter(|p| !p.is_empty()) {
            return StateDir { root: p.into() };
        }
        // SAFETY-free check for root: the effective uid is what file access uses.
        let is_root = std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
            .unwrap_or(false);
        if is_root {
            return StateDir {
                root: "/var/lib/shiftlab".into(),
            };
        }
        let data = std::env::var_os("XDG_DATA_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .unwrap_or_else(|| PathBuf::from("."));
        StateDir {
            root: data.join("shiftlab"),
        }
    }

    /// `<root>/clusters/<name>`: the cluster's state, secrets and logs.
    pub fn cluster(&self, name: &str) -> PathBuf {
        self.root.join("clusters").join(name)
    }
}
