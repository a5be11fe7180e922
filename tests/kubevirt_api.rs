//! The KubeVirt backend through kube-rs against a loopback fake API server
//! (tests/support/fake_kube.rs): apply, resume after `kill -9`, destroy,
//! ownership, and bad input refused before anything is created. The full
//! rehearsal-style run is the real binary: `shiftlab create cluster`, then
//! `shiftlab destroy cluster`. Nothing leaves 127.0.0.1.

mod common;
#[path = "support/fake_kube.rs"]
mod fake_kube;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_kube::{core_types, kubevirt_types, multus_types, FakeKube};
use serde_json::json;
use shiftlab::kubevirt::apply::{self, Ledger};
use shiftlab::kubevirt::render::{self, Inputs, Kind, Object};
use shiftlab::kubevirt::OWNER_LABEL;
use shiftlab::plan::Plan;

/// How long the library's destroy waits in these tests (the fake finishes a
/// deletion within a few requests).
const WAIT: Duration = Duration::from_secs(30);

fn all_types() -> Vec<fake_kube::Served> {
    let mut t = core_types();
    t.extend(kubevirt_types());
    t.extend(multus_types());
    t
}

/// A cluster file for `fake` in `home` (its kubeconfig written beside it).
fn cluster_file(home: &Path, fake: &FakeKube, network: &str, extra: &str) -> std::path::PathBuf {
    fake.write_kubeconfig(&home.join("kubeconfig"));
    let f = home.join("kv1.yaml");
    std::fs::write(
        &f,
        format!(
            "cluster: kv1\ndomain: lab.test\ndistribution: okd\nrehearsal: true\nctlplanes: 3\nworkers: 2\n\
             ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k']\n\
             backend: kubevirt\nkubevirt:\n  kubeconfig: kubeconfig\n  network: {network}\n  namespace: kv1-lab\n\
             \x20 image: docker://quay.io/containerdisks/fedora-coreos:stable\n  http_url: http://127.0.0.1:8080\n{extra}"
        ),
    )
    .unwrap();
    f
}

fn plan_of(file: &Path) -> Plan {
    let text = std::fs::read_to_string(file).unwrap();
    common::plan_from_yaml(&text, "kv1.yaml", file.parent())
}

fn objects(plan: &Plan) -> Vec<Object> {
    let userdata: BTreeMap<String, String> = plan
        .nodes
        .iter()
        .map(|n| (n.name.clone(), format!("{{\"pointer\":\"{}\"}}", n.name)))
        .collect();
    render::render(
        plan,
        &Inputs {
            image: "docker://quay.io/containerdisks/fedora-coreos:stable",
            userdata: &userdata,
        },
    )
    .unwrap()
}

struct Lib {
    rt: tokio::runtime::Runtime,
    client: kube::Client,
    plan: Plan,
    _home: tempfile::TempDir,
}

fn lib(fake: &FakeKube, network: &str) -> Lib {
    let home = tempfile::tempdir().unwrap();
    let file = cluster_file(home.path(), fake, network, "");
    let plan = plan_of(&file);
    let rt = shiftlab::runtime::current_thread().unwrap();
    let client = rt
        .block_on(apply::client(&home.path().join("kubeconfig"), None))
        .unwrap();
    Lib {
        rt,
        client,
        plan,
        _home: home,
    }
}

impl Lib {
    fn apply(&self, ledger: &mut Ledger) -> anyhow::Result<apply::Report> {
        let objs = objects(&self.plan);
        self.rt.block_on(apply::apply(
            &self.client,
            "kv1",
            &objs,
            ledger,
            &|_l: &Ledger| Ok(()),
        ))
    }
}

fn ledger(plan: &Plan) -> Ledger {
    Ledger::of(plan.kubevirt.as_ref().unwrap())
}

#[test]
fn apply_creates_every_object_by_server_side_apply_then_changes_nothing() {
    let fake = FakeKube::start(all_types());
    let l = lib(&fake, "pod");
    let mut led = ledger(&l.plan);
    let r = l.apply(&mut led).unwrap();
    let want = l.plan.kubevirt.as_ref().unwrap().objects.clone();
    assert_eq!(r.created, want);
    assert!(led.owns_namespace);
    // Every write was a server-side apply by field manager shiftlab.
    let writes: Vec<_> = fake
        .seen()
        .into_iter()
        .filter(|s| s.method != "GET")
        .collect();
    assert_eq!(writes.len(), want.len());
    for w in &writes {
        assert_eq!(w.method, "PATCH");
        assert!(
            w.content_type.starts_with("application/apply-patch+yaml"),
            "{w:?}"
        );
        assert!(w.query.contains("fieldManager=shiftlab"), "{w:?}");
        assert!(w.query.contains("force=true"), "{w:?}");
    }
    let before = fake.objects();
    assert_eq!(before.len(), want.len());
    for (k, o) in &before {
        assert_eq!(o["metadata"]["labels"][OWNER_LABEL], "kv1", "{k}");
    }
    // Again: the same objects, nothing created.
    let r = l.apply(&mut led).unwrap();
    assert!(r.created.is_empty());
    assert_eq!(r.updated.len(), want.len());
    let after = fake.objects();
    for (k, o) in &after {
        let mut a = o.clone();
        let mut b = before[k].clone();
        a["metadata"]["resourceVersion"] = json!(null);
        b["metadata"]["resourceVersion"] = json!(null);
        assert_eq!(a, b, "{k} changed");
    }
}

#[test]
fn reapply_keeps_the_power_state_the_workers_target_set() {
    let fake = FakeKube::start(all_types());
    let l = lib(&fake, "pod");
    let mut led = ledger(&l.plan);
    l.apply(&mut led).unwrap();
    let ns = &led.namespace.clone();
    assert_eq!(
        l.rt.block_on(apply::run_strategy(&l.client, ns, "kv1-worker-0"))
            .unwrap()
            .as_deref(),
        Some("Halted")
    );
    l.rt.block_on(apply::set_run_strategy(
        &l.client,
        ns,
        "kv1-worker-0",
        "Always",
    ))
    .unwrap();
    l.apply(&mut led).unwrap();
    assert_eq!(
        l.rt.block_on(apply::run_strategy(&l.client, ns, "kv1-worker-0"))
            .unwrap()
            .as_deref(),
        Some("Always")
    );
    let vms = l.rt.block_on(apply::inspect(&l.client, "kv1", ns)).unwrap();
    assert_eq!(vms.len(), 6);
    assert_eq!(
        vms.iter()
            .filter(|v| v.run_strategy.as_deref() == Some("Always"))
            .count(),
        5
    );
}

#[test]
fn someone_elses_object_stops_the_run_before_any_write() {
    let fake = FakeKube::start(all_types());
    let l = lib(&fake, "pod");
    fake.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kv1-lab"}}));
    fake.insert(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kv1-worker-1-ignition", "namespace": "kv1-lab", "labels": {"team": "other"}}}));
    let mut led = ledger(&l.plan);
    let e = l.apply(&mut led).unwrap_err();
    assert!(
        format!("{e:#}").contains(
            "Secret/kv1-worker-1-ignition exists in namespace kv1-lab and is not shiftlab's"
        ),
        "{e:#}"
    );
    assert_eq!(fake.writes(), 0);
}

#[test]
fn destroy_removes_exactly_what_carries_the_owner_label() {
    let fake = FakeKube::start(all_types());
    let l = lib(&fake, "multus");
    // A namespace that is not shiftlab's, with someone else's Secret and a VM
    // of another shiftlab cluster in it.
    fake.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kv1-lab"}}));
    fake.insert(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "theirs", "namespace": "kv1-lab"}}));
    fake.insert(json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "kv9-ctlplane-0", "namespace": "kv1-lab", "labels": {OWNER_LABEL: "kv9", "app.kubernetes.io/managed-by": "shiftlab"}}}));
    let mut led = ledger(&l.plan);
    let r = l.apply(&mut led).unwrap();
    assert_eq!(r.used_as_is, vec!["Namespace/kv1-lab".to_string()]);
    assert!(!led.owns_namespace);
    let ours = l.plan.kubevirt.as_ref().unwrap().objects.len() - 1;
    assert_eq!(fake.objects().len(), ours + 3);
    let done =
        l.rt.block_on(apply::destroy(&l.client, "kv1", &led, WAIT))
            .unwrap();
    assert_eq!(done.removed.len(), ours, "{done:?}");
    assert!(done.terminating.is_empty(), "{done:?}");
    let left: Vec<String> = fake.objects().into_keys().collect();
    assert_eq!(
        left,
        vec![
            "Namespace//kv1-lab".to_string(),
            "Secret/kv1-lab/theirs".to_string(),
            "VirtualMachine/kv1-lab/kv9-ctlplane-0".to_string()
        ]
    );
    // Destroy again: nothing more.
    assert_eq!(
        l.rt.block_on(apply::destroy(&l.client, "kv1", &led, WAIT))
            .unwrap(),
        apply::Destroyed::default()
    );
}

#[test]
fn a_removed_node_takes_only_its_vm_and_secret() {
    let fake = FakeKube::start(all_types());
    let l = lib(&fake, "pod");
    let mut led = ledger(&l.plan);
    l.apply(&mut led).unwrap();
    for (kind, name) in [
        (Kind::VirtualMachine, "kv1-bootstrap"),
        (Kind::Secret, "kv1-bootstrap-ignition"),
    ] {
        assert!(l
            .rt
            .block_on(apply::delete_owned(&l.client, "kv1", kind, "kv1-lab", name))
            .unwrap());
        assert!(!l
            .rt
            .block_on(apply::delete_owned(&l.client, "kv1", kind, "kv1-lab", name))
            .unwrap());
    }
    let left = fake.objects();
    assert!(!left.keys().any(|k| k.contains("bootstrap")), "{left:?}");
    assert_eq!(
        left.len(),
        l.plan.kubevirt.as_ref().unwrap().objects.len() - 2
    );
}

/// The VMs' runStrategy, by name.
fn strategies(fake: &FakeKube) -> BTreeMap<String, String> {
    fake.objects()
        .into_iter()
        .filter(|(k, _)| k.starts_with("VirtualMachine/"))
        .map(|(_, o)| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o["spec"]["runStrategy"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn vmis(fake: &FakeKube) -> Vec<String> {
    fake.objects()
        .into_keys()
        .filter(|k| k.starts_with("VirtualMachineInstance/"))
        .collect()
}

#[test]
fn power_through_the_backend_is_the_run_strategy_and_waits_for_the_vmis() {
    use shiftlab::backend::kubevirt::Kubevirt;
    use shiftlab::backend::{Backend, Place, Wait};
    let fake = FakeKube::start(all_types());
    let l = lib(&fake, "pod");
    let mut led = ledger(&l.plan);
    l.apply(&mut led).unwrap();
    // Each VMI change takes a few requests, as virt-controller takes its time.
    fake.run_virt_controller(3, false);
    let backend = Kubevirt::at(led.clone());
    let nodes: Vec<&shiftlab::plan::Node> = l.plan.nodes.iter().collect();
    let wait = Wait {
        timeout: Duration::from_secs(60),
        poll: Duration::from_millis(10),
        beat: Duration::from_secs(60),
    };
    let said = std::cell::RefCell::new(Vec::<String>::new());
    let say = |line: &str| said.borrow_mut().push(line.to_string());
    let actions = |out: &[shiftlab::backend::NodeOutcome]| -> Vec<(String, String)> {
        out.iter()
            .map(|o| (o.node.clone(), o.action.clone()))
            .collect()
    };

    // Stop: every VM Halted; the running ones shut down (their VMIs gone),
    // the workers (Halted since apply, no VMI) were off already.
    let out = backend.stop(&nodes, wait, &say).unwrap();
    for (node, action) in actions(&out) {
        let want = if node.contains("worker") {
            "already-off"
        } else {
            "acpi-shutdown"
        };
        assert_eq!(action, want, "{node}: {out:?}");
    }
    assert_eq!(
        out.iter().map(|o| o.node.as_str()).collect::<Vec<_>>(),
        l.plan
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>(),
        "in the order asked"
    );
    assert!(
        strategies(&fake).values().all(|s| s == "Halted"),
        "{:?}",
        strategies(&fake)
    );
    assert!(vmis(&fake).is_empty(), "{:?}", vmis(&fake));
    assert!(
        said.borrow()[0].starts_with("runStrategy Halted: waiting up to 60s for the VirtualMachineInstances of kv1-bootstrap, kv1-ctlplane-0"),
        "{:?}",
        said.borrow()
    );
    // The power writes are merge patches of runStrategy by field manager shiftlab.
    let patches: Vec<_> = fake
        .seen()
        .into_iter()
        .filter(|s| s.method == "PATCH" && s.content_type.starts_with("application/merge-patch"))
        .collect();
    assert_eq!(patches.len(), 4, "{patches:?}");
    assert!(
        patches
            .iter()
            .all(|p| p.query.contains("fieldManager=shiftlab")),
        "{patches:?}"
    );
    let st = backend.status("kv1").unwrap().unwrap();
    assert!(matches!(&st.place, Place::Kubevirt { namespace, .. } if namespace == "kv1-lab"));
    assert_eq!(st.nodes.len(), 6);
    for n in &st.nodes {
        assert_eq!(n.state, "stopped", "{n:?}");
        assert_eq!(n.run_strategy.as_deref(), Some("Halted"), "{n:?}");
        assert_eq!(n.status.as_deref(), Some("Stopped"), "{n:?}");
        assert!(n.mac.is_some() && n.leased_ip.is_none(), "{n:?}");
    }

    // Start: every VM Always, and back only once its VMI runs.
    let out = backend.start(&nodes, Some(wait), &say).unwrap();
    assert!(actions(&out).iter().all(|(_, a)| a == "started"), "{out:?}");
    assert!(strategies(&fake).values().all(|s| s == "Always"));
    let objs = fake.objects();
    for n in &l.plan.nodes {
        let vmi = &objs[&format!("VirtualMachineInstance/kv1-lab/{}", n.name)];
        assert_eq!(vmi["status"]["phase"], "Running", "{}", n.name);
    }
    let st = backend.status("kv1").unwrap().unwrap();
    assert_eq!(st.running().len(), 6, "{st:?}");
    for n in &st.nodes {
        assert_eq!(n.status.as_deref(), Some("Running"), "{n:?}");
        assert!(n.leased_ip.is_some(), "{n:?}");
    }
    // Again: nothing to do, nothing written.
    let writes = fake.writes();
    let out = backend.start(&nodes, Some(wait), &say).unwrap();
    assert!(
        actions(&out).iter().all(|(_, a)| a == "already-running"),
        "{out:?}"
    );
    assert_eq!(fake.writes(), writes);

    // A guest that ignores the ACPI power button is forced off once the
    // timeout has passed: its VMI deleted without a grace period.
    fake.run_virt_controller(3, true);
    let workers: Vec<&shiftlab::plan::Node> = nodes
        .iter()
        .copied()
        .filter(|n| n.name.contains("worker"))
        .collect();
    // Meanwhile the wait beats (the heartbeat, here every 50 ms), naming them.
    let short = Wait {
        timeout: Duration::from_millis(200),
        poll: Duration::from_millis(10),
        beat: Duration::from_millis(50),
    };
    let out = backend.stop(&workers, short, &say).unwrap();
    assert!(
        actions(&out).iter().all(|(_, a)| a == "forced-off"),
        "{out:?}"
    );
    assert!(
        said.borrow().iter().any(|l| l
            .starts_with("    still waiting for the VirtualMachineInstances to shut down (")
            && l.ends_with("): kv1-worker-0, kv1-worker-1 still running")),
        "{:?}",
        said.borrow()
    );
    assert!(
        !vmis(&fake).iter().any(|k| k.contains("worker")),
        "{:?}",
        vmis(&fake)
    );
    let deletes: Vec<_> = fake
        .seen()
        .into_iter()
        .filter(|s| s.method == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 2, "{deletes:?}");
    assert!(deletes
        .iter()
        .all(|d| d.path.contains("/virtualmachineinstances/")));
    // A node the API does not have is absent, and nothing is made for it.
    let mut ghost = l.plan.nodes[0].clone();
    ghost.name = "kv1-worker-9".into();
    let out = backend.stop(&[&ghost], wait, &say).unwrap();
    assert_eq!(
        actions(&out),
        [("kv1-worker-9".to_string(), "absent".to_string())]
    );
    let out = backend.start(&[&ghost], Some(wait), &say).unwrap();
    assert_eq!(out[0].action, "absent");
}

#[test]
fn no_kubevirt_or_no_multus_on_the_cluster_is_said_before_anything_is_created() {
    let fake = FakeKube::start(core_types());
    let l = lib(&fake, "pod");
    let e = l.apply(&mut ledger(&l.plan)).unwrap_err();
    assert!(
        format!("{e:#}").contains("KubeVirt is not installed"),
        "{e:#}"
    );
    assert_eq!(fake.writes(), 0);

    let mut t = core_types();
    t.extend(kubevirt_types());
    let fake = FakeKube::start(t);
    let l = lib(&fake, "multus");
    let e = l.apply(&mut ledger(&l.plan)).unwrap_err();
    assert!(
        format!("{e:#}").contains("Multus is not installed"),
        "{e:#}"
    );
    assert_eq!(fake.writes(), 0);
}

// ---------------------------------------------------------------- the binary

fn shiftlab(home: &Path, args: &[&str]) -> std::process::Output {
    common::shiftlab(args, home)
}

fn ok(o: &std::process::Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    text
}

#[test]
fn create_then_destroy_a_cluster_on_the_fake_api() {
    let fake = FakeKube::start(all_types());
    let home = tempfile::tempdir().unwrap();
    let file = cluster_file(home.path(), &fake, "pod", "");
    let f = file.to_str().unwrap();
    let out = ok(&shiftlab(home.path(), &["create", "cluster", "-f", f]));
    let plan = plan_of(&file);
    let want = &plan.kubevirt.as_ref().unwrap().objects;
    assert_eq!(fake.objects().len(), want.len(), "{out}");
    // Pod network: the in-cluster HAProxy, its config and the Services in front.
    let objs = fake.objects();
    let cfg = objs["ConfigMap/kv1-lab/kv1-haproxy"]["data"]["haproxy.cfg"]
        .as_str()
        .unwrap();
    assert!(
        cfg.contains(
            "server kv1-ctlplane-0 kv1-ctlplane-0.kv1-nodes.kv1-lab.svc.cluster.local:6443"
        ),
        "{cfg}"
    );
    let dep = &objs["Deployment/kv1-lab/kv1-haproxy"];
    assert_eq!(
        dep["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"],
        "kv1-haproxy"
    );
    assert_eq!(
        objs["Service/kv1-lab/kv1-api"]["spec"]["selector"]["shiftlab.io/haproxy"],
        "true"
    );
    assert_eq!(
        objs["Service/kv1-lab/kv1-nodes"]["spec"]["clusterIP"],
        "None"
    );
    assert!(objs["Service/kv1-lab/kv1-api"]["spec"]["clusterIP"].is_string());
    // The DNS records to add; the load balancer has not given an address yet.
    assert!(
        out.contains("add to your DNS (docs/kubevirt.md, \"DNS you must add\"):\n  api.kv1.lab.test -> pending: Service kv1-api has no EXTERNAL-IP yet"),
        "{out}"
    );
    // infra, then workers started them.
    for (k, o) in fake.objects() {
        if k.starts_with("VirtualMachine/") {
            assert_eq!(o["spec"]["runStrategy"], "Always", "{k}");
        }
    }
    // The node configs are published behind the token, 0600; the Secrets point there.
    let state = home.path().join("state/clusters/kv1");
    let token = std::fs::read_to_string(state.join("http-token")).unwrap();
    let secret = &fake.objects()["Secret/kv1-lab/kv1-ctlplane-0-ignition"];
    use base64::Engine;
    let pointer = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["userdata"].as_str().unwrap())
        .unwrap();
    let pointer = String::from_utf8(pointer).unwrap();
    assert!(
        pointer.contains(&format!(
            "http://127.0.0.1:8080/{}/kv1-ctlplane-0.ign",
            token.trim()
        )),
        "{pointer}"
    );
    // status reads the VMs through the ledger.
    fake.set_status(
        "VirtualMachine",
        "kv1-lab",
        "kv1-ctlplane-0",
        json!({"printableStatus": "Running"}),
    );
    let st = shiftlab(home.path(), &["status", "kv1", "-o", "json"]);
    ok(&st);
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["backend"], "kubevirt");
    assert_eq!(st["nodes"].as_array().unwrap().len(), 6);
    assert_eq!(st["nodes"][1]["name"], "kv1-ctlplane-0");
    assert_eq!(st["nodes"][1]["status"], "Running");
    assert!(st["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["run_strategy"] == "Always"));
    let table = ok(&shiftlab(home.path(), &["status", "kv1"]));
    assert!(
        table.contains("cluster kv1 on KubeVirt, namespace kv1-lab"),
        "{table}"
    );
    // stop and start: the VMs' runStrategy, virt-controller following it.
    fake.run_virt_controller(2, false);
    let json = |args: &[&str]| -> serde_json::Value {
        let o = shiftlab(home.path(), args);
        ok(&o);
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let stopped = json(&["stop", "kv1", "-o", "json"]);
    let acts: Vec<(&str, &str)> = stopped["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["node"].as_str().unwrap(), n["action"].as_str().unwrap()))
        .collect();
    assert_eq!(acts.len(), 6, "{acts:?}");
    assert_eq!(
        &acts[..2],
        [
            ("kv1-worker-0", "acpi-shutdown"),
            ("kv1-worker-1", "acpi-shutdown")
        ],
        "workers first"
    );
    assert!(acts.iter().all(|(_, a)| *a == "acpi-shutdown"), "{acts:?}");
    let st = json(&["status", "kv1", "-o", "json"]);
    for n in st["nodes"].as_array().unwrap() {
        assert_eq!(n["run_strategy"], "Halted", "{n}");
        assert_eq!(n["state"], "stopped", "{n}");
        assert_eq!(n["status"], "Stopped", "{n}");
    }
    let started = json(&["start", "kv1", "--no-api", "-o", "json"]);
    let acts: Vec<(&str, &str)> = started["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["node"].as_str().unwrap(), n["action"].as_str().unwrap()))
        .collect();
    assert!(acts.iter().all(|(_, a)| *a == "started"), "{acts:?}");
    assert!(
        acts[..4].iter().all(|(n, _)| !n.contains("worker")),
        "control planes first: {acts:?}"
    );
    let st = json(&["status", "kv1", "-o", "json"]);
    for n in st["nodes"].as_array().unwrap() {
        assert_eq!(n["run_strategy"], "Always", "{n}");
        assert_eq!(n["state"], "running", "{n}");
        assert_eq!(n["status"], "Running", "{n}");
    }
    let power: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.join("power.json")).unwrap()).unwrap();
    assert_eq!(power["action"], "start");
    // --connect names a libvirt; a cluster on KubeVirt says so and nothing is touched.
    let before = fake.writes();
    let o = shiftlab(
        home.path(),
        &["stop", "kv1", "--connect", "test:///default"],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "--connect test:///default: kv1 runs on KubeVirt (namespace kv1-lab), not on libvirt"
        ),
        "{err}"
    );
    assert_eq!(fake.writes(), before);
    // A second run converges: nothing new. By now MetalLB gave the Services
    // addresses, and the records name them.
    for (svc, ip) in [("kv1-api", "192.0.2.10"), ("kv1-ingress", "192.0.2.11")] {
        fake.set_status(
            "Service",
            "kv1-lab",
            svc,
            json!({"loadBalancer": {"ingress": [{"ip": ip}]}}),
        );
    }
    let out = ok(&shiftlab(home.path(), &["create", "cluster", "-f", f]));
    assert!(!out.contains("created "), "{out}");
    for line in [
        "  api.kv1.lab.test -> 192.0.2.10 (Service kv1-api EXTERNAL-IP)",
        "  api-int.kv1.lab.test -> 192.0.2.10 (Service kv1-api EXTERNAL-IP)",
        "  *.apps.kv1.lab.test -> 192.0.2.11 (Service kv1-ingress EXTERNAL-IP)",
    ] {
        assert!(out.contains(line), "{line}: {out}");
    }
    // Destroy by name: the ledger says where the objects are.
    let out = ok(&shiftlab(home.path(), &["destroy", "cluster", "kv1"]));
    assert!(out.contains("removed VirtualMachine/kv1-worker-1"), "{out}");
    assert!(out.contains("removed Namespace/kv1-lab"), "{out}");
    for o in [
        "Deployment/kv1-haproxy",
        "ConfigMap/kv1-haproxy",
        "Service/kv1-nodes",
        "Service/kv1-api",
    ] {
        assert!(out.contains(&format!("removed {o}")), "{o}: {out}");
    }
    assert!(fake.objects().is_empty(), "{:?}", fake.objects().keys());
    assert!(!state.exists());
    // Again, by its file: nothing recorded, nothing to do, no libvirt needed.
    let out = ok(&shiftlab(home.path(), &["destroy", "cluster", "-f", f]));
    assert!(
        out.contains("nothing to remove: no shiftlab objects for kv1 on KubeVirt"),
        "{out}"
    );
}

#[test]
fn a_run_killed_mid_apply_is_finished_by_the_next() {
    let fake = FakeKube::start(all_types());
    let home = tempfile::tempdir().unwrap();
    let file = cluster_file(home.path(), &fake, "pod", "");
    let f = file.to_str().unwrap();
    fake.hang_after_writes(Some(4));
    let mut child = Command::new(env!("CARGO_BIN_EXE_shiftlab"))
        .args(["create", "cluster", "-f", f])
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("SHIFTLAB_HOME", home.path().join("state"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the fifth write hangs, then kill -9.
    let start = Instant::now();
    loop {
        let attempted = fake.seen().iter().filter(|s| s.method == "PATCH").count();
        if attempted > 4 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the run never reached its fifth write"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(fake.objects().len(), 4);
    // The ledger was written before the first object: destroy would find them.
    assert!(home
        .path()
        .join("state/clusters/kv1/kubevirt.json")
        .exists());
    fake.hang_after_writes(None);
    ok(&shiftlab(home.path(), &["create", "cluster", "-f", f]));
    let plan = plan_of(&file);
    assert_eq!(
        fake.objects().len(),
        plan.kubevirt.as_ref().unwrap().objects.len()
    );
    ok(&shiftlab(home.path(), &["destroy", "cluster", "kv1"]));
    assert!(fake.objects().is_empty());
}

#[test]
fn an_unreachable_api_is_said_and_nothing_is_created() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = tempfile::tempdir().unwrap();
    let fake = FakeKube::start(all_types());
    let file = cluster_file(home.path(), &fake, "pod", "");
    let kc = std::fs::read_to_string(home.path().join("kubeconfig"))
        .unwrap()
        .replace(&fake.url(), &format!("http://127.0.0.1:{port}"));
    std::fs::write(home.path().join("kubeconfig"), kc).unwrap();
    let o = shiftlab(
        home.path(),
        &["create", "cluster", "-f", file.to_str().unwrap()],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the Kubernetes API is unreachable (nothing was created)"),
        "{err}"
    );
    assert!(!home
        .path()
        .join("state/clusters/kv1/kubevirt.json")
        .exists());
    // Not even a node config was published.
    assert!(!home.path().join("state/clusters/kv1/http-private").exists());
    assert_eq!(fake.writes(), 0);
}

#[test]
fn a_storage_class_the_cluster_lacks_is_said_before_anything_is_created() {
    let fake = FakeKube::start(all_types());
    fake.insert(
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "standard"}, "provisioner": "example.test/csi"}),
    );
    let home = tempfile::tempdir().unwrap();
    let file = cluster_file(home.path(), &fake, "pod", "  storage_class: fast-ssd\n");
    let o = shiftlab(
        home.path(),
        &["create", "cluster", "-f", file.to_str().unwrap()],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("kubevirt.storage_class: StorageClass fast-ssd does not exist on the cluster (it has: standard); nothing was created"),
        "{err}"
    );
    assert_eq!(fake.writes(), 0);
    assert!(!home
        .path()
        .join("state/clusters/kv1/kubevirt.json")
        .exists());
    assert!(!home.path().join("state/clusters/kv1/http-private").exists());

    // The library's apply checks the same, from the VMs' DataVolumes.
    let plan = plan_of(&file);
    let rt = shiftlab::runtime::current_thread().unwrap();
    let client = rt
        .block_on(apply::client(&home.path().join("kubeconfig"), None))
        .unwrap();
    let run = |l: &mut Ledger| {
        rt.block_on(apply::apply(
            &client,
            "kv1",
            &objects(&plan),
            l,
            &|_l: &Ledger| Ok(()),
        ))
    };
    let e = run(&mut ledger(&plan)).unwrap_err();
    assert!(
        format!("{e:#}").contains("StorageClass fast-ssd does not exist"),
        "{e:#}"
    );
    assert_eq!(fake.writes(), 0);
    // Once it exists, the same apply goes through.
    fake.insert(
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "fast-ssd"}, "provisioner": "example.test/csi"}),
    );
    run(&mut ledger(&plan)).unwrap();
    assert!(fake.writes() > 0);

    // A user who may not read StorageClasses is not stopped (a warning).
    let fake = FakeKube::start(all_types());
    fake.forbid("storageclasses");
    let home = tempfile::tempdir().unwrap();
    let file = cluster_file(home.path(), &fake, "pod", "  storage_class: fast-ssd\n");
    let o = shiftlab(
        home.path(),
        &["create", "infra", "-f", file.to_str().unwrap()],
    );
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot read StorageClasses (forbidden)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn destroy_with_an_unreachable_api_removes_nothing_and_can_be_rerun() {
    let fake = FakeKube::start(all_types());
    let home = tempfile::tempdir().unwrap();
    let file = cluster_file(home.path(), &fake, "pod", "");
    ok(&shiftlab(
        home.path(),
        &["create", "infra", "-f", file.to_str().unwrap()],
    ));
    let before = fake.objects();
    let kubeconfig = home.path().join("kubeconfig");
    let good = std::fs::read_to_string(&kubeconfig).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        &kubeconfig,
        good.replace(&fake.url(), &format!("http://127.0.0.1:{port}")),
    )
    .unwrap();
    let o = shiftlab(home.path(), &["destroy", "cluster", "kv1"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the Kubernetes API is unreachable (nothing was removed)"),
        "{err}"
    );
    assert_eq!(fake.objects(), before);
    let ledger = home.path().join("state/clusters/kv1/kubevirt.json");
    assert!(ledger.exists(), "the ledger stays for the next destroy");
    // The API back: the same destroy finishes.
    std::fs::write(&kubeconfig, good).unwrap();
    ok(&shiftlab(home.path(), &["destroy", "cluster", "kv1"]));
    assert!(fake.objects().is_empty());
    assert!(!ledger.exists());
}

// ------------------------------------------------- asynchronous deletion, SSA

#[test]
fn destroy_then_create_at_once_against_an_api_that_deletes_asynchronously() {
    let fake = FakeKube::start(all_types());
    // Deletions take a while: the namespace controller and the garbage
    // collector finish them many requests later.
    fake.deletion_lag(25);
    let home = tempfile::tempdir().unwrap();
    let file = cluster_file(home.path(), &fake, "multus", "");
    let f = file.to_str().unwrap();
    ok(&shiftlab(home.path(), &["create", "infra", "-f", f]));
    let out = ok(&shiftlab(home.path(), &["destroy", "cluster", "kv1"]));
    assert!(out.contains("removed Namespace/kv1-lab"), "{out}");
    // destroy said removed: it is gone, not Terminating.
    assert!(fake.objects().is_empty(), "{:?}", fake.objects().keys());
    ok(&shiftlab(home.path(), &["create", "infra", "-f", f]));
    // Nothing of the new cluster is being deleted, and time passing takes
    // nothing away.
    fake.settle();
    let want = plan_of(&file).kubevirt.unwrap().objects;
    let objs = fake.objects();
    assert_eq!(objs.len(), want.len(), "{:?}", objs.keys());
    for (k, o) in &objs {
        assert!(o["metadata"]["deletionTimestamp"].is_null(), "{k}");
    }
}

#[test]
fn destroy_off_a_terminal_beats_with_what_is_still_terminating() {
    use std::io::BufRead;
    let fake = FakeKube::start(all_types());
    let home = tempfile::tempdir().unwrap();
    let file = cluster_file(home.path(), &fake, "pod", "");
    ok(&shiftlab(
        home.path(),
        &["create", "infra", "-f", file.to_str().unwrap()],
    ));
    // Deletions wait for the controllers, held until the beat has been seen.
    fake.hold_deletions(true);
    let mut child = Command::new(env!("CARGO_BIN_EXE_shiftlab"))
        .args(["destroy", "cluster", "kv1"])
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("SHIFTLAB_HOME", home.path().join("state"))
        .env("SHIFTLAB_HEARTBEAT_SECS", "1")
        .env_remove("LIBVIRT_DEFAULT_URI")
        .env_remove("XDG_DATA_HOME")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    // Bounded: the beat, or give up after 60 s.
    let until = std::time::Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let beat = loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.starts_with("    still waiting for Kubernetes to finish deleting (") => {
                break Some(l)
            }
            Ok(l) => seen.push(l),
            Err(_) => break None,
        }
    };
    fake.hold_deletions(false);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let beat = beat.unwrap_or_else(|| panic!("no heartbeat: {seen:?}"));
    assert!(beat.contains(" still Terminating: "), "{beat}");
    for o in ["VirtualMachine/kv1-ctlplane-0", "Namespace/kv1-lab"] {
        assert!(beat.contains(o), "{o}: {beat}");
    }
    assert!(status.success(), "{seen:?}");
    assert!(fake.objects().is_empty(), "{:?}", fake.objects().keys());
}

#[test]
fn a_namespace_that_stays_terminating_is_said_by_destroy_and_create() {
    let fake = FakeKube::start(all_types());
    let l = lib(&fake, "pod");
    let mut led = ledger(&l.plan);
    l.apply(&mut led).unwrap();
    // The controllers that finish deletions are down (a finalizer's owner gone).
    fake.hold_deletions(true);
    let short = Duration::from_secs(1);
    let done =
        l.rt.block_on(apply::destroy(&l.client, "kv1", &led, short))
            .unwrap();
    assert!(done.removed.is_empty(), "{done:?}");
    assert!(
        done.terminating.contains(&"Namespace/kv1-lab".to_string()),
        "{done:?}"
    );
    let note = done.still_terminating("kv1-lab", short).unwrap();
    assert!(note.contains("still terminating after 1s"), "{note}");
    assert!(
        note.contains("check with `kubectl get ns kv1-lab`"),
        "{note}"
    );
    // create waits the same bounded way, then says so, writing nothing.
    let writes = fake.writes();
    let objs = objects(&l.plan);
    let e =
        l.rt.block_on(apply::apply_waiting(
            &l.client,
            "kv1",
            &objs,
            &mut ledger(&l.plan),
            &|_l: &Ledger| Ok(()),
            short,
        ))
        .unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("namespace kv1-lab is still terminating after 1s")
            && e.contains("check with `kubectl get ns kv1-lab`"),
        "{e}"
    );
    assert_eq!(fake.writes(), writes);
    // The controllers back: the same create waits for the namespace to go,
    // then makes everything anew.
    fake.hold_deletions(false);
    let r =
        l.rt.block_on(apply::apply_waiting(
            &l.client,
            "kv1",
            &objs,
            &mut ledger(&l.plan),
            &|_l: &Ledger| Ok(()),
            WAIT,
        ))
        .unwrap();
    assert_eq!(r.created.len(), objs.len());
    fake.settle();
    assert_eq!(fake.objects().len(), objs.len());
}

#[test]
fn a_reapply_keeps_what_other_field_managers_added() {
    use kube::api::{Patch, PatchParams};
    let fake = FakeKube::start(all_types());
    let l = lib(&fake, "pod");
    let mut led = ledger(&l.plan);
    l.apply(&mut led).unwrap();
    // Someone else labels and annotates a Secret of ours and adds a key.
    let secrets: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(l.client.clone(), "kv1-lab", &apply::resource(Kind::Secret));
    let theirs = json!({"metadata": {"labels": {"backup": "daily"}, "annotations": {"team": "infra"}},
        "data": {"extra": "ZXh0cmE="}});
    l.rt.block_on(secrets.patch(
        "kv1-ctlplane-0-ignition",
        &PatchParams::default(),
        &Patch::Merge(&theirs),
    ))
    .unwrap();
    l.apply(&mut led).unwrap();
    let s = &fake.objects()["Secret/kv1-lab/kv1-ctlplane-0-ignition"];
    assert_eq!(s["metadata"]["labels"]["backup"], "daily", "{s}");
    assert_eq!(s["metadata"]["annotations"]["team"], "infra", "{s}");
    assert_eq!(s["data"]["extra"], "ZXh0cmE=", "{s}");
    assert_eq!(s["metadata"]["labels"][OWNER_LABEL], "kv1", "{s}");
    assert!(s["data"]["userdata"].is_string(), "{s}");
}

#[test]
fn a_registry_image_is_pulled_with_the_pull_secrets_credentials_for_its_registry() {
    use base64::Engine;
    let fake = FakeKube::start(all_types());
    let home = tempfile::tempdir().unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let ps = home.path().join("pull-secret.json");
    std::fs::write(
        &ps,
        format!(
            r#"{{"auths": {{"quay.io": {{"auth": "{}"}}, "registry.example.test": {{"auth": "{}"}}}}}}"#,
            b64("robot:PLANTED-quay-pw"),
            b64("other:PLANTED-other-pw")
        ),
    )
    .unwrap();
    let file = cluster_file(home.path(), &fake, "pod", "pull_secret: pull-secret.json\n");
    let f = file.to_str().unwrap();
    let o = shiftlab(home.path(), &["create", "infra", "-f", f]);
    let out = ok(&o);
    assert!(out.contains("created Secret/kv1-registry"), "{out}");
    assert!(!out.contains("PLANTED"), "a credential was shown: {out}");
    let objs = fake.objects();
    let s = &objs["Secret/kv1-lab/kv1-registry"];
    assert_eq!(s["data"]["accessKeyId"], b64("robot"));
    assert_eq!(s["data"]["secretKey"], b64("PLANTED-quay-pw"));
    assert_eq!(s["metadata"]["labels"][OWNER_LABEL], "kv1");
    let vms: Vec<_> = objs
        .iter()
        .filter(|(k, _)| k.starts_with("VirtualMachine/"))
        .collect();
    assert_eq!(vms.len(), 6);
    for (k, vm) in vms {
        assert_eq!(
            vm["spec"]["dataVolumeTemplates"][0]["spec"]["source"]["registry"]["secretRef"],
            "kv1-registry",
            "{k}"
        );
    }
    // destroy takes it with the rest.
    ok(&shiftlab(home.path(), &["destroy", "cluster", "kv1"]));
    assert!(fake.objects().is_empty(), "{:?}", fake.objects().keys());

    // An image whose registry the pull secret has no entry for is pulled
    // anonymously: no Secret, no secretRef.
    let fake = FakeKube::start(all_types());
    let home2 = tempfile::tempdir().unwrap();
    std::fs::copy(&ps, home2.path().join("pull-secret.json")).unwrap();
    let file = cluster_file(
        home2.path(),
        &fake,
        "pod",
        "pull_secret: pull-secret.json\n",
    );
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("docker://quay.io/", "docker://ghcr.io/");
    std::fs::write(&file, text).unwrap();
    ok(&shiftlab(
        home2.path(),
        &["create", "infra", "-f", file.to_str().unwrap()],
    ));
    let objs = fake.objects();
    assert!(!objs.contains_key("Secret/kv1-lab/kv1-registry"));
    let vm = &objs["VirtualMachine/kv1-lab/kv1-ctlplane-0"];
    assert!(
        vm["spec"]["dataVolumeTemplates"][0]["spec"]["source"]["registry"]
            .get("secretRef")
            .is_none()
    );
}

#[test]
fn a_namespace_deleted_under_a_create_is_waited_for_and_the_create_made_anew() {
    let fake = FakeKube::start(all_types());
    let l = lib(&fake, "pod");
    // Someone's destroy deletes the namespace right after shiftlab's third
    // write: the next new object gets the NamespaceLifecycle 403.
    fake.delete_namespace_after_writes(3, "kv1-lab");
    let objs = objects(&l.plan);
    let r =
        l.rt.block_on(apply::apply_waiting(
            &l.client,
            "kv1",
            &objs,
            &mut ledger(&l.plan),
            &|_l: &Ledger| Ok(()),
            WAIT,
        ))
        .unwrap();
    let refused: Vec<_> = fake.seen().into_iter().filter(|s| s.code == 403).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(r.created.len(), objs.len(), "{r:?}");
    fake.settle();
    let left = fake.objects();
    assert_eq!(left.len(), objs.len(), "{:?}", left.keys());
    assert!(left["Namespace//kv1-lab"]["metadata"]["deletionTimestamp"].is_null());
}
