//! A fake Kubernetes API server on loopback, for kube-rs tests without a
//! cluster. It behaves like the real API server where shiftlab depends on it
//! (kubernetes/kubernetes `staging/src/k8s.io/apiserver/pkg/endpoints/handlers`,
//! and the API conventions in kubernetes/community
//! `contributors/devel/sig-architecture/api-conventions.md`):
//!
//! - `GET /version` and discovery (`/api/v1`, `/apis/<group>/<version>`: an
//!   `APIResourceList`); a group not installed is a 404;
//! - `GET` one object (404 `Status` with reason `NotFound` when absent), list
//!   with `labelSelector` (`a=b,c=d` equality selectors);
//! - `PATCH` with `application/apply-patch+yaml` is server-side apply: it
//!   needs `fieldManager` (400 otherwise, "PATCH with apply requires
//!   fieldManager"... the real message), creates the object when absent (201)
//!   and otherwise makes the applied configuration the object's content for
//!   its sole manager, keeping `uid`, `creationTimestamp` and `status`
//!   (and a Service's allocated cluster IP and node ports, which it allocates
//!   on create);
//!   a namespaced object in a missing namespace is a 404;
//! - `PATCH` with `application/merge-patch+json` is RFC 7386 on an existing
//!   object (404 when absent);
//! - `DELETE` removes the object (a namespace takes its objects with it, as
//!   namespace finalization does) and answers a `Status` Success;
//! - every write bumps `metadata.resourceVersion`.
//!
//! For "killed mid-apply" tests, `hang_after_writes(n)` makes the (n+1)th
//! write wait forever, so a test can `kill -9` the client at a known point.
//!
//! `run_virt_controller` adds what KubeVirt's virt-controller does with a
//! VM's `spec.runStrategy` (kubevirt/kubevirt `pkg/virt-controller/watch/vm.go`):
//! `Always` (or `RerunOnFailure`) creates the VM's VirtualMachineInstance,
//! which goes Scheduling then Running; `Halted` deletes it, and it lingers
//! with a `deletionTimestamp` while virt-launcher shuts the guest down through
//! its ACPI power button; a VMI whose VM is gone is garbage-collected. The
//! VM's `status.printableStatus` follows (Starting, Running, Stopping,
//! Stopped). Its time is the requests the fake serves: a change takes `lag`
//! of them.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};

/// One resource type the fake serves.
#[derive(Clone, Debug)]
pub struct Served {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

pub fn core_types() -> Vec<Served> {
    vec![
        Served {
            group: "",
            version: "v1",
            kind: "Namespace",
            plural: "namespaces",
            namespaced: false,
        },
        Served {
            group: "",
            version: "v1",
            kind: "Secret",
            plural: "secrets",
            namespaced: true,
        },
        Served {
            group: "",
            version: "v1",
            kind: "Service",
            plural: "services",
            namespaced: true,
        },
        Served {
            group: "",
            version: "v1",
            kind: "ConfigMap",
            plural: "configmaps",
            namespaced: true,
        },
        // storage.k8s.io/v1 and apps/v1 are served by every Kubernetes API server.
        Served {
            group: "storage.k8s.io",
            version: "v1",
            kind: "StorageClass",
            plural: "storageclasses",
            namespaced: false,
        },
        Served {
            group: "apps",
            version: "v1",
            kind: "Deployment",
            plural: "deployments",
            namespaced: true,
        },
    ]
}

pub fn kubevirt_types() -> Vec<Served> {
    vec![
        Served {
            group: "kubevirt.io",
            version: "v1",
            kind: "VirtualMachine",
            plural: "virtualmachines",
            namespaced: true,
        },
        vmi_type(),
    ]
}

pub fn vmi_type() -> Served {
    Served {
        group: "kubevirt.io",
        version: "v1",
        kind: "VirtualMachineInstance",
        plural: "virtualmachineinstances",
        namespaced: true,
    }
}

pub fn multus_types() -> Vec<Served> {
    vec![Served {
        group: "k8s.cni.cncf.io",
        version: "v1",
        kind: "NetworkAttachmentDefinition",
        plural: "network-attachment-definitions",
        namespaced: true,
    }]
}

/// A request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
}

#[derive(Default)]
struct State {
    /// key: `<group>/<plural>/<namespace>/<name>` (namespace empty when cluster-scoped)
    objects: BTreeMap<String, Value>,
    seen: Vec<Seen>,
    writes: usize,
    hang_after: Option<usize>,
    /// VM restarts asked through the `restart` subresource, by `namespace/name`.
    restarts: BTreeMap<String, usize>,
    version: u64,
    uid: u64,
    /// Resource types (plurals) this client may not touch: RBAC's 403.
    forbidden: Vec<String>,
    /// virt-controller's behaviour, when on.
    virt: Option<VirtController>,
    /// Requests left until a VMI's pending change (start, shutdown) is done, by key.
    vmi_due: BTreeMap<String, usize>,
}

#[derive(Clone, Copy)]
struct VirtController {
    lag: usize,
    /// The guests ignore the ACPI power button: a VMI being deleted stays
    /// until it is deleted without a grace period.
    ignore_acpi: bool,
}

#[derive(Clone)]
pub struct FakeKube {
    pub addr: SocketAddr,
    types: Arc<Vec<Served>>,
    state: Arc<Mutex<State>>,
}

impl FakeKube {
    /// Start serving `types` on 127.0.0.1 (a port of its own), on a thread.
    pub fn start(types: Vec<Served>) -> FakeKube {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let fake = FakeKube {
            addr: listener.local_addr().unwrap(),
            types: Arc::new(types),
            state: Arc::default(),
        };
        let f = fake.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let f = f.clone();
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(move |req| {
                            let f = f.clone();
                            async move { Ok::<_, Infallible>(f.handle(req).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
        });
        fake
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig for this server (context `fake`), written to `path`.
    pub fn write_kubeconfig(&self, path: &std::path::Path) {
        std::fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
                 contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
                 current-context: fake\nusers:\n- name: fake\n  user:\n    token: fake-token\n",
                self.url()
            ),
        )
        .unwrap();
    }

    /// Act as virt-controller from now on (see the module doc): a VMI's start
    /// or shutdown takes `lag` requests; with `ignore_acpi` its guest never
    /// shuts down by itself.
    pub fn run_virt_controller(&self, lag: usize, ignore_acpi: bool) {
        self.state.lock().unwrap().virt = Some(VirtController { lag, ignore_acpi });
    }

    pub fn hang_after_writes(&self, n: Option<usize>) {
        self.state.lock().unwrap().hang_after = n;
    }

    pub fn restarts(&self, ns: &str, name: &str) -> usize {
        let st = self.state.lock().unwrap();
        st.restarts
            .get(&format!("{ns}/{name}"))
            .copied()
            .unwrap_or(0)
    }

    pub fn writes(&self) -> usize {
        self.state.lock().unwrap().writes
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Every stored object, keyed `Kind/namespace/name`.
    pub fn objects(&self) -> BTreeMap<String, Value> {
        self.state
            .lock()
            .unwrap()
            .objects
            .values()
            .map(|o| {
                (
                    format!(
                        "{}/{}/{}",
                        o["kind"].as_str().unwrap_or(""),
                        o["metadata"]["namespace"].as_str().unwrap_or(""),
                        o["metadata"]["name"].as_str().unwrap_or("")
                    ),
                    o.clone(),
                )
            })
            .collect()
    }

    /// Answer every request on `plural` with 403 Forbidden, as the API
    /// server does for a user whose RBAC roles do not grant it.
    pub fn forbid(&self, plural: &str) {
        self.state
            .lock()
            .unwrap()
            .forbidden
            .push(plural.to_string());
    }

    /// Put an object in place as if someone else had made it.
    pub fn insert(&self, obj: Value) {
        let t = self
            .types
            .iter()
            .find(|t| obj["kind"] == t.kind)
            .expect("a served kind")
            .clone();
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        self.state
            .lock()
            .unwrap()
            .objects
            .insert(key(&t, &ns, &name), obj);
    }

    /// Set a field under `status` of a stored object (what a controller does).
    pub fn set_status(&self, kind: &str, ns: &str, name: &str, status: Value) {
        let mut st = self.state.lock().unwrap();
        for o in st.objects.values_mut() {
            if o["kind"] == kind
                && o["metadata"]["namespace"] == ns
                && o["metadata"]["name"] == name
            {
                o["status"] = status.clone();
            }
        }
    }

    async fn handle(&self, req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let method = req.method().as_str().to_string();
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        let content_type = req
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let is_write = matches!(method.as_str(), "PATCH" | "POST" | "PUT" | "DELETE");
        let hang = {
            let mut st = self.state.lock().unwrap();
            st.seen.push(Seen {
                method: method.clone(),
                path: path.clone(),
                query: query.clone(),
                content_type: content_type.clone(),
            });
            is_write && st.hang_after.is_some_and(|n| st.writes >= n)
        };
        if hang {
            std::future::pending::<()>().await;
        }
        // virt-controller acts between requests: what a request changed is
        // seen to from the next one on.
        virt_controller(&mut self.state.lock().unwrap());
        let (code, v) = self.route(&method, &path, &query, &content_type, &body);
        if is_write && code.is_success() {
            self.state.lock().unwrap().writes += 1;
        }
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(v.to_string())))
            .unwrap()
    }

    fn route(
        &self,
        method: &str,
        path: &str,
        query: &str,
        ct: &str,
        body: &[u8],
    ) -> (StatusCode, Value) {
        if path == "/version" {
            return (
                StatusCode::OK,
                json!({"major": "1", "minor": "30", "gitVersion": "v1.30.0-fake", "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "", "platform": "linux/amd64"}),
            );
        }
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        if let Some(p) = {
            let st = self.state.lock().unwrap();
            st.forbidden
                .iter()
                .find(|p| segs.contains(&p.as_str()))
                .cloned()
        } {
            // The API server's wording (apiserver pkg/endpoints/handlers/responsewriters).
            return (
                StatusCode::FORBIDDEN,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "message": format!("{p} is forbidden: User \"lab\" cannot {} resource \"{p}\"", method.to_lowercase()),
                       "reason": "Forbidden", "code": 403}),
            );
        }
        // KubeVirt's restart subresource (kubevirt/kubevirt
        // pkg/virt-api/rest/subresource.go, RestartVMRequestHandler): 404 for
        // no VM, 409 for a VM that is not running, else 202 and the VMI goes.
        if let ["apis", "subresources.kubevirt.io", "v1", "namespaces", ns, "virtualmachines", name, "restart"] =
            segs.as_slice()
        {
            if method != "PUT" {
                return (StatusCode::METHOD_NOT_ALLOWED, json!({}));
            }
            let mut st = self.state.lock().unwrap();
            let k = format!("kubevirt.io/virtualmachines/{ns}/{name}");
            let Some(vm) = st.objects.get(&k) else {
                return not_found(&format!("virtualmachines.kubevirt.io \"{name}\" not found"));
            };
            if !matches!(
                vm["spec"]["runStrategy"].as_str(),
                Some("Always" | "RerunOnFailure")
            ) {
                return (
                    StatusCode::CONFLICT,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409, "message": "VM is not running"}),
                );
            }
            *st.restarts.entry(format!("{ns}/{name}")).or_default() += 1;
            return (StatusCode::ACCEPTED, json!({}));
        }
        // Discovery.
        let gv = match segs.as_slice() {
            ["api", v] => Some(("", *v)),
            ["apis", g, v] => Some((*g, *v)),
            _ => None,
        };
        if let Some((g, v)) = gv {
            let res: Vec<Value> = self
                .types
                .iter()
                .filter(|t| t.group == g && t.version == v)
                .map(|t| json!({"name": t.plural, "singularName": t.kind.to_lowercase(), "namespaced": t.namespaced, "kind": t.kind, "verbs": ["create", "delete", "get", "list", "patch", "update"]}))
                .collect();
            if res.is_empty() {
                return not_found(&format!(
                    "the server could not find the requested resource ({path})"
                ));
            }
            let gvs = if g.is_empty() {
                v.to_string()
            } else {
                format!("{g}/{v}")
            };
            return (
                StatusCode::OK,
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gvs, "resources": res}),
            );
        }
        // /api/v1/... or /apis/<g>/<v>/...
        let (group, rest) = match segs.as_slice() {
            ["api", "v1", rest @ ..] => ("", rest),
            ["apis", g, _v, rest @ ..] => (*g, rest),
            _ => return not_found("no such path"),
        };
        let (ns, plural, name) = match rest {
            ["namespaces", ns, plural] => (ns.to_string(), plural.to_string(), None),
            ["namespaces", ns, plural, name] => {
                (ns.to_string(), plural.to_string(), Some(name.to_string()))
            }
            [plural] => (String::new(), plural.to_string(), None),
            [plural, name] => (String::new(), plural.to_string(), Some(name.to_string())),
            _ => return not_found("no such path"),
        };
        // `/api/v1/namespaces/<name>` is the namespace itself.
        let (ns, plural, name) = if group.is_empty() && rest.len() == 2 && rest[0] == "namespaces" {
            (
                String::new(),
                "namespaces".to_string(),
                Some(rest[1].to_string()),
            )
        } else {
            (ns, plural, name)
        };
        let Some(t) = self
            .types
            .iter()
            .find(|t| t.group == group && t.plural == plural)
            .cloned()
        else {
            return not_found(&format!(
                "the server could not find the requested resource ({path})"
            ));
        };
        let mut st = self.state.lock().unwrap();
        match (method, name) {
            ("GET", None) => {
                let sel = query_param(query, "labelSelector").unwrap_or_default();
                let items: Vec<Value> = st
                    .objects
                    .iter()
                    .filter(|(k, _)| {
                        k.starts_with(&format!("{}/{}/{}/", t.group, t.plural, ns))
                            || (ns.is_empty()
                                && k.starts_with(&format!("{}/{}/", t.group, t.plural)))
                    })
                    .map(|(_, o)| o.clone())
                    .filter(|o| matches_selector(o, &sel))
                    .collect();
                let api_version = api_version(&t);
                (
                    StatusCode::OK,
                    json!({"kind": format!("{}List", t.kind), "apiVersion": api_version, "metadata": {"resourceVersion": st.version.to_string()}, "items": items}),
                )
            }
            ("GET", Some(name)) => match st.objects.get(&key(&t, &ns, &name)) {
                Some(o) => (StatusCode::OK, o.clone()),
                None => not_found(&format!("{} \"{name}\" not found", t.plural)),
            },
            ("PATCH", Some(name)) => {
                let patch: Value = match serde_json::from_slice(body) {
                    Ok(v) => v,
                    Err(e) => return bad_request(&format!("invalid patch body: {e}")),
                };
                let k = key(&t, &ns, &name);
                if t.namespaced && !st.objects.contains_key(&format!("/namespaces//{ns}")) {
                    return not_found(&format!("namespaces \"{ns}\" not found"));
                }
                if ct.starts_with("application/apply-patch") {
                    if query_param(query, "fieldManager").is_none_or(|m| m.is_empty()) {
                        return bad_request("PATCH with apply requires fieldManager");
                    }
                    if patch["metadata"]["name"] != name.as_str() || patch["kind"] != t.kind {
                        return bad_request(
                            "the name or kind of the object does not match the request",
                        );
                    }
                    st.version += 1;
                    let version = st.version.to_string();
                    let created = !st.objects.contains_key(&k);
                    let mut obj = patch.clone();
                    if t.namespaced {
                        obj["metadata"]["namespace"] = json!(ns);
                    }
                    match st.objects.get(&k) {
                        Some(cur) => {
                            for f in ["uid", "creationTimestamp"] {
                                obj["metadata"][f] = cur["metadata"][f].clone();
                            }
                            if !cur["status"].is_null() {
                                obj["status"] = cur["status"].clone();
                            }
                            if t.kind == "Service" {
                                keep_service_allocations(&mut obj, cur);
                            }
                        }
                        None => {
                            st.uid += 1;
                            obj["metadata"]["uid"] = json!(format!("uid-{}", st.uid));
                            obj["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
                            if t.kind == "Service" {
                                allocate_service(&mut obj, st.uid);
                            }
                        }
                    }
                    obj["metadata"]["resourceVersion"] = json!(version);
                    st.objects.insert(k, obj.clone());
                    (
                        if created {
                            StatusCode::CREATED
                        } else {
                            StatusCode::OK
                        },
                        obj,
                    )
                } else if ct.starts_with("application/merge-patch+json") {
                    let Some(cur) = st.objects.get(&k).cloned() else {
                        return not_found(&format!("{} \"{name}\" not found", t.plural));
                    };
                    let mut obj = cur;
                    merge(&mut obj, &patch);
                    st.version += 1;
                    obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
                    st.objects.insert(k, obj.clone());
                    (StatusCode::OK, obj)
                } else {
                    (
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "UnsupportedMediaType", "code": 415, "message": format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml ({ct})")}),
                    )
                }
            }
            ("DELETE", Some(name)) => {
                let k = key(&t, &ns, &name);
                if st.objects.remove(&k).is_none() {
                    return not_found(&format!("{} \"{name}\" not found", t.plural));
                }
                if t.kind == "Namespace" {
                    // Namespace finalization deletes what is in it.
                    st.objects
                        .retain(|k, _| k.split('/').nth(2) != Some(name.as_str()));
                }
                (
                    StatusCode::OK,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name, "kind": t.plural}}),
                )
            }
            _ => (
                StatusCode::METHOD_NOT_ALLOWED,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "MethodNotAllowed", "code": 405}),
            ),
        }
    }
}

fn api_version(t: &Served) -> String {
    if t.group.is_empty() {
        t.version.to_string()
    } else {
        format!("{}/{}", t.group, t.version)
    }
}

fn key(t: &Served, ns: &str, name: &str) -> String {
    format!(
        "{}/{}/{}/{}",
        t.group,
        t.plural,
        if t.namespaced { ns } else { "" },
        name
    )
}

fn not_found(msg: &str) -> (StatusCode, Value) {
    (
        StatusCode::NOT_FOUND,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": msg, "reason": "NotFound", "code": 404}),
    )
}

fn bad_request(msg: &str) -> (StatusCode, Value) {
    (
        StatusCode::BAD_REQUEST,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": msg, "reason": "BadRequest", "code": 400}),
    )
}

fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn matches_selector(o: &Value, sel: &str) -> bool {
    sel.split(',')
        .filter(|s| !s.is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => o["metadata"]["labels"][k] == v,
            None => !o["metadata"]["labels"][term].is_null(),
        })
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// What the API server allocates for a new Service (kubernetes
/// `pkg/registry/core/service/storage/alloc.go`): a cluster IP unless the
/// Service is headless (`clusterIP: None`), and a node port per port for
/// `NodePort` and `LoadBalancer` Services. `n` makes them unique.
fn allocate_service(svc: &mut Value, n: u64) {
    let spec = &mut svc["spec"];
    if spec["clusterIP"].is_null() {
        spec["clusterIP"] = json!(format!("10.96.{}.{}", n / 250, n % 250 + 1));
    }
    if matches!(spec["type"].as_str(), Some("NodePort" | "LoadBalancer")) {
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for (i, p) in ports.iter_mut().enumerate() {
                if p["nodePort"].is_null() {
                    p["nodePort"] = json!(30000 + (n * 10 + i as u64) % 2768);
                }
            }
        }
    }
}

/// On an apply that leaves them out, a Service keeps its allocated cluster IP
/// and node ports: the API server owns those fields, not the applier, so
/// server-side apply leaves them (kubernetes `staging/src/k8s.io/apimachinery/pkg/util/managedfields`).
fn keep_service_allocations(svc: &mut Value, cur: &Value) {
    if svc["spec"]["clusterIP"].is_null() && !cur["spec"]["clusterIP"].is_null() {
        svc["spec"]["clusterIP"] = cur["spec"]["clusterIP"].clone();
    }
    let old: Vec<Value> = cur["spec"]["ports"].as_array().cloned().unwrap_or_default();
    if let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut() {
            if p["nodePort"].is_null() {
                if let Some(o) = old.iter().find(|o| o["port"] == p["port"]) {
                    if !o["nodePort"].is_null() {
                        p["nodePort"] = o["nodePort"].clone();
                    }
                }
            }
        }
    }
}

/// One step of virt-controller's loop (see the module doc), run before every
/// request while it is on.
fn virt_controller(st: &mut State) {
    let Some(vc) = st.virt else {
        return;
    };
    let vm_prefix = "kubevirt.io/virtualmachines/";
    let vmi_prefix = "kubevirt.io/virtualmachineinstances/";
    let vms: Vec<(String, Value)> = st
        .objects
        .iter()
        .filter(|(k, _)| k.starts_with(vm_prefix))
        .map(|(k, v)| (k[vm_prefix.len()..].to_string(), v.clone()))
        .collect();
    // A VMI whose VM is gone goes with it (its ownerReference).
    let orphans: Vec<String> = st
        .objects
        .keys()
        .filter(|k| k.starts_with(vmi_prefix))
        .filter(|k| !vms.iter().any(|(id, _)| **k == format!("{vmi_prefix}{id}")))
        .cloned()
        .collect();
    for k in orphans {
        st.objects.remove(&k);
        st.vmi_due.remove(&k);
    }
    // Time passes: pending changes come nearer.
    for left in st.vmi_due.values_mut() {
        *left = left.saturating_sub(1);
    }
    for (n, (id, vm)) in vms.iter().enumerate() {
        let k = format!("{vmi_prefix}{id}");
        let run = matches!(
            vm["spec"]["runStrategy"].as_str(),
            Some("Always" | "RerunOnFailure")
        );
        let due = st.vmi_due.get(&k).is_some_and(|left| *left == 0);
        let printable = match st.objects.get(&k).cloned() {
            None if run => {
                let mut vmi = json!({
                    "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                    "metadata": {"name": vm["metadata"]["name"], "namespace": vm["metadata"]["namespace"],
                        "labels": vm["spec"]["template"]["metadata"]["labels"]},
                    "status": {"phase": "Scheduling"},
                });
                let mut printable = "Starting";
                if vc.lag == 0 {
                    run_vmi(&mut vmi, vm, n);
                    printable = "Running";
                } else {
                    st.vmi_due.insert(k.clone(), vc.lag);
                }
                st.objects.insert(k.clone(), vmi);
                printable
            }
            None => "Stopped",
            Some(mut vmi) => {
                let deleting = !vmi["metadata"]["deletionTimestamp"].is_null();
                if !run && !deleting {
                    vmi["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                    st.vmi_due.insert(k.clone(), vc.lag);
                    st.objects.insert(k.clone(), vmi);
                    "Stopping"
                } else if deleting && (due || vc.lag == 0) && !vc.ignore_acpi {
                    st.objects.remove(&k);
                    st.vmi_due.remove(&k);
                    "Stopped"
                } else if deleting {
                    "Stopping"
                } else if vmi["status"]["phase"] == "Running" {
                    "Running"
                } else if due {
                    run_vmi(&mut vmi, vm, n);
                    st.vmi_due.remove(&k);
                    st.objects.insert(k.clone(), vmi);
                    "Running"
                } else {
                    "Starting"
                }
            }
        };
        if let Some(vm) = st.objects.get_mut(&format!("{vm_prefix}{id}")) {
            vm["status"]["printableStatus"] = json!(printable);
            vm["status"]["ready"] = json!(printable == "Running");
        }
    }
}

/// A VMI that runs: phase Running, its interface with the VM's MAC and an
/// address (documentation range; nothing is sent to it).
fn run_vmi(vmi: &mut Value, vm: &Value, n: usize) {
    vmi["status"] = json!({
        "phase": "Running",
        "interfaces": [{
            "name": "default",
            "mac": vm.pointer("/spec/template/spec/domain/devices/interfaces/0/macAddress"),
            "ipAddress": format!("192.0.2.{}", n + 100),
        }],
    });
}
