use std::io::Write;

use anyhow::Result;

use crate::cli::status::StatusArgs;
use crate::output::emit;
use crate::state::StateDir;

pub fn status(args: &StatusArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let cluster = state.cluster(&args.name);
    let status = crate::cluster::status(state, &cluster, args.connect.uri.as_deref())?;
    emit(out, args.output, &status, || status.table())
}
