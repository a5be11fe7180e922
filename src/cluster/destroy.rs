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
    let had_services = state.cluster(name.as_str()).has_plan()?;
    crate::serve::forget_cluster(state, name.as_str())
        .context("stopping the cluster's host services")?;
    // The installer's bootstrap VM (IPI) first: it is known by the infraID in
    // the cluster's state, which the rest of destroy removes.
    let bootstrap = crate::install::ipi::remove_bootstrap(host, &state.cluster(name.as_str()))
        .context("removing the installer's bootstrap VM")?;
    // The veth-linked bridge (IPI, external_bridge: veth): the links recorded
    // and aliased as this cluster's, before the NAT bridge goes with the network.
    let links =
        crate::host::veth::remove(name.as_str(), &state.cluster(name.as_str()).host_links())
            .context("removing the veth-linked bridge")?;
    let mut removed = crate::libvirt::destroy::destroy(host, name, state, purge_images)?;
    removed.splice(0..0, links);
    removed.splice(0..0, bootstrap);
    if had_services {
        removed.insert(
            0,
            format!("host services of {name} (load balancer, HTTP, host DNS)"),
        );
    }
    Ok(removed)
}

/// Destroy `name` if its objects are on KubeVirt (its ledger says so): the
/// host services, every object with the owner label, then its state. `None`
/// when the cluster is not recorded on KubeVirt.
///
/// `kubevirt_file`: the cluster file given says `backend: kubevirt`. Without a
/// ledger nothing was ever created on KubeVirt: only the state goes.
pub fn destroy_kubevirt(
    state: &StateDir,
    name: &ClusterName,
    kubevirt_file: bool,
) -> Result<Option<Vec<String>>> {
    let cluster = state.cluster(name.as_str());
    let planned_there =
        cluster.has_plan()? && cluster.read_plan().is_ok_and(|p| p.kubevirt.is_some());
    let mut removed = match crate::backend::kubevirt::destroy_recorded(&cluster)? {
        Some(r) => r,
        None if kubevirt_file || planned_there => Vec::new(),
        None => return Ok(None),
    };
    crate::serve::forget_cluster(state, name.as_str())
        .context("stopping the cluster's host services")?;
    if let Some(dir) = state.remove_cluster(name)? {
        removed.push(format!("state {}", dir.display()));
    }
    Ok(Some(removed))
}
