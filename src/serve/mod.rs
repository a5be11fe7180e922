//! `shiftlab serve`: the host daemon serving every cluster of this host from
//! its state — one HAProxy per cluster, the HTTP artifact server, host DNS —
//! and the library operations other commands call: [`forget_cluster`]
//! (destroy), [`remove_bootstrap`] (the install driver) and
//! [`services_status`] (status).
//!
//! Per-cluster files, all in `<state>/clusters/<cluster>/` so that destroy
//! removes them with the directory:
//!
//! | file | written by | what |
//! |---|---|---|
//! | `plan.json` | create | the plan serve works from |
//! | `lb-state.json` | [`remove_bootstrap`] | whether the bootstrap left the backends |
//! | `haproxy.cfg` | serve | rendered, validated by `haproxy -c` |
//! | `haproxy.pid` | serve | the HAProxy master's pid |
//! | `haproxy.sock` | HAProxy | stats socket (admin, 0600) |
//! | `http/` | the install driver | artifacts served over HTTP |
//! | `host-dns.json` | serve | how host DNS was configured, to undo it |
//! | `serve.json` | serve | the endpoints serve runs for the cluster |
//! | `serve-stopped` | [`forget_cluster`] | serve leaves this plan alone |

pub mod control;
pub mod daemon;
pub mod haproxy;
pub mod http;
pub mod unit;

use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::host::dns::{self, HostDns, Mechanism};
use crate::plan::Plan;
use crate::render;
use crate::spec::NetworkMode;
use crate::state::{ClusterName, StateDir};

/// Default port of the HTTP artifact server on each cluster's address.
pub const DEFAULT_HTTP_PORT: u16 = 8080;

/// The files of one cluster that the host services use.
#[derive(Debug, Clone)]
pub struct ClusterFiles {
    pub name: String,
    pub dir: PathBuf,
}

impl ClusterFiles {
    pub fn new(state: &StateDir, name: &str) -> Self {
        ClusterFiles {
            name: name.to_string(),
            dir: state.cluster(name),
        }
    }
    pub fn plan(&self) -> PathBuf {
        self.dir.join("plan.json")
    }
    pub fn lb_state(&self) -> PathBuf {
        self.dir.join("lb-state.json")
    }
    pub fn haproxy_cfg(&self) -> PathBuf {
        self.dir.join("haproxy.cfg")
    }
    pub fn haproxy_pid(&self) -> PathBuf {
        self.dir.join("haproxy.pid")
    }
    pub fn haproxy_sock(&self) -> PathBuf {
        self.dir.join("haproxy.sock")
    }
    pub fn http_dir(&self) -> PathBuf {
        self.dir.join("http")
    }
    /// Artifacts that carry secrets, served only under `/<token>/`.
    pub fn http_private_dir(&self) -> PathBuf {
        self.dir.join("http-private")
    }
    /// The cluster's HTTP token (0600): the first path segment of private URLs.
    pub fn http_token(&self) -> PathBuf {
        self.dir.join("http-token")
    }
    pub fn http_roots(&self) -> http::Roots {
        http::Roots {
            public: self.http_dir(),
            private: Some(http::Private {
                dir: self.http_private_dir(),
                token_file: self.http_token(),
            }),
        }
    }

    /// Publish an artifact that carries secrets: written 0600 into the private
    /// directory, served at the returned path (`/<token>/<name>`) and nowhere
    /// else. The token is made once per cluster and kept.
    pub fn publish_private(&self, name: &str, bytes: &[u8]) -> Result<String> {
        if http::safe_relative(&format!("/{name}")).is_none() || name.contains('/') {
            bail!("{name:?} is not a file name the HTTP server serves");
        }
        let token = match std::fs::read_to_string(self.http_token()) {
            Ok(t) if t.trim().len() >= http::MIN_TOKEN_LEN => t.trim().to_string(),
            _ => {
                let t = crate::files::random_secret(http::MIN_TOKEN_LEN)?;
                crate::files::write_private(&self.http_token(), format!("{t}\n").as_bytes())?;
                t
            }
        };
        crate::files::write_private(&self.http_private_dir().join(name), bytes)?;
        Ok(format!("/{token}/{name}"))
    }

    /// Withdraw everything published for `node` (`<node>.*`, public or private),
    /// e.g. the bootstrap's once it is removed. Returns the files removed.
    pub fn unpublish_node(&self, node: &str) -> Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        for dir in [self.http_dir(), self.http_private_dir()] {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                let is_node = name
                    .strip_prefix(node)
                    .is_some_and(|rest| rest.starts_with('.'));
                if is_node && e.file_type().is_ok_and(|t| t.is_file()) {
                    std::fs::remove_file(e.path())
                        .with_context(|| format!("removing {}", e.path().display()))?;
                    removed.push(e.path());
                }
            }
        }
        Ok(removed)
    }
    pub fn host_dns(&self) -> PathBuf {
        self.dir.join("host-dns.json")
    }
    pub fn endpoints(&self) -> PathBuf {
        self.dir.join("serve.json")
    }
    pub fn stopped_marker(&self) -> PathBuf {
        self.dir.join("serve-stopped")
    }

    pub fn read_plan(&self) -> Result<Plan> {
        let text = std::fs::read_to_string(self.plan())
            .with_context(|| format!("reading {}", self.plan().display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", self.plan().display()))
    }

    pub fn read_lb_state(&self) -> LbState {
        std::fs::read_to_string(self.lb_state())
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    pub fn read_dns_record(&self) -> Option<dns::Record> {
        let t = std::fs::read_to_string(self.host_dns()).ok()?;
        serde_json::from_str(&t).ok()
    }

    /// Identity of the current `plan.json` (a rewrite gives a new one).
    fn plan_identity(&self) -> Option<String> {
        let m = std::fs::metadata(self.plan()).ok()?;
        Some(format!(
            "{} {} {}.{}",
            m.dev(),
            m.ino(),
            m.mtime(),
            m.mtime_nsec()
        ))
    }

    /// Whether [`forget_cluster`] retired this very `plan.json`. A plan
    /// written again (create after a failed destroy) is served again.
    pub fn is_retired(&self) -> bool {
        match (
            std::fs::read_to_string(self.stopped_marker()),
            self.plan_identity(),
        ) {
            (Ok(m), Some(id)) => m.trim() == id,
            (_, None) => true,
            (Err(_), Some(_)) => false,
        }
    }

    /// The HAProxy configuration for the plan and the persisted LB state.
    pub fn render_haproxy(&self, plan: &Plan) -> Option<String> {
        let sock = self.haproxy_sock();
        render::haproxy::render(
            plan,
            &render::haproxy::Options {
                stats_socket: &sock,
                bootstrap_removed: self.read_lb_state().bootstrap_removed,
            },
        )
    }
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

/// The cluster address the artifact server binds: the host's address on a
/// libvirt network (its gateway), or the load balancer's address on an
/// existing bridge. `None` when the host has no address of its own there.
pub fn http_address(plan: &Plan) -> Option<Ipv4Addr> {
    match plan.network.mode {
        NetworkMode::Nat => Some(plan.network.gateway),
        NetworkMode::Bridge => plan.network.host_addresses.first().copied(),
    }
}

/// The clusters with a plan under `<state>/clusters`, sorted.
pub fn cluster_names(state: &StateDir) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(state.root.join("clusters"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("plan.json").is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        // A directory no shiftlab made (not a cluster name) is not a cluster.
        .filter(|n| crate::spec::is_cluster_name(n))
        .collect();
    names.sort();
    names
}

/// The destroy hook: stop the cluster's HAProxy and HTTP listener and remove
/// its host DNS entries, through a running serve if there is one, else
/// directly. Marks the plan so that serve does not start it again before the
/// directory is gone. Idempotent; fine when nothing runs.
pub fn forget_cluster(state: &StateDir, name: &str) -> Result<()> {
    let checked = ClusterName::parse(name)?;
    let files = ClusterFiles::new(state, name);
    if let Some(id) = files.plan_identity() {
        crate::files::write_atomic(&files.stopped_marker(), format!("{id}\n").as_bytes())?;
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
    let host = HostDns::system(&state.root);
    if let Some(record) = files.read_dns_record() {
        host.remove(&record)
            .with_context(|| format!("removing host dns of {name}"))?;
        let _ = std::fs::remove_file(files.host_dns());
    }
    let _ = std::fs::remove_file(files.endpoints());
    Ok(())
}

/// The install driver's "bootstrap complete": take the bootstrap out of every
/// backend, persistently (`lb-state.json`), validated by `haproxy -c` and
/// applied by a graceful reload.
pub fn remove_bootstrap(state: &StateDir, cluster: &str) -> Result<()> {
    let checked = ClusterName::parse(cluster)?;
    let files = ClusterFiles::new(state, cluster);
    let plan = files.read_plan()?;
    if plan.load_balancer.is_none() {
        bail!("cluster {cluster} has no load balancer");
    }
    crate::files::write_atomic(
        &files.lb_state(),
        &serde_json::to_vec_pretty(&LbState {
            bootstrap_removed: true,
        })?,
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
    let text = files
        .render_haproxy(&plan)
        .context("rendering the load balancer")?;
    haproxy::install_config(&bin, &files, &text)?;
    if let Some(pid) = haproxy::running_pid(&files) {
        let took = haproxy::reload(pid, &files.haproxy_sock())?;
        tracing::info!(%cluster, reload_ms = took.as_secs_f64() * 1000.0, "haproxy reloaded without the bootstrap");
    }
    Ok(())
}

/// Health of one backend server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendStatus {
    pub node: String,
    pub address: SocketAddr,
    pub bootstrap: bool,
    /// HAProxy's status (`UP`, `DOWN`, `MAINT`, …), `removed` for a bootstrap
    /// taken out, `unknown` when HAProxy does not answer.
    pub status: String,
    /// Last check result (`L7OK`, `L4CON`, …), when known.
    pub check: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FrontendStatus {
    pub name: String,
    pub bind: SocketAddr,
    pub backends: Vec<BackendStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LbStatus {
    pub running: bool,
    pub pid: Option<i32>,
    pub config: PathBuf,
    pub bootstrap_removed: bool,
    pub frontends: Vec<FrontendStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpStatus {
    /// `None` when serve is not serving the cluster.
    pub url: Option<String>,
    pub root: PathBuf,
    pub files: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DnsStatus {
    pub mechanism: Option<Mechanism>,
    pub configured: bool,
    /// Why the mechanism is not the host's best one (mode: bridge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub names: Vec<String>,
}

/// What `shiftlab status` shows of the host services of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServicesStatus {
    pub cluster: String,
    pub serve_running: bool,
    pub load_balancer: Option<LbStatus>,
    pub http: HttpStatus,
    pub host_dns: DnsStatus,
}

/// Gather the status of a cluster's host services. Never changes anything.
pub fn services_status(state: &StateDir, cluster: &str) -> Result<ServicesStatus> {
    let files = ClusterFiles::new(state, cluster);
    let plan = files.read_plan()?;
    let lb_state = files.read_lb_state();
    let pid = haproxy::running_pid(&files);
    let stats = pid
        .and_then(|_| haproxy::show_stat(&files.haproxy_sock()).ok())
        .unwrap_or_default();
    let load_balancer = plan.load_balancer.as_ref().map(|lb| LbStatus {
        running: pid.is_some(),
        pid,
        config: files.haproxy_cfg(),
        bootstrap_removed: lb_state.bootstrap_removed,
        frontends: lb
            .frontends
            .iter()
            .map(|f| FrontendStatus {
                name: f.name.clone(),
                bind: SocketAddr::from((f.address, f.port)),
                backends: f
                    .backends
                    .iter()
                    .map(|b| {
                        let row = stats
                            .iter()
                            .find(|r| r.proxy == f.name && r.server == b.node);
                        let status = if b.bootstrap && lb_state.bootstrap_removed {
                            "removed".to_string()
                        } else {
                            row.map(|r| r.status.clone())
                                .unwrap_or_else(|| "unknown".into())
                        };
                        BackendStatus {
                            node: b.node.clone(),
                            address: SocketAddr::from((b.ip, b.port)),
                            bootstrap: b.bootstrap,
                            status,
                            check: row
                                .map(|r| r.check_status.clone())
                                .filter(|c| !c.is_empty()),
                        }
                    })
                    .collect(),
            })
            .collect(),
    });
    let endpoints: Endpoints = std::fs::read_to_string(files.endpoints())
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let http = HttpStatus {
        url: endpoints.http,
        root: files.http_dir(),
        files: http::list_files(&files.http_dir())
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
    };
    let record = files.read_dns_record();
    let host = HostDns::system(&state.root);
    let host_dns = DnsStatus {
        mechanism: record.as_ref().map(|r| r.mechanism),
        configured: record.as_ref().is_some_and(|r| host.is_configured(r)),
        note: record.as_ref().and_then(|r| r.note.clone()),
        names: vec![
            format!("api.{}", plan.cluster_domain),
            format!("*.apps.{}", plan.cluster_domain),
        ],
    };
    let serve_running = matches!(
        control::request(state, &control::Request::Ping),
        Ok(Some(_))
    );
    Ok(ServicesStatus {
        cluster: cluster.to_string(),
        serve_running,
        load_balancer,
        http,
        host_dns,
    })
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
