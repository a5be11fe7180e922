//! Bringing nodes back after a start: wait for the API, approve the plan's
//! nodes' pending CSRs (kubelets whose certificates expired while the cluster
//! was off ask again, through the node-bootstrapper), until every plan node is
//! Ready. The approval rules are `csr`'s; this only loops.

use std::path::Path;
use std::time::{Duration, Instant};

use ::kube::api::ListParams;
use ::kube::{Api, Client};
use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Node;
use serde::{Deserialize, Serialize};

use super::approve::{client_from_kubeconfig, Memory};
use super::csr::NodeIdentity;

/// What a bring-back did.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct BringBack {
    /// Seconds until the API answered.
    pub api_after_secs: u64,
    /// CSRs approved, by name.
    pub approved: Vec<String>,
    /// Plan nodes Ready at the end.
    pub ready: Vec<String>,
    /// Plan nodes not Ready when the time ran out.
    pub not_ready: Vec<String>,
}

/// The names of the Nodes whose `Ready` condition is `True` (Kubernetes API,
/// NodeStatus.conditions, type `Ready`).
pub fn ready_names(nodes: &[Node]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|n| n.metadata.name.clone())
        .collect()
}

/// Nodes powered on at `since`: their Node counts as Ready only with a `Ready`
/// condition whose `lastHeartbeatTime` is not older than `since`. The Node
/// objects come back from etcd as they were when the cluster stopped (`Ready`
/// `True`); the node lifecycle controller marks them `Unknown` only after its
/// grace period (Kubernetes docs, "Nodes" > "Node controller":
/// `--node-monitor-grace-period`), and a restarted kubelet posts its status
/// at once, which sets the heartbeat.
#[derive(Debug, Clone)]
pub struct Fresh {
    pub since: k8s_openapi::jiff::Timestamp,
    pub nodes: Vec<String>,
}

/// [`ready_names`], with the nodes of `fresh` Ready only on a heartbeat since.
pub fn ready_names_fresh(nodes: &[Node], fresh: Option<&Fresh>) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| {
            let name = n.metadata.name.as_deref().unwrap_or_default();
            let since = fresh
                .filter(|f| {
                    f.nodes
                        .iter()
                        .any(|x| x == name || name.starts_with(&format!("{x}.")))
                })
                .map(|f| f.since);
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c.type_ == "Ready"
                            && c.status == "True"
                            && since.is_none_or(|t| {
                                c.last_heartbeat_time.as_ref().is_some_and(|h| h.0 >= t)
                            })
                    })
                })
        })
        .filter_map(|n| n.metadata.name.clone())
        .collect()
}

/// Which of `wanted` (plan nodes: name and FQDN) are among `ready` (Node names,
/// short or fully qualified, as kubelets register).
pub fn missing(wanted: &[(String, String)], ready: &[String]) -> Vec<String> {
    wanted
        .iter()
        .filter(|(name, fqdn)| !ready.iter().any(|r| r == name || r == fqdn))
        .map(|(n, _)| n.clone())
        .collect()
}

pub async fn wait_api(client: &Client, deadline: Instant, interval: Duration) -> Result<()> {
    loop {
        match client.apiserver_version().await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() + interval < deadline => {
                tracing::info!("the API does not answer yet: {e}");
                tokio::time::sleep(interval).await;
            }
            Err(e) => return Err(e).context("the API did not answer in time"),
        }
    }
}

/// Wait for the API, then approve and look until every node of `wanted` is
/// Ready or `timeout` passed (then `not_ready` says which).
pub async fn bring_back(
    client: &Client,
    identities: &[NodeIdentity],
    wanted: &[(String, String)],
    fresh: Option<&Fresh>,
    timeout: Duration,
    interval: Duration,
) -> Result<BringBack> {
    let start = Instant::now();
    let deadline = start + timeout;
    wait_api(client, deadline, interval).await?;
    let mut out = BringBack {
        api_after_secs: start.elapsed().as_secs(),
        ..BringBack::default()
    };
    // The nodes powered on may re-bootstrap their existing, not Ready Node
    // (their client certificates may have expired while they were off).
    let mut memory = Memory::default();
    memory.rejoining = fresh
        .map(|f| f.nodes.iter().cloned().collect())
        .unwrap_or_default();
    let nodes: Api<Node> = Api::all(client.clone());
    loop {
        let report = super::approve::reconcile(client, identities, &mut memory).await?;
        out.approved
            .extend(report.approved.iter().map(|a| a.csr.clone()));
        let list = nodes
            .list(&ListParams::default())
            .await
            .context("listing nodes")?;
        let ready = ready_names_fresh(&list.items, fresh);
        let mut missing = missing(wanted, &ready);
        // A re-bootstrapped kubelet asks for its serving certificate right after
        // its client one: without it `oc logs`/`exec` to the node fail.
        let unserved: Vec<String> = memory
            .rejoined
            .difference(&memory.served_again)
            .filter(|n| !missing.contains(n))
            .cloned()
            .collect();
        missing.extend(unserved);
        if missing.is_empty() || Instant::now() + interval >= deadline {
            out.ready = wanted
                .iter()
                .filter(|(n, _)| !missing.contains(n))
                .map(|(n, _)| n.clone())
                .collect();
            out.not_ready = missing
                .into_iter()
                .map(|n| {
                    if ready
                        .iter()
                        .any(|r| *r == n || r.starts_with(&format!("{n}.")))
                    {
                        format!("{n} (serving CSR not approved)")
                    } else {
                        n
                    }
                })
                .collect();
            return Ok(out);
        }
        tokio::time::sleep(interval).await;
    }
}

/// [`bring_back`] with the admin credentials of `kubeconfig`.
pub fn bring_back_blocking(
    kubeconfig: &Path,
    identities: &[NodeIdentity],
    wanted: &[(String, String)],
    fresh: Option<&Fresh>,
    timeout: Duration,
    interval: Duration,
) -> Result<BringBack> {
    crate::runtime::block_on(async {
        let client = client_from_kubeconfig(kubeconfig).await?;
        bring_back(&client, identities, wanted, fresh, timeout, interval).await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_nodes_are_matched_by_name_or_fqdn() {
        let node = |name: &str, ready: &str| -> Node {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}
            }))
            .unwrap()
        };
        let ready = ready_names(&[
            node("lab1-ctlplane-0", "True"),
            node("lab1-worker-0.lab1.example.com", "True"),
            node("lab1-worker-1", "Unknown"),
        ]);
        let wanted = |n: &str| (n.to_string(), format!("{n}.lab1.example.com"));
        assert_eq!(
            missing(
                &[
                    wanted("lab1-ctlplane-0"),
                    wanted("lab1-worker-0"),
                    wanted("lab1-worker-1")
                ],
                &ready
            ),
            ["lab1-worker-1"]
        );
    }

    #[test]
    fn a_node_powered_on_counts_ready_only_on_a_heartbeat_since() {
        let t = |s: &str| s.parse::<k8s_openapi::jiff::Timestamp>().unwrap();
        let node = |name: &str, beat: &str| -> Node {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": beat}]}
            }))
            .unwrap()
        };
        let nodes = [
            node("lab1-worker-0", "2026-11-23T10:00:00Z"),
            node("lab1-worker-1.lab1.example.com", "2026-11-23T12:00:00Z"),
            node("lab1-ctlplane-0", "2026-11-23T09:00:00Z"),
        ];
        let fresh = Fresh {
            since: t("2026-11-23T11:00:00Z"),
            nodes: vec!["lab1-worker-0".into(), "lab1-worker-1".into()],
        };
        // worker-0's Ready is from before the start: stale; ctlplane-0 was not powered on.
        assert_eq!(
            ready_names_fresh(&nodes, Some(&fresh)),
            ["lab1-worker-1.lab1.example.com", "lab1-ctlplane-0"]
        );
        assert_eq!(ready_names_fresh(&nodes, None).len(), 3);
    }
}
