//! `create <target>`: every target reached through `install::reach`.

use anyhow::Result;

use crate::cli::create::{CreateCommand, InstallConfigArgs};
use crate::install::target::Target;
use crate::install::{self, Ctx, Options};
use crate::state::StateDir;

pub fn run(cmd: &CreateCommand, state: &StateDir) -> Result<()> {
    let (file, options) = match cmd {
        CreateCommand::InstallConfig(a) => (&a.file, Options::default()),
        CreateCommand::Infra(a) => (
            &a.file,
            Options {
                start_workers: a.start_workers,
            },
        ),
        CreateCommand::Cluster(a) => (&a.file, Options::default()),
        other => (
            &other.target().expect("a target").1.file,
            Options::default(),
        ),
    };
    let loaded = super::load_spec(file)?;
    let plan = crate::plan::derive(&loaded.spec);
    let ctx = Ctx::new(&loaded.spec, &plan, state, options);
    match cmd {
        CreateCommand::InstallConfig(InstallConfigArgs { dir: Some(dir), .. }) => {
            for p in install::export_install_config(&ctx, dir)? {
                println!("wrote {}", p.display());
            }
            Ok(())
        }
        CreateCommand::InstallConfig(_) => install::reach(&ctx, Target::InstallConfig),
        CreateCommand::Infra(_) => install::reach(&ctx, Target::Infra),
        CreateCommand::Cluster(_) => install::reach_end(&ctx),
        other => install::reach(&ctx, other.target().expect("a target").0),
    }
}
