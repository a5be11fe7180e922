use std::io::Write;

use anyhow::Result;

use crate::cli::list::ListArgs;
use crate::libvirt::inspect;
use crate::output::emit;

pub fn list(args: &ListArgs, out: &mut dyn Write) -> Result<()> {
    let host = crate::cluster::host_named(args.connect.uri.as_deref())?;
    let clusters = inspect::list(&host)?;
    emit(out, args.output, &clusters, || {
        crate::cluster::list_table(&clusters)
    })
}
