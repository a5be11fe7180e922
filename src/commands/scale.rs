use std::io::Write;

use anyhow::Result;

use crate::cli::scale::ScaleArgs;
use crate::cluster::scale::{self, Request};
use crate::output::{emit, OutputFormat};
use crate::progress::Sink;
use crate::spec::ClusterSpec;
use crate::state::StateDir;

pub fn run(args: &ScaleArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let loaded = super::load_named(
        Some(&args.name),
        args.file.as_deref(),
        &args.params,
        args.force,
        state,
    )?;
    let req = Request {
        workers: args.workers,
        drain_timeout: args.drain_timeout,
        timeout: args.timeout,
        kubeconfig: args.kubeconfig.clone(),
    };
    let scaled = apply(&loaded.spec, state, &req, args.output, out);
    // The file with the new count, so that the name alone finds it next time.
    let recorded = crate::cluster::record_scaled(state, &args.name, &loaded.source, args.workers);
    scaled.and(recorded)
}

/// `scale`, and `create`'s rerun on another worker count: the outcome printed,
/// then an error for new workers not Ready in time.
pub fn apply(
    spec: &ClusterSpec,
    state: &StateDir,
    req: &Request,
    output: OutputFormat,
    out: &mut dyn Write,
) -> Result<()> {
    // Under -o json/yaml the infra target's progress goes to stderr: stdout
    // holds the one document.
    let progress = Sink::for_output(output != OutputFormat::Table);
    let outcome = scale::scale(spec, state, req, progress)?;
    emit(out, output, &outcome, || outcome.table())?;
    outcome.all_ready(req.timeout)
}
