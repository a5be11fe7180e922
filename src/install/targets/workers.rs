//! The workers target: the nodes planned to start after bootstrap are started.

use anyhow::{bail, Result};

use super::Note;
use crate::install::state::Locked;
use crate::install::Ctx;
use crate::plan::{Node, Start};
use crate::spec::Role;

pub fn run(ctx: &Ctx, _locked: &mut Locked) -> Result<Note> {
    let later: Vec<Role> = ctx
        .plan
        .nodes
        .iter()
        .filter(|n| n.start == Start::AfterBootstrap)
        .map(|n| n.role)
        .collect();
    if later.is_empty() {
        return Ok(Some("no node is planned to start after bootstrap".into()));
    }
    let nodes: Vec<&Node> = ctx
        .plan
        .nodes
        .iter()
        .filter(|n| later.contains(&n.role))
        .collect();
    let backend = crate::backend::of(ctx.plan);
    let outcomes = backend.start(&nodes, None, &|_| {})?;
    if let Some(o) = outcomes.iter().find(|o| o.action == "absent") {
        bail!(
            "{} does not exist on {}; run create infra",
            o.node,
            backend.name()
        );
    }
    let started: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.action == "started")
        .map(|o| o.node.as_str())
        .collect();
    Ok(Some(if started.is_empty() {
        "every worker already runs".into()
    } else {
        format!("started {}", started.join(", "))
    }))
}
