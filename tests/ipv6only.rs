//! IPv6 single-stack labs (docs/ipv6.md): `network.cidr` one IPv6 CIDR. The
//! plan, libvirt network XML, install-config, HAProxy config and agent-config
//! of a UPI, SNO, agent and IPI file, as goldens under tests/golden/ipv6only
//! (`UPDATE_GOLDEN=1` rewrites them), with the rules each must keep checked on
//! their own: nothing IPv4 anywhere, every list one IPv6 entry.

mod common;

use shiftlab::libvirt::xml::write::network_xml;
use shiftlab::plan::{self, Plan, RecordType};
use shiftlab::render::install_config::{agent_config, install_config, Secrets};
use shiftlab::spec::{self, ClusterSpec, Env};

fn dir() -> std::path::PathBuf {
    common::repo().join("tests/golden/ipv6only")
}

fn load(method: &str) -> ClusterSpec {
    let name = format!("{method}.cluster.yaml");
    let text = std::fs::read_to_string(dir().join(&name)).unwrap();
    let env = Env {
        home: None,
        base_dir: dir(),
        libvirt_default_uri: None,
    };
    spec::from_str(&text, &name, &env)
        .unwrap_or_else(|e| panic!("{e}"))
        .spec
}

fn golden(name: &str, text: &str) {
    common::golden(&dir().join(name), text);
}

fn secrets() -> Secrets {
    Secrets {
        pull_secret: r#"{"auths":{"registry.example.test":{"auth":"ZmFrZTpmYWtl"}}}"#.into(),
        bmc_password: Some("golden-bmc-password".into()),
        bmc_ca: None,
    }
}

/// No IPv4 address or subnet in a rendered text (dotted quads; the golden
/// files name none).
fn assert_no_ipv4(what: &str, text: &str) {
    let quad = text
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|w| {
            let parts: Vec<_> = w.split('.').collect();
            parts.len() == 4
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.parse::<u8>().is_ok())
        });
    assert_eq!(quad, None, "{what} names an IPv4 address:\n{text}");
}

/// The plan: no IPv4 half; every node's address is its IPv6 one, reserved by
/// DUID-LL, with an AAAA and an ip6.arpa PTR and no A record.
fn check_plan(plan: &Plan) {
    let net = &plan.network;
    assert_eq!((net.cidr, net.gateway, &net.dhcp), (None, None, &None));
    assert!(net.reservations.is_empty() && net.host_addresses.is_empty());
    assert_eq!((plan.vips.api, plan.vips.ingress), (None, None));
    let v6 = net.ipv6.as_ref().expect("the IPv6 network");
    assert!(v6.primary, "IPv6 alone is the primary family");
    assert_eq!(v6.reservations.len(), plan.nodes.len());
    assert!(plan
        .dns
        .iter()
        .all(|d| !matches!(d.kind, RecordType::A | RecordType::Wildcard)));
    for n in &plan.nodes {
        let ip6 = n.ipv6.expect("a node's IPv6 address");
        assert_eq!(n.ip, std::net::IpAddr::V6(ip6), "{}", n.name);
        assert!(plan
            .dns
            .iter()
            .any(|d| d.kind == RecordType::AAAA && d.name == n.fqdn));
    }
    for f in plan.load_balancer.iter().flat_map(|lb| &lb.frontends) {
        assert_eq!(f.address, None);
        assert!(f.address6.is_some());
        assert!(f.backends.iter().all(|b| b.ip.is_ipv6()), "{f:?}");
    }
}

/// The network XML: one `<ip family='ipv6'>` with DHCPv6 and NAT66, no IPv4
/// `<ip>`, the load balancer's VIP on the host side.
fn check_network_xml(plan: &Plan, xml: &str) {
    let doc = roxmltree::Document::parse(xml).expect("network XML parses");
    let ips: Vec<_> = doc
        .root_element()
        .children()
        .filter(|n| n.has_tag_name("ip"))
        .collect();
    assert!(
        ips.iter().all(|n| n.attribute("family") == Some("ipv6")),
        "{xml}"
    );
    let with_dhcp = ips
        .iter()
        .filter(|n| n.children().any(|c| c.has_tag_name("dhcp")))
        .count();
    assert_eq!(with_dhcp, 1, "{xml}");
    let nat = doc.descendants().find(|n| n.has_tag_name("nat")).unwrap();
    assert_eq!(nat.attribute("ipv6"), Some("yes"));
    assert_eq!(
        ips.len(),
        1 + usize::from(plan.load_balancer.is_some()),
        "{xml}"
    );
    assert_no_ipv4("the network XML", xml);
}

#[test]
fn ipv6_single_stack_goldens_per_method() {
    for method in ["upi", "sno", "agent", "ipi"] {
        let spec = load(method);
        assert_eq!((spec.network.cidr, spec.cluster_network), (None, None));
        let plan = plan::derive(&spec);
        check_plan(&plan);
        let json = serde_json::to_string_pretty(&plan).unwrap() + "\n";
        assert_no_ipv4("the plan", &json);
        golden(&format!("{method}.plan.json"), &json);
        golden(&format!("{method}.plan.txt"), &plan::render_table(&plan));
        let xml = network_xml(&plan);
        check_network_xml(&plan, &xml);
        golden(&format!("{method}.network.xml"), &xml);

        let ic = install_config(&spec, &plan, &secrets(), None);
        assert_no_ipv4("the install-config", &ic);
        let v: yaml_serde::Value = yaml_serde::from_str(&ic).unwrap();
        let net = &v["networking"];
        assert_eq!(net["networkType"], "OVNKubernetes");
        for list in ["machineNetwork", "clusterNetwork", "serviceNetwork"] {
            let l = net[list].as_sequence().unwrap();
            assert_eq!(l.len(), 1, "{method} {list}: one family");
        }
        assert_eq!(net["clusterNetwork"][0]["hostPrefix"], 64);
        if method == "ipi" {
            let bm = &v["platform"]["baremetal"];
            assert_eq!(bm["apiVIPs"][0], "fd00:6:143::5");
            assert_eq!(bm["ingressVIPs"][0], "fd00:6:143::6");
            assert_eq!(bm["apiVIPs"].as_sequence().unwrap().len(), 1);
            let host = &bm["hosts"][0]["bmc"]["address"];
            assert!(
                host.as_str()
                    .unwrap()
                    .starts_with("redfish-virtualmedia+https://[fd00:6:143::1]:8443/"),
                "{host:?}"
            );
        }
        golden(&format!("{method}.install-config.yaml"), &ic);

        let cfg = shiftlab::render::haproxy::render(
            &plan,
            &shiftlab::render::haproxy::Options {
                stats_socket: std::path::Path::new("/run/shiftlab/haproxy.sock"),
                bootstrap_removed: false,
            },
        );
        match cfg {
            Some(cfg) => {
                // Bound on the IPv6 VIP alone, the backends reached over IPv6.
                let api6 = plan.vips.api6.unwrap();
                assert!(
                    cfg.contains(&format!("    bind [{api6}]:6443 transparent\n")),
                    "{cfg}"
                );
                assert!(cfg.contains("server v6-"), "{cfg}");
                assert!(cfg.contains("]:6443 check"), "{cfg}");
                assert_no_ipv4("the HAProxy config", &cfg);
                common::assert_haproxy_accepts(&cfg);
                golden(&format!("{method}.haproxy.cfg"), &cfg);
            }
            None => assert!(matches!(method, "sno" | "ipi"), "{method}"),
        }
        if method == "agent" {
            let a = agent_config(&spec, &plan);
            let v: yaml_serde::Value = yaml_serde::from_str(&a).unwrap();
            // The rendezvous host's IPv6 address: the only family.
            assert_eq!(v["rendezvousIP"], "fd00:6:142::b");
            golden("agent.agent-config.yaml", &a);
        }
    }
}
