//! What `status` and the web page show of the lab's storage (`storage:`,
//! docs/storage.md): the StorageClass the plan's renders make (and, on the
//! page, the ones the API lists), the host's NFS export with its server's state
//! and the space on it, and for LVM Storage the `oc apply` still to run.
//! Gathering does I/O; the views and their text are pure.

use std::net::IpAddr;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use ipnet::IpNet;
use serde::Serialize;
use serde_json::Value;

use crate::plan::Plan;
use crate::spec::Storage;
use crate::state::{ClusterDir, ClusterName, StateDir};

/// How many directory entries a usage walk reads at most: an export full of
/// small files is summed in part, and said so, rather than holding status up.
pub const WALK_LIMIT: usize = 100_000;

/// `status -o json`'s `storage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StorageStatus {
    pub kind: Storage,
    /// The StorageClasses the lab's manifests make (from the plan, whether or
    /// not the cluster is up yet).
    pub storage_classes: Vec<StorageClassView>,
    /// `storage: nfs`: the host's export.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export: Option<ExportStatus>,
    /// `storage: lvms`: the command that creates the LVMCluster, once the
    /// manifests target wrote it (docs/storage.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_install: Option<String>,
}

/// One StorageClass: its name, provisioner and whether it is the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StorageClassView {
    pub name: String,
    pub provisioner: String,
    pub default: bool,
}

/// The host's NFS export of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportStatus {
    pub server: IpAddr,
    /// The NFSv4 path the nodes mount.
    pub path: String,
    pub clients: IpNet,
    /// The host directory it serves.
    pub directory: PathBuf,
    /// Does its NFS server (serve's `ganesha.nfsd`) run?
    pub server_running: bool,
    /// `None` until the directory exists (serve makes it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Space on the export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// What the export's files take on disk (their allocated blocks).
    pub used_bytes: u64,
    /// False when the walk stopped at [`WALK_LIMIT`] entries: `used_bytes`
    /// is then a lower bound.
    pub used_complete: bool,
    /// Free to an unprivileged writer on the filesystem holding the export.
    pub free_bytes: u64,
    /// That filesystem's size.
    pub total_bytes: u64,
}

/// The StorageClasses among Kubernetes objects (rendered manifests or an API
/// list's items), in their order.
pub fn storage_classes<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Vec<StorageClassView> {
    objects
        .into_iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some("StorageClass"))
        .map(class_view)
        .collect()
}

/// One StorageClass object (an API list's item has no `kind`) as shown.
pub fn class_view(o: &Value) -> StorageClassView {
    StorageClassView {
        name: text(o, "/metadata/name"),
        provisioner: text(o, "/provisioner"),
        // The annotation Kubernetes reads, as the string "true".
        default: o
            .pointer("/metadata/annotations/storageclass.kubernetes.io~1is-default-class")
            .and_then(Value::as_str)
            == Some("true"),
    }
}

fn text(o: &Value, pointer: &str) -> String {
    o.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The StorageClasses the plan's storage makes: the NFS provisioner's, as
/// render::storage writes it; LVM Storage's, as the operator names it from the
/// LVMCluster's default device class (render::lvms).
pub fn planned_classes(plan: &Plan) -> Vec<StorageClassView> {
    let Some(s) = &plan.storage else {
        return Vec::new();
    };
    match (&s.kind, &s.nfs) {
        (Storage::Nfs, Some(nfs)) => {
            let objects: Vec<Value> = crate::render::storage::manifests(nfs)
                .into_iter()
                .filter_map(|(_, t)| yaml_serde::from_str(&t).ok())
                .collect();
            storage_classes(&objects)
        }
        (Storage::Lvms, _) => vec![StorageClassView {
            name: crate::render::lvms::STORAGE_CLASS.into(),
            provisioner: crate::render::lvms::PROVISIONER.into(),
            default: true,
        }],
        _ => Vec::new(),
    }
}

/// Gather the storage status of `cluster` from its plan: `None` without storage.
pub fn status(
    state: &StateDir,
    cluster: &ClusterDir,
    plan: &Plan,
) -> Result<Option<StorageStatus>> {
    let Some(s) = &plan.storage else {
        return Ok(None);
    };
    let export = match &s.nfs {
        Some(nfs) => {
            let name = ClusterName::parse(cluster.name())?;
            let directory = crate::host::nfs::data_dir(state, &name);
            Some(ExportStatus {
                server: nfs.server,
                path: nfs.path.clone(),
                clients: nfs.clients,
                server_running: crate::host::nfs::running_pid(cluster).is_some(),
                usage: usage_cached(&directory),
                directory,
            })
        }
        None => None,
    };
    let assets = cluster.assets();
    let lvm_cluster = assets.file(crate::render::lvms::LVM_CLUSTER_FILE);
    Ok(Some(StorageStatus {
        kind: s.kind,
        storage_classes: planned_classes(plan),
        export,
        post_install: (lvm_cluster.is_file() && !crate::install::lvms::applied(&assets))
            .then(|| crate::install::lvms::apply_line(&assets.kubeconfig(), &lvm_cluster)),
    }))
}

/// How long a walk's sum stands: the web page gathers status about every second
/// per open page, and a walk of a large export is not worth redoing that often
/// (the filesystem's free space is read fresh each time).
const WALK_KEPT: std::time::Duration = std::time::Duration::from_secs(30);

/// [`usage`] with the walk's sum kept for [`WALK_KEPT`] per directory.
fn usage_cached(dir: &Path) -> Option<Usage> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    use std::time::Instant;
    type Kept = HashMap<std::path::PathBuf, (Instant, u64, bool)>;
    static KEPT: OnceLock<Mutex<Kept>> = OnceLock::new();
    let kept = KEPT.get_or_init(Default::default);
    let hit = kept
        .lock()
        .ok()
        .and_then(|k| k.get(dir).copied())
        .filter(|(at, _, _)| at.elapsed() < WALK_KEPT);
    if let Some((_, used_bytes, used_complete)) = hit {
        let (free_bytes, total_bytes) = fs_space(dir)?;
        return Some(Usage {
            used_bytes,
            used_complete,
            free_bytes,
            total_bytes,
        });
    }
    let u = usage(dir, WALK_LIMIT)?;
    if let Ok(mut k) = kept.lock() {
        k.insert(
            dir.to_path_buf(),
            (Instant::now(), u.used_bytes, u.used_complete),
        );
    }
    Some(u)
}

/// The space on `dir`'s filesystem and what the files under it take, walking
/// at most `limit` entries, on that filesystem only and without following
/// links. `None` when `dir` cannot be read.
pub fn usage(dir: &Path, limit: usize) -> Option<Usage> {
    let (free_bytes, total_bytes) = fs_space(dir)?;
    let top = std::fs::symlink_metadata(dir).ok()?;
    let mut used_bytes = 0u64;
    let mut seen = 0usize;
    let mut complete = true;
    let mut stack = vec![dir.to_path_buf()];
    'walk: while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if seen >= limit {
                complete = false;
                break 'walk;
            }
            seen += 1;
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            // Blocks of 512 bytes, whatever the filesystem's block size.
            used_bytes += m.blocks() * 512;
            if m.is_dir() && m.dev() == top.dev() {
                stack.push(e.path());
            }
        }
    }
    Some(Usage {
        used_bytes,
        used_complete: complete,
        free_bytes,
        total_bytes,
    })
}

/// (free to unprivileged users, total) bytes of the filesystem holding `path`.
fn fs_space(path: &Path) -> Option<(u64, u64)> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a zeroed out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let frsize = st.f_frsize as u64;
    Some((st.f_bavail as u64 * frsize, st.f_blocks as u64 * frsize))
}

/// `1.5 GiB`: binary units, one decimal from KiB on.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

impl StorageStatus {
    /// The human form, for `status`.
    pub fn table(&self) -> String {
        let kind = match self.kind {
            Storage::None => "none",
            Storage::Nfs => "nfs",
            Storage::Lvms => "lvms",
        };
        let mut s = format!("\nstorage: {kind}\n");
        for c in &self.storage_classes {
            s.push_str(&format!(
                "  StorageClass {}{}: provisioner {}\n",
                c.name,
                if c.default { " (default)" } else { "" },
                c.provisioner
            ));
        }
        if let Some(e) = &self.export {
            s.push_str(&format!(
                "  export {}:{} to {}: server {}, directory {}\n",
                e.server,
                e.path,
                e.clients,
                if e.server_running { "up" } else { "down" },
                e.directory.display()
            ));
            match &e.usage {
                Some(u) => s.push_str(&format!(
                    "  used {}{}, {} free of {}\n",
                    bytes(u.used_bytes),
                    if u.used_complete {
                        ""
                    } else {
                        " or more (too many files to count them all)"
                    },
                    bytes(u.free_bytes),
                    bytes(u.total_bytes)
                )),
                None => s.push_str("  not made yet (serve makes it)\n"),
            }
        }
        if let Some(p) = &self.post_install {
            s.push_str(&format!(
                "  after install-complete, create the LVMCluster: {p}\n"
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn export(usage: Option<Usage>, up: bool) -> StorageStatus {
        StorageStatus {
            kind: Storage::Nfs,
            storage_classes: vec![StorageClassView {
                name: "shiftlab-nfs".into(),
                provisioner: "k8s-sigs.io/nfs-subdir-external-provisioner".into(),
                default: true,
            }],
            export: Some(ExportStatus {
                server: "192.168.126.1".parse().unwrap(),
                path: "/shiftlab/lab1".into(),
                clients: "192.168.126.0/24".parse().unwrap(),
                directory: "/var/lib/shiftlab/storage/lab1/export".into(),
                server_running: up,
                usage,
            }),
            post_install: None,
        }
    }

    #[test]
    fn the_nfs_table_names_class_export_server_and_space() {
        let u = Usage {
            used_bytes: 3 * 1024 * 1024 + 512 * 1024,
            used_complete: true,
            free_bytes: 40 * 1024 * 1024 * 1024,
            total_bytes: 100 * 1024 * 1024 * 1024,
        };
        assert_eq!(
            export(Some(u.clone()), true).table(),
            "\nstorage: nfs\n\
             \x20 StorageClass shiftlab-nfs (default): provisioner k8s-sigs.io/nfs-subdir-external-provisioner\n\
             \x20 export 192.168.126.1:/shiftlab/lab1 to 192.168.126.0/24: server up, directory /var/lib/shiftlab/storage/lab1/export\n\
             \x20 used 3.5 MiB, 40.0 GiB free of 100.0 GiB\n"
        );
        let partial = Usage {
            used_complete: false,
            ..u
        };
        let t = export(Some(partial), false).table();
        assert!(t.contains("server down"), "{t}");
        assert!(
            t.contains("used 3.5 MiB or more (too many files to count them all)"),
            "{t}"
        );
        let t = export(None, false).table();
        assert!(t.contains("not made yet"), "{t}");
    }

    #[test]
    fn the_lvms_table_says_the_apply_line() {
        let s = StorageStatus {
            kind: Storage::Lvms,
            storage_classes: vec![StorageClassView {
                name: "lvms-vg1".into(),
                provisioner: "topolvm.io".into(),
                default: true,
            }],
            export: None,
            post_install: Some(
                "oc --kubeconfig /a/auth/kubeconfig apply -f /a/lvmcluster.yaml".into(),
            ),
        };
        assert_eq!(
            s.table(),
            "\nstorage: lvms\n\
             \x20 StorageClass lvms-vg1 (default): provisioner topolvm.io\n\
             \x20 after install-complete, create the LVMCluster: oc --kubeconfig /a/auth/kubeconfig apply -f /a/lvmcluster.yaml\n"
        );
    }

    #[test]
    fn storage_classes_are_read_from_objects_default_by_its_annotation() {
        let objs = [
            json!({"kind": "Namespace", "metadata": {"name": "x"}}),
            json!({"kind": "StorageClass", "metadata": {"name": "a",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                "provisioner": "p.io"}),
            json!({"kind": "StorageClass", "metadata": {"name": "b",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "false"}},
                "provisioner": "q.io"}),
        ];
        assert_eq!(
            storage_classes(&objs),
            vec![
                StorageClassView {
                    name: "a".into(),
                    provisioner: "p.io".into(),
                    default: true
                },
                StorageClassView {
                    name: "b".into(),
                    provisioner: "q.io".into(),
                    default: false
                },
            ]
        );
    }

    #[test]
    fn the_plans_classes_are_the_rendered_ones() {
        let text =
            "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\nstorage: nfs\n";
        let s = crate::spec::from_str(text, "t.yaml", &crate::spec::Env::default())
            .unwrap()
            .spec;
        let c = planned_classes(&crate::plan::derive(&s));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, crate::render::storage::STORAGE_CLASS);
        assert_eq!(c[0].provisioner, crate::render::storage::PROVISIONER);
        assert!(c[0].default);
    }

    #[test]
    fn usage_sums_the_files_and_stops_at_its_bound() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("default-claim-pv1");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("data"), vec![7u8; 256 * 1024]).unwrap();
        std::fs::write(d.path().join("small"), b"x").unwrap();
        std::os::unix::fs::symlink("/", d.path().join("root-link")).unwrap();
        let u = usage(d.path(), WALK_LIMIT).unwrap();
        assert!(u.used_complete);
        // The 256 KiB file at least, not what the link points to.
        assert!(u.used_bytes >= 256 * 1024, "{u:?}");
        assert!(u.used_bytes < 16 * 1024 * 1024, "{u:?}");
        assert!(u.total_bytes >= u.free_bytes && u.total_bytes > 0, "{u:?}");
        let u = usage(d.path(), 2).unwrap();
        assert!(!u.used_complete, "{u:?}");
        assert_eq!(usage(&d.path().join("missing"), WALK_LIMIT), None);
    }

    #[test]
    fn the_walks_sum_is_kept_a_while_the_free_space_is_not() {
        let d = tempfile::tempdir().unwrap();
        let first = usage_cached(d.path()).unwrap();
        std::fs::write(d.path().join("big"), vec![7u8; 256 * 1024]).unwrap();
        let again = usage_cached(d.path()).unwrap();
        assert_eq!(
            again.used_bytes, first.used_bytes,
            "the sum was walked again"
        );
        assert!(usage(d.path(), WALK_LIMIT).unwrap().used_bytes >= first.used_bytes + 256 * 1024);
    }

    #[test]
    fn bytes_are_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(5 * 1024 * 1024 * 1024 * 1024), "5.0 TiB");
    }
}
