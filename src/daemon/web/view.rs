//! What the web page shows, gathered from the state, libvirt and HAProxy: the
//! overview row of each cluster, and a cluster's full view — `shiftlab status
//! -o json`'s [`crate::cluster::Status`] itself (flattened in, one function for
//! both), plus the plan facts the picture of the lab needs and each node's
//! console log tail. Blocking (libvirt, files): called on a blocking thread.

use std::collections::BTreeMap;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::cluster::Status;
use crate::install::state::InstallStatus;
use crate::libvirt::Host;
use crate::plan::{DnsRecord, Plan};
use crate::redact::Redactor;
use crate::state::{ClusterDir, StateDir};

/// Bytes read from the end of a console log.
const TAIL_BYTES: u64 = 8192;
/// Lines of a console log the page shows.
const TAIL_LINES: usize = 30;

/// One cluster of the overview.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterRow {
    pub cluster: String,
    pub method: String,
    pub distribution: String,
    pub version: String,
    /// Nodes whose domain runs, of all the cluster's domains.
    pub nodes_running: usize,
    pub nodes_total: usize,
    pub install: Option<Progress>,
    /// Why part of the row is unknown (libvirt unreachable, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How far the install is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
    /// The target running now (started, not done).
    pub running: Option<String>,
}

impl Progress {
    pub fn of(i: &InstallStatus) -> Progress {
        Progress {
            done: i.targets.iter().filter(|t| t.status == "done").count(),
            total: i.targets.len(),
            running: i
                .targets
                .iter()
                .find(|t| t.status == "started")
                .map(|t| t.target.clone()),
        }
    }
}

/// `/api/clusters`.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    pub clusters: Vec<ClusterRow>,
}

/// `/api/clusters/NAME`: the status, then what the page adds to it.
#[derive(Debug, Serialize)]
pub struct ClusterView {
    #[serde(flatten)]
    pub status: Status,
    pub lab: Lab,
    pub consoles: Vec<ConsoleTail>,
    /// The page has no token: console logs are not shown (any local user can
    /// reach a loopback page, and a console shows what a node prints).
    pub consoles_withheld: bool,
    /// The cluster's own view of itself, through its admin kubeconfig.
    pub health: super::health::Panel,
}

/// The plan facts of the picture of the lab (the plan holds no secret).
#[derive(Debug, Clone, Serialize)]
pub struct Lab {
    pub method: String,
    pub distribution: String,
    pub version: String,
    pub cluster_domain: String,
    pub network: NetworkView,
    pub api_vip: IpAddr,
    pub ingress_vip: IpAddr,
    pub dns: Vec<DnsRecord>,
    /// The lab BMC's endpoint and user (method ipi), never its password.
    pub bmc: Option<BmcView>,
    /// The admin kubeconfig's path, once the installer wrote it.
    pub kubeconfig: Option<PathBuf>,
    /// `export KUBECONFIG=…` of that path, quoted for a shell.
    pub kubeconfig_export: Option<String>,
    /// The API's URL, as the installer's kubeconfig names it.
    pub api_url: String,
    /// `oc login` as the lab's first admin user, else kubeadmin (which
    /// `shiftlab users NAME remove kubeadmin` may have removed), without the
    /// password (the page shows none).
    pub oc_login: String,
    /// The web console's URL: the one install-complete printed, else where it
    /// will be.
    pub console_url: String,
    pub health_check: HealthCheck,
}

#[derive(Debug, Clone, Serialize)]
pub struct NetworkView {
    pub name: String,
    pub mode: String,
    pub bridge: String,
    pub cidr: String,
    pub gateway: IpAddr,
}

#[derive(Debug, Clone, Serialize)]
pub struct BmcView {
    pub endpoint: String,
    pub username: String,
}

/// HAProxy's health checks: a failing backend is DOWN after `fall` checks
/// `inter_s` apart.
#[derive(Debug, Clone, Serialize)]
pub struct HealthCheck {
    pub inter_s: u32,
    pub fall: u32,
    pub rise: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConsoleTail {
    pub node: String,
    pub path: Option<String>,
    pub lines: Vec<String>,
}

/// Who the page's `oc login` names: the first cluster-admin of the lab's users
/// (`users:`, `shiftlab users add --admin`), else kubeadmin.
fn login_user(cluster: &ClusterDir) -> String {
    crate::install::users::read_record(&cluster.users())
        .ok()
        .and_then(|r| r.into_iter().find(|u| u.admin))
        .map_or_else(|| "kubeadmin".to_string(), |u| u.name)
}

impl Lab {
    pub fn of(plan: &Plan, cluster: &ClusterDir, install: Option<&InstallStatus>) -> Lab {
        let kubeconfig = cluster.assets().kubeconfig();
        Lab {
            method: plan.method.to_string(),
            distribution: plan.distribution.clone(),
            version: install
                .and_then(|i| i.facts.release_version.clone())
                .unwrap_or_else(|| plan.version.clone()),
            cluster_domain: plan.cluster_domain.clone(),
            network: NetworkView {
                name: plan.network.name.clone(),
                mode: format!("{:?}", plan.network.mode).to_lowercase(),
                bridge: plan.network.bridge.clone(),
                cidr: plan
                    .network
                    .subnets()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                gateway: plan.network.host_ip(),
            },
            api_vip: plan.vips.api_ip(),
            ingress_vip: plan.vips.ingress_ip(),
            dns: plan.dns.clone(),
            bmc: plan.bmc.as_ref().map(|b| BmcView {
                endpoint: b.endpoint.clone(),
                username: b.username.clone(),
            }),
            kubeconfig_export: kubeconfig.is_file().then(|| {
                crate::cluster::access::env_line(&kubeconfig)
                    .trim_end()
                    .to_string()
            }),
            kubeconfig: kubeconfig.is_file().then_some(kubeconfig),
            api_url: api_url(&plan.cluster_domain),
            oc_login: format!(
                "oc login -u {} {}",
                login_user(cluster),
                api_url(&plan.cluster_domain)
            ),
            console_url: install
                .and_then(|i| i.facts.console.clone())
                .unwrap_or_else(|| {
                    format!(
                        "https://console-openshift-console.apps.{}",
                        plan.cluster_domain
                    )
                }),
            health_check: HealthCheck {
                inter_s: crate::render::haproxy::CHECK_INTER_S,
                fall: crate::render::haproxy::CHECK_FALL,
                rise: crate::render::haproxy::CHECK_RISE,
            },
        }
    }
}

/// `https://api.<cluster domain>:6443`, the server of the installer's admin
/// kubeconfig (openshift/installer pkg/asset/kubeconfig/admin.go).
fn api_url(cluster_domain: &str) -> String {
    format!("https://api.{cluster_domain}:6443")
}

/// The libvirt connections of one gathering, one per URI.
#[derive(Default)]
pub struct Hosts {
    open: BTreeMap<String, Host>,
}

impl Hosts {
    /// The cluster's host: the URI its ledger recorded, else its plan's.
    fn of(&mut self, cluster: &ClusterDir, plan: &Plan) -> Result<&Host> {
        let uri = crate::cluster::host_uri(cluster, None, Some(&plan.libvirt.uri))?;
        if !self.open.contains_key(&uri) {
            let host = Host::open(&uri)?;
            self.open.insert(uri.clone(), host);
        }
        Ok(&self.open[&uri])
    }
}

/// The plan a cluster's page shows: the one serve works from (`plan.json`,
/// written by `infra`), else the one the install recorded before its first
/// target. `None`: neither, no cluster to show.
fn lab_plan(files: &ClusterDir) -> Option<Result<Plan>> {
    // A plan that cannot even be looked at is shown as its error.
    if files.has_plan().unwrap_or(true) {
        Some(files.read_plan())
    } else if files.install_plan().is_file() {
        Some(crate::state::read_plan_file(&files.install_plan()))
    } else {
        None
    }
}

/// Every cluster with a plan (or an install under way), in name order.
pub fn overview(state: &StateDir) -> Overview {
    let mut hosts = Hosts::default();
    let dirs = state.cluster_dirs().unwrap_or_else(|e| {
        tracing::warn!(error = %format!("{e:#}"), "listing the clusters for the page");
        Vec::new()
    });
    let clusters = dirs
        .into_iter()
        .filter(|c| c.has_plan().unwrap_or(true) || c.install_plan().is_file())
        .map(|c| row(state, &mut hosts, c.name()))
        .collect();
    Overview { clusters }
}

fn row(state: &StateDir, hosts: &mut Hosts, name: &str) -> ClusterRow {
    let files = state.cluster(name);
    let mut r = ClusterRow {
        cluster: name.to_string(),
        method: String::new(),
        distribution: String::new(),
        version: String::new(),
        nodes_running: 0,
        nodes_total: 0,
        install: None,
        error: None,
    };
    let plan = match lab_plan(&files).unwrap_or_else(|| files.read_plan()) {
        Ok(p) => p,
        Err(e) => {
            r.error = Some(format!("{e:#}"));
            return r;
        }
    };
    r.method = plan.method.to_string();
    r.distribution = plan.distribution.clone();
    r.version = plan.version.clone();
    r.nodes_total = plan.nodes.len();
    match crate::install::status(&files) {
        Ok(i) => {
            if let Some(v) = i.as_ref().and_then(|i| i.facts.release_version.clone()) {
                r.version = v;
            }
            r.install = i.as_ref().map(Progress::of);
        }
        Err(e) => r.error = Some(format!("{e:#}")),
    }
    let libvirt = hosts
        .of(&files, &plan)
        .and_then(|h| crate::libvirt::inspect::status(h, name));
    match libvirt {
        Ok(Some(s)) => {
            r.nodes_total = s.nodes.len();
            r.nodes_running = s.nodes.iter().filter(|n| n.state == "running").count();
        }
        Ok(None) => {}
        Err(e) => r.error = Some(format!("{e:#}")),
    }
    r
}

/// The full view of one cluster, with console tails redacted by `consoles`
/// (none without it) and the health panel as read. `Ok(None)` when it has no
/// plan.
pub fn cluster(
    state: &StateDir,
    name: &str,
    consoles: Option<&Redactor>,
    health: super::health::Panel,
) -> Result<Option<ClusterView>> {
    let files = state.cluster(name);
    let Some(plan) = lab_plan(&files) else {
        return Ok(None);
    };
    let plan = plan?;
    let status = crate::cluster::status(state, &files, None)?;
    let tails = consoles
        .map(|r| {
            status
                .infra
                .nodes
                .iter()
                .map(|n| ConsoleTail {
                    node: n.name.clone(),
                    path: n.console_log.clone(),
                    lines: n
                        .console_log
                        .as_deref()
                        .map(|p| tail(Path::new(p), r).unwrap_or_default())
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Some(ClusterView {
        lab: Lab::of(&plan, &files, status.install.as_ref()),
        status,
        consoles: tails,
        consoles_withheld: consoles.is_none(),
        health,
    }))
}

/// The last lines of a console log, printable: terminal escapes and control
/// characters removed (a serial console is full of them), redacted as one text
/// (a key block spans lines; one cut by the window goes too).
pub fn tail(path: &Path, r: &Redactor) -> Result<Vec<String>> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = f.metadata()?.len();
    let from = len.saturating_sub(TAIL_BYTES);
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::new();
    f.take(TAIL_BYTES).read_to_end(&mut buf)?;
    let mut text = strip_escapes(&String::from_utf8_lossy(&buf));
    if from > 0 {
        // Cut in the middle: the partial first line goes before redacting.
        text = text.split_once('\n').map_or("", |(_, t)| t).to_string();
    }
    let text = r.redact(&text);
    let mut lines: Vec<String> = text.split('\n').map(|l| l.trim_end().to_string()).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let skip = lines.len().saturating_sub(TAIL_LINES);
    Ok(lines.split_off(skip))
}

/// Text without ANSI escape sequences and control characters (tabs kept; a
/// carriage return ends what it overwrote).
fn strip_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                // CSI: parameters, then a final byte in @..~
                Some('[') => {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ST
                Some(']') => {
                    chars.next();
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {
                    chars.next();
                }
            },
            '\r' => {
                if chars.peek() != Some(&'\n') {
                    // A bare CR returns to the line's start: keep what follows.
                    if let Some(nl) = out.rfind('\n') {
                        out.truncate(nl + 1);
                    } else {
                        out.clear();
                    }
                }
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_escapes_and_controls_go() {
        let s = "\u{1b}[0;32m  OK  \u{1b}[0m Started x\r\nline\u{7}2\nprogress 10%\rprogress 99%\n\u{1b}]0;title\u{7}end";
        assert_eq!(
            strip_escapes(s),
            "  OK   Started x\nline2\nprogress 99%\nend"
        );
    }

    #[test]
    fn tail_keeps_the_last_whole_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.log");
        let text: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, text).unwrap();
        let t = tail(&p, &Redactor::default()).unwrap();
        assert_eq!(t.len(), TAIL_LINES);
        assert_eq!(t.last().unwrap(), "line 1999");
        assert_eq!(t[0], format!("line {}", 2000 - TAIL_LINES));
        std::fs::write(&p, "a\n\n").unwrap();
        assert_eq!(
            tail(&p, &Redactor::default()).unwrap(),
            vec!["a".to_string()]
        );
    }

    #[test]
    fn progress_names_the_running_target() {
        let i = InstallStatus {
            flow: None,
            targets: vec![
                target("release", "done"),
                target("infra", "started"),
                target("workers", "pending"),
            ],
            facts: Default::default(),
        };
        assert_eq!(
            Progress::of(&i),
            Progress {
                done: 1,
                total: 3,
                running: Some("infra".into())
            }
        );
    }

    fn target(t: &str, s: &str) -> crate::install::state::TargetStatus {
        crate::install::state::TargetStatus {
            target: t.into(),
            status: s.into(),
            at: None,
            started: None,
            finished: None,
            note: None,
        }
    }
}
