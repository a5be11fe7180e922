//! Checks against the libvirt host before `create infra` creates anything. Every
//! problem is collected; if there is one, nothing is created. `shiftlab doctor`'s
//! checks run here too: its failures are problems, its warnings notes. The
//! libvirt backend calls it before its apply (libvirt itself knows no doctor).
//! Before that, `create` decides over doctor's checks alone ([`decide`], pure)
//! once at its start, so a host that cannot take the cluster is refused before
//! the download ([`NotReady`], exit 4).

use std::path::Path;

use anyhow::Result;

use crate::libvirt::{ledger::Ledger, owner_of_domain, Host};
use crate::plan::{installer_vm, Plan};
use crate::spec::NetworkMode;

/// `create` refused before its long work: the host cannot take the cluster.
/// Exit status 4, as an infrastructure failure (src/exit_status.rs).
#[derive(Debug, thiserror::Error)]
#[error("preflight: the host cannot take {cluster} (nothing was downloaded, run or created; `shiftlab doctor -f FILE` shows every check):\n  - {}", problems.join("\n  - "))]
pub struct NotReady {
    pub cluster: String,
    pub problems: Vec<String>,
}

/// What `create`'s preflight decided.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// Failing checks, each with what was found and what to do: the run stops.
    pub problems: Vec<String>,
    /// Warnings, printed; the run goes on.
    pub warnings: Vec<String>,
}

/// `create`'s preflight, pure: doctor's checks ([`super::checks::checks_for`],
/// the list `doctor -f` prints) over the host's facts, judged for `run`.
pub fn decide(facts: &super::HostFacts, plan: &Plan, run: super::checks::Run) -> Decision {
    use super::Severity;
    let mut d = Decision::default();
    for c in super::checks::checks_for(facts, Some(plan), run) {
        match c.severity {
            Severity::Fail => d.problems.push(match &c.fix {
                Some(fix) => format!("{}: {} (fix: {fix})", c.id, c.verdict),
                None => format!("{}: {}", c.id, c.verdict),
            }),
            Severity::Warn => d.warnings.push(format!("{}: {}", c.id, c.verdict)),
            _ => {}
        }
    }
    d
}

/// Bytes a node's overlay is expected to use early in its life: what the pool must
/// have free. Thin overlays grow with use; these are the first hours of a lab.
pub fn expected_node_use(plan: &Plan) -> u64 {
    const GIB: u64 = 1 << 30;
    plan.nodes
        .iter()
        .map(|n| {
            if plan.rehearsal {
                16 << 20
            } else {
                match n.role {
                    crate::spec::Role::Worker => 10 * GIB,
                    _ => 15 * GIB,
                }
            }
        })
        .sum()
}

/// Problems that stop `create infra`. Empty means go.
pub fn check(
    host: &Host,
    plan: &Plan,
    ledger: &Ledger,
    base_image: Option<&Path>,
) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let cluster = &plan.cluster;
    let net = &plan.network;

    // The network: ours or free, its subnet and bridge no one else's (the
    // rule doctor and create's preflight judge recorded facts by).
    let networks = super::facts::libvirt_networks(host)?;
    let (routes, interfaces) = if host.is_local() {
        super::facts::host_links()
    } else {
        Default::default()
    };
    problems.extend(super::checks::network_problems(
        plan,
        &networks,
        &routes,
        &interfaces,
        host.is_local(),
    ));
    // mode bridge: the user's bridge, there and up (shiftlab never creates or
    // deletes it). The veth-linked bridge of an IPI cluster: made on this host,
    // under a name nobody else uses.
    if (net.mode == NetworkMode::Bridge || net.veth.is_some()) && host.is_local() {
        match crate::host::veth::observe() {
            Ok(links) => {
                if net.mode == NetworkMode::Bridge {
                    problems.extend(crate::host::veth::check_host_bridge(
                        &net.bridge,
                        links.get(&net.bridge),
                    ));
                }
                if let Some(v) = &net.veth {
                    // The NAT bridge appears with the network: judge the rest.
                    let mut seen = links.clone();
                    seen.entry(v.nat.clone()).or_default();
                    if let Err(e) = crate::host::veth::ensure_actions(cluster, v, &seen) {
                        problems.push(format!("network.external_bridge: {e}"));
                    }
                }
            }
            Err(e) => problems.push(format!("listing the host's links: {e:#}")),
        }
    }
    if net.veth.is_some() && !host.is_local() {
        problems.push(format!(
            "network.external_bridge veth: shiftlab makes the veth-linked bridge on this host, but libvirt ({}) is remote; use external_bridge: own and name the network like its bridge (network.name: {})",
            host.uri, net.bridge
        ));
    }

    // Domains: ours, or free.
    for node in &plan.nodes {
        if let Some(d) = host.domain(&node.name)? {
            match owner_of_domain(&d)? {
                Some(o) if o.cluster == *cluster => {}
                Some(o) => problems.push(format!(
                    "domain {}: belongs to shiftlab cluster {}",
                    node.name, o.cluster
                )),
                None => problems.push(format!(
                    "domain {}: a libvirt domain of that name exists and is not shiftlab's",
                    node.name
                )),
            }
        }
    }

    // Volumes: ours (recorded), or free.
    if let Some(pool) = host.pool(&plan.libvirt.pool)? {
        if pool.is_active()? {
            let _ = pool.refresh(0);
            for node in &plan.nodes {
                for v in node.volumes() {
                    if Host::volume(&pool, v)?.is_some() && !ledger.volumes.contains(v) {
                        problems.push(format!(
                            "volume {v} in pool {}: exists and was not created by shiftlab for {cluster}",
                            plan.libvirt.pool
                        ));
                    }
                }
            }
            let info = pool.info()?;
            let missing: Vec<_> = plan
                .nodes
                .iter()
                .filter(|n| !ledger.volumes.contains(&n.disks[0].volume))
                .collect();
            if !missing.is_empty() {
                let need = expected_node_use(plan) / plan.nodes.len().max(1) as u64
                    * missing.len() as u64
                    + installer_vm::installer_disk(plan);
                if info.available < need {
                    problems.push(format!(
                        "pool {}: {} GiB free, the new nodes are expected to use {} GiB{}",
                        plan.libvirt.pool,
                        info.available >> 30,
                        need.div_ceil(1 << 30),
                        installer_vm::installer_disk_words(plan)
                    ));
                }
            }
        }
    } else if host.is_local() {
        if let Some(free) = crate::host::free_bytes(&plan.libvirt.pool_path) {
            let need = expected_node_use(plan) + installer_vm::installer_disk(plan);
            if free < need {
                problems.push(format!(
                    "libvirt.pool_path {}: {} GiB free, the nodes are expected to use {} GiB{}",
                    plan.libvirt.pool_path.display(),
                    free >> 30,
                    need.div_ceil(1 << 30),
                    installer_vm::installer_disk_words(plan)
                ));
            }
        }
    }

    // fw_cfg Ignition needs a libvirt that knows <sysinfo type='fwcfg'>.
    if let Some(p) =
        crate::host::security::fwcfg_problem(host.conn.lib_version()?, fwcfg_nodes(plan))
    {
        problems.push(p);
    }

    // doctor's checks that no install survives (a node bigger than the host, …).
    if host.is_local() {
        let facts = super::facts::gather_on(Ok(host), false, Some(plan));
        problems.extend(super::checks::blocking(&super::checks(&facts, Some(plan))));
    }

    match base_image {
        Some(p) if !p.is_file() => problems.push(format!(
            "image {}: no such file (the CoreOS qcow2 to import)",
            p.display()
        )),
        Some(_) => {}
        // Nodes that boot a live ISO install onto an empty disk: no base image.
        None if fwcfg_nodes(plan) == 0 => {}
        None => problems.push(
            "image: no base image given; set `image:` to a local CoreOS qcow2 (or `rehearsal: true` for stand-in nodes)"
                .to_string(),
        ),
    }
    Ok(problems)
}

fn fwcfg_nodes(plan: &Plan) -> usize {
    plan.nodes
        .iter()
        .filter(|n| n.boot == crate::plan::Boot::DiskFwCfg)
        .count()
}

/// What `create infra` tells before it creates anything, none of it blocking:
/// what the host services will change on the host (firewall rules) and what may
/// stop a node reading its fw_cfg Ignition (libvirt's labelling, SELinux on the
/// pool directory). `http` is where serve will bind the artifact server.
pub fn host_notes(host: &Host, plan: &Plan, http: Option<std::net::SocketAddr>) -> Vec<String> {
    use crate::host::{firewall, security};
    let mut notes = Vec::new();
    let fwcfg = fwcfg_nodes(plan);
    match host.conn.lib_version() {
        Ok(v) => notes.extend(security::fwcfg_labelling_warning(v, fwcfg)),
        Err(e) => notes.push(format!("libvirt version unknown ({e})")),
    }
    if !host.is_local() {
        return notes;
    }
    // doctor's warnings were printed by create's preflight (install::preflight),
    // which runs before every infra; the firewall's are below.
    if fwcfg > 0 {
        let dir = &plan.libvirt.pool_path;
        // A pool made at create gets its directory's context from its parent.
        let existing = dir.ancestors().find(|d| d.exists()).unwrap_or(dir);
        notes.extend(security::pool_dir_warning(
            security::selinux(),
            dir,
            security::selinux_context(existing).as_deref(),
        ));
    }
    let openings = firewall::Openings::from_plan(plan, http);
    if !openings.ports.is_empty() {
        match (firewall::Firewall {
            runner: &firewall::System,
        })
        .plan(&openings)
        {
            Ok(mut record) => {
                // The NAT bridge does not exist yet: libvirt will put it into
                // firewalld's `libvirt` zone when it starts the network
                // (`src/network/bridge_driver_linux.c`), not the default zone.
                if record.backend == firewall::Backend::Firewalld
                    && plan.network.mode == NetworkMode::Nat
                    && !Path::new("/sys/class/net")
                        .join(&plan.network.bridge)
                        .exists()
                {
                    record.zone = Some("libvirt".into());
                }
                notes.extend(firewall::preflight_lines(&record))
            }
            Err(e) => notes.push(format!("host firewall: could not tell ({e:#})")),
        }
    }
    notes
}

/// After the domains started: libvirt labelled each running fw_cfg node's
/// Ignition file for its VM (SELinux hosts only). Warnings, not blocking.
pub fn label_notes(host: &Host, plan: &Plan) -> Vec<String> {
    use crate::host::security;
    let mode = security::selinux();
    if mode != security::Selinux::Enforcing || !host.is_local() {
        return Vec::new();
    }
    let mut notes = Vec::new();
    for node in plan
        .nodes
        .iter()
        .filter(|n| n.boot == crate::plan::Boot::DiskFwCfg)
    {
        let Some(vol) = &node.ignition_volume else {
            continue;
        };
        let running = host
            .domain(&node.name)
            .ok()
            .flatten()
            .is_some_and(|d| d.is_active().unwrap_or(false));
        if running {
            let file = plan.libvirt.pool_path.join(vol);
            notes.extend(security::running_label_warning(
                mode,
                &file,
                security::selinux_context(&file).as_deref(),
            ));
        }
    }
    notes
}
