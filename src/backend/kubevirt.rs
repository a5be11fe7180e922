//! The KubeVirt backend: apply renders the cluster's objects and applies them
//! (src/kubevirt holds the building blocks); power is `runStrategy`, which
//! virt-controller follows: it creates a VM's VirtualMachineInstance for
//! `Always` and deletes it for `Halted` (virt-launcher shuts the guest down
//! through its ACPI power button first), so power waits on the VMI.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use super::{Backend, Inputs, NodeOutcome, NodeStatus, Place, Report, Status, Wait};
use crate::kubevirt::apply::{self, Ledger};
use crate::kubevirt::render::{self, Kind};
use crate::kubevirt::{dns, plan_of, registry, KubevirtPlan};
use crate::plan::{Boot, Node, Plan};
use crate::progress::Beat;
use crate::state::ClusterDir;

/// The KubeVirt API and namespace a cluster's objects are in (the plan's, or
/// the ledger's for a recorded cluster).
pub struct Kubevirt {
    at: Ledger,
}

impl Kubevirt {
    pub fn at(at: Ledger) -> Kubevirt {
        Kubevirt { at }
    }

    fn connect(&self) -> Result<(tokio::runtime::Runtime, kube::Client)> {
        let rt = crate::runtime::current_thread()?;
        let client = rt.block_on(apply::client(
            &self.at.kubeconfig,
            self.at.context.as_deref(),
        ))?;
        Ok((rt, client))
    }
}

/// The node disk from CoreOS stream metadata: the `kubevirt` containerDisk
/// image (`architectures.x86_64.images.kubevirt`, by digest when given:
/// coreos/stream-metadata-go `stream/stream.go`, `Images.Kubevirt`), else the
/// `qemu` `qcow2.gz` (else `qcow2.xz`) disk, which CDI imports over HTTP and
/// decompresses.
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
    // The same choice as the libvirt import (gzip before xz): CDI's HTTP
    // importer decompresses both (CDI's supported operations: QCOW2 with GZ or
    // XZ), and Fedora CoreOS streams (OKD before 4.19) have only qcow2.xz.
    let formats = arch
        .pointer("/artifacts/qemu/formats")
        .and_then(Value::as_object);
    let offered: Vec<&str> = formats
        .map(|f| f.keys().map(String::as_str).collect())
        .unwrap_or_default();
    crate::release::choose_qemu_format(&offered)
        .and_then(|(name, _)| formats?.get(name)?.pointer("/disk/location"))
        .and_then(Value::as_str)
        .filter(|s| s.starts_with("https://") || s.starts_with("http://"))
        .map(String::from)
        .ok_or_else(|| {
            anyhow!(
                "stream metadata has neither images.kubevirt nor a qemu {} disk",
                crate::release::QEMU_FORMATS.map(|(n, _)| n).join(" or ")
            )
        })
}

/// The node image: the cluster file's, or the release's stream metadata
/// (read from the installer the release target fetched).
pub fn node_image(kp: &KubevirtPlan, installer: Option<&Path>) -> Result<String> {
    if let Some(i) = &kp.image {
        return Ok(i.clone());
    }
    let Some(installer) = installer else {
        bail!("kubevirt.image: no node image; set it (an http(s):// disk URL or docker:// containerDisk), or let the release target fetch the installer first");
    };
    let json = crate::release::coreos_stream_json(installer)?;
    image_from_stream(&json)
}

/// Each disk-booted node's pointer Ignition, its full config published behind
/// the cluster's HTTP token.
fn userdata(inputs: &Inputs, kp: &KubevirtPlan) -> Result<BTreeMap<String, String>> {
    let Some(base) = &kp.http_url else {
        bail!("kubevirt.http_url: no URL at which the VMs reach shiftlab's HTTP server");
    };
    let mut out = BTreeMap::new();
    for (node, bytes) in inputs.ignition {
        let path = (inputs.publish_private)(&format!("{node}.ign"), bytes)?;
        out.insert(
            node.clone(),
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
fn dns_records(
    rt: &tokio::runtime::Runtime,
    client: &kube::Client,
    plan: &Plan,
    kp: &KubevirtPlan,
) -> Result<Vec<String>> {
    let [api, ingress] = crate::plan::kubevirt::service_names(plan);
    let read = |name: &str| -> Result<dns::ServiceAddress> {
        Ok(rt
            .block_on(apply::service_address(client, &kp.namespace, name))?
            .unwrap_or_else(|| dns::ServiceAddress {
                name: name.to_string(),
                ..Default::default()
            }))
    };
    let (api, ingress) = (read(&api)?, read(&ingress)?);
    let mut lines = vec!["add to your DNS (docs/kubevirt.md, \"DNS you must add\"):".to_string()];
    for r in dns::records(plan, kp.service_type, &api, &ingress) {
        lines.push(format!("  {r}"));
    }
    Ok(lines)
}

impl Backend for Kubevirt {
    fn name(&self) -> &'static str {
        "kubevirt"
    }

    fn location(&self) -> String {
        format!(
            "namespace {} of {}",
            self.at.namespace,
            self.at.kubeconfig.display()
        )
    }

    fn apply(&self, plan: &Plan, cluster: &ClusterDir, inputs: &Inputs) -> Result<Report> {
        let kp = plan_of(plan)?;
        // The API first: an unreachable one (or one without KubeVirt) stops
        // the run before any node config is published.
        let (rt, client) = connect(kp)?;
        rt.block_on(apply::preflight(
            &client,
            kp.network == crate::spec::PodNetwork::Multus,
            kp.storage_class.as_deref(),
        ))?;
        let image = node_image(kp, inputs.installer)?;
        let userdata = userdata(inputs, kp)?;
        let mut objects = render::render(
            plan,
            &render::Inputs {
                image: &image,
                userdata: &userdata,
            },
        )?;
        if let Some(ps) = inputs.pull_secret {
            if let Some(auth) = registry::auth_for(ps, &image)? {
                registry::use_secret(&mut objects, registry::secret(plan, &kp.namespace, &auth));
            }
        }
        let mut ledger = apply::load_ledger(cluster)?.unwrap_or_else(|| Ledger::of(kp));
        if ledger.namespace != kp.namespace {
            bail!(
                "the cluster's objects are in namespace {}; destroy it before moving it to {}",
                ledger.namespace,
                kp.namespace
            );
        }
        let cluster = cluster.clone();
        let save = move |l: &Ledger| apply::save_ledger(&cluster, l);
        let report = rt.block_on(apply::apply(
            &client,
            &plan.cluster,
            &objects,
            &mut ledger,
            &save,
        ))?;
        let mut lines: Vec<String> = report
            .created
            .iter()
            .map(|c| format!("created {c}"))
            .collect();
        lines.extend(
            report
                .used_as_is
                .iter()
                .map(|c| format!("using {c} as it is (not shiftlab's: left in place on destroy)")),
        );
        if kp.network == crate::spec::PodNetwork::Pod {
            lines.extend(dns_records(&rt, &client, plan, kp)?);
        }
        Ok(Report {
            lines,
            drift: Vec::new(),
            summary: format!(
                "{} created, {} applied unchanged or updated in namespace {}",
                report.created.len(),
                report.updated.len(),
                kp.namespace
            ),
        })
    }

    fn start(
        &self,
        nodes: &[&Node],
        wait: Option<Wait>,
        say: &dyn Fn(&str),
    ) -> Result<Vec<NodeOutcome>> {
        let (rt, client) = self.connect()?;
        let ns = &self.at.namespace;
        rt.block_on(async {
            let mut out = Vec::new();
            let mut started = Vec::new();
            for &node in nodes {
                let Some(strategy) = apply::run_strategy(&client, ns, &node.name).await? else {
                    out.push(NodeOutcome::of(node, "absent", None));
                    continue;
                };
                let vmi = apply::vmi(&client, ns, &node.name).await?;
                // Already asked to run: done, unless its VMI is to be waited
                // for and is not running yet (then it counts as started now).
                let runs = vmi.as_ref().is_some_and(apply::Vmi::running);
                if strategy == "Always" && (runs || wait.is_none()) {
                    out.push(NodeOutcome::of(node, "already-running", None));
                    continue;
                }
                if strategy != "Always" {
                    apply::set_run_strategy(&client, ns, &node.name, "Always").await?;
                }
                started.push(node);
            }
            if let (Some(wait), false) = (wait, started.is_empty()) {
                say(&format!(
                    "runStrategy Always: waiting up to {}s for the VirtualMachineInstances of {} to run",
                    wait.timeout.as_secs(),
                    names(&started)
                ));
                let begin = Instant::now();
                let mut pending = started.clone();
                let mut beat = Beat::every(wait.beat);
                loop {
                    let mut still = Vec::new();
                    let mut phases = Vec::new();
                    for node in pending {
                        let vmi = apply::vmi(&client, ns, &node.name).await?;
                        if !vmi.as_ref().is_some_and(apply::Vmi::running) {
                            let phase = vmi.and_then(|v| v.phase).unwrap_or_else(|| "none yet".into());
                            phases.push(format!("{} ({phase})", node.name));
                            still.push(node);
                        }
                    }
                    pending = still;
                    if pending.is_empty() {
                        break;
                    }
                    // Before the timeout's check: a wait that ends there has beaten.
                    if let Some(line) = beat.due("the VirtualMachineInstances to run", || {
                        format!("{} not Running yet", phases.join(", "))
                    }) {
                        say(&line);
                    }
                    if begin.elapsed() >= wait.timeout {
                        bail!(
                            "not Running within {}s: {} (VirtualMachineInstance phase in brackets; kubectl -n {ns} describe vmi <node>)",
                            wait.timeout.as_secs(),
                            phases.join(", ")
                        );
                    }
                    tokio::time::sleep(wait.poll).await;
                }
            }
            out.extend(started.iter().map(|n| NodeOutcome::of(n, "started", None)));
            Ok(order(nodes, out))
        })
    }

    fn stop(&self, nodes: &[&Node], wait: Wait, say: &dyn Fn(&str)) -> Result<Vec<NodeOutcome>> {
        let (rt, client) = self.connect()?;
        let ns = &self.at.namespace;
        rt.block_on(async {
            let mut out = Vec::new();
            let mut waiting = Vec::new();
            for &node in nodes {
                let Some(strategy) = apply::run_strategy(&client, ns, &node.name).await? else {
                    out.push(NodeOutcome::of(node, "absent", None));
                    continue;
                };
                let vmi = apply::vmi(&client, ns, &node.name).await?;
                // Halted also when there is no VMI: nothing makes one later.
                if strategy != "Halted" {
                    apply::set_run_strategy(&client, ns, &node.name, "Halted").await?;
                }
                if vmi.is_some() {
                    waiting.push(node);
                } else {
                    out.push(NodeOutcome::of(node, "already-off", None));
                }
            }
            if waiting.is_empty() {
                return Ok(order(nodes, out));
            }
            say(&format!(
                "runStrategy Halted: waiting up to {}s for the VirtualMachineInstances of {} to shut down",
                wait.timeout.as_secs(),
                names(&waiting)
            ));
            let begin = Instant::now();
            let mut beat = Beat::every(wait.beat);
            loop {
                let mut still = Vec::new();
                for node in waiting {
                    if apply::vmi(&client, ns, &node.name).await?.is_some() {
                        still.push(node);
                    } else {
                        let took = begin.elapsed().as_secs();
                        out.push(NodeOutcome::of(node, "acpi-shutdown", Some(took)));
                    }
                }
                waiting = still;
                if waiting.is_empty() {
                    break;
                }
                // Before the timeout's check: a wait that ends there has beaten.
                if let Some(line) = beat.due("the VirtualMachineInstances to shut down", || {
                    format!("{} still running", names(&waiting))
                }) {
                    say(&line);
                }
                if begin.elapsed() >= wait.timeout {
                    say(&format!(
                        "not shut down within {}s: {}; forcing them off (their VirtualMachineInstances deleted without a grace period)",
                        wait.timeout.as_secs(),
                        names(&waiting)
                    ));
                    for node in waiting {
                        apply::force_off(&client, ns, &node.name).await?;
                        let took = begin.elapsed().as_secs();
                        out.push(NodeOutcome::of(node, "forced-off", Some(took)));
                    }
                    break;
                }
                tokio::time::sleep(wait.poll).await;
            }
            Ok(order(nodes, out))
        })
    }

    fn remove_node(&self, plan: &Plan, _cluster: &ClusterDir, node: &Node) -> Result<Vec<String>> {
        let kp = plan_of(plan)?;
        let (rt, client) = connect(kp)?;
        let cluster = &plan.cluster;
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

    fn status(&self, cluster: &str) -> Result<Option<Status>> {
        let (rt, client) = self.connect()?;
        let vms = rt.block_on(apply::inspect(&client, cluster, &self.at.namespace))?;
        let mut st = self.empty_status(cluster);
        st.nodes = vms
            .into_iter()
            .map(|v| NodeStatus {
                state: v
                    .vmi
                    .as_ref()
                    .map(|i| i.phase.as_deref().unwrap_or("pending").to_lowercase())
                    .unwrap_or_else(|| "stopped".into()),
                leased_ip: v.vmi.and_then(|i| i.ip),
                leased_ip6: None,
                name: v.name,
                role: v.role,
                mac: v.mac,
                planned_ip: None,
                console_log: None,
                run_strategy: v.run_strategy,
                status: v.status,
            })
            .collect();
        Ok(Some(st))
    }

    fn empty_status(&self, cluster: &str) -> Status {
        Status {
            cluster: cluster.to_string(),
            place: Place::Kubevirt {
                backend: "kubevirt",
                namespace: self.at.namespace.clone(),
            },
            nodes: Vec::new(),
        }
    }
}

/// `shiftlab destroy cluster` for a cluster recorded on KubeVirt: every object
/// with its owner label, then the ledger. `None` when it is not on KubeVirt.
pub fn destroy_recorded(cluster: &ClusterDir) -> Result<Option<Vec<String>>> {
    let Some(ledger) = apply::load_ledger(cluster)? else {
        return Ok(None);
    };
    let rt = crate::runtime::current_thread()?;
    let done = rt.block_on(async {
        let client = apply::client(&ledger.kubeconfig, ledger.context.as_deref()).await?;
        apply::destroy(&client, cluster.name(), &ledger, apply::DELETION_WAIT).await
    })?;
    // Deleted but not gone yet: said plainly, not reported as removed.
    if let Some(note) = done.still_terminating(&ledger.namespace, apply::DELETION_WAIT) {
        crate::progress::Sink::terminal().aside(note);
    }
    let removed = done.removed;
    std::fs::remove_file(apply::ledger_path(cluster))
        .with_context(|| format!("removing {}", apply::ledger_path(cluster).display()))?;
    Ok(Some(removed))
}

/// `nodes`' names, for messages.
fn names(nodes: &[&Node]) -> String {
    nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `out` in the order of `nodes` (outcomes are found in waves).
fn order(nodes: &[&Node], mut out: Vec<NodeOutcome>) -> Vec<NodeOutcome> {
    out.sort_by_key(|o| nodes.iter().position(|n| n.name == o.node));
    out
}

#[cfg(test)]
mod tests {
    use super::image_from_stream;

    fn stream(formats: &[&str], kubevirt: Option<&str>) -> String {
        let mut f = serde_json::Map::new();
        for name in formats {
            f.insert(
                name.to_string(),
                serde_json::json!({"disk": {"location": format!("https://mirror.example/fcos-qemu.x86_64.{name}"), "sha256": "00"}}),
            );
        }
        let mut arch = serde_json::json!({"artifacts": {"qemu": {"formats": f}}});
        if let Some(image) = kubevirt {
            arch["images"] = serde_json::json!({"kubevirt": {"image": image}});
        }
        serde_json::json!({"architectures": {"x86_64": arch}}).to_string()
    }

    #[test]
    fn the_kubevirt_container_disk_comes_first() {
        let json = stream(&["qcow2.gz"], Some("quay.io/openshift/rhcos:418"));
        assert_eq!(
            image_from_stream(&json).unwrap(),
            "docker://quay.io/openshift/rhcos:418"
        );
    }

    #[test]
    fn gzip_is_taken_before_xz_and_xz_alone_is_taken() {
        let both = stream(&["qcow2.xz", "qcow2.gz"], None);
        assert!(image_from_stream(&both).unwrap().ends_with(".qcow2.gz"));
        // Fedora CoreOS 39, the stream of OKD 4.18's installer.
        let xz = stream(&["qcow2.xz"], None);
        assert!(image_from_stream(&xz).unwrap().ends_with(".qcow2.xz"));
    }

    #[test]
    fn a_stream_without_a_disk_names_what_would_do() {
        let e = image_from_stream(&stream(&["raw.xz"], None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stream metadata has neither images.kubevirt nor a qemu qcow2.gz or qcow2.xz disk"
        );
    }
}
