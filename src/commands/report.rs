//! `report NAME`: what a rehearsal proved on this host (docs/rehearsal.md).

use std::io::Write;

use anyhow::Result;

use crate::cli::create::CreateCommand;
use crate::cli::report::ReportArgs;
use crate::output::{emit, OutputFormat};
use crate::rehearse::{probe, report};
use crate::state::{ClusterName, StateDir};

pub fn run(args: &ReportArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    show(state, &args.name, args.output, out)
}

/// A rehearsal's `create cluster` ends with its report, and fails when a check
/// did (main calls it after `create`: the command file stays glue).
pub fn after_create(cmd: &CreateCommand, state: &StateDir) -> Result<()> {
    // A restore from a bundle installs nothing: no install to report on.
    if matches!(cmd, CreateCommand::Cluster(a) if a.bundle.is_some()) {
        return Ok(());
    }
    let Some(name) = cluster_of(cmd)? else {
        return Ok(());
    };
    let plan = state.cluster(&name).read_plan()?;
    if !plan.rehearsal || plan.kubevirt.is_some() {
        return Ok(());
    }
    show(state, &name, OutputFormat::Table, &mut std::io::stdout())
}

/// A rehearsal's `create cluster` that failed once its VMs were made shows the
/// report too (on stderr), so the failure comes with what was and was not proven;
/// the create's own error (and its exit status) stands.
pub fn after_failed_create(
    cmd: &CreateCommand,
    state: &StateDir,
    e: anyhow::Error,
) -> anyhow::Error {
    let failed = e.downcast_ref::<crate::exit_status::TargetFailed>();
    if let (Some(t), Ok(Some(name))) = (failed, cluster_of(cmd)) {
        if !report::after_failed(&state.cluster(&name), t.0) {
            return e;
        }
        eprintln!("what the rehearsal of {name} proved before it failed:");
        if let Err(re) = show(state, &name, OutputFormat::Table, &mut std::io::stderr()) {
            tracing::debug!("report after the failure: {re:#}");
        }
    }
    e
}

/// The cluster a `create cluster` names, by name or by its file.
fn cluster_of(cmd: &CreateCommand) -> Result<Option<ClusterName>> {
    let CreateCommand::Cluster(a) = cmd else {
        return Ok(None);
    };
    Ok(Some(match (&a.target.which.name, &a.target.which.file) {
        (Some(n), _) => n.clone(),
        // The file was read and checked by create already: quietly again.
        (None, Some(f)) => {
            let overrides = crate::spec::Overrides {
                force: true,
                params: a.target.which.params.params.clone(),
            };
            ClusterName::parse(&crate::spec::load_with(f, overrides)?.spec.cluster)?
        }
        (None, None) => return Ok(None),
    }))
}

/// Probe, judge and print the report of `name`; an error when a row failed
/// (exit status [`crate::exit_status::REHEARSAL_FAILED`]).
pub fn show(
    state: &StateDir,
    name: &ClusterName,
    format: OutputFormat,
    out: &mut dyn Write,
) -> Result<()> {
    let r = report::judge(&probe::observe(state, name)?);
    emit(out, format, &r, || r.table())?;
    if r.ok {
        return Ok(());
    }
    Err(anyhow::Error::new(crate::exit_status::RehearsalFailed {
        cluster: name.to_string(),
        failed: r.failed,
    }))
}
