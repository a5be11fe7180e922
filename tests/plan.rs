//! Properties of plan derivation that must hold for any cluster file.

use std::collections::HashSet;

use shiftlab::plan::{self, RecordType};
use shiftlab::spec::{self, Env, Role};

fn spec_of(text: &str) -> spec::ClusterSpec {
    let base = "distribution: okd\nssh_keys: ['ssh-ed25519 AAAAtest t@t']\n";
    spec::from_str(&format!("{base}{text}"), "test.yaml", &Env::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .spec
}

#[test]
fn adding_workers_never_changes_existing_nodes() {
    let small = plan::derive(&spec_of("cluster: lab1\nworkers: 2\n"));
    for n in [3, 10, 50, 150] {
        let big = plan::derive(&spec_of(&format!("cluster: lab1\nworkers: {n}\n")));
        for node in &small.nodes {
            assert_eq!(
                big.node(&node.name),
                Some(node),
                "{} changed with {n} workers",
                node.name
            );
        }
        assert_eq!(big.nodes_with_role(Role::Worker).count(), n);
    }
}

#[test]
fn macs_ips_and_uuids_are_unique_and_stable_per_name() {
    let p = plan::derive(&spec_of("cluster: lab1\nworkers: 150\n"));
    let macs: HashSet<_> = p.nodes.iter().map(|n| &n.mac).collect();
    let ips: HashSet<_> = p.nodes.iter().map(|n| n.ip).collect();
    let uuids: HashSet<_> = p.nodes.iter().map(|n| &n.uuid).collect();
    assert_eq!(macs.len(), p.nodes.len());
    assert_eq!(ips.len(), p.nodes.len());
    assert_eq!(uuids.len(), p.nodes.len());
    for n in &p.nodes {
        assert!(n.mac.starts_with("52:54:00:"), "{}", n.mac);
        let ip = n.ipv4().expect("an IPv4 lab's node has an IPv4 address");
        assert!(p.network.cidr.unwrap().contains(&ip));
        let dhcp = p.network.dhcp.as_ref().unwrap();
        assert!(ip < dhcp.start, "{ip} inside DHCP range");
    }
    // Another cluster with the same node layout gets other MACs and UUIDs.
    let q = plan::derive(&spec_of(
        "cluster: lab2\nworkers: 150\nnetwork:\n  cidr: 192.168.127.0/24\n",
    ));
    assert!(q.nodes.iter().all(|n| !macs.contains(&n.mac)));
    assert!(q.nodes.iter().all(|n| !uuids.contains(&n.uuid)));
}

#[test]
fn every_node_has_a_record_a_ptr_and_a_reservation() {
    let p = plan::derive(&spec_of("cluster: lab1\nworkers: 2\n"));
    for n in &p.nodes {
        assert!(p
            .dns
            .iter()
            .any(|r| r.kind == RecordType::A && r.name == n.fqdn && r.value == n.ip.to_string()));
        assert!(p
            .dns
            .iter()
            .any(|r| r.kind == RecordType::PTR && r.value == n.fqdn));
        assert!(p
            .network
            .reservations
            .iter()
            .any(|r| r.mac == n.mac && r.ip == n.ip && r.hostname == n.name));
    }
    let names: Vec<_> = p.dns.iter().map(|r| r.name.as_str()).collect();
    for want in [
        "api.lab1.lab.test",
        "api-int.lab1.lab.test",
        "*.apps.lab1.lab.test",
    ] {
        assert!(names.contains(&want), "{want}");
    }
}

#[test]
fn load_balancer_backends_follow_the_topology() {
    let upi = plan::derive(&spec_of("cluster: lab1\nworkers: 2\n"));
    let lb = upi.load_balancer.as_ref().unwrap();
    let api = lb.frontends.iter().find(|f| f.port == 6443).unwrap();
    assert_eq!(api.backends.len(), 4);
    assert_eq!(api.backends.iter().filter(|b| b.bootstrap).count(), 1);
    let https = lb.frontends.iter().find(|f| f.port == 443).unwrap();
    assert!(https.backends.iter().all(|b| b.node.contains("worker")));
    assert_eq!(upi.network.host_addresses, vec![upi.vips.api.unwrap()]);

    let compact = plan::derive(&spec_of("cluster: c\nworkers: 0\n"));
    let https = compact
        .load_balancer
        .as_ref()
        .unwrap()
        .frontends
        .iter()
        .find(|f| f.port == 443)
        .unwrap();
    assert_eq!(https.backends.len(), 3);
    assert!(https.backends.iter().all(|b| b.node.contains("ctlplane")));

    let sno = plan::derive(&spec_of("cluster: s\nmethod: sno\n"));
    assert!(sno.load_balancer.is_none());
    assert_eq!(sno.vips.api_ip(), sno.nodes[0].ip);
    assert!(sno.network.host_addresses.is_empty());

    let ipi = plan::derive(&spec_of("cluster: i\nmethod: ipi\n"));
    assert!(ipi.load_balancer.is_none());
    assert!(ipi.nodes.iter().all(|n| n.bmc.is_some()));
    assert!(ipi.nodes.iter().all(|n| n.role != Role::Bootstrap));
}

/// The installer's bootstrap VM joins the network's own bridge by default, or the
/// veth-linked bridge the cluster file asks for (named `baremetal` unless named).
#[test]
fn ipi_external_bridge_choices() {
    let own = plan::derive(&spec_of("cluster: i\nmethod: ipi\n"));
    assert!(own.network.veth.is_none());
    assert_eq!(own.network.external_bridge(), own.network.bridge);
    let veth = plan::derive(&spec_of(
        "cluster: i\nmethod: ipi\nnetwork:\n  external_bridge: veth\n",
    ));
    let v = veth.network.veth.as_ref().unwrap();
    assert_eq!(v.bridge, "baremetal");
    assert_eq!(v.nat, veth.network.bridge);
    assert_eq!(veth.network.external_bridge(), "baremetal");
    let named = plan::derive(&spec_of(
        "cluster: i\nmethod: ipi\nnetwork:\n  external_bridge: veth\n  external_bridge_name: bm-i\n",
    ));
    assert_eq!(named.network.external_bridge(), "bm-i");
    assert!(
        plan::render_table(&named).contains("installer's bootstrap VM on bm-i (made by shiftlab")
    );
    // A plan with it reads back (plan.json), one without stays as it was.
    let back: plan::Plan = serde_json::from_str(&serde_json::to_string(&named).unwrap()).unwrap();
    assert_eq!(back, named);
    assert!(!serde_json::to_string(&own).unwrap().contains("veth"));
}

#[test]
fn secrets_never_reach_the_plan() {
    let s = spec_of("cluster: i\nmethod: ipi\nbmc:\n  password: hunter2-very-secret\n");
    assert_eq!(s.bmc.password.as_deref(), Some("hunter2-very-secret"));
    let json = serde_json::to_string(&plan::derive(&s)).unwrap();
    assert!(!json.contains("hunter2"));
    assert!(!serde_json::to_string(&s).unwrap().contains("hunter2"));
}

#[test]
fn iso_nodes_show_their_boot_path_and_sno_names_point_at_the_node() {
    let sno = plan::derive(&spec_of("cluster: s\nmethod: sno\n"));
    let table = plan::render_table(&sno);
    let row = table
        .lines()
        .find(|l| l.starts_with("s-ctlplane-0"))
        .expect("the node's row");
    assert!(row.contains("iso, then disk"), "{row}");
    // No load balancer in front of one node: api, api-int and *.apps are the node.
    let ip = sno.nodes[0].ip.to_string();
    for name in ["api.", "api-int.", "*.apps."] {
        let r = sno
            .dns
            .iter()
            .find(|r| r.name.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} record"));
        assert_eq!(r.value, ip, "{name}");
    }
    let agent = plan::derive(&spec_of("cluster: a\nmethod: agent\nworkers: 2\n"));
    let table = plan::render_table(&agent);
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("a-ctlplane-") || l.starts_with("a-worker-"))
        // the node table's rows, not the DNS names (`a-worker-0.a.example.com`)
        .filter(|l| !l.split_whitespace().next().unwrap_or("").contains('.'))
        .collect();
    assert_eq!(rows.len(), 5);
    assert!(rows.iter().all(|r| r.contains("iso, then disk")), "{table}");
}
