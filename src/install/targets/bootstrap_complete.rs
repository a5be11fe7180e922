//! The bootstrap-complete target: `openshift-install wait-for bootstrap-complete`.

use anyhow::Result;

use super::Note;
use crate::install::state::Locked;
use crate::install::{installer, Ctx};

pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    installer::run(
        ctx,
        locked,
        &["wait-for", "bootstrap-complete", "--log-level", "info"],
    )?;
    Ok(Some("the control plane runs on its own".into()))
}
