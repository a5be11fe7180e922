//! The manifests target: `openshift-install create manifests`; the Machine API's
//! objects removed (on UPI the nodes are shiftlab's, not Machines); the lab's
//! manifests (src/render/manifests.rs) and the cluster file's `manifests`
//! directory added.

use anyhow::{Context, Result};

use super::Note;
use crate::install::state::Locked;
use crate::install::{installer, Ctx};

pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    super::install_config::restore(&ctx.cluster)?;
    installer::run(ctx, locked, &["create", "manifests"])?;
    let assets = ctx.cluster.assets();
    let openshift = assets.openshift_manifests();
    if let Ok(rd) = std::fs::read_dir(&openshift) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("99_openshift-cluster-api_master-machines-")
                || name.starts_with("99_openshift-cluster-api_worker-machineset-")
                || name.starts_with("99_openshift-machine-api_master-control-plane-machine-set")
            {
                std::fs::remove_file(e.path())?;
            }
        }
    }
    let mut added = Vec::new();
    // Private from the first byte: the asset directory holds secrets (the
    // users' hashes among them), made 0600 wholesale only at the next installer run.
    for (rel, text) in crate::render::manifests::lab_manifests(ctx.spec, ctx.plan) {
        crate::files::write_private(&assets.file(rel), text.as_bytes())?;
        added.push(rel.to_string());
    }
    // The users' hashes need their passwords (files, generated ones) and a
    // random salt: I/O, beside the pure lab manifests.
    let users = crate::install::users::prepare(&ctx.spec.users, &assets)?;
    crate::install::users::remove_stale(&assets, &users.manifests)?;
    for (rel, text) in users.manifests {
        crate::files::write_private(&assets.file(&rel), text.as_bytes())?;
        added.push(rel);
    }
    crate::install::users::write_record(&ctx.cluster.users(), &users.record)?;
    if let Some(dir) = &ctx.spec.manifests {
        for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let e = e?;
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json") {
                let text = std::fs::read(e.path())?;
                crate::files::write_atomic(&openshift.join(&name), &text)?;
                added.push(format!("openshift/{name}"));
            }
        }
    }
    let lvms = crate::install::lvms::write(ctx.spec, &assets)?;
    let then = lvms.map(|l| format!("; after install-complete: {l}"));
    Ok(Some(format!(
        "added {}{}",
        added.join(", "),
        then.unwrap_or_default()
    )))
}
