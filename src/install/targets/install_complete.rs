//! The install-complete target: `openshift-install wait-for install-complete`,
//! then how to log in. IPI's flow reaches it by the installer's `create cluster`
//! instead (src/install/ipi.rs; `Via::CreateCluster` in its table).

use anyhow::Result;

use super::bootstrap_complete::wait_for;
use super::Note;
use crate::install::state::Locked;
use crate::install::{installer, Ctx};

pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    // The console route is reached through the ingress load balancer.
    crate::serve::ready::ensure(
        ctx.state,
        &ctx.spec.cluster,
        super::bootstrap_complete::LB_GRACE,
    )?;
    installer::run(ctx, locked, &wait_for(ctx.flow, "install-complete"))?;
    finish(ctx, locked)
}

/// IPI: the installer drives it all; keepalived holds the VIPs, no host LB.
pub fn create_cluster(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    crate::install::ipi::run(ctx, locked)?;
    finish(ctx, locked)
}

/// Record the console and say how to log in.
fn finish(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    let console = format!(
        "https://console-openshift-console.apps.{}",
        ctx.plan.cluster_domain
    );
    locked.update_facts(|f| f.console = Some(console.clone()))?;
    let assets = ctx.cluster.assets();
    let p = &ctx.progress;
    p.say("The cluster is installed.");
    p.say(format_args!("  console:  {console}"));
    p.say(format_args!(
        "  user:     kubeadmin, password in {}",
        assets.kubeadmin_password().display()
    ));
    p.say(format_args!(
        "  export KUBECONFIG={}",
        assets.kubeconfig().display()
    ));
    // storage: lvms: its after-install objects, once the operator runs; here so
    // that a rerun of the target after a crash converges. A rehearsal has no
    // API and no operator to wait for: said, not waited on for half an hour.
    if ctx.plan.rehearsal {
        if assets.file(crate::render::lvms::LVM_CLUSTER_FILE).is_file() {
            p.say("  storage: lvms: a rehearsal has no API; a real install applies lvmcluster.yaml here");
        }
        return Ok(Some(console));
    }
    let say = |l: String| p.say(l);
    if let Some(done) =
        crate::install::lvms::apply(&assets, crate::kube::lvms::Wait::AFTER_INSTALL, &say)?
    {
        for d in &done {
            p.say(format_args!("  {d}"));
        }
        if done.is_empty() {
            p.say("  (all of it was there already)");
        }
    }
    Ok(Some(console))
}
