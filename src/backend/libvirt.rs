//! The libvirt backend: network, pool, base image import, overlays, each
//! fw_cfg node's Ignition volume and the domains on one host (src/libvirt);
//! power is the domain's (`virDomainCreate`, an ACPI shutdown, `virDomainDestroy`).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use virt::domain::Domain;

use super::{Backend, Inputs, NodeOutcome, NodeStatus, Place, Report, Status, Wait};
use crate::doctor::preflight;
use crate::libvirt::xml::write::Accel;
use crate::libvirt::{apply, inspect, ledger, parallel, Host};
use crate::plan::{Node, Plan};
use crate::progress::Beat;
use crate::state::ClusterDir;

/// The libvirt at one URI, connected for each call.
pub struct Libvirt {
    uri: String,
}

impl Libvirt {
    pub fn at(uri: &str) -> Libvirt {
        Libvirt {
            uri: uri.to_string(),
        }
    }

    fn host(&self) -> Result<Host> {
        Host::open(&self.uri)
    }
}

/// The libvirt URI a command on `cluster` talks to: `connect` (the flag, or
/// what the caller puts first), else the URI the cluster was created on (its
/// ledger), else `planned` (its plan's), else libvirt's default.
pub fn uri_for(
    cluster: &ClusterDir,
    connect: Option<&str>,
    planned: Option<&str>,
) -> Result<String> {
    let recorded = ledger::load(cluster)?.map(|l| l.uri);
    Ok(crate::libvirt::uri(
        connect.or(recorded.as_deref()).or(planned),
    ))
}

impl Backend for Libvirt {
    fn name(&self) -> &'static str {
        "libvirt"
    }

    fn location(&self) -> String {
        self.uri.clone()
    }

    fn apply(&self, plan: &Plan, cluster: &ClusterDir, inputs: &Inputs) -> Result<Report> {
        let host = self.host()?;
        // Say what the host services will change on the host, and what may keep a
        // node from its Ignition, before anything is created.
        for n in preflight::host_notes(&host, plan, inputs.http) {
            (inputs.say)(&format!("preflight: {n}"));
        }
        // Checks first: if anything is wrong, nothing is created. The volumes the
        // ledger records are ours; no ledger yet, none are.
        let recorded = ledger::load(cluster)?.unwrap_or_default();
        let problems = preflight::check(&host, plan, &recorded, inputs.base_image)?;
        if !problems.is_empty() {
            bail!(
                "the host is not ready for {} (nothing was created):\n  - {}",
                plan.cluster,
                problems.join("\n  - ")
            );
        }
        let opts = apply::ApplyOptions {
            base_image: inputs.base_image,
            iso: inputs.iso,
            ignition: inputs.ignition.clone(),
            start_all: inputs.start_all,
        };
        let (report, accel, why) = apply::apply(&host, plan, inputs.state, &opts)?;
        for n in preflight::label_notes(&host, plan) {
            (inputs.say)(&format!("warning: {n}"));
        }
        let mut lines = vec![format!(
            "domains run with {} ({why})",
            match accel {
                Accel::Kvm => "KVM",
                Accel::Tcg => "QEMU TCG",
            }
        )];
        lines.extend(report.created.iter().map(|c| format!("created {c}")));
        lines.extend(report.started.iter().map(|s| format!("started {s}")));
        if report.created.is_empty() && report.started.is_empty() && report.drift.is_empty() {
            lines.push(format!(
                "nothing to do: {} matches its plan ({} objects unchanged)",
                plan.cluster,
                report.unchanged.len()
            ));
        }
        Ok(Report {
            lines,
            summary: format!(
                "{} created, {} started",
                report.created.len(),
                report.started.len()
            ),
            drift: report.drift,
        })
    }

    /// `virDomainCreate` returns once QEMU runs: there is nothing to wait for.
    fn start(
        &self,
        nodes: &[&Node],
        _wait: Option<Wait>,
        _say: &dyn Fn(&str),
    ) -> Result<Vec<NodeOutcome>> {
        let host = self.host()?;
        let results = parallel::map_bounded(
            nodes,
            parallel::WORKERS,
            |node| -> Result<NodeOutcome> {
                let Some(d) = host.domain(&node.name)? else {
                    return Ok(NodeOutcome::of(node, "absent", None));
                };
                if d.is_active()? {
                    return Ok(NodeOutcome::of(node, "already-running", None));
                }
                d.create()
                    .with_context(|| format!("starting {}", node.name))?;
                Ok(NodeOutcome::of(node, "started", None))
            },
            || Err(anyhow::anyhow!("a worker thread panicked")),
        );
        results.into_iter().collect()
    }

    fn stop(&self, nodes: &[&Node], wait: Wait, say: &dyn Fn(&str)) -> Result<Vec<NodeOutcome>> {
        shut_down(&self.host()?, nodes, wait, say)
    }

    fn remove_node(&self, plan: &Plan, cluster: &ClusterDir, node: &Node) -> Result<Vec<String>> {
        let host = self.host()?;
        crate::libvirt::destroy::remove_node(
            &host,
            &plan.cluster,
            node,
            &plan.libvirt.pool,
            cluster,
        )
    }

    fn status(&self, cluster: &str) -> Result<Option<Status>> {
        Ok(inspect::status(&self.host()?, cluster)?.map(of_inspect))
    }

    fn empty_status(&self, cluster: &str) -> Status {
        Status {
            cluster: cluster.to_string(),
            place: Place::Libvirt {
                network: None,
                network_active: false,
            },
            nodes: Vec::new(),
        }
    }
}

/// libvirt's view of a cluster as the common [`Status`]; its JSON is the same.
fn of_inspect(st: inspect::ClusterStatus) -> Status {
    Status {
        cluster: st.cluster,
        place: Place::Libvirt {
            network: st.network,
            network_active: st.network_active,
        },
        nodes: st
            .nodes
            .into_iter()
            .map(|n| NodeStatus {
                name: n.name,
                role: Some(n.role),
                state: n.state,
                mac: n.mac,
                planned_ip: n.planned_ip,
                leased_ip: n.leased_ip,
                leased_ip6: n.leased_ip6,
                console_log: n.console_log,
                run_strategy: None,
                status: None,
            })
            .collect(),
    }
}

/// One group's ACPI shutdown, forced off after `wait.timeout`; every
/// `wait.beat` a line to `say` names the nodes still on.
fn shut_down(
    host: &Host,
    nodes: &[&Node],
    wait: Wait,
    say: &dyn Fn(&str),
) -> Result<Vec<NodeOutcome>> {
    let mut out = Vec::new();
    let mut waiting: Vec<(&Node, Domain)> = Vec::new();
    for &node in nodes {
        let Some(d) = host.domain(&node.name)? else {
            out.push(NodeOutcome::of(node, "absent", None));
            continue;
        };
        if !d.is_active()? {
            out.push(NodeOutcome::of(node, "already-off", None));
            continue;
        }
        // A driver without the ACPI method (libvirt's test driver) gets its
        // default graceful shutdown.
        if d.shutdown_flags(virt::sys::VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN)
            .is_err()
        {
            d.shutdown()
                .with_context(|| format!("asking {} to shut down", node.name))?;
        }
        tracing::info!("{}: ACPI shutdown sent", node.name);
        waiting.push((node, d));
    }
    let start = Instant::now();
    let mut beat = Beat::every(wait.beat);
    while !waiting.is_empty() {
        let mut still = Vec::new();
        for (node, d) in waiting {
            if d.is_active()? {
                still.push((node, d));
            } else {
                out.push(NodeOutcome::of(
                    node,
                    "acpi-shutdown",
                    Some(start.elapsed().as_secs()),
                ));
            }
        }
        waiting = still;
        if waiting.is_empty() {
            break;
        }
        if let Some(line) = beat.due("the ACPI shutdown", || {
            let on: Vec<&str> = waiting.iter().map(|(n, _)| n.name.as_str()).collect();
            format!(
                "{} still on; forced off at {}",
                on.join(", "),
                crate::progress::elapsed_text(wait.timeout)
            )
        }) {
            say(&line);
        }
        if start.elapsed() >= wait.timeout {
            for (node, d) in waiting.drain(..) {
                tracing::warn!(
                    "{} did not shut down within {}s: forcing it off",
                    node.name,
                    wait.timeout.as_secs()
                );
                match d.destroy() {
                    Ok(()) => {}
                    // It went off by itself in the meantime.
                    Err(_) if !d.is_active().unwrap_or(true) => {}
                    Err(e) => return Err(e).with_context(|| format!("forcing {} off", node.name)),
                }
                out.push(NodeOutcome::of(
                    node,
                    "forced-off",
                    Some(start.elapsed().as_secs()),
                ));
            }
            break;
        }
        std::thread::sleep(wait.poll);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `shiftlab status -o json` of a libvirt cluster keeps its shape (the web
    /// page, tests/e2e and docs/serve.md read it): the common status
    /// serializes exactly as libvirt's own did, key order included.
    #[test]
    fn the_common_status_serializes_as_libvirts_own() {
        let node = |name: &str, running: bool| inspect::NodeStatus {
            name: name.into(),
            role: "worker".into(),
            state: if running { "running" } else { "shutoff" }.into(),
            mac: Some("52:54:00:00:00:01".into()),
            planned_ip: Some("192.168.126.21".into()),
            leased_ip: running.then(|| "192.168.126.21".into()),
            leased_ip6: None,
            console_log: None,
        };
        let of = || inspect::ClusterStatus {
            cluster: "lab1".into(),
            network: Some("lab1".into()),
            network_active: true,
            nodes: vec![node("lab1-worker-0", true), node("lab1-worker-1", false)],
        };
        let before = serde_json::to_string(&of()).unwrap();
        let common = of_inspect(of());
        assert_eq!(serde_json::to_string(&common).unwrap(), before);
        assert_eq!(common.running(), ["lab1-worker-0"]);
    }
}
