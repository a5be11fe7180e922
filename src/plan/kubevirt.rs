//! The KubeVirt part of a plan (`backend: kubevirt`): the cluster file's
//! `kubevirt:` as resolved, and the name of every object made for it. The
//! objects themselves are rendered by src/kubevirt/render.rs.

use serde::{Deserialize, Serialize};

use super::{Boot, Node, Plan, DEFAULT_HTTP_PORT};
use crate::spec::{KubevirtSpec, PodNetwork};

/// The KubeVirt part of a plan: the cluster file's `kubevirt:` as resolved
/// (with `http_url` filled in where the plan decides it), and the objects it
/// makes, by kind and name. Its fields read through to the spec's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubevirtPlan {
    /// `http_url` here is where the VMs fetch their Ignition:
    /// `kubevirt.http_url`, or on a Multus network shiftlab's HTTP server on
    /// the lab's host address.
    #[serde(flatten)]
    pub spec: KubevirtSpec,
    /// `Kind/name` of every object, in the order they are applied.
    pub objects: Vec<String>,
}

impl std::ops::Deref for KubevirtPlan {
    type Target = KubevirtSpec;

    fn deref(&self) -> &KubevirtSpec {
        &self.spec
    }
}

impl KubevirtPlan {
    pub fn derive(k: &KubevirtSpec, plan: &Plan) -> KubevirtPlan {
        let http_url = k.http_url.clone().or_else(|| {
            (k.network == PodNetwork::Multus)
                .then(|| plan.http_address())
                .flatten()
                .map(|a| format!("http://{}", std::net::SocketAddr::new(a, DEFAULT_HTTP_PORT)))
        });
        let mut kp = KubevirtPlan {
            spec: KubevirtSpec {
                http_url,
                ..k.clone()
            },
            objects: Vec::new(),
        };
        kp.objects = object_refs(plan, &kp);
        kp
    }
}

/// The NetworkAttachmentDefinition of `network: multus`.
pub fn nad_name(plan: &Plan) -> String {
    format!("{}-net", plan.cluster)
}

pub fn secret_name(node: &Node) -> String {
    format!("{}-ignition", node.name)
}

/// The Service names of pod mode.
pub fn service_names(plan: &Plan) -> [String; 2] {
    [
        format!("{}-api", plan.cluster),
        format!("{}-ingress", plan.cluster),
    ]
}

/// Whether a node gets its Ignition from a config-drive Secret (nodes booted
/// by the BMC get theirs from Ironic's virtual media).
pub fn has_secret(node: &Node) -> bool {
    node.boot == Boot::DiskFwCfg
}

/// `Kind/name` of every object [`render`] makes, in order: for `shiftlab plan`.
pub fn object_refs(plan: &Plan, kp: &KubevirtPlan) -> Vec<String> {
    let mut out = vec![format!("Namespace/{}", kp.namespace)];
    if kp.network == PodNetwork::Multus {
        out.push(format!("NetworkAttachmentDefinition/{}", nad_name(plan)));
    }
    for n in plan.nodes.iter().filter(|n| has_secret(n)) {
        out.push(format!("Secret/{}", secret_name(n)));
    }
    if kp.network == PodNetwork::Pod {
        let lb = haproxy_name(plan);
        out.push(format!("Service/{}", nodes_service_name(plan)));
        out.push(format!("ConfigMap/{lb}"));
        out.push(format!("Deployment/{lb}"));
        for s in service_names(plan) {
            out.push(format!("Service/{s}"));
        }
    }
    for n in &plan.nodes {
        out.push(format!("VirtualMachine/{}", n.name));
    }
    out
}

/// The headless Service whose name is every VM's `subdomain`.
pub fn nodes_service_name(plan: &Plan) -> String {
    format!("{}-nodes", plan.cluster)
}

/// `network: pod`'s in-cluster HAProxy (its ConfigMap and Deployment).
pub fn haproxy_name(plan: &Plan) -> String {
    format!("{}-haproxy", plan.cluster)
}
