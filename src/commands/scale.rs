use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::cli::scale::ScaleArgs;
use crate::cluster::scale;
use crate::install::target::Target;
use crate::install::{self, Ctx, Options};
use crate::kube::baremetal;
use crate::kube::drain::Drained;
use crate::libvirt::Host;
use crate::output::emit;
use crate::progress::Sink;
use crate::spec::Method;
use crate::state::StateDir;

#[derive(Debug, Serialize)]
struct Outcome {
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
    api: Option<crate::kube::ready::BringBack>,
    note: Option<String>,
}

impl Outcome {
    fn table(&self) -> String {
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
}

/// What a scale is asked to do, from `scale`'s flags or `create`'s rerun.
#[derive(Debug, Clone)]
pub struct Request {
    pub workers: u32,
    pub drain_timeout: u64,
    pub timeout: u64,
    pub kubeconfig: Option<std::path::PathBuf>,
    pub output: crate::cli::OutputFormat,
}

impl Request {
    /// `create`'s rerun: `scale`'s defaults.
    pub fn defaults(workers: u32) -> Self {
        Request {
            workers,
            drain_timeout: 600,
            timeout: 1800,
            kubeconfig: None,
            output: crate::cli::OutputFormat::Table,
        }
    }
}

pub fn run(args: &ScaleArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let loaded = super::load_spec(&args.file)?;
    if loaded.spec.cluster != args.name.as_str() {
        bail!(
            "{} is the file of cluster {}, not {}",
            args.file.display(),
            loaded.spec.cluster,
            args.name
        );
    }
    let req = Request {
        workers: args.workers,
        drain_timeout: args.drain_timeout,
        timeout: args.timeout,
        kubeconfig: args.kubeconfig.clone(),
        output: args.output,
    };
    apply(&loaded.spec, state, &req, out)
}

/// Scale the cluster of `spec` to `req.workers` workers (the rest of `spec` must
/// be the cluster's as recorded): the add/drain/delete path of `scale`.
pub fn apply(
    spec: &crate::spec::ClusterSpec,
    state: &StateDir,
    req: &Request,
    out: &mut dyn Write,
) -> Result<()> {
    if matches!(spec.method, Method::Sno | Method::Agent) {
        bail!(
            "scale supports UPI and IPI clusters (their workers are shiftlab's VMs); {} is method {:?}",
            spec.cluster,
            spec.method
        );
    }
    // IPI: a worker is a BareMetalHost the machine API provisions (kube::baremetal).
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
    // Everything checked before anything changes: the API answers, the change is allowed.
    let replicas = if api {
        crate::kube::drain::ingress_replicas_blocking(&kubeconfig)
            .context("asking the API for the ingress replicas (nothing was changed)")?
    } else {
        None
    };
    let change = scale::change(&old, &new, replicas)?;
    let mut outcome = Outcome {
        cluster: spec.cluster.clone(),
        workers_before: old.nodes.iter().filter(|n| n.role == crate::spec::Role::Worker).count(),
        workers: req.workers,
        added: change.add.iter().map(|n| n.name.clone()).collect(),
        removed: change.remove.iter().map(|n| n.name.clone()).collect(),
        drained: Vec::new(),
        objects: Vec::new(),
        libvirt_removed: Vec::new(),
        api: None,
        note: (!api).then(|| {
            format!(
                "no kubeconfig at {}: no drain, CSR approval or readiness (a lab without an install)",
                kubeconfig.display()
            )
        }),
    };

    if !change.remove.is_empty() {
        let _lock = cluster.lock()?;
        let uri = crate::cluster::recorded_uri(&cluster)?.unwrap_or(old.libvirt.uri.clone());
        let host = Host::open(&uri)?;
        if ipi {
            // The machine controller drains and deletes each Node before its Machine goes.
            let names: Vec<&str> = change.remove.iter().map(|n| n.name.as_str()).collect();
            let deleted = crate::runtime::block_on(async {
                let client = crate::kube::approve::client_from_kubeconfig(&kubeconfig).await?;
                let machines = baremetal::scale_down_begin(&client, &names, req.workers).await?;
                outcome.objects.extend(
                    machines
                        .values()
                        .flatten()
                        .map(|m| format!("Machine/{m} annotated {}", baremetal::DELETE_MACHINE)),
                );
                baremetal::scale_down_finish(
                    &client,
                    &machines,
                    Duration::from_secs(req.drain_timeout),
                    Duration::from_secs(2),
                )
                .await
            })?;
            outcome.objects.extend(deleted);
        }
        for node in &change.remove {
            if api && !ipi {
                if let Some(d) = crate::kube::drain::drain_blocking(
                    &kubeconfig,
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
                    &old.cluster,
                    node,
                    &old.libvirt.pool,
                    &cluster,
                )?);
            outcome
                .libvirt_removed
                .extend(scale::forget_in_network(&host, &old, node)?);
        }
    }
    // Converge libvirt, the recorded plan (serve's backends and DNS) on the new plan;
    // new workers are started.
    let ctx = Ctx::new(
        &spec,
        &new,
        state,
        Options {
            start_workers: true,
            worker_change: true,
        },
    )
    // Under -o json/yaml the infra target's progress goes to stderr: stdout
    // holds the one document.
    .with_progress(Sink::for_output(
        req.output != crate::cli::OutputFormat::Table,
    ));
    install::reach(&ctx, Target::Infra)?;
    if ctx.cluster.read_plan().ok().as_ref() != Some(&new) {
        ctx.cluster.write_plan(&new)?;
        let _ = crate::serve::notify(state, Some(&new.cluster));
    }
    if ipi && !change.add.is_empty() {
        // The new VMs are off and on the lab BMC (serve's BMC serves the cluster's
        // domains); the machine API provisions them from their BareMetalHosts.
        let password = cluster.lab_bmc_password(spec.bmc.password.as_deref())?;
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
        let objects = change
            .add
            .iter()
            .map(|n| baremetal::render(n, &inputs))
            .collect::<Result<Vec<_>>>()?;
        let applied = crate::runtime::block_on(async {
            let client = crate::kube::approve::client_from_kubeconfig(&kubeconfig).await?;
            baremetal::scale_up(&client, &objects, req.workers).await
        })?;
        outcome.objects.extend(applied);
        outcome.note = Some(
            "IPI: the machine API provisions the new hosts and the machine approver their CSRs; watch `oc -n openshift-machine-api get bmh,machines`".into(),
        );
    } else if api && !change.add.is_empty() {
        let wanted: Vec<(String, String)> = change
            .add
            .iter()
            .map(|n| (n.name.clone(), n.fqdn.clone()))
            .collect();
        let r = crate::kube::ready::bring_back_blocking(
            &kubeconfig,
            &crate::kube::csr::NodeIdentity::from_plan(&new),
            &wanted,
            None,
            Duration::from_secs(req.timeout),
            Duration::from_secs(10),
        )?;
        let not_ready = r.not_ready.clone();
        outcome.api = Some(r);
        if !not_ready.is_empty() {
            emit(out, req.output, &outcome, || outcome.table())?;
            bail!(
                "not Ready within {}s: {}",
                req.timeout,
                not_ready.join(", ")
            );
        }
    }
    emit(out, req.output, &outcome, || outcome.table())
}
