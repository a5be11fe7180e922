//! The fake Kubernetes API server on loopback, the one every kube-rs test uses
//! instead of a cluster (no kube-apiserver can be installed here). It behaves
//! as the real API server was measured to (kube-apiserver 1.32.6 with the
//! KubeVirt, CDI, Multus, metal3 and OpenShift CRDs; issue 26 records how) and
//! as its source says (kubernetes/kubernetes
//! `staging/src/k8s.io/apiserver/pkg/endpoints/handlers`, the API conventions in
//! kubernetes/community `contributors/devel/sig-architecture/api-conventions.md`).
//! Each rule names the real behaviour it follows where it is written:
//!
//! - `GET /version` and discovery (`/api/v1`, `/apis/<group>/<version>`: an
//!   `APIResourceList`); a group not installed is a 404;
//! - `GET` one object (404 `Status` `NotFound` when absent), list with
//!   `labelSelector` (`a=b,c=d`) and `fieldSelector` (`spec.nodeName=x`);
//! - `PATCH` `application/apply-patch+yaml` is server-side apply, merged by
//!   field ownership ([`State::apply`]): 422 without `fieldManager`, 409 on a
//!   conflict without `force`, 500 for an unknown field on a built-in type,
//!   422 for one on a custom resource under `fieldValidation=Strict` (pruned
//!   otherwise), 403 for a new object in a Terminating namespace;
//! - `PATCH` `application/merge-patch+json` is RFC 7386 on an existing object
//!   ([`State::merge_patch`]; where a KubeVirt `runStrategy` patch lands);
//! - `DELETE` ([`State::delete`]): a Namespace goes Terminating and the
//!   namespace controller empties and removes it later; a foreground deletion
//!   keeps the owner with the `foregroundDeletion` finalizer until its
//!   dependents are gone; other deletions are immediate. "Later" is a few
//!   further requests ([`FakeKube::deletion_lag`]): the controllers run
//!   beside the API server, and a client that polls gives them the time;
//! - subresources: a CSR's `/approval` (PUT, 409 on a stale resourceVersion),
//!   a pod's `/eviction` (POST, 429 while a PodDisruptionBudget holds it),
//!   KubeVirt's `restart`;
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
//!
//! Nothing leaves 127.0.0.1.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
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

fn served(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Served {
    Served {
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

pub fn core_types() -> Vec<Served> {
    vec![
        served("", "v1", "Namespace", "namespaces", false),
        served("", "v1", "Secret", "secrets", true),
        served("", "v1", "Service", "services", true),
        served("", "v1", "ConfigMap", "configmaps", true),
        // storage.k8s.io/v1 and apps/v1 are served by every Kubernetes API server.
        served(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            false,
        ),
        served("apps", "v1", "Deployment", "deployments", true),
    ]
}

pub fn kubevirt_types() -> Vec<Served> {
    vec![
        served(
            "kubevirt.io",
            "v1",
            "VirtualMachine",
            "virtualmachines",
            true,
        ),
        vmi_type(),
    ]
}

pub fn vmi_type() -> Served {
    served(
        "kubevirt.io",
        "v1",
        "VirtualMachineInstance",
        "virtualmachineinstances",
        true,
    )
}

pub fn multus_types() -> Vec<Served> {
    vec![served(
        "k8s.cni.cncf.io",
        "v1",
        "NetworkAttachmentDefinition",
        "network-attachment-definitions",
        true,
    )]
}

/// What CSR approval, node waits and drains use: CSRs, Nodes, Pods, and
/// OpenShift's IngressController.
pub fn node_types() -> Vec<Served> {
    vec![
        served(
            "certificates.k8s.io",
            "v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            false,
        ),
        served("", "v1", "Node", "nodes", false),
        served("", "v1", "Pod", "pods", true),
        served(
            "operator.openshift.io",
            "v1",
            "IngressController",
            "ingresscontrollers",
            true,
        ),
    ]
}

/// The top-level fields of the built-in kinds the fake serves (k8s.io/api
/// `core/v1/types.go`, `apps/v1/types.go`, `storage/v1/types.go`,
/// `certificates/v1/types.go`): the real server knows every field of these
/// from its compiled-in schema; the fake checks the top level and `metadata`
/// (deeper schemas are tests/kubevirt_schema.rs's job). `None`: a custom
/// resource.
fn builtin_fields(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "Namespace" | "Service" | "Deployment" | "Node" | "Pod" | "CertificateSigningRequest" => {
            &["apiVersion", "kind", "metadata", "spec", "status"]
        }
        "Secret" => &[
            "apiVersion",
            "kind",
            "metadata",
            "data",
            "stringData",
            "type",
            "immutable",
        ],
        "ConfigMap" => &[
            "apiVersion",
            "kind",
            "metadata",
            "data",
            "binaryData",
            "immutable",
        ],
        "StorageClass" => &[
            "apiVersion",
            "kind",
            "metadata",
            "provisioner",
            "parameters",
            "reclaimPolicy",
            "mountOptions",
            "allowVolumeExpansion",
            "volumeBindingMode",
            "allowedTopologies",
        ],
        _ => return None,
    })
}

/// `ObjectMeta`'s fields (apimachinery `pkg/apis/meta/v1/types.go`).
const META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// A request as the fake saw it, with the status code it answered.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub code: u16,
}

/// Requests a deletion takes to finish by default (see the module doc).
pub const DELETION_LAG: usize = 3;

struct State {
    /// key: `<group>/<plural>/<namespace>/<name>` (namespace empty when cluster-scoped)
    objects: BTreeMap<String, Value>,
    /// Server-side apply's field ownership (`metadata.managedFields`, kept
    /// aside): object key, manager, the leaf paths it owns.
    owners: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// Deletions the controllers have yet to finish: object key, requests left.
    finishing: BTreeMap<String, usize>,
    deletion_lag: usize,
    /// The controllers that finish deletions are down: nothing finishes.
    held: bool,
    seen: Vec<Seen>,
    writes: usize,
    hang_after: Option<usize>,
    /// VM restarts asked through the `restart` subresource, by `namespace/name`.
    restarts: BTreeMap<String, usize>,
    version: u64,
    uid: u64,
    /// Resource types (plurals) this client may not touch: RBAC's 403.
    forbidden: Vec<String>,
    /// Per approved client CSR, the Node its kubelet then registers.
    registers: Vec<(String, Value)>,
    /// Evictions of pods labelled `pdb: protected` refused before one passes.
    pdb_refusals: usize,
    /// CSRs someone else writes just before shiftlab's next approval of them.
    stale_approvals: BTreeSet<String>,
    /// Someone else deletes this namespace once this many writes succeeded.
    doomed: Option<(usize, String)>,
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

impl Default for State {
    fn default() -> Self {
        State {
            objects: BTreeMap::new(),
            owners: BTreeMap::new(),
            finishing: BTreeMap::new(),
            deletion_lag: DELETION_LAG,
            held: false,
            seen: Vec::new(),
            writes: 0,
            hang_after: None,
            restarts: BTreeMap::new(),
            version: 0,
            uid: 0,
            forbidden: Vec::new(),
            registers: Vec::new(),
            pdb_refusals: 0,
            stale_approvals: BTreeSet::new(),
            doomed: None,
            virt: None,
            vmi_due: BTreeMap::new(),
        }
    }
}

#[derive(Clone)]
pub struct FakeKube {
    pub addr: SocketAddr,
    types: Arc<Vec<Served>>,
    state: Arc<Mutex<State>>,
}

/// What a request names below `/api/v1` or `/apis/<group>/<version>`.
struct Target {
    t: Served,
    ns: String,
    name: Option<String>,
    sub: Option<String>,
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

    /// The API of a cluster being installed, for CSR approval, node waits and
    /// drains: the recorded CSR list (`tests/fixtures/csr/list.json`), the
    /// Node of `lab1-ctlplane-0` (its certificates are approved in the
    /// recording) and `extra_nodes`, `pods`, and the default IngressController
    /// with 2 replicas. A kubelet whose client CSR is approved registers its
    /// Node (named by the CSR's CN) and reports `Ready` (Kubernetes docs,
    /// "Nodes" > "Node status" > "Conditions"). Evictions of a pod labelled
    /// `pdb: protected` get 429 for the first `pdb_refusals` attempts.
    pub fn cluster_api(extra_nodes: Vec<Value>, pods: Vec<Value>, pdb_refusals: usize) -> FakeKube {
        let fake = FakeKube::start(node_types());
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/csr/list.json");
        let list: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        for mut csr in list["items"].as_array().unwrap().iter().cloned() {
            csr["apiVersion"] = json!("certificates.k8s.io/v1");
            csr["kind"] = json!("CertificateSigningRequest");
            fake.insert(csr);
        }
        // The addresses the plan gives them (cluster.yaml: 192.168.126.0/24).
        let node = |name: &str, host: &str, ip: &str| {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": host},
                {"type": "InternalDNS", "address": format!("{host}.lab1.example.com")},
            ], "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
        };
        fake.insert(node("lab1-ctlplane-0", "lab1-ctlplane-0", "192.168.126.11"));
        for mut n in extra_nodes {
            n["apiVersion"] = json!("v1");
            n["kind"] = json!("Node");
            fake.insert(n);
        }
        for mut p in pods {
            p["apiVersion"] = json!("v1");
            p["kind"] = json!("Pod");
            fake.insert(p);
        }
        fake.insert(
            json!({"apiVersion": "operator.openshift.io/v1", "kind": "IngressController",
            "metadata": {"name": "default", "namespace": "openshift-ingress-operator"},
            "spec": {"replicas": 2}}),
        );
        let mut st = fake.state.lock().unwrap();
        st.pdb_refusals = pdb_refusals;
        st.registers = vec![
            (
                "csr-good-client-worker-0".to_string(),
                node("lab1-worker-0", "lab1-worker-0", "192.168.126.20"),
            ),
            (
                "csr-good-client-worker-1-fqdn".to_string(),
                node(
                    "lab1-worker-1.lab1.example.com",
                    "lab1-worker-1",
                    "192.168.126.21",
                ),
            ),
        ];
        drop(st);
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

    /// How many further requests a deletion takes to finish.
    pub fn deletion_lag(&self, n: usize) {
        self.state.lock().unwrap().deletion_lag = n;
    }

    /// Stop (`true`) or restart the controllers that finish deletions: with
    /// them down a Terminating namespace stays Terminating, as it does when a
    /// finalizer's controller is gone.
    pub fn hold_deletions(&self, held: bool) {
        self.state.lock().unwrap().held = held;
    }

    /// Let the controllers finish every deletion now (time passing).
    pub fn settle(&self) {
        let mut st = self.state.lock().unwrap();
        for _ in 0..=st.deletion_lag + 2 {
            st.tick();
        }
    }

    /// Someone else deletes namespace `ns` right after the `writes`th
    /// successful write (a destroy racing a create).
    pub fn delete_namespace_after_writes(&self, writes: usize, ns: &str) {
        self.state.lock().unwrap().doomed = Some((writes, ns.to_string()));
    }

    /// Someone else updates CSR `name` just before the next approval of it,
    /// so that approval carries a stale resourceVersion.
    pub fn stale_approval(&self, name: &str) {
        self.state
            .lock()
            .unwrap()
            .stale_approvals
            .insert(name.to_string());
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

    /// Every stored object (Terminating ones too), keyed `Kind/namespace/name`.
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

    /// The field managers of an object and the paths each owns.
    pub fn managers(&self, kind: &str, ns: &str, name: &str) -> BTreeMap<String, BTreeSet<String>> {
        let t = self.served_kind(kind);
        let st = self.state.lock().unwrap();
        st.owners
            .get(&key(&t, ns, name))
            .cloned()
            .unwrap_or_default()
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

    fn served_kind(&self, kind: &str) -> Served {
        self.types
            .iter()
            .find(|t| t.kind == kind)
            .expect("a served kind")
            .clone()
    }

    /// Put an object in place as if someone else had made it (field manager
    /// `kubectl`, an update).
    pub fn insert(&self, obj: Value) {
        let t = self.served_kind(obj["kind"].as_str().unwrap_or(""));
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = obj["metadata"]["name"].as_str().unwrap().to_string();
        let mut st = self.state.lock().unwrap();
        let k = key(&t, &ns, &name);
        let mut obj = obj;
        st.version += 1;
        st.uid += 1;
        let meta = &mut obj["metadata"];
        if meta["uid"].is_null() {
            meta["uid"] = json!(format!("uid-{}", st.uid));
        }
        if meta["resourceVersion"].is_null() {
            meta["resourceVersion"] = json!(st.version.to_string());
        }
        let owned = owned_paths(&obj);
        st.owners
            .entry(k.clone())
            .or_default()
            .insert("kubectl".into(), owned);
        st.objects.insert(k, obj);
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
        let agent = req
            .headers()
            .get("user-agent")
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
            let st = self.state.lock().unwrap();
            is_write && st.hang_after.is_some_and(|n| st.writes >= n)
        };
        if hang {
            self.record(&method, &path, &query, &content_type, 0);
            std::future::pending::<()>().await;
        }
        // virt-controller acts between requests: what a request changed is
        // seen to from the next one on.
        virt_controller(&mut self.state.lock().unwrap());
        let req = Req {
            method: &method,
            query: &query,
            ct: &content_type,
            agent: &agent,
            body: &body,
        };
        let (code, v) = self.route(&path, &req);
        self.record(&method, &path, &query, &content_type, code.as_u16());
        if is_write && code.is_success() {
            let mut st = self.state.lock().unwrap();
            st.writes += 1;
            if let Some((n, ns)) = st.doomed.clone() {
                if st.writes == n {
                    st.doomed = None;
                    let t = served("", "v1", "Namespace", "namespaces", false);
                    st.delete(&t, "", &ns, "", b"");
                }
            }
        }
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(v.to_string())))
            .unwrap()
    }

    fn record(&self, method: &str, path: &str, query: &str, ct: &str, code: u16) {
        self.state.lock().unwrap().seen.push(Seen {
            method: method.to_string(),
            path: path.to_string(),
            query: query.to_string(),
            content_type: ct.to_string(),
            code,
        });
    }

    fn route(&self, path: &str, req: &Req) -> (StatusCode, Value) {
        let method = req.method;
        // The controllers move on while the server answers.
        self.state.lock().unwrap().tick();
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
        if let ["apis", "subresources.kubevirt.io", "v1", "namespaces", ns, "virtualmachines", name, "restart"] =
            segs.as_slice()
        {
            return self.state.lock().unwrap().restart(method, ns, name);
        }
        // Discovery.
        let gv = match segs.as_slice() {
            ["api", v] => Some(("", *v)),
            ["apis", g, v] => Some((*g, *v)),
            _ => None,
        };
        if let Some((g, v)) = gv {
            return self.discovery(path, g, v);
        }
        let Some(target) = self.target(&segs) else {
            return not_found(&format!(
                "the server could not find the requested resource ({path})"
            ));
        };
        let mut st = self.state.lock().unwrap();
        let Target { t, ns, name, sub } = target;
        match (method, name, sub.as_deref()) {
            ("GET", None, None) => st.list(&t, &ns, req.query),
            ("GET", Some(name), None) => match st.objects.get(&key(&t, &ns, &name)) {
                Some(o) => (StatusCode::OK, o.clone()),
                None => not_found(&format!("{} \"{name}\" not found", resource(&t))),
            },
            ("PATCH", Some(name), None) => {
                let patch: Value = match serde_json::from_slice(req.body) {
                    Ok(v) => v,
                    Err(e) => return bad_request(&format!("invalid patch body: {e}")),
                };
                if req.ct.starts_with("application/apply-patch") {
                    st.apply(&t, &ns, &name, req.query, patch)
                } else if req.ct.starts_with("application/merge-patch+json") {
                    let manager = query_param(req.query, "fieldManager")
                        .unwrap_or_else(|| update_manager(req.agent));
                    st.merge_patch(&t, &ns, &name, &manager, &patch)
                } else {
                    (
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "UnsupportedMediaType", "code": 415, "message": format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml ({})", req.ct)}),
                    )
                }
            }
            ("DELETE", Some(name), None) => st.delete(&t, &ns, &name, req.query, req.body),
            ("PUT", Some(name), Some("approval")) if t.plural == "certificatesigningrequests" => {
                st.approve(&t, &name, req.body)
            }
            ("POST", Some(name), Some("eviction")) if t.plural == "pods" => {
                st.evict(&t, &ns, &name)
            }
            _ => (
                StatusCode::METHOD_NOT_ALLOWED,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "MethodNotAllowed", "code": 405}),
            ),
        }
    }

    fn discovery(&self, path: &str, g: &str, v: &str) -> (StatusCode, Value) {
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
        (
            StatusCode::OK,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gvs, "resources": res}),
        )
    }

    /// `/api/v1/...` or `/apis/<g>/<v>/...`: the type, namespace, name and
    /// subresource it names.
    fn target(&self, segs: &[&str]) -> Option<Target> {
        let (group, rest) = match segs {
            ["api", "v1", rest @ ..] => ("", rest),
            ["apis", g, _v, rest @ ..] => (*g, rest),
            _ => return None,
        };
        let s = |x: &str| x.to_string();
        let (ns, plural, name, sub) = match rest {
            // `/api/v1/namespaces/<name>` is the namespace itself.
            ["namespaces", name] if group.is_empty() => {
                (String::new(), "namespaces", Some(s(name)), None)
            }
            ["namespaces", ns, plural] => (s(ns), *plural, None, None),
            ["namespaces", ns, plural, name] => (s(ns), *plural, Some(s(name)), None),
            ["namespaces", ns, plural, name, sub] => (s(ns), *plural, Some(s(name)), Some(s(sub))),
            [plural] => (String::new(), *plural, None, None),
            [plural, name] => (String::new(), *plural, Some(s(name)), None),
            [plural, name, sub] => (String::new(), *plural, Some(s(name)), Some(s(sub))),
            _ => return None,
        };
        let t = self
            .types
            .iter()
            .find(|t| t.group == group && t.plural == plural)?
            .clone();
        Some(Target { t, ns, name, sub })
    }
}

/// What [`FakeKube::route`] needs of a request besides its path.
struct Req<'a> {
    method: &'a str,
    query: &'a str,
    ct: &'a str,
    agent: &'a str,
    body: &'a [u8],
}

/// The manager of an update without `fieldManager`: the API server takes the
/// client's user agent up to the first `/` (apiserver
/// `pkg/endpoints/handlers/rest.go`, `prefixFromUserAgent`).
fn update_manager(agent: &str) -> String {
    agent.split('/').next().unwrap_or("").to_string()
}

impl State {
    /// One step of the controllers that finish deletions: the namespace
    /// controller (kube-controller-manager `pkg/controller/namespace`: it
    /// deletes every object in a Terminating namespace, then removes the
    /// `kubernetes` finalizer and the namespace goes) and the garbage
    /// collector's foreground deletion (Kubernetes docs, "Garbage
    /// Collection" > "Foreground cascading deletion": the owner stays, with
    /// the `foregroundDeletion` finalizer, until its dependents are gone).
    fn tick(&mut self) {
        if self.held {
            return;
        }
        let keys: Vec<String> = self.finishing.keys().cloned().collect();
        for k in keys {
            let Some(left) = self.finishing.get_mut(&k) else {
                continue;
            };
            if *left > 0 {
                *left -= 1;
                continue;
            }
            if let Some(ns) = k.strip_prefix("/namespaces//") {
                let inside: Vec<String> = self
                    .objects
                    .keys()
                    .filter(|o| o.split('/').nth(2) == Some(ns))
                    .cloned()
                    .collect();
                for o in inside {
                    self.forget(&o);
                }
                self.forget(&k);
            } else {
                let uid = self.objects.get(&k).map(|o| o["metadata"]["uid"].clone());
                let dependents = self.objects.values().any(|o| {
                    o["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| refs.iter().any(|r| Some(&r["uid"]) == uid.as_ref()))
                });
                if !dependents {
                    self.forget(&k);
                }
            }
        }
    }

    fn forget(&mut self, k: &str) {
        self.objects.remove(k);
        self.owners.remove(k);
        self.finishing.remove(k);
    }

    fn bump(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }

    fn list(&self, t: &Served, ns: &str, query: &str) -> (StatusCode, Value) {
        let labels = query_param(query, "labelSelector").unwrap_or_default();
        let fields = query_param(query, "fieldSelector").unwrap_or_default();
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|(k, _)| {
                k.starts_with(&format!("{}/{}/{}/", t.group, t.plural, ns))
                    || (ns.is_empty() && k.starts_with(&format!("{}/{}/", t.group, t.plural)))
            })
            .map(|(_, o)| o.clone())
            .filter(|o| matches_selector(o, &labels) && matches_fields(o, &fields))
            .collect();
        (
            StatusCode::OK,
            json!({"kind": format!("{}List", t.kind), "apiVersion": api_version(t), "metadata": {"resourceVersion": self.version.to_string()}, "items": items}),
        )
    }

    /// Server-side apply (Kubernetes docs, "Server-Side Apply"; apimachinery
    /// `pkg/util/managedfields`): each manager owns the fields it applied. An
    /// apply sets the fields it sends, keeps every field other managers own
    /// (their labels, annotations, Secret keys), and removes a field only when
    /// this manager owned it alone and no longer sends it. A field another
    /// manager owns with a different value is a conflict (409) unless `force`
    /// takes it over. Lists are atomic here (the real one merges lists keyed
    /// by name, e.g. containers); `status` is not the applier's (the status
    /// subresource) and is kept.
    fn apply(
        &mut self,
        t: &Served,
        ns: &str,
        name: &str,
        query: &str,
        patch: Value,
    ) -> (StatusCode, Value) {
        let Some(manager) = query_param(query, "fieldManager").filter(|m| !m.is_empty()) else {
            // apimachinery pkg/apis/meta/v1/validation ValidatePatchOptions,
            // answered as Invalid (422) by the patch handler.
            return invalid(
                "PatchOptions",
                "meta.k8s.io",
                "",
                "fieldManager: Required value: is required for apply patch",
            );
        };
        if patch["metadata"]["name"] != name || patch["kind"] != t.kind {
            return bad_request("the name or kind of the object does not match the request");
        }
        let mut patch = patch;
        let unknown = unknown_fields(t, &patch);
        if let Some(field) = unknown.first() {
            let what = format!(
                "{}{name}; {}, Kind={}",
                if t.namespaced {
                    format!("{ns}/")
                } else {
                    String::new()
                },
                api_version(t),
                t.kind
            );
            if builtin_fields(t.kind).is_some() {
                // kubernetes/kubernetes#139253 (and #122480): a built-in type's
                // unknown field fails converting the patch to its typed form,
                // answered 500 with no reason.
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": format!("failed to create typed patch object ({what}): {field}: field not declared in schema"),
                        "code": 500}),
                );
            }
            // A custom resource: fieldValidation=Strict refuses an unknown
            // field (422); the default (Warn) and Ignore prune it (apiextensions
            // "Field pruning").
            if query_param(query, "fieldValidation").as_deref() == Some("Strict") {
                return invalid(
                    t.kind,
                    t.group,
                    name,
                    &format!("{field}: field not declared in schema"),
                );
            }
            prune(&mut patch, &unknown);
        }
        let k = key(t, ns, name);
        let exists = self.objects.contains_key(&k);
        if t.namespaced {
            let Some(space) = self.objects.get(&format!("/namespaces//{ns}")) else {
                return not_found(&format!("namespaces \"{ns}\" not found"));
            };
            if !exists && !space["metadata"]["deletionTimestamp"].is_null() {
                return terminating(t, name, ns);
            }
        }
        let force = query_param(query, "force").as_deref() == Some("true");
        if let Some(o) = patch.as_object_mut() {
            o.remove("status");
        }
        let sent = owned_paths(&patch);
        let mut obj = self.objects.get(&k).cloned().unwrap_or_else(|| {
            json!({"apiVersion": patch["apiVersion"], "kind": t.kind, "metadata": {"name": name}})
        });
        let owners = self.owners.entry(k.clone()).or_default();
        let mut conflicts = Vec::new();
        for (other, paths) in owners.iter() {
            if *other == manager {
                continue;
            }
            for p in paths.intersection(&sent) {
                if obj.pointer(p) != patch.pointer(p) {
                    conflicts.push((other.clone(), p.clone()));
                }
            }
        }
        if !conflicts.is_empty() && !force {
            let list: Vec<String> = conflicts
                .iter()
                .map(|(m, p)| format!("conflict with \"{m}\": {}", p.replace('/', ".")))
                .collect();
            return (
                StatusCode::CONFLICT,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Conflict", "code": 409,
                    "message": format!("Apply failed with {} conflict{}: {}", conflicts.len(), if conflicts.len() == 1 { "" } else { "s" }, list.join("\n"))}),
            );
        }
        for (other, p) in &conflicts {
            if let Some(set) = owners.get_mut(other) {
                set.remove(p);
            }
        }
        let others: BTreeSet<String> = owners
            .iter()
            .filter(|(m, _)| **m != manager)
            .flat_map(|(_, s)| s.iter().cloned())
            .collect();
        let dropped: Vec<String> = owners
            .get(&manager)
            .map(|mine| {
                mine.iter()
                    .filter(|p| !sent.contains(*p) && !others.contains(*p))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for p in &dropped {
            remove_path(&mut obj, p);
        }
        let before = obj.clone();
        merge_objects(&mut obj, &patch);
        owners.insert(manager, sent);
        owners.retain(|_, s| !s.is_empty());
        if t.namespaced {
            obj["metadata"]["namespace"] = json!(ns);
        }
        if exists {
            if t.kind == "Service" {
                keep_service_allocations(&mut obj, &before);
            }
        } else {
            self.uid += 1;
            obj["metadata"]["uid"] = json!(format!("uid-{}", self.uid));
            obj["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
            if t.kind == "Service" {
                allocate_service(&mut obj, self.uid);
            }
        }
        obj["metadata"]["resourceVersion"] = json!(self.bump());
        self.objects.insert(k, obj.clone());
        (
            if exists {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            },
            obj,
        )
    }

    /// RFC 7386 merge patch on an existing object, an update: the fields it
    /// changes become `manager`'s (Server-Side Apply docs, "Conflicts": an
    /// update takes over the fields it changes), those it removes are
    /// nobody's.
    fn merge_patch(
        &mut self,
        t: &Served,
        ns: &str,
        name: &str,
        manager: &str,
        patch: &Value,
    ) -> (StatusCode, Value) {
        let k = key(t, ns, name);
        let Some(cur) = self.objects.get(&k).cloned() else {
            return not_found(&format!("{} \"{name}\" not found", resource(t)));
        };
        let mut obj = cur.clone();
        merge(&mut obj, patch);
        let mut changed = BTreeSet::new();
        let mut removed = Vec::new();
        patch_paths(patch, String::new(), &mut changed, &mut removed);
        changed.retain(|p| cur.pointer(p) != obj.pointer(p) && !p.starts_with("/status"));
        let owners = self.owners.entry(k.clone()).or_default();
        for set in owners.values_mut() {
            set.retain(|p| {
                !changed.contains(p) && !removed.iter().any(|r| p.starts_with(r.as_str()))
            });
        }
        owners
            .entry(manager.to_string())
            .or_default()
            .extend(changed);
        owners.retain(|_, s| !s.is_empty());
        obj["metadata"]["resourceVersion"] = json!(self.bump());
        self.objects.insert(k, obj.clone());
        (StatusCode::OK, obj)
    }

    /// DELETE. A Namespace is marked (`metadata.deletionTimestamp`,
    /// `status.phase: Terminating`, the `kubernetes` finalizer: kubernetes
    /// `pkg/registry/core/namespace/storage/storage.go`) and answered with the
    /// object; [`State::tick`] finishes it. `propagationPolicy: Foreground`
    /// (in the body's DeleteOptions or the query) marks the object and its
    /// dependents with the `foregroundDeletion` finalizer likewise. Anything
    /// else goes at once, answered with a `Status` Success.
    fn delete(
        &mut self,
        t: &Served,
        ns: &str,
        name: &str,
        query: &str,
        body: &[u8],
    ) -> (StatusCode, Value) {
        let k = key(t, ns, name);
        let Some(cur) = self.objects.get(&k).cloned() else {
            return not_found(&format!("{} \"{name}\" not found", resource(t)));
        };
        // A deletion the controllers are finishing is under way: asked again,
        // the object is answered as it is. One only marked (a VMI whose guest
        // is shutting down) is removed by a deletion without grace, as the
        // API server does with `gracePeriodSeconds: 0`.
        if self.finishing.contains_key(&k) {
            return (StatusCode::OK, cur);
        }
        let options: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let foreground = options["propagationPolicy"] == "Foreground"
            || query_param(query, "propagationPolicy").as_deref() == Some("Foreground");
        if t.kind == "Namespace" {
            let mut obj = cur;
            obj["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:01Z");
            obj["spec"]["finalizers"] = json!(["kubernetes"]);
            obj["status"]["phase"] = json!("Terminating");
            obj["metadata"]["resourceVersion"] = json!(self.bump());
            self.objects.insert(k.clone(), obj.clone());
            self.finishing.insert(k, self.deletion_lag);
            return (StatusCode::OK, obj);
        }
        if foreground {
            let uid = cur["metadata"]["uid"].clone();
            let dependents: Vec<String> = self
                .objects
                .iter()
                .filter(|(_, o)| {
                    o["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
                })
                .map(|(k, _)| k.clone())
                .collect();
            for d in dependents.iter().chain(std::iter::once(&k)) {
                let version = self.bump();
                if let Some(o) = self.objects.get_mut(d) {
                    o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:01Z");
                    let fins = o["metadata"]["finalizers"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    let mut fins: Vec<Value> = fins;
                    fins.push(json!("foregroundDeletion"));
                    o["metadata"]["finalizers"] = json!(fins);
                    o["metadata"]["resourceVersion"] = json!(version);
                }
                self.finishing.insert(d.clone(), self.deletion_lag);
            }
            return (StatusCode::OK, self.objects[&k].clone());
        }
        self.forget(&k);
        (
            StatusCode::OK,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name, "kind": t.plural}}),
        )
    }

    /// PUT `…/certificatesigningrequests/<name>/approval`: the conditions of
    /// the body become the CSR's. A body whose resourceVersion is not the
    /// stored one is refused 409, as every update with a stale version is
    /// (apiserver `pkg/storage/etcd3/store.go` GuaranteedUpdate,
    /// `OptimisticLockErrorMsg`). An approved client CSR lets its kubelet
    /// register its Node.
    fn approve(&mut self, t: &Served, name: &str, body: &[u8]) -> (StatusCode, Value) {
        let k = key(t, "", name);
        if !self.objects.contains_key(&k) {
            return not_found(&format!("{} \"{name}\" not found", resource(t)));
        }
        if self.stale_approvals.remove(name) {
            // Someone else's write just before this one.
            let v = self.bump();
            self.objects.get_mut(&k).unwrap()["metadata"]["resourceVersion"] = json!(v);
        }
        let put: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return bad_request(&format!("invalid body: {e}")),
        };
        let cur = &self.objects[&k];
        let sent = &put["metadata"]["resourceVersion"];
        if !sent.is_null() && *sent != cur["metadata"]["resourceVersion"] {
            return (
                StatusCode::CONFLICT,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Conflict", "code": 409,
                    "details": {"name": name, "group": t.group, "kind": t.plural},
                    "message": format!("Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again", resource(t))}),
            );
        }
        let v = self.bump();
        let obj = self.objects.get_mut(&k).unwrap();
        obj["status"]["conditions"] = put["status"]["conditions"].clone();
        obj["metadata"]["resourceVersion"] = json!(v);
        let obj = obj.clone();
        if let Some((_, node)) = self.registers.iter().find(|(c, _)| c == name).cloned() {
            let n = served("", "v1", "Node", "nodes", false);
            let nk = key(&n, "", node["metadata"]["name"].as_str().unwrap_or(""));
            self.objects.insert(nk, node);
        }
        (StatusCode::OK, obj)
    }

    /// POST `…/pods/<name>/eviction` (Kubernetes docs, "API-initiated
    /// Eviction"): 429 TooManyRequests while the pod's PodDisruptionBudget
    /// does not allow it, else the pod is deleted and 201 answered.
    fn evict(&mut self, t: &Served, ns: &str, name: &str) -> (StatusCode, Value) {
        let k = key(t, ns, name);
        let Some(pod) = self.objects.get(&k) else {
            return not_found(&format!("pods \"{name}\" not found"));
        };
        if pod["metadata"]["labels"]["pdb"] == "protected" && self.pdb_refusals > 0 {
            self.pdb_refusals -= 1;
            return (
                StatusCode::TOO_MANY_REQUESTS,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "TooManyRequests", "code": 429,
                    "message": "Cannot evict pod as it would violate the pod's disruption budget."}),
            );
        }
        self.forget(&k);
        (
            StatusCode::CREATED,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    }

    /// KubeVirt's restart subresource (kubevirt/kubevirt
    /// pkg/virt-api/rest/subresource.go, RestartVMRequestHandler): 404 for
    /// no VM, 409 for a VM that is not running, else 202 and the VMI goes.
    fn restart(&mut self, method: &str, ns: &str, name: &str) -> (StatusCode, Value) {
        if method != "PUT" {
            return (StatusCode::METHOD_NOT_ALLOWED, json!({}));
        }
        let k = format!("kubevirt.io/virtualmachines/{ns}/{name}");
        let Some(vm) = self.objects.get(&k) else {
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
        *self.restarts.entry(format!("{ns}/{name}")).or_default() += 1;
        (StatusCode::ACCEPTED, json!({}))
    }
}

fn api_version(t: &Served) -> String {
    if t.group.is_empty() {
        t.version.to_string()
    } else {
        format!("{}/{}", t.group, t.version)
    }
}

/// How the API server names a resource in messages: `secrets`,
/// `virtualmachines.kubevirt.io`.
fn resource(t: &Served) -> String {
    if t.group.is_empty() {
        t.plural.to_string()
    } else {
        format!("{}.{}", t.plural, t.group)
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

/// apimachinery `errors.NewInvalid`: `<Kind>.<group> "<name>" is invalid: <causes>`.
fn invalid(kind: &str, group: &str, name: &str, cause: &str) -> (StatusCode, Value) {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Invalid", "code": 422,
            "message": format!("{qualified} \"{name}\" is invalid: {cause}")}),
    )
}

/// The NamespaceLifecycle admission plugin's refusal of new content in a
/// Terminating namespace (apiserver `pkg/admission/plugin/namespace/lifecycle/admission.go`:
/// `admission.NewForbidden(a, fmt.Errorf("unable to create new content in
/// namespace %s because it is being terminated", …))`, with the cause
/// `NamespaceTerminating`).
fn terminating(t: &Served, name: &str, ns: &str) -> (StatusCode, Value) {
    (
        StatusCode::FORBIDDEN,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden", "code": 403,
            "details": {"name": name, "group": t.group, "kind": t.plural,
                "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]},
            "message": format!("{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated", resource(t))}),
    )
}

/// The fields of `o` its kind does not have, as `.field` / `.metadata.field`.
fn unknown_fields(t: &Served, o: &Value) -> Vec<String> {
    let custom = ["apiVersion", "kind", "metadata", "spec", "status"];
    let known: &[&str] = builtin_fields(t.kind).unwrap_or(&custom);
    let mut out = Vec::new();
    for k in o.as_object().into_iter().flat_map(|m| m.keys()) {
        if !known.contains(&k.as_str()) {
            out.push(format!(".{k}"));
        }
    }
    for k in o["metadata"].as_object().into_iter().flat_map(|m| m.keys()) {
        if !META_FIELDS.contains(&k.as_str()) {
            out.push(format!(".metadata.{k}"));
        }
    }
    out
}

fn prune(o: &mut Value, fields: &[String]) {
    for f in fields {
        let p = f.replace('.', "/");
        remove_path(o, &p);
    }
}

/// The leaf paths (JSON pointers) an applied object sets: every scalar, list
/// and empty map, without what identifies the object or is the server's.
fn owned_paths(o: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    fn walk(v: &Value, at: String, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, x) in m {
                    walk(
                        x,
                        format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                        out,
                    );
                }
            }
            _ => {
                out.insert(at);
            }
        }
    }
    walk(o, String::new(), &mut out);
    out.retain(|p| {
        !matches!(
            p.as_str(),
            "/apiVersion"
                | "/kind"
                | "/metadata/name"
                | "/metadata/namespace"
                | "/metadata/uid"
                | "/metadata/resourceVersion"
                | "/metadata/creationTimestamp"
        ) && !p.starts_with("/status")
    });
    out
}

/// A merge patch's set paths and removed (null) paths.
fn patch_paths(v: &Value, at: String, set: &mut BTreeSet<String>, removed: &mut Vec<String>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                patch_paths(
                    x,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    set,
                    removed,
                );
            }
        }
        Value::Null => removed.push(at),
        _ => {
            set.insert(at);
        }
    }
}

/// Remove the field at pointer `p`, and the maps it leaves empty.
fn remove_path(o: &mut Value, p: &str) {
    let Some((parent, last)) = p.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    if let Some(m) = o.pointer_mut(parent).and_then(Value::as_object_mut) {
        m.remove(&last);
        if m.is_empty() && !parent.is_empty() {
            remove_path(o, parent);
        }
    }
}

/// Maps merged key by key, anything else replaced: how an apply's fields land.
fn merge_objects(target: &mut Value, from: &Value) {
    match (target.as_object_mut(), from) {
        (Some(t), Value::Object(f)) => {
            for (k, v) in f {
                merge_objects(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        _ => *target = from.clone(),
    }
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

/// Field selectors `a.b=c` (equality on the dotted path).
fn matches_fields(o: &Value, sel: &str) -> bool {
    sel.split(',')
        .filter(|s| !s.is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => o.pointer(&format!("/{}", k.replace('.', "/"))) == Some(&json!(v)),
            None => false,
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
        st.forget(&k);
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
                    st.forget(&k);
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
