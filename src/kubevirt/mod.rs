//! KubeVirt: the plan's nodes as KubeVirt `VirtualMachine`s on a
//! Kubernetes cluster (any, OpenShift Virtualization included), with CDI for
//! disks and Multus or the pod network for networking.
//!
//! - [`render`]: pure renderers, plan in, Kubernetes objects out (golden-tested);
//! - [`haproxy`]: `network: pod`'s in-cluster HAProxy in front of the nodes;
//! - [`dns`]: `network: pod`'s DNS records for the Services, for the user;
//! - [`apply`]: server-side apply through kube-rs, ownership, destroy, inspect,
//!   power (`runStrategy`, the VMs' VirtualMachineInstances);
//! - [`registry`]: the pull secret's credentials for CDI's registry import;
//!
//! These are building blocks: `crate::backend::kubevirt` puts them together
//! for the install pipeline, which they know nothing of, and the Redfish BMC's
//! `Machine` on KubeVirt VMs (IPI) is `crate::redfish::machine_kubevirt`. The
//! plan's KubeVirt part and the objects' names are `crate::plan::kubevirt`.
//!
//! docs/kubevirt.md is the user's page.

pub mod apply;
pub mod dns;
pub mod haproxy;
pub mod registry;
pub mod render;

use crate::plan::Plan;

pub use crate::kube::owner::{FIELD_MANAGER, MANAGED_BY, OWNER_LABEL};
/// Node labels on each VM and its pod (VM template labels pass to the
/// virt-launcher pod: kubevirt/user-guide, "Expose VirtualMachine as a service").
pub const NODE_LABEL: &str = "shiftlab.io/node";
pub const ROLE_LABEL: &str = "shiftlab.io/role";

pub use crate::plan::kubevirt::KubevirtPlan;

/// The plan's KubeVirt part, or an error saying the cluster is not on KubeVirt.
pub fn plan_of(plan: &Plan) -> anyhow::Result<&KubevirtPlan> {
    plan.kubevirt
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("{} is not a backend: kubevirt cluster", plan.cluster))
}

/// Refuse a libvirt-only command on a cluster that runs on KubeVirt, saying
/// what to use instead (before anything is touched).
pub fn refuse_libvirt_only(plan: &Plan, what: &str, instead: &str) -> anyhow::Result<()> {
    if let Some(k) = &plan.kubevirt {
        anyhow::bail!(
            "{} runs on KubeVirt (namespace {}): {what} works on libvirt only so far; {instead}",
            plan.cluster,
            k.namespace
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_recorded_before_the_pod_mode_fields_still_reads() {
        let old = serde_json::json!({
            "kubeconfig": "/k", "context": null, "namespace": "ns", "storage_class": null,
            "network": "pod", "bridge": "br0", "vlan": null, "service_type": "NodePort",
            "image": null, "http_url": "http://h:8080", "objects": ["Namespace/ns"],
        });
        let kp: KubevirtPlan = serde_json::from_value(old).unwrap();
        assert_eq!(kp.haproxy_image, crate::spec::DEFAULT_HAPROXY_IMAGE);
        assert_eq!(kp.cluster_dns_domain, "cluster.local");
        assert_eq!(kp.http_url.as_deref(), Some("http://h:8080"));
        assert_eq!(kp.objects, ["Namespace/ns"]);
        // And what it writes reads back the same.
        let back: KubevirtPlan =
            serde_json::from_value(serde_json::to_value(&kp).unwrap()).unwrap();
        assert_eq!(back, kp);
    }
}
