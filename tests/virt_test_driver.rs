//! The libvirt layer against libvirt's test driver (`test:///default`): no daemon,
//! a fake host with a network `default` (192.168.122.0/24) and a domain `test`
//! that shiftlab does not own. The fake host is shared by every connection of the
//! process, so the scenarios run in one test, one after the other.

use shiftlab::plan;
use shiftlab::render::libvirt::{domain_xml, Accel, NodePaths};
use shiftlab::spec::{self, Env};
use shiftlab::virt::{destroy, inspect, ledger::Ledger, preflight, Host};

fn plan_of(extra: &str) -> plan::Plan {
    let text = format!(
        "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nlibvirt:\n  uri: test:///default\n{extra}"
    );
    plan::derive(
        &spec::from_str(&text, "t.yaml", &Env::default())
            .unwrap()
            .spec,
    )
}

fn preflight_names_every_conflict_and_creates_nothing() {
    let host = Host::open("test:///default").unwrap();
    let p = plan_of("network:\n  cidr: 192.168.122.0/24\n");
    // A domain with one of our names that is not ours.
    let squatter = p.node("lab1-ctlplane-0").unwrap();
    let xml = domain_xml(
        &p,
        squatter,
        Accel::Tcg,
        &NodePaths {
            ignition: None,
            console_log: "/tmp/x.log",
        },
    )
    .replace("<metadata>", "<!--")
    .replace("</metadata>", "-->");
    host.conn.define_domain_xml(&xml).unwrap();
    let domains_before = host.conn.list_all_domains(0).unwrap().len();
    let problems = preflight::check(&host, &p, &Ledger::default(), None).unwrap();
    let text = problems.join("\n");
    assert!(
        text.contains("overlaps 192.168.122.0/24 of libvirt network default"),
        "{text}"
    );
    assert!(
        text.contains(
            "domain lab1-ctlplane-0: a libvirt domain of that name exists and is not shiftlab's"
        ),
        "{text}"
    );
    assert!(text.contains("image: no base image given"), "{text}");
    assert_eq!(host.conn.list_all_domains(0).unwrap().len(), domains_before);
    host.conn
        .lookup_domain_by_name("lab1-ctlplane-0")
        .unwrap()
        .undefine()
        .unwrap();
}

fn destroy_and_list_ignore_what_is_not_ours() {
    let host = Host::open("test:///default").unwrap();
    let p = plan_of("");
    // One domain of ours, and the driver's own `test` domain.
    let node = p.node("lab1-worker-0").unwrap();
    let xml = domain_xml(
        &p,
        node,
        Accel::Tcg,
        &NodePaths {
            ignition: None,
            console_log: "/tmp/x.log",
        },
    );
    // The test driver has no pool named shiftlab: point the disk at its own pool.
    let xml = xml.replace("pool='shiftlab'", "pool='default-pool'");
    host.conn.define_domain_xml(&xml).unwrap();
    let clusters = inspect::list(&host).unwrap();
    assert_eq!(clusters.len(), 1);
    assert_eq!(clusters[0].cluster, "lab1");
    assert_eq!(clusters[0].nodes, 1);

    let state = tempfile::tempdir().unwrap();
    let removed = destroy::destroy(&host, "other", state.path(), false).unwrap();
    assert!(removed.is_empty(), "{removed:?}");
    let removed = destroy::destroy(&host, "lab1", state.path(), false).unwrap();
    assert_eq!(removed, vec!["domain lab1-worker-0 (worker)".to_string()]);
    let names: Vec<String> = host
        .conn
        .list_all_domains(0)
        .unwrap()
        .iter()
        .map(|d| d.name().unwrap())
        .collect();
    assert_eq!(names, vec!["test".to_string()]);
    assert!(destroy::destroy(&host, "lab1", state.path(), false)
        .unwrap()
        .is_empty());
}

#[test]
fn test_driver_scenarios() {
    preflight_names_every_conflict_and_creates_nothing();
    destroy_and_list_ignore_what_is_not_ours();
}
