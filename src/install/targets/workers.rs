//! The workers target: the nodes planned to start after bootstrap are started.

use anyhow::Result;

use super::Note;
use crate::install::state::Locked;
use crate::install::Ctx;
use crate::plan::Start;
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
    let started = crate::backend::of(ctx.plan).start(ctx.plan, &later)?;
    Ok(Some(if started.is_empty() {
        "every worker already runs".into()
    } else {
        format!("started {}", started.join(", "))
    }))
}
