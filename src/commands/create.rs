//! `create <target>`: glue from the arguments to the install module.

use anyhow::Result;

use std::path::Path;

use crate::cli::create::{CreateCommand, InfraArgs, InstallConfigArgs};
use crate::install::target::Target;
use crate::install::{driver, infra, install_config};
use crate::libvirt::Host;
use crate::plan;
use crate::state::StateDir;

pub fn run(cmd: &CreateCommand, state: &StateDir) -> Result<()> {
    match cmd {
        CreateCommand::InstallConfig(args) if args.dir.is_some() => {
            install_config_target(args, state)
        }
        CreateCommand::InstallConfig(args) => {
            driver_target(&args.file, Some(Target::InstallConfig), state)
        }
        CreateCommand::Infra(args) => infra_target(args, state),
        CreateCommand::Cluster(args) => driver_target(&args.file, None, state),
        other => {
            let (target, args) = other.target().expect("a driver target");
            driver_target(&args.file, Some(target), state)
        }
    }
}

fn install_config_target(args: &InstallConfigArgs, state: &StateDir) -> Result<()> {
    let loaded = super::load_spec(&args.file)?;
    let plan = plan::derive(&loaded.spec);
    // It writes the cluster's secrets (BMC password) into the state: one at a time.
    let _lock = crate::install::state::lock(&state.cluster(&plan.cluster), &plan.cluster)?;
    let dir = args.dir.as_deref().unwrap_or(std::path::Path::new("."));
    let written = install_config::write(&loaded.spec, &plan, dir, state)?;
    for p in written {
        println!("wrote {}", p.display());
    }
    Ok(())
}

fn infra_target(args: &InfraArgs, state: &StateDir) -> Result<()> {
    let loaded = super::load_spec(&args.file)?;
    let spec = &loaded.spec;
    let plan = plan::derive(spec);
    let mut locked = crate::install::state::lock(&state.cluster(&plan.cluster), &plan.cluster)?;
    locked.check_plan(&plan)?;
    let host = Host::open(&plan.libvirt.uri)?;
    infra::apply_infra(spec, &plan, state, &host, args.start_workers, None)?;
    Ok(())
}

/// Reach `goal` (the method's last target when none), the spec loaded once.
fn driver_target(file: &Path, goal: Option<Target>, state: &StateDir) -> Result<()> {
    let loaded = super::load_spec(file)?;
    let plan = plan::derive(&loaded.spec);
    let goal = match goal {
        Some(t) => t,
        None => *driver::targets(loaded.spec.method)?
            .last()
            .expect("every method has targets"),
    };
    let ctx = driver::Ctx::new(&loaded.spec, &plan, state);
    driver::reach(&ctx, goal)
}
