//! The small library the commands and install targets use to talk to the host
//! daemon (`shiftlab serve`, `crate::daemon`) and to do without it: [`notify`]
//! it after a change (create, scale), [`forget_cluster`] (destroy),
//! [`remove_bootstrap`] (the install driver), publish artifacts (`http`), read
//! what it recorded ([`read_lb_state`], [`services_status`] for status,
//! `ready` before the install waits on the load balancer), install its systemd
//! unit (`unit`); `control` is the control socket's protocol and client. The
//! records the daemon and its clients share ([`LbState`], [`Endpoints`], the
//! control messages) are defined here and the daemon imports them; nothing
//! here imports the daemon.
//!
//! Its per-cluster files (`plan.json`, `lb-state.json`, `haproxy.*`, `http/`,
//! `http-private/`, `http-token`, `host-dns.json`, `host-firewall.json`, `serve.json`,
//! `serve-stopped`) are named in [`crate::state::ClusterDir`], all inside the
//! cluster's directory so that destroy removes them with it.

pub mod control;
pub mod haproxy;
pub mod http;
pub mod ready;
pub mod status;
pub mod unit;

pub use status::{services_status, ServicesStatus};

use std::os::unix::fs::MetadataExt as _;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::host::dns::{self, HostDns};
use crate::plan::Plan;
use crate::render;
use crate::state::{ClusterDir, ClusterName, StateDir};

/// The cluster's load-balancer state (bootstrap removed or not).
pub fn read_lb_state(cluster: &ClusterDir) -> LbState {
    crate::files::read_json(&cluster.lb_state())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// How serve configured host DNS for the cluster, if it did.
pub fn read_dns_record(cluster: &ClusterDir) -> Option<dns::Record> {
    crate::files::read_json(&cluster.host_dns()).ok().flatten()
}

/// The host firewall rules serve added for the cluster, if it did.
pub fn read_firewall_record(cluster: &ClusterDir) -> Option<crate::host::firewall::Record> {
    crate::files::read_json(&cluster.host_firewall())
        .ok()
        .flatten()
}

/// Identity of the current `plan.json` (a rewrite gives a new one); `None`
/// when there is none. [`forget_cluster`] writes it into `serve-stopped`; the
/// daemon serves no plan of that identity (`crate::daemon::scan::is_retired`).
pub fn plan_identity(cluster: &ClusterDir) -> Result<Option<String>> {
    let m = match std::fs::metadata(cluster.plan()) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(e).with_context(|| format!("inspecting {}", cluster.plan().display()))
        }
    };
    Ok(Some(format!(
        "{} {} {}.{}",
        m.dev(),
        m.ino(),
        m.mtime(),
        m.mtime_nsec()
    )))
}

/// The HAProxy configuration for the plan and the persisted LB state.
pub fn render_haproxy(cluster: &ClusterDir, plan: &Plan) -> Option<String> {
    let sock = cluster.haproxy_sock();
    render::haproxy::render(
        plan,
        &render::haproxy::Options {
            stats_socket: &sock,
            bootstrap_removed: read_lb_state(cluster).bootstrap_removed,
        },
    )
}

/// Load-balancer state that outlives restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LbState {
    pub bootstrap_removed: bool,
}

/// What serve runs for a cluster, as it last wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoints {
    /// `http://<address>:<port>/`
    pub http: Option<String>,
}

/// The destroy hook: stop the cluster's HAProxy and HTTP listener and remove
/// its host DNS entries and host firewall rules, through a running serve if there is one, else
/// directly. Marks the plan so that serve does not start it again before the
/// directory is gone. Idempotent; fine when nothing runs.
pub fn forget_cluster(state: &StateDir, name: &str) -> Result<()> {
    let checked = ClusterName::parse(name)?;
    let files = state.cluster(name);
    if let Some(id) = plan_identity(&files)? {
        crate::files::write_atomic(&files.serve_stopped(), format!("{id}\n").as_bytes())?;
    }
    match control::request(state, &control::Request::Forget { cluster: checked }) {
        Ok(Some(r)) if !r.ok => bail!(
            "serve could not stop cluster {name}: {}",
            r.error.unwrap_or_default()
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %format!("{e:#}"), "asking serve to forget {name}"),
    }
    // Whatever serve did or did not do, nothing of the cluster may keep running.
    haproxy::stop_by_pid_file(&files).with_context(|| format!("stopping haproxy of {name}"))?;
    crate::host::nfs::stop_by_pid_file(&files)
        .with_context(|| format!("stopping the nfs server of {name}"))?;
    // Each record goes only once what it records is undone; one that cannot
    // be read stops here (destroy would otherwise leave the entries behind).
    let host = HostDns::system(state.host_dns_lock());
    let record: Option<dns::Record> = crate::files::read_json(&files.host_dns())
        .with_context(|| format!("removing host dns of {name}"))?;
    if let Some(record) = record {
        host.remove(&record)
            .with_context(|| format!("removing host dns of {name}"))?;
        let _ = std::fs::remove_file(files.host_dns());
    }
    let record: Option<crate::host::firewall::Record> =
        crate::files::read_json(&files.host_firewall())
            .with_context(|| format!("removing the host firewall rules of {name}"))?;
    if let Some(record) = record {
        crate::host::firewall::Firewall {
            runner: &crate::host::firewall::System,
        }
        .remove(&record)
        .with_context(|| format!("removing the host firewall rules of {name}"))?;
        let _ = std::fs::remove_file(files.host_firewall());
    }
    let _ = std::fs::remove_file(files.serve_endpoints());
    Ok(())
}

/// The install driver's "bootstrap complete": take the bootstrap out of every
/// backend, persistently (`lb-state.json`), validated by `haproxy -c` and
/// applied by a graceful reload.
pub fn remove_bootstrap(state: &StateDir, cluster: &str) -> Result<()> {
    let checked = ClusterName::parse(cluster)?;
    let files = state.cluster(cluster);
    let plan = files.read_plan()?;
    if plan.load_balancer.is_none() {
        bail!("cluster {cluster} has no load balancer");
    }
    crate::files::write_json(
        &files.lb_state(),
        &LbState {
            bootstrap_removed: true,
        },
    )?;
    match control::request(
        state,
        &control::Request::Reconcile {
            cluster: Some(checked),
        },
    )? {
        Some(r) if r.ok => return Ok(()),
        Some(r) => bail!(
            "serve could not reload cluster {cluster}: {}",
            r.error.unwrap_or_default()
        ),
        None => {}
    }
    // No serve: apply to the HAProxy that runs, if any; serve reads the same
    // state when it starts.
    let bin = haproxy::binary()?;
    let text = render_haproxy(&files, &plan).context("rendering the load balancer")?;
    haproxy::install_config(&bin, &files, &text)?;
    if let Some(pid) = haproxy::running_pid(&files) {
        let took = haproxy::reload(pid, &files.haproxy_sock())?;
        tracing::info!(%cluster, reload_ms = took.as_secs_f64() * 1000.0, "haproxy reloaded without the bootstrap");
    }
    Ok(())
}

/// Tell a running serve to look at the state now (after create or a plan
/// change). Returns false when no serve is running.
pub fn notify(state: &StateDir, cluster: Option<&str>) -> Result<bool> {
    match control::request(
        state,
        &control::Request::Reconcile {
            cluster: cluster.map(ClusterName::parse).transpose()?,
        },
    )? {
        Some(r) if r.ok => Ok(true),
        Some(r) => bail!("serve: {}", r.error.unwrap_or_default()),
        None => Ok(false),
    }
}
