//! Dual-stack labs (docs/ipv6.md): the plan, libvirt network XML and
//! install-config of a dual-stack UPI, SNO, agent and IPI file, as goldens
//! under tests/golden/ipv6 (`UPDATE_GOLDEN=1` rewrites them), with the rules
//! each must keep checked on its own; and `create` refusing what `plan` shows.

mod common;

use shiftlab::libvirt::xml::write::network_xml;
use shiftlab::plan::{self, Plan, RecordType};
use shiftlab::render::install_config::{agent_config, install_config, Secrets};
use shiftlab::spec::{self, ClusterSpec, Env};

fn load(method: &str) -> ClusterSpec {
    let dir = common::repo().join("tests/golden/ipv6");
    let name = format!("{method}.cluster.yaml");
    let text = std::fs::read_to_string(dir.join(&name)).unwrap();
    let env = Env {
        home: None,
        base_dir: dir,
        libvirt_default_uri: None,
    };
    spec::from_str(&text, &name, &env)
        .unwrap_or_else(|e| panic!("{e}"))
        .spec
}

fn golden(name: &str, text: &str) {
    common::golden(&common::repo().join("tests/golden/ipv6").join(name), text);
}

fn secrets() -> Secrets {
    Secrets {
        pull_secret: r#"{"auths":{"registry.example.test":{"auth":"ZmFrZTpmYWtl"}}}"#.into(),
        bmc_password: Some("golden-bmc-password".into()),
        bmc_ca: None,
    }
}

fn yaml(text: &str) -> yaml_serde::Value {
    yaml_serde::from_str(text).unwrap()
}

fn strings(v: &yaml_serde::Value) -> Vec<String> {
    v.as_sequence()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

/// Every node has an IPv6 address with its IPv4 address's offset, a DHCPv6
/// reservation by DUID-LL of its MAC, an AAAA record and an ip6.arpa PTR.
fn check_nodes(plan: &Plan) {
    let v6 = plan.network.ipv6.as_ref().expect("an IPv6 network");
    assert_eq!(v6.reservations.len(), plan.nodes.len());
    for n in &plan.nodes {
        let ip6 = n.ipv6.expect("a node's IPv6 address");
        assert!(v6.cidr.contains(&ip6), "{ip6}");
        assert_eq!(
            u128::from(ip6) & 0xff,
            u128::from(n.ipv4().expect("a node's IPv4 address").octets()[3]),
            "{}",
            n.name
        );
        let r = v6
            .reservations
            .iter()
            .find(|r| r.hostname == n.name)
            .unwrap();
        assert_eq!(
            (r.ip, r.id.clone()),
            (ip6, format!("00:03:00:01:{}", n.mac))
        );
        let has = |kind: RecordType, name: &str, value: &str| {
            plan.dns
                .iter()
                .any(|d| d.kind == kind && d.name == name && d.value == value)
        };
        assert!(
            has(RecordType::AAAA, &n.fqdn, &ip6.to_string()),
            "{}",
            n.name
        );
        let ptr = plan
            .dns
            .iter()
            .find(|d| {
                d.kind == RecordType::PTR && d.value == n.fqdn && d.name.ends_with("ip6.arpa")
            })
            .unwrap_or_else(|| panic!("no ip6.arpa PTR for {}", n.name));
        assert_eq!(ptr.name.len(), "x.".len() * 32 + "ip6.arpa".len());
    }
}

/// The network XML: an IPv6 `<ip>` with the reservations, NAT66, AAAA hosts
/// and the IPv6 `*.apps` wildcard beside the IPv4 one.
fn check_network_xml(plan: &Plan, xml: &str) {
    let doc = roxmltree::Document::parse(xml).expect("network XML parses");
    let v6 = plan.network.ipv6.as_ref().unwrap();
    let ip6 = doc
        .descendants()
        .find(|n| n.has_tag_name("ip") && n.attribute("family") == Some("ipv6"))
        .expect("an <ip family='ipv6'>");
    assert_eq!(
        ip6.attribute("address"),
        Some(v6.gateway.to_string().as_str())
    );
    assert_eq!(ip6.attribute("prefix"), Some("64"));
    let ids: Vec<_> = ip6
        .descendants()
        .filter(|n| n.has_tag_name("host"))
        .map(|h| (h.attribute("id").unwrap(), h.attribute("ip").unwrap()))
        .collect();
    assert_eq!(ids.len(), plan.nodes.len());
    assert!(ip6.descendants().all(|n| n.attribute("mac").is_none()));
    let nat = doc.descendants().find(|n| n.has_tag_name("nat")).unwrap();
    assert_eq!(nat.attribute("ipv6"), Some("yes"));
    let wildcard = format!(
        "address=/apps.{}/{}",
        plan.cluster_domain,
        plan.vips.ingress6.unwrap()
    );
    assert!(xml.contains(&wildcard), "{xml}");
    let dns = doc.descendants().find(|n| n.has_tag_name("dns")).unwrap();
    let api6 = plan.vips.api6.unwrap().to_string();
    let api = dns
        .children()
        .filter(|n| n.has_tag_name("host") && n.attribute("ip") == Some(api6.as_str()))
        .count();
    assert_eq!(api, 1, "one DNS <host> for the IPv6 API address");
    // The load balancer (upi, agent with more than one node) holds the IPv6
    // VIP on the host's side of the bridge, as the IPv4 one.
    let on_host = doc
        .root_element()
        .children()
        .any(|n| n.has_tag_name("ip") && n.attribute("address") == Some(api6.as_str()));
    assert_eq!(on_host, plan.load_balancer.is_some(), "{xml}");
}

/// The host load balancer (UPI and agent) binds each frontend on both VIPs;
/// single node and IPI with VIPs have none.
fn check_haproxy(method: &str, plan: &Plan) {
    use shiftlab::render::haproxy;
    let opts = haproxy::Options {
        stats_socket: std::path::Path::new("/run/shiftlab/haproxy.sock"),
        bootstrap_removed: false,
    };
    let Some(cfg) = haproxy::render(plan, &opts) else {
        assert!(
            matches!(method, "sno" | "ipi"),
            "{method} has no load balancer"
        );
        return;
    };
    let api6 = plan.vips.api6.unwrap();
    let ingress6 = plan.vips.ingress6.unwrap();
    let (api4, ingress4) = (plan.vips.api.unwrap(), plan.vips.ingress.unwrap());
    for (port, addr4, addr6) in [
        (6443, api4, api6),
        (22623, api4, api6),
        (443, ingress4, ingress6),
        (80, ingress4, ingress6),
    ] {
        assert!(
            cfg.contains(&format!(
                "    bind {addr4}:{port}\n    bind [{addr6}]:{port} transparent\n"
            )),
            "{method} {port}: {cfg}"
        );
    }
    // Never a wildcard: no bind on :: or 0.0.0.0.
    assert!(
        !cfg.contains("bind [::]") && !cfg.contains("bind 0.0.0.0") && !cfg.contains("bind :"),
        "{cfg}"
    );
    common::assert_haproxy_accepts(&cfg);
    golden(&format!("{method}.haproxy.cfg"), &cfg);
}

#[test]
fn dual_stack_goldens_per_method() {
    for method in ["upi", "sno", "agent", "ipi"] {
        let spec = load(method);
        let plan = plan::derive(&spec);
        check_nodes(&plan);
        golden(
            &format!("{method}.plan.json"),
            &(serde_json::to_string_pretty(&plan).unwrap() + "\n"),
        );
        let table = plan::render_table(&plan);
        for n in &plan.nodes {
            let line = table.lines().find(|l| l.starts_with(&n.name)).unwrap();
            assert!(line.contains(&n.ipv6.unwrap().to_string()), "{line}");
        }
        golden(&format!("{method}.plan.txt"), &table);
        let xml = network_xml(&plan);
        check_network_xml(&plan, &xml);
        golden(&format!("{method}.network.xml"), &xml);
        let ic = install_config(&spec, &plan, &secrets(), None);
        golden(&format!("{method}.install-config.yaml"), &ic);
        let v = yaml(&ic);
        let net = &v["networking"];
        assert_eq!(net["networkType"], "OVNKubernetes");
        let first6 = spec.ipv6.as_ref().unwrap().primary;
        // Every list has both families, the primary first.
        let machine: Vec<String> = net["machineNetwork"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|m| m["cidr"].as_str().unwrap().to_string())
            .collect();
        let pods: Vec<String> = net["clusterNetwork"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|m| m["cidr"].as_str().unwrap().to_string())
            .collect();
        for list in [machine, pods, strings(&net["serviceNetwork"])] {
            assert_eq!(list.len(), 2, "{method}: {list:?}");
            assert_eq!(list[0].contains(':'), first6, "{method}: {list:?}");
            assert_eq!(list[1].contains(':'), !first6, "{method}: {list:?}");
        }
        for c in net["clusterNetwork"].as_sequence().unwrap() {
            let six = c["cidr"].as_str().unwrap().contains(':');
            assert!(!six || c["hostPrefix"] == 64, "{method}: {c:?}");
        }
        check_haproxy(method, &plan);
        if method == "agent" {
            let a = agent_config(&spec, &plan);
            // IPv4 primary (platform none): the rendezvous host's IPv4 address.
            assert_eq!(yaml(&a)["rendezvousIP"], "192.168.142.11");
            golden("agent.agent-config.yaml", &a);
        }
    }
}

/// Bare metal: two VIPs of each kind, one per family, the primary (here IPv6,
/// as network.cidr lists it) first whichever order the file wrote them in.
#[test]
fn ipi_vips_one_per_family_primary_first() {
    let spec = load("ipi");
    let plan = plan::derive(&spec);
    let v = yaml(&install_config(&spec, &plan, &secrets(), None));
    let bm = &v["platform"]["baremetal"];
    assert_eq!(strings(&bm["apiVIPs"]), ["fd00:5:143::5", "192.168.143.5"]);
    assert_eq!(
        strings(&bm["ingressVIPs"]),
        ["fd00:5:143::6", "192.168.143.6"]
    );
    assert_eq!(
        strings(&v["networking"]["serviceNetwork"]),
        ["fd20::/112", "172.31.0.0/16"]
    );
}

/// `plan` shows an IPv6-primary dual-stack lab (bare-metal IPI), and `create
/// install-config --dir` renders it with IPv6 first in every list.
#[test]
fn plan_and_create_take_ipv6_primary() {
    let home = tempfile::tempdir().unwrap();
    let file = common::repo().join("tests/golden/ipv6/ipi.cluster.yaml");
    let file = file.to_str().unwrap();
    let plan = common::shiftlab(&["plan", "-f", file, "-o", "json"], home.path());
    assert_eq!(plan.status.code(), Some(0), "{plan:?}");
    let shown: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert_eq!(shown["network"]["ipv6"]["cidr"], "fd00:5:143::/64");
    assert_eq!(shown["network"]["ipv6"]["primary"], true, "{shown}");
    let dir = home.path().join("out");
    let out = common::shiftlab(
        &[
            "create",
            "install-config",
            "-f",
            file,
            "--dir",
            dir.to_str().unwrap(),
        ],
        home.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let ic = std::fs::read_to_string(dir.join("install-config.yaml")).unwrap();
    assert_eq!(
        strings(&yaml(&ic)["networking"]["serviceNetwork"]),
        ["fd20::/112", "172.31.0.0/16"]
    );
}

/// The IPv6 subnet is checked against the host as the IPv4 one is (doctor -f,
/// create's preflight): another libvirt network holding it and a host route
/// over it are each named; the lab's own network XML reads back its subnets.
#[test]
fn the_ipv6_subnet_must_be_free_on_the_host() {
    use shiftlab::doctor::checks::network_problems;
    use shiftlab::doctor::facts::{LibvirtNetwork, Route};
    use shiftlab::libvirt::xml::parse::network_subnets6;
    let p = plan::derive(&load("upi"));
    let subnets = network_subnets6(&network_xml(&p));
    assert_eq!(
        subnets,
        [
            "fd00:5:140::/64".parse().unwrap(),
            "fd00:5:140::2/128".parse().unwrap()
        ]
    );
    let other = LibvirtNetwork {
        name: "v6lab".into(),
        owner: None,
        bridge: Some("virbr6".into()),
        subnets: vec![
            "10.6.0.0/24".parse().unwrap(),
            "fd00:5:140:0:8000::/65".parse().unwrap(),
        ],
    };
    let routes = [
        Route {
            iface: "eth1".into(),
            dest: "fd00:5::/32".parse().unwrap(),
        },
        Route {
            iface: "eth2".into(),
            dest: "fd00:6::/32".parse().unwrap(),
        },
    ];
    assert_eq!(
        network_problems(&p, &[other], &routes, &[], true),
        [
            "network.cidr fd00:5:140::/64: overlaps fd00:5:140:0:8000::/65 of libvirt network v6lab; choose another subnet",
            "network.cidr fd00:5:140::/64: overlaps the host route fd00:5::/32 via eth1; choose another subnet",
        ]
    );
}

#[test]
fn doctor_says_what_keeps_libvirt_from_starting_a_dual_stack_network() {
    use shiftlab::doctor::{checks, HostFacts, Severity};
    use shiftlab::host::ipv6::{Ipv6Host, RaLink};
    let p = plan::derive(&load("upi"));
    let verdict = |ipv6: Option<Ipv6Host>| {
        let f = HostFacts {
            ipv6,
            ..HostFacts::default()
        };
        checks(&f, Some(&p)).into_iter().find(|c| c.id == "ipv6")
    };
    let link = |iface: &str, accept_ra: i32| RaLink {
        iface: iface.into(),
        accept_ra: Some(accept_ra),
    };
    let fine = Ipv6Host {
        enabled: true,
        forwarding: false,
        accept_ra_all: Some(1),
        ra_links: Some(vec![]),
    };
    // A recorded host without the facts, and an IPv4 lab: no verdict.
    assert!(verdict(None).is_none());
    let v4 = common::plan_from_yaml("cluster: lab4\ndistribution: okd\n", "lab4.yaml", None);
    let f = HostFacts {
        ipv6: Some(fine.clone()),
        ..HostFacts::default()
    };
    assert!(checks(&f, Some(&v4)).iter().all(|c| c.id != "ipv6"));

    let c = verdict(Some(fine.clone())).unwrap();
    assert_eq!(c.severity, Severity::Ok, "{c:?}");
    assert!(c.verdict.contains("libvirt turns it on"), "{}", c.verdict);

    let disabled = verdict(Some(Ipv6Host {
        enabled: false,
        ..fine.clone()
    }))
    .unwrap();
    assert_eq!(disabled.severity, Severity::Fail);
    assert!(
        disabled.verdict.contains("fd00:5:140::1"),
        "{}",
        disabled.verdict
    );
    assert!(disabled.fix.unwrap().contains("disable_ipv6=0"));

    // libvirt's rule: eth0 learned its default route from an advertisement
    // and does not accept them while forwarding; eth1 does.
    let ra = Ipv6Host {
        ra_links: Some(vec![link("eth0", 1), link("eth1", 2)]),
        ..fine.clone()
    };
    let c = verdict(Some(ra.clone())).unwrap();
    assert_eq!(c.severity, Severity::Fail);
    assert!(
        c.verdict.contains("eth0 (accept_ra 1)") && !c.verdict.contains("eth1"),
        "{}",
        c.verdict
    );
    assert!(c.fix.unwrap().contains("net.ipv6.conf.eth0.accept_ra=2"));
    // The global accept_ra 2 is libvirt's other way out.
    let c = verdict(Some(Ipv6Host {
        accept_ra_all: Some(2),
        ..ra
    }))
    .unwrap();
    assert_eq!(c.severity, Severity::Ok, "{c:?}");

    let unread = verdict(Some(Ipv6Host {
        ra_links: None,
        ..fine
    }))
    .unwrap();
    assert_eq!(unread.severity, Severity::Info, "{unread:?}");
}

/// Which `<ip>` a reservation goes under when shiftlab updates a network in
/// place (scale): each family's by its index among the network's `<ip>`
/// elements; an IPv4 lab's one `<ip>` with DHCP is index 0, and it has no IPv6 one.
#[test]
fn reservations_go_under_their_familys_ip() {
    let dir = common::repo().join("tests/golden");
    let parents = |f: &str| {
        let xml = std::fs::read_to_string(dir.join(f)).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        shiftlab::libvirt::apply::dhcp_parents(&doc)
    };
    assert_eq!(parents("ipv6/upi.network.xml"), (0, 1));
    assert_eq!(parents("upi.network.xml"), (0, -1));
}
