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
//! Status and destroy work on a cluster whose plan may be gone, so they are
//! reached through the cluster's record instead (`crate::cluster`).

pub mod kubevirt;
pub mod libvirt;

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::path::Path;

use anyhow::Result;

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
    pub http: Option<SocketAddrV4>,
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

/// What the install pipeline needs of the infrastructure.
pub trait Backend {
    /// `libvirt` or `kubevirt`, for messages.
    fn name(&self) -> &'static str;
    /// Create or update network, disks, nodes and each node's Ignition so
    /// that they match the plan. Idempotent.
    fn apply(&self, plan: &Plan, cluster: &ClusterDir, inputs: &Inputs) -> Result<Report>;
    /// Power on the nodes of `roles` that are not running; returns those started.
    fn start(&self, plan: &Plan, roles: &[Role]) -> Result<Vec<String>>;
    /// Remove one node with its disks (bootstrap removal); returns what was removed.
    fn remove_node(&self, plan: &Plan, cluster: &ClusterDir, node: &Node) -> Result<Vec<String>>;
}

/// The backend a plan's cluster runs on.
pub fn of(plan: &Plan) -> Box<dyn Backend> {
    match kind(plan) {
        BackendKind::Libvirt => Box::new(libvirt::Libvirt),
        BackendKind::Kubevirt => Box::new(kubevirt::Kubevirt),
    }
}

pub fn kind(plan: &Plan) -> BackendKind {
    if plan.kubevirt.is_some() {
        BackendKind::Kubevirt
    } else {
        BackendKind::Libvirt
    }
}
