//! The rehearsal report's probes: what this host shows of a rehearsal cluster
//! now, gathered into [`Observations`] for the pure judgement of
//! [`super::report`]. Every probe asks the real component: libvirt's leases and
//! domains (through `cluster::status`), the lab's dnsmasq over UDP, HTTP through
//! serve's load balancer and to the stand-ins' control port, HAProxy's stats,
//! the host firewall's rules. Changes nothing.

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType as Wire};

use super::report::{
    Answer, BackendSeen, BootstrapSeen, DnsSeen, FirewallSeen, FrontendSeen, NodeSeen,
    Observations, StandinReport,
};
use crate::plan::{Boot, Plan, RecordType};
use crate::spec::Role;
use crate::state::{ClusterName, StateDir};

/// How long one request may take: a stand-in answers at once, a dead one not at all.
const TIMEOUT: Duration = Duration::from_secs(5);
/// More than any answer a stand-in or the dnsmasq gives.
const MAX_BODY: u64 = 64 * 1024;

/// Observe the rehearsal cluster `name`. Refused for a cluster that is not a
/// rehearsal (its nodes have no stand-in report to read) or not on libvirt.
pub fn observe(state: &StateDir, name: &ClusterName) -> Result<Observations> {
    let cluster = state.cluster(name);
    let plan = cluster
        .read_plan()
        .with_context(|| format!("no recorded plan for cluster {name}"))?;
    if !plan.rehearsal {
        bail!(
            "cluster {name} is not a rehearsal (rehearsal: true): the report reads what the stand-in nodes saw; `shiftlab status {name}` shows a real cluster"
        );
    }
    if plan.kubevirt.is_some() {
        bail!(
            "cluster {name} is on KubeVirt: the rehearsal report covers the libvirt backend only"
        );
    }
    let mut status = crate::cluster::status(state, &cluster, None)?;
    // A backend HAProxy is still moving (a node that came back a moment ago:
    // "DOWN 1/2", going up) is judged once its checks settle: asked again, a
    // bounded number of times.
    for _ in 0..10 {
        let moving = status
            .services
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .is_some_and(|lb| {
                lb.frontends
                    .iter()
                    .flat_map(|f| &f.backends)
                    .any(|b| in_transition(&b.status))
            });
        if !moving {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
        status = crate::cluster::status(state, &cluster, None)?;
    }
    let services = status.services.as_ref();
    let lb = services.and_then(|s| s.load_balancer.as_ref());
    let ironic = crate::rehearse::ironic::state_dir(cluster.assets().path());
    let redactor = crate::redact::Redactor::of_cluster(&cluster);
    let running = |name: &str| {
        status
            .infra
            .nodes
            .iter()
            .any(|s| s.name == name && s.state == "running")
    };
    let nodes = plan
        .nodes
        .iter()
        .map(|n| {
            let seen = status.infra.nodes.iter().find(|s| s.name == n.name);
            let exists = seen.is_some();
            let ask = |path: &str| -> Result<String, String> {
                match seen {
                    None => return Err(format!("no domain {}", n.name)),
                    // Nothing answers for a domain that does not run (an IPI
                    // node Ironic never powered on): said, not waited for.
                    Some(s) if s.state != "running" => {
                        return Err(format!("its domain is {}, not running", s.state))
                    }
                    Some(_) => {}
                }
                ask_standin(n.ip, path)
            };
            NodeSeen {
                name: n.name.clone(),
                role: n.role.to_string(),
                mac: n.mac.clone(),
                planned_ip: n.ip,
                leased_ip: seen.and_then(|s| s.leased_ip.clone()),
                planned_ip6: n.ipv6,
                leased_ip6: seen.and_then(|s| s.leased_ip6.clone()),
                exists,
                boot: n.boot,
                report: ask("/report").and_then(|b| parse_report(&b)),
                ignition_sha256: match (n.boot, &n.ignition_volume) {
                    (Boot::DiskFwCfg, Some(v)) => {
                        crate::release::sha256_file(&plan.libvirt.pool_path.join(v)).ok()
                    }
                    _ => None,
                },
                vips: ask("/vips").map(|b| b.trim().to_string()),
                has_bmc: n.bmc.is_some(),
                bmc_failure: n
                    .bmc
                    .as_ref()
                    .and_then(|_| bmc_failure(&ironic, &n.name, &redactor)),
            }
        })
        .collect::<Vec<NodeSeen>>();
    let keepalived = lb.is_none() && matches!(plan.method.to_string().as_str(), "ipi" | "agent");
    let nodes = await_vips(nodes, keepalived, &running);
    let nodes = await_ipv6(nodes, &running);
    let load_balancer = lb.map(|lb| {
        lb.frontends
            .iter()
            .map(|f| FrontendSeen {
                name: f.name.clone(),
                bind: f.bind,
                backends: f
                    .backends
                    .iter()
                    .map(|b| BackendSeen {
                        node: b.node.clone(),
                        bootstrap: b.bootstrap,
                        status: b.status.clone(),
                    })
                    .collect(),
                answer: through_lb(f.bind, &plan.cluster_domain).map_err(|e| format!("{e:#}")),
                // The plan's IPv6 VIP of the frontend serve bound (by name),
                // a dual-stack lab's second bind; an IPv6 single-stack lab's
                // is `bind` itself.
                bind6: plan
                    .load_balancer
                    .as_ref()
                    .and_then(|p| p.frontends.iter().find(|p| p.name == f.name))
                    .filter(|p| p.address.is_some())
                    .and_then(|p| p.address6)
                    .map(|a| {
                        let bind = SocketAddr::from((a, f.bind.port()));
                        let answer = through_lb(bind, &plan.cluster_domain);
                        (bind, answer.map_err(|e| format!("{e:#}")))
                    }),
            })
            .collect()
    });
    let bootstrap = plan
        .nodes
        .iter()
        .find(|n| n.role == Role::Bootstrap)
        .map(|b| BootstrapSeen {
            name: b.name.clone(),
            domain_left: status.infra.nodes.iter().any(|s| s.name == b.name),
            volumes_left: b
                .volumes()
                .filter(|v| plan.libvirt.pool_path.join(v).exists())
                .cloned()
                .collect(),
            lb_removed: lb.is_some_and(|l| l.bootstrap_removed),
        });
    let csr_approval = status.install.as_ref().and_then(|i| {
        i.targets
            .iter()
            .find(|t| t.target == "csr-approval")
            .map(|t| t.status.clone())
    });
    Ok(Observations {
        cluster: plan.cluster.clone(),
        method: plan.method.to_string(),
        nodes,
        dns: dns(&plan),
        load_balancer,
        bootstrap,
        firewall: firewall(&cluster, &plan),
        csr_approval,
    })
}

/// Every DNS record of the plan, asked of the lab network's dnsmasq: a
/// dual-stack lab's IPv6 records (AAAA, `ip6.arpa`) over IPv6, at the host's
/// IPv6 address on the bridge, as an IPv6 client would.
fn dns(plan: &Plan) -> Vec<DnsSeen> {
    // An IPv6 single-stack lab's dnsmasq answers everything over IPv6.
    let server4 = SocketAddr::new(plan.network.host_ip(), 53);
    let server6 = plan
        .network
        .ipv6
        .as_ref()
        .map(|v6| SocketAddr::from((v6.gateway, 53)));
    let node = |name: &str| plan.nodes.iter().find(|n| n.fqdn == name);
    plan.dns
        .iter()
        .map(|r| {
            // A name under the wildcard, as the stand-ins ask (`test.apps.<cd>`).
            let asked = match r.name.strip_prefix("*.") {
                Some(rest) => format!("test.{rest}"),
                None => r.name.clone(),
            };
            let wire = match r.kind {
                RecordType::PTR => Wire::PTR,
                RecordType::A | RecordType::Wildcard => Wire::A,
                RecordType::AAAA | RecordType::Wildcard6 => Wire::AAAA,
            };
            let v6 = matches!(r.kind, RecordType::AAAA | RecordType::Wildcard6)
                || r.name.ends_with(".ip6.arpa");
            let server = server6.filter(|_| v6).unwrap_or(server4);
            let of = match r.kind {
                RecordType::PTR => node(&r.value),
                _ => node(&r.name),
            };
            DnsSeen {
                kind: r.kind,
                name: r.name.clone(),
                asked: asked.clone(),
                expected: r.value.clone(),
                server: server.to_string(),
                answers: query(server, &asked, wire).map_err(|e| format!("{e:#}")),
                bootstrap: of.is_some_and(|n| n.role == Role::Bootstrap),
            }
        })
        .collect()
}

/// One question over UDP: the A or AAAA addresses or PTR names of the answer (no
/// trailing dot); none for NXDOMAIN.
pub fn query(server: SocketAddr, name: &str, kind: Wire) -> Result<Vec<String>> {
    let mut m = Message::query();
    // Any id will do: the answer must carry it back.
    m.metadata.id = std::process::id() as u16 ^ 0x5a17;
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(
        Name::from_ascii(format!("{}.", name.trim_end_matches('.')))
            .with_context(|| format!("{name} is not a DNS name"))?,
        kind,
    ));
    let any = match server {
        SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    };
    let sock = UdpSocket::bind(any).context("a UDP socket")?;
    sock.set_read_timeout(Some(TIMEOUT))?;
    sock.send_to(&m.to_vec()?, server)
        .with_context(|| format!("sending to {server}"))?;
    let mut buf = [0u8; 4096];
    // Bounded: a few stray datagrams at most, each within the timeout.
    for _ in 0..4 {
        let (n, from) = sock
            .recv_from(&mut buf)
            .with_context(|| format!("no answer from {server}"))?;
        let Ok(r) = Message::from_vec(&buf[..n]) else {
            continue;
        };
        if from != server || r.metadata.id != m.metadata.id {
            continue;
        }
        return match r.metadata.response_code {
            ResponseCode::NoError | ResponseCode::NXDomain => Ok(r
                .answers
                .iter()
                .filter_map(|a| match &a.data {
                    RData::A(ip) => Some(ip.0.to_string()),
                    RData::AAAA(ip) => Some(ip.0.to_string()),
                    RData::PTR(p) => Some(p.0.to_ascii().trim_end_matches('.').to_string()),
                    _ => None,
                })
                .collect()),
            c => bail!("{server} answered {c}"),
        };
    }
    bail!("no answer from {server}")
}

/// The request a stand-in answers on each load-balanced port (docs/standin.md,
/// HTTP services): the API's readiness, the Machine Config Server's health, a
/// route under `*.apps`.
fn through_lb(bind: SocketAddr, cluster_domain: &str) -> Result<Answer> {
    let (path, host) = match bind.port() {
        6443 => ("/readyz", format!("api.{cluster_domain}")),
        22623 => ("/healthz", format!("api-int.{cluster_domain}")),
        _ => ("/", format!("test.apps.{cluster_domain}")),
    };
    let (status, node, _) = get(bind, path, &host)?;
    Ok(Answer {
        request: format!("GET {path}"),
        status,
        node,
    })
}

/// A stand-in's answer to `GET path` on its port 8000 (docs/standin.md), or
/// why there is none, as the report shows it.
fn ask_standin(ip: IpAddr, path: &str) -> Result<String, String> {
    let at = SocketAddr::new(ip, 8000);
    // The Host header: an IPv6 literal in brackets (RFC 9110 section 7.2).
    let host = match ip {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    };
    get(at, path, &host)
        .map_err(|e| format!("{e:#}"))
        .and_then(|(code, _, body)| match code {
            200 => Ok(body),
            c => Err(format!("GET {path} answered {c}")),
        })
}

/// A stand-in's `GET /report` body as its report.
fn parse_report(body: &str) -> Result<StandinReport, String> {
    serde_json::from_str(body).map_err(|e| format!("its report is not the stand-in's JSON: {e}"))
}

/// A plain HTTP/1.0 GET (the stand-ins' 443 is plain HTTP too): status, the
/// `X-Shiftlab-Standin` header, the body.
fn get(addr: SocketAddr, path: &str, host: &str) -> Result<(u16, Option<String>, String)> {
    let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)
        .with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .with_context(|| format!("writing to {addr}"))?;
    let mut raw = Vec::new();
    s.take(MAX_BODY)
        .read_to_end(&mut raw)
        .with_context(|| format!("reading from {addr}"))?;
    parse_response(&String::from_utf8_lossy(&raw)).with_context(|| format!("GET {path} at {addr}"))
}

/// Status, `X-Shiftlab-Standin` and body of an HTTP/1.x response. Pure.
pub fn parse_response(text: &str) -> Result<(u16, Option<String>, String)> {
    let (head, body) = text
        .split_once("\r\n\r\n")
        .or_else(|| text.split_once("\n\n"))
        .unwrap_or((text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.strip_prefix("HTTP/1."))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .context("the answer is not HTTP")?;
    let node = lines.find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("x-shiftlab-standin")
            .then(|| v.trim().to_string())
    });
    Ok((status, node, body.to_string()))
}

/// The openings serve recorded, checked on the host's firewall as it is now.
fn firewall(cluster: &crate::state::ClusterDir, plan: &Plan) -> FirewallSeen {
    use crate::host::firewall::{Backend, Firewall, Openings, System};
    // None recorded (`--host-firewall off`): what the plan needs, bar the HTTP
    // server whose address serve chose.
    let record = crate::serve::read_firewall_record(cluster);
    let openings = match &record {
        Some(r) => r.openings.clone(),
        None => Openings::from_plan(plan, None),
    };
    match (Firewall { runner: &System }).in_place(&openings) {
        Err(e) => FirewallSeen::Error(format!("{e:#}")),
        Ok((Backend::Open, _)) => FirewallSeen::Open {
            bridge: plan.network.bridge.clone(),
        },
        Ok(_) if record.is_none() => FirewallSeen::NotRecorded,
        Ok((backend, rows)) => FirewallSeen::Checked {
            backend: backend.describe(),
            openings: rows
                .into_iter()
                // `[v6]:port` for an IPv6 VIP's opening (SocketAddr's form).
                .map(|(o, ok)| {
                    let at = std::net::SocketAddr::new(o.address, o.port);
                    (format!("{} {at}", o.service), ok)
                })
                .collect(),
        },
    }
}

/// Whether HAProxy shows a backend between states: its stats give a server
/// whose checks are counting towards a change as "DOWN 1/2" (going up) or
/// "UP 1/3" (going down), the checks so far of `rise`/`fall` (HAProxy's
/// management guide, the stats' `status` field).
pub fn in_transition(status: &str) -> bool {
    let mut w = status.split_whitespace();
    matches!(w.next(), Some("UP" | "DOWN")) && w.next().is_some_and(|c| c.contains('/'))
}

/// Why the rehearsal's Ironic stand-in (state `ironic`) failed to deploy
/// `node`, as it kept it (`failed/NAME`), redacted and bounded; `None` when
/// it kept nothing.
fn bmc_failure(
    ironic: &std::path::Path,
    node: &str,
    redactor: &crate::redact::Redactor,
) -> Option<String> {
    let text = std::fs::read_to_string(crate::rehearse::ironic::failed_path(ironic, node)).ok()?;
    let text: String = redactor.redact(text.trim()).chars().take(600).collect();
    (!text.is_empty()).then_some(text)
}

/// keepalived elects a VIP holder a few seconds after the previous one went
/// (the bootstrap, at the end of an IPI install: a master-down interval of 3 s
/// plus a skew): while no node holds one, ask the nodes that run again, a
/// bounded number of times; none running, there is nothing to wait for.
fn await_vips(
    mut nodes: Vec<NodeSeen>,
    vips_apply: bool,
    running: &dyn Fn(&str) -> bool,
) -> Vec<NodeSeen> {
    if !nodes.iter().any(|n| running(&n.name)) {
        return nodes;
    }
    let held = |nodes: &[NodeSeen], vip: &str| nodes.iter().any(|n| n.holds(vip));
    // A dual-stack lab's IPv6 VIPs are instances of their own.
    let vips: &[&str] = if crate::rehearse::report::dual_stack(&nodes) {
        &["api", "ingress", "api6", "ingress6"]
    } else {
        &["api", "ingress"]
    };
    for _ in 0..10 {
        if !vips_apply || vips.iter().all(|v| held(&nodes, v)) {
            break;
        }
        std::thread::sleep(Duration::from_secs(3));
        for n in nodes.iter_mut().filter(|n| running(&n.name)) {
            n.vips = ask_standin(n.planned_ip, "/vips").map(|b| b.trim().to_string());
        }
    }
    nodes
}

/// Whether a dual-stack node's report shows its IPv6 half settled: the address
/// it took by DHCPv6 and what it resolved over IPv6 (the `dhcp6` and
/// `resolve6` rows judge the values). A node without an IPv6 plan has nothing
/// to settle.
fn ipv6_settled(n: &NodeSeen) -> bool {
    n.planned_ip6.is_none()
        || n.report.as_ref().is_ok_and(|r| {
            ["ipv6", "api6", "ptr6"]
                .iter()
                .all(|k| r.get(*k).is_some_and(|v| !v.is_empty()))
        })
}

/// A dual-stack node takes its IPv6 address by DHCPv6 after the router's
/// advertisement, seconds after its IPv4 one; an IPI node that has just
/// booted from its disk may not have yet when the install completes (seen in
/// CI). While a running node's report shows its IPv6 half unsettled, read its
/// report again, a bounded number of times (about a minute).
fn await_ipv6(mut nodes: Vec<NodeSeen>, running: &dyn Fn(&str) -> bool) -> Vec<NodeSeen> {
    for _ in 0..20 {
        let waiting: Vec<usize> = (0..nodes.len())
            .filter(|&i| running(&nodes[i].name) && !ipv6_settled(&nodes[i]))
            .collect();
        if waiting.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_secs(3));
        for i in waiting {
            let n = &mut nodes[i];
            n.report = ask_standin(n.planned_ip, "/report").and_then(|b| parse_report(&b));
        }
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::{bmc_failure, in_transition, ipv6_settled};

    #[test]
    fn a_dual_stack_node_is_settled_once_its_report_has_its_ipv6_half() {
        let report = |pairs: &[(&str, &str)]| {
            Ok(pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect())
        };
        let mut n = super::NodeSeen {
            name: "lab1-worker-0".into(),
            role: "worker".into(),
            mac: "52:54:00:00:00:14".into(),
            planned_ip: "192.168.150.20".parse().unwrap(),
            leased_ip: None,
            planned_ip6: None,
            leased_ip6: None,
            exists: true,
            boot: crate::plan::Boot::DiskFwCfg,
            report: report(&[("ipv6", "")]),
            ignition_sha256: None,
            vips: Err(String::new()),
            has_bmc: false,
            bmc_failure: None,
        };
        // An IPv4 lab's node has nothing to settle.
        assert!(ipv6_settled(&n));
        n.planned_ip6 = Some("fd00:150::14".parse().unwrap());
        assert!(!ipv6_settled(&n));
        n.report = report(&[("ipv6", "fd00:150::14"), ("api6", ""), ("ptr6", "")]);
        assert!(!ipv6_settled(&n));
        n.report = report(&[
            ("ipv6", "fd00:150::14"),
            ("api6", "fd00:150::2"),
            ("ptr6", "lab1-worker-0.lab1.lab.test"),
        ]);
        assert!(ipv6_settled(&n));
        n.report = Err("connection refused".into());
        assert!(!ipv6_settled(&n));
    }

    #[test]
    fn the_kept_bmc_failure_is_read_redacted_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let ironic = dir.path().join(".ironic");
        let mut redactor = crate::redact::Redactor::default();
        redactor.add("s3cret-lab-password");
        assert_eq!(bmc_failure(&ironic, "lab1-ctlplane-0", &redactor), None);
        let kept = crate::rehearse::ironic::failed_path(&ironic, "lab1-ctlplane-0");
        std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
        std::fs::write(
            &kept,
            "opening a session: 401 user admin, password s3cret-lab-password refused\n",
        )
        .unwrap();
        let got = bmc_failure(&ironic, "lab1-ctlplane-0", &redactor).unwrap();
        assert!(!got.contains("s3cret"), "{got}");
        assert!(
            got.starts_with("opening a session: 401 user admin, password "),
            "{got}"
        );
        assert!(!got.ends_with('\n'));
        assert_eq!(bmc_failure(&ironic, "lab1-ctlplane-1", &redactor), None);
        std::fs::write(&kept, "x".repeat(5000)).unwrap();
        assert_eq!(
            bmc_failure(&ironic, "lab1-ctlplane-0", &redactor)
                .unwrap()
                .len(),
            600
        );
    }

    #[test]
    fn haproxys_counting_states_are_in_transition() {
        for s in ["DOWN 1/2", "UP 1/3", "UP 2/3"] {
            assert!(in_transition(s), "{s}");
        }
        for s in ["UP", "DOWN", "MAINT", "no check", "NOLB", ""] {
            assert!(!in_transition(s), "{s}");
        }
    }
}
