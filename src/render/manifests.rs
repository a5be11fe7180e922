//! The manifests a lab adds to what `openshift-install create manifests` writes,
//! by their path in the asset directory. Pure: a golden test pins each.
//!
//! Every rule names where it comes from:
//!
//! - **Image registry.** On `platform: none` the registry has no storage, and the
//!   operator takes `spec.replicas` as it is: without `replicas` it runs 0 pods
//!   and reports `Available=False`, so `wait-for install-complete` never ends
//!   (openshift/cluster-image-registry-operator, pkg/resource/deployment.go uses
//!   `cr.Spec.Replicas`). kcli's UPI manifest (kcli, kvirt/cluster/openshift) sets
//!   `managementState: Managed`, `storage.emptyDir` and `replicas: 1`. The
//!   `Config` kind only exists when the `ImageRegistry` capability is enabled
//!   (a capability since 4.14: openshift/api config/v1
//!   types_cluster_version.go, `ClusterVersionCapabilitySet4_14` is the first set
//!   naming it); a manifest of a kind nobody serves keeps cluster-bootstrap
//!   retrying, so it is left out then.
//! - **Registry storage.** With `storage:` the registry keeps its images on a claim
//!   instead of emptyDir (openshift/cluster-image-registry-operator,
//!   pkg/storage/pvc/pvc.go). NFS: `pvc.claim: ""` makes the operator create its
//!   own ReadWriteMany claim of 100Gi on the default StorageClass, and RWX
//!   allows any replica count. With 2 replicas the operator requires the pods on
//!   different hosts (podtemplatespec.go: required anti-affinity on
//!   `kubernetes.io/hostname`, plus topology spread over the hostname and the worker
//!   role), so 2 only when the nodes it schedules to (the workers, or the
//!   schedulable control planes without workers) are at least 2, else 1. LVM
//!   Storage is ReadWriteOnce: pvc.go refuses RWO with more than one replica or
//!   any strategy but `Recreate`, and the claim the operator would make is RWX, so
//!   shiftlab renders its own RWO claim and names it.
//! - **Scheduler.** The installer makes control planes schedulable exactly when
//!   the compute pools ask for 0 replicas (openshift/installer,
//!   pkg/asset/manifests/scheduler.go), and UPI's install-config always asks for
//!   0 (shiftlab makes the workers, not a MachineSet). With workers, shiftlab
//!   writes `mastersSchedulable: false` (openshift/installer
//!   docs/user/*/install_upi.md, "Make control-plane nodes unschedulable").
//! - **Routers.** A schedulable control plane carries the worker role
//!   (openshift/machine-config-operator, pkg/controller/node: the worker label is
//!   added to masters while `mastersSchedulable` is true), so the default
//!   IngressController's routers (default node selector: the worker role,
//!   openshift/cluster-ingress-operator pkg/operator/controller/ingress
//!   deployment.go) can land there while the load balancer sends `*.apps` to the
//!   workers. With workers, the default IngressController is pinned to the role
//!   the load balancer targets (`node-role.kubernetes.io/worker`), as openshift/release
//!   does for its own UPI jobs (ci-operator step registry,
//!   `manifest_cluster-ingress-default-ingresscontroller.yaml`). On `platform:
//!   none` routers use the HostNetwork strategy (cluster-ingress-operator,
//!   ingress controller.go, `setDefaultPublishingStrategy`): one router per node,
//!   so one worker means one replica, else the second one never schedules.

use serde_json::json;

use crate::plan::Plan;
use crate::spec::{ClusterSpec, Storage};

/// Where the image-registry manifest goes.
pub const IMAGE_REGISTRY: &str = "openshift/99-shiftlab-image-registry.yaml";
/// `storage: lvms`: the registry's own claim's name, in `openshift-image-registry`.
pub const IMAGE_REGISTRY_CLAIM_NAME: &str = "shiftlab-image-registry";
/// The installer's scheduler manifest, overwritten.
pub const SCHEDULER: &str = "manifests/cluster-scheduler-02-config.yml";
/// The default IngressController, pinned.
pub const INGRESS: &str = "openshift/99-shiftlab-ingress-controller.yaml";

/// The label of the nodes the ingress load balancer sends `*.apps` to when the
/// cluster has workers (src/render/haproxy.rs: the workers, else the control planes).
pub const WORKER_ROLE: &str = "node-role.kubernetes.io/worker";

/// Is the `ImageRegistry` capability enabled? The one capability table
/// (`spec::capability_enabled`) says, for the cluster's release: before 4.14 the
/// registry is no capability and always there.
pub fn image_registry_enabled(spec: &ClusterSpec) -> bool {
    // A channel (`stable`) is held to the newest rules.
    let minor = crate::spec::version_minor(&spec.version).unwrap_or(u32::MAX);
    crate::spec::capability_enabled(spec.capabilities.as_ref(), "ImageRegistry", minor)
}

/// Are the control planes schedulable in the cluster shiftlab makes? Only when
/// there are no workers (a compact cluster or a single node).
pub fn masters_schedulable(spec: &ClusterSpec) -> bool {
    spec.workers == 0
}

/// How many registry replicas the topology allows on ReadWriteMany storage: one
/// per node it can schedule to, at most 2 (the operator's anti-affinity).
pub fn registry_replicas(spec: &ClusterSpec) -> u32 {
    let nodes = if spec.workers > 0 {
        spec.workers
    } else {
        spec.ctlplanes
    };
    nodes.clamp(1, 2)
}

/// The image registry's `Config`. With `storage: lvms` it starts on emptyDir as
/// without storage: LVMS's StorageClass exists only once its `LVMCluster` is
/// applied after the install (src/install/lvms.rs), and a registry waiting on a
/// claim that cannot bind keeps its operator unavailable, so the install never
/// completes; [`lvms_registry_claim`] and [`LVMS_REGISTRY_PATCH`] move it then.
fn image_registry(spec: &ClusterSpec) -> Vec<(&'static str, String)> {
    let spec_json = match spec.storage {
        Storage::None | Storage::Lvms => {
            json!({"managementState": "Managed", "replicas": 1, "storage": {"emptyDir": {}}})
        }
        Storage::Nfs => json!({
            "managementState": "Managed",
            "replicas": registry_replicas(spec),
            "storage": {"pvc": {"claim": ""}},
        }),
    };
    let config = json!({
        "apiVersion": "imageregistry.operator.openshift.io/v1",
        "kind": "Config",
        "metadata": {"name": "cluster"},
        "spec": spec_json,
    });
    vec![(
        IMAGE_REGISTRY,
        yaml_serde::to_string(&config).expect("a JSON value serialises"),
    )]
}

/// `storage: lvms`, after the install: the registry's own ReadWriteOnce claim on
/// LVMS's class (named: before Kubernetes 1.28 a claim made before a default
/// class exists never gets one).
pub fn lvms_registry_claim() -> String {
    let claim = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": IMAGE_REGISTRY_CLAIM_NAME, "namespace": "openshift-image-registry"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": super::lvms::STORAGE_CLASS,
            "resources": {"requests": {"storage": "100Gi"}},
        },
    });
    yaml_serde::to_string(&claim).expect("a JSON value serialises")
}

/// `storage: lvms`, after the install: the registry moved from emptyDir to its
/// claim, one replica recreated (a ReadWriteOnce volume cannot be shared by
/// two pods during a rolling update). A merge patch, as OpenShift's docs do it:
/// `emptyDir: null` removes the install-time storage (two kinds of storage at
/// once are refused by the operator).
pub const LVMS_REGISTRY_PATCH: &str = r#"{"spec":{"replicas":1,"rolloutStrategy":"Recreate","storage":{"emptyDir":null,"pvc":{"claim":"shiftlab-image-registry"}}}}"#;

/// The manifests the lab adds, by their path in the asset directory.
pub fn lab_manifests(spec: &ClusterSpec, plan: &Plan) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if image_registry_enabled(spec) {
        out.extend(image_registry(spec));
    }
    out.push((
        SCHEDULER,
        format!(
            "apiVersion: config.openshift.io/v1\nkind: Scheduler\nmetadata:\n  creationTimestamp: null\n  name: cluster\nspec:\n  mastersSchedulable: {}\n  policy:\n    name: \"\"\nstatus: {{}}\n",
            masters_schedulable(spec)
        ),
    ));
    if spec.workers > 0 {
        let replicas = if spec.workers == 1 {
            "  replicas: 1\n"
        } else {
            ""
        };
        out.push((
            INGRESS,
            format!(
                "apiVersion: operator.openshift.io/v1\nkind: IngressController\nmetadata:\n  name: default\n  namespace: openshift-ingress-operator\nspec:\n  nodePlacement:\n    nodeSelector:\n      matchLabels:\n        {WORKER_ROLE}: \"\"\n{replicas}"
            ),
        ));
    }
    out.extend(super::monitoring::manifests(spec));
    if let Some(nfs) = plan.storage.as_ref().and_then(|s| s.nfs.as_ref()) {
        out.extend(super::storage::manifests(nfs));
    }
    out.extend(super::lvms::lab(spec));
    out.extend(super::chrony::manifests(spec));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Capabilities;

    fn render(s: &ClusterSpec) -> Vec<(&'static str, String)> {
        lab_manifests(s, &crate::plan::derive(s))
    }

    fn spec(workers: u32, caps: Option<(&str, &[&str])>) -> ClusterSpec {
        let text = format!(
            "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\nctlplanes: 3\nworkers: {workers}\n"
        );
        let mut s = crate::spec::from_str(&text, "t.yaml", &crate::spec::Env::default())
            .unwrap()
            .spec;
        s.capabilities = caps.map(|(b, a)| Capabilities {
            baseline_capability_set: Some(b.to_string()),
            additional_enabled_capabilities: a.iter().map(|x| x.to_string()).collect(),
        });
        s
    }

    #[test]
    fn the_registry_runs_one_replica_unless_its_capability_is_off() {
        let m = render(&spec(2, None));
        let reg = &m.iter().find(|(p, _)| *p == IMAGE_REGISTRY).unwrap().1;
        let v: yaml_serde::Value = yaml_serde::from_str(reg).unwrap();
        assert_eq!(v["spec"]["replicas"].as_u64(), Some(1));
        assert_eq!(v["spec"]["managementState"], "Managed");
        for (base, extra, on) in [
            ("vCurrent", &[][..], true),
            ("v4.14", &[][..], true),
            ("v4.16", &[][..], true),
            ("v4.13", &[][..], false),
            ("v4.11", &[][..], false),
            ("None", &[][..], false),
            ("None", &["ImageRegistry"][..], true),
            ("v4.12", &["Console", "ImageRegistry"][..], true),
        ] {
            let s = spec(2, Some((base, extra)));
            assert_eq!(image_registry_enabled(&s), on, "{base} {extra:?}");
            assert_eq!(
                render(&s).iter().any(|(p, _)| *p == IMAGE_REGISTRY),
                on,
                "{base} {extra:?}"
            );
        }
    }

    #[test]
    fn with_workers_control_planes_are_not_schedulable_and_routers_go_to_workers() {
        let m = render(&spec(2, None));
        let sched = &m.iter().find(|(p, _)| *p == SCHEDULER).unwrap().1;
        let v: yaml_serde::Value = yaml_serde::from_str(sched).unwrap();
        assert_eq!(v["spec"]["mastersSchedulable"], false);
        let ing = &m.iter().find(|(p, _)| *p == INGRESS).unwrap().1;
        let v: yaml_serde::Value = yaml_serde::from_str(ing).unwrap();
        assert_eq!(v["metadata"]["name"], "default");
        assert_eq!(v["metadata"]["namespace"], "openshift-ingress-operator");
        assert_eq!(
            v["spec"]["nodePlacement"]["nodeSelector"]["matchLabels"][WORKER_ROLE],
            ""
        );
        assert!(v["spec"]["replicas"].is_null(), "two workers: the default");
        // One worker: one HostNetwork router fits.
        let m = render(&spec(1, None));
        let ing = &m.iter().find(|(p, _)| *p == INGRESS).unwrap().1;
        let v: yaml_serde::Value = yaml_serde::from_str(ing).unwrap();
        assert_eq!(v["spec"]["replicas"].as_u64(), Some(1));
    }

    #[test]
    fn a_compact_cluster_keeps_schedulable_control_planes_and_the_default_ingress() {
        let m = render(&spec(0, None));
        let sched = &m.iter().find(|(p, _)| *p == SCHEDULER).unwrap().1;
        let v: yaml_serde::Value = yaml_serde::from_str(sched).unwrap();
        assert_eq!(v["spec"]["mastersSchedulable"], true);
        assert!(!m.iter().any(|(p, _)| *p == INGRESS));
    }

    fn registry(m: &[(&'static str, String)]) -> yaml_serde::Value {
        let reg = &m.iter().find(|(p, _)| *p == IMAGE_REGISTRY).unwrap().1;
        yaml_serde::from_str(reg).unwrap()
    }

    #[test]
    fn on_nfs_the_registry_claims_rwx_with_the_replicas_the_topology_allows() {
        for (workers, ctlplanes, replicas) in
            [(2, 3, 2), (3, 3, 2), (1, 3, 1), (0, 3, 2), (0, 1, 1)]
        {
            let mut s = spec(workers, None);
            s.ctlplanes = ctlplanes;
            s.storage = Storage::Nfs;
            let m = render(&s);
            let v = registry(&m);
            assert_eq!(v["spec"]["managementState"], "Managed");
            assert_eq!(
                v["spec"]["storage"]["pvc"]["claim"], "",
                "the operator's own claim"
            );
            assert!(v["spec"]["storage"]["emptyDir"].is_null());
            assert!(
                v["spec"]["rolloutStrategy"].is_null(),
                "RWX: the default rolling update"
            );
            assert_eq!(
                v["spec"]["replicas"].as_u64(),
                Some(replicas),
                "{workers} workers, {ctlplanes} control planes"
            );
        }
    }

    #[test]
    fn on_lvms_the_registry_starts_on_empty_dir_and_moves_to_its_claim_after_install() {
        let mut s = spec(3, None);
        s.storage = Storage::Lvms;
        let m = render(&s);
        let v = registry(&m);
        assert!(v["spec"]["storage"]["emptyDir"].is_mapping(), "{v:?}");
        assert!(v["spec"]["storage"]["pvc"].is_null(), "{v:?}");
        assert!(!m.iter().any(|(_, t)| t.contains("PersistentVolumeClaim")));
        let c: yaml_serde::Value = yaml_serde::from_str(&lvms_registry_claim()).unwrap();
        assert_eq!(c["metadata"]["name"], IMAGE_REGISTRY_CLAIM_NAME);
        assert_eq!(c["metadata"]["namespace"], "openshift-image-registry");
        assert_eq!(c["spec"]["accessModes"][0], "ReadWriteOnce");
        assert_eq!(c["spec"]["storageClassName"], "lvms-vg1");
        let p: serde_json::Value = serde_json::from_str(LVMS_REGISTRY_PATCH).unwrap();
        assert_eq!(
            p["spec"]["storage"]["pvc"]["claim"],
            IMAGE_REGISTRY_CLAIM_NAME
        );
        assert!(p["spec"]["storage"]["emptyDir"].is_null());
        assert_eq!(p["spec"]["rolloutStrategy"], "Recreate");
        // No NFS export planned: no provisioner.
        assert!(!m.iter().any(|(p, _)| p.contains("storage-")));
    }

    #[test]
    fn the_provisioner_and_monitoring_come_with_storage() {
        let s = spec(2, None);
        let m = render(&s);
        assert!(m.iter().any(|(p, _)| *p == super::super::monitoring::PATH));
        assert!(!m
            .iter()
            .any(|(p, _)| p.starts_with("openshift/99-shiftlab-storage-")));
        assert_eq!(
            registry(&m)["spec"]["storage"]["emptyDir"],
            yaml_serde::Value::Mapping(Default::default())
        );
        let mut s = spec(2, None);
        s.storage = Storage::Nfs;
        let m = render(&s);
        let sc = &m
            .iter()
            .find(|(p, _)| *p == "openshift/99-shiftlab-storage-storageclass.yaml")
            .unwrap()
            .1;
        assert!(
            sc.contains("is-default-class: 'true'") || sc.contains("is-default-class: \"true\""),
            "{sc}"
        );
    }
}
