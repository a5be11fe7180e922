//! CSR approval against recorded API responses (kube-rs tower-test style): the API is
//! a mock service answering with `tests/fixtures/csr/list.json`; the tests assert
//! exactly which `/approval` PUTs happen. Nothing here opens a connection.

mod common;
#[path = "fixtures/csr/generate.rs"]
mod generate;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use kube::Client;
use serde_json::{json, Value};

use shiftlab::kube::approve::{self, Until, WatchOptions};
use shiftlab::kube::csr::{CsrKind, NodeIdentity};
use shiftlab::plan::{self, Plan};
use shiftlab::spec::{self, Env};

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const NODES: &str = "/api/v1/nodes";

/// A Node as the kubelet of a plan node registers it: its name (the CN of its
/// client CSR) with its host names and planned address (a kubelet asks for
/// exactly its Node's addresses as serving SANs).
fn node_object(name: &str) -> Value {
    let p = plan();
    let planned = p
        .nodes
        .iter()
        .find(|n| n.name == name || n.fqdn == name)
        .unwrap_or_else(|| panic!("{name} is not a plan node"));
    json!({"metadata": {"name": name}, "status": {"addresses": [
        {"type": "InternalIP", "address": planned.ip.to_string()},
        {"type": "Hostname", "address": planned.name},
        {"type": "InternalDNS", "address": planned.fqdn},
    ]}})
}

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/csr")
}

fn plan() -> Plan {
    let text = std::fs::read_to_string(fixture_dir().join("cluster.yaml")).unwrap();
    common::plan_from_yaml(&text, "cluster.yaml", None)
}

fn recorded() -> Value {
    let text = std::fs::read_to_string(fixture_dir().join("list.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// What the mock API saw.
#[derive(Default)]
struct Seen {
    lists: usize,
    /// (CSR name, request body) of every PUT to `/approval`.
    approvals: Vec<(String, Value)>,
    other: Vec<String>,
}

/// A stateful stand-in for the API server: lists what it holds, applies approvals
/// (checking the resourceVersion like the real one), answers 503 to the first
/// `fail_lists` lists.
fn mock_api(list: Value, fail_lists: usize) -> (Client, Arc<Mutex<Seen>>) {
    mock_api_stale(list, fail_lists, &[])
}

/// [`mock_api`] whose lists show the CSRs named in `stale` at an old resourceVersion.
fn mock_api_stale(list: Value, fail_lists: usize, stale: &[&str]) -> (Client, Arc<Mutex<Seen>>) {
    let stale: Vec<String> = stale.iter().map(|s| s.to_string()).collect();
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let seen2 = seen.clone();
    // In recorded order, as the API server keeps them.
    let mut items: Vec<Value> = list["items"].as_array().unwrap().clone();
    // ctlplane-0's certificates are approved in the recording: it has joined.
    let mut nodes: Vec<Value> = vec![node_object("lab1-ctlplane-0")];
    tokio::spawn(async move {
        let mut handle = pin!(handle);
        let mut version = 5000;
        while let Some((req, send)) = handle.next_request().await {
            let (parts, body) = req.into_parts();
            let body = body.collect_bytes().await.unwrap();
            let path = parts.uri.path().to_string();
            let reply = |status: StatusCode, v: Value| {
                Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&v).unwrap()))
                    .unwrap()
            };
            let mut seen = seen2.lock().unwrap();
            if parts.method == Method::GET && path == NODES {
                send.send_response(reply(
                    StatusCode::OK,
                    json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "7"}, "items": nodes}),
                ));
            } else if parts.method == Method::GET && path == CSRS {
                seen.lists += 1;
                if seen.lists <= fail_lists {
                    send.send_response(reply(
                        StatusCode::SERVICE_UNAVAILABLE,
                        status(503, "ServiceUnavailable", "the API is coming back"),
                    ));
                    continue;
                }
                let mut l = list.clone();
                l["items"] = Value::Array(
                    items
                        .iter()
                        .map(|i| {
                            let mut i = i.clone();
                            if stale.iter().any(|s| i["metadata"]["name"] == s.as_str()) {
                                i["metadata"]["resourceVersion"] = json!("1");
                            }
                            i
                        })
                        .collect(),
                );
                send.send_response(reply(StatusCode::OK, l));
            } else if let (&Method::PUT, Some(name)) = (
                &parts.method,
                path.strip_prefix(&format!("{CSRS}/"))
                    .and_then(|p| p.strip_suffix("/approval")),
            ) {
                let put: Value = serde_json::from_slice(&body).unwrap();
                seen.approvals.push((name.to_string(), put.clone()));
                let Some(cur) = items.iter_mut().find(|i| i["metadata"]["name"] == name) else {
                    send.send_response(reply(StatusCode::NOT_FOUND, status(404, "NotFound", name)));
                    continue;
                };
                if put["metadata"]["resourceVersion"] != cur["metadata"]["resourceVersion"] {
                    send.send_response(reply(StatusCode::CONFLICT, status(409, "Conflict", name)));
                    continue;
                }
                version += 1;
                // An approved client certificate lets its kubelet register its Node.
                if cur["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet" {
                    use base64::Engine as _;
                    let pem = base64::engine::general_purpose::STANDARD
                        .decode(cur["spec"]["request"].as_str().unwrap())
                        .unwrap();
                    let req = shiftlab::kube::csr::parse_request(&pem).unwrap();
                    let name = req.common_names[0].strip_prefix("system:node:").unwrap();
                    nodes.push(node_object(name));
                }
                cur["status"] = put["status"].clone();
                cur["metadata"]["resourceVersion"] = json!(version.to_string());
                send.send_response(reply(StatusCode::OK, cur.clone()));
            } else {
                seen.other.push(format!("{} {}", parts.method, parts.uri));
                send.send_response(reply(StatusCode::NOT_FOUND, status(404, "NotFound", &path)));
            }
        }
    });
    (Client::new(service, "default"), seen)
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
           "code": code, "reason": reason, "message": message, "metadata": {}})
}

const GOOD: [&str; 3] = [
    "csr-good-client-worker-0",
    "csr-good-serving-worker-0",
    "csr-good-client-worker-1-fqdn",
];

const HOSTILE: [(&str, &str); 9] = [
    (
        "csr-hostile-unknown-node",
        "intruder is not a node of the plan",
    ),
    ("csr-hostile-bootstrap-node", "bootstrap node"),
    ("csr-hostile-wrong-san", "DNS SAN \"api.lab1.example.com\""),
    ("csr-hostile-foreign-ip-san", "IP SAN 192.168.126.20"),
    (
        "csr-hostile-wrong-signer",
        "signer kubernetes.io/kube-apiserver-client,",
    ),
    ("csr-hostile-wrong-requestor", "not the node bootstrapper"),
    (
        "csr-hostile-cn-requestor-mismatch",
        "requestor and CN differ",
    ),
    (
        "csr-hostile-extra-usage",
        "usage \"server auth\" is not allowed",
    ),
    ("csr-hostile-masters-org", "subject O"),
];

/// The order approvals happen in: the client CSRs first; worker-0's serving CSR in
/// the next pass, once its kubelet has registered the Node.
const GOOD_ORDER: [&str; 3] = [GOOD[0], GOOD[2], GOOD[1]];

#[tokio::test]
async fn approves_exactly_the_good_csrs() {
    let (client, seen) = mock_api(recorded(), 0);
    let report = approve::approve_pending(&client, &plan()).await.unwrap();
    // The serving CSR waits for its Node (cluster-machine-approver's rule).
    let waiting = report
        .refused
        .iter()
        .find(|e| e.csr == GOOD[1])
        .expect("worker-0's serving CSR waits in the first pass");
    assert!(
        waiting
            .reason
            .contains("no Node lab1-worker-0 is registered"),
        "{waiting:?}"
    );
    let first: Vec<&str> = report.approved.iter().map(|e| e.csr.as_str()).collect();
    assert_eq!(first, [GOOD[0], GOOD[2]]);
    let second = approve::approve_pending(&client, &plan()).await.unwrap();

    let seen = seen.lock().unwrap();
    assert_eq!(seen.lists, 2);
    assert!(
        seen.other.is_empty(),
        "unexpected requests: {:?}",
        seen.other
    );
    let put: Vec<&str> = seen.approvals.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        put, GOOD_ORDER,
        "exactly the good CSRs are PUT to /approval"
    );

    for (name, body) in &seen.approvals {
        let conds = body["status"]["conditions"].as_array().unwrap();
        let last = conds.last().unwrap();
        assert_eq!(last["type"], "Approved", "{name}");
        assert_eq!(last["status"], "True", "{name}");
        assert_eq!(last["reason"], "ShiftlabApprove", "{name}");
        assert!(
            last["message"]
                .as_str()
                .unwrap()
                .starts_with("approved by shiftlab: "),
            "{name}: {last}"
        );
        // sent with the version read, so that a concurrent change is a conflict
        assert!(body["metadata"]["resourceVersion"].is_string(), "{name}");
        assert_eq!(body["metadata"]["name"], *name);
    }

    let approved: Vec<(&str, Option<&str>, Option<CsrKind>)> = report
        .approved
        .iter()
        .chain(&second.approved)
        .map(|e| (e.csr.as_str(), e.node.as_deref(), e.kind))
        .collect();
    assert_eq!(
        approved,
        [
            (
                "csr-good-client-worker-0",
                Some("lab1-worker-0"),
                Some(CsrKind::Client)
            ),
            (
                "csr-good-client-worker-1-fqdn",
                Some("lab1-worker-1"),
                Some(CsrKind::Client)
            ),
            (
                "csr-good-serving-worker-0",
                Some("lab1-worker-0"),
                Some(CsrKind::Serving)
            ),
        ]
    );

    let refused: BTreeMap<&str, &str> = second
        .refused
        .iter()
        .map(|e| (e.csr.as_str(), e.reason.as_str()))
        .collect();
    assert_eq!(refused.len(), HOSTILE.len(), "{refused:#?}");
    for (name, why) in HOSTILE {
        let reason = refused
            .get(name)
            .unwrap_or_else(|| panic!("{name} not refused"));
        assert!(reason.contains(why), "{name}: {reason:?} lacks {why:?}");
    }

    let skipped: BTreeMap<&str, &str> = report
        .skipped
        .iter()
        .map(|e| (e.csr.as_str(), e.reason.as_str()))
        .collect();
    assert_eq!(
        skipped,
        BTreeMap::from([
            ("csr-approved-client-ctlplane-0", "already approved"),
            ("csr-approved-serving-ctlplane-0", "already approved"),
            ("csr-denied-client-worker-1", "denied"),
            (
                "csr-operator-monitoring",
                "not a node CSR (signer kubernetes.io/kube-apiserver-client)"
            ),
        ])
    );
}

#[tokio::test]
async fn a_later_pass_approves_nothing_more() {
    let (client, seen) = mock_api(recorded(), 0);
    let plan = plan();
    approve::approve_pending(&client, &plan).await.unwrap();
    approve::approve_pending(&client, &plan).await.unwrap();
    let again = approve::approve_pending(&client, &plan).await.unwrap();
    assert!(again.approved.is_empty(), "{:?}", again.approved);
    assert_eq!(again.refused.len(), HOSTILE.len());
    assert_eq!(seen.lock().unwrap().approvals.len(), GOOD.len());
}

/// Recorded refusals closer to cluster-machine-approver: a client CSR for a Node
/// that exists, a second client CSR for a node, a serving CSR whose Node does not
/// exist or whose addresses differ.
#[tokio::test]
async fn refuses_what_the_cluster_contradicts() {
    let mut list = recorded();
    let items = list["items"].as_array_mut().unwrap();
    let by_name = |items: &Vec<Value>, n: &str| {
        items
            .iter()
            .find(|i| i["metadata"]["name"] == n)
            .unwrap()
            .clone()
    };
    // A new client CSR for ctlplane-0, whose Node exists, and a second one for worker-0.
    let mut again = by_name(items, GOOD[0]);
    again["metadata"]["name"] = json!("csr-second-client-worker-0");
    let mut joined = by_name(items, GOOD[0]);
    joined["metadata"]["name"] = json!("csr-client-existing-ctlplane-0");
    joined["spec"]["request"] =
        by_name(items, "csr-approved-client-ctlplane-0")["spec"]["request"].clone();
    items.push(again);
    items.push(joined);
    let (client, seen) = mock_api(list, 0);
    let r = approve::approve_pending(&client, &plan()).await.unwrap();
    let reason = |csr: &str| {
        r.refused
            .iter()
            .find(|e| e.csr == csr)
            .map(|e| e.reason.clone())
            .unwrap_or_else(|| panic!("{csr} was not refused: {r:#?}"))
    };
    assert!(
        reason("csr-client-existing-ctlplane-0").contains("Node lab1-ctlplane-0 already exists"),
        "{}",
        reason("csr-client-existing-ctlplane-0")
    );
    assert!(
        reason("csr-second-client-worker-0").contains("approved already"),
        "{}",
        reason("csr-second-client-worker-0")
    );
    assert!(reason(GOOD[1]).contains("no Node lab1-worker-0 is registered"));
    let put: Vec<String> = seen
        .lock()
        .unwrap()
        .approvals
        .iter()
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(put, [GOOD[0], GOOD[2]], "nothing refused was approved");
}

#[tokio::test]
async fn a_conflict_is_left_for_the_next_pass() {
    // The server lists a stale copy of one good CSR: its PUT meets a newer version.
    let (client, seen) = mock_api_stale(recorded(), 0, &[GOOD[0]]);
    let report = approve::approve_pending(&client, &plan()).await.unwrap();
    assert!(report.approved.iter().all(|e| e.csr != GOOD[0]));
    // worker-1's client CSR; worker-0's serving CSR waits for a Node that its
    // unapproved client CSR has not let register.
    let approved: Vec<&str> = report.approved.iter().map(|e| e.csr.as_str()).collect();
    assert_eq!(approved, [GOOD[2]]);
    let skipped = report.skipped.iter().find(|e| e.csr == GOOD[0]).unwrap();
    assert!(skipped.reason.contains("next pass"), "{skipped:?}");
    assert_eq!(seen.lock().unwrap().approvals.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn watch_retries_until_the_api_answers_and_stops_when_done() {
    let (client, seen) = mock_api(recorded(), 2);
    let nodes = NodeIdentity::from_plan(&plan());
    let opts = WatchOptions {
        until: Until::AllApproved,
        interval: Duration::from_secs(10),
        nodes: vec!["lab1-worker-0".into(), "lab1-ctlplane-0".into()],
        deadline: None,
    };
    let mut passes = 0;
    let report = approve::watch_until(
        &client,
        &nodes,
        &opts,
        |_| passes += 1,
        std::future::pending(),
    )
    .await
    .unwrap();
    assert!(!report.interrupted);
    assert!(report.missing.is_empty(), "{:?}", report.missing);
    // two failed lists, then one pass approves worker-0's client CSR and the next,
    // once its Node is there, its serving CSR (ctlplane-0 was already approved)
    assert_eq!(seen.lock().unwrap().lists, 4);
    assert_eq!(passes, 2);
    let names: Vec<&str> = report
        .report
        .approved
        .iter()
        .map(|e| e.csr.as_str())
        .collect();
    assert_eq!(names, GOOD_ORDER);
    assert_eq!(report.report.refused.len(), HOSTILE.len());
}

#[tokio::test(start_paused = true)]
async fn watch_reports_what_is_missing_when_interrupted() {
    let (client, seen) = mock_api(recorded(), 0);
    let nodes = NodeIdentity::from_plan(&plan());
    let opts = WatchOptions {
        until: Until::AllApproved,
        interval: Duration::from_secs(30),
        nodes: vec![],
        deadline: None,
    };
    let stop = tokio::time::sleep(Duration::from_secs(95));
    let report = approve::watch_until(&client, &nodes, &opts, |_| {}, stop)
        .await
        .unwrap();
    assert!(report.interrupted);
    let missing: Vec<(String, CsrKind)> = report
        .missing
        .iter()
        .map(|m| (m.node.clone(), m.kind))
        .collect();
    // lab1-worker-1's serving CSR never came; ctlplane-1 and -2 raised none
    assert!(missing.contains(&("lab1-worker-1".into(), CsrKind::Serving)));
    assert!(!missing
        .iter()
        .any(|(n, _)| n == "lab1-worker-0" || n == "lab1-ctlplane-0"));
    assert!(!missing.iter().any(|(n, _)| n == "lab1-bootstrap"));
    // a pass right away, quick ones while approvals happen, then every 30 s
    let lists = seen.lock().unwrap().lists;
    assert!((5..=7).contains(&lists), "{lists} lists");
    assert_eq!(seen.lock().unwrap().approvals.len(), GOOD.len());
}

#[tokio::test]
async fn watch_rejects_unknown_nodes() {
    let (client, _) = mock_api(recorded(), 0);
    let nodes = NodeIdentity::from_plan(&plan());
    let opts = WatchOptions {
        nodes: vec!["lab1-bootstrap".into()],
        ..WatchOptions::default()
    };
    let err = approve::watch_until(&client, &nodes, &opts, |_| {}, std::future::pending())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a cluster node"), "{err}");
}

#[test]
fn regenerate_fixture() {
    let path = fixture_dir().join("list.json");
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        let text = serde_json::to_string_pretty(&generate::list()).unwrap() + "\n";
        std::fs::write(&path, text).unwrap();
    }
    // The recording and the generator name the same CSRs in the same order.
    let names = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&recorded()), names(&generate::list()));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_ends_the_watch_with_what_is_missing() {
    let (client, _) = mock_api(recorded(), 0);
    let nodes = NodeIdentity::from_plan(&plan());
    let opts = WatchOptions {
        until: Until::AllApproved,
        interval: Duration::from_secs(30),
        // worker-1's serving CSR never comes in the recording
        nodes: vec!["lab1-worker-1".into()],
        deadline: Some(Duration::from_secs(300)),
    };
    let report = approve::watch_until(&client, &nodes, &opts, |_| {}, std::future::pending())
        .await
        .unwrap();
    assert!(report.timed_out);
    assert!(!report.interrupted);
    let missing: Vec<(String, CsrKind)> = report
        .missing
        .iter()
        .map(|m| (m.node.clone(), m.kind))
        .collect();
    assert_eq!(missing, [("lab1-worker-1".to_string(), CsrKind::Serving)]);
    let text = shiftlab::install::targets::csr_approval::csr_timeout_message(
        &report.missing,
        std::path::Path::new("/s/openshift-install.log"),
    );
    assert!(text.contains("lab1-worker-1 (serving)"), "{text}");
    assert!(text.contains("run the same command again"), "{text}");
    assert!(text.contains("PTR"), "{text}");
}

#[test]
fn compact_clusters_await_their_control_planes_by_name() {
    let text = "cluster: lab1\ndomain: example.com\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAAtest t@t']\nworkers: 0\n";
    let compact = plan::derive(
        &spec::from_str(text, "c.yaml", &Env::default())
            .unwrap()
            .spec,
    );
    assert_eq!(
        shiftlab::install::targets::csr_approval::csr_awaited(&compact),
        ["lab1-ctlplane-0", "lab1-ctlplane-1", "lab1-ctlplane-2"]
    );
    assert_eq!(
        shiftlab::install::targets::csr_approval::csr_awaited(&plan()),
        ["lab1-worker-0", "lab1-worker-1"]
    );
}
