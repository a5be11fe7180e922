//! The stand-in Kubernetes API on loopback used by the CSR and start tests: it
//! answers with the recorded CSR list (`tests/fixtures/csr/list.json`) and a Node
//! list, records the approvals, and behaves as the real API does for what it
//! models:
//! - `GET /version`: the server's version (what kube-rs' `apiserver_version` asks);
//! - `GET` the CSR list, `PUT …/approval` sets the CSR's status conditions;
//! - a kubelet whose client CSR was approved registers its Node (named by the
//!   CSR's CN) and reports the `Ready` condition `True` (Kubernetes docs,
//!   "Nodes" > "Node status" > "Conditions");
//! - anything else: a `Status` 404, as the API answers for an unknown path.
//!
//! Nothing leaves 127.0.0.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::Value;

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// Serve GET list and PUT approval, one request per connection; return the address
/// and the PUT paths seen.
pub fn stand_in_api() -> (String, Arc<Mutex<Vec<String>>>) {
    stand_in_api_with(Vec::new(), Vec::new(), 0)
}

/// [`stand_in_api`] with the drain side too:
/// - `extra_nodes` exist from the start;
/// - `GET`/`PATCH`/`DELETE /api/v1/nodes/<name>` (a merge patch of `spec`);
/// - `GET /api/v1/pods?fieldSelector=spec.nodeName=<node>` lists `pods`;
/// - `POST /api/v1/namespaces/<ns>/pods/<name>/eviction`: for a pod labelled
///   `pdb: protected`, the first `pdb_refusals` attempts get 429 TooManyRequests
///   with the API's disruption-budget message (Kubernetes docs, "API-initiated
///   Eviction": "429 Too Many Requests … the eviction is not currently allowed
///   because of the configured PodDisruptionBudget"); otherwise the pod is deleted
///   and 201 with a Success Status is returned;
/// - the default IngressController (`operator.openshift.io/v1`) with 2 replicas.
///
/// Eviction results are recorded in the returned list as `POST <path> <code>`.
pub fn stand_in_api_with(
    extra_nodes: Vec<Value>,
    pods: Vec<Value>,
    pdb_refusals: usize,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let mut pods = pods;
    let mut refusals_left = pdb_refusals;
    let text = std::fs::read(super::repo().join("tests/fixtures/csr/list.json")).unwrap();
    let mut list: Value = serde_json::from_slice(&text).unwrap();
    // ctlplane-0's certificates are approved in the recording: its Node exists. An
    // approved client CSR lets its kubelet register (name: the CSR's CN), with the
    // addresses the plan gives it (cluster.yaml: the default 192.168.126.0/24).
    let node = |name: &str, host: &str, ip: &str| {
        serde_json::json!({"metadata": {"name": name}, "status": {"addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": host},
            {"type": "InternalDNS", "address": format!("{host}.lab1.example.com")},
        ], "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
    };
    let mut nodes = vec![node("lab1-ctlplane-0", "lab1-ctlplane-0", "192.168.126.11")];
    nodes.extend(extra_nodes);
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
            let node_path = path.strip_prefix("/api/v1/nodes/").map(str::to_string);
            let status_json = |code: u16, reason: &str, message: &str| {
                serde_json::to_vec(
                    &serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": if code < 300 { "Success" } else { "Failure" },
                    "code": code, "reason": reason, "message": message}),
                )
                .unwrap()
            };
            let (status, reply) = if let Some(name) = node_path.filter(|n| !n.contains('/')) {
                let i = nodes.iter().position(|n| n["metadata"]["name"] == name.as_str());
                match (method.as_str(), i) {
                    ("GET", Some(i)) => ("200 OK", serde_json::to_vec(&nodes[i]).unwrap()),
                    ("PATCH", Some(i)) => {
                        let patch: Value = serde_json::from_slice(&body).unwrap();
                        nodes[i]["spec"] = patch["spec"].clone();
                        seen.lock().unwrap().push(format!("PATCH {path}"));
                        ("200 OK", serde_json::to_vec(&nodes[i]).unwrap())
                    }
                    ("DELETE", Some(i)) => {
                        nodes.remove(i);
                        seen.lock().unwrap().push(format!("DELETE {path}"));
                        ("200 OK", status_json(200, "", ""))
                    }
                    _ => ("404 Not Found", status_json(404, "NotFound", &format!("nodes \"{name}\" not found"))),
                }
            } else if method == "GET" && path == "/api/v1/pods" {
                let query = target.split_once('?').map(|x| x.1).unwrap_or("").replace("%3D", "=").replace("%2F", "/");
                let on = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("fieldSelector=spec.nodeName="))
                    .unwrap_or("")
                    .to_string();
                let items: Vec<&Value> = pods.iter().filter(|p| p["spec"]["nodeName"] == on.as_str()).collect();
                let l = serde_json::json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items});
                ("200 OK", serde_json::to_vec(&l).unwrap())
            } else if method == "POST" && path.ends_with("/eviction") {
                let parts: Vec<&str> = path.split('/').collect();
                // /api/v1/namespaces/<ns>/pods/<name>/eviction
                let (ns, name) = (parts[4].to_string(), parts[6].to_string());
                let i = pods.iter().position(|p| p["metadata"]["namespace"] == ns.as_str() && p["metadata"]["name"] == name.as_str());
                let r = match i {
                    None => ("404 Not Found", status_json(404, "NotFound", &format!("pods \"{name}\" not found"))),
                    Some(i) if pods[i]["metadata"]["labels"]["pdb"] == "protected" && refusals_left > 0 => {
                        refusals_left -= 1;
                        ("429 Too Many Requests", status_json(429, "TooManyRequests",
                            "Cannot evict pod as it would violate the pod's disruption budget."))
                    }
                    Some(i) => {
                        pods.remove(i);
                        ("201 Created", status_json(201, "", ""))
                    }
                };
                seen.lock().unwrap().push(format!("POST {path} {}", &r.0[..3]));
                r
            } else if method == "GET"
                && path == "/apis/operator.openshift.io/v1/namespaces/openshift-ingress-operator/ingresscontrollers/default"
            {
                let ic = serde_json::json!({"apiVersion": "operator.openshift.io/v1", "kind": "IngressController",
                    "metadata": {"name": "default", "namespace": "openshift-ingress-operator"},
                    "spec": {"replicas": 2}});
                ("200 OK", serde_json::to_vec(&ic).unwrap())
            } else if method == "GET" && path == "/version" {
                let v = serde_json::json!({"major": "1", "minor": "30", "gitVersion": "v1.30.0",
                    "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
                    "compiler": "gc", "platform": "linux/amd64"});
                ("200 OK", serde_json::to_vec(&v).unwrap())
            } else if method == "GET" && path == CSRS {
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
