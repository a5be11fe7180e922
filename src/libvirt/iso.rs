//! A cluster's live ISO on libvirt: one raw volume in the cluster's pool
//! (`<cluster>-live.iso`, uploaded by `apply`), in the CD-ROM drive of every node
//! that boots it, behind the disk in the boot order; ejected and removed once the
//! install is done, so that no later boot can land in the installer again.

use anyhow::{Context, Result};
use virt::sys;

use super::xml::edit;
use super::Host;
use crate::plan::{Boot, Plan};

/// The name of a cluster's live ISO volume in its pool.
pub fn volume_name(cluster: &str) -> String {
    format!("{cluster}-live.iso")
}

/// Empty the CD-ROM drive of every ISO node (its definition, and the running
/// domain), then remove the ISO volume. Returns what changed; nothing when it was
/// done already.
pub fn eject(host: &Host, plan: &Plan) -> Result<Vec<String>> {
    let mut done = Vec::new();
    for node in plan.nodes.iter().filter(|n| n.boot == Boot::Iso) {
        let Some(dom) = host.domain(&node.name)? else {
            continue;
        };
        let xml = dom
            .xml_desc(sys::VIR_DOMAIN_XML_INACTIVE | sys::VIR_DOMAIN_XML_SECURE)
            .with_context(|| format!("reading the definition of {}", node.name))?;
        let (new, emptied) = edit::eject_cdroms(&xml)?;
        if emptied.is_empty() {
            continue;
        }
        host.conn
            .define_domain_xml(&new)
            .with_context(|| format!("redefining {}", node.name))?;
        if dom.is_active()? {
            for device in &emptied {
                dom.update_device_flags(device, sys::VIR_DOMAIN_AFFECT_LIVE)
                    .with_context(|| format!("ejecting the CD-ROM of running {}", node.name))?;
            }
        }
        done.push(format!("ejected the live ISO from {}", node.name));
    }
    if let Some(pool) = host.pool(&plan.libvirt.pool)? {
        let name = volume_name(&plan.cluster);
        if let Some(vol) = Host::volume(&pool, &name)? {
            vol.delete(0)
                .with_context(|| format!("removing volume {name}"))?;
            done.push(format!("removed volume {name}"));
        }
    }
    Ok(done)
}
