//! The KubeVirt implementation of [`crate::backend::Backend`]: the infra target
//! renders the cluster's objects and applies them; power is `runStrategy`.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use super::apply::{self, Ledger};
use super::render::{self, Inputs, Kind};
use super::KubevirtPlan;
use crate::backend::Backend;
use crate::install::state::Locked;
use crate::install::targets::Note;
use crate::install::Ctx;
use crate::plan::{Boot, Node};
use crate::spec::Role;

pub struct Kubevirt;

/// The node disk from CoreOS stream metadata: the `kubevirt` containerDisk
/// image (`architectures.x86_64.images.kubevirt`, by digest when given:
/// coreos/stream-metadata-go `stream/stream.go`, `Images.Kubevirt`), else the
/// `qemu` `qcow2.gz` disk, which CDI imports over HTTP and decompresses.
pub fn image_from_stream(json: &str) -> Result<String> {
    let root: Value = serde_json::from_str(json).context("stream metadata is not JSON")?;
    let arch = root
        .pointer(&format!("/architectures/{}", "x86_64"))
        .ok_or_else(|| anyhow!("stream metadata has no x86_64 architecture"))?;
    let kubevirt = arch.pointer("/images/kubevirt");
    for key in ["digest-ref", "image"] {
        if let Some(s) = kubevirt.and_then(|k| k.get(key)).and_then(Value::as_str) {
            if !s.is_empty() {
                return Ok(format!("docker://{s}"));
            }
        }
    }
    arch.pointer("/artifacts/qemu/formats/qcow2.gz/disk/location")
        .and_then(Value::as_str)
        .filter(|s| s.starts_with("https://") || s.starts_with("http://"))
        .map(String::from)
        .ok_or_else(|| {
            anyhow!("stream metadata has neither images.kubevirt nor a qemu qcow2.gz disk")
        })
}

/// The node image: the cluster file's, or the release's stream metadata.
pub fn node_image(kp: &KubevirtPlan, locked: &Locked) -> Result<String> {
    if let Some(i) = &kp.image {
        return Ok(i.clone());
    }
    let Some(installer) = &locked.facts().openshift_install else {
        bail!("kubevirt.image: no node image; set it (an http(s):// disk URL or docker:// containerDisk), or let the release target fetch the installer first");
    };
    let json = crate::release::coreos_stream_json(installer)?;
    image_from_stream(&json)
}

/// Each disk-booted node's pointer Ignition, its full config published behind
/// the cluster's HTTP token.
fn userdata(ctx: &Ctx, kp: &KubevirtPlan) -> Result<BTreeMap<String, String>> {
    let Some(base) = &kp.http_url else {
        bail!("kubevirt.http_url: no URL at which the VMs reach shiftlab's HTTP server");
    };
    let mut out = BTreeMap::new();
    for (node, bytes) in crate::install::targets::infra::node_ignition(ctx)? {
        let path =
            crate::serve::http::publish_private(&ctx.cluster, &format!("{node}.ign"), &bytes)?;
        out.insert(
            node,
            crate::ignition::pointer_config(&format!("{base}{path}"))?,
        );
    }
    Ok(out)
}

fn connect(kp: &KubevirtPlan) -> Result<(tokio::runtime::Runtime, kube::Client)> {
    let rt = crate::runtime::current_thread()?;
    let client = rt.block_on(apply::client(&kp.kubeconfig, kp.context.as_deref()))?;
    Ok((rt, client))
}

/// Pod mode: the DNS records the user adds, with the Services' addresses as
/// the cluster has them now (docs/kubevirt.md, "DNS you must add").
fn print_dns_records(
    rt: &tokio::runtime::Runtime,
    client: &kube::Client,
    plan: &crate::plan::Plan,
    kp: &KubevirtPlan,
    progress: &crate::progress::Sink,
) -> Result<()> {
    let [api, ingress] = crate::plan::kubevirt::service_names(plan);
    let read = |name: &str| -> Result<super::dns::ServiceAddress> {
        Ok(rt
            .block_on(apply::service_address(client, &kp.namespace, name))?
            .unwrap_or_else(|| super::dns::ServiceAddress {
                name: name.to_string(),
                ..Default::default()
            }))
    };
    let (api, ingress) = (read(&api)?, read(&ingress)?);
    progress.say("add to your DNS (docs/kubevirt.md, \"DNS you must add\"):");
    for r in super::dns::records(plan, kp.service_type, &api, &ingress) {
        progress.say(format_args!("  {r}"));
    }
    Ok(())
}

impl Backend for Kubevirt {
    fn name(&self) -> &'static str {
        "kubevirt"
    }

    fn apply(&self, ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
        let plan = ctx.plan;
        let kp = super::plan_of(plan)?;
        // The API first: an unreachable one (or one without KubeVirt) stops
        // the run before any node config is published.
        let (rt, client) = connect(kp)?;
        rt.block_on(apply::preflight(
            &client,
            kp.network == crate::spec::PodNetwork::Multus,
            kp.storage_class.as_deref(),
        ))?;
        let image = node_image(kp, locked)?;
        let userdata = userdata(ctx, kp)?;
        let objects = render::render(
            plan,
            &Inputs {
                image: &image,
                userdata: &userdata,
            },
        )?;
        let mut ledger = apply::load_ledger(&ctx.cluster)?.unwrap_or_else(|| Ledger::of(kp));
        if ledger.namespace != kp.namespace {
            bail!(
                "the cluster's objects are in namespace {}; destroy it before moving it to {}",
                ledger.namespace,
                kp.namespace
            );
        }
        let cluster = ctx.cluster.clone();
        let save = move |l: &Ledger| apply::save_ledger(&cluster, l);
        let report = rt.block_on(apply::apply(
            &client,
            &plan.cluster,
            &objects,
            &mut ledger,
            &save,
        ))?;
        // shiftlab serve reads the plan from here (the HTTP server the
        // pointer configs merge from).
        ctx.cluster.write_plan(plan)?;
        match crate::serve::notify(ctx.state, Some(&plan.cluster)) {
            Ok(true) => ctx
                .progress
                .say(format_args!("shiftlab serve picked up {}", plan.cluster)),
            Ok(false) => ctx.progress.say(
                "note: start `shiftlab serve`: the VMs fetch their Ignition from it (docs/kubevirt.md)",
            ),
            Err(e) => tracing::warn!("notifying shiftlab serve: {e:#}"),
        }
        for c in &report.created {
            ctx.progress.say(format_args!("created {c}"));
        }
        for c in &report.used_as_is {
            ctx.progress.say(format_args!(
                "using {c} as it is (not shiftlab's: left in place on destroy)"
            ));
        }
        if kp.network == crate::spec::PodNetwork::Pod {
            print_dns_records(&rt, &client, plan, kp, &ctx.progress)?;
        }
        Ok(Some(format!(
            "{} created, {} applied unchanged or updated in namespace {}",
            report.created.len(),
            report.updated.len(),
            kp.namespace
        )))
    }

    fn start(&self, ctx: &Ctx, roles: &[Role]) -> Result<Vec<String>> {
        let kp = super::plan_of(ctx.plan)?;
        let (rt, client) = connect(kp)?;
        rt.block_on(async {
            let mut started = Vec::new();
            for n in ctx.plan.nodes.iter().filter(|n| roles.contains(&n.role)) {
                match apply::run_strategy(&client, &kp.namespace, &n.name).await? {
                    None => bail!("VirtualMachine/{} does not exist; run create infra", n.name),
                    Some(s) if s == "Always" => {}
                    Some(_) => {
                        apply::set_run_strategy(&client, &kp.namespace, &n.name, "Always").await?;
                        started.push(n.name.clone());
                    }
                }
            }
            Ok(started)
        })
    }

    fn remove_node(&self, ctx: &Ctx, node: &Node) -> Result<Vec<String>> {
        let kp = super::plan_of(ctx.plan)?;
        let (rt, client) = connect(kp)?;
        let cluster = &ctx.plan.cluster;
        rt.block_on(async {
            let mut removed = Vec::new();
            let mut targets = vec![(Kind::VirtualMachine, node.name.clone())];
            if node.boot == Boot::DiskFwCfg {
                targets.push((Kind::Secret, format!("{}-ignition", node.name)));
            }
            for (kind, name) in targets {
                if apply::delete_owned(&client, cluster, kind, &kp.namespace, &name).await? {
                    removed.push(format!("{}/{name}", kind.as_str()));
                }
            }
            Ok(removed)
        })
    }
}

/// `shiftlab destroy cluster` for a cluster recorded on KubeVirt: every object
/// with its owner label, then the ledger. `None` when it is not on KubeVirt.
pub fn destroy_recorded(cluster: &crate::state::ClusterDir) -> Result<Option<Vec<String>>> {
    let Some(ledger) = apply::load_ledger(cluster)? else {
        return Ok(None);
    };
    let rt = crate::runtime::current_thread()?;
    let removed = rt.block_on(async {
        let client = apply::client(&ledger.kubeconfig, ledger.context.as_deref()).await?;
        apply::destroy(&client, cluster.name(), &ledger).await
    })?;
    std::fs::remove_file(apply::ledger_path(cluster))
        .with_context(|| format!("removing {}", apply::ledger_path(cluster).display()))?;
    Ok(Some(removed))
}

/// `shiftlab status` of a cluster on KubeVirt: its VMs as the API has them,
/// and the install targets.
#[derive(Debug, serde::Serialize)]
pub struct Status {
    pub cluster: String,
    pub backend: &'static str,
    pub namespace: String,
    pub nodes: Vec<apply::VmStatus>,
    pub install: Option<crate::install::state::InstallStatus>,
}

impl Status {
    pub fn table(&self) -> String {
        let mut out = format!(
            "cluster {} on KubeVirt, namespace {}\n",
            self.cluster, self.namespace
        );
        let rows: Vec<Vec<String>> = self
            .nodes
            .iter()
            .map(|n| {
                let dash = || "-".to_string();
                vec![
                    n.name.clone(),
                    n.role.clone().unwrap_or_else(dash),
                    n.run_strategy.clone().unwrap_or_else(dash),
                    n.status.clone().unwrap_or_else(dash),
                ]
            })
            .collect();
        out.push_str(&crate::plan::render_table_rows(
            &["NODE", "ROLE", "RUN STRATEGY", "STATUS"],
            &rows,
        ));
        out
    }
}

/// The status of a cluster recorded on KubeVirt; `None` when it is not.
pub fn status_recorded(cluster: &crate::state::ClusterDir) -> Result<Option<Status>> {
    let Some(ledger) = apply::load_ledger(cluster)? else {
        return Ok(None);
    };
    let rt = crate::runtime::current_thread()?;
    let nodes = rt.block_on(async {
        let client = apply::client(&ledger.kubeconfig, ledger.context.as_deref()).await?;
        apply::inspect(&client, cluster.name(), &ledger.namespace).await
    })?;
    Ok(Some(Status {
        cluster: cluster.name().to_string(),
        backend: "kubevirt",
        namespace: ledger.namespace,
        nodes,
        install: crate::install::status(cluster)?,
    }))
}
