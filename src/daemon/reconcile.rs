//! The daemon's loop over clusters: each scan of the state directory and each
//! control request converges every cluster's services on its plan — its
//! HAProxy (started, reloaded, stopped), its artifact listener and the
//! endpoints record status reads, then host DNS, the lab BMC and the host
//! firewall (their own files) — and stops those of a cluster gone or forgotten.

use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt as _;

use anyhow::{bail, Context, Result};

use super::haproxy::{Applied, Supervisor};
use super::scan::{self, is_retired, Presence};
use super::{http, Daemon, Served};
use crate::serve::control::{Request, Response};
use crate::serve::{render_haproxy, Endpoints};
use crate::state::ClusterDir;

fn file_identity(p: &std::path::Path) -> String {
    std::fs::metadata(p)
        .map(|m| format!("{}:{}:{}.{}", m.dev(), m.ino(), m.mtime(), m.mtime_nsec()))
        .unwrap_or_default()
}

impl Daemon {
    fn served(&self) -> Vec<String> {
        self.clusters.keys().cloned().collect()
    }

    pub(super) async fn handle(&mut self, req: Request) -> Response {
        let result = match &req {
            Request::Ping => Ok(()),
            Request::Reconcile { cluster: None } => self.reconcile_all().await,
            Request::Reconcile {
                cluster: Some(name),
            } => self.reconcile_one(name, true).await,
            Request::Forget { cluster } => {
                self.forget(cluster).await;
                Ok(())
            }
        };
        tracing::debug!(?req, ok = result.is_ok(), "control request");
        match result {
            Ok(()) => Response::ok(self.served()),
            Err(e) => Response::error(&e, self.served()),
        }
    }

    pub(super) async fn reconcile_all(&mut self) -> Result<()> {
        let found = scan::clusters(&self.opts.state);
        for name in scan::gone(&self.served(), &found) {
            tracing::info!(cluster = %name, "cluster gone: stopping its services");
            if let Some(s) = self.clusters.remove(&name) {
                self.stop(&name, s, true).await;
            }
        }
        let found = found.context("scanning the state directory")?;
        let mut errors = Vec::new();
        for (name, presence) in found {
            match presence {
                Presence::Planned => {
                    if let Err(e) = self.reconcile_one(&name, false).await {
                        errors.push(format!("{name}: {e:#}"));
                    }
                }
                Presence::Absent => {}
                Presence::Unknown(e) => errors.push(format!("{name}: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            bail!("{}", errors.join("; "))
        }
    }

    async fn forget(&mut self, name: &str) {
        if let Some(s) = self.clusters.remove(name) {
            tracing::info!(cluster = %name, "forgetting cluster");
            self.stop(name, s, true).await;
        }
    }

    /// Converge one cluster. `force`: re-apply even if nothing changed on disk.
    async fn reconcile_one(&mut self, name: &str, force: bool) -> Result<()> {
        let files = self.opts.state.cluster(name);
        if is_retired(&files).with_context(|| format!("cluster {name}"))? {
            self.forget(name).await;
            return Ok(());
        }
        let identity = format!(
            "{}|{}",
            file_identity(&files.plan()),
            file_identity(&files.lb_state())
        );
        let known = self.clusters.get(name).map(|s| s.identity.clone());
        let local_dns_lost = self.local_dns_lost(name);
        let mut result = Ok(());
        if force || local_dns_lost || known.as_deref() != Some(identity.as_str()) {
            let plan = files
                .read_plan()
                .with_context(|| format!("cluster {name}"))?;
            if known.is_none() {
                tracing::info!(cluster = %name, domain = %plan.cluster_domain, "serving cluster");
            }
            let served = self
                .clusters
                .entry(name.to_string())
                .or_insert_with(|| Served {
                    identity: String::new(),
                    plan: plan.clone(),
                    lb: None,
                    http: None,
                    http_error: None,
                    dns: None,
                    bmc: None,
                    bmc_error: None,
                    firewall: None,
                    firewall_checked: None,
                    firewall_error: None,
                    nfs: None,
                    nfs_error: None,
                    ipv6_error: None,
                });
            // A changed plan (or a forced reconcile) checks the firewall now.
            served.firewall_checked = None;
            served.identity = identity;
            served.plan = plan.clone();
            match render_haproxy(&files, &plan) {
                Some(text) => {
                    let sup = served.lb.get_or_insert_with(|| {
                        Supervisor::spawn(name.to_string(), files.clone(), self.haproxy.clone())
                    });
                    if force {
                        sup.kick().await;
                    }
                    match sup.apply(text).await {
                        Ok(Applied::Unchanged) => {}
                        Ok(a) => tracing::info!(cluster = %name, applied = ?a, "load balancer"),
                        Err(e) => {
                            tracing::warn!(cluster = %name, error = %format!("{e:#}"), "load balancer");
                            result = Err(e.context("load balancer"));
                        }
                    }
                }
                None => {
                    if let Some(sup) = served.lb.take() {
                        sup.stop().await;
                    }
                }
            }
            self.ensure_dns(name, &plan, &files, &mut result).await?;
            super::host_ntp::ensure(name, &plan, &mut result).await;
        }
        self.ensure_ipv6(name).await;
        self.ensure_http(name, &files).await?;
        self.ensure_bmc(name, &files).await;
        self.ensure_firewall(name, &files).await;
        self.ensure_nfs(name, &files).await;
        result
    }

    /// The cluster's NFS export: started, restarted or stopped as its plan
    /// says; a failure is logged (once per distinct error) and retried at
    /// the next scan.
    async fn ensure_nfs(&mut self, name: &str, files: &ClusterDir) {
        let state = self.opts.state.clone();
        let Some(served) = self.clusters.get_mut(name) else {
            return;
        };
        match super::nfs::ensure(&state, files, &served.plan, &mut served.nfs).await {
            Ok(()) => served.nfs_error = None,
            Err(e) => {
                let msg = format!("{e:#}");
                if served.nfs_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!(cluster = %name, error = %msg, "nfs export not served (retrying)");
                }
                served.nfs_error = Some(msg);
            }
        }
    }

    /// The lab bridge's IPv6 addresses usable with no node running
    /// (host::ipv6::settle_plan): libvirt starts the network again, its
    /// addresses tentative, after a host reboot or a `virsh net-start`, and
    /// the artifact listener below and the lab's DNS need them.
    async fn ensure_ipv6(&mut self, name: &str) {
        let Some(served) = self.clusters.get_mut(name) else {
            return;
        };
        let plan = served.plan.clone();
        let done = tokio::task::spawn_blocking(move || crate::host::ipv6::settle_plan(&plan))
            .await
            .map_err(|e| anyhow::anyhow!("ipv6 task: {e}"))
            .and_then(|r| r);
        match done {
            Ok(done) => {
                for d in done {
                    tracing::info!(cluster = %name, "{d}");
                }
                served.ipv6_error = None;
            }
            Err(e) => {
                let msg = format!("{e:#}");
                if served.ipv6_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!(cluster = %name, error = %msg, "lab bridge IPv6 addresses (retrying)");
                }
                served.ipv6_error = Some(msg);
            }
        }
    }

    /// Bind (or rebind) the cluster's artifact listener; retried every scan
    /// while the address is not on the host yet.
    async fn ensure_http(&mut self, name: &str, files: &ClusterDir) -> Result<()> {
        let port = self.opts.http_port;
        let digests = self.digests.clone();
        let Some(served) = self.clusters.get_mut(name) else {
            return Ok(());
        };
        let want = served
            .plan
            .http_address()
            .map(|a| SocketAddr::from((a, port)));
        if served.http.as_ref().map(|l| l.addr) != want || want.is_none() {
            if let Some(l) = served.http.take() {
                l.stop().await;
            }
        }
        if served.http.is_none() {
            if let Some(addr) = want {
                let root = http::Roots::of(files);
                std::fs::create_dir_all(&root.public)
                    .with_context(|| format!("creating {}", root.public.display()))?;
                match http::Listener::start(addr, root, digests).await {
                    Ok(l) => {
                        served.http = Some(l);
                        served.http_error = None;
                    }
                    Err(e) => {
                        let msg = format!("{e:#}");
                        if served.http_error.as_deref() != Some(msg.as_str()) {
                            tracing::warn!(cluster = %name, error = %msg, "http artifacts not served yet (retrying)");
                        }
                        served.http_error = Some(msg);
                    }
                }
            }
        }
        let endpoints = Endpoints {
            http: served.http.as_ref().map(|l| format!("http://{}/", l.addr)),
        };
        let text = serde_json::to_vec_pretty(&endpoints)?;
        if std::fs::read(files.serve_endpoints()).ok().as_deref() != Some(text.as_slice()) {
            crate::files::write_atomic(&files.serve_endpoints(), &text)?;
        }
        Ok(())
    }

    /// Stop a cluster's services; `forget` also removes its host DNS entries and
    /// firewall rules and the endpoints record.
    pub(super) async fn stop(&mut self, name: &str, s: Served, forget: bool) {
        if let Some(sup) = s.lb {
            sup.stop().await;
        }
        if let Some(l) = s.http {
            l.stop().await;
        }
        if let Some(b) = s.bmc {
            b.shutdown().await;
        }
        if let Some(n) = s.nfs {
            n.stop(&self.opts.state.cluster(name)).await;
        }
        if forget {
            let files = self.opts.state.cluster(name);
            self.remove_dns(name, s.dns, &files).await;
            super::firewall::remove(name, s.firewall, &files).await;
            super::host_ntp::remove(name).await;
            let _ = std::fs::remove_file(files.serve_endpoints());
        }
    }
}
