//! The libvirt backend: network, pool, base image import, overlays, each
//! fw_cfg node's Ignition volume and the domains on one host (src/libvirt).

use anyhow::{bail, Result};

use super::{Backend, Inputs, Report};
use crate::doctor::preflight;
use crate::libvirt::xml::write::Accel;
use crate::libvirt::{apply, ledger, Host};
use crate::plan::{Node, Plan};
use crate::spec::Role;
use crate::state::ClusterDir;

pub struct Libvirt;

impl Backend for Libvirt {
    fn name(&self) -> &'static str {
        "libvirt"
    }

    fn apply(&self, plan: &Plan, cluster: &ClusterDir, inputs: &Inputs) -> Result<Report> {
        let host = Host::open(&plan.libvirt.uri)?;
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

    fn start(&self, plan: &Plan, roles: &[Role]) -> Result<Vec<String>> {
        let host = Host::open(&plan.libvirt.uri)?;
        apply::start_nodes(&host, plan, roles)
    }

    fn remove_node(&self, plan: &Plan, cluster: &ClusterDir, node: &Node) -> Result<Vec<String>> {
        let host = Host::open(&plan.libvirt.uri)?;
        crate::libvirt::destroy::remove_node(
            &host,
            &plan.cluster,
            node,
            &plan.libvirt.pool,
            cluster,
        )
    }
}
