//! The infra target: the plan applied by the cluster's backend (on libvirt:
//! network, pool, base image, overlays, each fw_cfg node's Ignition, domains)
//! and recorded (`plan.json`) for the host services. On upi it runs once, after the installer wrote its
//! Ignition configs; in the lab alone it converges on the plan each time.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::Note;
use crate::backend::{self, Inputs};
use crate::install::state::Locked;
use crate::install::Ctx;
use crate::plan::Boot;
use crate::spec::{BackendKind, Role};

/// Each fw_cfg node's Ignition: the installer's config for its role (from the
/// cluster's asset directory) wrapped with the node's own settings. In rehearsal
/// there is no installer: the node gets shiftlab's part alone.
pub(crate) fn node_ignition(ctx: &Ctx) -> Result<BTreeMap<String, Vec<u8>>> {
    let (spec, plan) = (ctx.spec, ctx.plan);
    let assets = ctx.cluster.assets();
    let keys: Vec<String> = spec.ssh_keys.iter().map(|k| k.key.clone()).collect();
    let mut out = BTreeMap::new();
    for node in plan.nodes.iter().filter(|n| n.boot == Boot::DiskFwCfg) {
        let file = assets.ignition(match node.role {
            Role::Bootstrap => "bootstrap",
            Role::Ctlplane => "master",
            Role::Worker => "worker",
        });
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

/// The base image: the cluster file's, the release's CoreOS image, or in a
/// rehearsal the stand-in image (built once per host, under the host lock).
fn base_image(ctx: &Ctx, locked: &Locked) -> Result<Option<PathBuf>> {
    // ISO nodes install onto an empty disk: only fw_cfg nodes sit on an image.
    if !ctx.plan.nodes.iter().any(|n| n.boot == Boot::DiskFwCfg) {
        return Ok(None);
    }
    base_disk_image(ctx, locked).map(Some)
}

fn base_disk_image(ctx: &Ctx, locked: &Locked) -> Result<PathBuf> {
    if let Some(p) = &ctx.spec.image {
        return Ok(p.clone());
    }
    if let Some(p) = &locked.facts().coreos_image {
        return Ok(p.clone());
    }
    if ctx.spec.rehearsal {
        let path = ctx.state.standin_image();
        let _host = ctx.state.lock_host()?;
        if !path.exists() {
            ctx.progress.aside(format_args!(
                "building the stand-in node image {}",
                path.display()
            ));
            crate::image::standin::build(&path).context("building the stand-in image")?;
        }
        return Ok(path);
    }
    bail!("image: no base image given; set `image:` to a local CoreOS qcow2 (or `rehearsal: true`)")
}

/// The infra target: the pipeline's inputs prepared, the cluster's backend
/// (crate::backend) applied once, the plan recorded for the host services.
pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    let (spec, plan) = (ctx.spec, ctx.plan);
    let backend = crate::backend::of(plan);
    let kubevirt = backend::kind(plan) == BackendKind::Kubevirt;
    // KubeVirt nodes boot their own disk (`kubevirt.image` or the stream's),
    // never a base image, and no ISO.
    let image = if kubevirt {
        None
    } else {
        base_image(ctx, locked)?
    };
    let ignition = node_ignition(ctx)?;
    // The live ISO the iso target made, for the libvirt nodes that boot one.
    let iso = if kubevirt {
        None
    } else {
        super::iso::path(&ctx.cluster, ctx.flow)
    };
    if let Some(p) = &iso {
        if !p.is_file() {
            bail!(
                "{} is missing: the iso target makes it (run `shiftlab create iso`)",
                p.display()
            );
        }
    }
    if !kubevirt {
        // Nothing here fetches its Ignition over HTTP: fw_cfg nodes get it from QEMU,
        // ISO nodes have it embedded, IPI nodes get it from Ironic. So none is
        // published; one that carries secrets would go through
        // `serve::http::publish_private` (behind the cluster's token). An older
        // shiftlab put every node's config in the open `http/`: withdraw those.
        for node in &plan.nodes {
            let old = ctx.cluster.http_public().join(format!("{}.ign", node.name));
            if old.exists() {
                std::fs::remove_file(&old)
                    .with_context(|| format!("removing {}", old.display()))?;
                ctx.progress.say(format_args!(
                    "withdrew {} from the HTTP server",
                    old.display()
                ));
            }
        }
    }
    let http = plan
        .http_address()
        .map(|a| std::net::SocketAddr::new(a, crate::plan::DEFAULT_HTTP_PORT));
    // KubeVirt's VMs fetch their full config behind the cluster's HTTP token.
    let publish = |name: &str, bytes: &[u8]| -> Result<String> {
        crate::serve::http::publish_private(&ctx.cluster, name, bytes)
    };
    let say = |line: &str| ctx.progress.say(line);
    // CDI pulls a registry node image with the pull secret's credentials.
    let pull_secret = match (&spec.pull_secret, kubevirt) {
        (Some(_), true) => Some(super::install_config::read_pull_secret(spec)?),
        _ => None,
    };
    let inputs = Inputs {
        state: ctx.state,
        base_image: image.as_deref(),
        installer: locked.facts().openshift_install.as_deref(),
        iso: iso.as_deref(),
        pull_secret: pull_secret.as_deref(),
        ignition: &ignition,
        http,
        start_all: ctx.options.start_workers,
        publish_private: &publish,
        say: &say,
    };
    // The stream's level picks the TCG CPU model (libvirt::xml::write::cpu_model).
    let with_level;
    let applied = match &locked.facts().cpu_level {
        Some(s) => {
            let mut p = plan.clone();
            p.libvirt.cpu_level = Some(s.level);
            with_level = p;
            &with_level
        }
        None => plan,
    };
    let report = backend.apply(applied, &ctx.cluster, &inputs)?;
    // The services (load balancer, HTTP, DNS) read the plan from here.
    ctx.cluster.write_plan(plan)?;
    // Tell a running `shiftlab serve` at once; it also rescans on its own.
    match crate::serve::notify(ctx.state, Some(&spec.cluster)) {
        Ok(true) => ctx
            .progress
            .say(format_args!("shiftlab serve picked up {}", spec.cluster)),
        Ok(false) if kubevirt => ctx.progress.say(
            "note: start `shiftlab serve`: the VMs fetch their Ignition from it (docs/kubevirt.md)",
        ),
        Ok(false) if plan.load_balancer.is_some() => ctx.progress.say(
            "note: shiftlab serve is not running: start it for the load balancer, HTTP server and host DNS (see docs/serve.md)",
        ),
        Ok(false) => {}
        Err(e) => tracing::warn!("notifying shiftlab serve: {e:#}"),
    }
    for line in &report.lines {
        ctx.progress.say(line);
    }
    if !report.drift.is_empty() {
        bail!(
            "{} differs from its plan in ways shiftlab did not change:\n  - {}",
            spec.cluster,
            report.drift.join("\n  - ")
        );
    }
    Ok(Some(report.summary))
}
