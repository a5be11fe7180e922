use anyhow::Result;

use crate::cli::create::{CreateCommand, InstallConfigArgs};
use crate::install::dirs::StateDir;
use crate::install::install_config;
use crate::plan;

pub fn run(cmd: &CreateCommand, state: &StateDir) -> Result<()> {
    match cmd {
        CreateCommand::InstallConfig(args) => install_config_target(args, state),
    }
}

fn install_config_target(args: &InstallConfigArgs, state: &StateDir) -> Result<()> {
    let loaded = super::load_spec(&args.file)?;
    let plan = plan::derive(&loaded.spec);
    let written = install_config::write(&loaded.spec, &plan, &args.dir, state)?;
    for p in written {
        println!("wrote {}", p.display());
    }
    Ok(())
}
