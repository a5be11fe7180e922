//! `storage: lvms`: the LVM Storage operator (openshift/lvm-operator) through
//! OLM, and the `LVMCluster` that makes its volume group and StorageClass. Pure
//! (golden and schema tests: tests/lvms_schema.rs).
//!
//! - **Install-time** (`openshift/99-shiftlab-lvms-*.yaml`, created by
//!   cluster-bootstrap with the cluster; it retries until OLM serves its CRDs):
//!   the operator's Namespace, an OwnNamespace OperatorGroup (the CSV supports
//!   OwnNamespace and SingleNamespace only) and the Subscription to
//!   `lvms-operator` in `redhat-operators`, channel `stable-4.<minor>` (the
//!   package has one channel per release, no plain `stable`).
//! - **After install** (`<assets>/lvmcluster.yaml`): the `LVMCluster`'s CRD
//!   arrives with the operator, so no install-time manifest can create one; the
//!   manifests target writes it, with the registry's and monitoring's claims on
//!   its class ([`after_install`]), and says the `oc apply` and registry `oc
//!   patch` line.
//!
//! The namespace is the CSV's `operatorframework.io/suggested-namespace`:
//! `openshift-storage` up to 4.19, `openshift-lvm-storage` from 4.20
//! (openshift/lvm-operator ab054382 "change default namespace", first in v4.20.0).
//!
//! Which disks: the `LVMCluster` names no `deviceSelector`, so LVMS takes every
//! unused disk (`extra_disks`), and no `nodeSelector`, so "all nodes without
//! no-schedule taints are considered" (its CRD): the workers, or the control
//! planes of a compact cluster or SNO (schedulable there, render::manifests).
//! spec::resolve::storage asks `extra_disks` of exactly those nodes.

use serde_json::{json, Value};

/// The OLM package.
pub const PACKAGE: &str = "lvms-operator";
/// Red Hat's catalog that carries it (OCP only).
pub const SOURCE: &str = "redhat-operators";
/// The minor whose CSV moved the operator to `openshift-lvm-storage`.
const NEW_NAMESPACE_SINCE: u32 = 20;
/// The one device class, and so the StorageClass `lvms-vg1` (LVMS names it
/// `lvms-<device class>`, its provisioner `topolvm.io`).
pub const DEVICE_CLASS: &str = "vg1";
pub const STORAGE_CLASS: &str = "lvms-vg1";
pub const PROVISIONER: &str = "topolvm.io";
/// The `LVMCluster`'s name.
pub const LVM_CLUSTER: &str = "shiftlab";
/// Where the manifests target writes it, in the asset directory.
pub const LVM_CLUSTER_FILE: &str = "lvmcluster.yaml";

/// The operator's namespace at release `4.<minor>`.
pub fn namespace(minor: u32) -> &'static str {
    if minor >= NEW_NAMESPACE_SINCE {
        "openshift-lvm-storage"
    } else {
        "openshift-storage"
    }
}

/// The Subscription's channel.
pub fn channel(minor: u32) -> String {
    format!("stable-4.{minor}")
}

fn yaml(v: &Value) -> String {
    yaml_serde::to_string(v).expect("a JSON value serialises")
}

/// The install-time manifests, by path.
pub fn manifests(minor: u32) -> Vec<(&'static str, String)> {
    let ns = namespace(minor);
    vec![
        (
            "openshift/99-shiftlab-lvms-namespace.yaml",
            yaml(&json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": ns,
                    // The CSV's suggested-namespace-template.
                    "annotations": {"workload.openshift.io/allowed": "management"},
                },
            })),
        ),
        (
            "openshift/99-shiftlab-lvms-operatorgroup.yaml",
            yaml(&json!({
                "apiVersion": "operators.coreos.com/v1",
                "kind": "OperatorGroup",
                "metadata": {"name": "lvms-operator", "namespace": ns},
                "spec": {"targetNamespaces": [ns]},
            })),
        ),
        (
            "openshift/99-shiftlab-lvms-subscription.yaml",
            yaml(&json!({
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "Subscription",
                "metadata": {"name": PACKAGE, "namespace": ns},
                "spec": {
                    "name": PACKAGE,
                    "channel": channel(minor),
                    "source": SOURCE,
                    "sourceNamespace": "openshift-marketplace",
                    "installPlanApproval": "Automatic",
                },
            })),
        ),
    ]
}

/// The install-time manifests of `spec`: none unless `storage: lvms` (whose
/// version names a minor: spec::resolve::storage refuses one that does not).
pub fn lab(spec: &crate::spec::ClusterSpec) -> Vec<(&'static str, String)> {
    match (spec.storage, crate::spec::version_minor(&spec.version)) {
        (crate::spec::Storage::Lvms, Some(minor)) => manifests(minor),
        _ => Vec::new(),
    }
}

/// What `storage: lvms` applies after the install, one file: the `LVMCluster`,
/// then the registry's claim and the monitoring claims on its class (at install
/// the registry is on emptyDir and monitoring without claims:
/// render::manifests, render::monitoring). The registry itself is moved by
/// [`super::manifests::LVMS_REGISTRY_PATCH`].
pub fn after_install(spec: &crate::spec::ClusterSpec, minor: u32) -> String {
    [
        lvm_cluster(minor),
        super::manifests::lvms_registry_claim(),
        super::monitoring::lvms_after_install(spec),
    ]
    .join("---\n")
}

/// The `LVMCluster`: one default device class on every unused disk, thin
/// provisioned (LVMS's own sample: 90% of the group, overprovision 10).
pub fn lvm_cluster(minor: u32) -> String {
    yaml(&json!({
        "apiVersion": "lvm.topolvm.io/v1alpha1",
        "kind": "LVMCluster",
        "metadata": {"name": LVM_CLUSTER, "namespace": namespace(minor)},
        "spec": {
            "storage": {
                "deviceClasses": [{
                    "name": DEVICE_CLASS,
                    "default": true,
                    "fstype": "xfs",
                    "thinPoolConfig": {
                        "name": "thin-pool-1",
                        "sizePercent": 90,
                        "overprovisionRatio": 10,
                    },
                }],
            },
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_and_channel_follow_the_release() {
        let m = manifests(18);
        let sub: Value = yaml_serde::from_str(&m[2].1).unwrap();
        assert_eq!(sub["spec"]["channel"], "stable-4.18");
        assert_eq!(sub["metadata"]["namespace"], "openshift-storage");
        let m = manifests(20);
        for (_, t) in &m {
            let v: Value = yaml_serde::from_str(t).unwrap();
            let ns = v["metadata"]["namespace"]
                .as_str()
                .or(v["metadata"]["name"].as_str());
            assert_eq!(ns, Some("openshift-lvm-storage"), "{t}");
        }
        let c: Value = yaml_serde::from_str(&lvm_cluster(20)).unwrap();
        assert_eq!(c["metadata"]["namespace"], "openshift-lvm-storage");
        assert_eq!(c["spec"]["storage"]["deviceClasses"][0]["default"], true);
    }
}
