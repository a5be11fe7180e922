//! `wait-for <target> NAME`: the bootstrap-complete or install-complete target
//! alone, as openshift-install's `wait-for` (`install::wait_for`).

use anyhow::Result;

use crate::cli::wait_for::WaitForCommand;
use crate::install::target::{Aim, Target};
use crate::install::{self, Ctx, Options};
use crate::state::StateDir;

pub fn run(cmd: &WaitForCommand, state: &StateDir) -> Result<()> {
    let (goal, args) = match cmd {
        WaitForCommand::BootstrapComplete(a) => (Target::BootstrapComplete, a),
        WaitForCommand::InstallComplete(a) => (Target::InstallComplete, a),
    };
    let w = &args.which;
    // A wait makes nothing: sizes --force would let through are no reason to stop it.
    let loaded = super::load_named(w.name.as_ref(), w.file.as_deref(), &w.params, true, state)?;
    let plan = crate::plan::derive(&loaded.spec);
    let ctx = Ctx::new(&loaded.spec, &plan, state, Options::default()).aiming(Aim::Target(goal));
    install::wait_for(&ctx, goal)
}
