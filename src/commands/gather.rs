use std::io::Write;

use anyhow::Result;

use crate::cli::gather::GatherArgs;
use crate::gather::{self, Options};
use crate::output::emit;
use crate::state::StateDir;

pub fn run(args: &GatherArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let cluster = crate::cluster::known(state, &args.name, ": nothing to gather")?;
    // A gather goes on without a plan or a host: it reports what it could not reach.
    let host = crate::cluster::host_or_why(&cluster, args.connect.uri.as_deref())?;
    let path = args
        .out
        .clone()
        .unwrap_or_else(|| gather::default_out(&args.name));
    let summary = gather::gather(
        state,
        &cluster,
        &Options {
            out: &path,
            host: host.as_ref().map_err(String::clone),
            bootstrap: !args.no_bootstrap,
        },
    )?;
    emit(out, args.output, &summary, || summary.table())
}
