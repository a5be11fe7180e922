//! The iso target: the live ISO the nodes boot.
//!
//! - sno: the release's CoreOS live ISO (verified and cached by the release
//!   target) with `bootstrap-in-place-for-live-iso.ign` embedded by
//!   `coreos-installer iso ignition embed`, as OpenShift's "Installing OpenShift
//!   on a single node" documents it (the config as the installer wrote it).
//! - agent: `openshift-install agent create image`, which writes
//!   `agent.x86_64.iso` (openshift/installer pkg/asset/agent/image/agentimage.go)
//!   with the agent's Ignition (agent-config's hosts, the rendezvous IP) already
//!   embedded; the same ISO goes to every node.
//!
//! Either is written whole or not at all: a run killed during the build leaves
//! no ISO that a later run would take for a finished one.

use std::ffi::OsString;

use anyhow::{bail, Context, Result};

use super::Note;
use crate::files::write_private;
use crate::install::state::Locked;
use crate::install::target::Flow;
use crate::install::{installer, Ctx};
use crate::state::ClusterDir;

/// The ISO the iso target made for the cluster's flow.
pub fn path(cluster: &ClusterDir, flow: Flow) -> Option<std::path::PathBuf> {
    match flow {
        Flow::Sno => Some(cluster.sno_iso()),
        Flow::Agent => Some(cluster.assets().agent_iso()),
        Flow::Upi | Flow::Ipi | Flow::Lab => None,
    }
}

pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    match ctx.flow {
        Flow::Sno => sno(ctx, locked),
        Flow::Agent => agent(ctx, locked),
        other => bail!("the iso target is not part of flow {other}"),
    }
}

fn sno(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    let live = live_iso(ctx, locked)?;
    let config = ctx.cluster.assets().single_node_ignition();
    ignition_config::Config::parse_slice(
        &std::fs::read(&config).with_context(|| format!("reading {}", config.display()))?,
    )
    .with_context(|| format!("{} is not an Ignition config", config.display()))?;
    let out = ctx.cluster.sno_iso();
    crate::image::live_iso::embed(&live, &config, &out)?;
    Ok(Some(format!(
        "{} (bootstrap-in-place-for-live-iso.ign embedded)",
        out.display()
    )))
}

/// The verified live ISO the release target cached, fetched again (verified
/// against the same stream metadata) when the cache lost it.
fn live_iso(ctx: &Ctx, locked: &mut Locked) -> Result<std::path::PathBuf> {
    if let Some(p) = locked.facts().coreos_iso.clone().filter(|p| p.is_file()) {
        return Ok(p);
    }
    use crate::release::{coreos_image, Cache, CoreosKind, Progress};
    let installer = installer::find(ctx, locked)?;
    let iso = coreos_image(
        &installer,
        CoreosKind::LiveIso,
        &Cache::from_env()?,
        &Progress::stderr(),
    )
    .context("the CoreOS live ISO (the nodes boot it)")?;
    locked.update_facts(|f| f.coreos_iso = Some(iso.clone()))?;
    Ok(iso)
}

/// The installer's environment for `agent create image` ([`installer::agent_env`]):
/// the release's `oc` first on its PATH, and the live ISO the release target
/// verified linked into the installer's image cache (a cache shiftlab owns)
/// under the name the override URL gives it, so the installer takes it as it is.
fn agent_env(ctx: &Ctx, locked: &mut Locked) -> Result<Vec<(OsString, OsString)>> {
    use crate::release::{coreos_image_from_stream, coreos_stream_json, parse_stream};
    use crate::release::{Cache, CoreosKind, Progress};
    let oc = super::release::oc(ctx, locked)?;
    let cache = Cache::from_env()?;
    let json = coreos_stream_json(&installer::find(ctx, locked)?)?;
    let art = parse_stream(&json, CoreosKind::LiveIso)?;
    let iso = coreos_image_from_stream(&json, CoreosKind::LiveIso, &cache, &Progress::stderr())
        .context("the CoreOS live ISO (the nodes boot it)")?;
    locked.update_facts(|f| f.coreos_iso = Some(iso.clone()))?;
    let cache_home = cache.installer_home();
    let link = installer::image_cache_path(&cache_home, &art.location)?;
    link_into(&iso, &link)?;
    installer::agent_env(
        &installer::AgentTools {
            oc: &oc,
            cache_home: &cache_home,
            iso_url: &art.location,
            iso_sha256: &art.sha256,
        },
        std::env::var_os("PATH").as_deref(),
    )
}

/// `link` made a symlink to `target`, replacing whatever link was there (by
/// rename: a reader sees the old link or the new one).
fn link_into(target: &std::path::Path, link: &std::path::Path) -> Result<()> {
    if std::fs::read_link(link).is_ok_and(|t| t == target) {
        return Ok(());
    }
    let dir = link.parent().context("a cache link has a directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".shiftlab-link.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)
        .with_context(|| format!("linking {}", tmp.display()))?;
    std::fs::rename(&tmp, link).with_context(|| format!("linking {}", link.display()))
}

fn agent(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    let assets = ctx.cluster.assets();
    let iso = assets.agent_iso();
    // Not done yet, so an ISO here is from a run that was stopped: the installer
    // makes it again from its state file.
    if iso.exists() {
        std::fs::remove_file(&iso).with_context(|| format!("removing {}", iso.display()))?;
    }
    // The installer consumes both configs into its state file; a run stopped
    // before that finds them as install-config wrote them.
    if !assets.installer_state().exists() {
        for (file, backup) in [
            (assets.install_config(), ctx.cluster.install_config_backup()),
            (assets.agent_config(), ctx.cluster.agent_config_backup()),
        ] {
            if !file.exists() {
                let text = std::fs::read(&backup)
                    .with_context(|| format!("reading {}", backup.display()))?;
                write_private(&file, &text)?;
            }
        }
    }
    let env = agent_env(ctx, locked)?;
    installer::run_with_env(ctx, locked, &["agent", "create", "image"], &env)?;
    for f in [&iso, &assets.kubeconfig()] {
        if !f.exists() {
            bail!("openshift-install did not write {}", f.display());
        }
    }
    if crate::image::live_iso::embedded(&iso)?.is_none() {
        bail!(
            "{} carries no embedded Ignition (coreos-installer iso ignition show)",
            iso.display()
        );
    }
    Ok(Some(format!("{} (agent Ignition embedded)", iso.display())))
}
