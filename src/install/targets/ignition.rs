//! The ignition target: `openshift-install create ignition-configs` — the
//! bootstrap, master and worker configs and `auth/` — unless they are there.

use anyhow::{bail, Result};

use super::Note;
use crate::install::state::Locked;
use crate::install::{installer, Ctx};

/// The installer's configs, by the role name it gives them.
pub const ROLES: [&str; 3] = ["bootstrap", "master", "worker"];

pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    let assets = ctx.cluster.assets();
    if !assets.ignition("bootstrap").exists() {
        installer::run(ctx, locked, &["create", "ignition-configs"])?;
    }
    for f in ROLES
        .iter()
        .map(|r| assets.ignition(r))
        .chain([assets.kubeconfig()])
    {
        if !f.exists() {
            bail!("openshift-install did not write {}", f.display());
        }
    }
    Ok(Some("bootstrap.ign, master.ign, worker.ign".into()))
}
