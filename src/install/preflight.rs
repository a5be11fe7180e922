//! `create`'s preflight: doctor's checks, judged for what is left of the run,
//! once before its first target (the download, the installer's runs) when the
//! run goes on to use the host (the infra, the waits on the cluster). A host that cannot take the cluster (KVM missing for a real cluster,
//! libvirt unreachable, the network taken, too little memory or disk, serve not
//! running when the install will wait through it) is refused with every problem
//! at once, before the release is downloaded; warnings are printed and the run
//! goes on. The decision is `doctor::preflight::decide`, pure over the facts
//! gathered here (or recorded ones: `create --facts`, for the tests).

use anyhow::Result;

use super::target::{Flow, Step, Target};
use super::Ctx;
use crate::doctor::checks::Run;
use crate::doctor::preflight::{decide, NotReady};
use crate::plan::Plan;
use crate::spec::BackendKind;

/// Whether reaching `target` uses the host the cluster runs on: the infra, and
/// the waits on the cluster it makes. A run that only makes files (the
/// install-config, the installer's manifests, Ignition, ISO: a laptop without
/// libvirt may make them) is not held to the host; one that goes on to the
/// infra is checked before its download. The steps after bootstrap act on
/// what exists.
pub fn needs_host(target: Target) -> bool {
    matches!(
        target,
        Target::Infra | Target::BootstrapComplete | Target::InstallComplete
    )
}

/// The run whose steps still to run are `remaining`, judged by the checks:
/// `None` when none of them needs the host.
pub fn run_of(flow: Flow, plan: &Plan, remaining: &[Target], infra_done: bool) -> Option<Run> {
    if !remaining.iter().any(|t| needs_host(*t)) {
        return None;
    }
    // The waits go through serve's load balancer (src/serve/ready.rs); IPI's
    // installer drives the hosts through serve's BMC (src/install/ipi.rs).
    let waits = remaining
        .iter()
        .any(|t| matches!(t, Target::BootstrapComplete | Target::InstallComplete));
    let through_serve = plan.load_balancer.is_some() || (flow == Flow::Ipi && plan.bmc.is_some());
    Some(Run {
        needs_serve: waits && through_serve,
        infra_done,
        rehearsal: None,
    })
}

/// What `create cluster` on a new cluster is judged for (`doctor -f`).
pub fn create_cluster(flow: Flow, plan: &Plan) -> Run {
    run_of(flow, plan, &flow.order(), false).unwrap_or_default()
}

/// The method `flow` rehearses with the shipped stand-in installer, if it does.
pub fn rehearsing(flow: Flow, spec: &crate::spec::ClusterSpec) -> Option<Flow> {
    (super::target::without_release(spec) && flow != Flow::Lab).then_some(flow)
}

/// Check the host before `remaining` runs; refuse with every problem.
pub fn check(ctx: &Ctx, remaining: &[&Step], infra_done: bool) -> Result<()> {
    let targets: Vec<Target> = remaining.iter().map(|s| s.target).collect();
    let Some(mut run) = run_of(ctx.flow, ctx.plan, &targets, infra_done) else {
        return Ok(());
    };
    run.rehearsal = rehearsing(ctx.flow, ctx.spec);
    // The host's KVM, libvirt and capacity are nothing to a KubeVirt cluster,
    // whose backend checks its own API before it applies.
    if crate::backend::kind(ctx.plan) == BackendKind::Kubevirt {
        return Ok(());
    }
    let facts = match &ctx.host_facts {
        Some(f) => f.clone(),
        None => {
            let uri =
                crate::backend::libvirt::uri_for(&ctx.cluster, None, Some(&ctx.plan.libvirt.uri))?;
            crate::doctor::facts::gather_for_create(ctx.state, &uri, ctx.plan)
        }
    };
    let d = decide(&facts, ctx.plan, run);
    for w in &d.warnings {
        ctx.progress.aside(format_args!("preflight: warning: {w}"));
    }
    if d.problems.is_empty() {
        return Ok(());
    }
    Err(NotReady {
        cluster: ctx.plan.cluster.clone(),
        problems: d.problems,
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &str) -> Plan {
        let spec = crate::spec::from_str(
            &format!("cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n{extra}"),
            "t.yaml",
            &crate::spec::Env::default(),
        )
        .unwrap()
        .spec;
        crate::plan::derive(&spec)
    }

    #[test]
    fn the_long_work_is_checked_and_what_follows_the_bootstrap_is_not() {
        let p = plan("");
        // install-config alone is a render: no check.
        assert_eq!(run_of(Flow::Upi, &p, &[Target::InstallConfig], false), None);
        assert_eq!(
            run_of(
                Flow::Upi,
                &p,
                &[
                    Target::BootstrapRemoval,
                    Target::Workers,
                    Target::CsrApproval
                ],
                true
            ),
            None
        );
        // Files alone (the download and the installer's files for a
        // `create manifests`): not the host's business.
        assert_eq!(
            run_of(
                Flow::Upi,
                &p,
                &[Target::Release, Target::InstallConfig, Target::Manifests],
                false
            ),
            None
        );
        // On to the infra: checked from the start; serve is needed only when a
        // wait through its load balancer is still to come.
        assert_eq!(
            run_of(
                Flow::Upi,
                &p,
                &[Target::Release, Target::Manifests, Target::Infra],
                false
            ),
            Some(Run {
                needs_serve: false,
                infra_done: false,
                rehearsal: None
            })
        );
        let all = create_cluster(Flow::Upi, &p);
        assert!(all.needs_serve && !all.infra_done);
        // Resumed after infra: the wait still needs serve, the infra is its own.
        assert_eq!(
            run_of(Flow::Upi, &p, &[Target::BootstrapComplete], true),
            Some(Run {
                needs_serve: true,
                infra_done: true,
                rehearsal: None
            })
        );
    }

    #[test]
    fn ipi_needs_serve_for_its_bmc_and_the_lab_alone_never() {
        let ipi = plan("method: ipi\n");
        assert!(ipi.load_balancer.is_none() && ipi.bmc.is_some());
        assert!(create_cluster(Flow::Ipi, &ipi).needs_serve);
        let lab = plan("rehearsal: true\n");
        assert!(!create_cluster(Flow::Lab, &lab).needs_serve);
    }
}
