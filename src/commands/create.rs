//! `create <target>`: every target reached through `install::reach`. A rerun on a
//! cluster whose recorded plan differs from the file's in the worker count alone
//! first scales it (`scale`'s add/drain/delete path), for any target at or after
//! infra; any other change is refused by the install driver, each field named.

use anyhow::Result;

use crate::cli::create::{CreateCommand, InstallConfigArgs};
use crate::install::target::Target;
use crate::install::{self, Ctx, Options};
use crate::state::StateDir;

pub fn run(cmd: &CreateCommand, state: &StateDir) -> Result<()> {
    let (which, options) = match cmd {
        CreateCommand::InstallConfig(a) => (&a.which, Options::default()),
        CreateCommand::Infra(a) => (
            &a.which,
            Options {
                start_workers: a.start_workers,
                ..Options::default()
            },
        ),
        CreateCommand::Cluster(a) if a.bundle.is_some() => return super::bundle::adopt(a, state),
        CreateCommand::Cluster(a) => (&a.target.which, Options::default()),
        other => (
            &other.target().expect("a target").1.which,
            Options::default(),
        ),
    };
    let loaded = super::load_named(
        which.name.as_ref(),
        which.file.as_deref(),
        &which.params,
        cmd.force(),
        state,
    )?;
    let plan = crate::plan::derive(&loaded.spec);
    let aim = cmd.aim();
    let ctx = Ctx::new(&loaded.spec, &plan, state, options)
        .aiming(aim)
        .with_source(Some(&loaded.source))
        .with_host_facts(cmd.facts())?;
    let goal = ctx.goal(aim)?;
    rescale_first(&ctx, goal)?;
    match cmd {
        CreateCommand::InstallConfig(InstallConfigArgs { dir: Some(dir), .. }) => {
            for p in install::render_install_config(&ctx, dir)? {
                println!("wrote {}", p.display());
            }
            Ok(())
        }
        _ => install::reach(&ctx, goal),
    }
}

/// When the cluster's recorded plan (its VMs) has another worker count than the
/// file and nothing else differs, scale to the file's count before `goal`.
fn rescale_first(ctx: &Ctx, goal: Target) -> Result<()> {
    let Ok(recorded) = ctx.cluster.read_plan() else {
        return Ok(());
    };
    let after_infra = ctx
        .flow
        .path_to(goal)
        .is_ok_and(|p| p.iter().any(|s| s.target == Target::Infra));
    let (was, will) = (
        crate::plan::diff::workers(&recorded),
        crate::plan::diff::workers(ctx.plan),
    );
    if !after_infra
        || was == will
        || !crate::plan::diff::beyond_workers(&recorded, ctx.plan).is_empty()
    {
        return Ok(());
    }
    eprintln!(
        "==> scale: {} has {was} worker(s), the cluster file {will}",
        ctx.spec.cluster
    );
    super::scale::apply(
        ctx.spec,
        ctx.state,
        &crate::cluster::scale::Request::defaults(ctx.spec.workers),
        crate::output::OutputFormat::Table,
        &mut std::io::stderr(),
    )
}
