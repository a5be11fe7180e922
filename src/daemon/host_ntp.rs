//! `host_ntp: true`: the host's chrony serves a served cluster's subnet
//! (host::chrony), set when the plan changes, taken back when the cluster is
//! forgotten (destroy). A plan without it removes shiftlab's drop-in if one is
//! left from an earlier plan. A failure is reported with the other services'
//! and tried again at the next plan change or forced reconcile.

use anyhow::{anyhow, Result};

use crate::plan::Plan;

/// Make the host's chrony serve the cluster's subnet, or not, as the plan says.
pub(super) async fn ensure(name: &str, plan: &Plan, result: &mut Result<()>) {
    let cluster = name.to_string();
    let (want, subnet) = (plan.network.host_ntp, plan.network.host_cidr());
    let done = tokio::task::spawn_blocking(move || {
        let chrony = crate::host::chrony::system();
        if want {
            chrony.apply(&cluster, subnet)
        } else {
            chrony.remove(&cluster)
        }
    })
    .await
    .map_err(|e| anyhow!("host chrony task: {e}"))
    .and_then(|r| r);
    match done {
        Ok(true) if want => {
            tracing::info!(cluster = %name, subnet = %subnet, "host chrony serves the nodes")
        }
        Ok(true) => tracing::info!(cluster = %name, "host chrony drop-in removed"),
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(cluster = %name, error = %format!("{e:#}"), "host chrony");
            if result.is_ok() {
                *result = Err(e.context("host ntp"));
            }
        }
    }
}

/// Take back a forgotten cluster's drop-in (if shiftlab's).
pub(super) async fn remove(name: &str) {
    let cluster = name.to_string();
    let done = tokio::task::spawn_blocking(move || crate::host::chrony::system().remove(&cluster))
        .await
        .map_err(|e| anyhow!("host chrony task: {e}"))
        .and_then(|r| r);
    match done {
        Ok(true) => tracing::info!(cluster = %name, "host chrony drop-in removed"),
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(cluster = %name, error = %format!("{e:#}"), "removing host chrony drop-in")
        }
    }
}
