use std::io::Write;

use anyhow::{bail, Result};

use crate::cli::gather::GatherArgs;
use crate::gather::{self, Options};
use crate::libvirt::Host;
use crate::output::emit;
use crate::state::StateDir;

pub fn run(args: &GatherArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let cluster = state.cluster(&args.name);
    if !cluster.exists() {
        bail!(
            "no cluster {} in {}: nothing to gather",
            args.name,
            state.clusters().display()
        );
    }
    let recorded = crate::cluster::recorded_uri(&cluster)?;
    let planned = cluster.read_plan().ok().map(|p| p.libvirt.uri);
    let uri = crate::libvirt::uri(
        args.connect
            .uri
            .as_deref()
            .or(recorded.as_deref())
            .or(planned.as_deref()),
    );
    let host = Host::open(&uri);
    let path = args
        .out
        .clone()
        .unwrap_or_else(|| gather::default_out(&args.name));
    let summary = gather::gather(
        state,
        &cluster,
        &Options {
            out: &path,
            host: host.as_ref().map_err(|e| format!("{e:#}")),
            bootstrap: !args.no_bootstrap,
        },
    )?;
    emit(out, args.output, &summary, || summary.table())
}
