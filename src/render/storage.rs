//! `storage: nfs` in the cluster: a provisioner that makes a directory on the
//! host's export for each claim, and the default StorageClass that names it.
//! Pure: each object is one `openshift/99-shiftlab-storage-*.yaml` manifest, so
//! cluster-bootstrap creates it with the cluster (golden: tests/golden.rs).
//!
//! **Which provisioner.** kubernetes-sigs/nfs-subdir-external-provisioner, not
//! kubernetes-csi/csi-driver-nfs:
//!
//! - It is one Deployment of one container. The provisioner mounts the export as a
//!   plain `nfs` volume and makes `<namespace>-<claim>-<pv>` directories in it; the
//!   volumes it hands out are in-tree `nfs` PersistentVolumes that the kubelet
//!   mounts with the node's own `mount.nfs` (RHCOS, SCOS and FCOS ship the NFS
//!   client). csi-driver-nfs needs a privileged controller (it mounts inside its
//!   container) and a privileged, host-network node DaemonSet with bidirectional
//!   mount propagation on every node, i.e. the `privileged` SCC, and five images
//!   (nfsplugin, csi-provisioner, csi-snapshotter, livenessprobe,
//!   node-driver-registrar) to pin instead of one.
//! - OpenShift's `restricted-v2` SCC allows only configMap, downwardAPI, emptyDir,
//!   ephemeral, persistentVolumeClaim, projected and secret volumes: not `nfs`.
//!   The provisioner's own pod needs `hostmount-anyuid` (which allows `nfs` and
//!   any uid; the upstream README's OpenShift note grants exactly that), bound to
//!   its service account in its namespace only and asked for by the pod
//!   (`openshift.io/required-scc`). Pods that use a claim mount a
//!   `persistentVolumeClaim` volume, which `restricted-v2` allows.
//! - It creates directories as root, so the export must not squash root
//!   (src/host: the export's options).
//!
//! The image is v4.0.2, the last release, pinned by the digest its registry served
//! (recorded as the image ID of running pods in public cluster listings, both from
//! k8s.gcr.io in 2021 and from registry.k8s.io since; docs/storage.md).

use serde_json::{json, Value};

use crate::plan::storage::NfsExport;

/// The namespace the provisioner runs in.
pub const NAMESPACE: &str = "shiftlab-nfs-provisioner";
/// Its service account, deployment and RBAC objects' name.
pub const NAME: &str = "nfs-provisioner";
/// The provisioner name the StorageClass and the deployment agree on (upstream's
/// default `PROVISIONER_NAME`).
pub const PROVISIONER: &str = "k8s-sigs.io/nfs-subdir-external-provisioner";
/// The default StorageClass.
pub const STORAGE_CLASS: &str = "shiftlab-nfs";
/// nfs-subdir-external-provisioner v4.0.2, by digest.
pub const IMAGE: &str = "registry.k8s.io/sig-storage/nfs-subdir-external-provisioner:v4.0.2@sha256:63d5e04551ec8b5aae83b6f35938ca5ddc50a88d85492d9731810c31591fa4c9";
/// The SCC the provisioner's pod needs for its `nfs` volume.
pub const SCC: &str = "hostmount-anyuid";
/// NFSv4.1: the export is NFSv4 only and the host firewall opens 2049 alone, so
/// no mount may fall back to v3 (rpcbind, mountd).
pub const NFS_VERSION: &str = "nfsvers=4.1";

/// The provisioner's objects and the default StorageClass, by manifest path.
pub fn manifests(nfs: &NfsExport) -> Vec<(&'static str, String)> {
    let labels =
        json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": "shiftlab"});
    let sa = json!([{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]);
    let objects: Vec<(&'static str, Value)> = vec![
        (
            "openshift/99-shiftlab-storage-namespace.yaml",
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": NAMESPACE,
                    "labels": {
                        // baseline admits a root pod with an nfs volume; set here so
                        // OpenShift's label syncer leaves the namespace alone.
                        "pod-security.kubernetes.io/enforce": "baseline",
                        "pod-security.kubernetes.io/audit": "baseline",
                        "pod-security.kubernetes.io/warn": "baseline",
                        "security.openshift.io/scc.podSecurityLabelSync": "false",
                    },
                },
            }),
        ),
        (
            "openshift/99-shiftlab-storage-serviceaccount.yaml",
            json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": NAME, "namespace": NAMESPACE},
            }),
        ),
        // Upstream's deploy/rbac.yaml, named for shiftlab.
        (
            "openshift/99-shiftlab-storage-clusterrole.yaml",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "shiftlab-nfs-provisioner"},
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "watch", "create", "delete"]},
                    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "watch", "update"]},
                    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "update", "patch"]},
                ],
            }),
        ),
        (
            "openshift/99-shiftlab-storage-clusterrolebinding.yaml",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "shiftlab-nfs-provisioner"},
                "subjects": sa,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "shiftlab-nfs-provisioner"},
            }),
        ),
        (
            "openshift/99-shiftlab-storage-role.yaml",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "leader-locking-nfs-provisioner", "namespace": NAMESPACE},
                "rules": [
                    {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get", "list", "watch", "create", "update", "patch"]},
                    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
                ],
            }),
        ),
        (
            "openshift/99-shiftlab-storage-rolebinding.yaml",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "leader-locking-nfs-provisioner", "namespace": NAMESPACE},
                "subjects": sa,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leader-locking-nfs-provisioner"},
            }),
        ),
        // Using an SCC is RBAC's `use` verb on it; OpenShift keeps one ClusterRole
        // per default SCC (`system:openshift:scc:<name>`), bound here in the
        // provisioner's namespace only.
        (
            "openshift/99-shiftlab-storage-scc.yaml",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": format!("nfs-provisioner-scc-{SCC}"), "namespace": NAMESPACE},
                "subjects": sa,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("system:openshift:scc:{SCC}")},
            }),
        ),
        (
            "openshift/99-shiftlab-storage-deployment.yaml",
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
                "spec": {
                    "replicas": 1,
                    // One provisioner at a time (upstream's strategy).
                    "strategy": {"type": "Recreate"},
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {
                            "labels": labels,
                            "annotations": {"openshift.io/required-scc": SCC},
                        },
                        "spec": {
                            "serviceAccountName": NAME,
                            "containers": [{
                                "name": NAME,
                                "image": IMAGE,
                                "env": [
                                    {"name": "PROVISIONER_NAME", "value": PROVISIONER},
                                    {"name": "NFS_SERVER", "value": nfs.server.to_string()},
                                    {"name": "NFS_PATH", "value": nfs.path},
                                ],
                                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                                "volumeMounts": [{"name": "export", "mountPath": "/persistentvolumes"}],
                            }],
                            "volumes": [{
                                "name": "export",
                                "nfs": {"server": nfs.server.to_string(), "path": nfs.path},
                            }],
                        },
                    },
                },
            }),
        ),
        (
            "openshift/99-shiftlab-storage-storageclass.yaml",
            json!({
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {
                    "name": STORAGE_CLASS,
                    "annotations": {
                        "storageclass.kubernetes.io/is-default-class": "true",
                        "shiftlab.io/nfs-export": format!("{}:{}", nfs.server, nfs.path),
                    },
                },
                "provisioner": PROVISIONER,
                // A released claim's directory is removed, not archived: a lab's
                // data lives as long as its claims (destroy --purge-storage for the rest).
                "parameters": {"archiveOnDelete": "false"},
                "mountOptions": [NFS_VERSION],
                "reclaimPolicy": "Delete",
                "volumeBindingMode": "Immediate",
            }),
        ),
    ];
    objects
        .into_iter()
        .map(|(path, o)| {
            (
                path,
                yaml_serde::to_string(&o).expect("a JSON value serialises"),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export() -> NfsExport {
        NfsExport {
            server: "192.168.126.1".parse().unwrap(),
            path: "/shiftlab/lab1".into(),
            clients: "192.168.126.0/24".parse().unwrap(),
        }
    }

    fn objects() -> Vec<(&'static str, yaml_serde::Value)> {
        manifests(&export())
            .into_iter()
            .map(|(p, t)| (p, yaml_serde::from_str(&t).unwrap()))
            .collect()
    }

    fn kind<'a>(o: &'a [(&'static str, yaml_serde::Value)], k: &str) -> Vec<&'a yaml_serde::Value> {
        o.iter()
            .filter(|(_, v)| v["kind"] == k)
            .map(|(_, v)| v)
            .collect()
    }

    #[test]
    fn the_provisioner_mounts_the_plans_export_and_the_default_class_names_it() {
        let o = objects();
        for (p, _) in &o {
            assert!(
                p.starts_with("openshift/99-shiftlab-storage-") && p.ends_with(".yaml"),
                "{p}"
            );
        }
        let d = kind(&o, "Deployment")[0];
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["volumes"][0]["nfs"]["server"], "192.168.126.1");
        assert_eq!(pod["volumes"][0]["nfs"]["path"], "/shiftlab/lab1");
        let env = &pod["containers"][0]["env"];
        let var = |n: &str| {
            env.as_sequence()
                .unwrap()
                .iter()
                .find(|e| e["name"] == n)
                .map(|e| e["value"].as_str().unwrap().to_string())
        };
        assert_eq!(var("NFS_SERVER").as_deref(), Some("192.168.126.1"));
        assert_eq!(var("NFS_PATH").as_deref(), Some("/shiftlab/lab1"));
        assert_eq!(var("PROVISIONER_NAME").as_deref(), Some(PROVISIONER));
        let image = pod["containers"][0]["image"].as_str().unwrap();
        let digest = image.split_once("@sha256:").unwrap().1;
        assert!(digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            d["spec"]["template"]["metadata"]["annotations"]["openshift.io/required-scc"],
            SCC
        );
        let sc = kind(&o, "StorageClass")[0];
        assert_eq!(sc["provisioner"], PROVISIONER);
        assert_eq!(
            sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
            "true"
        );
        assert_eq!(
            sc["metadata"]["annotations"]["shiftlab.io/nfs-export"],
            "192.168.126.1:/shiftlab/lab1"
        );
        assert_eq!(sc["mountOptions"][0], NFS_VERSION);
    }

    #[test]
    fn the_service_account_is_bound_to_its_roles_and_the_scc_in_its_namespace() {
        let o = objects();
        let ns = kind(&o, "Namespace")[0];
        assert_eq!(ns["metadata"]["name"], NAMESPACE);
        let sa = kind(&o, "ServiceAccount")[0];
        assert_eq!(sa["metadata"]["namespace"], NAMESPACE);
        let bindings: Vec<_> = kind(&o, "RoleBinding")
            .into_iter()
            .chain(kind(&o, "ClusterRoleBinding"))
            .collect();
        assert_eq!(bindings.len(), 3);
        for b in &bindings {
            assert_eq!(b["subjects"][0]["name"], NAME);
            assert_eq!(b["subjects"][0]["namespace"], NAMESPACE);
        }
        assert!(bindings.iter().any(|b| b["kind"] == "RoleBinding"
            && b["roleRef"]["name"] == format!("system:openshift:scc:{SCC}").as_str()));
        let cr = kind(&o, "ClusterRole")[0];
        assert!(cr["rules"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|r| r["resources"][0] == "persistentvolumes"
                && r["verbs"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .any(|v| v == "create")));
    }
}
