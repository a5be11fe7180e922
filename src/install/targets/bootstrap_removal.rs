//! The bootstrap-removal target: the bootstrap out of the load balancer, what was
//! published for it withdrawn, its VM and volumes gone.

use anyhow::{Context, Result};

use super::Note;
use crate::install::state::Locked;
use crate::install::Ctx;
use crate::spec::Role;

pub fn run(ctx: &Ctx, _locked: &mut Locked) -> Result<Note> {
    let plan = ctx.plan;
    // Out of the load balancer first, so no request goes to a node that is leaving.
    if plan.load_balancer.is_some() {
        crate::serve::remove_bootstrap(ctx.state, &plan.cluster)
            .context("removing the bootstrap from the load balancer")?;
    }
    let backend = crate::backend::of(plan);
    let mut removed = Vec::new();
    // Whatever was published for the bootstrap (its config holds the admin
    // kubeconfig, CA keys and pull secret) goes with it.
    for node in plan.nodes_with_role(Role::Bootstrap) {
        for f in crate::serve::http::unpublish_node(&ctx.cluster, &node.name)? {
            removed.push(format!("published {}", f.display()));
        }
    }
    for node in plan.nodes_with_role(Role::Bootstrap) {
        removed.extend(backend.remove_node(plan, &ctx.cluster, node)?);
    }
    Ok(Some(if removed.is_empty() {
        "the bootstrap was already gone".into()
    } else {
        format!("removed {}", removed.join(", "))
    }))
}
