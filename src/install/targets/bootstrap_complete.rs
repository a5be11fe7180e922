//! The bootstrap-complete target: `openshift-install wait-for bootstrap-complete`
//! (`agent wait-for bootstrap-complete` for the agent flow, which first follows
//! the assisted-service on the rendezvous host, then the Kubernetes API:
//! openshift/installer cmd/openshift-install/agent/waitfor.go), once the load
//! balancer it waits through is serving (src/serve/ready.rs).

use anyhow::Result;

use super::Note;
use crate::install::state::Locked;
use crate::install::target::Flow;
use crate::install::{installer, Ctx};

/// How long serve may take to pick a cluster up and bind its load balancer.
pub const LB_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    crate::serve::ready::ensure(ctx.state, &ctx.spec.cluster, LB_GRACE)?;
    installer::run(ctx, locked, &wait_for(ctx.flow, "bootstrap-complete"))?;
    Ok(Some("the control plane runs on its own".into()))
}

/// The installer's arguments to wait for `what` on `flow`.
pub fn wait_for(flow: Flow, what: &'static str) -> Vec<&'static str> {
    let mut args = if flow == Flow::Agent {
        vec!["agent"]
    } else {
        vec![]
    };
    args.extend(["wait-for", what, "--log-level", "info"]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_waits_through_the_agent_verb() {
        assert_eq!(
            wait_for(Flow::Agent, "install-complete"),
            [
                "agent",
                "wait-for",
                "install-complete",
                "--log-level",
                "info"
            ]
        );
        assert_eq!(wait_for(Flow::Sno, "bootstrap-complete")[0], "wait-for");
    }
}
