//! `stop` and `start` on libvirt's test driver (`test:///default`: domains that
//! power off at once on a shutdown), with the start's API side against the
//! stand-in Kubernetes API on loopback: the plan's nodes' pending CSRs are
//! approved, the kubelets register and turn Ready, and start waits for that.
//! The test driver's state is per process, so this runs the library, not the
//! binary; the CLI's own checks (names, the 24-hour refusal) run the binary.
//! On IPI, metal3 syncs the nodes' power with their BareMetalHosts
//! (tests/support/metal3.rs) through the lab BMC serving the test driver's
//! domains on loopback.

mod common;
#[path = "support/fake_kube.rs"]
mod fake_kube;
#[path = "support/metal3.rs"]
mod metal3;

use std::time::Duration;

use shiftlab::backend::libvirt::Libvirt;
use shiftlab::backend::Wait;
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

    let backend = Libvirt::at("test:///default");
    let stopped = power::stop(
        &backend,
        &p,
        Duration::from_secs(5),
        Duration::from_millis(50),
    )
    .unwrap();
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
    let again = power::stop(
        &backend,
        &p,
        Duration::from_secs(5),
        Duration::from_millis(50),
    )
    .unwrap();
    assert!(again
        .iter()
        .filter(|o| o.node == "lab1-worker-0")
        .all(|o| o.action == "already-off"));

    let wait = Wait {
        timeout: Duration::from_secs(5),
        poll: Duration::from_millis(50),
        beat: Duration::from_secs(60),
    };
    let started = power::start(&backend, &p, wait).unwrap();
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
    let api = fake_kube::FakeKube::cluster_api(Vec::new(), Vec::new(), 0);
    let server = api.url();
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
    let wanted = power::wanted_ready(&backend, &p).unwrap();
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
    let puts: Vec<String> = api
        .seen()
        .into_iter()
        .filter(|s| s.method == "PUT")
        .map(|s| s.path)
        .collect();
    assert!(puts.iter().all(|p| p.contains("csr-good-")), "{puts:?}");
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

const BMC_PASSWORD: &str = "PLANTED-metal3-bmc-7731";

/// An IPI cluster on the test driver (its own node names: the test driver is
/// shared by the tests of this process), recorded in a state directory.
fn ipi_lab(
    home: &std::path::Path,
    cluster: &str,
) -> (shiftlab::state::StateDir, shiftlab::plan::Plan) {
    let text = format!(
        "cluster: {cluster}\ndomain: lab.test\ndistribution: okd\nrehearsal: true\nmethod: ipi\nctlplanes: 3\nworkers: 2\n\
         ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k']\n\
         libvirt:\n  uri: test:///default\n"
    );
    let mut p = common::plan_from_yaml(&text, "ipi.yaml", None);
    // The plan of a real install (what a release and a pull secret make): a
    // rehearsal runs no metal3.
    p.rehearsal = false;
    let state = shiftlab::state::StateDir::resolve(Some(&home.join("state")));
    state.cluster(cluster).write_plan(&p).unwrap();
    (state, p)
}

fn define(host: &Host, p: &shiftlab::plan::Plan, name: &str, run: bool) {
    let xml = domain_xml(
        p,
        p.node(name).unwrap(),
        Accel::Tcg,
        &NodePaths {
            ignition: None,
            console_log: "/tmp/x.log",
            cdrom: None,
        },
    );
    let d = host.conn.define_domain_xml(&xml).unwrap();
    if run {
        d.create().unwrap();
    }
}

fn active(host: &Host, name: &str) -> bool {
    host.domain(name).unwrap().unwrap().is_active().unwrap()
}

/// The lab BMC over the test driver's domains of `names`, on 127.0.0.1.
fn lab_bmc(
    rt: &tokio::runtime::Runtime,
    names: &[String],
    dir: &std::path::Path,
) -> shiftlab::redfish::Server {
    use shiftlab::redfish::machine_libvirt::{LibvirtConfig, LibvirtMachine, Scope};
    let m = LibvirtMachine::open(&LibvirtConfig {
        uri: "test:///default".into(),
        scope: Scope::Allow(names.to_vec()),
        pool: "default-pool".into(),
        state_dir: dir.to_path_buf(),
        max_image_bytes: 1 << 20,
        image_sources: shiftlab::redfish::source::ImageSources::anywhere(vec!["127.0.0.0/8"
            .parse()
            .unwrap()]),
        media_ca: None,
    })
    .unwrap();
    let service = std::sync::Arc::new(shiftlab::redfish::Service::new(
        std::sync::Arc::new(m),
        shiftlab::redfish::auth::Auth::new("admin", BMC_PASSWORD, Duration::from_secs(600)),
        "svc",
    ));
    rt.block_on(shiftlab::redfish::Server::start(
        "127.0.0.1:0".parse().unwrap(),
        None,
        service,
    ))
    .unwrap()
}

fn bmh(fake: &fake_kube::FakeKube) -> std::collections::BTreeMap<String, serde_json::Value> {
    fake.objects()
        .into_values()
        .filter(|o| o["kind"] == "BareMetalHost")
        .map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o))
        .collect()
}

fn ipi_api() -> fake_kube::FakeKube {
    use fake_kube::Served;
    let mut types = fake_kube::core_types();
    types.push(Served {
        group: "metal3.io",
        version: "v1alpha1",
        kind: "BareMetalHost",
        plural: "baremetalhosts",
        namespaced: true,
    });
    types.push(Served {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        namespaced: false,
    });
    types.push(Served {
        group: "certificates.k8s.io",
        version: "v1",
        kind: "CertificateSigningRequest",
        plural: "certificatesigningrequests",
        namespaced: false,
    });
    fake_kube::FakeKube::start(types)
}

#[test]
fn on_ipi_stop_takes_the_hosts_offline_so_metal3_does_not_power_them_back_on() {
    let home = tempfile::tempdir().unwrap();
    let (state, p) = ipi_lab(home.path(), "ipi2");
    let host = Host::open("test:///default").unwrap();
    let names: Vec<String> = p.nodes.iter().map(|n| n.name.clone()).collect();
    // ipi2-worker-1 was taken offline through metal3 before: its domain is off.
    for n in &names {
        define(&host, &p, n, n != "ipi2-worker-1");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = lab_bmc(&rt, &names, home.path());
    let fake = ipi_api();
    let ns = shiftlab::kube::baremetal::NAMESPACE;
    fake.insert(
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    );
    for n in &p.nodes {
        fake.insert(serde_json::json!({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": n.name, "namespace": ns},
            "spec": {"online": n.name != "ipi2-worker-1", "bootMACAddress": n.mac,
                "bmc": {"address": format!("redfish-virtualmedia+http://{}/redfish/v1/Systems/{}",
                    server.local_addr(), n.uuid), "credentialsName": format!("{}-bmc-secret", n.name)}}}));
    }
    let kubeconfig = state.cluster("ipi2").assets().kubeconfig();
    std::fs::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
    fake.write_kubeconfig(&kubeconfig);
    let metal3 = metal3::Metal3::start(&fake, "admin", BMC_PASSWORD);
    metal3.passes(2);

    // The rule bites: a node powered off under an online host comes back.
    host.domain("ipi2-worker-0")
        .unwrap()
        .unwrap()
        .destroy()
        .unwrap();
    metal3.passes(3);
    assert!(
        active(&host, "ipi2-worker-0"),
        "metal3 did not power the online host back on: {:?}",
        metal3.actions.lock().unwrap()
    );

    let sink = shiftlab::progress::Sink::memory();
    let r =
        power::stop_cluster(&state, "ipi2", None, false, Duration::from_secs(30), &sink).unwrap();
    let acts: Vec<(&str, &str)> = r
        .nodes
        .iter()
        .map(|o| (o.node.as_str(), o.action.as_str()))
        .collect();
    assert_eq!(acts[0], ("ipi2-worker-0", "metal3-off"), "{acts:?}");
    assert_eq!(acts[1], ("ipi2-worker-1", "already-off"), "{acts:?}");
    for cp in ["ipi2-ctlplane-0", "ipi2-ctlplane-1", "ipi2-ctlplane-2"] {
        assert!(acts[2..].contains(&(cp, "metal3-off")), "{acts:?}");
    }
    let mut offline = r.offline_hosts.clone();
    offline.sort();
    assert_eq!(
        offline,
        [
            "ipi2-ctlplane-0",
            "ipi2-ctlplane-1",
            "ipi2-ctlplane-2",
            "ipi2-worker-0"
        ],
        "the host that was offline before is not shiftlab's to bring back"
    );
    let hosts = bmh(&fake);
    assert!(
        hosts.values().all(|h| h["spec"]["online"] == false),
        "{hosts:?}"
    );
    // metal3 keeps syncing: the nodes stay off.
    metal3.passes(3);
    for n in &names {
        assert!(
            !active(&host, n),
            "{n} is running again after stop: {:?}",
            metal3.actions.lock().unwrap()
        );
    }
    let recorded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.cluster("ipi2").power()).unwrap()).unwrap();
    assert_eq!(recorded["offline_hosts"].as_array().unwrap().len(), 4);
    // A second stop changes nothing and keeps the record of what to bring back.
    let again =
        power::stop_cluster(&state, "ipi2", None, false, Duration::from_secs(30), &sink).unwrap();
    assert!(
        again.nodes.iter().all(|o| o.action == "already-off"),
        "{again:?}"
    );
    assert_eq!(again.offline_hosts.len(), 4);

    // Start: metal3 runs on the control planes, and comes back after the API.
    metal3.run(false);
    let req = power::StartRequest {
        kubeconfig: None,
        no_api: false,
        timeout: Duration::from_secs(30),
        interval: Duration::from_millis(100),
    };
    let r = power::start_cluster(&state, "ipi2", None, &req, &sink).unwrap();
    metal3.run(true);
    assert!(r.offline_hosts.is_empty(), "{r:?}");
    let hosts = bmh(&fake);
    for n in &offline {
        assert_eq!(hosts[n]["spec"]["online"], true, "{n}");
    }
    assert_eq!(hosts["ipi2-worker-1"]["spec"]["online"], false);
    metal3.passes(3);
    for n in &offline {
        assert!(
            active(&host, n),
            "{n} is off after start: {:?}",
            metal3.actions.lock().unwrap()
        );
    }
    assert!(
        r.api.as_ref().is_some_and(|a| a.not_ready.is_empty()),
        "{r:?}"
    );
    drop(metal3);
    rt.block_on(server.shutdown());
}

#[test]
fn on_ipi_the_wait_for_metal3_beats_with_the_hosts_still_on() {
    let home = tempfile::tempdir().unwrap();
    let (state, p) = ipi_lab(home.path(), "ipi4");
    let host = Host::open("test:///default").unwrap();
    for n in ["ipi4-worker-0", "ipi4-worker-1"] {
        define(&host, &p, n, true);
    }
    // metal3 is not running: nothing ever reports the hosts powered off.
    let fake = ipi_api();
    let ns = shiftlab::kube::baremetal::NAMESPACE;
    for n in &p.nodes {
        fake.insert(
            serde_json::json!({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": n.name, "namespace": ns}, "spec": {"online": true}}),
        );
    }
    let kubeconfig = state.cluster("ipi4").assets().kubeconfig();
    std::fs::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
    fake.write_kubeconfig(&kubeconfig);
    let m = power::Metal3::new(&kubeconfig, Duration::from_millis(50)).unwrap();
    let sink = shiftlab::progress::Sink::memory();
    let wait = Wait {
        timeout: Duration::from_millis(600),
        poll: Duration::from_millis(50),
        beat: Duration::from_millis(100),
    };
    let mut workers = p.clone();
    workers.nodes.retain(|n| n.name.contains("worker"));
    let out = power::stop_with(
        &Libvirt::at("test:///default"),
        &workers,
        Some(&m),
        wait,
        &mut |_| Ok(()),
        &sink,
    )
    .unwrap();
    // Not reported off in time: shut down by the backend.
    assert!(out.iter().all(|o| o.action == "acpi-shutdown"), "{out:?}");
    let lines: Vec<String> = sink.lines().into_iter().map(|(_, l)| l).collect();
    assert!(
        lines.iter().any(|l| l
            .starts_with("    still waiting for metal3 to power the BareMetalHosts off (")
            && l.ends_with("): ipi4-worker-0, ipi4-worker-1 still on")),
        "{lines:?}"
    );
}

#[test]
fn on_ipi_stop_refuses_when_the_api_does_not_answer_unless_forced() {
    let home = tempfile::tempdir().unwrap();
    let (state, p) = ipi_lab(home.path(), "ipi3");
    let host = Host::open("test:///default").unwrap();
    define(&host, &p, "ipi3-worker-0", true);
    // A loopback port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = state.cluster("ipi3").assets().kubeconfig();
    std::fs::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n\
             users:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .unwrap();
    let sink = shiftlab::progress::Sink::memory();
    let e = power::stop_cluster(&state, "ipi3", None, false, Duration::from_secs(5), &sink)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not stopping ipi3: its API does not answer")
            && e.contains("BareMetalHosts")
            && e.contains("--force"),
        "{e}"
    );
    assert!(active(&host, "ipi3-worker-0"), "a refusal changes nothing");
    assert!(!state.cluster("ipi3").power().exists());
    // Forced: stopped as without metal3, and said so.
    let r = power::stop_cluster(&state, "ipi3", None, true, Duration::from_secs(5), &sink).unwrap();
    assert!(!active(&host, "ipi3-worker-0"));
    assert!(
        r.note
            .as_deref()
            .is_some_and(|n| n.contains("the API does not answer")),
        "{r:?}"
    );
    assert!(
        sink.lines()
            .iter()
            .any(|(_, l)| l.starts_with("warning: stopping ipi3 anyway (--force)")),
        "{:?}",
        sink.lines()
    );
    // A start after a stop that set a host offline, the API not answering: the
    // nodes are powered on, the host is still to bring back, and start says how.
    let mut last: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.cluster("ipi3").power()).unwrap()).unwrap();
    last["offline_hosts"] = serde_json::json!(["ipi3-worker-0"]);
    std::fs::write(state.cluster("ipi3").power(), last.to_string()).unwrap();
    let req = power::StartRequest {
        kubeconfig: None,
        no_api: false,
        timeout: Duration::from_secs(1),
        interval: Duration::from_millis(200),
    };
    let e = format!(
        "{:#}",
        power::start_cluster(&state, "ipi3", None, &req, &sink).unwrap_err()
    );
    assert!(
        e.contains("ipi3 was started but its BareMetalHosts ipi3-worker-0 are still offline")
            && e.contains("patch bmh"),
        "{e}"
    );
    assert!(active(&host, "ipi3-worker-0"));
    let last: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.cluster("ipi3").power()).unwrap()).unwrap();
    assert_eq!(last["action"], "start");
    assert_eq!(last["offline_hosts"], serde_json::json!(["ipi3-worker-0"]));
    // The same through the binary, off a terminal: the wait for the API beats,
    // naming the hosts it is to bring back.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_shiftlab"))
        .args(["start", "ipi3", "--timeout", "5", "--interval", "1"])
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("SHIFTLAB_HOME", home.path().join("state"))
        .env("SHIFTLAB_HEARTBEAT_SECS", "1")
        .env_remove("LIBVIRT_DEFAULT_URI")
        .env_remove("XDG_DATA_HOME")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.lines().any(|l| l.starts_with(
            "    still waiting for the API to set the BareMetalHosts ipi3-worker-0 online ("
        )),
        "{err}"
    );
    host.domain("ipi3-worker-0")
        .unwrap()
        .unwrap()
        .destroy()
        .unwrap();
    // A rehearsal runs no metal3: its API is not asked.
    let mut rehearsal = p.clone();
    rehearsal.rehearsal = true;
    state.cluster("ipi3").write_plan(&rehearsal).unwrap();
    host.domain("ipi3-worker-0")
        .unwrap()
        .unwrap()
        .create()
        .unwrap();
    let r =
        power::stop_cluster(&state, "ipi3", None, false, Duration::from_secs(5), &sink).unwrap();
    assert!(!active(&host, "ipi3-worker-0"));
    assert_eq!(r.note, None);
}
