//! A cluster's NFS export from the host (`storage: nfs`): one NFS-Ganesha
//! (`ganesha.nfsd`, userspace NFSv4) per cluster, run by serve
//! (src/daemon/nfs.rs), bound to the lab gateway only and exporting the
//! cluster's data directory to its subnet only. Userspace, so that it never
//! touches `/etc/exports`, the kernel's nfsd or a kernel module: it works on
//! any host kernel and its lifecycle is the cluster's (docs/storage.md).
//!
//! Here: the configuration (pure), where the data lives, the server's pid
//! file, and the data directory's removal (`destroy --purge-storage`).
//!
//! | path | what |
//! |---|---|
//! | `<state>/storage/<cluster>/export/` | the exported data (kept by destroy) |
//! | `<state>/storage/<cluster>/made-by-shiftlab` | ownership marker: the cluster's name |
//! | `<state>/clusters/<cluster>/nfs/` | ganesha.conf, its pid, log and recovery dir |

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::plan::storage::NfsExport;
use crate::state::{ClusterDir, ClusterName, StateDir};

/// NFSv4's one port.
pub const PORT: u16 = 2049;
/// The server program, and the Debian packages that have it and its VFS backend.
pub const SERVER: &str = "ganesha.nfsd";
pub const PACKAGES: &str = "nfs-ganesha nfs-ganesha-vfs";
/// The marker file that says shiftlab made a storage directory (and for whom).
const MARKER: &str = "made-by-shiftlab";
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// `<state>/storage/<cluster>`: the cluster's storage, outside its state
/// directory so that destroy (which removes that) keeps the data.
pub fn storage_dir(state: &StateDir, cluster: &ClusterName) -> PathBuf {
    state.root.join("storage").join(cluster.as_str())
}

/// The directory the cluster's export serves.
pub fn data_dir(state: &StateDir, cluster: &ClusterName) -> PathBuf {
    storage_dir(state, cluster).join("export")
}

/// The server's files, in the cluster's state directory (gone with it).
pub struct ServerFiles {
    pub dir: PathBuf,
}

impl ServerFiles {
    pub fn of(files: &ClusterDir) -> Self {
        ServerFiles {
            dir: files.path().join("nfs"),
        }
    }
    pub fn config(&self) -> PathBuf {
        self.dir.join("ganesha.conf")
    }
    pub fn pid(&self) -> PathBuf {
        self.dir.join("ganesha.pid")
    }
    pub fn log(&self) -> PathBuf {
        self.dir.join("ganesha.log")
    }
    pub fn recovery(&self) -> PathBuf {
        self.dir.join("recovery")
    }
}

/// A path written into ganesha's configuration as a quoted string: one that
/// would end the string or the line is refused, not escaped.
fn quoted(what: &str, p: &Path) -> Result<String> {
    let s = p
        .to_str()
        .with_context(|| format!("{what} {}: not UTF-8", p.display()))?;
    if s.contains(['"', '\\', '\n', '\r']) || !s.starts_with('/') {
        bail!("{what} {s:?}: must be an absolute path without quotes, backslashes or newlines");
    }
    Ok(format!("\"{s}\""))
}

/// Ganesha's configuration for one cluster's export. NFSv4 over TCP only, on
/// the gateway's address only (no NLM, no RQUOTA, no rpcbind: v4 needs none);
/// every client refused but the cluster's subnet; root not squashed there,
/// because the in-cluster provisioner makes each volume's directory as root
/// and hands it over (chown). Graceless: a restarted serve does not hold the
/// nodes' I/O for a 90 s grace period (a lab's trade: locks are not reclaimed).
pub fn render_config(export: &NfsExport, data: &Path, server: &ServerFiles) -> Result<String> {
    let data = quoted("the export's data directory", data)?;
    let recovery = quoted("the server's recovery directory", &server.recovery())?;
    if !export.path.starts_with('/') || export.path.contains(['"', '\\', '\n', ' ']) {
        bail!("export path {:?}: not a plain absolute path", export.path);
    }
    Ok(format!(
        r#"# shiftlab: the NFS export of this cluster, rendered by shiftlab serve (edits are overwritten).
NFS_CORE_PARAM {{
    Bind_addr = {server_addr};
    NFS_Port = {PORT};
    Protocols = 4;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
}}
NFSV4 {{
    RecoveryBackend = fs;
    RecoveryRoot = {recovery};
    Graceless = true;
}}
EXPORT_DEFAULTS {{
    Access_Type = None;
}}
EXPORT {{
    Export_Id = 1;
    Path = {data};
    Pseudo = "{pseudo}";
    Protocols = 4;
    Transports = TCP;
    SecType = sys;
    Access_Type = None;
    Squash = No_Root_Squash;
    CLIENT {{
        Clients = {clients};
        Access_Type = RW;
        Squash = No_Root_Squash;
    }}
    FSAL {{
        Name = VFS;
    }}
}}
"#,
        server_addr = export.server,
        pseudo = export.path,
        clients = export.clients,
    ))
}

/// Make the cluster's data directory if it is not there: the storage directory
/// 0700 (the nodes' data is not the host users'), its marker, the export 0755
/// (the provisioner, root on the nodes, makes the volumes' directories in it).
/// A storage directory without our marker is not ours: refused.
pub fn ensure_data(state: &StateDir, cluster: &ClusterName) -> Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    let dir = storage_dir(state, cluster);
    let data = data_dir(state, cluster);
    let marker = dir.join(MARKER);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {
            if !is_ours(&dir, cluster) {
                bail!(
                    "{} exists and shiftlab did not make it (no {MARKER}); not exporting it",
                    dir.display()
                );
            }
        }
        Ok(_) => bail!(
            "{} exists and is not a directory; not exporting it",
            dir.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir.parent().unwrap_or(&dir))
                .with_context(|| format!("creating {}", dir.display()))?;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("creating {}", dir.display()))?;
            crate::files::write_atomic(&marker, format!("{cluster}\n").as_bytes())?;
        }
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", dir.display())),
    }
    if !data.is_dir() {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&data)
            .with_context(|| format!("creating {}", data.display()))?;
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("setting the mode of {}", data.display()))?;
    }
    Ok(data)
}

fn is_ours(dir: &Path, cluster: &ClusterName) -> bool {
    std::fs::read_to_string(dir.join(MARKER)).is_ok_and(|t| t.trim() == cluster.as_str())
}

/// `destroy --purge-storage`: remove the cluster's storage directory, only if
/// it is a real directory directly under `<state>/storage/` (after resolving
/// links) and holds our marker naming this cluster. Returns what was removed.
pub fn purge_data(state: &StateDir, cluster: &ClusterName) -> Result<Option<PathBuf>> {
    let parent = state.root.join("storage");
    let parent = match parent.canonicalize() {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("resolving {}", parent.display())),
    };
    let entry = parent.join(cluster.as_str());
    let meta = match std::fs::symlink_metadata(&entry) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", entry.display())),
    };
    if !meta.is_dir() {
        bail!(
            "{} is not a directory shiftlab made; left it alone",
            entry.display()
        );
    }
    if !is_ours(&entry, cluster) {
        bail!(
            "{} has no {MARKER} naming {cluster}: shiftlab did not make it; left it alone",
            entry.display()
        );
    }
    std::fs::remove_dir_all(&entry).with_context(|| format!("removing {}", entry.display()))?;
    Ok(Some(entry))
}

/// The server's path on PATH, if it and its VFS backend are installed.
pub fn installed() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let bin = std::env::split_paths(&path)
        .map(|d| d.join(SERVER))
        .find(|p| p.is_file())?;
    // nfs-ganesha-vfs: the backend that serves a local directory.
    let vfs = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("ganesha/libfsalvfs.so"))
        .chain([
            PathBuf::from("/usr/lib/ganesha/libfsalvfs.so"),
            PathBuf::from("/usr/lib64/ganesha/libfsalvfs.so"),
        ])
        .any(|p| p.is_file());
    vfs.then_some(bin)
}

/// Why the server's listeners are not the gateway alone, if they are not.
/// NFS-Ganesha resolves `Bind_addr` with AI_ADDRCONFIG: on a host with no
/// IPv6 address but loopback's it binds every address instead (seen with
/// 4.3), which would serve the export beyond the lab network and take 2049
/// from every other cluster.
pub fn bind_problem(listening: &[std::net::IpAddr], gateway: std::net::IpAddr) -> Option<String> {
    let others: Vec<String> = listening
        .iter()
        .filter(|a| **a != gateway)
        .map(|a| match a {
            a if a.is_unspecified() => "every address".to_string(),
            a => a.to_string(),
        })
        .collect();
    if others.is_empty() {
        return None;
    }
    Some(format!(
        "port {PORT} listens on {} besides the gateway {gateway}: NFS-Ganesha binds every address when the host has no IPv6 address but loopback's (a link-local one is enough: sysctl net.ipv6.conf.<interface>.disable_ipv6=0), and another NFS server may hold the port",
        others.join(", ")
    ))
}

/// Why a server ended, from its log: the bind failure that precedes its fatal
/// line (the port taken, the address not on the host yet) with that line, else
/// the fatal line, else the last line.
pub fn why_exited(log: &str) -> Option<String> {
    let msg = |l: &str| l.rsplit(" :").next().unwrap_or(l).trim().to_string();
    let fatal = log.lines().rev().find(|l| l.contains(":FATAL :")).map(msg);
    let bind = log
        .lines()
        .rev()
        .find(|l| l.contains("Cannot bind"))
        .map(msg);
    match (bind, fatal) {
        (Some(b), Some(f)) => Some(format!("{b}: {f}")),
        (None, Some(f)) => Some(f),
        _ => log.lines().last().map(msg),
    }
}

/// Whether `pid` is a ganesha.nfsd running `config`.
fn is_our_server(pid: i32, config: &Path) -> bool {
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
    let named = args.first().is_some_and(|a| a.ends_with(SERVER.as_bytes()));
    let cfg = config.as_os_str().as_encoded_bytes();
    named && args.windows(2).any(|w| w[0] == b"-f" && w[1] == cfg)
}

/// The running server of the cluster's pid file, if it is ours.
pub fn running_pid(files: &ClusterDir) -> Option<i32> {
    let s = ServerFiles::of(files);
    let pid: i32 = std::fs::read_to_string(s.pid()).ok()?.trim().parse().ok()?;
    (pid > 1 && is_our_server(pid, &s.config())).then_some(pid)
}

/// Stop the cluster's server (one left by a serve that was killed, or at
/// destroy): SIGTERM, SIGKILL after a grace period. Returns whether one ran.
pub fn stop_by_pid_file(files: &ClusterDir) -> Result<bool> {
    let s = ServerFiles::of(files);
    let Some(pid) = running_pid(files) else {
        let _ = std::fs::remove_file(s.pid());
        return Ok(false);
    };
    tracing::info!(pid, cluster = %files.name(), "stopping the nfs server");
    let alive = || is_our_server(pid, &s.config()) && !zombie(pid);
    // SAFETY: signalling a process verified to be our server.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + STOP_TIMEOUT;
    while alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive() {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let _ = std::fs::remove_file(s.pid());
    Ok(true)
}

fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export() -> NfsExport {
        NfsExport {
            server: "192.168.126.1".parse().unwrap(),
            path: crate::plan::storage::export_path("lab1"),
            clients: "192.168.126.0/24".parse().unwrap(),
        }
    }

    fn name(n: &str) -> ClusterName {
        ClusterName::parse(n).unwrap()
    }

    #[test]
    fn config_serves_v4_on_the_gateway_to_the_subnet_only() {
        let s = ServerFiles {
            dir: "/var/lib/shiftlab/clusters/lab1/nfs".into(),
        };
        let c = render_config(
            &export(),
            Path::new("/var/lib/shiftlab/storage/lab1/export"),
            &s,
        )
        .unwrap();
        for want in [
            "Bind_addr = 192.168.126.1;",
            "NFS_Port = 2049;",
            "Protocols = 4;",
            "Enable_NLM = false;",
            "Enable_UDP = false;",
            "RecoveryRoot = \"/var/lib/shiftlab/clusters/lab1/nfs/recovery\";",
            "Path = \"/var/lib/shiftlab/storage/lab1/export\";",
            "Pseudo = \"/shiftlab/lab1\";",
            "Clients = 192.168.126.0/24;",
            "Squash = No_Root_Squash;",
            "Name = VFS;",
        ] {
            assert!(c.contains(want), "{want} missing from\n{c}");
        }
        // Everyone but the CLIENT block is refused: the export's own access
        // and the defaults are None, the only RW is the subnet's.
        let export_block = &c[c.find("EXPORT {").unwrap()..];
        let before_client = &export_block[..export_block.find("CLIENT").unwrap()];
        assert!(before_client.contains("Access_Type = None;"));
        assert_eq!(c.matches("Access_Type = RW;").count(), 1);
        let client = &export_block[export_block.find("CLIENT").unwrap()..];
        assert!(client.contains("Access_Type = RW;"));
        assert!(!c.contains("Protocols = 3"));
    }

    #[test]
    fn a_server_on_more_than_the_gateway_is_named() {
        // As host::sockets reads them: ganesha.nfsd with Bind_addr 10.77.0.1
        // on a host with an IPv6 link-local address (the gateway alone), then
        // on one without (bound to ::).
        let gw: std::net::IpAddr = "10.77.0.1".parse().unwrap();
        assert_eq!(bind_problem(&[gw], gw), None);
        let p = bind_problem(&["::".parse().unwrap()], gw).unwrap();
        assert!(
            p.contains("listens on every address besides the gateway 10.77.0.1"),
            "{p}"
        );
    }

    #[test]
    fn why_a_server_ended_is_read_from_its_log() {
        // Recorded: ganesha.nfsd 4.3 started while another held the address's 2049.
        let log = "25/11/2026 19:16:04 : epoch 6b0733f4 : vm : nfs-ganesha-2518[main] __Register_program :DISP :MAJ :Cannot register NFS V4 on TCP\n\
            25/11/2026 19:16:04 : epoch 6b0733f4 : vm : nfs-ganesha-2518[main] Bind_sockets_V6 :DISP :WARN :Cannot bind NFS tcp6 socket, error 98 (Address already in use)\n\
            25/11/2026 19:16:04 : epoch 6b0733f4 : vm : nfs-ganesha-2518[main] Bind_sockets :DISP :FATAL :Error binding to V6 interface. Cannot continue.\n";
        assert_eq!(
            why_exited(log).unwrap(),
            "Cannot bind NFS tcp6 socket, error 98 (Address already in use): Error binding to V6 interface. Cannot continue."
        );
        assert_eq!(
            why_exited("a : b :EVENT :shutting down\n").unwrap(),
            "shutting down"
        );
        assert_eq!(why_exited(""), None);
    }

    #[test]
    fn config_refuses_paths_that_would_break_out_of_a_string() {
        let s = ServerFiles {
            dir: "/x/nfs".into(),
        };
        for bad in ["/a\"b", "/a\nb", "relative", "/a\\b"] {
            let e = render_config(&export(), Path::new(bad), &s).unwrap_err();
            assert!(format!("{e:#}").contains("data directory"), "{e:#}");
        }
    }

    #[test]
    fn data_is_made_owned_and_purged_only_if_ours() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: tmp.path().into(),
        };
        let n = name("lab1");
        let data = ensure_data(&state, &n).unwrap();
        assert_eq!(data, tmp.path().join("storage/lab1/export"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&data), 0o755);
        assert_eq!(mode(&tmp.path().join("storage/lab1")), 0o700);
        std::fs::write(data.join("kept"), "x").unwrap();
        // A second time keeps what is there.
        ensure_data(&state, &n).unwrap();
        assert!(data.join("kept").is_file());
        let removed = purge_data(&state, &n).unwrap().unwrap();
        assert!(removed.ends_with("storage/lab1"), "{}", removed.display());
        assert!(!tmp.path().join("storage/lab1").exists());
        assert_eq!(purge_data(&state, &n).unwrap(), None);

        // Not ours: no marker, or another cluster's marker: left alone, and
        // not exported either.
        let other = tmp.path().join("storage/lab2");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("data"), "theirs").unwrap();
        let e = purge_data(&state, &name("lab2")).unwrap_err();
        assert!(format!("{e:#}").contains("left it alone"), "{e:#}");
        assert!(ensure_data(&state, &name("lab2")).is_err());
        std::fs::write(other.join(MARKER), "lab3\n").unwrap();
        assert!(purge_data(&state, &name("lab2")).is_err());
        assert!(other.join("data").is_file());

        // A link in its place, even to a directory with our marker, is not ours.
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join(MARKER), "lab4\n").unwrap();
        std::os::unix::fs::symlink(&elsewhere, tmp.path().join("storage/lab4")).unwrap();
        assert!(purge_data(&state, &name("lab4")).is_err());
        assert!(elsewhere.join(MARKER).is_file());
    }
}
