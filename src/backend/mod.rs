//! The seam between the install pipeline and the infrastructure its nodes run
//! on. The plan, install-config, targets, CSR approval and rehearsal are
//! shared; a [`Backend`] creates or updates a cluster's network, disks, nodes
//! and their Ignition, powers nodes, and removes them.
//!
//! - [`libvirt`]: one host, libvirt/KVM (src/libvirt);
//! - [`crate::kubevirt::backend`]: KubeVirt on a Kubernetes cluster.
//!
//! Status and destroy work on a cluster whose plan may be gone, so they are
//! reached through the cluster's record instead (`crate::cluster`).

pub mod libvirt;

use anyhow::Result;

use crate::install::state::Locked;
use crate::install::targets::Note;
use crate::install::Ctx;
use crate::plan::{Node, Plan};
use crate::spec::{BackendKind, Role};

/// What the install pipeline needs of the infrastructure.
pub trait Backend {
    /// `libvirt` or `kubevirt`, for messages.
    fn name(&self) -> &'static str;
    /// The infra target: create or update network, disks, nodes and each
    /// node's Ignition so that they match the plan. Idempotent.
    fn apply(&self, ctx: &Ctx, locked: &mut Locked) -> Result<Note>;
    /// Power on the nodes of `roles` that are not running; returns those started.
    fn start(&self, ctx: &Ctx, roles: &[Role]) -> Result<Vec<String>>;
    /// Remove one node with its disks (bootstrap removal); returns what was removed.
    fn remove_node(&self, ctx: &Ctx, node: &Node) -> Result<Vec<String>>;
}

/// The backend a plan's cluster runs on.
pub fn of(plan: &Plan) -> Box<dyn Backend> {
    match kind(plan) {
        BackendKind::Libvirt => Box::new(libvirt::Libvirt),
        BackendKind::Kubevirt => Box::new(crate::kubevirt::backend::Kubevirt),
    }
}

pub fn kind(plan: &Plan) -> BackendKind {
    if plan.kubevirt.is_some() {
        BackendKind::Kubevirt
    } else {
        BackendKind::Libvirt
    }
}
