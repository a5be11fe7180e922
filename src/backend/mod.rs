//! The seam between the install pipeline and the infrastructure its nodes run
//! on. The plan, install-config, targets, CSR approval and rehearsal are
//! shared; a [`Backend`] creates or updates a cluster's network, disks, nodes
//! and their Ignition, powers nodes, and removes them.
//!
//! - [`libvirt`]: one host, libvirt/KVM (src/libvirt);
//! - [`kubevirt`]: KubeVirt on a Kubernetes cluster (src/kubevirt).
//!
//! A backend works on plain data: the plan, the cluster's state directory and
//! the [`Inputs`] the pipeline prepared (base image, ISO, each node's
//! Ignition). It knows no target, install lock or CLI; it hands back a
//! [`Report`] that the infra target turns into its note.
//!
//! Day 2 goes through the same trait: [`Backend::stop`] and [`Backend::start`]
//! power a group of nodes (the order of groups, metal3 and the API are
//! `crate::cluster::power`'s), [`Backend::status`] says what the
//! infrastructure holds now in one [`Status`] for every backend. A cluster's
//! plan may be gone or stale by then, so [`for_cluster`] picks the backend
//! from the cluster's record (KubeVirt's ledger, libvirt's URI), not the plan.

pub mod kubevirt;
pub mod libvirt;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::plan::{Node, Plan};
use crate::spec::{BackendKind, Role};
use crate::state::{ClusterDir, StateDir};

/// What the pipeline prepared for [`Backend::apply`].
pub struct Inputs<'a> {
    /// Host-wide records: the host lock and the host's image ledger.
    pub state: &'a StateDir,
    /// The disk image fw_cfg nodes' overlays sit on (libvirt; `None` when
    /// every node boots an ISO onto an empty disk).
    pub base_image: Option<&'a Path>,
    /// The installer binary the release target fetched, whose CoreOS stream
    /// metadata names the node disk when the plan names none (KubeVirt).
    pub installer: Option<&'a Path>,
    /// The live ISO the ISO-booting nodes get in their CD-ROM drive.
    pub iso: Option<&'a Path>,
    /// The cluster file's pull secret (a secret), when it names one: KubeVirt's
    /// registry import takes its credentials for the node image's registry.
    pub pull_secret: Option<&'a str>,
    /// Per node: its full Ignition config (disk-booted nodes only).
    pub ignition: &'a BTreeMap<String, Vec<u8>>,
    /// Where shiftlab's HTTP server listens for the nodes, when the host has
    /// an address of its own on the cluster network.
    pub http: Option<SocketAddr>,
    /// Also start the nodes planned to start after bootstrap (workers in UPI).
    pub start_all: bool,
    /// Publishes a node's config behind the cluster's HTTP token:
    /// `(file name, bytes)` in, its URL path out. Called only after the
    /// backend's own checks passed.
    pub publish_private: &'a dyn Fn(&str, &[u8]) -> Result<String>,
    /// A line for the user while the backend works: what may get in the way,
    /// said before anything is created, and warnings after.
    pub say: &'a dyn Fn(&str),
}

/// What [`Backend::apply`] did.
#[derive(Debug, Default)]
pub struct Report {
    /// Lines for the user, in order, once the cluster's record is written.
    pub lines: Vec<String>,
    /// Differences from the plan that were not applied, and why: the infra
    /// target fails with them once the cluster's record is written.
    pub drift: Vec<String>,
    /// One line: what changed.
    pub summary: String,
}

/// What a power change did to one node (`power.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeOutcome {
    pub node: String,
    pub role: Role,
    /// `metal3-off`, `acpi-shutdown`, `forced-off`, `already-off`, `started`,
    /// `already-running`, `absent`.
    pub action: String,
    /// Seconds the node took (shutdown), when it was waited for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
}

impl NodeOutcome {
    pub fn of(node: &Node, action: &str, seconds: Option<u64>) -> NodeOutcome {
        NodeOutcome {
            node: node.name.clone(),
            role: node.role,
            action: action.to_string(),
            seconds,
        }
    }
}

/// How long a power change is waited for, how often it is looked at, and how
/// often the wait says what is still pending (the heartbeat's interval,
/// `crate::progress`).
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    pub timeout: Duration,
    pub poll: Duration,
    pub beat: Duration,
}

/// A cluster's infrastructure as its backend has it now: the first part of
/// `shiftlab status`, the same type for every backend.
#[derive(Debug, Serialize)]
pub struct Status {
    pub cluster: String,
    /// Where the nodes are (its fields at the top level).
    #[serde(flatten)]
    pub place: Place,
    /// By name.
    pub nodes: Vec<NodeStatus>,
}

/// Where a cluster's nodes are, in each backend's terms.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Place {
    /// The cluster's libvirt network, when it exists.
    Libvirt {
        network: Option<String>,
        network_active: bool,
    },
    /// The namespace of the cluster's objects; `backend` is `kubevirt`.
    Kubevirt {
        backend: &'static str,
        namespace: String,
    },
}

/// One node as its backend has it now.
#[derive(Debug, Serialize)]
pub struct NodeStatus {
    pub name: String,
    pub role: Option<String>,
    /// Its power state in the backend's words, `running` when it runs:
    /// libvirt's domain state (`running`, `shutoff`, `paused`…), KubeVirt's
    /// VirtualMachineInstance phase in lower case (`scheduling`, `running`…),
    /// `stopped` when the VM has none.
    pub state: String,
    pub mac: Option<String>,
    /// The address the plan gave it (libvirt: the network's reservation).
    pub planned_ip: Option<String>,
    /// The address it has now (a DHCP lease, the VMI's interface).
    pub leased_ip: Option<String>,
    /// Its DHCPv6 lease in a dual-stack lab (libvirt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leased_ip6: Option<String>,
    pub console_log: Option<String>,
    /// KubeVirt: the VM's `spec.runStrategy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_strategy: Option<String>,
    /// KubeVirt: the VM's `status.printableStatus` (Running, Stopped…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl NodeStatus {
    pub fn running(&self) -> bool {
        self.state == "running"
    }
}

impl Status {
    /// The nodes that run now, by name.
    pub fn running(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .filter(|n| n.running())
            .map(|n| n.name.as_str())
            .collect()
    }
}

/// What the install pipeline and day 2 need of the infrastructure.
pub trait Backend {
    /// `libvirt` or `kubevirt`, for messages.
    fn name(&self) -> &'static str;
    /// Where it looks (the libvirt URI, the KubeVirt namespace), for messages.
    fn location(&self) -> String;
    /// Create or update network, disks, nodes and each node's Ignition so
    /// that they match the plan. Idempotent.
    fn apply(&self, plan: &Plan, cluster: &ClusterDir, inputs: &Inputs) -> Result<Report>;
    /// Power on those of `nodes` that are not running, and with `wait` wait
    /// for each to run (KubeVirt: its VMI Running). An outcome per node:
    /// `started`, `already-running`, or `absent` (no such node).
    fn start(
        &self,
        nodes: &[&Node],
        wait: Option<Wait>,
        say: &dyn Fn(&str),
    ) -> Result<Vec<NodeOutcome>>;
    /// Power `nodes` off together: a graceful shutdown (the ACPI power
    /// button), forced once `wait.timeout` has passed. An outcome per node:
    /// `acpi-shutdown`, `forced-off`, `already-off`, `absent`.
    fn stop(&self, nodes: &[&Node], wait: Wait, say: &dyn Fn(&str)) -> Result<Vec<NodeOutcome>>;
    /// Remove one node with its disks (bootstrap removal); returns what was removed.
    fn remove_node(&self, plan: &Plan, cluster: &ClusterDir, node: &Node) -> Result<Vec<String>>;
    /// The cluster's nodes (and network) as they are now, without its plan;
    /// `None` when the backend holds nothing of `cluster`. Changes nothing.
    fn status(&self, cluster: &str) -> Result<Option<Status>>;
    /// [`Backend::status`] of a cluster it holds nothing of yet.
    fn empty_status(&self, cluster: &str) -> Status;
}

/// The backend a plan's cluster runs on, where the plan says.
pub fn of(plan: &Plan) -> Box<dyn Backend> {
    match &plan.kubevirt {
        None => Box::new(libvirt::Libvirt::at(&plan.libvirt.uri)),
        Some(kp) => Box::new(kubevirt::Kubevirt::at(crate::kubevirt::apply::Ledger::of(
            kp,
        ))),
    }
}

/// The backend a recorded cluster runs on, where its record says: KubeVirt
/// when its ledger (`kubevirt.json`) or its plan says so, at the ledger's
/// API and namespace first; else libvirt at `connect`, else the URI the
/// cluster was created on, else its plan's. Needs no plan.
pub fn for_cluster(cluster: &ClusterDir, connect: Option<&str>) -> Result<Box<dyn Backend>> {
    // The plan serve works from, else the one an install recorded before
    // its first target; one that cannot be read says nothing of the backend.
    let plan = if cluster.has_plan()? {
        cluster.read_plan().ok()
    } else if cluster.install_plan().is_file() {
        crate::state::read_plan_file(&cluster.install_plan()).ok()
    } else {
        None
    };
    let ledger = crate::kubevirt::apply::load_ledger(cluster)?;
    let kubevirt = ledger.or_else(|| {
        plan.as_ref()
            .and_then(|p| p.kubevirt.as_ref())
            .map(crate::kubevirt::apply::Ledger::of)
    });
    if let Some(at) = kubevirt {
        if let Some(uri) = connect {
            bail!(
                "--connect {uri}: {} runs on KubeVirt (namespace {}), not on libvirt; leave --connect out",
                cluster.name(),
                at.namespace
            );
        }
        return Ok(Box::new(kubevirt::Kubevirt::at(at)));
    }
    let planned = plan.map(|p| p.libvirt.uri);
    let uri = libvirt::uri_for(cluster, connect, planned.as_deref())?;
    Ok(Box::new(libvirt::Libvirt::at(&uri)))
}

pub fn kind(plan: &Plan) -> BackendKind {
    if plan.kubevirt.is_some() {
        BackendKind::Kubevirt
    } else {
        BackendKind::Libvirt
    }
}
