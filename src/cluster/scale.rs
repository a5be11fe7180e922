//! `shiftlab scale NAME --workers N`: the plan for N workers (new workers planned
//! deterministically after the existing ones, which never change), then:
//!
//! - up: the infra target converges libvirt on the new plan (volumes, domains,
//!   DHCP/DNS entries), the new workers are started, the plan is recorded so that
//!   `shiftlab serve` puts them into the ingress backends, and with an API their
//!   CSRs are approved until they are Ready (`kube::ready`);
//! - down: the workers to go are the highest-numbered; with an API each is
//!   cordoned and drained through evictions that honour PodDisruptionBudgets
//!   (`kube::drain`), its Node deleted; then its VM, volumes, DHCP reservation and
//!   DNS entries go, and the recorded plan drops it from the load balancer.
//!
//! Refused: going below the ingress controller's replicas (routers run on
//! workers; fewer workers than replicas leaves routers unscheduled).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::install::target::Target;
use crate::install::{self, Ctx, Options};
use crate::kube::baremetal;
use crate::kube::drain::Drained;
use crate::kube::ready::BringBack;
use crate::libvirt::Host;
use crate::plan::{Node, Plan};
use crate::progress::Sink;
use crate::spec::{ClusterSpec, Method, Role};
use crate::state::{ClusterDir, StateDir};

/// What a scale is asked to do, from `scale`'s flags or `create`'s rerun.
#[derive(Debug, Clone)]
pub struct Request {
    pub workers: u32,
    /// Seconds a worker's drain may take.
    pub drain_timeout: u64,
    /// Seconds new workers get to be Ready.
    pub timeout: u64,
    /// The admin kubeconfig; the cluster's own when `None`.
    pub kubeconfig: Option<PathBuf>,
}

impl Request {
    /// `create`'s rerun: `scale`'s defaults.
    pub fn defaults(workers: u32) -> Self {
        Request {
            workers,
            drain_timeout: 600,
            timeout: 1800,
            kubeconfig: None,
        }
    }
}

/// What a scale did: `scale`'s output in every format.
#[derive(Debug, Serialize)]
pub struct Outcome {
    cluster: String,
    workers_before: usize,
    workers: u32,
    added: Vec<String>,
    removed: Vec<String>,
    drained: Vec<Drained>,
    /// IPI: the Kubernetes objects applied, annotated or deleted.
    objects: Vec<String>,
    /// libvirt objects removed (domains, volumes, network entries).
    libvirt_removed: Vec<String>,
    api: Option<BringBack>,
    note: Option<String>,
}

impl Outcome {
    fn new(s: &Scale, change: &Change, workers: u32) -> Self {
        Outcome {
            cluster: s.spec.cluster.clone(),
            workers_before: s.old.nodes.iter().filter(|n| n.role == Role::Worker).count(),
            workers,
            added: change.add.iter().map(|n| n.name.clone()).collect(),
            removed: change.remove.iter().map(|n| n.name.clone()).collect(),
            drained: Vec::new(),
            objects: Vec::new(),
            libvirt_removed: Vec::new(),
            api: None,
            note: (!s.api).then(|| {
                format!(
                    "no kubeconfig at {}: no drain, CSR approval or readiness (a lab without an install)",
                    s.kubeconfig.display()
                )
            }),
        }
    }

    pub fn table(&self) -> String {
        let mut s = format!(
            "{}: {} → {} workers\n",
            self.cluster, self.workers_before, self.workers
        );
        for a in &self.added {
            s.push_str(&format!("added {a}\n"));
        }
        for d in &self.drained {
            s.push_str(&format!(
                "drained {} ({} pod(s) evicted{}), node deleted\n",
                d.node,
                d.evicted.len(),
                if d.held_by_budget.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", {} held back by a budget for a while",
                        d.held_by_budget.len()
                    )
                }
            ));
        }
        for o in &self.objects {
            s.push_str(&format!("api: {o}\n"));
        }
        for r in &self.libvirt_removed {
            s.push_str(&format!("removed {r}\n"));
        }
        if let Some(a) = &self.api {
            s.push_str(&format!(
                "approved {} CSR(s); Ready: {}\n",
                a.approved.len(),
                a.ready.join(", ")
            ));
        }
        if let Some(n) = &self.note {
            s.push_str(&format!("{n}\n"));
        }
        if self.added.is_empty() && self.removed.is_empty() {
            s.push_str("nothing to do: the cluster has that many workers\n");
        }
        s
    }

    /// An error naming the new workers that were not Ready within `timeout` seconds.
    pub fn all_ready(&self, timeout: u64) -> Result<()> {
        if let Some(a) = &self.api {
            if !a.not_ready.is_empty() {
                bail!("not Ready within {timeout}s: {}", a.not_ready.join(", "));
            }
        }
        Ok(())
    }
}

/// Scale the cluster of `spec` to `req.workers` workers (the rest of `spec` must
/// be the cluster's as recorded): plan the change, take the workers that go
/// out, converge on the new plan, bring the new ones in. The infra target
/// reports to `progress`. New workers not Ready in time are in the outcome
/// ([`Outcome::all_ready`]).
pub fn scale(
    spec: &ClusterSpec,
    state: &StateDir,
    req: &Request,
    progress: Sink,
) -> Result<Outcome> {
    let s = Scale::plan(spec, state, req)?;
    // Everything checked before anything changes: the API answers, the change is allowed.
    let change = change(&s.old, &s.new, s.ingress_replicas()?)?;
    let mut outcome = Outcome::new(&s, &change, req.workers);
    if !change.remove.is_empty() {
        // Draining honours PodDisruptionBudgets: it may take a while.
        let names: Vec<&str> = change.remove.iter().map(|n| n.name.as_str()).collect();
        let what = format!("{} to be drained and removed", names.join(", "));
        progress.beating(&what, &Default::default(), || {
            remove_workers(&s, &change.remove, req, &mut outcome)
        })?;
    }
    let progress = converge(&s, state, progress)?;
    if s.ipi && !change.add.is_empty() {
        outcome
            .objects
            .extend(add_hosts(&s, &change.add, req.workers)?);
        outcome.note = Some(
            "IPI: the machine API provisions the new hosts and the machine approver their CSRs; watch `oc -n openshift-machine-api get bmh,machines`".into(),
        );
    } else if s.api && !change.add.is_empty() {
        outcome.api = Some(bring_back(&s, &change.add, req.timeout, &progress)?);
    }
    Ok(outcome)
}

/// One scale, checked before anything changes.
struct Scale {
    cluster: ClusterDir,
    /// The cluster file with the new worker count.
    spec: ClusterSpec,
    /// The plan the cluster was made from, and the one for the new count.
    old: Plan,
    new: Plan,
    kubeconfig: PathBuf,
    /// A kubeconfig is there: drains, CSR approval and readiness go through the API.
    api: bool,
    /// IPI: a worker is a BareMetalHost the machine API provisions (kube::baremetal).
    ipi: bool,
}

impl Scale {
    /// The plans before and after, refused for a method whose workers are not
    /// shiftlab's VMs and for IPI without an API.
    fn plan(spec: &ClusterSpec, state: &StateDir, req: &Request) -> Result<Self> {
        if matches!(spec.method, Method::Sno | Method::Agent) {
            bail!(
                "scale supports UPI and IPI clusters (their workers are shiftlab's VMs); {} is method {:?}",
                spec.cluster,
                spec.method
            );
        }
        let ipi = spec.method == Method::Ipi;
        let cluster = state.cluster(&spec.cluster);
        let old = cluster
            .read_plan()
            .context("was the cluster's infrastructure created with shiftlab create infra?")?;
        let mut spec = spec.clone();
        spec.workers = req.workers;
        let new = crate::plan::derive(&spec);
        let kubeconfig = req
            .kubeconfig
            .clone()
            .unwrap_or_else(|| cluster.assets().kubeconfig());
        let api = kubeconfig.is_file();
        if ipi && !api {
            bail!(
                "{} is an IPI cluster: its workers are Machines provisioned from BareMetalHosts, which scale applies through the API; no kubeconfig at {} (nothing was changed)",
                spec.cluster,
                kubeconfig.display()
            );
        }
        Ok(Scale {
            cluster,
            spec,
            old,
            new,
            kubeconfig,
            api,
            ipi,
        })
    }

    /// The default ingress controller's replicas, when there is an API to ask.
    fn ingress_replicas(&self) -> Result<Option<u32>> {
        if !self.api {
            return Ok(None);
        }
        crate::kube::drain::ingress_replicas_blocking(&self.kubeconfig)
            .context("asking the API for the ingress replicas (nothing was changed)")
    }
}

/// Down, under the cluster's lock: with an API each worker is drained and its
/// Node deleted (IPI: by the machine controller, Machine by Machine), then its
/// VM, volumes, DHCP reservation and DNS entries go.
fn remove_workers(s: &Scale, nodes: &[&Node], req: &Request, outcome: &mut Outcome) -> Result<()> {
    let _lock = s.cluster.lock()?;
    let host = super::host(&s.cluster, None, Some(&s.old.libvirt.uri))?;
    if s.ipi {
        outcome.objects.extend(scale_down_machines(s, nodes, req)?);
    }
    for node in nodes {
        if s.api && !s.ipi {
            if let Some(d) = crate::kube::drain::drain_blocking(
                &s.kubeconfig,
                &node.name,
                &node.fqdn,
                Duration::from_secs(req.drain_timeout),
                Duration::from_secs(2),
            )? {
                outcome.drained.push(d);
            }
        }
        outcome
            .libvirt_removed
            .extend(crate::libvirt::destroy::remove_node(
                &host,
                &s.old.cluster,
                node,
                &s.old.libvirt.pool,
                &s.cluster,
            )?);
        outcome
            .libvirt_removed
            .extend(forget_in_network(&host, &s.old, node)?);
    }
    Ok(())
}

/// IPI down: each Machine annotated for deletion and the MachineSet scaled; the
/// machine controller drains and deletes each Node before its Machine goes.
/// The objects annotated and deleted, as `api:` lines.
fn scale_down_machines(s: &Scale, nodes: &[&Node], req: &Request) -> Result<Vec<String>> {
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    crate::runtime::block_on(async {
        let client = crate::kube::approve::client_from_kubeconfig(&s.kubeconfig).await?;
        let machines = baremetal::scale_down_begin(&client, &names, req.workers).await?;
        let mut objects: Vec<String> = machines
            .values()
            .flatten()
            .map(|m| format!("Machine/{m} annotated {}", baremetal::DELETE_MACHINE))
            .collect();
        objects.extend(
            baremetal::scale_down_finish(
                &client,
                &machines,
                Duration::from_secs(req.drain_timeout),
                Duration::from_secs(2),
            )
            .await?,
        );
        Ok(objects)
    })
}

/// Converge libvirt and the recorded plan (serve's backends and DNS) on the new
/// plan; new workers are started. The sink is handed back for what follows.
fn converge(s: &Scale, state: &StateDir, progress: Sink) -> Result<Sink> {
    let ctx = Ctx::new(
        &s.spec,
        &s.new,
        state,
        Options {
            start_workers: true,
            worker_change: true,
        },
    )
    .with_progress(progress);
    install::reach(&ctx, Target::Infra)?;
    if ctx.cluster.read_plan().ok().as_ref() != Some(&s.new) {
        ctx.cluster.write_plan(&s.new)?;
        let _ = crate::serve::notify(state, Some(&s.new.cluster));
    }
    Ok(ctx.progress)
}

/// IPI up: the new VMs are off and on the lab BMC (serve's BMC serves the
/// cluster's domains); their BareMetalHosts are applied and the MachineSet
/// scaled, and the machine API provisions them. The objects applied.
fn add_hosts(s: &Scale, nodes: &[&Node], workers: u32) -> Result<Vec<String>> {
    let spec = &s.spec;
    let password = s.cluster.lab_bmc_password(spec.bmc.password.as_deref())?;
    let inputs = baremetal::HostInputs {
        cluster: &spec.cluster,
        username: &spec.bmc.username,
        password: &password,
        verify_certificate: spec.bmc.verify_certificate,
        boot_mode: match spec.libvirt.firmware {
            crate::spec::Firmware::Uefi => "UEFI",
            crate::spec::Firmware::Bios => "legacy",
        },
        device_name: &spec.installation_disk,
    };
    let objects = nodes
        .iter()
        .map(|n| baremetal::render(n, &inputs))
        .collect::<Result<Vec<_>>>()?;
    crate::runtime::block_on(async {
        let client = crate::kube::approve::client_from_kubeconfig(&s.kubeconfig).await?;
        baremetal::scale_up(&client, &objects, workers).await
    })
}

/// UPI up with an API: the new workers' CSRs approved until they are Ready or
/// `timeout` seconds have passed (off a terminal, a heartbeat to `progress`).
fn bring_back(s: &Scale, nodes: &[&Node], timeout: u64, progress: &Sink) -> Result<BringBack> {
    let wanted: Vec<(String, String)> = nodes
        .iter()
        .map(|n| (n.name.clone(), n.fqdn.clone()))
        .collect();
    let what = crate::cluster::power::ready_wait(&wanted);
    progress.beating(&what, &Default::default(), || {
        crate::kube::ready::bring_back_blocking(
            &s.kubeconfig,
            &crate::kube::csr::NodeIdentity::from_plan(&s.new),
            &wanted,
            None,
            Duration::from_secs(timeout),
            Duration::from_secs(10),
        )
    })
}

/// What a scale changes.
#[derive(Debug, PartialEq, Eq)]
pub struct Change<'a> {
    pub add: Vec<&'a Node>,
    pub remove: Vec<&'a Node>,
}

/// The workers to add (in `new`, not in `old`) and to remove (in `old`, not in
/// `new`), the latter highest index first. Refused when `new` has fewer workers
/// than `ingress_replicas` (when the API said how many) and fewer than `old`.
pub fn change<'a>(
    old: &'a Plan,
    new: &'a Plan,
    ingress_replicas: Option<u32>,
) -> Result<Change<'a>> {
    let workers = |p: &'a Plan| {
        p.nodes
            .iter()
            .filter(|n| n.role == Role::Worker)
            .collect::<Vec<_>>()
    };
    let (was, will) = (workers(old), workers(new));
    for n in &will {
        if let Some(o) = was.iter().find(|o| o.name == n.name) {
            if o.mac != n.mac || o.ip != n.ip || o.ipv6 != n.ipv6 {
                bail!(
                    "{} would change (address or MAC) in the new plan; refusing",
                    n.name
                );
            }
        }
    }
    if let Some(r) = ingress_replicas {
        if (will.len() as u32) < r && will.len() < was.len() {
            bail!(
                "the default ingress controller runs {r} router replicas on workers: {} worker(s) would leave {} of them unscheduled and the routes served by fewer. Scale it first (oc -n openshift-ingress-operator patch ingresscontroller/default --type merge -p '{{\"spec\":{{\"replicas\":{}}}}}') or keep {r} workers",
                will.len(),
                r - will.len() as u32,
                will.len().max(1)
            );
        }
    }
    let add = will
        .iter()
        .filter(|n| !was.iter().any(|o| o.name == n.name))
        .copied()
        .collect();
    let mut remove: Vec<&Node> = was
        .iter()
        .filter(|o| !will.iter().any(|n| n.name == o.name))
        .copied()
        .collect();
    remove.sort_by_key(|n| std::cmp::Reverse(n.index));
    Ok(Change { add, remove })
}

/// Remove a node's DHCP reservation and DNS host entry from the cluster's
/// network (libvirt `virNetworkUpdate` DELETE, the elements as the network holds
/// them). Idempotent: entries already gone are not looked for again.
pub fn forget_in_network(host: &Host, plan: &Plan, node: &Node) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let Some(net) = host.network(&plan.network.name)? else {
        return Ok(removed);
    };
    let xml = net.xml_desc(0).context("reading the network XML")?;
    let doc = roxmltree::Document::parse(&xml).context("parsing network XML")?;
    let flags = virt::sys::VIR_NETWORK_UPDATE_AFFECT_CONFIG
        | if net.is_active()? {
            virt::sys::VIR_NETWORK_UPDATE_AFFECT_LIVE
        } else {
            0
        };
    let ips: Vec<String> = std::iter::once(node.ip.to_string())
        .chain(node.ipv6.map(|a| a.to_string()))
        .collect();
    let duid = crate::plan::ipv6::duid_ll(&node.mac);
    let (parent4, parent6) = crate::libvirt::apply::dhcp_parents(&doc);
    let mut edits = Vec::new();
    for h in doc.descendants().filter(|n| n.tag_name().name() == "host") {
        let in_dhcp = h.parent().is_some_and(|p| p.tag_name().name() == "dhcp");
        let in_dns = h.parent().is_some_and(|p| p.tag_name().name() == "dns");
        let ip = h.attribute("ip").unwrap_or_default();
        let ours = ips.iter().any(|a| a == ip)
            || h.attribute("mac")
                .is_some_and(|m| m.eq_ignore_ascii_case(&node.mac))
            || h.attribute("id")
                .is_some_and(|i| i.eq_ignore_ascii_case(&duid));
        if !ours {
            continue;
        }
        if in_dhcp {
            // Under the <ip> of its family, named as apply names it.
            let parent = if h.attribute("id").is_some() {
                parent6
            } else {
                parent4
            };
            let text = xml[h.range()].to_string();
            edits.push((
                virt::sys::VIR_NETWORK_SECTION_IP_DHCP_HOST,
                parent,
                text,
                "reservation",
                ip.to_string(),
            ));
        } else if in_dns {
            // By its address alone: libvirt matches a whole record by any of
            // its names too, which a dual-stack node's A and AAAA records
            // share ("multiple matching DNS HOST records").
            edits.push((
                virt::sys::VIR_NETWORK_SECTION_DNS_HOST,
                -1,
                format!("<host ip='{ip}'/>"),
                "DNS entry",
                ip.to_string(),
            ));
        }
    }
    for (section, parent, text, what, ip) in edits {
        net.update(
            virt::sys::VIR_NETWORK_UPDATE_COMMAND_DELETE,
            section,
            parent,
            &text,
            flags,
        )
        .with_context(|| format!("removing the {what} of {}", node.name))?;
        removed.push(format!("{what} of {} ({ip})", node.name));
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(workers: u32) -> Plan {
        let text = format!("cluster: lab1\ndomain: example.com\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: {workers}\n");
        crate::plan::from_yaml(&text)
    }

    #[test]
    fn up_adds_after_the_existing_and_down_removes_the_last_first() {
        let (one, three) = (plan(1), plan(3));
        let c = change(&one, &three, None).unwrap();
        let names = |v: &[&Node]| v.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&c.add), ["lab1-worker-1", "lab1-worker-2"]);
        assert!(c.remove.is_empty());
        // The existing worker is the same node in both plans.
        assert_eq!(one.node("lab1-worker-0"), three.node("lab1-worker-0"));
        let c = change(&three, &one, None).unwrap();
        assert_eq!(names(&c.remove), ["lab1-worker-2", "lab1-worker-1"]);
        assert!(change(&three, &three, None).unwrap().add.is_empty());
    }

    #[test]
    fn a_dual_stack_lab_scales_its_workers_with_their_ipv6_addresses() {
        let plan6 = |workers: u32| {
            crate::plan::from_yaml(&format!("cluster: lab1\ndomain: example.com\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: {workers}\nnetwork:\n  cidr: [192.168.126.0/24, 'fd00:1:2:3::/64']\n"))
        };
        let (one, three) = (plan6(1), plan6(3));
        let c = change(&one, &three, None).unwrap();
        assert_eq!(c.add.len(), 2);
        assert!(c.add.iter().all(|n| n.ipv6.is_some()), "{:?}", c.add);
        // The existing worker keeps both its addresses.
        assert_eq!(one.node("lab1-worker-0"), three.node("lab1-worker-0"));
        let c = change(&three, &one, None).unwrap();
        assert_eq!(c.remove.len(), 2);
        assert!(change(&plan6(2), &plan6(2), None).unwrap().add.is_empty());
    }

    #[test]
    fn below_the_ingress_replicas_is_refused_with_the_reason() {
        let (one, three) = (plan(1), plan(3));
        let e = change(&three, &one, Some(2)).unwrap_err().to_string();
        assert!(
            e.contains("2 router replicas") && e.contains("1 of them unscheduled"),
            "{e}"
        );
        // Up is never refused; neither is down to the replicas.
        assert!(change(&one, &three, Some(2)).is_ok());
        assert!(change(&three, &plan(2), Some(2)).is_ok());
    }
}
