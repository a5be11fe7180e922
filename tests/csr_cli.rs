//! `shiftlab approve-csrs` end to end against a stand-in API server on loopback that
//! answers with the recorded list (`tests/fixtures/csr/list.json`) and records the
//! approvals. Nothing leaves 127.0.0.1.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const GOOD: [&str; 3] = [
    "csr-good-client-worker-0",
    "csr-good-serving-worker-0",
    "csr-good-client-worker-1-fqdn",
];

/// Serve GET list and PUT approval, one request per connection; return the address
/// and the PUT paths seen.
fn stand_in_api() -> (String, Arc<Mutex<Vec<String>>>) {
    let text = std::fs::read(common::repo().join("tests/fixtures/csr/list.json")).unwrap();
    let mut list: Value = serde_json::from_slice(&text).unwrap();
    // ctlplane-0's certificates are approved in the recording: its Node exists. An
    // approved client CSR lets its kubelet register (name: the CSR's CN), with the
    // addresses the plan gives it (cluster.yaml: the default 192.168.126.0/24).
    let node = |name: &str, host: &str, ip: &str| {
        serde_json::json!({"metadata": {"name": name}, "status": {"addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": host},
            {"type": "InternalDNS", "address": format!("{host}.lab1.example.com")},
        ]}})
    };
    let mut nodes = vec![node("lab1-ctlplane-0", "lab1-ctlplane-0", "192.168.126.11")];
    let registers = [
        (
            "csr-good-client-worker-0",
            node("lab1-worker-0", "lab1-worker-0", "192.168.126.20"),
        ),
        (
            "csr-good-client-worker-1-fqdn",
            node(
                "lab1-worker-1.lab1.example.com",
                "lab1-worker-1",
                "192.168.126.21",
            ),
        ),
    ];
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let puts = Arc::new(Mutex::new(Vec::new()));
    let seen = puts.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (method, target) = (
                parts.next().unwrap_or("").to_string(),
                parts.next().unwrap_or("").to_string(),
            );
            let mut length = 0;
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                if h.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        length = v.trim().parse().unwrap();
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let path = target.split('?').next().unwrap().to_string();
            let (status, reply) = if method == "GET" && path == CSRS {
                ("200 OK", serde_json::to_vec(&list).unwrap())
            } else if method == "GET" && path == "/api/v1/nodes" {
                let l = serde_json::json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": nodes});
                ("200 OK", serde_json::to_vec(&l).unwrap())
            } else if method == "PUT" && path.ends_with("/approval") {
                let put: Value = serde_json::from_slice(&body).unwrap();
                let name = put["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if let Some(item) = list["items"]
                    .as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .find(|i| i["metadata"]["name"] == name.as_str())
                {
                    item["status"] = put["status"].clone();
                }
                if let Some((_, n)) = registers.iter().find(|(c, _)| *c == name) {
                    nodes.push(n.clone());
                }
                seen.lock().unwrap().push(path);
                ("200 OK", body)
            } else {
                ("404 Not Found", br#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound","message":"no"}"#.to_vec())
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                reply.len()
            );
            let _ = stream.write_all(&reply);
        }
    });
    (addr, puts)
}

/// A state dir with lab1's plan.json and an admin kubeconfig for `server`.
fn state(home: &Path, server: &str) {
    let out = common::shiftlab(
        &[
            "plan",
            "-f",
            common::repo()
                .join("tests/fixtures/csr/cluster.yaml")
                .to_str()
                .unwrap(),
            "-o",
            "json",
        ],
        home,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = home.join("state/clusters/lab1");
    std::fs::create_dir_all(dir.join("assets/auth")).unwrap();
    std::fs::write(dir.join("plan.json"), &out.stdout).unwrap();
    std::fs::write(
        dir.join("assets/auth/kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: lab1\n  cluster:\n    server: {server}\n\
             contexts:\n- name: admin\n  context:\n    cluster: lab1\n    user: admin\n\
             current-context: admin\nusers:\n- name: admin\n  user:\n    token: test-token\n"
        ),
    )
    .unwrap();
}

fn put_paths(puts: &Mutex<Vec<String>>) -> Vec<String> {
    puts.lock().unwrap().clone()
}

/// The first pass approves the client CSRs; worker-0's serving CSR waits for its Node.
fn expected_puts() -> Vec<String> {
    [GOOD[0], GOOD[2]]
        .iter()
        .map(|n| format!("{CSRS}/{n}/approval"))
        .collect()
}

#[test]
fn approves_the_good_csrs_and_reports_as_json() {
    let home = tempfile::tempdir().unwrap();
    let (server, puts) = stand_in_api();
    state(home.path(), &server);
    let out = common::shiftlab(&["approve-csrs", "lab1", "-o", "json"], home.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = |k: &str| -> Vec<String> {
        report[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["csr"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("approved"), [GOOD[0], GOOD[2]]);
    assert_eq!(names("refused").len(), 10, "{report:#}");
    assert!(names("refused")
        .iter()
        .all(|n| n.starts_with("csr-hostile-") || n == GOOD[1]));
    assert_eq!(put_paths(&puts), expected_puts());
    // refusals are logged as warnings with their reason
    assert!(
        stderr.contains("refused: intruder is not a node of the plan"),
        "{stderr}"
    );
}

#[test]
fn prints_a_table_and_watches_one_node() {
    let home = tempfile::tempdir().unwrap();
    let (server, puts) = stand_in_api();
    state(home.path(), &server);
    let out = common::shiftlab(&["approve-csrs", "lab1"], home.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let first = table.lines().next().unwrap();
    for h in ["CSR", "DECISION", "NODE", "KIND", "REASON"] {
        assert!(first.contains(h), "{table}");
    }
    assert!(table.contains("csr-hostile-wrong-san"), "{table}");
    assert_eq!(
        table.lines().filter(|l| l.contains(" approved ")).count(),
        2,
        "{table}"
    );

    let out = common::shiftlab(
        &["approve-csrs", "lab1", "--watch", "--node", "lab1-worker-0"],
        home.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("approved csr-good-serving-worker-0 (lab1-worker-0 serving)"),
        "{text}"
    );
    assert!(text.contains("every awaited node has its client and serving certificates approved"));
    assert_eq!(put_paths(&puts).len(), 3);
}

#[test]
fn without_a_plan_it_says_where_it_looked() {
    let home = tempfile::tempdir().unwrap();
    let out = common::shiftlab(&["approve-csrs", "nosuch"], home.path());
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("clusters/nosuch/plan.json"), "{stderr}");
}
