//! `create <target>`: every target reached through `install::reach`.

use anyhow::Result;

use crate::cli::create::CreateCommand;
use crate::install::target::Target;
use crate::install::{self, Ctx, Options};
use crate::state::StateDir;

pub fn run(cmd: &CreateCommand, state: &StateDir) -> Result<()> {
    let (file, goal, options) = match cmd {
        CreateCommand::InstallConfig(a) => {
            (&a.file, Some(Target::InstallConfig), Options::default())
        }
        CreateCommand::Infra(a) => (
            &a.file,
            Some(Target::Infra),
            Options {
                start_workers: a.start_workers,
            },
        ),
        CreateCommand::Cluster(a) => (&a.file, None, Options::default()),
        other => {
            let (target, a) = other.target().expect("a driver target");
            (&a.file, Some(target), Options::default())
        }
    };
    let loaded = super::load_spec(file)?;
    let plan = crate::plan::derive(&loaded.spec);
    let ctx = Ctx::new(&loaded.spec, &plan, state, options);
    match (cmd, goal) {
        (CreateCommand::InstallConfig(a), _) if a.dir.is_some() => {
            for p in install::export_install_config(&ctx, a.dir.as_deref().unwrap_or(".".as_ref()))?
            {
                println!("wrote {}", p.display());
            }
            Ok(())
        }
        (_, Some(goal)) => install::reach(&ctx, goal),
        (_, None) => install::reach_end(&ctx),
    }
}
