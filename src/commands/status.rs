use std::io::Write;

use anyhow::Result;

use crate::cli::status::StatusArgs;
use crate::output::emit;
use crate::state::StateDir;

pub fn status(args: &StatusArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let cluster = state.cluster(&args.name);
    if let Some(status) = crate::cluster::kubevirt_status(&cluster)? {
        return emit(out, args.output, &status, || status.table());
    }
    let host = crate::cluster::host(&cluster, args.connect.uri.as_deref(), None)?;
    let status = crate::cluster::status(&host, state, &cluster)?;
    emit(out, args.output, &status, || status.table())
}
