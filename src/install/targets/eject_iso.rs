//! The eject-iso target (sno, agent): once the install is complete, every node's
//! CD-ROM drive is emptied and the live ISO volume removed. The nodes boot from
//! disk already (the disk is first in the boot order); this makes sure that no
//! later boot — a wiped disk, a changed boot order — lands in the installer again.

use anyhow::Result;

use super::Note;
use crate::install::state::Locked;
use crate::install::Ctx;

pub fn run(ctx: &Ctx, _locked: &mut Locked) -> Result<Note> {
    let host = crate::libvirt::Host::open(&ctx.plan.libvirt.uri)?;
    let done = crate::libvirt::iso::eject(&host, ctx.plan)?;
    Ok(Some(if done.is_empty() {
        "no live ISO left in any drive".into()
    } else {
        done.join(", ")
    }))
}
