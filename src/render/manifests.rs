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

use crate::spec::ClusterSpec;

/// Where the image-registry manifest goes.
pub const IMAGE_REGISTRY: &str = "openshift/99-shiftlab-image-registry.yaml";
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

/// The manifests the lab adds, by their path in the asset directory.
pub fn lab_manifests(spec: &ClusterSpec) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if image_registry_enabled(spec) {
        out.push((
            IMAGE_REGISTRY,
            "apiVersion: imageregistry.operator.openshift.io/v1\nkind: Config\nmetadata:\n  name: cluster\nspec:\n  managementState: Managed\n  replicas: 1\n  storage:\n    emptyDir: {}\n"
                .to_string(),
        ));
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
    out.extend(super::chrony::manifests(spec));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Capabilities;

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
        let m = lab_manifests(&spec(2, None));
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
                lab_manifests(&s).iter().any(|(p, _)| *p == IMAGE_REGISTRY),
                on,
                "{base} {extra:?}"
            );
        }
    }

    #[test]
    fn with_workers_control_planes_are_not_schedulable_and_routers_go_to_workers() {
        let m = lab_manifests(&spec(2, None));
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
        let m = lab_manifests(&spec(1, None));
        let ing = &m.iter().find(|(p, _)| *p == INGRESS).unwrap().1;
        let v: yaml_serde::Value = yaml_serde::from_str(ing).unwrap();
        assert_eq!(v["spec"]["replicas"].as_u64(), Some(1));
    }

    #[test]
    fn a_compact_cluster_keeps_schedulable_control_planes_and_the_default_ingress() {
        let m = lab_manifests(&spec(0, None));
        let sched = &m.iter().find(|(p, _)| *p == SCHEDULER).unwrap().1;
        let v: yaml_serde::Value = yaml_serde::from_str(sched).unwrap();
        assert_eq!(v["spec"]["mastersSchedulable"], true);
        assert!(!m.iter().any(|(p, _)| *p == INGRESS));
    }
}
