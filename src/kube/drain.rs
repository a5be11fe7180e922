//! Taking a worker out of a cluster through the API, as `kubectl drain` does:
//! cordon the Node (`spec.unschedulable`), evict its pods through the Eviction
//! API so that PodDisruptionBudgets are honoured — the API answers 429 Too Many
//! Requests while a budget forbids the eviction, and the eviction is retried
//! (Kubernetes docs, "API-initiated Eviction") — leaving DaemonSet and mirror
//! pods alone, wait until the pods are gone, then delete the Node.

use std::path::Path;
use std::time::{Duration, Instant};

use ::kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, ListParams,
    Patch, PatchParams,
};
use ::kube::Client;
use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::{Deserialize, Serialize};

use super::approve::client_from_kubeconfig;

/// What a drain did.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Drained {
    pub node: String,
    /// `namespace/name` of each pod evicted.
    pub evicted: Vec<String>,
    /// Evictions a PodDisruptionBudget held back at least once (429).
    pub held_by_budget: Vec<String>,
    pub node_deleted: bool,
}

/// Pods a drain leaves: DaemonSet pods (their controller ignores unschedulable
/// and would recreate them) and mirror pods (the kubelet's static pods), as
/// `kubectl drain --ignore-daemonsets` does; finished pods need no eviction.
pub fn evictable(p: &Pod) -> bool {
    let daemon = p
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|r| r.kind == "DaemonSet"));
    let mirror = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let finished = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
    !daemon && !mirror && !finished
}

/// The Node of a plan node: registered by its short name or its FQDN.
async fn node_name(nodes: &Api<Node>, name: &str, fqdn: &str) -> Result<Option<String>> {
    for n in [name, fqdn] {
        if nodes
            .get_opt(n)
            .await
            .context("reading the node")?
            .is_some()
        {
            return Ok(Some(n.to_string()));
        }
    }
    Ok(None)
}

/// Drain and delete the Node of `name`/`fqdn`; `None` when it has no Node.
pub async fn drain(
    client: &Client,
    name: &str,
    fqdn: &str,
    timeout: Duration,
    interval: Duration,
) -> Result<Option<Drained>> {
    let nodes: Api<Node> = Api::all(client.clone());
    let Some(node) = node_name(&nodes, name, fqdn).await? else {
        return Ok(None);
    };
    let mut out = Drained {
        node: node.clone(),
        ..Drained::default()
    };
    nodes
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}})),
        )
        .await
        .with_context(|| format!("cordoning {node}"))?;
    let deadline = Instant::now() + timeout;
    let all: Api<Pod> = Api::all(client.clone());
    loop {
        let pods = all
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .with_context(|| format!("listing the pods of {node}"))?;
        let left: Vec<&Pod> = pods.items.iter().filter(|p| evictable(p)).collect();
        if left.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            bail!(
                "{node}: {} pod(s) not evicted within {}s ({}){}",
                left.len(),
                timeout.as_secs(),
                left.iter()
                    .filter_map(|p| p.metadata.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
                if out.held_by_budget.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; PodDisruptionBudgets held back {}",
                        out.held_by_budget.join(", ")
                    )
                }
            );
        }
        for p in left {
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let pn = p.metadata.name.clone().unwrap_or_default();
            let id = format!("{ns}/{pn}");
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            match api.evict(&pn, &EvictParams::default()).await {
                Ok(_) => {
                    if !out.evicted.contains(&id) {
                        out.evicted.push(id);
                    }
                }
                // A budget forbids it now: retry later.
                Err(::kube::Error::Api(e)) if e.code == 429 => {
                    tracing::info!(
                        "{id}: eviction held back by a PodDisruptionBudget ({})",
                        e.message
                    );
                    if !out.held_by_budget.contains(&id) {
                        out.held_by_budget.push(id);
                    }
                }
                // Gone already.
                Err(::kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("evicting {id}")),
            }
        }
        tokio::time::sleep(interval).await;
    }
    nodes
        .delete(&node, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting node {node}"))?;
    out.node_deleted = true;
    Ok(Some(out))
}

/// The default IngressController's replicas (operator.openshift.io/v1,
/// `openshift-ingress-operator/default`, `.spec.replicas`, else
/// `.status.availableReplicas`); `None` when the cluster has none (not OpenShift).
pub async fn ingress_replicas(client: &Client) -> Result<Option<u32>> {
    let gvk = GroupVersionKind::gvk("operator.openshift.io", "v1", "IngressController");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "ingresscontrollers");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "openshift-ingress-operator", &ar);
    let Some(ic) = api
        .get_opt("default")
        .await
        .context("reading the default ingress controller")?
    else {
        return Ok(None);
    };
    let n = ic
        .data
        .pointer("/spec/replicas")
        .or_else(|| ic.data.pointer("/status/availableReplicas"))
        .and_then(|v| v.as_u64());
    Ok(n.map(|n| n as u32))
}

/// [`ingress_replicas`] with the admin credentials of `kubeconfig`.
pub fn ingress_replicas_blocking(kubeconfig: &Path) -> Result<Option<u32>> {
    crate::runtime::block_on(async {
        let client = client_from_kubeconfig(kubeconfig).await?;
        ingress_replicas(&client).await
    })
}

/// [`drain`] with the admin credentials of `kubeconfig`.
pub fn drain_blocking(
    kubeconfig: &Path,
    name: &str,
    fqdn: &str,
    timeout: Duration,
    interval: Duration,
) -> Result<Option<Drained>> {
    crate::runtime::block_on(async {
        let client = client_from_kubeconfig(kubeconfig).await?;
        drain(&client, name, fqdn, timeout, interval).await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemonset_mirror_and_finished_pods_stay() {
        let pod = |v: serde_json::Value| -> Pod { serde_json::from_value(v).unwrap() };
        assert!(evictable(&pod(
            serde_json::json!({"metadata": {"name": "web"}})
        )));
        assert!(!evictable(&pod(
            serde_json::json!({"metadata": {"name": "dns",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "dns", "uid": "u"}]}})
        )));
        assert!(!evictable(&pod(
            serde_json::json!({"metadata": {"name": "etcd",
            "annotations": {"kubernetes.io/config.mirror": "x"}}})
        )));
        assert!(!evictable(&pod(
            serde_json::json!({"metadata": {"name": "job"}, "status": {"phase": "Succeeded"}})
        )));
    }
}
