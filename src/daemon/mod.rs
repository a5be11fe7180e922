//! `shiftlab serve`, the host daemon: it serves every cluster of this host from
//! its state, rescanning `<state>/clusters/*/plan.json` every few seconds and on
//! every control request, and converging each cluster's services on its plan.
//! Here: the options and the run (start, the loop, the orderly stop), the
//! runtime and signals a daemon (serve, `shiftlab bmc`) runs on, and one file a
//! concept —
//!
//! - `reconcile.rs` the loop over clusters: converge one, forget one, stop;
//! - `control.rs` the control socket's server side;
//! - `haproxy.rs` one supervised HAProxy per cluster;
//! - `http.rs` the HTTP artifact server;
//! - `host_dns.rs` host DNS for a cluster, `resolver.rs` the `--host-dns local`
//!   responder;
//! - `bmc.rs` the lab's Redfish BMC (method ipi);
//! - `firewall.rs` the host firewall for the nodes;
//! - `nfs.rs` the cluster's NFS export (`storage: nfs`);
//! - `scan.rs` what a scan of the state directory proves;
//! - `web/` the lab's web page (`--web`).
//!
//! What commands call to talk to it, and the records it shares with them (the
//! control protocol, `LbState`, `Endpoints`), are `crate::serve`'s; nothing
//! but the CLI that starts it imports this module.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::{mpsc, oneshot};

mod bmc;
mod control;
mod firewall;
pub mod haproxy;
mod host_dns;
mod host_ntp;
pub mod http;
mod nfs;
mod reconcile;
pub mod resolver;
pub mod scan;
pub mod web;

use self::haproxy::Supervisor;
use self::http::Digests;
use self::resolver::Responder;
use crate::host::dns::{HostDns, Mechanism, Record};
use crate::plan::Plan;
use crate::serve::control::{Request, Response};
use crate::state::StateDir;

/// How serve configures host DNS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostDnsMode {
    /// Detect NetworkManager's dnsmasq, systemd-resolved, else the hosts file.
    Auto,
    Use(Mechanism),
    Off,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub state: StateDir,
    pub http_port: u16,
    pub host_dns: HostDnsMode,
    /// Open the host firewall for the nodes (`--host-firewall auto`).
    pub host_firewall: bool,
    pub scan_interval: Duration,
    /// The lab's web page (`--web`), `None` when off.
    pub web: Option<web::Config>,
    /// Whether failing to bind the web page stops serve (an address given on
    /// the command line) or is only a warning (the default one).
    pub web_required: bool,
    /// Networks the lab BMC may fetch virtual media from besides the
    /// cluster's (`--allow-image-source`).
    pub allow_image_source: Vec<ipnet::IpNet>,
    /// CA the lab BMC verifies image servers against (`--media-ca`).
    pub media_ca: Option<PathBuf>,
}

struct Served {
    identity: String,
    plan: Plan,
    lb: Option<Supervisor>,
    http: Option<http::Listener>,
    http_error: Option<String>,
    dns: Option<Record>,
    /// The lab's Redfish BMC (method ipi).
    bmc: Option<crate::redfish::Server>,
    bmc_error: Option<String>,
    /// The host firewall rules added for the nodes, and when they were checked.
    firewall: Option<crate::host::firewall::Record>,
    firewall_checked: Option<Instant>,
    firewall_error: Option<String>,
    /// The NFS export's server (`storage: nfs`), and why it last failed.
    nfs: Option<nfs::Server>,
    nfs_error: Option<String>,
    /// Why the lab bridge's IPv6 addresses last failed to settle.
    ipv6_error: Option<String>,
}

struct Daemon {
    opts: Options,
    haproxy: PathBuf,
    host: HostDns,
    digests: Arc<Digests>,
    clusters: BTreeMap<String, Served>,
    /// The responder of `--host-dns local`, started with its first cluster.
    resolver: Option<Responder>,
}

/// Run until `shutdown` completes; then stop every HAProxy and listener
/// (host DNS entries stay: they belong to the cluster, not to serve).
pub async fn run(opts: Options, shutdown: impl Future<Output = ()>) -> Result<()> {
    let haproxy = crate::serve::haproxy::binary()?;
    std::fs::create_dir_all(opts.state.clusters())
        .with_context(|| format!("creating {}", opts.state.root.display()))?;
    let sock = opts.state.serve_socket();
    let listener = control::bind(&opts.state)?;
    let (tx, mut rx) = mpsc::channel::<(Request, oneshot::Sender<Response>)>(16);
    let web = match &opts.web {
        None => None,
        Some(cfg) => match web::Server::start(opts.state.clone(), cfg).await {
            Ok(w) => Some(w),
            Err(e) if !opts.web_required => {
                tracing::warn!(error = %format!("{e:#}"), "web page not served (--web ADDR to choose another address, --web off)");
                None
            }
            Err(e) => {
                let _ = std::fs::remove_file(&sock);
                return Err(e);
            }
        },
    };
    let control_task = tokio::spawn(control::accept(listener, tx));
    tracing::info!(state = %opts.state.root.display(), haproxy = %haproxy.display(), control = %sock.display(), "serve started");

    let mut d = Daemon {
        host: HostDns::system(opts.state.host_dns_lock()),
        opts,
        haproxy,
        digests: Arc::new(Digests::default()),
        clusters: BTreeMap::new(),
        resolver: None,
    };
    let mut tick = tokio::time::interval(d.opts.scan_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    // The last scan's error, logged when it changes (not at every scan).
    let mut scan_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tick.tick() => {
                let now = d.reconcile_all().await.err().map(|e| format!("{e:#}"));
                match (&now, &scan_error) {
                    (Some(e), last) if last.as_ref() != Some(e) => {
                        tracing::warn!(error = %e, "scan failed; the clusters stay served as they are (retrying)");
                    }
                    (None, Some(_)) => tracing::info!("scan succeeded again"),
                    _ => {}
                }
                scan_error = now;
            }
            Some((req, reply)) = rx.recv() => {
                let resp = d.handle(req).await;
                let _ = reply.send(resp);
            }
        }
    }
    tracing::info!("serve stopping");
    control_task.abort();
    if let Some(w) = web {
        w.stop().await;
    }
    let names: Vec<String> = d.clusters.keys().cloned().collect();
    for name in names {
        if let Some(s) = d.clusters.remove(&name) {
            d.stop(&name, s, false).await;
        }
    }
    if let Some(r) = d.resolver.take() {
        // Nothing answers at the local address any more: out of resolv.conf
        // (the records stay; serve puts it back when it serves them again).
        r.stop();
        let host = d.host.clone();
        match tokio::task::spawn_blocking(move || host.withdraw_local()).await {
            Ok(Ok(())) => tracing::info!("local dns withdrawn from resolv.conf"),
            Ok(Err(e)) => tracing::warn!(error = %format!("{e:#}"), "withdrawing local dns"),
            Err(e) => tracing::warn!(error = %e, "withdrawing local dns"),
        }
    }
    let _ = std::fs::remove_file(&sock);
    Ok(())
}

/// [`run`] on its own runtime until SIGTERM or SIGINT: `shiftlab serve`.
pub fn run_until_signal(opts: Options) -> Result<()> {
    runtime()?.block_on(run(opts, shutdown_signal()))
}

/// The runtime a daemon (serve, bmc) runs on, the open-file limit raised
/// first ([`crate::fdlimit`]).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    match crate::fdlimit::raise() {
        Ok(soft) => tracing::debug!(
            open_files = soft,
            connections = crate::fdlimit::connection_budget(soft),
            "open-file limit"
        ),
        Err(e) => tracing::warn!(error = %format!("{e:#}"), "keeping the open-file limit"),
    }
    crate::runtime::daemon()
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
