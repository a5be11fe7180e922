//! The rehearsal report's judgement (src/rehearse/report.rs): observations of
//! a UPI 3+2 and an IPI 3+2 rehearsal as the probes see them on a good host,
//! then with one host piece broken at a time, each named by its row. Golden
//! files: tests/golden/report.*; `UPDATE_GOLDEN=1` rewrites them.

mod common;

use std::collections::BTreeMap;

use shiftlab::plan::{Boot, RecordType};
use shiftlab::rehearse::probe::parse_response;
use shiftlab::rehearse::report::{
    judge, Answer, BackendSeen, BootstrapSeen, DnsSeen, FirewallSeen, FrontendSeen, NodeSeen,
    Observations, Outcome, Report,
};

const CD: &str = "r1.lab.test";

fn node(name: &str, role: &str, last: u8, boot: Boot, router: bool) -> NodeSeen {
    let ip = format!("192.168.150.{last}");
    let report: BTreeMap<String, String> = [
        ("hostname", name.to_string()),
        ("ip", ip.clone()),
        ("role", role.to_string()),
        ("router", if router { "yes" } else { "no" }.to_string()),
        ("boot", "disk".to_string()),
        (
            "ignition_source",
            match boot {
                Boot::DiskFwCfg => "fw_cfg",
                _ => "installed",
            }
            .to_string(),
        ),
        ("ignition_sha256", format!("{last:02x}").repeat(32)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    NodeSeen {
        name: name.into(),
        role: role.into(),
        mac: format!("52:54:00:00:00:{last:02x}"),
        planned_ip: ip.parse().unwrap(),
        leased_ip: Some(ip),
        planned_ip6: None,
        leased_ip6: None,
        exists: true,
        boot,
        report: Ok(report),
        ignition_sha256: (boot == Boot::DiskFwCfg).then(|| format!("{last:02x}").repeat(32)),
        vips: Ok(format!("vips {name}")),
        has_bmc: boot == Boot::VirtualMedia,
        bmc_failure: None,
    }
}

fn dns_of(nodes: &[NodeSeen], api: &str, ingress: &str) -> Vec<DnsSeen> {
    let rec = |kind, name: String, asked: String, expected: String, bootstrap| DnsSeen {
        kind,
        name,
        asked,
        answers: Ok(vec![expected.clone()]),
        expected,
        server: "192.168.150.1:53".into(),
        bootstrap,
    };
    let mut v = vec![
        rec(
            RecordType::A,
            format!("api.{CD}"),
            format!("api.{CD}"),
            api.into(),
            false,
        ),
        rec(
            RecordType::A,
            format!("api-int.{CD}"),
            format!("api-int.{CD}"),
            api.into(),
            false,
        ),
        rec(
            RecordType::Wildcard,
            format!("*.apps.{CD}"),
            format!("test.apps.{CD}"),
            ingress.into(),
            false,
        ),
    ];
    for n in nodes {
        let fqdn = format!("{}.{CD}", n.name);
        let o = v4(n.planned_ip).octets();
        let rev = format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0]);
        let b = n.role == "bootstrap";
        v.push(rec(
            RecordType::A,
            fqdn.clone(),
            fqdn.clone(),
            n.planned_ip.to_string(),
            b,
        ));
        v.push(rec(RecordType::PTR, rev.clone(), rev, fqdn, b));
    }
    v
}

fn frontend(name: &str, port: u16, backends: &[(&str, bool, &str)], answer: &str) -> FrontendSeen {
    FrontendSeen {
        name: name.into(),
        bind: format!("192.168.150.2:{port}").parse().unwrap(),
        backends: backends
            .iter()
            .map(|(n, b, s)| BackendSeen {
                node: n.to_string(),
                bootstrap: *b,
                status: s.to_string(),
            })
            .collect(),
        answer: Ok(Answer {
            request: match port {
                6443 => "GET /readyz",
                22623 => "GET /healthz",
                _ => "GET /",
            }
            .into(),
            status: 200,
            node: Some(answer.into()),
        }),
        bind6: None,
    }
}

/// A UPI 3+2 rehearsal after install-complete on a host whose firewall
/// filters (nftables), every piece in place.
fn upi() -> Observations {
    let mut nodes = vec![node("r1-bootstrap", "bootstrap", 9, Boot::DiskFwCfg, false)];
    for i in 0..3 {
        nodes.push(node(
            &format!("r1-ctlplane-{i}"),
            "ctlplane",
            10 + i,
            Boot::DiskFwCfg,
            false,
        ));
    }
    for i in 0..2 {
        nodes.push(node(
            &format!("r1-worker-{i}"),
            "worker",
            20 + i,
            Boot::DiskFwCfg,
            true,
        ));
    }
    // The bootstrap is gone: no domain, so no lease, no report.
    nodes[0].exists = false;
    nodes[0].leased_ip = None;
    nodes[0].report = Err("no domain r1-bootstrap".into());
    nodes[0].vips = Err("no domain r1-bootstrap".into());
    let mut dns = dns_of(&nodes, "192.168.150.2", "192.168.150.2");
    let cp = [
        ("r1-bootstrap", true, "removed"),
        ("r1-ctlplane-0", false, "UP"),
        ("r1-ctlplane-1", false, "UP"),
        ("r1-ctlplane-2", false, "UP"),
    ];
    let workers = [("r1-worker-0", false, "UP"), ("r1-worker-1", false, "UP")];
    // libvirt keeps the bootstrap's host entry: still answered, judged as any.
    dns.iter_mut().for_each(|d| d.bootstrap &= false);
    Observations {
        cluster: "r1".into(),
        method: "upi".into(),
        nodes,
        dns,
        load_balancer: Some(vec![
            frontend("api", 6443, &cp, "r1-ctlplane-1"),
            frontend("machine-config", 22623, &cp, "r1-ctlplane-0"),
            frontend("ingress-http", 80, &workers, "r1-worker-0"),
            frontend("ingress-https", 443, &workers, "r1-worker-1"),
        ]),
        bootstrap: Some(BootstrapSeen {
            name: "r1-bootstrap".into(),
            domain_left: false,
            volumes_left: vec![],
            lb_removed: true,
        }),
        firewall: FirewallSeen::Checked {
            backend: "nftables (inet filter input)".into(),
            openings: [
                "api 192.168.150.2:6443",
                "machine config 192.168.150.2:22623",
                "ingress http 192.168.150.2:80",
                "ingress https 192.168.150.2:443",
                "http artifacts 192.168.150.1:8080",
            ]
            .iter()
            .map(|o| (o.to_string(), true))
            .collect(),
        },
        csr_approval: Some("done".into()),
    }
}

/// An IPI 3+2 rehearsal: no load balancer, keepalived's VIPs, nodes booted by
/// the BMC's virtual media, no bootstrap node of shiftlab's; nothing filters.
fn ipi() -> Observations {
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(node(
            &format!("r1-ctlplane-{i}"),
            "ctlplane",
            10 + i,
            Boot::VirtualMedia,
            false,
        ));
    }
    for i in 0..2 {
        nodes.push(node(
            &format!("r1-worker-{i}"),
            "worker",
            20 + i,
            Boot::VirtualMedia,
            true,
        ));
    }
    nodes[1].vips = Ok("vips api r1-ctlplane-1".into());
    nodes[4].vips = Ok("vips ingress r1-worker-1".into());
    Observations {
        cluster: "r1".into(),
        method: "ipi".into(),
        dns: dns_of(&nodes, "192.168.150.5", "192.168.150.6"),
        nodes,
        load_balancer: None,
        bootstrap: None,
        firewall: FirewallSeen::Open {
            bridge: "sl-r1".into(),
        },
        csr_approval: None,
    }
}

/// The UPI 3+2 above as a dual-stack lab (IPv4 primary): each node also took
/// its planned IPv6 by DHCPv6 and resolved the VIPs' names and its own address
/// over IPv6, the IPv6 records answer the host over IPv6, and every frontend
/// answers on the IPv6 VIP too.
fn dual_stack() -> Observations {
    let mut o = upi();
    let v6 = |n: &NodeSeen| format!("fd00:150::{:x}", v4(n.planned_ip).octets()[3]);
    let mut dns = Vec::new();
    let rec = |kind, name: String, asked: String, expected: String| DnsSeen {
        kind,
        name,
        asked,
        answers: Ok(vec![expected.clone()]),
        expected,
        server: "[fd00:150::1]:53".into(),
        bootstrap: false,
    };
    for (kind, name) in [
        (RecordType::AAAA, format!("api.{CD}")),
        (RecordType::AAAA, format!("api-int.{CD}")),
        (RecordType::Wildcard6, format!("*.apps.{CD}")),
    ] {
        let asked = name.replace("*.", "test.");
        dns.push(rec(kind, name, asked, "fd00:150::2".into()));
    }
    for n in &mut o.nodes {
        let ip6 = v6(n);
        n.planned_ip6 = Some(ip6.parse().unwrap());
        let fqdn = format!("{}.{CD}", n.name);
        if let Ok(r) = &mut n.report {
            r.insert("ipv6".into(), ip6.clone());
            n.leased_ip6 = Some(ip6.clone());
            // What it resolved itself, over IPv6, at the server DHCPv6 named.
            r.insert("dns6".into(), "fd00:150::1".into());
            for k in ["api6", "api_int6", "apps6"] {
                r.insert(k.into(), "fd00:150::2".into());
            }
            r.insert("ptr6".into(), fqdn.clone());
        }
        let rev = ip6
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets()
            .iter()
            .rev()
            .map(|b| format!("{:x}.{:x}", b & 0xf, b >> 4))
            .collect::<Vec<_>>()
            .join(".")
            + ".ip6.arpa";
        dns.push(rec(RecordType::AAAA, fqdn.clone(), fqdn.clone(), ip6));
        dns.push(rec(RecordType::PTR, rev.clone(), rev, fqdn));
    }
    o.dns.extend(dns);
    for f in o.load_balancer.as_mut().unwrap() {
        let bind = format!("[fd00:150::2]:{}", f.bind.port()).parse().unwrap();
        f.bind6 = Some((bind, f.answer.clone()));
    }
    o
}

#[test]
fn a_good_dual_stack_rehearsal_proves_each_family() {
    let r = judge(&dual_stack());
    assert!(r.ok, "{}", r.table());
    let v4 = judge(&upi());
    // A dhcp6 and a resolve6 row per node, the IPv6 records (3 names, a AAAA
    // and a PTR per node), each frontend on its IPv6 VIP.
    assert_eq!(r.rows.len(), v4.rows.len() + 6 + 6 + (3 + 12) + 4);
    let rows = |check: &str, text: &str| {
        r.rows
            .iter()
            .filter(|row| {
                row.check == check && matches!(&row.outcome, Outcome::Proven(e) if e.contains(text))
            })
            .count()
    };
    assert_eq!(
        rows("dhcp6", "by DHCPv6 as planned, libvirt's lease agrees"),
        5
    );
    assert_eq!(
        rows(
            "resolve6",
            "asked [fd00:150::1]:53 over IPv6: api AAAA fd00:150::2, api-int AAAA fd00:150::2, *.apps AAAA fd00:150::2, its address PTR r1-"
        ),
        5
    );
    assert_eq!(rows("dns", "[fd00:150::1]:53 answered AAAA"), 3 + 6);
    assert_eq!(rows("dns", "[fd00:150::1]:53 answered PTR"), 6);
    assert_eq!(rows("lb", "through [fd00:150::2]:"), 4);
    golden("upi-dual-stack", &r);
}

/// Each IPv6 piece broken fails its own row, naming it.
#[test]
fn each_broken_ipv6_piece_fails_its_row() {
    let cases: [(&str, Break, &str, &str, &str); 7] = [
        (
            "a node without an IPv6 address (nor, then, its IPv6 answers)",
            |o| {
                let n = &mut o.nodes[2];
                let r = n.report.as_mut().unwrap();
                r.insert("ipv6".into(), String::new());
                n.leased_ip6 = None;
                for k in ["dns6", "api6", "api_int6", "apps6", "ptr6"] {
                    r.remove(k);
                }
            },
            "dhcp6",
            "r1-ctlplane-1",
            "r1-ctlplane-1 took no IPv6 address by DHCPv6 (planned fd00:150::b)",
        ),
        (
            "a node resolving api-int to another address and its own address to nothing",
            |o| {
                let r = o.nodes[5].report.as_mut().unwrap();
                r.insert("api_int6".into(), "fd00:150::99".into());
                r.insert("ptr6".into(), String::new());
            },
            "resolve6",
            "r1-worker-1",
            "r1-worker-1 asked [fd00:150::1]:53 over IPv6: api-int AAAA fd00:150::99 (expected fd00:150::2); no PTR answer for its address (expected r1-worker-1.r1.lab.test)",
        ),
        (
            "DHCPv6 naming no DNS server",
            |o| {
                o.nodes[4].report.as_mut().unwrap().insert("dns6".into(), String::new());
            },
            "resolve6",
            "r1-worker-0",
            "DHCPv6 named no DNS server to r1-worker-0",
        ),
        (
            "libvirt leasing another address",
            |o| o.nodes[3].leased_ip6 = Some("fd00:150::c001".into()),
            "dhcp6",
            "r1-ctlplane-2",
            "libvirt leased fd00:150::c001 to 52:54:00:00:00:0c by DHCPv6, the plan says fd00:150::c",
        ),
        (
            "a node holding another address",
            |o| {
                let n = &mut o.nodes[4];
                n.report.as_mut().unwrap().insert("ipv6".into(), "fd00:150::c002".into());
                n.leased_ip6 = None;
            },
            "dhcp6",
            "r1-worker-0",
            "r1-worker-0 holds fd00:150::c002, the plan says fd00:150::14",
        ),
        (
            "the api AAAA record missing",
            |o| {
                let d = o.dns.iter_mut().find(|d| d.kind == RecordType::AAAA && d.name == "api.r1.lab.test").unwrap();
                d.answers = Ok(vec![]);
            },
            "dns",
            "AAAA api.r1.lab.test",
            "[fd00:150::1]:53 has no AAAA record for api.r1.lab.test; expected fd00:150::2",
        ),
        (
            "the IPv6 VIP not bound",
            |o| {
                let f = &mut o.load_balancer.as_mut().unwrap()[1];
                f.bind6.as_mut().unwrap().1 =
                    Err("connecting to [fd00:150::2]:22623: Connection refused (os error 111)".into());
            },
            "lb",
            "machine-config [fd00:150::2]:22623",
            "through [fd00:150::2]:22623: connecting to [fd00:150::2]:22623: Connection refused (os error 111)",
        ),
    ];
    fails_alone(dual_stack, &cases);
}

type Break = fn(&mut Observations);

/// Each case, applied to a good rehearsal, fails the report and exactly its
/// own row (check, subject, evidence).
fn fails_alone(good: fn() -> Observations, cases: &[(&str, Break, &str, &str, &str)]) {
    for (what, brk, check, subject, evidence) in cases {
        let mut o = good();
        brk(&mut o);
        let r = judge(&o);
        assert!(!r.ok, "{what}: the report holds: {}", r.table());
        assert_eq!(
            failed(&r),
            [(check.to_string(), subject.to_string(), evidence.to_string())],
            "{what}"
        );
    }
}

fn golden(name: &str, r: &Report) {
    let dir = common::repo().join("tests/golden");
    common::golden(&dir.join(format!("report.{name}.txt")), &r.table());
    common::golden(
        &dir.join(format!("report.{name}.json")),
        &(serde_json::to_string_pretty(r).unwrap() + "\n"),
    );
}

fn failed(r: &Report) -> Vec<(String, String, String)> {
    r.rows
        .iter()
        .filter_map(|row| match &row.outcome {
            Outcome::Failed(e) => Some((row.check.to_string(), row.subject.clone(), e.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_good_upi_rehearsal_is_proven_row_by_row() {
    let r = judge(&upi());
    assert!(r.ok, "{}", r.table());
    assert_eq!(r.failed, 0);
    // Every node's lease, every DNS record, 4 frontends twice, bootstrap,
    // firewall, boot per node, BMC per node, 2 VIPs, CSRs.
    assert_eq!(r.rows.len(), 6 + (3 + 12) + 8 + 1 + 1 + 6 + 6 + 2 + 1);
    let proven = |check: &str| {
        r.rows
            .iter()
            .filter(|row| row.check == check && matches!(row.outcome, Outcome::Proven(_)))
            .count()
    };
    assert_eq!(proven("dhcp"), 5, "the bootstrap's lease is not applicable");
    assert_eq!(proven("dns"), 15);
    assert_eq!(proven("lb"), 4);
    assert_eq!(proven("lb-backends"), 4);
    assert_eq!(proven("boot"), 5);
    assert_eq!(proven("bmc"), 0, "UPI has no BMC");
    assert_eq!(proven("csr-approval"), 0, "a rehearsal approves no CSRs");
    golden("upi", &r);
}

#[test]
fn a_good_ipi_rehearsal_proves_the_bmc_and_the_vip_moves() {
    let r = judge(&ipi());
    assert!(r.ok, "{}", r.table());
    let row = |check: &str, subject: &str| {
        r.rows
            .iter()
            .find(|row| row.check == check && row.subject == subject)
            .unwrap()
            .outcome
            .clone()
    };
    assert!(matches!(row("bmc", "r1-ctlplane-0"), Outcome::Proven(_)));
    assert_eq!(
        row("vip-api", "keepalived"),
        Outcome::Proven("held by r1-ctlplane-1, a control plane (the bootstrap let go)".into())
    );
    assert!(matches!(
        row("lb", "load balancer"),
        Outcome::NotApplicable(_)
    ));
    assert!(matches!(row("firewall", "host"), Outcome::NotApplicable(_)));
    golden("ipi", &r);
}

/// Each broken piece fails its own row, naming what and where, and only it.
#[test]
fn each_broken_piece_fails_its_row_and_the_report() {
    let cases: [(&str, Break, &str, &str, &str); 9] = [
        (
            "a DNS host record removed",
            |o| {
                let d = o.dns.iter_mut().find(|d| d.name == "r1-worker-1.r1.lab.test").unwrap();
                d.answers = Ok(vec![]);
            },
            "dns",
            "A r1-worker-1.r1.lab.test",
            "192.168.150.1:53 has no A record for r1-worker-1.r1.lab.test; expected 192.168.150.21",
        ),
        (
            "the firewall closing 22623",
            |o| {
                if let FirewallSeen::Checked { openings, .. } = &mut o.firewall {
                    openings[1].1 = false;
                }
            },
            "firewall",
            "host",
            "nftables (inet filter input): no rule for machine config 192.168.150.2:22623",
        ),
        (
            "a lease other than the plan's",
            |o| o.nodes[2].leased_ip = Some("192.168.150.99".into()),
            "dhcp",
            "r1-ctlplane-1",
            "libvirt leased 192.168.150.99 to 52:54:00:00:00:0b, the plan says 192.168.150.11",
        ),
        (
            "the API through the LB not ready",
            |o| {
                let f = &mut o.load_balancer.as_mut().unwrap()[0];
                f.answer = Ok(Answer {
                    request: "GET /readyz".into(),
                    status: 500,
                    node: Some("r1-ctlplane-2".into()),
                });
            },
            "lb",
            "api 192.168.150.2:6443",
            "GET /readyz through 192.168.150.2:6443 answered 500 from r1-ctlplane-2",
        ),
        (
            "ingress reaching a node without routers",
            |o| {
                let f = &mut o.load_balancer.as_mut().unwrap()[2];
                f.answer.as_mut().unwrap().node = Some("r1-ctlplane-0".into());
            },
            "lb",
            "ingress-http 192.168.150.2:80",
            "GET / through 192.168.150.2:80 reached r1-ctlplane-0, which runs no router",
        ),
        (
            "a backend down",
            |o| o.load_balancer.as_mut().unwrap()[1].backends[2].status = "DOWN".into(),
            "lb-backends",
            "machine-config",
            "not UP: r1-ctlplane-1 DOWN",
        ),
        (
            "the bootstrap's volume left",
            |o| {
                o.bootstrap.as_mut().unwrap().volumes_left = vec!["r1-bootstrap.qcow2".into()];
                o.bootstrap.as_mut().unwrap().lb_removed = false;
            },
            "bootstrap-removed",
            "bootstrap",
            "still there: volume r1-bootstrap.qcow2, its load-balancer backends",
        ),
        (
            "an Ignition other than shiftlab's",
            |o| o.nodes[4].ignition_sha256 = Some("ff".repeat(32)),
            "boot",
            "r1-worker-0",
            "its fw_cfg Ignition has sha256 1414141414141414141414141414141414141414141414141414141414141414, shiftlab gave ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        ),
        (
            "CSRs not approved",
            |o| o.csr_approval = Some("started".into()),
            "csr-approval",
            "install",
            "target csr-approval is started, not done",
        ),
    ];
    fails_alone(upi, &cases);
}

#[test]
fn vips_on_the_wrong_node_or_on_none_fail() {
    let mut o = ipi();
    // The bootstrap-like failure: the API VIP stuck on a worker.
    o.nodes[1].vips = Ok("vips r1-ctlplane-1".into());
    o.nodes[3].vips = Ok("vips api r1-worker-0".into());
    o.nodes[4].vips = Err("connecting to 192.168.150.21:8000: refused".into());
    let r = judge(&o);
    assert_eq!(
        failed(&r),
        [
            (
                "vip-api".to_string(),
                "keepalived".to_string(),
                "held by r1-worker-0, which is not a control plane (the bootstrap let go)"
                    .to_string()
            ),
            (
                "vip-ingress".to_string(),
                "keepalived".to_string(),
                "held by no node that answered; unreadable: r1-worker-1: connecting to 192.168.150.21:8000: refused"
                    .to_string()
            ),
        ]
    );
    golden("ipi-broken", &r);
}

/// A dual-stack IPI lab: keepalived holds a VIP of each family per list, each
/// its own instance; each is judged on its own.
#[test]
fn a_dual_stack_ipi_holds_a_vip_of_each_family() {
    let vip_rows = |o: &Observations| -> Vec<(String, String)> {
        judge(o)
            .rows
            .into_iter()
            .filter(|r| r.check.starts_with("vip-"))
            .map(|r| {
                let j = serde_json::to_value(&r).unwrap();
                (
                    r.check.to_string(),
                    j["result"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let mut o = ipi();
    for n in &mut o.nodes {
        n.planned_ip6 = Some(
            format!("fd00:150::{:x}", v4(n.planned_ip).octets()[3])
                .parse()
                .unwrap(),
        );
    }
    o.nodes[1].vips = Ok("vips api api6 r1-ctlplane-1".into());
    o.nodes[4].vips = Ok("vips ingress ingress6 r1-worker-1".into());
    let want = |api6: &str, ingress6: &str| {
        [
            ("vip-api", "proven"),
            ("vip-ingress", "proven"),
            ("vip-api6", api6),
            ("vip-ingress6", ingress6),
        ]
        .map(|(c, w)| (c.to_string(), w.to_string()))
        .to_vec()
    };
    assert_eq!(vip_rows(&o), want("proven", "proven"));
    // The IPv6 API VIP on a worker, the IPv6 ingress VIP nowhere: the IPv4
    // instances still proven.
    o.nodes[1].vips = Ok("vips api r1-ctlplane-1".into());
    o.nodes[3].vips = Ok("vips api6 r1-worker-0".into());
    o.nodes[4].vips = Ok("vips ingress r1-worker-1".into());
    assert_eq!(vip_rows(&o), want("failed", "failed"));
    let r = judge(&o);
    let evidence = |check: &str| {
        let row = r.rows.iter().find(|r| r.check == check).unwrap();
        serde_json::to_value(row).unwrap()["evidence"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        evidence("vip-api6"),
        "held by r1-worker-0, which is not a control plane (the bootstrap let go)"
    );
    assert_eq!(evidence("vip-ingress6"), "held by no node");
    // An IPv4 lab has no IPv6 VIP rows.
    assert_eq!(
        vip_rows(&ipi())
            .iter()
            .map(|(c, _)| c.as_str())
            .collect::<Vec<_>>(),
        ["vip-api", "vip-ingress"]
    );
}

/// What the lab BMC answered the stand-in Ironic's InsertMedia when the CA
/// it trusts did not sign the image server's certificate, as the stand-in
/// kept it (recorded from tests/e2e/ipi.sh's ipi3, the paths shortened).
const REFUSED: &str = "InsertMedia: POST /redfish/v1/Systems/20bb1847-c162-87cc-a0fc-5f5fd02452cd/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia: 400 fetching the image https://127.0.0.1:44137/redfish/boot-e72d25b3-9ee0-4740-8efb-dec8247a9e8a.iso failed: TLS: unknown CA: the image server on loopback has a certificate not from this rehearsal's stand-in Ironic CA (/s/clusters/r1/assets/.ironic/tls/ca.crt)";

/// An IPI 3+0 rehearsal whose BMC refused the media: the stand-in Ironic
/// stopped at the first node's InsertMedia, so no node ever ran (libvirt
/// leased nothing; the probes do not ask a domain that is shut off). That
/// node's bmc row names the BMC's refusal; the others say they never ran.
#[test]
fn a_refused_media_names_the_node_and_the_bmcs_message() {
    let mut o = ipi();
    o.nodes.truncate(3);
    o.dns = dns_of(&o.nodes, "192.168.150.5", "192.168.150.6");
    for n in &mut o.nodes {
        n.leased_ip = None;
        n.report = Err("its domain is shutoff, not running".into());
        n.vips = Err("its domain is shutoff, not running".into());
    }
    o.nodes[0].bmc_failure = Some(REFUSED.into());
    let r = judge(&o);
    assert!(!r.ok, "{}", r.table());
    let bmc: Vec<(String, String, String)> = failed(&r)
        .into_iter()
        .filter(|(check, _, _)| check == "bmc")
        .collect();
    assert_eq!(
        bmc,
        [
            (
                "bmc".to_string(),
                "r1-ctlplane-0".to_string(),
                format!("the stand-in Ironic's deployment failed: {REFUSED}")
            ),
            (
                "bmc".to_string(),
                "r1-ctlplane-1".to_string(),
                "its stand-in report: its domain is shutoff, not running".to_string()
            ),
            (
                "bmc".to_string(),
                "r1-ctlplane-2".to_string(),
                "its stand-in report: its domain is shutoff, not running".to_string()
            ),
        ]
    );
    golden("ipi-media-refused", &r);
}

#[test]
fn a_stand_in_answer_is_read_with_the_node_that_gave_it() {
    let (status, node, body) = parse_response(
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nX-Shiftlab-Standin: r1-ctlplane-0\r\nConnection: close\r\n\r\nok r1-ctlplane-0\n",
    )
    .unwrap();
    assert_eq!(
        (status, node.as_deref(), body.as_str()),
        (200, Some("r1-ctlplane-0"), "ok r1-ctlplane-0\n")
    );
    let (status, node, _) = parse_response("HTTP/1.1 503 Service Unavailable\r\n\r\n").unwrap();
    assert_eq!((status, node), (503, None));
    assert!(parse_response("SSH-2.0-OpenSSH\r\n").is_err());
}

#[test]
fn a_single_node_has_no_vip_to_move() {
    let mut o = ipi();
    o.method = "sno".into();
    o.nodes.truncate(1);
    o.nodes[0].vips = Ok("vips sno".into());
    let r = judge(&o);
    for check in ["vip-api", "vip-ingress"] {
        let row = r.rows.iter().find(|row| row.check == check).unwrap();
        assert!(
            matches!(row.outcome, Outcome::NotApplicable(_)),
            "{check}: {:?}",
            row.outcome
        );
    }
}

/// The report's PTR check found it: a single node shares its address with api
/// and api-int, and dnsmasq answers PTR with the first name of the address's
/// host entry. The plan's PTR (the node's own name) must come first.
#[test]
fn a_single_nodes_address_reverse_resolves_to_its_name() {
    let dir = common::repo().join("tests/golden");
    let text = std::fs::read_to_string(dir.join("sno.cluster.yaml")).unwrap();
    let env = shiftlab::spec::Env {
        home: None,
        base_dir: dir,
        libvirt_default_uri: None,
    };
    let spec = shiftlab::spec::from_str(&text, "sno.cluster.yaml", &env)
        .unwrap()
        .spec;
    let plan = shiftlab::plan::derive(&spec);
    let node = &plan.nodes[0];
    let xml = shiftlab::libvirt::xml::write::network_xml(&plan);
    let entry = xml
        .split("<host ip=")
        .find(|h| h.starts_with(&format!("'{}'", node.ip)))
        .unwrap();
    let first = entry.split("<hostname>").nth(1).unwrap();
    assert!(
        first.starts_with(&format!("{}</hostname>", node.fqdn)),
        "{entry}"
    );
    assert!(entry.contains(&format!("<hostname>api.{}</hostname>", plan.cluster_domain)));
}

/// A fixture node's IPv4 address.
fn v4(ip: std::net::IpAddr) -> std::net::Ipv4Addr {
    match ip {
        std::net::IpAddr::V4(a) => a,
        std::net::IpAddr::V6(a) => panic!("{a}: the fixtures are IPv4"),
    }
}
