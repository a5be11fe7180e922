//! The libvirt backend: what the pipeline did before the seam, unchanged.

use anyhow::Result;

use super::Backend;
use crate::install::state::Locked;
use crate::install::targets::Note;
use crate::install::Ctx;
use crate::libvirt::Host;
use crate::plan::Node;
use crate::spec::Role;

pub struct Libvirt;

impl Backend for Libvirt {
    fn name(&self) -> &'static str {
        "libvirt"
    }

    fn apply(&self, ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
        crate::install::targets::infra::run_libvirt(ctx, locked)
    }

    fn start(&self, ctx: &Ctx, roles: &[Role]) -> Result<Vec<String>> {
        let host = Host::open(&ctx.plan.libvirt.uri)?;
        crate::libvirt::apply::start_nodes(&host, ctx.plan, roles)
    }

    fn remove_node(&self, ctx: &Ctx, node: &Node) -> Result<Vec<String>> {
        let host = Host::open(&ctx.plan.libvirt.uri)?;
        crate::libvirt::destroy::remove_node(
            &host,
            &ctx.plan.cluster,
            node,
            &ctx.plan.libvirt.pool,
            &ctx.cluster,
        )
    }
}
