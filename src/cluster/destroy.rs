//! `shiftlab destroy cluster`: the host services stopped (HAProxy, host DNS), then
//! every libvirt object shiftlab made for the cluster, then its state.

use anyhow::{Context, Result};

use crate::libvirt::Host;
use crate::state::{ClusterName, StateDir};

/// Destroy `name` on `host`; returns what was removed, in order. The caller holds
/// the cluster's lock (a running install or create holds it too).
pub fn destroy(
    host: &Host,
    state: &StateDir,
    name: &ClusterName,
    purge_images: bool,
) -> Result<Vec<String>> {
    let had_services = state.cluster(name.as_str()).has_plan();
    crate::serve::forget_cluster(state, name.as_str())
        .context("stopping the cluster's host services")?;
    let mut removed = crate::libvirt::destroy::destroy(host, name, state, purge_images)?;
    if had_services {
        removed.insert(
            0,
            format!("host services of {name} (load balancer, HTTP, host DNS)"),
        );
    }
    Ok(removed)
}
