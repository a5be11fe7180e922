//! Approving node CSRs through the API: one idempotent reconcile pass
//! ([`approve_pending`]) and a loop around it with a requeue delay ([`watch`]).
//!
//! Approval is a PUT of the CSR to its `/approval` subresource with an `Approved`
//! condition (reason `ShiftlabApprove`, the rule in the message), as
//! `oc adm certificate approve` does; the object's resourceVersion makes a concurrent
//! change a conflict, which the next pass sees. Refusals are logged and reported but
//! never written as `Denied`: a human may still approve such a CSR by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use ::kube::api::{ListParams, PostParams};
use ::kube::config::{KubeConfigOptions, Kubeconfig};
use ::kube::{Api, Client, Config};
use anyhow::{Context, Result};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;

use super::csr::{
    decide, decide_by_plan, parse_request, ApiNode, ClusterFacts, CsrFacts, CsrKind, CsrState,
    Decision, NodeIdentity,
};
use crate::plan::Plan;
use crate::spec::Role;

/// The approval condition's reason.
pub const APPROVAL_REASON: &str = "ShiftlabApprove";

/// Shortest and longest pause between two passes of [`watch`].
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
pub const MAX_INTERVAL: Duration = Duration::from_secs(300);
/// Pause after a pass that approved something: the serving CSR follows the client
/// one within seconds.
pub const AFTER_APPROVAL: Duration = Duration::from_secs(2);

/// One CSR and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub csr: String,
    pub node: Option<String>,
    pub kind: Option<CsrKind>,
    /// The rule that approved it, or why it was refused or skipped.
    pub reason: String,
}

/// What one pass (or a whole watch) did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub approved: Vec<Entry>,
    pub refused: Vec<Entry>,
    pub skipped: Vec<Entry>,
}

impl Report {
    pub fn is_empty(&self) -> bool {
        self.approved.is_empty() && self.refused.is_empty() && self.skipped.is_empty()
    }
}

/// A client for the cluster whose admin kubeconfig is at `path`.
pub async fn client_from_kubeconfig(path: &Path) -> Result<Client> {
    tracing::info!("the cluster's API through {}", path.display());
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading kubeconfig {}", path.display()))?;
    // kube 3+ retries 429/503/504 itself by default: shiftlab's loops retry
    // with their own deadlines and report what held them (a drain's
    // PodDisruptionBudget), so the client answers at once.
    config.default_retry = false;
    Client::try_from(config).context("building the API client")
}

/// The facts the decision needs, read from an API object.
pub fn facts_of(csr: &CertificateSigningRequest) -> CsrFacts {
    let conditions = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let has = |t: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    // Denied and Failed win over Approved: the signer will not issue.
    let state = if has("Denied") {
        CsrState::Denied
    } else if has("Failed") {
        CsrState::Failed
    } else if has("Approved") {
        CsrState::Approved
    } else {
        CsrState::Pending
    };
    CsrFacts {
        name: csr.metadata.name.clone().unwrap_or_default(),
        signer: csr.spec.signer_name.clone(),
        username: csr.spec.username.clone().unwrap_or_default(),
        groups: csr.spec.groups.clone().unwrap_or_default(),
        usages: csr.spec.usages.clone().unwrap_or_default(),
        state,
        request: parse_request(&csr.spec.request.0),
    }
}

/// What a reconcile pass remembers across passes of a watch.
#[derive(Debug, Default)]
pub struct Memory {
    /// Node certificates seen approved, by shiftlab or anyone else.
    pub approved: BTreeSet<(String, CsrKind)>,
    /// Refusals already logged at warn level (repeats go to debug).
    refused_logged: BTreeSet<String>,
    /// Plan nodes a start brings back (see [`ClusterFacts::rejoining`]).
    pub rejoining: BTreeSet<String>,
    /// Rejoining nodes whose client CSR was approved in this watch.
    pub(crate) rejoined: BTreeSet<String>,
    /// Of those, the ones whose serving CSR was approved after it.
    pub(crate) served_again: BTreeSet<String>,
    /// The nodes a start powered on, Ready only on a heartbeat since then.
    pub fresh: Option<super::ready::Fresh>,
}

/// One pass over the plan's nodes' CSRs: approve what the rules allow, report the rest.
/// Idempotent: a second pass finds the approved ones approved and skips them.
pub async fn approve_pending(client: &Client, plan: &Plan) -> Result<Report> {
    approve_pending_for(client, &NodeIdentity::from_plan(plan)).await
}

/// [`approve_pending`] for nodes read from elsewhere (a persisted plan).
pub async fn approve_pending_for(client: &Client, nodes: &[NodeIdentity]) -> Result<Report> {
    reconcile(client, nodes, &mut Memory::default()).await
}

/// The Nodes that exist, with their addresses.
async fn api_nodes(client: &Client, fresh: Option<&super::ready::Fresh>) -> Result<Vec<ApiNode>> {
    let list = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing nodes")?;
    Ok(list
        .items
        .into_iter()
        .map(|n| ApiNode {
            ready: !super::ready::ready_names_fresh(std::slice::from_ref(&n), fresh).is_empty(),
            name: n.metadata.name.unwrap_or_default(),
            addresses: n
                .status
                .and_then(|s| s.addresses)
                .unwrap_or_default()
                .into_iter()
                .map(|a| (a.type_, a.address))
                .collect(),
        })
        .collect())
}

/// The reconcile pass, with memory for [`watch`].
pub async fn reconcile(
    client: &Client,
    nodes: &[NodeIdentity],
    memory: &mut Memory,
) -> Result<Report> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .context("listing certificate signing requests")?;
    let mut cluster = ClusterFacts {
        nodes: api_nodes(client, memory.fresh.as_ref()).await?,
        clients_approved: Default::default(),
        rejoining: memory.rejoining.clone(),
        rejoined: memory.rejoined.clone(),
    };
    // Certificates already approved (by anyone) count before any decision, whatever
    // the order of the list.
    for csr in &list.items {
        let facts = facts_of(csr);
        if facts.state == CsrState::Approved {
            let pending = CsrFacts {
                state: CsrState::Pending,
                ..facts
            };
            if let Decision::Approve { node, kind, .. } = decide_by_plan(&pending, nodes) {
                memory.approved.insert((node, kind));
            }
        }
    }
    cluster.clients_approved = memory
        .approved
        .iter()
        .filter(|(_, k)| *k == CsrKind::Client)
        .map(|(n, _)| n.clone())
        .collect();
    let mut report = Report::default();
    for csr in list.items {
        let facts = facts_of(&csr);
        let decision = decide(&facts, nodes, &cluster);
        match decision {
            Decision::Approve { node, kind, rule } => match approve(&api, csr, &rule).await {
                Ok(()) => {
                    tracing::info!(csr = %facts.name, %node, %kind, "approved: {rule}");
                    memory.approved.insert((node.clone(), kind));
                    if kind == CsrKind::Client {
                        cluster.clients_approved.insert(node.clone());
                        if cluster.rejoining.contains(&node) {
                            cluster.rejoined.insert(node.clone());
                            memory.rejoined.insert(node.clone());
                        }
                    } else if memory.rejoined.contains(&node) {
                        memory.served_again.insert(node.clone());
                    }
                    report.approved.push(Entry {
                        csr: facts.name,
                        node: Some(node),
                        kind: Some(kind),
                        reason: rule,
                    });
                }
                Err(e) if is_conflict(&e) => {
                    tracing::info!(csr = %facts.name, "changed while approving; next pass");
                    report.skipped.push(Entry {
                        csr: facts.name,
                        node: Some(node),
                        kind: Some(kind),
                        reason: "changed while approving; looked at again next pass".into(),
                    });
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("approving {}", facts.name));
                }
            },
            Decision::Refuse { node, kind, reason } => {
                if memory.refused_logged.insert(facts.name.clone()) {
                    tracing::warn!(csr = %facts.name, requestor = %facts.username, "refused: {reason}");
                } else {
                    tracing::debug!(csr = %facts.name, "still refused: {reason}");
                }
                report.refused.push(Entry {
                    csr: facts.name,
                    node,
                    kind,
                    reason,
                });
            }
            Decision::Skip { reason } => {
                tracing::debug!(csr = %facts.name, "skipped: {reason}");
                report.skipped.push(Entry {
                    csr: facts.name,
                    node: None,
                    kind: None,
                    reason,
                });
            }
        }
    }
    Ok(report)
}

async fn approve(
    api: &Api<CertificateSigningRequest>,
    mut csr: CertificateSigningRequest,
    rule: &str,
) -> Result<(), ::kube::Error> {
    let name = csr.metadata.name.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    csr.status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: "Approved".into(),
            status: "True".into(),
            reason: Some(APPROVAL_REASON.into()),
            message: Some(format!("approved by shiftlab: {rule}")),
            last_update_time: Some(now.clone()),
            last_transition_time: Some(now),
        });
    api.replace_subresource("approval", &name, &PostParams::default(), &csr)
        .await
        .map(drop)
}

fn is_conflict(e: &::kube::Error) -> bool {
    matches!(e, ::kube::Error::Api(r) if r.code == 409)
}

/// When [`watch`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// Every awaited node has had its client and serving CSRs approved.
    AllApproved,
    /// Only on Ctrl-C (day 2: nodes added later, a cluster coming back).
    Interrupted,
}

#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub until: Until,
    /// Pause between passes when nothing happened; clamped to
    /// [`MIN_INTERVAL`]..=[`MAX_INTERVAL`].
    pub interval: Duration,
    /// Nodes to wait for with [`Until::AllApproved`]; empty means every plan node but
    /// the bootstrap.
    pub nodes: Vec<String>,
    /// Give up after this long (the report says `timed_out` and what is missing).
    pub deadline: Option<Duration>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            until: Until::AllApproved,
            interval: Duration::from_secs(10),
            nodes: Vec::new(),
            deadline: None,
        }
    }
}

/// What [`watch`] did in all.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WatchReport {
    /// Every approval, each CSR's latest refusal, each CSR's latest skip.
    #[serde(flatten)]
    pub report: Report,
    /// Awaited node certificates not seen approved when the watch stopped.
    pub missing: Vec<Missing>,
    pub interrupted: bool,
    /// Stopped by [`WatchOptions::deadline`].
    #[serde(default)]
    pub timed_out: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Missing {
    pub node: String,
    pub kind: CsrKind,
}

/// The reconcile loop: a pass, then a requeue delay, until the awaited nodes are done
/// or Ctrl-C. A failing pass (the API not up yet, a cluster coming back) is logged and
/// retried after the interval. `on_pass` sees each pass's report, e.g. to print
/// approvals as they happen.
pub async fn watch(
    client: &Client,
    nodes: &[NodeIdentity],
    opts: &WatchOptions,
    on_pass: impl FnMut(&Report),
) -> Result<WatchReport> {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await
        }
    };
    watch_until(client, nodes, opts, on_pass, interrupt).await
}

/// One pass ([`approve_pending_for`]) with the admin credentials of `kubeconfig`.
pub fn approve_once_blocking(kubeconfig: &Path, nodes: &[NodeIdentity]) -> Result<Report> {
    crate::runtime::block_on(async {
        let client = client_from_kubeconfig(kubeconfig).await?;
        approve_pending_for(&client, nodes).await
    })
}

/// How many Pending CSRs the plan's rules would approve (read only), within
/// `timeout`: what `gather` reports as the "CSRs Pending" symptom.
pub fn pending_blocking(
    kubeconfig: &Path,
    nodes: &[NodeIdentity],
    timeout: Duration,
) -> Result<usize> {
    crate::runtime::block_on(async {
        tokio::time::timeout(timeout, async {
            let client = client_from_kubeconfig(kubeconfig).await?;
            let api: Api<CertificateSigningRequest> = Api::all(client);
            let list = api
                .list(&ListParams::default())
                .await
                .context("listing certificate signing requests")?;
            Ok(list
                .items
                .iter()
                .filter(|c| {
                    matches!(
                        decide_by_plan(&facts_of(c), nodes),
                        Decision::Approve { .. }
                    )
                })
                .count())
        })
        .await
        .map_err(|_| anyhow::anyhow!("the API did not answer within {}s", timeout.as_secs()))?
    })
}

/// [`watch`] with the admin credentials of `kubeconfig`.
pub fn watch_blocking(
    kubeconfig: &Path,
    nodes: &[NodeIdentity],
    opts: &WatchOptions,
    on_pass: impl FnMut(&Report),
) -> Result<WatchReport> {
    crate::runtime::block_on(async {
        let client = client_from_kubeconfig(kubeconfig).await?;
        watch(&client, nodes, opts, on_pass).await
    })
}

/// [`watch`] with the interruption as a future, for tests.
pub async fn watch_until(
    client: &Client,
    nodes: &[NodeIdentity],
    opts: &WatchOptions,
    mut on_pass: impl FnMut(&Report),
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<WatchReport> {
    let awaited = awaited(nodes, &opts.nodes)?;
    let interval = opts.interval.clamp(MIN_INTERVAL, MAX_INTERVAL);
    let mut memory = Memory::default();
    let mut approved = Vec::new();
    let mut latest: BTreeMap<String, (bool, Entry)> = BTreeMap::new();
    let give_up = opts.deadline.map(|d| tokio::time::Instant::now() + d);
    let mut timed_out = false;
    tokio::pin!(interrupt);
    let interrupted = loop {
        let pass = tokio::select! {
            r = reconcile(client, nodes, &mut memory) => r,
            () = &mut interrupt => break true,
        };
        let mut delay = match pass {
            Ok(report) => {
                on_pass(&report);
                let busy = !report.approved.is_empty();
                approved.extend(report.approved);
                for e in report.refused {
                    latest.insert(e.csr.clone(), (true, e));
                }
                for e in report.skipped {
                    latest.insert(e.csr.clone(), (false, e));
                }
                for e in &approved {
                    latest.remove(&e.csr);
                }
                if opts.until == Until::AllApproved && missing(&awaited, &memory).is_empty() {
                    break false;
                }
                if busy {
                    AFTER_APPROVAL.min(interval)
                } else {
                    interval
                }
            }
            Err(e) => {
                tracing::warn!("{e:#}; retrying in {}s", interval.as_secs());
                interval
            }
        };
        if let Some(at) = give_up {
            let now = tokio::time::Instant::now();
            if now >= at {
                timed_out = true;
                break false;
            }
            delay = delay.min(at - now);
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = &mut interrupt => break true,
        }
    };
    let mut report = Report {
        approved,
        ..Report::default()
    };
    for (_, (refused, e)) in latest {
        if refused {
            report.refused.push(e);
        } else {
            report.skipped.push(e);
        }
    }
    Ok(WatchReport {
        report,
        missing: missing(&awaited, &memory),
        interrupted,
        timed_out,
    })
}

fn awaited(nodes: &[NodeIdentity], names: &[String]) -> Result<Vec<String>> {
    if names.is_empty() {
        return Ok(nodes
            .iter()
            .filter(|n| n.role != Role::Bootstrap)
            .map(|n| n.name.clone())
            .collect());
    }
    for n in names {
        anyhow::ensure!(
            nodes
                .iter()
                .any(|p| &p.name == n && p.role != Role::Bootstrap),
            "{n} is not a cluster node of the plan"
        );
    }
    Ok(names.to_vec())
}

fn missing(awaited: &[String], memory: &Memory) -> Vec<Missing> {
    awaited
        .iter()
        .flat_map(|n| {
            [CsrKind::Client, CsrKind::Serving]
                .into_iter()
                .filter(|k| !memory.approved.contains(&(n.clone(), *k)))
                .map(|kind| Missing {
                    node: n.clone(),
                    kind,
                })
        })
        .collect()
}
