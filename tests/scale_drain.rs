//! Draining a worker for `scale` down against the stand-in Kubernetes API on
//! loopback (`tests/support/fake_kube.rs`): the Node cordoned, an application pod
//! whose PodDisruptionBudget refuses the first evictions (429) retried until
//! evicted, a DaemonSet pod left alone, the Node deleted; a drain that cannot
//! finish in time says which pods are left; the ingress replicas read.

#[path = "support/fake_kube.rs"]
mod fake_kube;

use std::time::Duration;

use serde_json::{json, Value};

fn worker(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
}

fn pods() -> Vec<Value> {
    vec![
        json!({"metadata": {"name": "web-1", "namespace": "app", "labels": {"pdb": "protected"}},
               "spec": {"nodeName": "lab1-worker-2", "containers": []}}),
        json!({"metadata": {"name": "dns-x", "namespace": "openshift-dns",
               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "dns-default", "uid": "u"}]},
               "spec": {"nodeName": "lab1-worker-2", "containers": []}}),
        json!({"metadata": {"name": "other", "namespace": "app"},
               "spec": {"nodeName": "lab1-worker-0", "containers": []}}),
    ]
}

fn log(fake: &fake_kube::FakeKube) -> Vec<String> {
    fake.seen()
        .into_iter()
        .filter(|s| s.method != "GET")
        .map(|s| format!("{} {} {}", s.method, s.path, s.code))
        .collect()
}

fn kubeconfig(dir: &std::path::Path, server: &str) -> std::path::PathBuf {
    let p = dir.join("kubeconfig");
    std::fs::write(
        &p,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: lab1\n  cluster:\n    server: {server}\n\
             contexts:\n- name: admin\n  context:\n    cluster: lab1\n    user: admin\n\
             current-context: admin\nusers:\n- name: admin\n  user:\n    token: test-token\n"
        ),
    )
    .unwrap();
    p
}

#[test]
fn a_drain_waits_out_the_budget_leaves_daemonsets_and_deletes_the_node() {
    let fake = fake_kube::FakeKube::cluster_api(vec![worker("lab1-worker-2")], pods(), 2);
    let server = fake.url();
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), &server);
    assert_eq!(
        shiftlab::kube::drain::ingress_replicas_blocking(&kc).unwrap(),
        Some(2)
    );
    let d = shiftlab::kube::drain::drain_blocking(
        &kc,
        "lab1-worker-2",
        "lab1-worker-2.lab1.example.com",
        Duration::from_secs(20),
        Duration::from_millis(100),
    )
    .unwrap()
    .expect("the node exists");
    assert_eq!(d.evicted, ["app/web-1"]);
    assert_eq!(d.held_by_budget, ["app/web-1"]);
    assert!(d.node_deleted);
    // What was written, as `METHOD path code`.
    let seen = log(&fake);
    let evictions: Vec<&String> = seen.iter().filter(|s| s.contains("/eviction")).collect();
    assert_eq!(evictions.len(), 3, "{seen:?}");
    assert!(
        evictions[..2].iter().all(|s| s.ends_with(" 429")),
        "{seen:?}"
    );
    assert!(evictions[2].ends_with(" 201"));
    assert!(
        !seen.iter().any(|s| s.contains("dns-x")),
        "a DaemonSet pod was evicted: {seen:?}"
    );
    let cordon = seen
        .iter()
        .position(|s| s == "PATCH /api/v1/nodes/lab1-worker-2 200")
        .unwrap();
    let delete = seen
        .iter()
        .position(|s| s == "DELETE /api/v1/nodes/lab1-worker-2 200")
        .unwrap();
    assert!(cordon < delete);
    // Again: the Node is gone, nothing to drain.
    assert_eq!(
        shiftlab::kube::drain::drain_blocking(
            &kc,
            "lab1-worker-2",
            "x",
            Duration::from_secs(5),
            Duration::from_millis(100)
        )
        .unwrap(),
        None
    );
}

#[test]
fn a_budget_that_never_allows_it_ends_the_drain_with_the_pods_left() {
    let fake = fake_kube::FakeKube::cluster_api(vec![worker("lab1-worker-2")], pods(), usize::MAX);
    let server = fake.url();
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), &server);
    let e = shiftlab::kube::drain::drain_blocking(
        &kc,
        "lab1-worker-2",
        "lab1-worker-2.lab1.example.com",
        Duration::from_secs(1),
        Duration::from_millis(200),
    )
    .unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("1 pod(s) not evicted within 1s (web-1)"), "{e}");
    assert!(
        e.contains("PodDisruptionBudgets held back app/web-1"),
        "{e}"
    );
    assert!(
        !log(&fake).iter().any(|s| s.starts_with("DELETE")),
        "the Node was deleted anyway"
    );
}
