//! The csr-approval target: the new nodes' client and serving CSRs approved
//! (nobody else does on `platform: none`), until every node that started after
//! bootstrap has both.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

use super::Note;
use crate::install::state::Locked;
use crate::install::Ctx;
use crate::kube::approve::{self, Missing, WatchOptions};
use crate::kube::csr::NodeIdentity;
use crate::plan::{Plan, Start};
use crate::spec::Role;

/// How long the target waits for every awaited node's two CSRs. A worker started
/// after bootstrap-complete installs CoreOS from its Ignition, reboots and joins
/// in minutes on KVM; under TCG or on slow disks it can take much longer.
pub const CSR_DEADLINE: Duration = Duration::from_secs(60 * 60);

pub fn run(ctx: &Ctx, _locked: &mut Locked) -> Result<Note> {
    if ctx.spec.rehearsal {
        return Ok(Some(
            "rehearsal: stand-in nodes raise no CSRs (there is no Kubernetes API)".into(),
        ));
    }
    let opts = WatchOptions {
        nodes: csr_awaited(ctx.plan),
        deadline: Some(CSR_DEADLINE),
        ..WatchOptions::default()
    };
    // Off a terminal, a heartbeat with the approvals so far.
    let latest = crate::progress::Latest::default();
    let what = format!("the CSRs of {}", opts.nodes.join(", "));
    let mut approved = 0;
    let done = ctx.progress.beating(&what, &latest, || {
        approve::watch_blocking(
            &ctx.cluster.assets().kubeconfig(),
            &NodeIdentity::from_plan(ctx.plan),
            &opts,
            |pass| {
                approved += pass.approved.len();
                latest.set(format!("{approved} CSRs approved"));
            },
        )
    })?;
    if done.timed_out && !done.missing.is_empty() {
        bail!(
            "{}",
            csr_timeout_message(&done.missing, &ctx.cluster.installer_log())
        );
    }
    if done.interrupted || !done.missing.is_empty() {
        let why = format!(
            "stopped before every worker's certificates were approved ({} missing); run again to continue",
            done.missing.len()
        );
        // Ctrl-C: the installer's interrupt exit code (src/exit_status.rs).
        if done.interrupted {
            return Err(crate::exit_status::Interrupted(why).into());
        }
        bail!("{why}");
    }
    Ok(Some(format!(
        "{} CSRs approved",
        done.report.approved.len()
    )))
}

/// The nodes whose certificates the target waits for, named explicitly: the nodes
/// started after bootstrap (workers), or in a compact cluster (no workers) the
/// control planes, which then run the workloads.
pub fn csr_awaited(plan: &Plan) -> Vec<String> {
    let later: Vec<String> = plan
        .nodes
        .iter()
        .filter(|n| n.start == Start::AfterBootstrap)
        .map(|n| n.name.clone())
        .collect();
    if !later.is_empty() {
        return later;
    }
    plan.nodes_with_role(Role::Ctlplane)
        .map(|n| n.name.clone())
        .collect()
}

/// What to tell the user when the deadline passed with certificates missing.
pub fn csr_timeout_message(missing: &[Missing], log: &Path) -> String {
    let list: Vec<String> = missing
        .iter()
        .map(|m| format!("{} ({})", m.node, m.kind))
        .collect();
    format!(
        "no approvable CSR came within {} min for: {}\n\
         likely causes: the node did not boot or install (see its console log: shiftlab status), \
         it named itself wrongly (its DHCP hostname or PTR record: a node called localhost raises \
         CSRs no rule approves), or its kubelet cannot reach api-int:6443 (DNS, load balancer); \
         refused CSRs and why are in `shiftlab approve-csrs <cluster>`; the installer's log is {}\n\
         run the same command again to go on waiting",
        CSR_DEADLINE.as_secs() / 60,
        list.join(", "),
        log.display()
    )
}
