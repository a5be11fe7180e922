//! The release target: the release resolved to concrete, verified, cached
//! artifacts — the installer (unless the cluster file names one) and the CoreOS
//! image (unless it gives one), or for sno and agent the CoreOS live ISO; for
//! IPI neither ([`coreos_artifact`]).

use anyhow::{Context, Result};

use super::Note;
use crate::install::state::Locked;
use crate::install::target::{without_release, Flow};
use crate::install::Ctx;

pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    use crate::release::{self, Cache, CoreosKind, Progress};
    let spec = ctx.spec;
    if without_release(spec) && ctx.flow == Flow::Lab {
        return Ok(Some(
            "rehearsal without a release: nothing to download".into(),
        ));
    }
    if without_release(spec) {
        return rehearsal(ctx, locked);
    }
    // The lab alone runs no installer: the release matters only for its image.
    if ctx.flow == Flow::Lab && spec.image.is_some() {
        return Ok(Some(
            "nothing to download: no installer runs here, and the cluster file gives the image"
                .into(),
        ));
    }
    let cache = Cache::from_env()?;
    let progress = Progress::stderr();
    let mut notes = Vec::new();
    // A local installer's agent `oc` is fetched once the CPU check passed.
    let mut agent_oc_for = None;
    let installer = match &spec.openshift_install {
        Some(p) => {
            // The binary installs its own release: it must be the one asked for
            // (src/release/pin.rs).
            let iv = release::pin::installer_version(p)?;
            let over = std::env::var(release::pin::OVERRIDE_ENV)
                .ok()
                .filter(|v| !v.is_empty());
            let note =
                release::pin::check(spec.distribution, &spec.version, p, &iv, over.as_deref())
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            locked.update_facts(|f| {
                f.release_version = Some(iv.version.clone());
                f.release_image = iv.release_image.clone();
            })?;
            notes.push(note);
            if ctx.flow == Flow::Agent {
                agent_oc_for = Some(iv.version.clone());
            }
            p.clone()
        }
        None => {
            let source = mirror(spec);
            let rel = release::resolve_verified(
                spec.distribution,
                &spec.version,
                &source,
                &cache,
                &progress,
                spec.release_key.as_deref(),
            )?;
            let tools = rel.tools(&cache)?;
            locked.update_facts(|f| {
                f.release_version = Some(rel.version.clone());
                f.release_image = Some(rel.release_image.clone());
                f.openshift_install = Some(tools.openshift_install.clone());
                f.oc = Some(tools.oc.clone());
            })?;
            notes.push(format!("release {} ({})", rel.version, rel.release_image));
            tools.openshift_install
        }
    };
    // The stream's CPU level against the nodes' CPU before anything is
    // downloaded or created (src/install/cpu.rs).
    let artifact = coreos_artifact(ctx.flow, spec.image.is_some());
    let stream = match release::coreos_stream_json(&installer) {
        Ok(s) => s,
        // Nothing to take from it: the level is not checked, and said so.
        Err(e) if artifact.is_none() => {
            notes.push(format!("the stream's CPU level was not checked ({e:#})"));
            String::new()
        }
        Err(e) => return Err(e),
    };
    if !stream.is_empty() {
        let level = release::cpu_level::stream_level(&stream)?;
        notes.push(crate::install::cpu::check(
            &level,
            &crate::install::cpu::node_cpu_here(spec),
        )?);
        locked.update_facts(|f| f.cpu_level = Some(level))?;
    }
    if let Some(version) = agent_oc_for {
        let oc = agent_oc(spec, &version, &cache, &progress)?;
        notes.push(format!("oc {}", oc.display()));
        locked.update_facts(|f| f.oc = Some(oc))?;
    }
    match artifact {
        Some(CoreosKind::LiveIso) => {
            // The agent installer fetches the ISO itself (from the same stream
            // metadata); fetching it here too verifies the mirror holds it intact
            // before anything is created.
            let iso =
                release::coreos_image_from_stream(&stream, CoreosKind::LiveIso, &cache, &progress)
                    .context("the CoreOS live ISO (the nodes boot it)")?;
            locked.update_facts(|f| f.coreos_iso = Some(iso.clone()))?;
            notes.push(format!("CoreOS live ISO {}", iso.display()));
        }
        Some(kind) => {
            let image = release::coreos_image_from_stream(&stream, kind, &cache, &progress)?;
            locked.update_facts(|f| f.coreos_image = Some(image.clone()))?;
            notes.push(format!("CoreOS image {}", image.display()));
        }
        None => {}
    }
    for n in progress.notes() {
        ctx.progress.aside(format_args!("    {n}"));
    }
    Ok(Some(notes.join(", ")))
}

/// A rehearsal of the method without a release: the shipped stand-in installer
/// and client baked for this run (src/rehearse/installer.rs) in place of the
/// release's, their stream naming the stand-in images (built once per host,
/// under the host lock), recorded as a release's would be.
fn rehearsal(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    use crate::rehearse::installer::{self, Baked};
    let spec = ctx.spec;
    let cache = crate::release::Cache::from_env()?;
    let artifact = coreos_artifact(ctx.flow, spec.image.is_some());
    let iso_needed = matches!(ctx.flow, Flow::Sno | Flow::Agent | Flow::Ipi);
    let (qcow2, iso) = {
        let _host = ctx.state.lock_host()?;
        let qcow2 = ctx.state.standin_image();
        if !qcow2.exists() {
            ctx.progress.aside(format_args!(
                "    building the stand-in node image {}",
                qcow2.display()
            ));
            crate::image::standin::build(&qcow2).context("building the stand-in image")?;
        }
        let iso = cache.root().join("rehearsal/standin-live.x86_64.iso");
        if iso_needed && !iso.exists() {
            ctx.progress.aside(format_args!(
                "    building the stand-in live ISO {}",
                iso.display()
            ));
            std::fs::create_dir_all(cache.root().join("rehearsal"))
                .with_context(|| format!("creating {}", cache.root().display()))?;
            crate::image::standin::build_iso(&iso).context("building the stand-in live ISO")?;
        }
        (
            installer::image(&qcow2)?,
            iso_needed.then(|| installer::image(&iso)).transpose()?,
        )
    };
    let (version, release_image) = installer::release_of(spec);
    let stream = installer::stream_json(Some(&qcow2), iso.as_ref());
    let baked = Baked {
        version: version.clone(),
        release_image: release_image.clone(),
        stream_json: stream.clone(),
        ironic_exe: std::env::current_exe().context("finding shiftlab's own executable")?,
    };
    let tools = installer::materialize(cache.root(), &baked)?;
    let level = crate::release::cpu_level::stream_level(&stream)?;
    let cpu = crate::install::cpu::check(&level, &crate::install::cpu::node_cpu_here(spec))?;
    locked.update_facts(|f| {
        f.release_version = Some(version.clone());
        f.release_image = Some(release_image.clone());
        f.openshift_install = Some(tools.openshift_install.clone());
        f.oc = Some(tools.oc.clone());
        f.cpu_level = Some(level);
        match artifact {
            Some(crate::release::CoreosKind::LiveIso) => f.coreos_iso = iso.map(|i| i.path),
            Some(_) => f.coreos_image = Some(qcow2.path),
            None => {}
        }
    })?;
    Ok(Some(format!(
        "rehearsal: the stand-in installer {} ({version}, {release_image}), {cpu}",
        tools.openshift_install.display()
    )))
}

/// The verified `oc` the release target recorded, fetched again (verified the
/// same way) when the cache lost it or an earlier shiftlab did not record it.
pub fn oc(ctx: &Ctx, locked: &mut Locked) -> Result<std::path::PathBuf> {
    use crate::release::{self, Cache, Progress};
    if let Some(p) = locked.facts().oc.clone().filter(|p| p.is_file()) {
        return Ok(p);
    }
    let spec = ctx.spec;
    let (cache, progress) = (Cache::from_env()?, Progress::stderr());
    let oc = match &spec.openshift_install {
        Some(p) => {
            let version = match locked.facts().release_version.clone() {
                Some(v) => v,
                None => release::pin::installer_version(p)?.version,
            };
            agent_oc(spec, &version, &cache, &progress)?
        }
        None => {
            let source = mirror(spec);
            let version = match locked.facts().release_version.clone() {
                Some(version) => crate::spec::Version::Exact { version },
                None => spec.version.clone(),
            };
            release::resolve_verified(
                spec.distribution,
                &version,
                &source,
                &cache,
                &progress,
                spec.release_key.as_deref(),
            )?
            .tools(&cache)?
            .oc
        }
    };
    locked.update_facts(|f| f.oc = Some(oc.clone()))?;
    Ok(oc)
}

/// Where the release's files come from: the cluster file's `mirror:`, else the
/// distribution's public mirror.
fn mirror(spec: &crate::spec::ClusterSpec) -> crate::release::Source {
    use crate::release::Source;
    spec.mirror
        .as_deref()
        .map(Source::parse)
        .unwrap_or_else(|| Source::default_for(spec.distribution))
}

/// `oc` for an agent install whose installer the cluster file names:
/// `agent create image` runs `oc adm release info` and `oc image extract`
/// (openshift/installer pkg/asset/agent/image/oc.go), so the release's own
/// client is fetched from the mirror and verified as the installer would be,
/// the installer's version exactly. Without it the install stops here, before
/// the installer runs, saying how to provide it.
fn agent_oc(
    spec: &crate::spec::ClusterSpec,
    version: &str,
    cache: &crate::release::Cache,
    progress: &crate::release::Progress,
) -> Result<std::path::PathBuf> {
    use crate::release::{self, Source};
    let source = mirror(spec);
    let exact = crate::spec::Version::Exact {
        version: version.to_string(),
    };
    let client = release::resolve_client(
        spec.distribution,
        &exact,
        &source,
        cache,
        progress,
        spec.release_key.as_deref(),
    )
    .and_then(|c| c.oc(cache));
    client.map_err(|e| {
        let (_, tarball) = release::tarball_names(version);
        anyhow::anyhow!(
            "method agent needs `oc` for `openshift-install agent create image` (it runs `oc adm release info` and `oc image extract`), \
             and `openshift_install:` names a local installer, so shiftlab fetches the client of its release {version} from the mirror: {e:#}. \
             Set `mirror:` to a mirror that holds {tarball} with its sha256sum.txt and release.txt \
             (an http(s):// URL, or a local directory laid out as {}), or leave `openshift_install:` out so the release target fetches both",
            Source::Dir("<dir>".into()).release_dir(spec.distribution, version)
        )
    })
}

/// Which CoreOS artifact the release target fetches for `flow`: ISO installs
/// (sno, agent) boot the live ISO and install to an empty disk; IPI none (its
/// hosts boot the live ISO Ironic gives them through the BMC, and the
/// installer's bootstrap VM fetches its own); the others the qemu image their
/// disks start from, unless the cluster file gives one (`image_given`).
pub fn coreos_artifact(flow: Flow, image_given: bool) -> Option<crate::release::CoreosKind> {
    use crate::release::CoreosKind;
    match flow {
        Flow::Sno | Flow::Agent => Some(CoreosKind::LiveIso),
        Flow::Ipi => None,
        Flow::Upi | Flow::Lab if image_given => None,
        Flow::Upi | Flow::Lab => Some(CoreosKind::Qemu),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::CoreosKind;

    #[test]
    fn ipi_fetches_no_coreos_artifact() {
        assert_eq!(coreos_artifact(Flow::Ipi, false), None);
        assert_eq!(coreos_artifact(Flow::Ipi, true), None);
        assert_eq!(coreos_artifact(Flow::Upi, false), Some(CoreosKind::Qemu));
        assert_eq!(coreos_artifact(Flow::Upi, true), None);
        assert_eq!(coreos_artifact(Flow::Lab, false), Some(CoreosKind::Qemu));
        for iso in [Flow::Sno, Flow::Agent] {
            assert_eq!(coreos_artifact(iso, false), Some(CoreosKind::LiveIso));
        }
    }
}
