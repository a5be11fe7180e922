//! `stop` and `start` on libvirt's test driver (`test:///default`: domains that
//! power off at once on a shutdown), with the start's API side against the
//! stand-in Kubernetes API on loopback: the plan's nodes' pending CSRs are
//! approved, the kubelets register and turn Ready, and start waits for that.
//! The test driver's state is per process, so this runs the library, not the
//! binary; the CLI's own checks (names, the 24-hour refusal) run the binary.

mod common;

use std::time::Duration;

use shiftlab::cluster::power;
use shiftlab::kube::csr::NodeIdentity;
use shiftlab::libvirt::xml::write::{domain_xml, Accel, NodePaths};
use shiftlab::libvirt::Host;

fn plan() -> shiftlab::plan::Plan {
    let text = std::fs::read_to_string(common::repo().join("tests/fixtures/csr/cluster.yaml"))
        .unwrap()
        + "libvirt:\n  uri: test:///default\n";
    common::plan_from_yaml(&text, "cluster.yaml", None)
}

#[test]
fn stop_then_start_brings_the_nodes_back_with_their_csrs_approved() {
    let p = plan();
    let host = Host::open("test:///default").unwrap();
    // The nodes left of an install: a control plane and two workers (the bootstrap
    // was removed; the recorded CSRs are theirs).
    for name in ["lab1-ctlplane-0", "lab1-worker-0", "lab1-worker-1"] {
        let node = p.node(name).unwrap();
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
        host.conn.define_domain_xml(&xml).unwrap().create().unwrap();
    }

    let stopped =
        power::stop(&host, &p, Duration::from_secs(5), Duration::from_millis(50)).unwrap();
    let order: Vec<(&str, &str)> = stopped
        .iter()
        .map(|o| (o.node.as_str(), o.action.as_str()))
        .collect();
    // Workers first, then the rest; the removed bootstrap and absent control planes said so.
    assert_eq!(order[0], ("lab1-worker-0", "acpi-shutdown"));
    assert_eq!(order[1], ("lab1-worker-1", "acpi-shutdown"));
    assert!(
        order[2..].contains(&("lab1-ctlplane-0", "acpi-shutdown")),
        "{order:?}"
    );
    assert!(
        order[2..].contains(&("lab1-bootstrap", "absent")),
        "{order:?}"
    );
    for name in ["lab1-ctlplane-0", "lab1-worker-0", "lab1-worker-1"] {
        assert!(!host.domain(name).unwrap().unwrap().is_active().unwrap());
    }
    // Again: nothing to do, and said so.
    let again = power::stop(&host, &p, Duration::from_secs(5), Duration::from_millis(50)).unwrap();
    assert!(again
        .iter()
        .filter(|o| o.node == "lab1-worker-0")
        .all(|o| o.action == "already-off"));

    let started = power::start(&host, &p).unwrap();
    let names: Vec<&str> = started
        .iter()
        .filter(|o| o.action == "started")
        .map(|o| o.node.as_str())
        .collect();
    assert_eq!(
        names,
        ["lab1-ctlplane-0", "lab1-worker-0", "lab1-worker-1"],
        "control planes first"
    );

    // The API side: the workers' client CSRs are Pending in the recording; once
    // approved their kubelets register and report Ready.
    let (server, puts) = common::kube_api::stand_in_api();
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: lab1\n  cluster:\n    server: {server}\n\
             contexts:\n- name: admin\n  context:\n    cluster: lab1\n    user: admin\n\
             current-context: admin\nusers:\n- name: admin\n  user:\n    token: test-token\n"
        ),
    )
    .unwrap();
    let wanted = power::wanted_ready(&host, &p).unwrap();
    assert_eq!(wanted.len(), 3);
    let r = shiftlab::kube::ready::bring_back_blocking(
        &kubeconfig,
        &NodeIdentity::from_plan(&p),
        &wanted,
        None,
        Duration::from_secs(30),
        Duration::from_millis(200),
    )
    .unwrap();
    assert!(r.not_ready.is_empty(), "{r:?}");
    assert_eq!(
        r.ready,
        ["lab1-ctlplane-0", "lab1-worker-0", "lab1-worker-1"]
    );
    assert!(
        r.approved.contains(&"csr-good-client-worker-0".to_string()),
        "{r:?}"
    );
    assert!(
        r.approved
            .contains(&"csr-good-client-worker-1-fqdn".to_string()),
        "{r:?}"
    );
    // Only the plan's nodes' CSRs were approved: the hostile ones never.
    assert!(
        puts.lock().unwrap().iter().all(|p| p.contains("csr-good-")),
        "{:?}",
        puts.lock().unwrap()
    );
}

#[test]
fn stop_is_refused_within_a_day_of_the_certificates_unless_forced() {
    let home = tempfile::tempdir().unwrap();
    let f = common::rehearsal_file(home.path(), "");
    let out = common::shiftlab(&["plan", "-f", &f, "-o", "json"], home.path());
    let dir = home.path().join("state/clusters/lab1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plan.json"), &out.stdout).unwrap();
    let now = power::now();
    std::fs::write(
        dir.join("install-state.json"),
        format!(
            "{{\"format\": 1, \"cluster\": \"lab1\", \"targets\": {{\"ignition\": {{\"status\": \"done\", \"at\": {}}}}}}}",
            now - 3 * 3600
        ),
    )
    .unwrap();
    let out = common::shiftlab(&["stop", "lab1"], home.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not stopping lab1")
            && err.contains("first rotation")
            && err.contains("--force"),
        "{err}"
    );
    assert!(!dir.join("power.json").exists());
    // Forced: it goes ahead (the test driver of this process has no domain: all absent).
    let out = common::shiftlab(&["stop", "lab1", "--force", "-o", "json"], home.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["action"], "stop");
    assert!(dir.join("power.json").is_file());
    // Names are checked before anything runs.
    let out = common::shiftlab(&["start", "Lab1"], home.path());
    assert_eq!(out.status.code(), Some(2));
}
