//! What `shiftlab status` and `shiftlab serve status` show of a cluster's host
//! services: read from the state and HAProxy's stats socket, never changing
//! anything; one human rendering for both.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use super::{control, haproxy, http, read_dns_record, read_lb_state, Endpoints};
use crate::host::dns::{HostDns, Mechanism};
use crate::plan::render_table_rows;
use crate::state::StateDir;

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

/// The host firewall rules serve added for the cluster's nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FirewallStatus {
    /// What filters the host's input (`firewalld`, `ufw`, nftables chains, …).
    pub backend: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Each rule, as the command that added it.
    pub rules: Vec<String>,
}

/// What `shiftlab status` shows of the host services of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServicesStatus {
    pub cluster: String,
    pub serve_running: bool,
    pub load_balancer: Option<LbStatus>,
    pub http: HttpStatus,
    pub host_dns: DnsStatus,
    /// `None` until serve opened the firewall (or with `--host-firewall off`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_firewall: Option<FirewallStatus>,
}

/// Gather the status of a cluster's host services. Never changes anything.
pub fn services_status(state: &StateDir, cluster: &str) -> Result<ServicesStatus> {
    let files = state.cluster(cluster);
    let plan = files.read_plan()?;
    let lb_state = read_lb_state(&files);
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
                bind: SocketAddr::new(f.first_address(), f.port),
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
    let endpoints: Endpoints = crate::files::read_json(&files.serve_endpoints())
        .ok()
        .flatten()
        .unwrap_or_default();
    let http = HttpStatus {
        url: endpoints.http,
        root: files.http_public(),
        files: http::list_files(&files.http_public())
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
    };
    let record = read_dns_record(&files);
    let host = HostDns::system(state.host_dns_lock());
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
        host_firewall: super::read_firewall_record(&files).map(|r| FirewallStatus {
            backend: r.backend.describe(),
            zone: r.zone.clone(),
            rules: r.lines(),
        }),
    })
}

impl ServicesStatus {
    /// The human form: load balancer and its backends, HTTP artifacts, host DNS.
    pub fn table(&self) -> String {
        let mut s = String::new();
        if !self.serve_running {
            s.push_str(
                "shiftlab serve is not running: no load balancer, HTTP server or host DNS updates\n",
            );
        }
        match &self.load_balancer {
            None => s.push_str("load balancer: none in this plan\n"),
            Some(lb) => {
                s.push_str(&format!(
                    "load balancer: {} ({}){}\n",
                    match lb.pid {
                        Some(p) => format!("running, haproxy pid {p}"),
                        None => "stopped".into(),
                    },
                    lb.config.display(),
                    if lb.bootstrap_removed {
                        ", bootstrap removed"
                    } else {
                        ""
                    }
                ));
                let rows: Vec<Vec<String>> = lb
                    .frontends
                    .iter()
                    .flat_map(|f| {
                        f.backends.iter().map(move |b| {
                            vec![
                                f.name.clone(),
                                f.bind.to_string(),
                                b.node.clone(),
                                b.address.to_string(),
                                b.status.clone(),
                                b.check.clone().unwrap_or_else(|| "-".into()),
                            ]
                        })
                    })
                    .collect();
                s.push_str(&render_table_rows(
                    &[
                        "FRONTEND", "LISTEN", "BACKEND", "ADDRESS", "STATUS", "CHECK",
                    ],
                    &rows,
                ));
            }
        }
        s.push_str(&format!(
            "HTTP artifacts: {} ({} files in {})\n",
            self.http.url.as_deref().unwrap_or("not served"),
            self.http.files.len(),
            self.http.root.display()
        ));
        s.push_str(&format!(
            "host DNS: {}{}\n",
            if self.host_dns.configured {
                "configured"
            } else {
                "not configured"
            },
            self.host_dns
                .mechanism
                .map(|m| format!(" via {}", m.as_str()))
                .unwrap_or_default()
        ));
        if let Some(n) = &self.host_dns.note {
            s.push_str(&format!("  ({n})\n"));
        }
        if let Some(f) = &self.host_firewall {
            s.push_str(&format!(
                "host firewall: {}{}, {} rules for the nodes\n",
                f.backend,
                f.zone
                    .as_deref()
                    .map(|z| format!(" (zone {z})"))
                    .unwrap_or_default(),
                f.rules.len()
            ));
        }
        s
    }
}
