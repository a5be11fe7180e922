//! `storage: lvms` after install through the API (install::lvms::apply,
//! kube::lvms) against the stand-in API (tests/e2e/kube-standin.py --lvms=N)
//! on loopback: the operator's CRD appears after some polls, the LVMCluster,
//! the registry's claim, the monitoring ConfigMap and the registry's Config
//! end as they should, a rerun changes nothing, and a timeout says what did
//! not appear and the manual command. Objects are read back with curl.

use std::cell::RefCell;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use shiftlab::kube::lvms::Wait;

struct StandIn {
    child: Child,
    port: String,
    events: std::path::PathBuf,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stand_in(dir: &Path, polls: u32) -> StandIn {
    let plan = dir.join("plan.json");
    std::fs::write(
        &plan,
        r#"{"nodes": [], "cluster_domain": "lab1.example.test", "version": "4.18.0"}"#,
    )
    .unwrap();
    let port_file = dir.join("api.port");
    let events = dir.join("api.events");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/kube-standin.py");
    let child = Command::new("python3")
        .arg(script)
        .arg(format!("--lvms={polls}"))
        .args([&plan, dir, &port_file, &events])
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs the stand-in API");
    let start = Instant::now();
    while !port_file.is_file() {
        assert!(start.elapsed() < Duration::from_secs(20), "no stand-in API");
        std::thread::sleep(Duration::from_millis(50));
    }
    let port = std::fs::read_to_string(&port_file).unwrap();
    StandIn {
        child,
        port,
        events,
    }
}

fn curl(api: &StandIn, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
    let mut c = Command::new("curl");
    c.args(["-s", "-o", "-", "-w", "\n%{http_code}", "-X", method]);
    if let Some(b) = body {
        c.args(["-H", "content-type: application/json", "--data-binary", b]);
    }
    let out = c
        .arg(format!("http://127.0.0.1:{}{path}", api.port))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.parse().unwrap(), serde_json::from_str(body).unwrap())
}

/// The writes the stand-in recorded (creates, updates, patches).
fn writes(api: &StandIn) -> usize {
    std::fs::read_to_string(&api.events)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"create\"") || l.contains("\"update\"") || l.contains("\"patch\""))
        .count()
}

fn fast(timeout: Duration) -> Wait {
    Wait {
        timeout,
        every: Duration::from_millis(20),
        progress_every: Duration::ZERO,
    }
}

#[test]
fn lvms_after_install_objects_are_applied_once_the_operator_runs() {
    let d = tempfile::tempdir().unwrap();
    let api = stand_in(d.path(), 4);
    let assets = shiftlab::state::StateDir {
        root: d.path().join("state"),
    }
    .cluster("lab1")
    .assets();
    std::fs::create_dir_all(assets.kubeconfig().parent().unwrap()).unwrap();
    std::fs::write(
        assets.kubeconfig(),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{}\ncontexts:\n- name: a\n  context: {{cluster: c, user: a}}\ncurrent-context: a\nusers:\n- name: a\n  user: {{token: t}}\n",
            api.port
        ),
    )
    .unwrap();
    // OKD refuses lvms in the cluster file: set by hand, the writer's input.
    let mut spec = shiftlab::spec::from_str(
        "cluster: lab1\ndistribution: okd\nversion: '4.18'\nssh_keys: ['ssh-ed25519 AAAA k']\n",
        "t.yaml",
        &shiftlab::spec::Env::default(),
    )
    .unwrap()
    .spec;
    spec.storage = shiftlab::spec::Storage::Lvms;
    shiftlab::install::lvms::write(&spec, &assets).unwrap();
    let said = RefCell::new(Vec::new());
    let say = |l: String| said.borrow_mut().push(l);

    // The operator is not there yet (first read of its CRD): a timeout names
    // the CRD, the CSV's phase and the manual command, and writes nothing.
    let e = shiftlab::install::lvms::apply(&assets, fast(Duration::ZERO), &say).unwrap_err();
    let e = format!("{e:#}");
    for want in [
        "lvmclusters.lvm.topolvm.io was not there",
        "CSV lvms-operator.v4.18.0: Installing",
        "oc --kubeconfig",
        "patch configs.imageregistry.operator.openshift.io cluster --type merge",
    ] {
        assert!(e.contains(want), "{want:?} in {e}");
    }
    assert!(!shiftlab::install::lvms::applied(&assets));
    // An unserved resource: the API server's generic 404.
    let lvm_clusters = "/apis/lvm.topolvm.io/v1alpha1/namespaces/openshift-storage/lvmclusters";
    let (code, _) = curl(
        &api,
        "POST",
        lvm_clusters,
        Some(r#"{"metadata":{"name":"x"}}"#),
    );
    assert_eq!(code, 404);
    assert_eq!(writes(&api), 0);

    let done = shiftlab::install::lvms::apply(&assets, fast(Duration::from_secs(60)), &say)
        .unwrap()
        .unwrap();
    assert_eq!(done.len(), 4, "{done:?}");
    assert!(
        said.borrow().iter().any(|l| l.contains("not Established")),
        "the wait saw the CRD before it was Established: {:?}",
        said.borrow()
    );
    assert!(shiftlab::install::lvms::applied(&assets));

    let (code, c) = curl(&api, "GET", &format!("{lvm_clusters}/shiftlab"), None);
    assert_eq!(code, 200, "{c}");
    assert_eq!(c["spec"]["storage"]["deviceClasses"][0]["name"], "vg1");
    let (code, pvc) = curl(
        &api,
        "GET",
        "/api/v1/namespaces/openshift-image-registry/persistentvolumeclaims/shiftlab-image-registry",
        None,
    );
    assert_eq!(code, 200, "{pvc}");
    assert_eq!(pvc["spec"]["storageClassName"], "lvms-vg1");
    let (_, cm) = curl(
        &api,
        "GET",
        "/api/v1/namespaces/openshift-monitoring/configmaps/cluster-monitoring-config",
        None,
    );
    let config: Value = yaml_serde::from_str(cm["data"]["config.yaml"].as_str().unwrap()).unwrap();
    for part in ["prometheusK8s", "alertmanagerMain"] {
        assert_eq!(
            config[part]["volumeClaimTemplate"]["spec"]["storageClassName"], "lvms-vg1",
            "{config}"
        );
    }
    assert_eq!(config["prometheusK8s"]["retention"], "24h");
    let (_, reg) = curl(
        &api,
        "GET",
        "/apis/imageregistry.operator.openshift.io/v1/configs/cluster",
        None,
    );
    assert_eq!(
        reg["spec"]["storage"],
        serde_json::json!({"pvc": {"claim": "shiftlab-image-registry"}}),
        "{reg}"
    );
    assert_eq!(reg["spec"]["rolloutStrategy"], "Recreate");
    assert_eq!(reg["spec"]["managementState"], "Managed");

    // A rerun changes nothing.
    let before = writes(&api);
    assert_eq!(before, 4);
    let again = shiftlab::install::lvms::apply(&assets, fast(Duration::from_secs(60)), &say)
        .unwrap()
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(writes(&api), before);
}
