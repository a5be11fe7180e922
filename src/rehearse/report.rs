//! What a rehearsal proved on this host: the observations the probes made
//! (src/rehearse/probe.rs) judged into rows, each `proven`, `failed` or `not
//! applicable` with its evidence, shown as a table or JSON. Pure: everything
//! here is a function of [`Observations`], so the judgement is tested without a
//! host (tests/rehearsal_report.rs, golden files).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use serde::Serialize;

use crate::plan::{Boot, RecordType};

/// Whether a rehearsal's create that failed in `failed` has a report to show:
/// a rehearsal on libvirt whose VMs were made (infra done, and not the target
/// that failed).
pub fn after_failed(
    cluster: &crate::state::ClusterDir,
    failed: crate::install::target::Target,
) -> bool {
    let (Ok(plan), Ok(Some(status))) = (cluster.read_plan(), crate::install::status(cluster))
    else {
        return false;
    };
    let infra_done = status
        .targets
        .iter()
        .any(|t| t.target == "infra" && t.status == "done");
    plan.rehearsal
        && plan.kubevirt.is_none()
        && infra_done
        && failed != crate::install::target::Target::Infra
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", content = "evidence", rename_all = "kebab-case")]
pub enum Outcome {
    /// It holds; the evidence says what was seen.
    Proven(String),
    /// It does not; what and where.
    Failed(String),
    /// Not part of this method or backend; why.
    NotApplicable(String),
}

impl Outcome {
    fn word(&self) -> &'static str {
        match self {
            Outcome::Proven(_) => "proven",
            Outcome::Failed(_) => "failed",
            Outcome::NotApplicable(_) => "not applicable",
        }
    }

    fn evidence(&self) -> &str {
        match self {
            Outcome::Proven(e) | Outcome::Failed(e) | Outcome::NotApplicable(e) => e,
        }
    }
}

/// One row: a check, what it is about, its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// `dhcp`, `dhcp6`, `resolve6`, `dns`, `lb`, `lb-backends`, `bootstrap-removed`, `firewall`,
    /// `boot`, `bmc`, `vip-api`, `vip-ingress` (`vip-api6`, `vip-ingress6` in a
    /// dual-stack lab), `csr-approval`.
    pub check: &'static str,
    /// The node, DNS name, frontend or host piece it is about.
    pub subject: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The whole report; its JSON is `shiftlab report NAME -o json`'s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub cluster: String,
    pub method: String,
    /// Every row proven or not applicable.
    pub ok: bool,
    pub proven: usize,
    pub failed: usize,
    pub not_applicable: usize,
    pub rows: Vec<Row>,
}

/// A stand-in's report (GET :8000/report, docs/standin.md): every value a string.
pub type StandinReport = BTreeMap<String, String>;

/// One node as the probes saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSeen {
    pub name: String,
    /// `bootstrap`, `ctlplane` or `worker`.
    pub role: String,
    pub mac: String,
    /// The planned address the host reaches it at (IPv6 in an IPv6
    /// single-stack lab).
    pub planned_ip: IpAddr,
    /// The address libvirt's DHCP leased to its MAC, if any.
    pub leased_ip: Option<String>,
    /// A dual-stack lab's planned IPv6 address.
    pub planned_ip6: Option<Ipv6Addr>,
    /// The DHCPv6 lease libvirt holds for its MAC, if it knows one.
    pub leased_ip6: Option<String>,
    /// Whether its domain exists.
    pub exists: bool,
    /// How the plan boots it first.
    pub boot: Boot,
    /// Its stand-in report, or why it could not be read.
    pub report: Result<StandinReport, String>,
    /// sha256 of the Ignition shiftlab gave it through fw_cfg, when readable.
    pub ignition_sha256: Option<String>,
    /// Its `GET :8000/vips` answer (`vips[ api][ ingress][ api6][ ingress6]
    /// <hostname>`), or why not.
    pub vips: Result<String, String>,
    /// Whether the plan gives it a BMC (IPI).
    pub has_bmc: bool,
    /// Why the stand-in Ironic's deployment of it failed (the BMC's
    /// refusal, redacted), as the stand-in kept it; `None` when it did not.
    pub bmc_failure: Option<String>,
}

impl NodeSeen {
    fn is_bootstrap(&self) -> bool {
        self.role == "bootstrap"
    }

    fn router(&self) -> bool {
        matches!(&self.report, Ok(r) if r.get("router").map(String::as_str) == Some("yes"))
    }

    /// Whether its `/vips` answer names the keepalived instance `vip`.
    pub(crate) fn holds(&self, vip: &str) -> bool {
        match &self.vips {
            // `vips api ingress host`: the words between the first and the last.
            Ok(line) => {
                let words: Vec<&str> = line.split_whitespace().collect();
                words.len() > 2 && words[1..words.len() - 1].contains(&vip)
            }
            Err(_) => false,
        }
    }
}

/// One DNS record of the plan and what the lab's dnsmasq answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSeen {
    pub kind: RecordType,
    /// The record's name as planned (`*.apps.<cd>` for the wildcard).
    pub name: String,
    /// The name asked (a name under the wildcard for it).
    pub asked: String,
    pub expected: String,
    /// Who was asked (`192.168.150.1:53`).
    pub server: String,
    /// The answers (addresses, or names without the trailing dot), or the error.
    pub answers: Result<Vec<String>, String>,
    /// Of the bootstrap node, which may be gone.
    pub bootstrap: bool,
}

/// One backend server of a load-balancer frontend, as HAProxy's stats say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSeen {
    pub node: String,
    pub bootstrap: bool,
    /// `UP`, `DOWN`, `removed`, `unknown`…
    pub status: String,
}

/// What answered one request through the load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// `GET /readyz` and the like.
    pub request: String,
    pub status: u16,
    /// The stand-in that answered (its `X-Shiftlab-Standin`), if it said.
    pub node: Option<String>,
}

/// One frontend of serve's load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontendSeen {
    pub name: String,
    pub bind: SocketAddr,
    pub backends: Vec<BackendSeen>,
    pub answer: Result<Answer, String>,
    /// A dual-stack lab's IPv6 VIP for it, and what answered there.
    pub bind6: Option<(SocketAddr, Result<Answer, String>)>,
}

/// What is left of the bootstrap node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapSeen {
    pub name: String,
    pub domain_left: bool,
    pub volumes_left: Vec<String>,
    /// Whether serve took it out of the load balancer.
    pub lb_removed: bool,
}

/// The host firewall openings serve made for the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirewallSeen {
    /// The host filters, and serve recorded no openings (not served yet, or
    /// `--host-firewall off`).
    NotRecorded,
    /// Nothing filters the nodes' traffic to the host now: nothing to open.
    Open { bridge: String },
    /// The host filters; each opening and whether its rule is in place now.
    Checked {
        backend: String,
        openings: Vec<(String, bool)>,
    },
    /// The firewall could not be read.
    Error(String),
}

/// Everything the probes saw of one rehearsal cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observations {
    pub cluster: String,
    pub method: String,
    pub nodes: Vec<NodeSeen>,
    pub dns: Vec<DnsSeen>,
    /// `None` when the plan has no load balancer (the VIPs carry api and ingress).
    pub load_balancer: Option<Vec<FrontendSeen>>,
    /// `None` when the plan has no bootstrap node of shiftlab's.
    pub bootstrap: Option<BootstrapSeen>,
    pub firewall: FirewallSeen,
    /// The install's csr-approval target: `None` when its flow has none, else
    /// its status (`done`, `started`, `pending`).
    pub csr_approval: Option<String>,
}

/// Judge the observations. Pure.
pub fn judge(o: &Observations) -> Report {
    let mut rows = Vec::new();
    // Its domain gone, the bootstrap's own rows no longer apply; whether all of
    // it went is the bootstrap-removed row's.
    let bootstrap_gone = o.bootstrap.as_ref().is_some_and(|b| !b.domain_left);
    rows.extend(o.nodes.iter().filter_map(|n| dhcp_row(n, bootstrap_gone)));
    rows.extend(o.nodes.iter().filter_map(|n| dhcp6_row(n, bootstrap_gone)));
    rows.extend(
        o.nodes
            .iter()
            .filter_map(|n| resolve6_row(n, &o.dns, bootstrap_gone)),
    );
    for d in &o.dns {
        rows.push(dns_row(d, bootstrap_gone));
    }
    let routers: Vec<&str> = o
        .nodes
        .iter()
        .filter(|n| n.router())
        .map(|n| n.name.as_str())
        .collect();
    match &o.load_balancer {
        None => rows.push(Row {
            check: "lb",
            subject: "load balancer".into(),
            outcome: Outcome::NotApplicable(format!(
                "method {} without a load balancer: the VIPs carry api and ingress",
                o.method
            )),
        }),
        Some(fronts) => {
            for f in fronts {
                rows.push(lb_row(&f.name, f.bind, &f.answer, &routers));
                if let Some((bind, answer)) = &f.bind6 {
                    rows.push(lb_row(&f.name, *bind, answer, &routers));
                }
                rows.push(backends_row(f, &routers, &o.nodes));
            }
        }
    }
    rows.push(bootstrap_row(o));
    rows.push(firewall_row(&o.firewall));
    for n in &o.nodes {
        rows.push(boot_row(n, bootstrap_gone));
    }
    for n in &o.nodes {
        rows.push(bmc_row(n, &o.method));
    }
    rows.extend(vip_rows(o, &routers));
    rows.push(Row {
        check: "csr-approval",
        subject: "install".into(),
        outcome: match o.csr_approval.as_deref() {
            None => Outcome::NotApplicable(format!(
                "method {}'s flow approves no CSRs of shiftlab's",
                o.method
            )),
            // The target approves nothing on a rehearsal (csr_approval.rs):
            // done is no proof of approval, only that the flow went through it.
            Some("done") => Outcome::NotApplicable(
                "target csr-approval done, with nothing to approve: stand-in nodes raise no CSRs (no Kubernetes API)".into(),
            ),
            Some(s) => Outcome::Failed(format!("target csr-approval is {s}, not done")),
        },
    });
    let count = |w: &str| rows.iter().filter(|r| r.outcome.word() == w).count();
    let (proven, failed, not_applicable) =
        (count("proven"), count("failed"), count("not applicable"));
    Report {
        cluster: o.cluster.clone(),
        method: o.method.clone(),
        ok: failed == 0,
        proven,
        failed,
        not_applicable,
        rows,
    }
}

fn removed(n: &NodeSeen, bootstrap_gone: bool) -> bool {
    n.is_bootstrap() && bootstrap_gone
}

/// A node's DHCPv4 lease; none in an IPv6 single-stack lab (its `dhcp6` row).
fn dhcp_row(n: &NodeSeen, bootstrap_gone: bool) -> Option<Row> {
    if n.planned_ip.is_ipv6() {
        return None;
    }
    let outcome = if removed(n, bootstrap_gone) {
        Outcome::NotApplicable("removed after bootstrap".into())
    } else {
        match n.leased_ip.as_deref() {
            Some(ip) if ip == n.planned_ip.to_string() => {
                Outcome::Proven(format!("libvirt leased {ip} to {} as planned", n.mac))
            }
            Some(ip) => Outcome::Failed(format!(
                "libvirt leased {ip} to {}, the plan says {}",
                n.mac, n.planned_ip
            )),
            None => Outcome::Failed(format!(
                "no DHCP lease for {} in libvirt's leases (planned {})",
                n.mac, n.planned_ip
            )),
        }
    };
    Some(Row {
        check: "dhcp",
        subject: n.name.clone(),
        outcome,
    })
}

/// A dual-stack lab's node holds its planned IPv6 address: the node's own
/// report says so (it took it by DHCPv6 with its link-layer DUID), and libvirt's
/// lease, when libvirt knows the node's MAC for it, agrees.
fn dhcp6_row(n: &NodeSeen, bootstrap_gone: bool) -> Option<Row> {
    let planned = n.planned_ip6?.to_string();
    let lease = n.leased_ip6.as_deref().filter(|l| *l != planned);
    let held = n
        .report
        .as_ref()
        .map(|r| r.get("ipv6").map(String::as_str).unwrap_or_default());
    let outcome = if removed(n, bootstrap_gone) {
        Outcome::NotApplicable("removed after bootstrap".into())
    } else if let Some(l) = lease {
        Outcome::Failed(format!(
            "libvirt leased {l} to {} by DHCPv6, the plan says {planned}",
            n.mac
        ))
    } else {
        match held {
            Ok(ip) if ip == planned => Outcome::Proven(format!(
                "{} holds {ip} by DHCPv6 as planned{}",
                n.name,
                if n.leased_ip6.is_some() {
                    ", libvirt's lease agrees"
                } else {
                    ""
                }
            )),
            Ok("") => Outcome::Failed(format!(
                "{} took no IPv6 address by DHCPv6 (planned {planned})",
                n.name
            )),
            Ok(ip) => Outcome::Failed(format!("{} holds {ip}, the plan says {planned}", n.name)),
            Err(e) => Outcome::Failed(format!(
                "its report (which says the address it took) could not be read: {e}"
            )),
        }
    };
    Some(Row {
        check: "dhcp6",
        subject: n.name.clone(),
        outcome,
    })
}

/// A dual-stack lab's node resolves over IPv6 itself: the AAAA answers it
/// got for api, api-int and `*.apps`, and the `ip6.arpa` PTR of its own
/// address, from the DNS server DHCPv6 named (its report's `api6`, `api_int6`,
/// `apps6`, `ptr6`, `dns6`), are what the plan's records say. The host asks
/// the same records itself (the `dns` rows); this is the node's view, as an
/// IPv6 client of the lab's dnsmasq.
fn resolve6_row(n: &NodeSeen, dns: &[DnsSeen], bootstrap_gone: bool) -> Option<Row> {
    let planned = n.planned_ip6?;
    let row = |outcome| Row {
        check: "resolve6",
        subject: n.name.clone(),
        outcome,
    };
    if removed(n, bootstrap_gone) {
        return Some(row(Outcome::NotApplicable(
            "removed after bootstrap".into(),
        )));
    }
    let report = match &n.report {
        Ok(r) => r,
        Err(e) => {
            return Some(row(Outcome::Failed(format!(
                "its report (which says what it resolved) could not be read: {e}"
            ))))
        }
    };
    let field = |k: &str| report.get(k).map(String::as_str).unwrap_or_default();
    if field("ipv6").is_empty() {
        // Its dhcp6 row fails for that; this one has nothing to judge.
        return Some(row(Outcome::NotApplicable(
            "it holds no IPv6 address to ask from (its dhcp6 row)".into(),
        )));
    }
    let server = field("dns6");
    if server.is_empty() {
        return Some(row(Outcome::Failed(format!(
            "DHCPv6 named no DNS server to {}",
            n.name
        ))));
    }
    // What the plan's records say; a record the plan lacks is not asked about.
    let aaaa = |kind: RecordType, prefix: &str| {
        dns.iter()
            .find(|d| d.kind == kind && d.name.starts_with(prefix))
            .map(|d| d.expected.clone())
    };
    let own = crate::addressing::reverse_name6(planned);
    let expected = [
        ("api6", "AAAA", aaaa(RecordType::AAAA, "api."), "api"),
        (
            "api_int6",
            "AAAA",
            aaaa(RecordType::AAAA, "api-int."),
            "api-int",
        ),
        (
            "apps6",
            "AAAA",
            aaaa(RecordType::Wildcard6, "*.apps."),
            "*.apps",
        ),
        (
            "ptr6",
            "PTR",
            dns.iter()
                .find(|d| d.kind == RecordType::PTR && d.name == own)
                .map(|d| d.expected.clone()),
            "its address",
        ),
    ];
    let mut wrong = Vec::new();
    let mut right = Vec::new();
    for (key, kind, want, what) in &expected {
        let Some(want) = want else { continue };
        let got = field(key);
        if got.eq_ignore_ascii_case(want) {
            right.push(format!("{what} {kind} {want}"));
        } else if got.is_empty() {
            wrong.push(format!("no {kind} answer for {what} (expected {want})"));
        } else {
            wrong.push(format!("{what} {kind} {got} (expected {want})"));
        }
    }
    let at = format!("[{server}]:53");
    Some(row(if wrong.is_empty() {
        Outcome::Proven(format!(
            "{} asked {at} over IPv6: {}",
            n.name,
            right.join(", ")
        ))
    } else {
        Outcome::Failed(format!(
            "{} asked {at} over IPv6: {}",
            n.name,
            wrong.join("; ")
        ))
    }))
}

fn dns_row(d: &DnsSeen, bootstrap_gone: bool) -> Row {
    let kind = match d.kind {
        RecordType::A | RecordType::Wildcard => "A",
        RecordType::AAAA | RecordType::Wildcard6 => "AAAA",
        RecordType::PTR => "PTR",
    };
    let asked = if d.asked == d.name {
        d.asked.clone()
    } else {
        format!("{} (for {})", d.asked, d.name)
    };
    let outcome = match &d.answers {
        Ok(a) if a.iter().any(|v| v.eq_ignore_ascii_case(&d.expected)) => {
            Outcome::Proven(format!("{} answered {kind} {}", d.server, d.expected))
        }
        _ if d.bootstrap && bootstrap_gone => {
            Outcome::NotApplicable("the bootstrap's, removed after bootstrap".into())
        }
        Ok(a) if a.is_empty() => Outcome::Failed(format!(
            "{} has no {kind} record for {asked}; expected {}",
            d.server, d.expected
        )),
        Ok(a) => Outcome::Failed(format!(
            "{} answered {kind} {} for {asked}; expected {}",
            d.server,
            a.join(","),
            d.expected
        )),
        Err(e) => Outcome::Failed(format!("asking {} {kind} {asked}: {e}", d.server)),
    };
    Row {
        check: "dns",
        subject: format!("{kind} {}", d.name),
        outcome,
    }
}

fn is_ingress(port: u16) -> bool {
    matches!(port, 80 | 443)
}

fn lb_row(name: &str, bind: SocketAddr, answer: &Result<Answer, String>, routers: &[&str]) -> Row {
    let outcome = match answer {
        Err(e) => Outcome::Failed(format!("through {}: {e}", bind)),
        Ok(a) if a.status != 200 => Outcome::Failed(format!(
            "{} through {} answered {}{}",
            a.request,
            bind,
            a.status,
            a.node
                .as_deref()
                .map(|n| format!(" from {n}"))
                .unwrap_or_default()
        )),
        Ok(Answer { node: None, .. }) => Outcome::Failed(format!(
            "the answer through {} names no stand-in node",
            bind
        )),
        Ok(Answer {
            node: Some(n),
            request,
            ..
        }) if is_ingress(bind.port()) && !routers.contains(&n.as_str()) => {
            Outcome::Failed(format!(
                "{request} through {} reached {n}, which runs no router",
                bind
            ))
        }
        Ok(Answer {
            node: Some(n),
            request,
            status,
        }) => Outcome::Proven(format!("{request} through {} → {status} from {n}", bind)),
    };
    Row {
        check: "lb",
        subject: format!("{name} {bind}"),
        outcome,
    }
}

/// Every backend UP but the removed bootstrap; for ingress, UP exactly on the
/// nodes that run routers (the others are rightly DOWN).
fn backends_row(f: &FrontendSeen, routers: &[&str], nodes: &[NodeSeen]) -> Row {
    let live: Vec<&BackendSeen> = f
        .backends
        .iter()
        .filter(|b| !(b.bootstrap && b.status == "removed"))
        .collect();
    let up: Vec<&str> = live
        .iter()
        .filter(|b| b.status == "UP")
        .map(|b| b.node.as_str())
        .collect();
    let reports_known = nodes.iter().all(|n| n.is_bootstrap() || n.report.is_ok());
    let outcome = if is_ingress(f.bind.port()) && reports_known {
        let mut want: Vec<&str> = live
            .iter()
            .map(|b| b.node.as_str())
            .filter(|n| routers.contains(n))
            .collect();
        want.sort();
        let mut got = up.clone();
        got.sort();
        if want.is_empty() {
            Outcome::Failed("no backend runs a router".into())
        } else if got == want {
            Outcome::Proven(format!("UP: {} (the router nodes)", got.join(", ")))
        } else {
            Outcome::Failed(format!(
                "UP: {}; the router nodes: {}",
                none_if_empty(&got),
                want.join(", ")
            ))
        }
    } else {
        let down: Vec<String> = live
            .iter()
            .filter(|b| b.status != "UP")
            .map(|b| format!("{} {}", b.node, b.status))
            .collect();
        if live.is_empty() {
            Outcome::Failed("no backends".into())
        } else if down.is_empty() {
            Outcome::Proven(format!("UP: {}", up.join(", ")))
        } else {
            Outcome::Failed(format!("not UP: {}", down.join(", ")))
        }
    };
    Row {
        check: "lb-backends",
        subject: f.name.clone(),
        outcome,
    }
}

fn none_if_empty(v: &[&str]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn bootstrap_row(o: &Observations) -> Row {
    let outcome = match &o.bootstrap {
        None => Outcome::NotApplicable(format!(
            "method {} has no bootstrap node of shiftlab's",
            o.method
        )),
        Some(b) => {
            let mut left = Vec::new();
            if b.domain_left {
                left.push(format!("domain {}", b.name));
            }
            for v in &b.volumes_left {
                left.push(format!("volume {v}"));
            }
            if o.load_balancer.is_some() && !b.lb_removed {
                left.push("its load-balancer backends".into());
            }
            if left.is_empty() {
                Outcome::Proven(format!(
                    "no domain or volume of {}{}",
                    b.name,
                    if o.load_balancer.is_some() {
                        ", out of the load balancer"
                    } else {
                        ""
                    }
                ))
            } else {
                Outcome::Failed(format!("still there: {}", left.join(", ")))
            }
        }
    };
    Row {
        check: "bootstrap-removed",
        subject: "bootstrap".into(),
        outcome,
    }
}

fn firewall_row(f: &FirewallSeen) -> Row {
    let outcome = match f {
        FirewallSeen::NotRecorded => {
            Outcome::Failed("the host filters the nodes' traffic, and serve recorded no openings for the cluster (--host-firewall off?)".into())
        }
        FirewallSeen::Open { bridge } => Outcome::NotApplicable(format!(
            "nothing filters traffic from {bridge} to this host: no opening needed"
        )),
        FirewallSeen::Checked { backend, openings } => {
            let missing: Vec<&str> = openings
                .iter()
                .filter(|(_, ok)| !ok)
                .map(|(o, _)| o.as_str())
                .collect();
            if openings.is_empty() {
                Outcome::Failed(format!("{backend} filters, and no opening is recorded"))
            } else if missing.is_empty() {
                Outcome::Proven(format!(
                    "{backend}: {} opening(s) in place: {}",
                    openings.len(),
                    openings
                        .iter()
                        .map(|(o, _)| o.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            } else {
                Outcome::Failed(format!("{backend}: no rule for {}", missing.join(", ")))
            }
        }
        FirewallSeen::Error(e) => Outcome::Failed(format!("reading the host firewall: {e}")),
    };
    Row {
        check: "firewall",
        subject: "host".into(),
        outcome,
    }
}

fn boot_row(n: &NodeSeen, bootstrap_gone: bool) -> Row {
    let (source, how) = match n.boot {
        Boot::DiskFwCfg => ("fw_cfg", "Ignition through fw_cfg"),
        Boot::Iso => ("installed", "the live ISO, installed, then from disk"),
        Boot::VirtualMedia => (
            "installed",
            "the BMC's virtual media, installed, then from disk",
        ),
    };
    let outcome = if removed(n, bootstrap_gone) {
        Outcome::NotApplicable("removed after bootstrap".into())
    } else {
        match &n.report {
            Err(e) => Outcome::Failed(format!("its stand-in report: {e}")),
            Ok(r) => {
                let get = |k: &str| r.get(k).map(String::as_str).unwrap_or("");
                let (boot, src, sha) =
                    (get("boot"), get("ignition_source"), get("ignition_sha256"));
                if boot != "disk" || src != source {
                    Outcome::Failed(format!(
                        "booted {boot:?} with Ignition from {src:?}; expected disk with {source:?} ({how})"
                    ))
                } else {
                    match (&n.ignition_sha256, n.boot) {
                        (Some(want), Boot::DiskFwCfg) if want != sha => Outcome::Failed(format!(
                            "its fw_cfg Ignition has sha256 {sha}, shiftlab gave {want}"
                        )),
                        (Some(_), Boot::DiskFwCfg) => Outcome::Proven(format!(
                            "{how}: booted from disk, the Ignition received is shiftlab's (sha256 {})",
                            short(sha)
                        )),
                        _ => Outcome::Proven(format!(
                            "{how}: booted from disk, Ignition {src}"
                        )),
                    }
                }
            }
        }
    };
    Row {
        check: "boot",
        subject: n.name.clone(),
        outcome,
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// IPI's nodes are powered on, given the ISO and booted by the installer through
/// the BMC alone (the plan's `start: bmc`: shiftlab never starts them): a node
/// running from the disk that ISO installed is the BMC's power, boot and media
/// at work.
fn bmc_row(n: &NodeSeen, method: &str) -> Row {
    let outcome = if !n.has_bmc {
        Outcome::NotApplicable(format!("method {method}: no BMC for this node"))
    } else if let Some(why) = &n.bmc_failure {
        // The installer's Ironic stopped at this node: what the BMC said is
        // the finding, whatever the node shows since.
        Outcome::Failed(format!("the stand-in Ironic's deployment failed: {why}"))
    } else {
        match &n.report {
            Ok(r)
                if r.get("boot").map(String::as_str) == Some("disk")
                    && r.get("ignition_source").map(String::as_str) == Some("installed") =>
            {
                Outcome::Proven(
                    "powered on and booted from virtual media through the BMC alone, installed, up from disk"
                        .into(),
                )
            }
            Ok(r) => Outcome::Failed(format!(
                "booted {:?} with Ignition {:?}: the BMC's virtual-media install did not happen",
                r.get("boot").map(String::as_str).unwrap_or(""),
                r.get("ignition_source").map(String::as_str).unwrap_or("")
            )),
            Err(e) => Outcome::Failed(format!("its stand-in report: {e}")),
        }
    };
    Row {
        check: "bmc",
        subject: n.name.clone(),
        outcome,
    }
}

fn vip_rows(o: &Observations, routers: &[&str]) -> Vec<Row> {
    // keepalived holds VIPs only where no load balancer does: ipi, and agent
    // with VIPs; a single node's api and ingress are its own address.
    let why_not = if o.load_balancer.is_some() {
        Some("serve's load balancer carries api and ingress")
    } else if !matches!(o.method.as_str(), "ipi" | "agent") {
        Some("a single node: api and ingress are its own address, no VIP moves")
    } else {
        None
    };
    if let Some(why) = why_not {
        return ["vip-api", "vip-ingress"]
            .into_iter()
            .map(|check| Row {
                check,
                subject: "keepalived".into(),
                outcome: Outcome::NotApplicable(why.into()),
            })
            .collect();
    }
    let live: Vec<&NodeSeen> = o.nodes.iter().filter(|n| n.exists).collect();
    let unreadable: Vec<String> = live
        .iter()
        .filter_map(|n| n.vips.as_ref().err().map(|e| format!("{}: {e}", n.name)))
        .collect();
    let holders = |vip: &str| -> Vec<&str> {
        live.iter()
            .filter(|n| n.holds(vip))
            .map(|n| n.name.as_str())
            .collect()
    };
    let judge = |vip: &str, fits: &dyn Fn(&str) -> bool, what: &str| -> Outcome {
        let h = holders(vip);
        match h.as_slice() {
            [one] if fits(one) => Outcome::Proven(format!("held by {one}, {what}")),
            [one] => Outcome::Failed(format!("held by {one}, which is not {what}")),
            [] if !unreadable.is_empty() => Outcome::Failed(format!(
                "held by no node that answered; unreadable: {}",
                unreadable.join("; ")
            )),
            [] => Outcome::Failed("held by no node".into()),
            many => Outcome::Failed(format!("held by several nodes: {}", many.join(", "))),
        }
    };
    let role = |name: &str| {
        o.nodes
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.role.as_str())
            .unwrap_or("")
    };
    // A dual-stack lab has a VIP of each family per list, each its own
    // keepalived instance (the stand-ins name the IPv6 ones api6, ingress6).
    let families: &[(&str, &str, &str, &str)] = if dual_stack(&o.nodes) {
        &[
            ("vip-api", "api", "vip-ingress", "ingress"),
            ("vip-api6", "api6", "vip-ingress6", "ingress6"),
        ]
    } else {
        &[("vip-api", "api", "vip-ingress", "ingress")]
    };
    families
        .iter()
        .flat_map(|&(api_check, api, ingress_check, ingress)| {
            [
                Row {
                    check: api_check,
                    subject: "keepalived".into(),
                    outcome: judge(
                        api,
                        &|n| role(n) == "ctlplane",
                        "a control plane (the bootstrap let go)",
                    ),
                },
                Row {
                    check: ingress_check,
                    subject: "keepalived".into(),
                    outcome: judge(ingress, &|n| routers.contains(&n), "a router node"),
                },
            ]
        })
        .collect()
}

/// Whether the plan gives its nodes IPv6 addresses too.
pub(crate) fn dual_stack(nodes: &[NodeSeen]) -> bool {
    nodes.iter().any(|n| n.planned_ip6.is_some())
}

impl Report {
    /// The human form: one line per row, then the tally.
    pub fn table(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.check.to_string(),
                    r.subject.clone(),
                    r.outcome.word().to_string(),
                    r.outcome.evidence().to_string(),
                ]
            })
            .collect();
        let mut s = format!(
            "rehearsal report: cluster {} (method {})\n",
            self.cluster, self.method
        );
        s.push_str(&crate::plan::render_table_rows(
            &["CHECK", "SUBJECT", "RESULT", "EVIDENCE"],
            &rows,
        ));
        s.push_str(&format!(
            "{} proven, {} failed, {} not applicable: {}\n",
            self.proven,
            self.failed,
            self.not_applicable,
            if self.ok {
                "everything that applies holds on this host"
            } else {
                "the rehearsal FAILED"
            }
        ));
        s
    }
}
