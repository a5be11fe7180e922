//! The install pipeline: every target of every flow reached the same way. A
//! target is reached with its predecessors, each idempotent and recorded in the
//! cluster's state before (intent) and after (done) its side effects, so a run
//! stopped anywhere — even by `kill -9` — converges when started again.
//!
//! - [`target`]: `Target`, the per-flow tables of steps, the transition errors;
//! - [`state`]: the versioned, locked install state, typed `Facts`, the plan
//!   fingerprint;
//! - [`targets`]: one file per target, dispatched by [`targets::run`];
//! - [`ipi`]: the bare-metal IPI install around `openshift-install create cluster`;
//! - [`installer`]: running `openshift-install` (a child tied to shiftlab's life,
//!   [`crate::process`]); [`redact`]: its output without the secrets it prints.

pub mod cpu;
pub mod installer;
pub mod ipi;
pub mod lab_manifests;
pub mod lvms;
pub mod preflight;
pub mod redact;
pub mod state;
pub mod target;
pub mod targets;
pub mod users;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::plan::Plan;
use crate::progress::Sink;
use crate::spec::{ClusterSpec, Source};
use crate::state::{ClusterDir, StateDir};
use state::Locked;
use target::{Aim, Flow, Kind, Target};

/// What a command adds to the cluster file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// `create infra --start-workers`: infra also starts the nodes planned to
    /// start after bootstrap.
    pub start_workers: bool,
    /// `scale` (or `create` rerun with another worker count): the plan may
    /// differ from the recorded one in its workers, and the infra target runs
    /// again on an installed cluster to converge libvirt on them.
    pub worker_change: bool,
}

/// Everything a target needs: the spec loaded once and the plan derived once.
pub struct Ctx<'a> {
    pub spec: &'a ClusterSpec,
    pub plan: &'a Plan,
    pub state: &'a StateDir,
    pub cluster: ClusterDir,
    pub flow: Flow,
    pub options: Options,
    /// Where the targets report what they did (stdout on a terminal).
    pub progress: Sink,
    /// The cluster file `spec` was loaded from, recorded with the plan so that
    /// the cluster's name alone finds it again (src/spec/source.rs).
    pub source: Option<&'a Source>,
    /// Recorded host facts the preflight decides over instead of reading the
    /// host (`create --facts`, hidden: the tests' recorded hosts).
    pub host_facts: Option<crate::doctor::HostFacts>,
}

impl<'a> Ctx<'a> {
    pub fn new(
        spec: &'a ClusterSpec,
        plan: &'a Plan,
        state: &'a StateDir,
        options: Options,
    ) -> Self {
        let cluster = state.cluster(&spec.cluster);
        Ctx {
            // What converges the VMs (scale) goes on in the flow begun.
            flow: Flow::chosen(spec, begun(&cluster), Aim::Target(Target::Infra)),
            cluster,
            spec,
            plan,
            state,
            options,
            progress: Sink::terminal(),
            source: None,
            host_facts: None,
        }
    }

    /// The same, in the flow that drives the cluster towards `aim`
    /// ([`Flow::chosen`]: a rehearsal's `create cluster` rehearses its method).
    pub fn aiming(self, aim: Aim) -> Self {
        let flow = Flow::chosen(self.spec, begun(&self.cluster), aim);
        Ctx { flow, ..self }
    }

    /// The target `aim` reaches in this context's flow.
    pub fn goal(&self, aim: Aim) -> Result<Target> {
        // A rehearsal begun as the lab (create infra, ...) stays it: said, since
        // create cluster of the same file would otherwise rehearse the method.
        let method = Flow::chosen(self.spec, None, Aim::End);
        if aim == Aim::End && self.flow == Flow::Lab && method != Flow::Lab {
            self.progress.aside(format_args!(
                "note: {} was begun as {}, which it stays; to rehearse {} instead, `shiftlab destroy cluster {}` first",
                self.spec.cluster,
                Flow::Lab.describe(),
                method.describe(),
                self.spec.cluster
            ));
        }
        Ok(match aim {
            Aim::End => self.flow.end(self.spec)?,
            Aim::Target(t) => t,
        })
    }

    /// The same, recording `source` as the cluster's file when a target runs.
    pub fn with_source(self, source: Option<&'a Source>) -> Self {
        Ctx { source, ..self }
    }

    /// The same, its preflight deciding over the host facts recorded in `file`
    /// (`create --facts`, hidden: the tests' recorded hosts) instead of this host's.
    pub fn with_host_facts(self, file: Option<&std::path::Path>) -> Result<Self> {
        let host_facts = file.map(crate::doctor::facts::read_recorded).transpose()?;
        Ok(Ctx { host_facts, ..self })
    }

    /// The same, its progress sent to `progress` (stderr under `-o json`).
    pub fn with_progress(self, progress: Sink) -> Self {
        Ctx { progress, ..self }
    }
}

/// The flow a cluster's targets ran in, once one ran (unreadable: none; the
/// lock's read reports it).
fn begun(cluster: &ClusterDir) -> Option<Flow> {
    match state::read(cluster) {
        Ok(Some(s)) if !s.targets.is_empty() => s.flow,
        _ => None,
    }
}

/// Reach `goal`: under the cluster's lock, with the plan checked against the one
/// done targets were made from, run every step before it that is not done yet
/// (and those that converge), then `goal` itself.
pub fn reach(ctx: &Ctx, goal: Target) -> Result<()> {
    reach_locked(ctx, goal).map(drop)
}

/// [`reach`], the lock still held.
fn reach_locked(ctx: &Ctx, goal: Target) -> Result<Locked> {
    let path = ctx.flow.path_to(goal);
    if let (Err(e), false) = (&path, ctx.cluster.exists()) {
        return Err(e.clone().into());
    }
    // Input the flow cannot use is refused before anything is made.
    if ctx.flow == Flow::Agent {
        crate::render::install_config::rendezvous_ip(ctx.plan)?;
    }
    let mut locked = state::lock(&ctx.cluster)?;
    // Checks first, writes after: a refused run leaves the state as it was (a
    // changed plan explains more than a target the new flow lacks: said first).
    locked.check_flow(ctx.flow)?;
    locked.verify_plan_with(ctx.flow, ctx.plan, ctx.options.worker_change)?;
    let path = path?;
    // The host before the long work: every problem at once, nothing downloaded.
    let remaining: Vec<&target::Step> = path
        .iter()
        .copied()
        .filter(|s| {
            !locked.is_done(s.target)
                || s.kind == Kind::Converge
                || (ctx.options.worker_change && s.target == Target::Infra)
        })
        .collect();
    preflight::check(ctx, &remaining, locked.is_done(Target::Infra))?;
    locked.enter(ctx.flow)?;
    locked.record_plan(ctx.plan)?;
    if let Some(source) = ctx.source {
        source.record(&ctx.cluster)?;
    }
    for step in path {
        let target = step.target;
        let again = ctx.options.worker_change && target == Target::Infra;
        if locked.is_done(target) && step.kind != Kind::Converge && !again {
            if target == goal {
                ctx.progress.aside(format_args!(
                    "{goal} is done already (shiftlab status shows what each target did)"
                ));
            }
            continue;
        }
        ctx.progress.aside(format_args!("==> {target}"));
        locked.start(ctx.flow, target, None)?;
        // The target names the phase of the exit status (src/exit_status.rs).
        let note = targets::run(step, ctx, &mut locked)
            .context(crate::exit_status::TargetFailed(target))?;
        if let Some(n) = &note {
            ctx.progress.aside(format_args!("    {n}"));
        }
        locked.done(target, note)?;
    }
    Ok(locked)
}

/// `wait-for bootstrap-complete|install-complete`, as openshift-install's
/// `wait-for`: only the wait. The target runs alone, its predecessors done
/// already (none is reached for it), and is recorded done; a target done
/// already has nothing to wait for. Its failure exits with its phase's code.
pub fn wait_for(ctx: &Ctx, goal: Target) -> Result<()> {
    crate::cluster::known(ctx.state, &ctx.spec.cluster, "")?;
    let Some(step) = ctx.flow.step(goal) else {
        return Err(target::IllegalTransition::NotInFlow {
            target: goal,
            flow: ctx.flow,
        }
        .into());
    };
    if step.via != target::Via::Own {
        anyhow::bail!(
            "{} reaches {goal} by `openshift-install create cluster`, which does its own waiting: run `shiftlab create {goal} {}`",
            ctx.flow.describe(),
            ctx.spec.cluster
        );
    }
    let mut locked = state::lock(&ctx.cluster)?;
    locked.check_flow(ctx.flow)?;
    locked.verify_plan(ctx.flow, ctx.plan)?;
    if locked.is_done(goal) {
        ctx.progress
            .aside(format_args!("{goal} is done already: nothing to wait for"));
        return Ok(());
    }
    let before = ctx.flow.predecessors(goal)?;
    if let Some(missing) = before.iter().find(|t| !locked.is_done(**t)) {
        anyhow::bail!(
            "wait-for {goal} only waits, and {missing} is not done: `shiftlab create {goal} {}` reaches it with what comes before",
            ctx.spec.cluster
        );
    }
    locked.start(ctx.flow, goal, None)?;
    ctx.progress.aside(format_args!("==> {goal}"));
    let note =
        targets::run(step, ctx, &mut locked).context(crate::exit_status::TargetFailed(goal))?;
    locked.done(goal, note)
}

/// `create cluster`: reach the flow's last target.
pub fn reach_end(ctx: &Ctx) -> Result<()> {
    reach(ctx, ctx.flow.end(ctx.spec)?)
}

/// `create install-config --dir DIR`: the configs rendered into `dir` alone,
/// nothing recorded (no lock, no state, no plan pinned).
pub fn render_install_config(ctx: &Ctx, dir: &Path) -> Result<Vec<PathBuf>> {
    targets::install_config::render_into(ctx, dir)
}

/// The install state of a cluster for `shiftlab status`: `None` when no target
/// ever ran.
pub fn status(cluster: &ClusterDir) -> Result<Option<state::InstallStatus>> {
    Ok(state::read(cluster)?.map(|s| state::InstallStatus::of(&s)))
}
