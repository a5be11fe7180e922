//! CSR approval against recorded API responses (kube-rs tower-test style): the API is
//! a mock service answering with `tests/fixtures/csr/list.json`; the tests assert
//! exactly which `/approval` PUTs happen. Nothing here opens a connection.

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

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/csr")
}

fn plan() -> Plan {
    let text = std::fs::read_to_string(fixture_dir().join("cluster.yaml")).unwrap();
    let spec = spec::from_str(&text, "cluster.yaml", &Env::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .spec;
    plan::derive(&spec)
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
            if parts.method == Method::GET && path == CSRS {
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

#[tokio::test]
async fn approves_exactly_the_good_csrs() {
    let (client, seen) = mock_api(recorded(), 0);
    let report = approve::approve_pending(&client, &plan()).await.unwrap();

    let seen = seen.lock().unwrap();
    assert_eq!(seen.lists, 1);
    assert!(
        seen.other.is_empty(),
        "unexpected requests: {:?}",
        seen.other
    );
    let put: Vec<&str> = seen.approvals.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(put, GOOD, "exactly the good CSRs are PUT to /approval");

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
                "csr-good-serving-worker-0",
                Some("lab1-worker-0"),
                Some(CsrKind::Serving)
            ),
            (
                "csr-good-client-worker-1-fqdn",
                Some("lab1-worker-1"),
                Some(CsrKind::Client)
            ),
        ]
    );

    let refused: BTreeMap<&str, &str> = report
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
async fn a_second_pass_approves_nothing_more() {
    let (client, seen) = mock_api(recorded(), 0);
    let plan = plan();
    approve::approve_pending(&client, &plan).await.unwrap();
    let again = approve::approve_pending(&client, &plan).await.unwrap();
    assert!(again.approved.is_empty(), "{:?}", again.approved);
    assert_eq!(again.refused.len(), HOSTILE.len());
    assert_eq!(seen.lock().unwrap().approvals.len(), GOOD.len());
}

#[tokio::test]
async fn a_conflict_is_left_for_the_next_pass() {
    // The server lists a stale copy of one good CSR: its PUT meets a newer version.
    let (client, seen) = mock_api_stale(recorded(), 0, &[GOOD[0]]);
    let report = approve::approve_pending(&client, &plan()).await.unwrap();
    assert!(report.approved.iter().all(|e| e.csr != GOOD[0]));
    assert_eq!(report.approved.len(), GOOD.len() - 1);
    let skipped = report.skipped.iter().find(|e| e.csr == GOOD[0]).unwrap();
    assert!(skipped.reason.contains("next pass"), "{skipped:?}");
    assert_eq!(seen.lock().unwrap().approvals.len(), GOOD.len());
}

#[tokio::test(start_paused = true)]
async fn watch_retries_until_the_api_answers_and_stops_when_done() {
    let (client, seen) = mock_api(recorded(), 2);
    let nodes = NodeIdentity::from_plan(&plan());
    let opts = WatchOptions {
        until: Until::AllApproved,
        interval: Duration::from_secs(10),
        nodes: vec!["lab1-worker-0".into(), "lab1-ctlplane-0".into()],
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
    // two failed lists, then one pass approves worker-0 (ctlplane-0 was already approved)
    assert_eq!(seen.lock().unwrap().lists, 3);
    assert_eq!(passes, 1);
    let names: Vec<&str> = report
        .report
        .approved
        .iter()
        .map(|e| e.csr.as_str())
        .collect();
    assert_eq!(names, GOOD);
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
    // a pass right away, a quick one after the approvals, then every 30 s
    let lists = seen.lock().unwrap().lists;
    assert!((4..=5).contains(&lists), "{lists} lists");
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
