use std::io::Write;

use anyhow::Result;

use crate::cli::list::ListArgs;
use crate::cluster::list;
use crate::libvirt::inspect;
use crate::output::emit;
use crate::state::StateDir;

/// The state directory's clusters and libvirt's; libvirt out of reach, the
/// state's alone, said on stderr.
pub fn list(args: &ListArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let uri = crate::libvirt::uri(args.connect.uri.as_deref());
    let libvirt = crate::cluster::host_named(Some(&uri)).and_then(|h| inspect::list(&h));
    let libvirt = match libvirt {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!(
                "warning: libvirt at {uri} was not reached ({e:#}): the clusters of {} alone",
                state.clusters().display()
            );
            None
        }
    };
    let rows = list::merge(list::in_state(state)?, libvirt.as_deref(), &uri);
    emit(out, args.output, &rows, || list::table(&rows))
}
