//! Where shiftlab keeps its state on the host, and the names allowed into it. Every
//! path under the state directory is spelled here: [`StateDir`] names the files
//! clusters share, [`ClusterDir`] those of one cluster.
//!
//! | under `<state>/` | what |
//! |---|---|
//! | `clusters/<name>/` | one cluster ([`ClusterDir`]) |
//! | `.host.lock` | the host lock around shared objects ([`StateDir::lock_host`]) |
//! | `images/standin.qcow2` | the stand-in node image |
//! | `libvirt-host.json` | pools and base images shiftlab made on each libvirt host |
//! | `serve.sock` | `shiftlab serve`'s control socket |
//! | `host-dns.lock` | serialises host DNS edits |
//! | `bmc/` | the standalone BMC's state (`shiftlab bmc`) |
//! | `storage/<name>/` | a cluster's NFS export data, kept by destroy (`host::nfs`) |
//! | `bundles/<name>/` | lab bundles `bundle create` writes when given no `--out` (`bundle`) |

mod cluster;
mod name;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub use cluster::{plan_from_json, read_plan_file, Assets, ClusterDir, ClusterLock};
pub use name::{ClusterName, InvalidClusterName};

/// How long a command waits for another to finish with the host's shared objects
/// (importing a multi-GB base image takes minutes).
pub const HOST_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

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
        if is_root() {
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

    /// The other default state directories that hold a cluster `name`: root's
    /// `/var/lib/shiftlab` for a user; for root, the invoking user's (`SUDO_USER`)
    /// `~/.local/share/shiftlab`; for anyone given another directory, the
    /// defaults too. For "no cluster named X" to say where X is.
    pub fn elsewhere(&self, name: &str) -> Vec<PathBuf> {
        let sudo_home = std::env::var("SUDO_USER").ok().and_then(|u| {
            let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
            home_in_passwd(&passwd, &u)
        });
        let user_data = std::env::var_os("XDG_DATA_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")));
        default_dirs(is_root(), user_data, sudo_home)
            .into_iter()
            .filter(|d| d != &self.root && d.join("clusters").join(name).is_dir())
            .collect()
    }

    /// `<root>/clusters`: one directory per cluster.
    pub fn clusters(&self) -> PathBuf {
        self.root.join("clusters")
    }

    /// `<root>/clusters/<name>`: the cluster's state, secrets and logs. `name` is
    /// a cluster name already checked (a loaded cluster file's, or a [`ClusterName`]).
    pub fn cluster(&self, name: &str) -> ClusterDir {
        debug_assert!(
            crate::spec::is_cluster_name(name),
            "unchecked cluster name {name:?}"
        );
        ClusterDir::new(name, self.clusters().join(name))
    }

    /// Every cluster directory, by name; an entry whose name is not a cluster
    /// name is no cluster of shiftlab's and is passed over. No `clusters/`
    /// directory is no cluster; any other failure to read it is an error (out
    /// of descriptors is not "no cluster").
    pub fn cluster_dirs(&self) -> Result<Vec<ClusterDir>> {
        let dir = self.clusters();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
            if let Some(n) = entry.file_name().to_str() {
                if crate::spec::is_cluster_name(n) {
                    names.push(n.to_string());
                }
            }
        }
        names.sort();
        Ok(names.iter().map(|n| self.cluster(n)).collect())
    }

    /// Hold the host-wide lock (`.host.lock`) around the objects clusters share:
    /// the storage pool, base images, the image-digest cache, the stand-in image.
    /// Two clusters created at once then take turns there instead of racing.
    pub fn lock_host(&self) -> Result<crate::files::FileLock> {
        crate::files::lock_waiting(
            &self.root.join(".host.lock"),
            HOST_LOCK_WAIT,
            "the host lock (shared pool and base images)",
        )
    }

    /// The stand-in node image rehearsals boot.
    pub fn standin_image(&self) -> PathBuf {
        self.root.join("images/standin.qcow2")
    }

    /// The pools and base images shiftlab made on each libvirt host.
    pub fn libvirt_host_record(&self) -> PathBuf {
        self.root.join("libvirt-host.json")
    }

    /// Where `bundle create` puts a cluster's bundle when given no `--out`.
    /// `name` is a checked cluster name.
    pub fn bundle(&self, name: &ClusterName) -> PathBuf {
        self.bundles().join(name.as_str())
    }

    /// `<root>/bundles`: `bundle list` looks here.
    pub fn bundles(&self) -> PathBuf {
        self.root.join("bundles")
    }

    /// `shiftlab serve`'s control socket.
    pub fn serve_socket(&self) -> PathBuf {
        self.root.join("serve.sock")
    }

    /// The standalone BMC's state directory (`shiftlab bmc` without `--bmc-dir`).
    pub fn bmc_dir(&self) -> PathBuf {
        self.root.join("bmc")
    }

    /// The lock that serialises host DNS edits.
    pub fn host_dns_lock(&self) -> PathBuf {
        self.root.join("host-dns.lock")
    }

    /// Remove a cluster's state directory, and nothing else: the entry must be a
    /// direct child of `<root>/clusters/`, checked after resolving every link. A
    /// symbolic link in its place is removed itself; what it points to is not
    /// shiftlab's and stays. Returns what was removed, if anything.
    pub fn remove_cluster(&self, name: &ClusterName) -> Result<Option<PathBuf>> {
        let clusters = self.clusters();
        let parent = match clusters.canonicalize() {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("resolving {}", clusters.display())),
        };
        let entry = parent.join(name.as_str());
        let meta = match std::fs::symlink_metadata(&entry) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("inspecting {}", entry.display())),
        };
        if meta.file_type().is_symlink() {
            std::fs::remove_file(&entry)
                .with_context(|| format!("removing the link {}", entry.display()))?;
            return Ok(Some(entry));
        }
        if !meta.is_dir() {
            bail!(
                "{} is not a directory shiftlab made; left it alone",
                entry.display()
            );
        }
        let resolved = entry
            .canonicalize()
            .with_context(|| format!("resolving {}", entry.display()))?;
        if resolved.parent() != Some(parent.as_path())
            || resolved.file_name() != Some(std::ffi::OsStr::new(name.as_str()))
        {
            bail!(
                "{} resolves to {}, outside {}; left it alone",
                entry.display(),
                resolved.display(),
                parent.display()
            );
        }
        std::fs::remove_dir_all(&resolved)
            .with_context(|| format!("removing {}", resolved.display()))?;
        Ok(Some(resolved))
    }
}

/// Whether shiftlab runs as root: the effective uid is what file access uses.
fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

/// The default state directories one may mean: root's, the user's data
/// directory's (`user_data`; under `sudo -E` still the user's), and for root
/// run by sudo the invoking user's (`sudo_home`).
fn default_dirs(
    root: bool,
    user_data: Option<PathBuf>,
    sudo_home: Option<PathBuf>,
) -> Vec<PathBuf> {
    let sudo_data = sudo_home.filter(|_| root).map(|h| h.join(".local/share"));
    let mut dirs = vec![PathBuf::from("/var/lib/shiftlab")];
    for d in [user_data, sudo_data].into_iter().flatten() {
        let d = d.join("shiftlab");
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// `user`'s home directory in `/etc/passwd`'s text.
fn home_in_passwd(passwd: &str, user: &str) -> Option<PathBuf> {
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[0] == user && !f[5].is_empty()).then(|| PathBuf::from(f[5]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> (tempfile::TempDir, StateDir) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: dir.path().join("state"),
        };
        std::fs::create_dir_all(state.clusters()).unwrap();
        (dir, state)
    }

    #[test]
    fn the_other_defaults_are_roots_and_the_invoking_users() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nann:x:1000:1000:Ann:/home/ann:/bin/bash\n";
        assert_eq!(home_in_passwd(passwd, "ann"), Some("/home/ann".into()));
        assert_eq!(home_in_passwd(passwd, "an"), None);
        // root under sudo: root's, its HOME's, and ann's.
        assert_eq!(
            default_dirs(
                true,
                Some("/root/.local/share".into()),
                Some("/home/ann".into())
            ),
            [
                PathBuf::from("/var/lib/shiftlab"),
                "/root/.local/share/shiftlab".into(),
                "/home/ann/.local/share/shiftlab".into()
            ]
        );
        // A user's SUDO_USER means nothing.
        assert_eq!(
            default_dirs(false, None, Some("/home/ann".into())),
            [PathBuf::from("/var/lib/shiftlab")]
        );
        assert_eq!(
            default_dirs(true, None, None),
            [PathBuf::from("/var/lib/shiftlab")]
        );
        // A user: root's and the user's data directory.
        assert_eq!(
            default_dirs(false, Some("/x/data".into()), None),
            [
                PathBuf::from("/var/lib/shiftlab"),
                "/x/data/shiftlab".into()
            ]
        );
    }

    #[test]
    fn removes_exactly_the_cluster_directory() {
        let (_d, state) = state();
        let lab = ClusterName::parse("lab1").unwrap();
        let other = state.cluster("lab2").path().to_path_buf();
        std::fs::create_dir_all(
            state
                .cluster("lab1")
                .assets()
                .kubeconfig()
                .parent()
                .unwrap(),
        )
        .unwrap();
        std::fs::write(state.cluster("lab1").assets().kubeconfig(), "x").unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let removed = state.remove_cluster(&lab).unwrap().unwrap();
        assert!(removed.ends_with("clusters/lab1"));
        assert!(!state.cluster("lab1").exists());
        assert!(other.is_dir(), "another cluster's state stays");
        assert_eq!(state.remove_cluster(&lab).unwrap(), None, "idempotent");
    }

    #[test]
    fn a_symlinked_cluster_dir_loses_only_the_link() {
        let (d, state) = state();
        let outside = d.path().join("precious");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "mine").unwrap();
        std::os::unix::fs::symlink(&outside, state.cluster("lab1").path()).unwrap();
        state
            .remove_cluster(&ClusterName::parse("lab1").unwrap())
            .unwrap();
        assert!(state.cluster("lab1").path().symlink_metadata().is_err());
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn a_symlinked_clusters_dir_is_resolved_first() {
        // <root>/clusters itself a link: the entry is checked against where it leads.
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real-clusters");
        std::fs::create_dir_all(real.join("lab1")).unwrap();
        std::fs::create_dir_all(d.path().join("root")).unwrap();
        std::os::unix::fs::symlink(&real, d.path().join("root/clusters")).unwrap();
        let state = StateDir {
            root: d.path().join("root"),
        };
        state
            .remove_cluster(&ClusterName::parse("lab1").unwrap())
            .unwrap();
        assert!(!real.join("lab1").exists());
        assert!(real.is_dir());
    }

    #[test]
    fn listing_clusters_fails_loudly_but_a_missing_directory_is_none() {
        let (d, state) = state();
        std::fs::create_dir_all(state.cluster("lab1").path()).unwrap();
        std::fs::create_dir_all(state.clusters().join("not a name")).unwrap();
        let names = |s: &StateDir| -> Vec<String> {
            s.cluster_dirs()
                .unwrap()
                .iter()
                .map(|c| c.name().to_string())
                .collect()
        };
        assert_eq!(names(&state), ["lab1"]);
        let none = StateDir {
            root: d.path().join("none"),
        };
        assert!(names(&none).is_empty());
        // Not a directory: an error, never an empty list.
        let file = StateDir {
            root: d.path().join("file"),
        };
        std::fs::create_dir_all(&file.root).unwrap();
        std::fs::write(file.clusters(), "x").unwrap();
        let e = format!("{:#}", file.cluster_dirs().unwrap_err());
        assert!(e.contains("reading") && e.contains("clusters"), "{e}");
    }

    #[test]
    fn no_state_is_nothing_to_remove() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: d.path().join("none"),
        };
        assert_eq!(
            state
                .remove_cluster(&ClusterName::parse("lab1").unwrap())
                .unwrap(),
            None
        );
    }

    #[test]
    fn a_file_in_place_of_the_directory_is_left_alone() {
        let (_d, state) = state();
        std::fs::write(state.cluster("lab1").path(), "not ours").unwrap();
        let e = state
            .remove_cluster(&ClusterName::parse("lab1").unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("left it alone"), "{e}");
        assert!(state.cluster("lab1").path().is_file());
    }
}
