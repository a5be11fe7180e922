use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::cli::create::{CreateCommand, InfraArgs, InstallConfigArgs};
use crate::files::write_atomic;
use crate::install::dirs::StateDir;
use crate::install::install_config;
use crate::plan::{self, Boot, Plan};
use crate::spec::{ClusterSpec, Role};
use crate::virt::{apply, Host};

pub fn run(cmd: &CreateCommand, state: &StateDir) -> Result<()> {
    match cmd {
        CreateCommand::InstallConfig(args) => install_config_target(args, state),
        CreateCommand::Infra(args) => infra_target(args, state),
    }
}

fn install_config_target(args: &InstallConfigArgs, state: &StateDir) -> Result<()> {
    let loaded = super::load_spec(&args.file)?;
    let plan = plan::derive(&loaded.spec);
    let written = install_config::write(&loaded.spec, &plan, &args.dir, state)?;
    for p in written {
        println!("wrote {}", p.display());
    }
    Ok(())
}

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
        let installer = if spec.rehearsal {
            None
        } else {
            let file = assets.join(format!(
                "{}.ign",
                match node.role {
                    Role::Bootstrap => "bootstrap",
                    Role::Ctlplane => "master",
                    Role::Worker => "worker",
                }
            ));
            Some(std::fs::read(&file).with_context(|| {
                format!(
                    "reading {} (the installer's Ignition; create the ignition configs first, or use rehearsal: true)",
                    file.display()
                )
            })?)
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
        if !path.exists() {
            eprintln!("building the stand-in node image {}", path.display());
            crate::image::standin::build(&path).context("building the stand-in image")?;
        }
        return Ok(path);
    }
    bail!("image: no base image given; set `image:` to a local CoreOS qcow2 (or `rehearsal: true`)")
}

fn infra_target(args: &InfraArgs, state: &StateDir) -> Result<()> {
    let loaded = super::load_spec(&args.file)?;
    let spec = &loaded.spec;
    let plan = plan::derive(spec);
    let dir = state.cluster(&spec.cluster);
    let host = Host::open(&plan.libvirt.uri)?;
    let image = base_image(spec, state)?;
    let ignition = node_ignition(spec, &plan, state)?;
    let opts = apply::ApplyOptions {
        base_image: &image,
        ignition,
        start_all: args.start_workers,
    };
    let (report, accel, why) = apply::apply(&host, &plan, &state.root, &opts)?;
    // The services (load balancer, HTTP, DNS) read the plan from here.
    write_atomic(
        &dir.join("plan.json"),
        (serde_json::to_string_pretty(&plan)? + "\n").as_bytes(),
    )?;
    println!(
        "domains run with {} ({why})",
        match accel {
            crate::render::libvirt::Accel::Kvm => "KVM",
            crate::render::libvirt::Accel::Tcg => "QEMU TCG",
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
    Ok(())
}
