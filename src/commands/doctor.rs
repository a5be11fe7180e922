use std::io::Write;

use anyhow::Result;
use serde::Serialize;

use crate::cli::doctor::DoctorArgs;
use crate::doctor::{self, HostFacts, Report};
use crate::output::emit;
use crate::state::StateDir;

#[derive(Serialize)]
struct Out<'a> {
    #[serde(flatten)]
    report: &'a Report,
    /// What the checks decided on: replayable with --facts.
    facts: &'a HostFacts,
}

/// Run the checks and print them; the exit code is by severity
/// ([`doctor::exit_code`]).
pub fn run(args: &DoctorArgs, state: &StateDir, out: &mut dyn Write) -> Result<u8> {
    // Doctor makes nothing: a size `create --force` may go on with is a warning here.
    let loaded = args
        .file
        .as_deref()
        .map(|f| super::load_spec_with(f, true, &args.params))
        .transpose()?;
    let plan = loaded.as_ref().map(|l| crate::plan::derive(&l.spec));
    let uri = crate::libvirt::uri(
        args.connect
            .uri
            .as_deref()
            .or(plan.as_ref().map(|p| p.libvirt.uri.as_str())),
    );
    let facts = match &args.facts {
        Some(f) => doctor::facts::read_recorded(f)?,
        None => doctor::facts::gather(state, &uri, plan.as_ref()),
    };
    // With a cluster file: judged as `create cluster`'s preflight judges them.
    let run = match (&loaded, &plan) {
        (Some(l), Some(p)) => {
            let flow = crate::install::target::Flow::of(&l.spec);
            crate::doctor::checks::Run {
                rehearsal: crate::install::preflight::rehearsing(flow, &l.spec),
                ..crate::install::preflight::create_cluster(flow, p)
            }
        }
        _ => Default::default(),
    };
    let checks = doctor::checks::checks_for(&facts, plan.as_ref(), run);
    let code = doctor::exit_code(&checks);
    let report = Report::new(plan.as_ref().map(|p| p.cluster.clone()), checks);
    emit(
        out,
        args.output,
        &Out {
            report: &report,
            facts: &facts,
        },
        || report.table(crate::color::stdout()),
    )?;
    Ok(code)
}
