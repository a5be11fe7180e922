//! The libvirt layer against libvirt's test driver (`test:///default`): no daemon,
//! a fake host with a network `default` (192.168.122.0/24) and a domain `test`
//! that shiftlab does not own. The fake host is shared by every connection of the
//! process, so the scenarios run in one test, one after the other.

mod common;

use shiftlab::doctor::preflight;
use shiftlab::libvirt::xml::write::{domain_xml, Accel, NodePaths};
use shiftlab::libvirt::{destroy, inspect, ledger, ledger::Ledger, Host};
use shiftlab::plan;
use shiftlab::state::{ClusterName, StateDir};

fn plan_of(extra: &str) -> plan::Plan {
    let text = format!(
        "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nlibvirt:\n  uri: test:///default\n{extra}"
    );
    common::plan_from_yaml(&text, "t.yaml", None)
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
            cdrom: None,
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

/// The real installer's IPI bootstrap VM takes 20 GiB next to the nodes' disks:
/// on the test driver's pool (100 GiB), 3 control planes and 4 workers of a real
/// cluster (85 GiB) fit, and with the bootstrap VM do not.
fn preflight_counts_the_ipi_bootstrap_vm() {
    let host = Host::open("test:///default").unwrap();
    let mut p = common::plan_from_yaml(
        "cluster: ipi9\ndistribution: okd\nrehearsal: true\nmethod: ipi\nworkers: 4\n\
         ssh_keys: ['ssh-ed25519 AAAA k']\nlibvirt:\n  uri: test:///default\n  pool: default-pool\n",
        "t.yaml",
        None,
    );
    let problems = |p: &plan::Plan| {
        preflight::check(&host, p, &Ledger::default(), None)
            .unwrap()
            .into_iter()
            .filter(|l| l.starts_with("pool default-pool"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        problems(&p),
        Vec::<String>::new(),
        "a rehearsal's disks are small"
    );
    // The plan of a real install (what a release and a pull secret make).
    p.rehearsal = false;
    let text = problems(&p).join("\n");
    assert!(
        text.contains("the new nodes are expected to use 105 GiB (with the installer's bootstrap VM (<infraID>-live-provisioner"),
        "{text}"
    );
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
            cdrom: None,
        },
    );
    // The test driver has no pool named shiftlab: point the disk at its own pool.
    let xml = xml.replace("pool='shiftlab'", "pool='default-pool'");
    host.conn.define_domain_xml(&xml).unwrap();
    let clusters = inspect::list(&host).unwrap();
    assert_eq!(clusters.len(), 1);
    assert_eq!(clusters[0].cluster, "lab1");
    assert_eq!(clusters[0].nodes, 1);

    let dir = tempfile::tempdir().unwrap();
    let state = StateDir {
        root: dir.path().into(),
    };
    let name = |n: &str| ClusterName::parse(n).unwrap();
    let removed = destroy::destroy(&host, &name("other"), &state, false).unwrap();
    assert!(removed.is_empty(), "{removed:?}");
    let removed = destroy::destroy(&host, &name("lab1"), &state, false).unwrap();
    assert_eq!(removed, vec!["domain lab1-worker-0 (worker)".to_string()]);
    let names: Vec<String> = host
        .conn
        .list_all_domains(0)
        .unwrap()
        .iter()
        .map(|d| d.name().unwrap())
        .collect();
    assert_eq!(names, vec!["test".to_string()]);
    assert!(destroy::destroy(&host, &name("lab1"), &state, false)
        .unwrap()
        .is_empty());
}

/// A volume in an owned domain's CD-ROM goes only when shiftlab's ledger owns it
/// (or shiftlab's BMC streamed it in): the user's ISO stays.
fn destroy_takes_only_ledger_volumes() {
    let host = Host::open("test:///default").unwrap();
    let pool = host.pool("default-pool").unwrap().unwrap();
    let vol = |n: &str| {
        virt::storage_vol::StorageVol::create_xml(
            &pool,
            &format!("<volume><name>{n}</name><capacity>1048576</capacity></volume>"),
            0,
        )
        .unwrap();
    };
    for n in ["lab1-worker-0.qcow2", "user.iso", "shiftlab-media-0123.iso"] {
        vol(n);
    }
    let p = plan_of("");
    let node = p.node("lab1-worker-0").unwrap();
    let cdrom = |v: &str, dev: &str| {
        format!("<disk type='volume' device='cdrom'><source pool='default-pool' volume='{v}'/><target dev='{dev}' bus='sata'/><readonly/></disk>")
    };
    let xml = domain_xml(
        &p,
        node,
        Accel::Tcg,
        &NodePaths {
            ignition: None,
            console_log: "/tmp/x.log",
            cdrom: None,
        },
    )
    .replace("pool='shiftlab'", "pool='default-pool'")
    .replace(
        "</devices>",
        &format!(
            "{}{}</devices>",
            cdrom("user.iso", "sdb"),
            cdrom("shiftlab-media-0123.iso", "sdc")
        ),
    );
    host.conn.define_domain_xml(&xml).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir {
        root: dir.path().into(),
    };
    ledger::save(
        &state.cluster("lab1"),
        &Ledger {
            format: ledger::LEDGER_FORMAT,
            uri: "test:///default".into(),
            pool: "default-pool".into(),
            volumes: vec!["lab1-worker-0.qcow2".into()],
            base_volumes: vec![],
        },
    )
    .unwrap();
    let removed =
        destroy::destroy(&host, &ClusterName::parse("lab1").unwrap(), &state, false).unwrap();
    let text = removed.join("\n");
    assert!(text.contains("volume lab1-worker-0.qcow2"), "{text}");
    assert!(text.contains("volume shiftlab-media-0123.iso"), "{text}");
    assert!(
        text.contains("volume default-pool/user.iso left: not shiftlab's"),
        "{text}"
    );
    let left: Vec<String> = pool
        .list_all_volumes(0)
        .unwrap()
        .iter()
        .map(|v| v.name().unwrap())
        .collect();
    assert!(left.contains(&"user.iso".to_string()), "{left:?}");
    assert!(
        !left.contains(&"lab1-worker-0.qcow2".to_string()),
        "{left:?}"
    );
    assert!(!state.cluster("lab1").exists());
    Host::volume(&pool, "user.iso")
        .unwrap()
        .unwrap()
        .delete(0)
        .unwrap();
}

/// `libvirt.graphics: vnc`: the domain defines and starts, and what libvirt
/// reports back is the plan's (loopback, no difference to redefine for).
fn a_screen_defines_and_starts() {
    use shiftlab::libvirt::apply::domain_differences;
    let host = Host::open("test:///default").unwrap();
    let p = plan_of("  graphics: vnc\n");
    let node = p.node("lab1-ctlplane-0").unwrap();
    let xml = domain_xml(
        &p,
        node,
        Accel::Tcg,
        &NodePaths {
            ignition: None,
            console_log: "/tmp/x.log",
            cdrom: None,
        },
    );
    let d = host.conn.define_domain_xml(&xml).unwrap();
    d.create().unwrap();
    let back = d.xml_desc(0).unwrap();
    let doc = roxmltree::Document::parse(&back).unwrap();
    let g = doc
        .descendants()
        .find(|n| n.has_tag_name("graphics"))
        .unwrap_or_else(|| panic!("no graphics in {back}"));
    assert_eq!(g.attribute("type"), Some("vnc"), "{back}");
    assert_eq!(g.attribute("listen"), Some("127.0.0.1"), "{back}");
    assert!(
        doc.descendants().any(|n| n.has_tag_name("video")),
        "no video device in {back}"
    );
    assert_eq!(
        domain_differences(&back, node, shiftlab::spec::Graphics::Vnc),
        Vec::<String>::new()
    );
    assert_eq!(
        domain_differences(&back, node, shiftlab::spec::Graphics::None),
        ["graphics is vnc, the plan says none"]
    );
    d.destroy().unwrap();
    d.undefine().unwrap();
}

#[test]
fn test_driver_scenarios() {
    preflight_names_every_conflict_and_creates_nothing();
    preflight_counts_the_ipi_bootstrap_vm();
    destroy_and_list_ignore_what_is_not_ours();
    destroy_takes_only_ledger_volumes();
    a_screen_defines_and_starts();
}
