//! The cluster's health as the web page shows it: what a user opens a terminal
//! for (`oc get clusterversion,co,nodes,csr`). Read through the admin
//! kubeconfig with short timeouts ([`fetch`]); the API objects become a
//! [`Health`] by a pure function ([`Health::of`]).
//!
//! Field names are the real schemas':
//! - ClusterVersion and ClusterOperator (config.openshift.io/v1), openshift/api
//!   `config/v1/0000_00_cluster-version-operator_01_clusterversion-Default.crd.yaml`
//!   and `…_01_clusteroperator.crd.yaml`: `status.desired.version`,
//!   `status.history[]` (newest first; `state` `Completed` or `Partial`,
//!   `version`, `completionTime`), `status.conditions[]` (`type`, `status`,
//!   `lastTransitionTime`, `reason`, `message`), a ClusterOperator's
//!   `status.versions[]` (`name` `operator` is the operator's own);
//! - Node and CertificateSigningRequest (core/v1, certificates.k8s.io/v1):
//!   roles are the `node-role.kubernetes.io/<role>` labels (what `oc get nodes`
//!   shows); a CSR is pending while it has no `status.conditions`; its
//!   `spec.username` is the requestor. A CSR's `spec.request` is never read here.
//! - StorageClass (storage.k8s.io/v1): `provisioner`, and the default is the one
//!   annotated `storageclass.kubernetes.io/is-default-class: "true"`.

use std::path::Path;
use std::time::Duration;

use ::kube::config::{KubeConfigOptions, Kubeconfig};
use ::kube::{Client, Config};
use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;

/// Time to connect, and to wait for one answer.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
pub const READ_TIMEOUT: Duration = Duration::from_secs(4);

const CLUSTER_VERSION: &str = "/apis/config.openshift.io/v1/clusterversions/version";
const CLUSTER_OPERATORS: &str = "/apis/config.openshift.io/v1/clusteroperators";
const NODES: &str = "/api/v1/nodes";
const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const STORAGE_CLASSES: &str = "/apis/storage.k8s.io/v1/storageclasses";

/// One condition as shown: its status, since when, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Condition {
    pub status: String,
    /// `lastTransitionTime`, RFC 3339 as the API gives it.
    pub since: Option<String>,
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// The ClusterVersion `version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionView {
    /// `status.desired.version`: the release the cluster is going to (or is at).
    pub desired: Option<String>,
    pub available: Option<Condition>,
    pub progressing: Option<Condition>,
    pub failing: Option<Condition>,
    /// The newest `Completed` entry of `status.history`.
    pub completed: Option<String>,
    pub completed_at: Option<String>,
}

/// A ClusterOperator that is degraded or progressing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OperatorView {
    pub name: String,
    pub version: Option<String>,
    pub available: Option<String>,
    /// Set when `Degraded` is `True`.
    pub degraded: Option<Condition>,
    /// Set when `Progressing` is `True`.
    pub progressing: Option<Condition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeView {
    pub name: String,
    pub roles: Vec<String>,
    /// The `Ready` condition (`None`: the Node has none yet).
    pub ready: Option<Condition>,
}

/// A pending CSR; its request (the PEM) is not shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CsrView {
    pub name: String,
    pub requestor: String,
    pub signer: String,
    /// `metadata.creationTimestamp`.
    pub created: Option<String>,
}

/// What the page's health panel shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    /// `None`: the API has no ClusterVersion (404).
    pub version: Option<VersionView>,
    /// Degraded or progressing ones, by name.
    pub operators: Vec<OperatorView>,
    /// Every ClusterOperator the API lists.
    pub operators_total: usize,
    pub nodes: Vec<NodeView>,
    pub pending_csrs: Vec<CsrView>,
    /// The StorageClasses the API lists (`oc get storageclass`), the lab's and
    /// any other (crate::cluster::storage).
    pub storage_classes: Vec<crate::cluster::storage::StorageClassView>,
}

fn text(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn items(list: &Value) -> &[Value] {
    list.get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The condition of type `kind` in `obj`'s `status.conditions`.
fn condition(obj: &Value, kind: &str) -> Option<Condition> {
    let c = obj
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))?;
    Some(Condition {
        status: text(c, "/status").unwrap_or_else(|| "Unknown".into()),
        since: text(c, "/lastTransitionTime"),
        reason: text(c, "/reason").filter(|s| !s.is_empty()),
        message: text(c, "/message").filter(|s| !s.is_empty()),
    })
}

fn is_true(c: &Option<Condition>) -> bool {
    c.as_ref().is_some_and(|c| c.status == "True")
}

fn name(obj: &Value) -> String {
    text(obj, "/metadata/name").unwrap_or_default()
}

impl Health {
    /// The panel from the objects as the API returned them: the ClusterVersion
    /// (if any) and the ClusterOperator, Node and CSR lists (each a `…List`).
    pub fn of(cv: Option<&Value>, operators: &Value, nodes: &Value, csrs: &Value) -> Health {
        let version = cv.map(|cv| VersionView {
            desired: text(cv, "/status/desired/version"),
            available: condition(cv, "Available"),
            progressing: condition(cv, "Progressing"),
            failing: condition(cv, "Failing"),
            completed: completed(cv).and_then(|h| text(h, "/version")),
            completed_at: completed(cv).and_then(|h| text(h, "/completionTime")),
        });
        let mut ops: Vec<OperatorView> = items(operators)
            .iter()
            .map(|o| OperatorView {
                name: name(o),
                version: o
                    .pointer("/status/versions")
                    .and_then(Value::as_array)
                    .and_then(|vs| {
                        vs.iter()
                            .find(|v| v.get("name").and_then(Value::as_str) == Some("operator"))
                    })
                    .and_then(|v| text(v, "/version")),
                available: condition(o, "Available").map(|c| c.status),
                degraded: Some(condition(o, "Degraded")).filter(is_true).flatten(),
                progressing: Some(condition(o, "Progressing")).filter(is_true).flatten(),
            })
            .filter(|o| o.degraded.is_some() || o.progressing.is_some())
            .collect();
        ops.sort_by(|a, b| a.name.cmp(&b.name));
        let mut node_views: Vec<NodeView> = items(nodes)
            .iter()
            .map(|n| NodeView {
                name: name(n),
                roles: roles(n),
                ready: condition(n, "Ready"),
            })
            .collect();
        node_views.sort_by(|a, b| a.name.cmp(&b.name));
        let mut pending: Vec<CsrView> = items(csrs)
            .iter()
            .filter(|c| {
                c.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_none_or(|a| a.is_empty())
            })
            .map(|c| CsrView {
                name: name(c),
                requestor: text(c, "/spec/username").unwrap_or_default(),
                signer: text(c, "/spec/signerName").unwrap_or_default(),
                created: text(c, "/metadata/creationTimestamp"),
            })
            .collect();
        pending.sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
        Health {
            version,
            operators: ops,
            operators_total: items(operators).len(),
            nodes: node_views,
            pending_csrs: pending,
            storage_classes: Vec::new(),
        }
    }

    /// With the StorageClasses of a `StorageClassList` (its items carry no kind).
    pub fn with_storage_classes(mut self, list: &Value) -> Health {
        self.storage_classes = items(list)
            .iter()
            .map(crate::cluster::storage::class_view)
            .collect();
        self
    }
}

/// The newest completed update (the history is newest first).
fn completed(cv: &Value) -> Option<&Value> {
    cv.pointer("/status/history")?
        .as_array()?
        .iter()
        .find(|h| h.get("state").and_then(Value::as_str) == Some("Completed"))
}

/// A Node's roles from its `node-role.kubernetes.io/<role>` labels, sorted.
fn roles(node: &Value) -> Vec<String> {
    let mut r: Vec<String> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .filter(|r| !r.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    r.sort();
    r
}

/// A client for `kubeconfig` that gives up soon: the page must not wait on a
/// cluster that is down.
async fn client(kubeconfig: &Path) -> Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading kubeconfig {}", kubeconfig.display()))?;
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading kubeconfig {}", kubeconfig.display()))?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    // A busy API (429/503) is shown as it is; the page asks again soon anyway.
    config.default_retry = false;
    Client::try_from(config).context("building the API client")
}

/// GET `path` as JSON; `None` on a 404 (a resource this API does not have).
async fn get(client: &Client, path: &str) -> Result<Option<Value>> {
    let req = hyper::Request::get(path)
        .body(Vec::new())
        .context("building a request")?;
    match client.request::<Value>(req).await {
        Ok(v) => Ok(Some(v)),
        Err(::kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e).with_context(|| format!("GET {path}")),
    }
}

/// The health of the cluster whose admin kubeconfig is `kubeconfig`. A missing
/// ClusterVersion or ClusterOperator resource (not OpenShift) shows as none;
/// an unreachable API is an error.
pub async fn fetch(kubeconfig: &Path) -> Result<Health> {
    let client = client(kubeconfig).await?;
    let empty = || serde_json::json!({"items": []});
    let nodes = get(&client, NODES).await?.unwrap_or_else(empty);
    let cv = get(&client, CLUSTER_VERSION).await?;
    let operators = get(&client, CLUSTER_OPERATORS).await?.unwrap_or_else(empty);
    let csrs = get(&client, CSRS).await?.unwrap_or_else(empty);
    let classes = get(&client, STORAGE_CLASSES).await?.unwrap_or_else(empty);
    Ok(Health::of(cv.as_ref(), &operators, &nodes, &csrs).with_storage_classes(&classes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster_version() -> Value {
        // As the CVO writes it during an install (openshift/api ClusterVersionStatus).
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
          "metadata": {"name": "version"},
          "spec": {"clusterID": "0f0e"},
          "status": {
            "desired": {"version": "4.18.1", "image": "quay.io/x@sha256:1"},
            "history": [
              {"state": "Partial", "version": "4.18.1", "startedTime": "2026-11-25T10:00:00Z",
               "completionTime": null, "image": "i2", "verified": false},
              {"state": "Completed", "version": "4.18.0", "startedTime": "2026-11-24T09:00:00Z",
               "completionTime": "2026-11-24T09:40:00Z", "image": "i1", "verified": false}],
            "conditions": [
              {"type": "Available", "status": "True", "lastTransitionTime": "2026-11-24T09:40:00Z",
               "message": "Done applying 4.18.0"},
              {"type": "Failing", "status": "False", "lastTransitionTime": "2026-11-24T09:40:00Z"},
              {"type": "Progressing", "status": "True", "lastTransitionTime": "2026-11-25T10:00:00Z",
               "message": "Working towards 4.18.1: 512 of 870 done (58% complete)"}]}})
    }

    fn operator(name: &str, degraded: &str, progressing: &str, msg: &str) -> Value {
        json!({"metadata": {"name": name},
          "spec": {},
          "status": {
            "versions": [{"name": "raw-internal", "version": "x"}, {"name": "operator", "version": "4.18.0"}],
            "conditions": [
              {"type": "Available", "status": "True", "lastTransitionTime": "2026-11-24T09:30:00Z"},
              {"type": "Degraded", "status": degraded, "lastTransitionTime": "2026-11-25T10:01:00Z",
               "reason": "OAuthServerRouteEndpointAccessibleController_SyncError", "message": msg},
              {"type": "Progressing", "status": progressing, "lastTransitionTime": "2026-11-25T10:02:00Z",
               "reason": "", "message": ""}]}})
    }

    #[test]
    fn the_panel_shows_progress_troubled_operators_nodes_and_pending_csrs() {
        let ops = json!({"kind": "ClusterOperatorList", "items": [
            operator("dns", "False", "False", ""),
            operator("authentication", "True", "False", "OAuthServerRouteEndpointAccessibleControllerDegraded: route not yet available"),
            operator("network", "False", "True", ""),
        ]});
        let nodes = json!({"kind": "NodeList", "items": [
            {"metadata": {"name": "w0", "labels": {"node-role.kubernetes.io/worker": ""}},
             "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
               "message": "Kubelet stopped posting node status.", "lastTransitionTime": "2026-11-25T10:05:00Z"}]}},
            {"metadata": {"name": "m0", "labels": {"node-role.kubernetes.io/control-plane": "",
               "node-role.kubernetes.io/master": "", "kubernetes.io/hostname": "m0"}},
             "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
               {"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status", "lastTransitionTime": "2026-11-24T09:10:00Z"}]}},
        ]});
        let csrs = json!({"kind": "CertificateSigningRequestList", "items": [
            {"metadata": {"name": "csr-b", "creationTimestamp": "2026-11-25T10:06:00Z"},
             "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
               "username": "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper",
               "request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K"},
             "status": {}},
            {"metadata": {"name": "csr-a", "creationTimestamp": "2026-11-24T09:05:00Z"},
             "spec": {"signerName": "kubernetes.io/kubelet-serving", "username": "system:node:m0", "request": "UEVN"},
             "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "Q0VSVA=="}},
        ]});
        // As `oc get storageclass -o json` lists them: the lab's default, another.
        let classes = json!({"kind": "StorageClassList", "items": [
            {"metadata": {"name": "shiftlab-nfs",
               "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
             "provisioner": "k8s-sigs.io/nfs-subdir-external-provisioner", "reclaimPolicy": "Delete"},
            {"metadata": {"name": "lvms-vg1"}, "provisioner": "topolvm.io"}]});
        let h = Health::of(Some(&cluster_version()), &ops, &nodes, &csrs)
            .with_storage_classes(&classes);
        // Golden: the JSON the page receives.
        assert_eq!(
            serde_json::to_value(&h).unwrap(),
            json!({
              "version": {
                "desired": "4.18.1",
                "available": {"status": "True", "since": "2026-11-24T09:40:00Z", "reason": null, "message": "Done applying 4.18.0"},
                "progressing": {"status": "True", "since": "2026-11-25T10:00:00Z", "reason": null,
                  "message": "Working towards 4.18.1: 512 of 870 done (58% complete)"},
                "failing": {"status": "False", "since": "2026-11-24T09:40:00Z", "reason": null, "message": null},
                "completed": "4.18.0",
                "completed_at": "2026-11-24T09:40:00Z"},
              "operators": [
                {"name": "authentication", "version": "4.18.0", "available": "True",
                 "degraded": {"status": "True", "since": "2026-11-25T10:01:00Z",
                   "reason": "OAuthServerRouteEndpointAccessibleController_SyncError",
                   "message": "OAuthServerRouteEndpointAccessibleControllerDegraded: route not yet available"},
                 "progressing": null},
                {"name": "network", "version": "4.18.0", "available": "True", "degraded": null,
                 "progressing": {"status": "True", "since": "2026-11-25T10:02:00Z", "reason": null, "message": null}}],
              "operators_total": 3,
              "nodes": [
                {"name": "m0", "roles": ["control-plane", "master"],
                 "ready": {"status": "True", "since": "2026-11-24T09:10:00Z", "reason": "KubeletReady",
                   "message": "kubelet is posting ready status"}},
                {"name": "w0", "roles": ["worker"],
                 "ready": {"status": "Unknown", "since": "2026-11-25T10:05:00Z", "reason": "NodeStatusUnknown",
                   "message": "Kubelet stopped posting node status."}}],
              "pending_csrs": [
                {"name": "csr-b",
                 "requestor": "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper",
                 "signer": "kubernetes.io/kube-apiserver-client-kubelet",
                 "created": "2026-11-25T10:06:00Z"}],
              "storage_classes": [
                {"name": "shiftlab-nfs", "provisioner": "k8s-sigs.io/nfs-subdir-external-provisioner", "default": true},
                {"name": "lvms-vg1", "provisioner": "topolvm.io", "default": false}]
            })
        );
        // The request itself never reaches the panel.
        let text = serde_json::to_string(&h).unwrap();
        assert!(!text.contains("LS0tLS1CRUdJTi"), "{text}");
    }

    #[test]
    fn an_api_without_cluster_version_or_anything_listed_is_an_empty_panel() {
        let empty = json!({"items": []});
        let h = Health::of(None, &empty, &empty, &json!({}));
        assert_eq!(
            h,
            Health {
                version: None,
                operators: vec![],
                operators_total: 0,
                nodes: vec![],
                pending_csrs: vec![],
                storage_classes: vec![],
            }
        );
        // A ClusterVersion before the CVO wrote any status.
        let bare = json!({"metadata": {"name": "version"}, "spec": {}});
        let h = Health::of(Some(&bare), &empty, &empty, &empty);
        let v = h.version.unwrap();
        assert_eq!((v.desired, v.progressing, v.completed), (None, None, None));
    }
}
