//! Host DNS for a served cluster, as `--host-dns` chose: the host's own
//! mechanism (NetworkManager's dnsmasq, systemd-resolved, the hosts file;
//! `crate::host::dns`) configured for the cluster's names, or with `local` the
//! daemon's responder ([`super::resolver`]) serving its zone. The entries
//! belong to the cluster: they go when it is forgotten, not when serve stops.

use std::net::SocketAddr;

use anyhow::{anyhow, Result};

use super::resolver::{Responder, Zone};
use super::{Daemon, HostDnsMode};
use crate::host::dns::{ClusterDns, Mechanism, Record};
use crate::plan::Plan;
use crate::state::ClusterDir;

impl Daemon {
    /// Whether a resolv.conf rewritten under us (dhclient) lost the local block
    /// of the cluster: then it is configured again.
    pub(super) fn local_dns_lost(&self, name: &str) -> bool {
        self.clusters
            .get(name)
            .and_then(|s| s.dns.as_ref())
            .is_some_and(|r| r.mechanism == Mechanism::LocalDns && !self.host.is_configured(r))
    }

    /// Configure host DNS for a served cluster's plan. A failure of the host's
    /// DNS goes into `result` unless an earlier one is there (it is reported,
    /// the other services go on); the error returned is failing to record
    /// what was configured.
    pub(super) async fn ensure_dns(
        &mut self,
        name: &str,
        plan: &Plan,
        files: &ClusterDir,
        result: &mut Result<()>,
    ) -> Result<()> {
        let mode = self.opts.host_dns;
        let local = mode == HostDnsMode::Use(Mechanism::LocalDns);
        if local {
            // The responder answers before resolv.conf names it.
            if self.resolver.is_none() {
                let addr = SocketAddr::from((crate::host::dns::LOCAL_DNS_ADDR, 53));
                match Responder::start(addr).await {
                    Ok(r) => self.resolver = Some(r),
                    Err(e) => {
                        tracing::warn!(cluster = %name, error = %format!("{e:#}"), "local dns");
                        if result.is_ok() {
                            *result = Err(e.context("host dns (local responder)"));
                        }
                    }
                }
            }
            if let Some(r) = &self.resolver {
                r.set(name, Some(Zone::from_plan(plan)));
            }
        }
        if mode == HostDnsMode::Off || (local && self.resolver.is_none()) {
            return Ok(());
        }
        let host = self.host.clone();
        let c = ClusterDns::from_plan(plan);
        let applied = tokio::task::spawn_blocking(move || {
            let requested = match mode {
                HostDnsMode::Use(m) => Some(m),
                _ => None,
            };
            let (mech, note) =
                crate::host::dns::choose(requested, || host.detect(), c.link_owned, &c.link);
            host.apply(&c, mech).map(|r| Record { note, ..r })
        })
        .await
        .map_err(|e| anyhow!("host dns task: {e}"))
        .and_then(|r| r);
        let Some(served) = self.clusters.get_mut(name) else {
            return Ok(());
        };
        match applied {
            Ok(record) => {
                if served.dns.as_ref() != Some(&record) {
                    tracing::info!(cluster = %name, mechanism = record.mechanism.as_str(), "host dns configured");
                    if let Some(n) = &record.note {
                        tracing::warn!(cluster = %name, "{n}");
                    }
                }
                crate::files::write_json(&files.host_dns(), &record)?;
                served.dns = Some(record);
            }
            Err(e) => {
                tracing::warn!(cluster = %name, error = %format!("{e:#}"), "host dns");
                if local {
                    // Refused (resolv.conf changed under us): not retried at
                    // every scan, only with the next plan change or notify.
                    served.dns = None;
                }
                if result.is_ok() {
                    *result = Err(e.context("host dns"));
                }
            }
        }
        Ok(())
    }

    /// Withdraw a forgotten cluster's zone and its host DNS entries (`served`:
    /// the record serve holds, else the one on disk).
    pub(super) async fn remove_dns(&self, name: &str, served: Option<Record>, files: &ClusterDir) {
        if let Some(r) = &self.resolver {
            r.set(name, None);
        }
        let record = served.or_else(|| crate::serve::read_dns_record(files));
        let Some(record) = record else {
            return;
        };
        let host = self.host.clone();
        // The record goes only with the entries: else destroy tries again.
        match tokio::task::spawn_blocking(move || host.remove(&record)).await {
            Ok(Ok(())) => {
                tracing::info!(cluster = %name, "host dns removed");
                let _ = std::fs::remove_file(files.host_dns());
            }
            Ok(Err(e)) => {
                tracing::warn!(cluster = %name, error = %format!("{e:#}"), "removing host dns")
            }
            Err(e) => tracing::warn!(cluster = %name, error = %e, "removing host dns"),
        }
    }
}
