//! `storage:`: which persistent storage the lab brings (docs/storage.md), and
//! what each kind needs of the rest of the file.

use super::super::diag::Diagnostics;
use super::super::parse::RawSpec;
use super::super::types::{BackendKind, Capabilities, Distribution, NetworkMode, Storage};
use super::sizes::Sizes;
use super::topology::Topology;

pub fn resolve(
    raw: &RawSpec,
    id: &super::identity::Identity,
    capabilities: Option<&Capabilities>,
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
    let (distribution, version) = (id.distribution, &id.version);
    let Some(field) = raw.storage.as_ref().map(|s| s.field.as_str()) else {
        return storage;
    };
    match storage {
        Storage::None => {}
        // Where the export is served from: nfs_served_here.
        Storage::Nfs => {}
        Storage::Lvms => {
            // LVM Storage puts its volume group on the unused disks of every node
            // without a NoSchedule taint (render::lvms: the LVMCluster names no
            // nodeSelector): the workers, or the control planes when there are none.
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
                     redhat-operators catalog, which OKD clusters do not have; the \
                     community catalog OKD ships (community-operators) has no \
                     lvms-operator, and OKD's own build of it \
                     (okd-project/okderators-catalog-index) is no catalog an OKD \
                     cluster has by default: use storage: nfs",
                );
            }
            // OLM and its catalogs are capabilities: without them the
            // Subscription is never resolved.
            if let Some(m) = super::versions::minor(version) {
                for cap in ["OperatorLifecycleManager", "marketplace"] {
                    if !super::capabilities::enabled(capabilities, cap, m) {
                        d.error(
                            field,
                            format!(
                                "\"lvms\" installs the LVM Storage operator through OLM's \
                                 Subscription, and capability {cap} is off: add it to \
                                 capabilities.additional_enabled_capabilities"
                            ),
                        );
                    }
                }
            }
            // Every release shiftlab installs (4.14 on) has lvms-operator in its catalog.
            if super::versions::minor(version).is_none() {
                d.error(
                    field,
                    format!(
                        "\"lvms\" subscribes to the operator's channel stable-4.<minor>, \
                         and version {version} names no minor: give version as 4.N, \
                         4.N.z or stable-4.N"
                    ),
                );
            }
        }
    }
    storage
}

/// `storage: nfs` is served by this host on the lab network's gateway: refused
/// where the nodes' gateway is not this host.
pub fn nfs_served_here(
    raw: &RawSpec,
    storage: Storage,
    backend: BackendKind,
    mode: NetworkMode,
    d: &mut Diagnostics,
) {
    let Some(field) = raw.storage.as_ref().map(|s| s.field.as_str()) else {
        return;
    };
    if storage != Storage::Nfs {
        return;
    }
    if backend == BackendKind::Kubevirt {
        d.error(
            field,
            "\"nfs\" is exported by the libvirt host on the lab network's gateway; \
             with backend: kubevirt the nodes are pods on another cluster's network \
             and that export does not exist: use storage: none (and a provisioner \
             of your own through manifests:)",
        );
    } else if mode == NetworkMode::Bridge {
        // The export is served on the lab network's gateway, which on an
        // existing bridge is the LAN's router, not this host.
        d.error(
            field,
            "\"nfs\" is exported by this host on the lab network's gateway; with \
             network.mode: bridge the gateway is the LAN's router, not this host: \
             use storage: none (and an NFS server of your LAN through manifests:)",
        );
    }
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
    fn nfs_on_a_host_bridge_is_refused_the_gateway_is_not_this_host() {
        let e = errors("storage: nfs\nnetwork: {mode: bridge, bridge: br0}\n");
        assert!(
            e.iter().any(|(f, m)| f == "storage"
                && m.contains("network.mode: bridge the gateway is the LAN's router")),
            "{e:?}"
        );
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
    fn lvms_on_ocp_needs_a_version_with_a_minor() {
        let disks = "storage: lvms\nworkers: 2\nworker:\n  extra_disks: [100]\n";
        let on = |v: &str| -> Vec<String> {
            errors(&format!("version: {v}\n{disks}"))
                .into_iter()
                .filter(|(f, _)| f == "storage")
                .map(|(_, m)| m)
                .collect()
        };
        for v in ["'4.18'", "4.16.3", "stable-4.20"] {
            assert_eq!(on(v), Vec::<String>::new(), "{v}");
        }
        let e = errors(&format!(
            "version: '4.18'\ncapabilities:\n  baseline_capability_set: None\n{disks}"
        ));
        for cap in ["OperatorLifecycleManager", "marketplace"] {
            assert!(
                e.iter().any(|(f, m)| f == "storage" && m.contains(cap)),
                "{cap}: {e:?}"
            );
        }
        let e = on("stable");
        assert!(
            e.len() == 1 && e[0].contains("stable-4.<minor>") && e[0].contains("names no minor"),
            "{e:?}"
        );
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
