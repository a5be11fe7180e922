//! The install's persisted state: which flow it follows, which targets are done,
//! and which one was started (its intent on disk before its side effects run).
//! Versioned, written atomically, and guarded by the cluster's lock so two
//! shiftlabs never drive the same cluster at once.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::target::{Flow, IllegalTransition, Kind, Target};
use crate::files::{read_json, write_json};
use crate::plan::Plan;
use crate::state::{ClusterDir, ClusterLock};

pub const STATE_FORMAT: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Started: its side effects may be partly done; running it again converges.
    Started,
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRecord {
    pub status: Status,
    /// Seconds since the epoch of the last change.
    pub at: u64,
    /// When the target last started (seconds since the epoch); with `at` of a
    /// done target, its duration. Absent in older states.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<u64>,
    /// What the target was doing or found, for the user (`status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallState {
    pub format: u32,
    pub cluster: String,
    /// The flow the targets belong to. Absent in older states (all upi): adopted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Flow>,
    pub targets: BTreeMap<String, TargetRecord>,
    /// Facts later targets need (installer path, release version, …).
    #[serde(default)]
    pub facts: Facts,
    /// Fingerprint of the plan the done targets were made from (its copy is
    /// `install-plan.json` beside this file). Absent in older states: adopted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_fingerprint: Option<String>,
}

/// What targets learn that later targets need. Stored as a JSON object of strings
/// (the format an untyped map had), so older states read the same.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Facts {
    /// The concrete version `release` resolved (`4.18.7`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release_version: Option<String>,
    /// Its release image pullspec.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release_image: Option<String>,
    /// The verified, extracted `openshift-install`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub openshift_install: Option<PathBuf>,
    /// The verified, extracted `oc`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oc: Option<PathBuf>,
    /// The verified CoreOS disk image from the installer's stream metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coreos_image: Option<PathBuf>,
    /// The verified CoreOS live ISO from the same stream metadata (sno, agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coreos_iso: Option<PathBuf>,
    /// The console URL `install-complete` printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub console: Option<String>,
    /// The release's CoreOS stream and the x86-64 level it needs: under TCG
    /// the nodes get a CPU model with that level (src/release/cpu_level.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_level: Option<crate::release::StreamLevel>,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// An exclusive hold on a cluster's state, released when dropped.
pub struct Locked {
    cluster: ClusterDir,
    _lock: ClusterLock,
    pub state: InstallState,
}

/// Read a cluster's install state without taking its lock (for `status`): `None`
/// when no target ever ran.
pub fn read(cluster: &ClusterDir) -> Result<Option<InstallState>> {
    let state: Option<InstallState> = read_json(&cluster.install_state())?;
    if let Some(s) = &state {
        if s.format > STATE_FORMAT {
            bail!(
                "{} was written by a newer shiftlab (format {}); upgrade shiftlab",
                cluster.install_state().display(),
                s.format
            );
        }
    }
    Ok(state)
}

/// Take the cluster's lock (failing at once if another shiftlab holds it) and read
/// its state.
pub fn lock(cluster: &ClusterDir) -> Result<Locked> {
    let lock = cluster.lock()?;
    let state = read(cluster)?.unwrap_or_else(|| InstallState {
        format: STATE_FORMAT,
        cluster: cluster.name().to_string(),
        ..InstallState::default()
    });
    Ok(Locked {
        cluster: cluster.clone(),
        _lock: lock,
        state,
    })
}

impl Locked {
    fn save(&self) -> Result<()> {
        write_json(&self.cluster.install_state(), &self.state)
    }

    pub fn is_done(&self, target: Target) -> bool {
        self.status(target) == Some(Status::Done)
    }

    fn status(&self, target: Target) -> Option<Status> {
        self.state.targets.get(target.as_str()).map(|r| r.status)
    }

    /// Refuse to go on in `flow` when targets ran in another one (the cluster file
    /// turned a rehearsal into an install, or changed the method): what was made
    /// for one is not what the other expects. Changes nothing.
    pub fn check_flow(&self, flow: Flow) -> Result<()> {
        match self.state.flow {
            Some(f) if f != flow && !self.state.targets.is_empty() => bail!(
                "{} was begun as {} ({}), and its cluster file now makes it {} ({}): a rehearsal without a release, a mirror or installer, or the method changed; restore the cluster file, or start over with `shiftlab destroy cluster {}`",
                self.state.cluster,
                f.describe(),
                targets_of(&self.state),
                flow.describe(),
                flow,
                self.state.cluster
            ),
            _ => Ok(()),
        }
    }

    /// Record that the targets from now on belong to `flow`.
    pub fn enter(&mut self, flow: Flow) -> Result<()> {
        self.check_flow(flow)?;
        if self.state.flow != Some(flow) {
            self.state.flow = Some(flow);
            self.save()?;
        }
        Ok(())
    }

    /// Record that `target` is about to run: on disk before any side effect. The
    /// state must be in `flow`, `target` one of its targets, its predecessors
    /// done, and it must not be done already unless it converges.
    pub fn start(&mut self, flow: Flow, target: Target, note: Option<String>) -> Result<()> {
        let Some(step) = flow.step(target) else {
            return Err(IllegalTransition::NotInFlow { target, flow }.into());
        };
        if self.state.flow != Some(flow) {
            return Err(IllegalTransition::OtherFlow {
                target,
                flow,
                entered: self.state.flow,
            }
            .into());
        }
        let before = flow.predecessors(target)?;
        if let Some(missing) = before.iter().find(|t| !self.is_done(**t)) {
            return Err(IllegalTransition::PredecessorNotDone {
                target,
                missing: *missing,
            }
            .into());
        }
        if self.is_done(target) && step.kind != Kind::Converge {
            return Err(IllegalTransition::AlreadyDone(target).into());
        }
        self.record(target, Status::Started, note)
    }

    /// Record that `target`, started, is done.
    pub fn done(&mut self, target: Target, note: Option<String>) -> Result<()> {
        if self.status(target) != Some(Status::Started) {
            return Err(IllegalTransition::DoneWithoutStart(target).into());
        }
        self.record(target, Status::Done, note)
    }

    fn record(&mut self, target: Target, status: Status, note: Option<String>) -> Result<()> {
        let at = now();
        // Done keeps the start it follows; a (re)start is a new start.
        let started = match status {
            Status::Started => Some(at),
            Status::Done => self
                .state
                .targets
                .get(target.as_str())
                .and_then(|r| r.started),
        };
        self.state.targets.insert(
            target.as_str().to_string(),
            TargetRecord {
                status,
                at,
                started,
                note,
            },
        );
        self.save()
    }

    /// The done targets that pin the plan in `flow`: those that made something
    /// from it that is kept (a target of another flow counts, to be safe).
    fn pinning(&self, flow: Flow) -> Vec<&str> {
        self.state
            .targets
            .iter()
            .filter(|(_, r)| r.status == Status::Done)
            .filter(|(t, _)| {
                Target::parse(t)
                    .and_then(|t| flow.step(t))
                    .is_none_or(|s| s.kind == Kind::Build)
            })
            .map(|(t, _)| t.as_str())
            .collect()
    }

    /// Refuse `plan` when it is not the one the done targets of `flow` were made
    /// from, with what changed, so shiftlab never builds a cluster other than the
    /// one the installer's assets describe. Changes nothing.
    pub fn verify_plan(&self, flow: Flow, plan: &Plan) -> Result<()> {
        self.verify_plan_with(flow, plan, false)
    }

    /// [`Self::verify_plan`], letting the worker count change when
    /// `workers_may_change` (`scale`, or `create` rerun with another `workers:`);
    /// anything else still refused, each field named.
    pub fn verify_plan_with(
        &self,
        flow: Flow,
        plan: &Plan,
        workers_may_change: bool,
    ) -> Result<()> {
        let fp = crate::plan::diff::fingerprint(plan);
        if self.state.plan_fingerprint.as_deref() == Some(fp.as_str()) {
            return Ok(());
        }
        let done = self.pinning(flow);
        if self.state.plan_fingerprint.is_none() || done.is_empty() {
            return Ok(());
        }
        let recorded_path = self.cluster.install_plan();
        let recorded = crate::state::read_plan_file(&recorded_path).ok();
        if let Some(old) = &recorded {
            // Only presentation changed (libvirt.graphics): nothing is pinned.
            if crate::plan::diff::pinned_diff(old, plan).is_empty() {
                return Ok(());
            }
            let beyond = crate::plan::diff::beyond_workers(old, plan);
            if beyond.is_empty() && workers_may_change {
                return Ok(());
            }
            if !beyond.is_empty()
                && crate::plan::diff::workers(old) != crate::plan::diff::workers(plan)
            {
                bail!(
                    "the cluster file of {} changes more than the workers after {} {} done; only `workers` may change on an installed cluster, and these may not:\n  - {}\nrestore them in the cluster file (the recorded plan is {})",
                    self.state.cluster,
                    done.join(", "),
                    if done.len() == 1 { "was" } else { "were" },
                    beyond.join("\n  - "),
                    recorded_path.display()
                );
            }
        }
        let changes = recorded
            .map(|old| crate::plan::diff::pinned_diff(&old, plan))
            .unwrap_or_else(|| {
                vec![format!(
                    "(the recorded plan {} is unreadable)",
                    recorded_path.display()
                )]
            });
        const SHOWN: usize = 20;
        let mut lines: Vec<String> = changes.iter().take(SHOWN).cloned().collect();
        if changes.len() > SHOWN {
            lines.push(format!("… and {} more", changes.len() - SHOWN));
        }
        bail!(
            "the cluster file of {} changed after {} {} done; the installer's assets and the VMs were made from the recorded plan, and shiftlab will not build a different cluster:\n  - {}\nrestore the cluster file (the recorded plan is {}), or start over with `shiftlab destroy cluster {}`",
            self.state.cluster,
            done.join(", "),
            if done.len() == 1 { "was" } else { "were" },
            lines.join("\n  - "),
            recorded_path.display(),
            self.state.cluster
        )
    }

    /// Record `plan` (after [`Self::verify_plan`]) as the one targets are made from.
    pub fn record_plan(&mut self, plan: &Plan) -> Result<()> {
        let fp = crate::plan::diff::fingerprint(plan);
        if self.state.plan_fingerprint.as_deref() == Some(fp.as_str()) {
            return Ok(());
        }
        write_json(&self.cluster.install_plan(), plan)?;
        self.state.plan_fingerprint = Some(fp);
        self.save()
    }

    /// Make sure `plan` is the one the done targets of `flow` were made from: while
    /// none that pins it is done, the plan is (re)recorded; after that a different
    /// plan is refused with what changed.
    pub fn check_plan(&mut self, flow: Flow, plan: &Plan) -> Result<()> {
        self.verify_plan(flow, plan)?;
        self.record_plan(plan)
    }

    pub fn facts(&self) -> &Facts {
        &self.state.facts
    }

    /// Change the facts and persist them at once.
    pub fn update_facts(&mut self, change: impl FnOnce(&mut Facts)) -> Result<()> {
        change(&mut self.state.facts);
        self.save()
    }
}

fn targets_of(s: &InstallState) -> String {
    let t: Vec<&str> = s.targets.keys().map(String::as_str).collect();
    format!("targets {}", t.join(", "))
}

/// What `shiftlab status` shows of the install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstallStatus {
    pub flow: Option<Flow>,
    /// The flow's targets in order (pending ones too), then any other recorded.
    pub targets: Vec<TargetStatus>,
    pub facts: Facts,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetStatus {
    pub target: String,
    /// `done`, `started` or `pending`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
    /// When it last started (seconds since the epoch), when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<u64>,
    /// When it finished (seconds since the epoch): `at` of a done target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl InstallStatus {
    pub fn of(s: &InstallState) -> InstallStatus {
        let mut names: Vec<String> = s
            .flow
            .map(|f| f.order().iter().map(|t| t.as_str().to_string()).collect())
            .unwrap_or_default();
        let others: Vec<String> = s
            .targets
            .keys()
            .filter(|k| !names.contains(k))
            .cloned()
            .collect();
        names.extend(others);
        let targets = names
            .into_iter()
            .map(|t| {
                let r = s.targets.get(&t);
                TargetStatus {
                    status: match r.map(|r| r.status) {
                        Some(Status::Done) => "done",
                        Some(Status::Started) => "started",
                        None => "pending",
                    }
                    .to_string(),
                    at: r.map(|r| r.at),
                    started: r.and_then(|r| r.started),
                    finished: r.filter(|r| r.status == Status::Done).map(|r| r.at),
                    note: r.and_then(|r| r.note.clone()),
                    target: t,
                }
            })
            .collect();
        InstallStatus {
            flow: s.flow,
            targets,
            facts: s.facts.clone(),
        }
    }

    /// The human form, a section of `shiftlab status`.
    pub fn table(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .targets
            .iter()
            .map(|t| {
                vec![
                    t.target.clone(),
                    t.status.clone(),
                    t.note.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        format!(
            "\ninstall targets ({}):\n{}",
            self.flow
                .map(|f| format!("{f}: {}", f.describe()))
                .unwrap_or_else(|| "flow not recorded".into()),
            crate::plan::render_table_rows(&["TARGET", "STATUS", "NOTE"], &rows)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateDir;

    /// A state directory in a temp dir, and its cluster lab1.
    fn dir() -> (tempfile::TempDir, ClusterDir) {
        let d = tempfile::tempdir().unwrap();
        let c = StateDir {
            root: d.path().into(),
        }
        .cluster("lab1");
        (d, c)
    }

    /// Lock and enter the upi flow, as `reach` does.
    fn upi(c: &ClusterDir) -> Locked {
        let mut l = lock(c).unwrap();
        l.enter(Flow::Upi).unwrap();
        l
    }

    #[test]
    fn a_target_keeps_its_start_and_status_shows_start_and_finish() {
        let (_d, c) = dir();
        let mut l = upi(&c);
        l.start(Flow::Upi, Target::Release, None).unwrap();
        let started = l.state.targets["release"].started.expect("start recorded");
        l.done(Target::Release, None).unwrap();
        let r = l.state.targets["release"].clone();
        assert_eq!(r.started, Some(started));
        assert!(r.at >= started);
        l.start(Flow::Upi, Target::InstallConfig, None).unwrap();
        let s = InstallStatus::of(&read(&c).unwrap().unwrap());
        let t = |n: &str| s.targets.iter().find(|t| t.target == n).unwrap().clone();
        assert_eq!(t("release").started, Some(started));
        assert_eq!(t("release").finished, Some(r.at));
        assert!(t("install-config").started.is_some());
        assert_eq!(t("install-config").finished, None);
        assert_eq!(t("manifests").started, None);
        // An older state (no start recorded) still reads.
        let old: TargetRecord = serde_json::from_str(r#"{"status":"done","at":5}"#).unwrap();
        assert_eq!(old.started, None);
    }

    #[test]
    fn intent_then_done_persists_and_the_lock_is_exclusive() {
        let (_d, c) = dir();
        {
            let mut l = upi(&c);
            for t in [
                Target::Release,
                Target::InstallConfig,
                Target::Manifests,
                Target::Ignition,
            ] {
                l.start(Flow::Upi, t, None).unwrap();
                l.done(t, None).unwrap();
            }
            l.start(Flow::Upi, Target::Infra, None).unwrap();
            let again = lock(&c);
            assert!(again.is_err());
            assert!(format!("{:#}", again.err().unwrap()).contains("another shiftlab"));
        }
        let mut l = lock(&c).unwrap();
        assert_eq!(l.state.targets["infra"].status, Status::Started);
        assert!(!l.is_done(Target::Infra));
        l.done(Target::Infra, Some("6 domains".into())).unwrap();
        drop(l);
        let l = lock(&c).unwrap();
        assert!(l.is_done(Target::Infra));
    }

    fn plan(workers: u32) -> Plan {
        let text = format!(
            "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: {workers}\n"
        );
        crate::plan::from_yaml(&text)
    }

    #[test]
    fn a_changed_plan_is_refused_once_targets_used_it() {
        let (_d, c) = dir();
        let mut l = upi(&c);
        l.check_plan(Flow::Upi, &plan(2)).unwrap();
        // Before any plan-dependent target is done, a new plan is just recorded.
        l.start(Flow::Upi, Target::Release, None).unwrap();
        l.done(Target::Release, None).unwrap();
        l.check_plan(Flow::Upi, &plan(3)).unwrap();
        l.check_plan(Flow::Upi, &plan(2)).unwrap();
        l.start(Flow::Upi, Target::InstallConfig, None).unwrap();
        l.done(Target::InstallConfig, None).unwrap();
        l.check_plan(Flow::Upi, &plan(2)).unwrap();
        let e = format!("{:#}", l.check_plan(Flow::Upi, &plan(3)).unwrap_err());
        assert!(e.contains("changed after install-config was done"), "{e}");
        assert!(e.contains("nodes[lab1-worker-2]: added"), "{e}");
        assert!(e.contains("install-plan.json"), "{e}");
        assert!(e.contains("shiftlab destroy cluster lab1"), "{e}");
        drop(l);
        // Persisted: a later run refuses too, and the recorded plan is unchanged.
        let mut l = lock(&c).unwrap();
        assert!(l.check_plan(Flow::Upi, &plan(3)).is_err());
        l.check_plan(Flow::Upi, &plan(2)).unwrap();
    }

    /// A cluster recorded before `libvirt.graphics` existed (headless) meets a
    /// cluster file whose default is now a screen: not refused, as nothing the
    /// installer made depends on it; a pinned change beside it still is.
    #[test]
    fn the_screen_does_not_pin_the_plan() {
        let (_d, c) = dir();
        let mut l = upi(&c);
        l.check_plan(Flow::Upi, &plan(2)).unwrap();
        l.start(Flow::Upi, Target::InstallConfig, None).unwrap();
        l.done(Target::InstallConfig, None).unwrap();
        let mut screen = plan(2);
        screen.libvirt.graphics = crate::spec::Graphics::Vnc;
        l.check_plan(Flow::Upi, &screen).unwrap();
        let mut both = plan(3);
        both.libvirt.graphics = crate::spec::Graphics::Spice;
        let e = format!("{:#}", l.check_plan(Flow::Upi, &both).unwrap_err());
        assert!(e.contains("nodes[lab1-worker-2]: added"), "{e}");
        assert!(!e.contains("graphics"), "{e}");
    }

    #[test]
    fn an_installed_cluster_takes_another_worker_count_and_nothing_else() {
        let (_d, c) = dir();
        let mut l = upi(&c);
        l.check_plan(Flow::Upi, &plan(2)).unwrap();
        l.start(Flow::Upi, Target::InstallConfig, None).unwrap();
        l.done(Target::InstallConfig, None).unwrap();
        // scale (or create rerun with another workers:) may change the workers.
        l.verify_plan_with(Flow::Upi, &plan(3), true).unwrap();
        l.record_plan(&plan(3)).unwrap();
        l.verify_plan_with(Flow::Upi, &plan(1), true).unwrap();
        // More than the workers: refused, the other field named, the workers not.
        let text = "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: 1\nctlplane: {memory: 20000}\n";
        let other = crate::plan::derive(
            &crate::spec::from_str(text, "t.yaml", &crate::spec::Env::default())
                .unwrap()
                .spec,
        );
        let e = format!(
            "{:#}",
            l.verify_plan_with(Flow::Upi, &other, true).unwrap_err()
        );
        assert!(e.contains("only `workers` may change"), "{e}");
        assert!(e.contains("nodes[lab1-ctlplane-0].memory_mib"), "{e}");
        assert!(!e.contains("lab1-worker-2"), "{e}");
    }

    #[test]
    fn an_older_state_without_a_fingerprint_is_adopted() {
        let (_d, c) = dir();
        std::fs::create_dir_all(c.path()).unwrap();
        std::fs::write(
            c.install_state(),
            r#"{"format": 1, "cluster": "lab1", "targets": {"install-config": {"status": "done", "at": 1}}}"#,
        )
        .unwrap();
        let mut l = lock(&c).unwrap();
        l.check_plan(Flow::Upi, &plan(2)).unwrap();
        assert!(l.state.plan_fingerprint.is_some());
        assert!(l.check_plan(Flow::Upi, &plan(3)).is_err());
        // … and its flow too: the one it is driven in now.
        assert_eq!(l.state.flow, None);
        l.enter(Flow::Upi).unwrap();
        assert_eq!(l.state.flow, Some(Flow::Upi));
    }

    #[test]
    fn illegal_transitions_are_refused() {
        let (_d, c) = dir();
        let mut l = upi(&c);
        let e = l.start(Flow::Upi, Target::Infra, None).unwrap_err();
        assert_eq!(
            e.downcast_ref::<IllegalTransition>(),
            Some(&IllegalTransition::PredecessorNotDone {
                target: Target::Infra,
                missing: Target::Release
            })
        );
        let e = l.done(Target::Release, None).unwrap_err();
        assert_eq!(
            e.downcast_ref::<IllegalTransition>(),
            Some(&IllegalTransition::DoneWithoutStart(Target::Release))
        );
        assert!(l.start(Flow::Lab, Target::Release, None).is_err());
        assert!(l.state.targets.is_empty(), "nothing recorded");
    }

    #[test]
    fn facts_read_the_format_of_the_untyped_map() {
        let (_d, c) = dir();
        std::fs::create_dir_all(c.path()).unwrap();
        std::fs::write(
            c.install_state(),
            r#"{"format": 1, "cluster": "lab1", "targets": {}, "facts": {"openshift_install": "/c/bin/openshift-install", "release_version": "4.18.7"}}"#,
        )
        .unwrap();
        let mut l = lock(&c).unwrap();
        assert_eq!(l.facts().release_version.as_deref(), Some("4.18.7"));
        assert_eq!(
            l.facts().openshift_install.as_deref(),
            Some(std::path::Path::new("/c/bin/openshift-install"))
        );
        l.update_facts(|f| f.console = Some("https://console".into()))
            .unwrap();
        let text = std::fs::read_to_string(c.install_state()).unwrap();
        assert!(text.contains(r#""console": "https://console""#), "{text}");
    }

    #[test]
    fn a_newer_format_is_refused() {
        let (_d, c) = dir();
        std::fs::create_dir_all(c.path()).unwrap();
        std::fs::write(
            c.install_state(),
            r#"{"format": 99, "cluster": "x", "targets": {}}"#,
        )
        .unwrap();
        assert!(lock(&c).is_err());
        assert!(read(&c).is_err());
    }

    /// Walk `steps` as `reach` does: skip what is done unless it converges.
    fn walk(l: &mut Locked, flow: Flow, goal: Target) {
        for s in flow.path_to(goal).unwrap() {
            if l.is_done(s.target) && s.kind != Kind::Converge {
                continue;
            }
            l.start(flow, s.target, None).unwrap();
            l.done(s.target, None).unwrap();
        }
    }

    #[test]
    fn reaching_any_target_of_any_flow_is_a_legal_sequence() {
        for flow in Flow::ALL {
            for goal in flow.order() {
                let (_d, c) = dir();
                let mut l = lock(&c).unwrap();
                l.enter(flow).unwrap();
                walk(&mut l, flow, goal);
                assert!(l.is_done(goal), "{flow} {goal}");
                // Reached again: done steps are skipped, converging ones run.
                walk(&mut l, flow, goal);
                for t in flow.order() {
                    let reached = t == goal || flow.predecessors(goal).unwrap().contains(&t);
                    assert_eq!(l.is_done(t), reached, "{flow} {goal}: {t}");
                }
            }
        }
    }

    #[test]
    fn a_target_out_of_order_is_caught_in_every_flow() {
        for flow in Flow::ALL {
            for target in flow.order() {
                let before = flow.predecessors(target).unwrap();
                let (_d, c) = dir();
                let mut l = lock(&c).unwrap();
                // Not entered: any start is a driver bug.
                assert!(matches!(
                    l.start(flow, target, None).unwrap_err().downcast_ref(),
                    Some(IllegalTransition::OtherFlow { .. })
                ));
                l.enter(flow).unwrap();
                match before.first() {
                    Some(first) => assert_eq!(
                        l.start(flow, target, None)
                            .unwrap_err()
                            .downcast_ref::<IllegalTransition>(),
                        Some(&IllegalTransition::PredecessorNotDone {
                            target,
                            missing: *first
                        }),
                        "{flow} {target}"
                    ),
                    None => l.start(flow, target, None).unwrap(),
                }
            }
            // A target another flow has and this one lacks.
            for t in Target::ALL.into_iter().filter(|t| flow.step(*t).is_none()) {
                let (_d, c) = dir();
                let mut l = lock(&c).unwrap();
                l.enter(flow).unwrap();
                assert_eq!(
                    l.start(flow, t, None)
                        .unwrap_err()
                        .downcast_ref::<IllegalTransition>(),
                    Some(&IllegalTransition::NotInFlow { target: t, flow })
                );
            }
        }
    }

    #[test]
    fn a_done_target_runs_again_only_if_it_converges() {
        let (_d, c) = dir();
        let mut l = lock(&c).unwrap();
        l.enter(Flow::Lab).unwrap();
        walk(&mut l, Flow::Lab, Target::Infra);
        l.start(Flow::Lab, Target::Infra, None).unwrap();
        l.done(Target::Infra, None).unwrap();
        assert_eq!(
            l.start(Flow::Lab, Target::Release, None)
                .unwrap_err()
                .downcast_ref::<IllegalTransition>(),
            Some(&IllegalTransition::AlreadyDone(Target::Release))
        );
        assert_eq!(
            l.done(Target::Release, None)
                .unwrap_err()
                .downcast_ref::<IllegalTransition>(),
            Some(&IllegalTransition::DoneWithoutStart(Target::Release))
        );
    }

    #[test]
    fn the_lab_takes_a_new_plan_until_install_config_is_written() {
        let (_d, c) = dir();
        let mut l = lock(&c).unwrap();
        l.enter(Flow::Lab).unwrap();
        l.check_plan(Flow::Lab, &plan(2)).unwrap();
        walk(&mut l, Flow::Lab, Target::Workers);
        // The VMs converge on whatever the plan is now.
        l.check_plan(Flow::Lab, &plan(3)).unwrap();
        walk(&mut l, Flow::Lab, Target::InstallConfig);
        let e = format!("{:#}", l.check_plan(Flow::Lab, &plan(2)).unwrap_err());
        assert!(e.contains("changed after install-config was done"), "{e}");
    }

    #[test]
    fn another_flow_is_refused_once_targets_ran() {
        let (_d, c) = dir();
        let mut l = lock(&c).unwrap();
        // Nothing ran yet: the flow may change.
        l.enter(Flow::Lab).unwrap();
        l.enter(Flow::Upi).unwrap();
        walk(&mut l, Flow::Upi, Target::Release);
        let e = format!("{:#}", l.enter(Flow::Lab).unwrap_err());
        assert!(
            e.contains("lab1 was begun as a upi install (targets release)"),
            "{e}"
        );
        assert!(e.contains("shiftlab destroy cluster lab1"), "{e}");
        assert_eq!(l.state.flow, Some(Flow::Upi));
    }

    #[test]
    fn status_lists_the_flow_s_targets_pending_ones_too() {
        let (_d, c) = dir();
        assert_eq!(read(&c).unwrap(), None);
        let mut l = lock(&c).unwrap();
        l.enter(Flow::Lab).unwrap();
        l.start(Flow::Lab, Target::Release, None).unwrap();
        l.done(Target::Release, Some("nothing to download".into()))
            .unwrap();
        l.start(Flow::Lab, Target::Infra, None).unwrap();
        drop(l);
        let s = InstallStatus::of(&read(&c).unwrap().unwrap());
        let got: Vec<(&str, &str)> = s
            .targets
            .iter()
            .map(|t| (t.target.as_str(), t.status.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("release", "done"),
                ("install-config", "pending"),
                ("infra", "started"),
                ("workers", "pending")
            ]
        );
        let table = s.table();
        assert!(
            table.contains("install targets (lab: the lab without an install)"),
            "{table}"
        );
        assert!(table.contains("nothing to download"), "{table}");
    }
}
