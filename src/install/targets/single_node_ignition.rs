//! The single-node-ignition target (sno): `openshift-install create
//! single-node-ignition-config`, which writes `bootstrap-in-place-for-live-iso.ign`
//! and `auth/` from install-config.yaml's `bootstrapInPlace` (openshift/installer
//! pkg/asset/ignition/bootstrap/bootstrapinplace.go,
//! cmd/openshift-install/create.go `singleNodeIgnitionConfigTarget`), unless they
//! are there.

use anyhow::{bail, Result};

use super::Note;
use crate::install::state::Locked;
use crate::install::{installer, Ctx};

pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    let assets = ctx.cluster.assets();
    let config = assets.single_node_ignition();
    if !config.exists() {
        super::install_config::restore(&ctx.cluster)?;
        installer::run(ctx, locked, &["create", "single-node-ignition-config"])?;
    }
    for f in [&config, &assets.kubeconfig()] {
        if !f.exists() {
            bail!("openshift-install did not write {}", f.display());
        }
    }
    Ok(Some("bootstrap-in-place-for-live-iso.ign".into()))
}
