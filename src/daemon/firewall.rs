//! The host firewall for a served cluster (`--host-firewall auto`): the nodes
//! reach its load balancer, artifact server, BMC and DNS through it. Rules
//! follow the plan, are checked again now and then, and go with the cluster;
//! what a rule is and how each firewall takes it is `crate::host::firewall`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use super::Daemon;
use crate::host::firewall::{self, Firewall, Openings};
use crate::state::ClusterDir;

/// How often serve checks that the firewall rules are still in place (a
/// `firewall-cmd --reload` drops runtime rules).
const FIREWALL_RECHECK: Duration = Duration::from_secs(60);

impl Daemon {
    /// Let the nodes reach this cluster's services through the host firewall
    /// (`host::firewall`): applied when the plan changes or serve starts, checked
    /// again every [`FIREWALL_RECHECK`]; rules of an older plan are taken away
    /// first. A failure is logged and retried; it does not stop the services.
    pub(super) async fn ensure_firewall(&mut self, name: &str, files: &ClusterDir) {
        if !self.opts.host_firewall {
            return;
        }
        let port = self.opts.http_port;
        let Some(served) = self.clusters.get_mut(name) else {
            return;
        };
        if served
            .firewall_checked
            .is_some_and(|t| t.elapsed() < FIREWALL_RECHECK)
        {
            return;
        }
        served.firewall_checked = Some(Instant::now());
        let http = served.plan.http_address().map(|a| SocketAddr::new(a, port));
        let want = Openings::from_plan(&served.plan, http);
        let old = served.firewall.clone().or_else(|| {
            crate::files::read_json::<firewall::Record>(&files.host_firewall())
                .ok()
                .flatten()
        });
        let path = files.host_firewall();
        let result = tokio::task::spawn_blocking(move || -> Result<firewall::Record> {
            let fw = Firewall {
                runner: &firewall::System,
            };
            if let Some(old) = old.filter(|o| o.openings != want) {
                fw.remove(&old)
                    .context("removing the rules of the previous plan")?;
            }
            let record = fw.apply(&want)?;
            crate::files::write_json(&path, &record)?;
            Ok(record)
        })
        .await
        .map_err(|e| anyhow!("host firewall task: {e}"))
        .and_then(|r| r);
        match result {
            Ok(record) => {
                if served.firewall.as_ref() != Some(&record) {
                    tracing::info!(cluster = %name, backend = %record.backend.describe(), rules = record.lines().len(), "host firewall open for the nodes");
                }
                served.firewall = Some(record);
                served.firewall_error = None;
            }
            Err(e) => {
                let msg = format!("{e:#}");
                if served.firewall_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!(cluster = %name, error = %msg, "host firewall (retrying)");
                }
                served.firewall_error = Some(msg);
            }
        }
    }
}

/// Take away the rules added for a cluster being forgotten (`served`: the
/// record serve holds, else the one on disk); the record goes only with them.
pub(super) async fn remove(name: &str, served: Option<firewall::Record>, files: &ClusterDir) {
    let record = served.or_else(|| crate::serve::read_firewall_record(files));
    let Some(record) = record else {
        return;
    };
    let done = tokio::task::spawn_blocking(move || {
        Firewall {
            runner: &firewall::System,
        }
        .remove(&record)
    })
    .await;
    match done {
        Ok(Ok(())) => {
            tracing::info!(cluster = %name, "host firewall rules removed");
            let _ = std::fs::remove_file(files.host_firewall());
        }
        Ok(Err(e)) => {
            tracing::warn!(cluster = %name, error = %format!("{e:#}"), "removing host firewall rules")
        }
        Err(e) => {
            tracing::warn!(cluster = %name, error = %e, "removing host firewall rules")
        }
    }
}
