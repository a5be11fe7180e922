//! `storage:`: which persistent storage the lab brings (docs/storage.md), and
//! what each kind needs of the rest of the file.

use super::super::diag::Diagnostics;
use super::super::parse::RawSpec;
use super::super::types::{BackendKind, Distribution, Storage};
use super::sizes::Sizes;
use super::topology::Topology;

pub fn resolve(
    raw: &RawSpec,
    distribution: Distribution,
    backend: BackendKind,
    topo: &Topology,
    sizes: &Sizes,
    d: &mut Diagnostics,
) -> Storage {
    let storage = super::pick(
        &[
            ("none", Storage::None),
            ("nfs", Storage::Nfs),
            ("lvms", Storage::Lvms),
        ],
        &raw.storage,
        Storage::None,
        d,
    );
    let Some(field) = raw.storage.as_ref().map(|s| s.field.as_str()) else {
        return storage;
    };
    match storage {
        Storage::None => {}
        Storage::Nfs => {
            if backend == BackendKind::Kubevirt {
                d.error(
                    field,
                    "\"nfs\" is exported by the libvirt host on the lab network's gateway; \
                     with backend: kubevirt the nodes are pods on another cluster's network \
                     and that export does not exist: use storage: none (and a provisioner \
                     of your own through manifests:)",
                );
            }
        }
        Storage::Lvms => {
            // LVM Storage makes volumes on the disks of the nodes that run the
            // workloads: the workers, or the control planes when there are none.
            let (role, size) = if topo.workers > 0 {
                ("worker", &sizes.worker)
            } else {
                ("ctlplane", &sizes.ctlplane)
            };
            if size.extra_disks.is_empty() {
                d.error(
                    field,
                    format!(
                        "\"lvms\" needs empty disks on every node that runs workloads \
                         (here the {role} nodes): set {role}.extra_disks (or extra_disks), \
                         e.g. [100]; the LVM Storage operator puts its volume group on them"
                    ),
                );
            }
            if distribution == Distribution::Okd {
                d.error(
                    field,
                    "\"lvms\" installs the LVM Storage operator from Red Hat's \
                     redhat-operators catalog, which OKD clusters do not have (OKD's \
                     community catalog, okd-project/okderators-catalog-index, is not wired \
                     by shiftlab): use storage: nfs",
                );
            }
            // The operator's own manifests (OLM Subscription, LVMCluster) are not
            // rendered yet: refusing beats an install whose registry waits forever
            // for a StorageClass nobody makes.
            d.error(
                field,
                "\"lvms\" is not rendered by shiftlab yet (the LVM Storage operator's \
                 Subscription and LVMCluster): use storage: nfs or none",
            );
        }
    }
    storage
}

#[cfg(test)]
mod tests {
    use crate::spec::{self, Env};

    fn errors(extra: &str) -> Vec<(String, String)> {
        let text =
            format!("cluster: lab1\ndistribution: ocp\nssh_keys: ['ssh-ed25519 AAAA k']\n{extra}");
        match spec::from_str(&text, "t.yaml", &Env::default()) {
            Ok(_) => vec![],
            Err(e) => e.errors.into_iter().map(|d| (d.field, d.message)).collect(),
        }
    }

    #[test]
    fn nfs_and_none_pass_on_libvirt() {
        for s in ["none", "nfs"] {
            let e = errors(&format!("storage: {s}\n"));
            assert!(!e.iter().any(|(f, _)| f == "storage"), "{s}: {e:?}");
        }
    }

    #[test]
    fn an_unknown_kind_names_the_valid_ones() {
        let e = errors("storage: ceph\n");
        assert!(
            e.iter().any(|(f, m)| f == "storage"
                && m.contains("\"ceph\"")
                && m.contains("none, nfs, lvms")),
            "{e:?}"
        );
    }

    #[test]
    fn lvms_without_extra_disks_names_the_role() {
        let e = errors("storage: lvms\nworkers: 2\n");
        assert!(
            e.iter().any(|(f, m)| f == "storage"
                && m.contains("worker nodes")
                && m.contains("worker.extra_disks")),
            "{e:?}"
        );
        let e = errors("storage: lvms\nworkers: 0\n");
        assert!(
            e.iter()
                .any(|(f, m)| f == "storage" && m.contains("ctlplane.extra_disks")),
            "{e:?}"
        );
        let e = errors("storage: lvms\nworkers: 2\nworker:\n  extra_disks: [100]\n");
        assert!(!e.iter().any(|(_, m)| m.contains("extra_disks")), "{e:?}");
    }

    #[test]
    fn lvms_on_okd_is_refused_naming_nfs() {
        let text = "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\nstorage: lvms\nextra_disks: [100]\n";
        let e = spec::from_str(text, "t.yaml", &Env::default()).unwrap_err();
        assert!(
            e.errors.iter().any(|d| d.field == "storage"
                && d.message.contains("redhat-operators")
                && d.message.contains("storage: nfs")),
            "{e:?}"
        );
    }
}
