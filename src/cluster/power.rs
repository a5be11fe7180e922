//! `shiftlab stop` and `shiftlab start`: a cluster's nodes powered off and on in
//! the order OpenShift wants, each outcome recorded in `power.json`.
//!
//! - Stop: workers first, then control planes (and a bootstrap still there), each
//!   group with an ACPI power-button shutdown, then after the timeout a forced
//!   stop, recorded as such; how is the backend's ([`Backend::stop`]: libvirt's
//!   `virDomainShutdownFlags` with `VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN` then
//!   `virDomainDestroy`; KubeVirt's `runStrategy: Halted`, then the VMI deleted
//!   without a grace period). OpenShift's "Shutting down the cluster
//!   gracefully" has the nodes shut down; control planes last so that the
//!   workloads' nodes go while the API still runs.
//! - Start: control planes first, then workers ([`Backend::start`]: libvirt's
//!   `virDomainCreate`; KubeVirt's `runStrategy: Always`, waiting for the VMIs
//!   to run); then (with a kubeconfig) wait for the API, approve the plan's
//!   nodes' pending CSRs and wait until they are Ready (`kube::ready`).
//! - IPI: metal3 keeps each BareMetalHost's power as its `spec.online` says and
//!   powers a node shiftlab switched off back on (kube::bmh_online says why). So
//!   stop, group by group, first sets the group's online hosts `online: false`
//!   and gives metal3 the group's timeout to power them off (`metal3-off`), then
//!   shuts down what still runs as above; the hosts it set offline are recorded
//!   in `power.json` before they are patched. Start powers the control planes on,
//!   waits for the API and sets those hosts (and only those) `online: true`
//!   before it powers the workers on and approves CSRs. An API that does not
//!   answer at stop while nodes run is a refusal unless forced.
//! - The first certificate rotation: the install's certificates are valid for
//!   24 hours and the kubelets' client certificates are rotated once about 80 %
//!   of that has passed; a cluster stopped before then comes back with expired
//!   certificates and Pending CSRs. Stop refuses in that window unless forced.
//!
//! The backend is the cluster's recorded one (`backend::for_cluster`), the
//! nodes and their roles the recorded plan's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

pub use crate::backend::NodeOutcome;
use crate::backend::{Backend, Wait};
use crate::kube::csr::NodeIdentity;
use crate::plan::{Node, Plan};
use crate::progress::Sink;
use crate::spec::{Method, Role};
use crate::state::{ClusterDir, StateDir};

/// The install's certificates' lifetime (24 h: OpenShift's installation docs on the Ignition
/// config files' certificates).
pub const FIRST_ROTATION: Duration = Duration::from_secs(24 * 3600);

/// `power.json`: the last stop or start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerRecord {
    /// `stop` or `start`.
    pub action: String,
    /// Seconds since the epoch.
    pub at: u64,
    pub nodes: Vec<NodeOutcome>,
    /// After a start: what the API side did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<crate::kube::ready::BringBack>,
    /// Why the API side was not done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// IPI: the BareMetalHosts stop set `online: false` that start has not set
    /// back online yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offline_hosts: Vec<String>,
}

impl PowerRecord {
    pub fn table(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .nodes
            .iter()
            .map(|n| {
                vec![
                    n.node.clone(),
                    n.role.as_str().to_string(),
                    n.action.clone(),
                    n.seconds.map(|s| format!("{s}s")).unwrap_or_default(),
                ]
            })
            .collect();
        let mut s = crate::plan::render_table_rows(&["NODE", "ROLE", "ACTION", "TOOK"], &rows);
        if let Some(a) = &self.api {
            s.push_str(&format!(
                "\nAPI answered after {}s; approved {} CSR(s); Ready: {}\n",
                a.api_after_secs,
                a.approved.len(),
                if a.ready.is_empty() {
                    "-".into()
                } else {
                    a.ready.join(", ")
                }
            ));
            if !a.not_ready.is_empty() {
                s.push_str(&format!("not Ready in time: {}\n", a.not_ready.join(", ")));
            }
        }
        if !self.offline_hosts.is_empty() {
            s.push_str(&format!(
                "BareMetalHosts set offline by stop: {}\n",
                self.offline_hosts.join(", ")
            ));
        }
        if let Some(n) = &self.note {
            s.push_str(&format!("{n}\n"));
        }
        s
    }

    /// After a start: an error naming the nodes that were not Ready in time
    /// and what to run next.
    pub fn all_ready(&self, name: &str, timeout: Duration) -> Result<()> {
        if let Some(a) = &self.api {
            if !a.not_ready.is_empty() {
                bail!(
                    "not Ready within {}s: {} (shiftlab approve-csrs {name} --watch; shiftlab gather {name})",
                    timeout.as_secs(),
                    a.not_ready.join(", "),
                );
            }
        }
        Ok(())
    }
}

/// A recorded cluster opened for a power change: locked, its plan read, its
/// backend the one its record names.
struct Powered {
    dir: ClusterDir,
    _lock: Option<crate::state::ClusterLock>,
    plan: Plan,
    backend: Box<dyn Backend>,
}

fn open(state: &StateDir, name: &str, connect: Option<&str>) -> Result<Powered> {
    let r = super::Recorded::locked(state, name, "")?;
    let backend = crate::backend::for_cluster(&r.dir, connect)?;
    Ok(Powered {
        dir: r.dir,
        _lock: r.lock,
        plan: r.plan,
        backend,
    })
}

/// A line of the backend's for the user, as an aside.
fn say(progress: &Sink) -> impl Fn(&str) + '_ {
    move |line: &str| progress.aside(line)
}

/// `shiftlab stop`: refused within the first certificate rotation unless
/// `force` (then a warning to `progress`), the nodes powered off, the outcome
/// recorded.
pub fn stop_cluster(
    state: &StateDir,
    name: &str,
    connect: Option<&str>,
    force: bool,
    timeout: Duration,
    progress: &Sink,
) -> Result<PowerRecord> {
    let c = open(state, name, connect)?;
    let install = crate::install::state::read(&c.dir)?;
    if let Some(why) = too_early(certificates_made(install.as_ref()), now()) {
        if !force {
            bail!("not stopping {name}: {why}");
        }
        progress.aside(format!("warning: stopping {name} anyway (--force): {why}"));
    }
    let poll = Duration::from_millis(500);
    // Hosts a previous stop set offline and no start has set back online yet.
    let mut offline = previous_offline(&c.dir)?;
    let mut note = None;
    // A rehearsal runs no metal3 (its installer is the stand-in).
    let metal3 = if c.plan.method == Method::Ipi
        && !c.plan.rehearsal
        && !running(c.backend.as_ref(), &c.plan)?.is_empty()
    {
        let kubeconfig = c.dir.assets().kubeconfig();
        if !kubeconfig.is_file() {
            note = Some(format!(
                "no kubeconfig at {}: the BareMetalHosts were not looked at",
                kubeconfig.display()
            ));
            None
        } else {
            match Metal3::connect(&kubeconfig, Duration::from_secs(2)) {
                Ok(m) => Some(m),
                Err(e) if force => {
                    let why = format!(
                        "the API does not answer ({e:#}): the BareMetalHosts stay online and metal3, if it runs, may power the nodes back on"
                    );
                    progress.aside(format!("warning: stopping {name} anyway (--force): {why}"));
                    note = Some(why);
                    None
                }
                Err(e) => bail!(
                    "not stopping {name}: its API does not answer ({e:#}); on an IPI cluster metal3 powers nodes back on \
unless their BareMetalHosts are set offline first. Bring the API back, or stop anyway with --force"
                ),
            }
        }
    } else {
        None
    };
    let mut remember = |hosts: &[String]| -> Result<()> {
        for h in hosts {
            if !offline.contains(h) {
                offline.push(h.clone());
            }
        }
        record(
            &c.dir,
            &PowerRecord {
                action: "stop".into(),
                at: now(),
                nodes: Vec::new(),
                api: None,
                note: Some("stop under way".into()),
                offline_hosts: offline.clone(),
            },
        )
    };
    let nodes = stop_with(
        c.backend.as_ref(),
        &c.plan,
        metal3.as_ref(),
        Wait {
            timeout,
            poll,
            beat: progress.heartbeat_every(),
        },
        &mut remember,
        progress,
    )?;
    let r = PowerRecord {
        action: "stop".into(),
        at: now(),
        nodes,
        api: None,
        note,
        offline_hosts: previous_offline(&c.dir)?,
    };
    record(&c.dir, &r)?;
    Ok(r)
}

/// The hosts the last stop set offline that no start has set back online.
fn previous_offline(dir: &ClusterDir) -> Result<Vec<String>> {
    Ok(crate::files::read_json::<PowerRecord>(&dir.power())?
        .map(|r| r.offline_hosts)
        .unwrap_or_default())
}

/// The plan's nodes that run now, by name, as the backend has them.
fn running(backend: &dyn Backend, plan: &Plan) -> Result<Vec<String>> {
    let Some(st) = backend.status(&plan.cluster)? else {
        return Ok(Vec::new());
    };
    Ok(st
        .running()
        .into_iter()
        .filter(|n| plan.node(n).is_some())
        .map(String::from)
        .collect())
}

/// Metal3's side of stop and start on IPI ([`crate::kube::bmh_online`]): an
/// API client on a runtime of its own, kept across the libvirt steps.
pub struct Metal3 {
    rt: tokio::runtime::Runtime,
    client: ::kube::Client,
    /// How often to look at the hosts.
    interval: Duration,
}

impl Metal3 {
    /// A client of `kubeconfig` whose API answered.
    pub fn connect(kubeconfig: &Path, interval: Duration) -> Result<Metal3> {
        let m = Self::new(kubeconfig, interval)?;
        m.rt.block_on(m.client.apiserver_version())
            .context("asking the API its version")?;
        Ok(m)
    }

    /// A client of `kubeconfig`, the API not asked yet.
    pub fn new(kubeconfig: &Path, interval: Duration) -> Result<Metal3> {
        let rt = crate::runtime::current_thread()?;
        let client = rt.block_on(crate::kube::approve::client_from_kubeconfig(kubeconfig))?;
        Ok(Metal3 {
            rt,
            client,
            interval,
        })
    }

    /// Wait (up to `timeout`) for the API, then set `hosts` online.
    pub fn bring_online(&self, hosts: &[String], timeout: Duration) -> Result<()> {
        self.rt.block_on(async {
            crate::kube::ready::wait_api(&self.client, Instant::now() + timeout, self.interval)
                .await?;
            crate::kube::bmh_online::set_online(&self.client, hosts, true).await
        })
    }

    /// Set the online hosts among `names` offline (`remember` told them first)
    /// and wait up to `wait.timeout` until metal3 reports them off (beating
    /// every `wait.beat` with those still on); returns them.
    fn take_offline(
        &self,
        names: &[&str],
        wait: Wait,
        remember: &mut dyn FnMut(&[String]) -> Result<()>,
        progress: &Sink,
    ) -> Result<Vec<String>> {
        let timeout = wait.timeout;
        use crate::kube::bmh_online as b;
        let hosts = self.rt.block_on(b::online(&self.client, names))?;
        if hosts.is_empty() {
            return Ok(hosts);
        }
        remember(&hosts)?;
        self.rt
            .block_on(b::set_online(&self.client, &hosts, false))?;
        progress.aside(format!(
            "BareMetalHosts set offline: {} (waiting up to {}s for metal3 to power them off)",
            hosts.join(", "),
            timeout.as_secs()
        ));
        match self.rt.block_on(b::wait_off(
            &self.client,
            &hosts,
            timeout,
            self.interval,
            (wait.beat, &say(progress)),
        )) {
            Ok(on) if on.is_empty() => {}
            Ok(on) => tracing::warn!(
                "metal3 did not report {} powered off within {}s: shutting them down",
                on.join(", "),
                timeout.as_secs()
            ),
            // The control planes' hosts take the API down with them.
            Err(e) => tracing::warn!("{e:#}: shutting down what still runs"),
        }
        Ok(hosts)
    }
}

/// What `shiftlab start` is asked to do beyond powering on.
#[derive(Debug, Clone)]
pub struct StartRequest {
    /// The admin kubeconfig; the cluster's own when `None`.
    pub kubeconfig: Option<PathBuf>,
    /// Leave the API, CSRs and readiness alone.
    pub no_api: bool,
    /// How long the nodes get to be Ready, and how often to look.
    pub timeout: Duration,
    pub interval: Duration,
}

/// `shiftlab start`: the nodes powered on, then (with a kubeconfig) their
/// CSRs approved until they are Ready; the outcome recorded, a failed API side
/// too. Nodes not Ready in time are in the record ([`PowerRecord::all_ready`]).
pub fn start_cluster(
    state: &StateDir,
    name: &str,
    connect: Option<&str>,
    req: &StartRequest,
    progress: &Sink,
) -> Result<PowerRecord> {
    let c = open(state, name, connect)?;
    // The heartbeat a powered-on node's Ready must be newer than (whole seconds,
    // as the API writes times).
    let since = k8s_openapi::jiff::Timestamp::from_second(now() as i64)
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now());
    let kubeconfig = req
        .kubeconfig
        .clone()
        .unwrap_or_else(|| c.dir.assets().kubeconfig());
    // IPI: the hosts stop set offline go back online once the control planes'
    // API answers, before the workers are powered on.
    let mut offline = previous_offline(&c.dir)?;
    let mut restore_err = None;
    // A node powered on gets the Ready timeout to run (KubeVirt's VMI).
    let wait = Wait {
        timeout: req.timeout,
        poll: req.interval.min(Duration::from_secs(2)),
        beat: progress.heartbeat_every(),
    };
    let nodes = start_with(c.backend.as_ref(), &c.plan, wait, progress, &mut || {
        if offline.is_empty() || req.no_api || !kubeconfig.is_file() {
            return;
        }
        // The API comes back with the control planes: minutes, beaten.
        let what = format!(
            "the API to set the BareMetalHosts {} online",
            offline.join(", ")
        );
        match progress.beating(&what, &Default::default(), || {
            Metal3::new(&kubeconfig, req.interval)
                .and_then(|m| m.bring_online(&offline, req.timeout))
        }) {
            Ok(()) => offline.clear(),
            Err(e) => restore_err = Some(e),
        }
    })?;
    let fresh = crate::kube::ready::Fresh {
        since,
        nodes: nodes
            .iter()
            .filter(|n| n.action == "started")
            .map(|n| n.node.clone())
            .collect(),
    };
    let mut r = PowerRecord {
        action: "start".into(),
        at: now(),
        nodes,
        api: None,
        note: None,
        offline_hosts: offline.clone(),
    };
    if let Some(e) = restore_err {
        r.note = Some(format!("{e:#}"));
        record(&c.dir, &r)?;
        return Err(e.context(format!(
            "{name} was started but its BareMetalHosts {} are still offline: metal3 powers them off again \
(shiftlab start {name} again once the API answers, or oc -n openshift-machine-api patch bmh <host> --type merge -p '{{\"spec\":{{\"online\":true}}}}')",
            offline.join(", ")
        )));
    }
    if req.no_api {
        r.note = Some("--no-api: the API, CSRs and readiness were not looked at".into());
    } else if !kubeconfig.is_file() {
        r.note = Some(format!(
            "no kubeconfig at {}: the API, CSRs and readiness were not looked at",
            kubeconfig.display()
        ));
    } else {
        let wanted = wanted_ready(c.backend.as_ref(), &c.plan)?;
        let what = ready_wait(&wanted);
        let api = progress.beating(&what, &Default::default(), || {
            crate::kube::ready::bring_back_blocking(
                &kubeconfig,
                &NodeIdentity::from_plan(&c.plan),
                &wanted,
                Some(&fresh),
                req.timeout,
                req.interval,
            )
        });
        match api {
            Ok(a) => r.api = Some(a),
            Err(e) => {
                r.note = Some(format!("{e:#}"));
                record(&c.dir, &r)?;
                return Err(e.context(format!("{name} was started but did not come back")));
            }
        }
    }
    if !r.offline_hosts.is_empty() {
        let n = r.note.take().map(|n| n + "; ").unwrap_or_default();
        r.note = Some(format!(
            "{n}the BareMetalHosts stop set offline stay offline and metal3 powers them off once it runs: \
shiftlab start {name} with the API sets them online"
        ));
    }
    record(&c.dir, &r)?;
    Ok(r)
}

/// What a heartbeat says a Ready wait waits for. Pure.
pub fn ready_wait(wanted: &[(String, String)]) -> String {
    let names: Vec<&str> = wanted.iter().map(|(n, _)| n.as_str()).collect();
    format!("{} to be Ready", names.join(", "))
}

/// Stop order: workers, then everything else (control planes, a bootstrap).
pub fn stop_groups(plan: &Plan) -> [Vec<&Node>; 2] {
    let (workers, rest): (Vec<&Node>, Vec<&Node>) =
        plan.nodes.iter().partition(|n| n.role == Role::Worker);
    [workers, rest]
}

/// Start order: control planes (and a bootstrap), then workers.
pub fn start_groups(plan: &Plan) -> [Vec<&Node>; 2] {
    let [workers, rest] = stop_groups(plan);
    [rest, workers]
}

/// When the install's certificates were made: the ignition target's completion
/// (`openshift-install create ignition-configs` generates them), `None` for a
/// cluster without an install (a rehearsal lab).
pub fn certificates_made(state: Option<&crate::install::state::InstallState>) -> Option<u64> {
    let s = state?;
    let t = s
        .targets
        .get(crate::install::target::Target::Ignition.as_str())?;
    (t.status == crate::install::state::Status::Done).then_some(t.at)
}

/// A refusal when stopping now would beat the first certificate rotation.
pub fn too_early(made: Option<u64>, now: u64) -> Option<String> {
    let made = made?;
    let due = made + FIRST_ROTATION.as_secs();
    if now >= due {
        return None;
    }
    let left = due - now;
    Some(format!(
        "the cluster's certificates were made {}h{:02}m ago: the install's certificates are valid for 24 hours \
and the first rotation happens within them; a cluster stopped before it comes back with expired certificates \
and nodes that need their CSRs approved by hand. Wait {}h{:02}m, or stop anyway with --force \
(then shiftlab start approves the pending CSRs)",
        (now - made) / 3600,
        (now - made) % 3600 / 60,
        left / 3600,
        left % 3600 / 60
    ))
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Power the nodes off, group by group. Idempotent: nodes already off are recorded
/// as such.
pub fn stop(
    backend: &dyn Backend,
    plan: &Plan,
    timeout: Duration,
    poll: Duration,
) -> Result<Vec<NodeOutcome>> {
    stop_with(
        backend,
        plan,
        None,
        Wait {
            timeout,
            poll,
            beat: crate::progress::HEARTBEAT,
        },
        &mut |_| Ok(()),
        &Sink::memory(),
    )
}

/// [`stop`], and on IPI with `metal3`: each group's online BareMetalHosts set
/// offline first (`remember` is told them before they are patched) and metal3
/// given up to `wait.timeout` to power them off; what still runs then is shut
/// down as without.
pub fn stop_with(
    backend: &dyn Backend,
    plan: &Plan,
    metal3: Option<&Metal3>,
    wait: Wait,
    remember: &mut dyn FnMut(&[String]) -> Result<()>,
    progress: &Sink,
) -> Result<Vec<NodeOutcome>> {
    let mut out = Vec::new();
    for group in stop_groups(plan) {
        let mut group = group;
        if let Some(m) = metal3 {
            let before = running(backend, plan)?;
            let start = Instant::now();
            let names: Vec<&str> = group.iter().map(|n| n.name.as_str()).collect();
            let hosts = m.take_offline(&names, wait, remember, progress)?;
            let after = running(backend, plan)?;
            let mut rest = Vec::new();
            for node in group {
                let was = before.contains(&node.name);
                if was && !after.contains(&node.name) && hosts.contains(&node.name) {
                    out.push(NodeOutcome::of(
                        node,
                        "metal3-off",
                        Some(start.elapsed().as_secs()),
                    ));
                } else {
                    rest.push(node);
                }
            }
            group = rest;
        }
        if !group.is_empty() {
            out.extend(backend.stop(&group, wait, &say(progress))?);
        }
    }
    Ok(out)
}

/// Power the nodes on, control planes first. Nodes already running are recorded
/// as such; nodes that are gone (a removed bootstrap) as absent.
pub fn start(backend: &dyn Backend, plan: &Plan, wait: Wait) -> Result<Vec<NodeOutcome>> {
    start_with(backend, plan, wait, &Sink::memory(), &mut || {})
}

/// [`start`], with `between` run after the control planes and before the workers.
pub fn start_with(
    backend: &dyn Backend,
    plan: &Plan,
    wait: Wait,
    progress: &Sink,
    between: &mut dyn FnMut(),
) -> Result<Vec<NodeOutcome>> {
    let mut out = Vec::new();
    for (i, group) in start_groups(plan).into_iter().enumerate() {
        if i == 1 {
            between();
        }
        if !group.is_empty() {
            out.extend(backend.start(&group, Some(wait), &say(progress))?);
        }
    }
    Ok(out)
}

/// The nodes `start` waits to see Ready: the plan's nodes the backend has (a
/// domain, a VM), but the bootstrap (it never joins), as (name, FQDN).
pub fn wanted_ready(backend: &dyn Backend, plan: &Plan) -> Result<Vec<(String, String)>> {
    let have: Vec<String> = backend
        .status(&plan.cluster)?
        .map(|s| s.nodes.into_iter().map(|n| n.name).collect())
        .unwrap_or_default();
    Ok(plan
        .nodes
        .iter()
        .filter(|n| n.role != Role::Bootstrap && have.contains(&n.name))
        .map(|n| (n.name.clone(), n.fqdn.clone()))
        .collect())
}

/// Record the last stop or start (`power.json`).
pub fn record(cluster: &ClusterDir, r: &PowerRecord) -> Result<()> {
    crate::files::write_json(&cluster.power(), r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        let text = "cluster: lab1\ndomain: example.com\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: 2\n";
        crate::plan::from_yaml(text)
    }

    #[test]
    fn a_ready_wait_names_its_nodes() {
        let wanted = [
            (
                "lab-worker-0".to_string(),
                "lab-worker-0.lab.test".to_string(),
            ),
            (
                "lab-worker-1".to_string(),
                "lab-worker-1.lab.test".to_string(),
            ),
        ];
        assert_eq!(
            ready_wait(&wanted),
            "lab-worker-0, lab-worker-1 to be Ready"
        );
    }

    #[test]
    fn workers_stop_first_and_start_last() {
        let p = plan();
        let names = |g: &Vec<&Node>| g.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        let [first, second] = stop_groups(&p);
        assert_eq!(names(&first), ["lab1-worker-0", "lab1-worker-1"]);
        assert!(names(&second).contains(&"lab1-ctlplane-0".to_string()));
        assert!(names(&second).contains(&"lab1-bootstrap".to_string()));
        let [first, second] = start_groups(&p);
        assert!(first.iter().all(|n| n.role != Role::Worker));
        assert_eq!(names(&second), ["lab1-worker-0", "lab1-worker-1"]);
    }

    #[test]
    fn no_stop_before_the_first_rotation_unless_forced() {
        let made = 1_000_000;
        let e = too_early(Some(made), made + 3600 * 5 + 60).unwrap();
        assert!(e.contains("made 5h01m ago"), "{e}");
        assert!(e.contains("Wait 18h59m"), "{e}");
        assert!(e.contains("--force"));
        assert_eq!(too_early(Some(made), made + 24 * 3600), None);
        assert_eq!(too_early(None, made), None, "no install, no certificates");
    }
}
