//! The manifests target: `openshift-install create manifests` (not on agent,
//! whose installer has none: it reads `openshift/` at `agent create image`);
//! on UPI the Machine API's objects removed (the nodes are shiftlab's, not
//! Machines; IPI's stay: they are its machines); then the lab's manifests
//! (src/install/lab_manifests.rs) added, and with `storage: lvms` the
//! LVMCluster written beside them for after the install (src/install/lvms.rs).

use anyhow::Result;

use super::Note;
use crate::install::state::Locked;
use crate::install::target::Flow;
use crate::install::{installer, Ctx};

pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<Note> {
    let added = make(ctx, locked)?;
    let lvms = crate::install::lvms::write(ctx.spec, &ctx.cluster.assets())?;
    let then = lvms.map(|l| {
        format!("; install-complete applies lvmcluster.yaml through the API (by hand: {l})")
    });
    Ok(Some(format!(
        "added {}{}",
        added.join(", "),
        then.unwrap_or_default()
    )))
}

/// The target's work, also for IPI's start over (src/install/ipi.rs); returns
/// the lab's manifests added.
pub fn make(ctx: &Ctx, locked: &mut Locked) -> Result<Vec<String>> {
    if ctx.flow != Flow::Agent {
        super::install_config::restore(&ctx.cluster)?;
        installer::run(ctx, locked, &["create", "manifests"])?;
    }
    if ctx.flow == Flow::Upi {
        remove_machine_api(&ctx.cluster.assets())?;
    }
    crate::install::lab_manifests::write(ctx)
}

fn remove_machine_api(assets: &crate::state::Assets) -> Result<()> {
    if let Ok(rd) = std::fs::read_dir(assets.openshift_manifests()) {
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
    Ok(())
}
