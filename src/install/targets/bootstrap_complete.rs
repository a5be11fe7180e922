//! The bootstrap-complete target: `openshift-install wait-for bootstrap-complete`,
//! once the load balancer it waits through is serving (src/serve/ready.rs).

use anyhow::Result;

use super::Note;
use crate::install::state::Locked;
use crate::install::{installer, Ctx};

/// How long serve may take to pick a cluster up and bind its load balancer.
pub const LB_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    crate::serve::ready::ensure(ctx.state, &ctx.spec.cluster, LB_GRACE)?;
    installer::run(
        ctx,
        locked,
        &["wait-for", "bootstrap-complete", "--log-level", "info"],
    )?;
    Ok(Some("the control plane runs on its own".into()))
}
