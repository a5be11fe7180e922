use std::io::Write;
use std::time::Duration;

use anyhow::Result;

use crate::cli::power::{StartArgs, StopArgs};
use crate::cli::OutputFormat;
use crate::cluster::power::{self, StartRequest};
use crate::output::emit;
use crate::progress::Sink;
use crate::state::StateDir;

pub fn stop(args: &StopArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let r = power::stop_cluster(
        state,
        &args.name,
        args.connect.uri.as_deref(),
        args.force,
        Duration::from_secs(args.timeout),
        &Sink::for_output(args.output != OutputFormat::Table),
    )?;
    emit(out, args.output, &r, || r.table())
}

pub fn start(args: &StartArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let req = StartRequest {
        kubeconfig: args.kubeconfig.clone(),
        no_api: args.no_api,
        timeout: Duration::from_secs(args.timeout),
        interval: Duration::from_secs(args.interval),
    };
    let r = power::start_cluster(
        state,
        &args.name,
        args.connect.uri.as_deref(),
        &req,
        &Sink::for_output(args.output != OutputFormat::Table),
    )?;
    emit(out, args.output, &r, || r.table())?;
    r.all_ready(&args.name, req.timeout)
}
