//! The serve loop: rescan `<state>/clusters/*/plan.json` every few seconds and
//! on every control request, and converge each cluster's services on its
//! plan — start, reload, or stop HAProxy, bind or unbind the HTTP listener,
//! configure or remove host DNS, open or close the host firewall for the nodes.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{SocketAddr, SocketAddrV4};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};

pub mod haproxy;
pub mod http;
pub mod resolver;
pub mod scan;
pub mod web;

use self::haproxy::{Applied, Supervisor};
use self::http::Digests;
use self::resolver::{Responder, Zone};
use self::scan::Presence;
use crate::host::dns::{ClusterDns, HostDns, Mechanism, Record};
use crate::host::firewall::{self, Firewall, Openings};
use crate::plan::Plan;
use crate::serve::control::{self, Request, Response};

use crate::serve::{http_address, is_retired, read_dns_record, render_haproxy, Endpoints};
use crate::state::{ClusterDir, StateDir};

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

/// How often serve checks that the firewall rules are still in place (a
/// `firewall-cmd --reload` drops runtime rules).
const FIREWALL_RECHECK: Duration = Duration::from_secs(60);

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
    firewall: Option<firewall::Record>,
    firewall_checked: Option<Instant>,
    firewall_error: Option<String>,
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
    if control::request(&opts.state, &Request::Ping)?.is_some() {
        bail!("serve is already running for {}", opts.state.root.display());
    }
    let _ = std::fs::remove_file(&sock);
    let listener =
        UnixListener::bind(&sock).with_context(|| format!("binding {}", sock.display()))?;
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("restricting {}", sock.display()))?;
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
    let control_task = tokio::spawn(accept_control(listener, tx));
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

/// Control connections served at once; more are closed at once (the CLI
/// sends one request per connection, a handful at a time).
const CONTROL_MAX: usize = 32;
/// How long a control client has to send its request line, and to take the answer.
const CONTROL_IO_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request line read (a request is a few dozen bytes).
const CONTROL_MAX_LINE: u64 = 64 * 1024;

async fn accept_control(
    listener: UnixListener,
    tx: mpsc::Sender<(Request, oneshot::Sender<Response>)>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONTROL_MAX));
    let mut refusals = crate::httpd::RefusalLog::default();
    let mut errors = crate::httpd::RefusalLog::default();
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                if let Some(n) = errors.note(Instant::now(), crate::httpd::REFUSAL_LOG_EVERY) {
                    tracing::warn!(error = %e, errors = n, "accepting on the control socket");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            if let Some(n) = refusals.note(Instant::now(), crate::httpd::REFUSAL_LOG_EVERY) {
                tracing::warn!(
                    refused = n,
                    cap = CONTROL_MAX,
                    "control connections refused over the cap"
                );
            }
            continue;
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let (r, mut w) = stream.into_split();
            let mut line = String::new();
            let mut reader = tokio::io::BufReader::new(r).take(CONTROL_MAX_LINE);
            let read = tokio::time::timeout(CONTROL_IO_TIMEOUT, reader.read_line(&mut line));
            if !matches!(read.await, Ok(Ok(n)) if n > 0) {
                return;
            }
            let resp = match serde_json::from_str::<Request>(&line) {
                Ok(req) => {
                    let (rtx, rrx) = oneshot::channel();
                    if tx.send((req, rtx)).await.is_err() {
                        return;
                    }
                    match rrx.await {
                        Ok(r) => r,
                        Err(_) => return,
                    }
                }
                Err(e) => Response::error(&anyhow!("bad request: {e}"), Vec::new()),
            };
            let mut out = serde_json::to_string(&resp).unwrap_or_default();
            out.push('\n');
            let _ = tokio::time::timeout(CONTROL_IO_TIMEOUT, w.write_all(out.as_bytes())).await;
        });
    }
}

fn file_identity(p: &std::path::Path) -> String {
    std::fs::metadata(p)
        .map(|m| format!("{}:{}:{}.{}", m.dev(), m.ino(), m.mtime(), m.mtime_nsec()))
        .unwrap_or_default()
}

impl Daemon {
    fn served(&self) -> Vec<String> {
        self.clusters.keys().cloned().collect()
    }

    async fn handle(&mut self, req: Request) -> Response {
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

    async fn reconcile_all(&mut self) -> Result<()> {
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
        // A resolv.conf rewritten under us (dhclient) lost the local block: again.
        let local_dns_lost = self
            .clusters
            .get(name)
            .and_then(|s| s.dns.as_ref())
            .is_some_and(|r| r.mechanism == Mechanism::LocalDns && !self.host.is_configured(r));
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
                                result = Err(e.context("host dns (local responder)"));
                            }
                        }
                    }
                }
                if let Some(r) = &self.resolver {
                    r.set(name, Some(Zone::from_plan(&plan)));
                }
            }
            if mode != HostDnsMode::Off && (!local || self.resolver.is_some()) {
                let host = self.host.clone();
                let c = ClusterDns::from_plan(&plan);
                let applied = tokio::task::spawn_blocking(move || {
                    let requested = match mode {
                        HostDnsMode::Use(m) => Some(m),
                        _ => None,
                    };
                    let (mech, note) = crate::host::dns::choose(
                        requested,
                        || host.detect(),
                        c.link_owned,
                        &c.link,
                    );
                    host.apply(&c, mech).map(|r| Record { note, ..r })
                })
                .await
                .map_err(|e| anyhow!("host dns task: {e}"))
                .and_then(|r| r);
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
                            result = Err(e.context("host dns"));
                        }
                    }
                }
            }
        }
        self.ensure_http(name, &files).await?;
        self.ensure_bmc(name, &files).await;
        self.ensure_firewall(name, &files).await;
        result
    }

    /// Let the nodes reach this cluster's services through the host firewall
    /// (`host::firewall`): applied when the plan changes or serve starts, checked
    /// again every [`FIREWALL_RECHECK`]; rules of an older plan are taken away
    /// first. A failure is logged and retried; it does not stop the services.
    async fn ensure_firewall(&mut self, name: &str, files: &ClusterDir) {
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
        let http = http_address(&served.plan).map(|a| SocketAddrV4::new(a, port));
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

    /// Serve the lab's Redfish BMC for an ipi cluster: its own domains only, on the
    /// plan's BMC address (the gateway), TLS with the lab CA, the lab password.
    /// Retried every scan while the address is not on the host yet.
    async fn ensure_bmc(&mut self, name: &str, files: &ClusterDir) {
        let Some(served) = self.clusters.get_mut(name) else {
            return;
        };
        let Some(b) = served.plan.bmc.clone() else {
            if let Some(s) = served.bmc.take() {
                s.shutdown().await;
            }
            return;
        };
        let want = SocketAddr::from((b.address, b.port));
        if served.bmc.as_ref().is_some_and(|s| s.local_addr() == want) {
            return;
        }
        if let Some(s) = served.bmc.take() {
            s.shutdown().await;
        }
        let plan = served.plan.clone();
        let dir = files.bmc_dir();
        let allow = self.opts.allow_image_source.clone();
        let media_ca = self.opts.media_ca.clone();
        let cluster_dir = files.clone();
        let setup = tokio::task::spawn_blocking(move || -> Result<_> {
            use crate::redfish::bmc::{self, Credentials, Systems};
            // The password `create install-config` put into install-config.yaml.
            let password = cluster_dir.lab_bmc_password(None)?;
            bmc::build(bmc::Config {
                listen: want,
                dir,
                systems: match &plan.kubevirt {
                    Some(k) => {
                        Systems::Kubevirt(crate::redfish::machine_kubevirt::KubevirtConfig {
                            kubeconfig: k.kubeconfig.clone(),
                            context: k.context.clone(),
                            namespace: k.namespace.clone(),
                            cluster: plan.cluster.clone(),
                        })
                    }
                    None => Systems::Libvirt {
                        uri: plan.libvirt.uri.clone(),
                        scope: crate::redfish::machine_libvirt::Scope::Cluster(
                            plan.cluster.clone(),
                        ),
                        pool: plan.libvirt.pool.clone(),
                        max_image_bytes: bmc::DEFAULT_MAX_IMAGE_BYTES,
                    },
                },
                credentials: Some(Credentials {
                    user: b.username,
                    password,
                }),
                tls: Some(Vec::new()),
                session_timeout: bmc::DEFAULT_SESSION_TIMEOUT,
                identity: format!("bmc/{}", plan.cluster),
                // images come from the cluster's machine network (Ironic's)
                image_sources: bmc::ImageSources::within(vec![plan.network.cidr.into()], allow),
                media_ca,
            })
        })
        .await
        .map_err(|e| anyhow!("bmc setup task: {e}"))
        .and_then(|r| r);
        let started = match setup {
            Ok(bmc) => bmc.start().await,
            Err(e) => Err(e),
        };
        match started {
            Ok(server) => {
                tracing::info!(cluster = %name, addr = %want, "redfish bmc serving the lab's domains");
                served.bmc = Some(server);
                served.bmc_error = None;
            }
            Err(e) => {
                let msg = format!("{e:#}");
                if served.bmc_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!(cluster = %name, error = %msg, "bmc not served yet (retrying)");
                }
                served.bmc_error = Some(msg);
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
        let want = http_address(&served.plan).map(|a| SocketAddr::from((a, port)));
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

    /// Stop a cluster's services; `forget` also removes its host DNS entries.
    async fn stop(&mut self, name: &str, s: Served, forget: bool) {
        if let Some(sup) = s.lb {
            sup.stop().await;
        }
        if let Some(l) = s.http {
            l.stop().await;
        }
        if let Some(b) = s.bmc {
            b.shutdown().await;
        }
        if forget {
            if let Some(r) = &self.resolver {
                r.set(name, None);
            }
            let files = self.opts.state.cluster(name);
            let record = s.dns.or_else(|| read_dns_record(&files));
            if let Some(record) = record {
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
            let record = s
                .firewall
                .or_else(|| crate::serve::read_firewall_record(&files));
            if let Some(record) = record {
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
            let _ = std::fs::remove_file(files.serve_endpoints());
        }
    }
}
