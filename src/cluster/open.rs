//! Opening a cluster for a command that works on it after the install: its state
//! (which must exist), its lock when the command changes the cluster, its
//! recorded plan, and the libvirt it runs on — `--connect`, else the URI the
//! cluster was created on (its ledger), else its plan's.

use anyhow::{bail, Context, Result};

use crate::libvirt::Host;
use crate::plan::Plan;
use crate::state::{ClusterDir, ClusterLock, StateDir};

/// The cluster's state, or a refusal naming where shiftlab looked, ended by
/// `hint` (each command's own advice, kept as it has always read).
/// When another default state directory has the cluster (root's, the user's),
/// the refusal says so.
pub fn known(state: &StateDir, name: &str, hint: &str) -> Result<ClusterDir> {
    let cluster = state.cluster(name);
    if !cluster.exists() {
        let elsewhere: String = state
            .elsewhere(name)
            .iter()
            .map(|d| {
                let how = if d == std::path::Path::new("/var/lib/shiftlab") {
                    "root's state: sudo?"
                } else {
                    "--state-dir?"
                };
                format!("; {} has {name} ({how})", d.display())
            })
            .collect();
        bail!(
            "no cluster {name} in {}{hint}{elsewhere}",
            state.clusters().display()
        );
    }
    Ok(cluster)
}

/// The cluster file `name`'s install recorded (src/spec/source.rs), for a
/// command given the name alone.
pub fn recorded_source(state: &StateDir, name: &str) -> Result<crate::spec::Source> {
    let dir = known(
        state,
        name,
        " (a new cluster is created from its file: -f FILE)",
    )?;
    crate::spec::source::recorded(&dir)?.with_context(|| {
        format!(
            "{name} has no recorded cluster file in {} (no target ran yet, or an older shiftlab made it): give the file with -f",
            dir.path().display()
        )
    })
}

/// After `scale`: the cluster file recorded with its new worker count once
/// libvirt converged on that count (the recorded plan has it), whether a later
/// step failed or not, under the cluster's lock; so the name alone loads what
/// the VMs are.
pub fn record_scaled(
    state: &StateDir,
    name: &str,
    source: &crate::spec::Source,
    workers: u32,
) -> Result<()> {
    let dir = known(state, name, "")?;
    let converged = |dir: &ClusterDir| {
        dir.read_plan()
            .is_ok_and(|p| crate::plan::diff::workers(&p) as u64 == u64::from(workers))
    };
    // A scale refused before it changed anything leaves no trace, not even
    // the lock file: looked at first without the lock, then again under it.
    if !converged(&dir) {
        return Ok(());
    }
    let _lock = dir.lock()?;
    if converged(&dir) {
        source.with_workers(workers).record(&dir)?;
    }
    Ok(())
}

/// The libvirt URI a command on `cluster` talks to: `connect` (the flag, or
/// what the caller puts first), else the URI the cluster was created on, else
/// `planned` (its plan's), else libvirt's default.
pub fn host_uri(
    cluster: &ClusterDir,
    connect: Option<&str>,
    planned: Option<&str>,
) -> Result<String> {
    crate::backend::libvirt::uri_for(cluster, connect, planned)
}

/// Connect to the libvirt a command on `cluster` talks to (chosen by [`host_uri`]).
pub fn host(cluster: &ClusterDir, connect: Option<&str>, planned: Option<&str>) -> Result<Host> {
    Host::open(&host_uri(cluster, connect, planned)?)
}

/// The libvirt of a cluster being gathered, its plan's URI last when a plan is
/// recorded. A gather goes on without a plan or a host: a failed connection is
/// a value (why), which it reports; an unreadable ledger is an error.
pub fn host_or_why(cluster: &ClusterDir, connect: Option<&str>) -> Result<Result<Host, String>> {
    let planned = cluster.read_plan().ok().map(|p| p.libvirt.uri);
    let uri = host_uri(cluster, connect, planned.as_deref())?;
    Ok(Host::open(&uri).map_err(|e| format!("{e:#}")))
}

/// The libvirt `connect` names, else libvirt's default: for what spans every
/// cluster on a host (list), not one of them.
pub fn host_named(connect: Option<&str>) -> Result<Host> {
    Host::open(&crate::libvirt::uri(connect))
}

/// A cluster as shiftlab recorded it: its directory, its plan, its lock when taken.
pub struct Recorded {
    pub dir: ClusterDir,
    /// Held while this lives: no install, create or other change meanwhile.
    pub lock: Option<ClusterLock>,
    pub plan: Plan,
}

impl Recorded {
    /// For a change: the cluster's lock is taken before its plan is read.
    pub fn locked(state: &StateDir, name: &str, hint: &str) -> Result<Self> {
        let dir = known(state, name, hint)?;
        let lock = dir.lock()?;
        Self::read(dir, Some(lock))
    }

    /// For a look or an attach (ssh, console): no lock.
    pub fn read_only(state: &StateDir, name: &str, hint: &str) -> Result<Self> {
        let dir = known(state, name, hint)?;
        Self::read(dir, None)
    }

    fn read(dir: ClusterDir, lock: Option<ClusterLock>) -> Result<Self> {
        let plan = dir
            .read_plan()
            .context("was the cluster's infrastructure created with shiftlab create infra?")?;
        Ok(Recorded { dir, lock, plan })
    }

    /// Connect to the libvirt the cluster runs on. A cluster on KubeVirt is
    /// refused first (`what` works on libvirt only; `instead` says what does).
    pub fn connect(self, connect: Option<&str>, what: &str, instead: &str) -> Result<Opened> {
        crate::kubevirt::refuse_libvirt_only(&self.plan, what, instead)?;
        let host = host(&self.dir, connect, Some(&self.plan.libvirt.uri))?;
        Ok(Opened {
            dir: self.dir,
            lock: self.lock,
            plan: self.plan,
            host,
        })
    }
}

/// A recorded cluster and a connection to the libvirt it runs on.
pub struct Opened {
    pub dir: ClusterDir,
    /// Held while this lives, when the cluster was opened for a change.
    pub lock: Option<ClusterLock>,
    pub plan: Plan,
    pub host: Host,
}

/// A cluster on libvirt opened for a change: locked, its plan read, its host
/// connected; `what` and `instead` word the refusal of a cluster on KubeVirt.
pub fn open(
    state: &StateDir,
    name: &str,
    connect: Option<&str>,
    what: &str,
    instead: &str,
) -> Result<Opened> {
    Recorded::locked(state, name, "")?.connect(connect, what, instead)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_with_plan(uri: Option<&str>) -> (tempfile::TempDir, StateDir) {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::resolve(Some(&tmp.path().join("state")));
        let mut text = "cluster: lab1\ndomain: example.com\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: 1\n".to_string();
        if let Some(u) = uri {
            text.push_str(&format!("libvirt:\n  uri: {u}\n"));
        }
        let plan = crate::plan::from_yaml(&text);
        state.cluster("lab1").write_plan(&plan).unwrap();
        (tmp, state)
    }

    #[test]
    fn a_missing_cluster_is_named_with_the_commands_hint_and_nothing_is_made() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::resolve(Some(&tmp.path().join("state")));
        let e = Recorded::locked(&state, "lab9", ": nothing to do")
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            format!(
                "no cluster lab9 in {}: nothing to do",
                state.clusters().display()
            )
        );
        assert!(!state.cluster("lab9").exists(), "no lock file made");
    }

    #[test]
    fn connect_flag_then_the_ledger_then_the_plan() {
        let (_tmp, state) = state_with_plan(Some("qemu:///session"));
        let dir = state.cluster("lab1");
        assert_eq!(
            host_uri(&dir, None, Some("qemu:///session")).unwrap(),
            "qemu:///session",
            "no ledger: the plan's"
        );
        let ledger = crate::libvirt::ledger::Ledger {
            uri: "test:///default".into(),
            ..Default::default()
        };
        crate::libvirt::ledger::save(&dir, &ledger).unwrap();
        assert_eq!(
            host_uri(&dir, Some("qemu:///system"), Some("qemu:///session")).unwrap(),
            "qemu:///system",
            "the flag first"
        );
        // The ledger's URI over the plan's: the host is the one the cluster was made on.
        let opened = Recorded::read_only(&state, "lab1", "")
            .unwrap()
            .connect(None, "stop/start", "no")
            .unwrap();
        assert_eq!(opened.host.uri, "test:///default");
        assert!(opened.lock.is_none());
    }

    #[test]
    fn gather_keeps_a_failed_connection_as_its_reason() {
        let (_tmp, state) = state_with_plan(Some("test:///default"));
        let dir = state.cluster("lab1");
        // The plan's URI when nothing else is given.
        let host = host_or_why(&dir, None).unwrap().unwrap();
        assert_eq!(host.uri, "test:///default");
        // A libvirt that cannot be reached: the reason, not an error.
        let why = host_or_why(&dir, Some("test:///nonexistent/shiftlab-gather.xml"))
            .unwrap()
            .err()
            .unwrap();
        assert!(why.contains("shiftlab-gather.xml"), "{why}");
        // No plan recorded either: still a value.
        let tmp = tempfile::tempdir().unwrap();
        let bare = StateDir::resolve(Some(&tmp.path().join("state")));
        std::fs::create_dir_all(bare.cluster("lab2").path()).unwrap();
        let bare_dir = bare.cluster("lab2");
        assert_eq!(
            host_or_why(&bare_dir, Some("test:///default"))
                .unwrap()
                .unwrap()
                .uri,
            "test:///default"
        );
    }

    #[test]
    fn a_change_holds_the_lock_while_it_lives() {
        let (_tmp, state) = state_with_plan(Some("test:///default"));
        let opened = open(&state, "lab1", None, "stop/start", "no").unwrap();
        let e = state.cluster("lab1").lock().err().unwrap().to_string();
        assert!(e.contains("another shiftlab is working on lab1"), "{e}");
        drop(opened);
        assert!(state.cluster("lab1").lock().is_ok());
    }
}
