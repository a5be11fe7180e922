//! One file per target, each `run(ctx, locked) -> note`: what the target does,
//! idempotently (it may run again after a crash, or every time if it converges).
//! The note goes into `install-state.json` and `shiftlab status`.

pub mod bootstrap_complete;
pub mod bootstrap_removal;
pub mod csr_approval;
pub mod eject_iso;
pub mod ignition;
pub mod infra;
pub mod install_complete;
pub mod install_config;
pub mod iso;
pub mod manifests;
pub mod release;
pub mod single_node_ignition;
pub mod workers;

use anyhow::Result;

use super::state::Locked;
use super::target::{Step, Target, Via};
use super::Ctx;

/// What a target found or did, for the user.
pub type Note = Option<String>;

/// Run `step`'s body: its target's own, or the way its flow reaches it (the
/// driver recorded its start; it records it done).
pub fn run(step: &Step, ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    if step.via == Via::CreateCluster {
        return install_complete::create_cluster(ctx, locked);
    }
    match step.target {
        Target::Release => release::run(ctx, locked),
        Target::InstallConfig => install_config::run(ctx, locked),
        Target::Manifests => manifests::run(ctx, locked),
        Target::Ignition => ignition::run(ctx, locked),
        Target::SingleNodeIgnition => single_node_ignition::run(ctx, locked),
        Target::Iso => iso::run(ctx, locked),
        Target::Infra => infra::run(ctx, locked),
        Target::BootstrapComplete => bootstrap_complete::run(ctx, locked),
        Target::BootstrapRemoval => bootstrap_removal::run(ctx, locked),
        Target::Workers => workers::run(ctx, locked),
        Target::CsrApproval => csr_approval::run(ctx, locked),
        Target::InstallComplete => install_complete::run(ctx, locked),
        Target::EjectIso => eject_iso::run(ctx, locked),
    }
}
