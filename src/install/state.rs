//! The install's persisted state: which targets are done, and which one was
//! started (its intent on disk before its side effects run). Versioned, written
//! atomically, and guarded by an exclusive lock so two shiftlabs never drive the
//! same cluster at once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::files::write_atomic;
use crate::plan::Plan;

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
    /// What the target was doing or found, for the user (`status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallState {
    pub format: u32,
    pub cluster: String,
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
    /// The console URL `install-complete` printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub console: Option<String>,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// An exclusive hold on a cluster's state, released when dropped.
pub struct Locked {
    path: PathBuf,
    _lock: crate::files::FileLock,
    pub state: InstallState,
}

pub fn state_path(cluster_dir: &Path) -> PathBuf {
    cluster_dir.join("install-state.json")
}

/// The plan the done targets were made from.
pub fn recorded_plan_path(cluster_dir: &Path) -> PathBuf {
    cluster_dir.join("install-plan.json")
}

/// Targets that only fetch things and do not depend on the plan's shape.
const PLAN_FREE: &[&str] = &["release"];

use super::target::{order, predecessors, IllegalTransition, Target};
use crate::spec::Method;

/// Take the cluster's lock (failing at once if another shiftlab holds it) and read
/// its state.
pub fn lock(cluster_dir: &Path, cluster: &str) -> Result<Locked> {
    std::fs::create_dir_all(cluster_dir)
        .with_context(|| format!("creating {}", cluster_dir.display()))?;
    let lock = match crate::files::try_lock(&cluster_dir.join(".lock"))? {
        Ok(l) => l,
        Err(holder) => {
            bail!("another shiftlab is working on {cluster} (pid {holder}); wait for it or stop it")
        }
    };
    let path = state_path(cluster_dir);
    let state = match std::fs::read_to_string(&path) {
        Ok(text) => {
            let s: InstallState = serde_json::from_str(&text)
                .with_context(|| format!("reading {}", path.display()))?;
            if s.format > STATE_FORMAT {
                bail!(
                    "{} was written by a newer shiftlab (format {}); upgrade shiftlab",
                    path.display(),
                    s.format
                );
            }
            s
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => InstallState {
            format: STATE_FORMAT,
            cluster: cluster.to_string(),
            ..InstallState::default()
        },
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(Locked {
        path,
        _lock: lock,
        state,
    })
}

impl Locked {
    fn save(&self) -> Result<()> {
        let mut text = serde_json::to_string_pretty(&self.state)?;
        text.push('\n');
        write_atomic(&self.path, text.as_bytes())
    }

    pub fn is_done(&self, target: Target) -> bool {
        self.state
            .targets
            .get(target.as_str())
            .is_some_and(|r| r.status == Status::Done)
    }

    /// Record that `target` is about to run: on disk before any side effect. Its
    /// predecessors on `method` must be done.
    pub fn start(&mut self, method: Method, target: Target, note: Option<String>) -> Result<()> {
        let before = predecessors(method, target)?;
        if !order(method)?.contains(&target) {
            return Err(IllegalTransition::NotInMethod { target, method }.into());
        }
        if let Some(missing) = before.iter().find(|t| !self.is_done(**t)) {
            return Err(IllegalTransition::PredecessorNotDone {
                target,
                missing: *missing,
            }
            .into());
        }
        self.record(target, Status::Started, note)
    }

    /// Record that `target`, started, is done.
    pub fn done(&mut self, target: Target, note: Option<String>) -> Result<()> {
        if self.state.targets.get(target.as_str()).map(|r| r.status) != Some(Status::Started) {
            return Err(IllegalTransition::DoneWithoutStart(target).into());
        }
        self.record(target, Status::Done, note)
    }

    fn record(&mut self, target: Target, status: Status, note: Option<String>) -> Result<()> {
        self.state.targets.insert(
            target.as_str().to_string(),
            TargetRecord {
                status,
                at: now(),
                note,
            },
        );
        self.save()
    }

    /// Make sure `plan` is the one the done targets were made from. While no
    /// target that used the plan is done, the plan is (re)recorded; after that a
    /// different plan is refused with what changed, so shiftlab never builds a
    /// cluster other than the one the installer's assets describe.
    pub fn check_plan(&mut self, plan: &Plan) -> Result<()> {
        let fp = crate::plan::diff::fingerprint(plan);
        if self.state.plan_fingerprint.as_deref() == Some(fp.as_str()) {
            return Ok(());
        }
        let done: Vec<&str> = self
            .state
            .targets
            .iter()
            .filter(|(t, r)| r.status == Status::Done && !PLAN_FREE.contains(&t.as_str()))
            .map(|(t, _)| t.as_str())
            .collect();
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let recorded_path = recorded_plan_path(dir);
        if self.state.plan_fingerprint.is_some() && !done.is_empty() {
            let changes = std::fs::read_to_string(&recorded_path)
                .ok()
                .and_then(|t| serde_json::from_str::<Plan>(&t).ok())
                .map(|old| crate::plan::diff::diff(&old, plan))
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
            );
        }
        write_atomic(
            &recorded_path,
            (serde_json::to_string_pretty(plan)? + "\n").as_bytes(),
        )?;
        self.state.plan_fingerprint = Some(fp);
        self.save()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intent_then_done_persists_and_the_lock_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut l = lock(dir.path(), "lab1").unwrap();
            for t in [
                Target::Release,
                Target::InstallConfig,
                Target::Manifests,
                Target::Ignition,
            ] {
                l.start(Method::Upi, t, None).unwrap();
                l.done(t, None).unwrap();
            }
            l.start(Method::Upi, Target::Infra, None).unwrap();
            let again = lock(dir.path(), "lab1");
            assert!(again.is_err());
            assert!(format!("{:#}", again.err().unwrap()).contains("another shiftlab"));
        }
        let mut l = lock(dir.path(), "lab1").unwrap();
        assert_eq!(l.state.targets["infra"].status, Status::Started);
        assert!(!l.is_done(Target::Infra));
        l.done(Target::Infra, Some("6 domains".into())).unwrap();
        drop(l);
        let l = lock(dir.path(), "lab1").unwrap();
        assert!(l.is_done(Target::Infra));
    }

    fn plan(workers: u32) -> Plan {
        let text = format!(
            "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: {workers}\n"
        );
        crate::plan::derive(
            &crate::spec::from_str(&text, "t.yaml", &crate::spec::Env::default())
                .unwrap()
                .spec,
        )
    }

    #[test]
    fn a_changed_plan_is_refused_once_targets_used_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = lock(dir.path(), "lab1").unwrap();
        l.check_plan(&plan(2)).unwrap();
        // Before any plan-dependent target is done, a new plan is just recorded.
        l.start(Method::Upi, Target::Release, None).unwrap();
        l.done(Target::Release, None).unwrap();
        l.check_plan(&plan(3)).unwrap();
        l.check_plan(&plan(2)).unwrap();
        l.start(Method::Upi, Target::InstallConfig, None).unwrap();
        l.done(Target::InstallConfig, None).unwrap();
        l.check_plan(&plan(2)).unwrap();
        let e = format!("{:#}", l.check_plan(&plan(3)).unwrap_err());
        assert!(e.contains("changed after install-config was done"), "{e}");
        assert!(e.contains("nodes[lab1-worker-2]: added"), "{e}");
        assert!(e.contains("install-plan.json"), "{e}");
        assert!(e.contains("shiftlab destroy cluster lab1"), "{e}");
        drop(l);
        // Persisted: a later run refuses too, and the recorded plan is unchanged.
        let mut l = lock(dir.path(), "lab1").unwrap();
        assert!(l.check_plan(&plan(3)).is_err());
        l.check_plan(&plan(2)).unwrap();
    }

    #[test]
    fn an_older_state_without_a_fingerprint_is_adopted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            state_path(dir.path()),
            r#"{"format": 1, "cluster": "lab1", "targets": {"install-config": {"status": "done", "at": 1}}}"#,
        )
        .unwrap();
        let mut l = lock(dir.path(), "lab1").unwrap();
        l.check_plan(&plan(2)).unwrap();
        assert!(l.state.plan_fingerprint.is_some());
        assert!(l.check_plan(&plan(3)).is_err());
    }

    #[test]
    fn illegal_transitions_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = lock(dir.path(), "lab1").unwrap();
        let e = l.start(Method::Upi, Target::Infra, None).unwrap_err();
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
        assert!(l.start(Method::Sno, Target::Release, None).is_err());
        assert!(l.state.targets.is_empty(), "nothing recorded");
    }

    #[test]
    fn facts_read_the_format_of_the_untyped_map() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            state_path(dir.path()),
            r#"{"format": 1, "cluster": "lab1", "targets": {}, "facts": {"openshift_install": "/c/bin/openshift-install", "release_version": "4.18.7"}}"#,
        )
        .unwrap();
        let mut l = lock(dir.path(), "lab1").unwrap();
        assert_eq!(l.facts().release_version.as_deref(), Some("4.18.7"));
        assert_eq!(
            l.facts().openshift_install.as_deref(),
            Some(Path::new("/c/bin/openshift-install"))
        );
        l.update_facts(|f| f.console = Some("https://console".into()))
            .unwrap();
        let text = std::fs::read_to_string(state_path(dir.path())).unwrap();
        assert!(text.contains(r#""console": "https://console""#), "{text}");
    }

    #[test]
    fn a_newer_format_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            state_path(dir.path()),
            r#"{"format": 99, "cluster": "x", "targets": {}}"#,
        )
        .unwrap();
        assert!(lock(dir.path(), "x").is_err());
    }
}
