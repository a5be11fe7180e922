//! The infra target: the plan applied to libvirt — network, pool, base image,
//! overlays, each fw_cfg node's Ignition, domains — and recorded for the host
//! services. `create infra` reaches it alone (a rehearsal); the install driver
//! reaches it after the installer wrote its Ignition configs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::files::write_atomic;
use crate::libvirt::{apply, Host};
use crate::plan::{Boot, Plan};
use crate::spec::{ClusterSpec, Role};
use crate::state::StateDir;

/// Each fw_cfg node's Ignition: the installer's config for its role (from the
/// cluster's asset directory) wrapped with the node's own settings. In rehearsal
/// there is no installer: the node gets shiftlab's part alone.
fn node_ignition(
    spec: &ClusterSpec,
    plan: &Plan,
    state: &StateDir,
) -> Result<BTreeMap<String, Vec<u8>>> {
    let assets = state.cluster(&spec.cluster).join("assets");
    let keys: Vec<String> = spec.ssh_keys.iter().map(|k| k.key.clone()).collect();
    let mut out = BTreeMap::new();
    for node in plan.nodes.iter().filter(|n| n.boot == Boot::DiskFwCfg) {
        let file = assets.join(format!(
            "{}.ign",
            match node.role {
                Role::Bootstrap => "bootstrap",
                Role::Ctlplane => "master",
                Role::Worker => "worker",
            }
        ));
        // A rehearsal without installer configs gives the stand-ins shiftlab's part alone.
        let installer = match std::fs::read(&file) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && spec.rehearsal => None,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "reading {} (the installer's Ignition; run `shiftlab create ignition` first, or use rehearsal: true)",
                        file.display()
                    )
                })
            }
        };
        let cfg = crate::ignition::node_config(plan, node, &keys, installer.as_deref())?;
        out.insert(node.name.clone(), cfg.into_bytes());
    }
    Ok(out)
}

fn base_image(spec: &ClusterSpec, state: &StateDir) -> Result<PathBuf> {
    if let Some(p) = &spec.image {
        return Ok(p.clone());
    }
    if spec.rehearsal {
        let path = state.root.join("images/standin.qcow2");
        let _host = crate::state::lock_host(&state.root)?;
        if !path.exists() {
            eprintln!("building the stand-in node image {}", path.display());
            crate::image::standin::build(&path).context("building the stand-in image")?;
        }
        return Ok(path);
    }
    bail!("image: no base image given; set `image:` to a local CoreOS qcow2 (or `rehearsal: true`)")
}

/// Apply the plan to libvirt and record the plan for the host services.
pub fn apply_infra(
    spec: &ClusterSpec,
    plan: &Plan,
    state: &StateDir,
    host: &Host,
    start_workers: bool,
    image: Option<&std::path::Path>,
) -> Result<apply::Report> {
    let dir = state.cluster(&spec.cluster);
    let image = match image {
        Some(p) if spec.image.is_none() => p.to_path_buf(),
        _ => base_image(spec, state)?,
    };
    let ignition = node_ignition(spec, plan, state)?;
    // Nothing here fetches its Ignition over HTTP: fw_cfg nodes get it from QEMU,
    // ISO nodes have it embedded, IPI nodes get it from Ironic. So none is
    // published; one that carries secrets would go through
    // `ClusterFiles::publish_private` (behind the cluster's token). An older
    // shiftlab put every node's config in the open `http/`: withdraw those.
    for node in &plan.nodes {
        let old = dir.join("http").join(format!("{}.ign", node.name));
        if old.exists() {
            std::fs::remove_file(&old).with_context(|| format!("removing {}", old.display()))?;
            println!("withdrew {} from the HTTP server", old.display());
        }
    }
    let opts = apply::ApplyOptions {
        base_image: &image,
        ignition,
        start_all: start_workers,
    };
    let (report, accel, why) = apply::apply(host, plan, &state.root, &opts)?;
    // The services (load balancer, HTTP, DNS) read the plan from here.
    write_atomic(
        &dir.join("plan.json"),
        (serde_json::to_string_pretty(plan)? + "\n").as_bytes(),
    )?;
    // Tell a running `shiftlab serve` at once; it also rescans on its own.
    match crate::serve::notify(state, Some(&spec.cluster)) {
        Ok(true) => println!("shiftlab serve picked up {}", spec.cluster),
        Ok(false) if plan.load_balancer.is_some() => println!(
            "note: shiftlab serve is not running: start it for the load balancer, HTTP server and host DNS (see docs/serve.md)"
        ),
        Ok(false) => {}
        Err(e) => tracing::warn!("notifying shiftlab serve: {e:#}"),
    }
    println!(
        "domains run with {} ({why})",
        match accel {
            crate::libvirt::xml::write::Accel::Kvm => "KVM",
            crate::libvirt::xml::write::Accel::Tcg => "QEMU TCG",
        }
    );
    for c in &report.created {
        println!("created {c}");
    }
    for s in &report.started {
        println!("started {s}");
    }
    if report.created.is_empty() && report.started.is_empty() && report.drift.is_empty() {
        println!(
            "nothing to do: {} matches its plan ({} objects unchanged)",
            spec.cluster,
            report.unchanged.len()
        );
    }
    if !report.drift.is_empty() {
        bail!(
            "{} differs from its plan in ways shiftlab did not change:\n  - {}",
            spec.cluster,
            report.drift.join("\n  - ")
        );
    }
    Ok(report)
}
