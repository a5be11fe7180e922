//! The fake Kubernetes API's own behaviour (tests/support/fake_kube.rs), held
//! to what the real API server was measured to do: server-side apply merges
//! by field manager, its status codes (422 without fieldManager, 500 for an
//! unknown field on a built-in type, 422 for one on a custom resource under
//! strict validation, 409 for a stale CSR approval), asynchronous namespace
//! and foreground deletion, 403 for new content in a Terminating namespace.
//! Plain HTTP on loopback, as any client would send it.

#[path = "support/fake_kube.rs"]
mod fake_kube;

use fake_kube::{core_types, kubevirt_types, node_types, FakeKube};
use serde_json::{json, Value};

const APPLY: &str = "application/apply-patch+yaml";
const MERGE: &str = "application/merge-patch+json";

/// One request; the status code and the JSON answer.
fn call(fake: &FakeKube, method: &str, path: &str, ct: &str, body: &Value) -> (u16, Value) {
    let url = format!("{}{path}", fake.url());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let mut req = ureq::http::Request::builder().method(method).uri(&url);
    if !ct.is_empty() {
        req = req.header("content-type", ct);
    }
    let r = if body.is_null() {
        agent.run(req.body(()).unwrap())
    } else {
        agent.run(req.body(body.to_string()).unwrap())
    };
    let mut resp = match r {
        Ok(r) => r,
        Err(e) => panic!("{method} {path}: {e}"),
    };
    let code = resp.status().as_u16();
    (
        code,
        serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap(),
    )
}

fn get(fake: &FakeKube, path: &str) -> (u16, Value) {
    call(fake, "GET", path, "", &Value::Null)
}

fn all() -> FakeKube {
    let mut t = core_types();
    t.extend(kubevirt_types());
    FakeKube::start(t)
}

const NS: &str = "/api/v1/namespaces/lab";
const SECRET: &str = "/api/v1/namespaces/lab/secrets/s1";

fn namespace(fake: &FakeKube) {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}});
    assert_eq!(
        call(
            fake,
            "PATCH",
            &format!("{NS}?fieldManager=shiftlab"),
            APPLY,
            &ns
        )
        .0,
        201
    );
}

fn secret(labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s1", "namespace": "lab", "labels": labels}, "data": data})
}

#[test]
fn apply_keeps_what_other_managers_own_and_drops_what_it_stopped_sending() {
    let fake = all();
    namespace(&fake);
    let mine = format!("{SECRET}?fieldManager=shiftlab&force=true");
    let first = secret(json!({"own": "x", "old": "y"}), json!({"userdata": "AA=="}));
    assert_eq!(call(&fake, "PATCH", &mine, APPLY, &first).0, 201);
    // Another manager adds a label, an annotation and a Secret key.
    let theirs = json!({"metadata": {"labels": {"team": "b"}, "annotations": {"note": "kept"}},
        "data": {"extra": "BB=="}});
    let (code, _) = call(
        &fake,
        "PATCH",
        &format!("{SECRET}?fieldManager=kubectl-edit"),
        MERGE,
        &theirs,
    );
    assert_eq!(code, 200);
    // shiftlab applies again without its `old` label.
    let again = secret(json!({"own": "x"}), json!({"userdata": "CC=="}));
    let (code, o) = call(&fake, "PATCH", &mine, APPLY, &again);
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["metadata"]["labels"], json!({"own": "x", "team": "b"}));
    assert_eq!(o["metadata"]["annotations"], json!({"note": "kept"}));
    assert_eq!(o["data"], json!({"userdata": "CC==", "extra": "BB=="}));
    let managers = fake.managers("Secret", "lab", "s1");
    assert!(
        managers["kubectl-edit"].contains("/data/extra"),
        "{managers:?}"
    );
    assert!(
        managers["shiftlab"].contains("/data/userdata"),
        "{managers:?}"
    );
}

#[test]
fn a_conflicting_apply_without_force_is_409_and_force_takes_the_field() {
    let fake = all();
    namespace(&fake);
    let s = secret(json!({"team": "a"}), json!({}));
    call(
        &fake,
        "PATCH",
        &format!("{SECRET}?fieldManager=other"),
        APPLY,
        &s,
    );
    let s = secret(json!({"team": "b"}), json!({}));
    let (code, o) = call(
        &fake,
        "PATCH",
        &format!("{SECRET}?fieldManager=shiftlab"),
        APPLY,
        &s,
    );
    assert_eq!(code, 409, "{o}");
    assert_eq!(o["reason"], "Conflict");
    assert!(
        o["message"]
            .as_str()
            .unwrap()
            .contains("conflict with \"other\""),
        "{o}"
    );
    let (code, o) = call(
        &fake,
        "PATCH",
        &format!("{SECRET}?fieldManager=shiftlab&force=true"),
        APPLY,
        &s,
    );
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["metadata"]["labels"]["team"], "b");
}

#[test]
fn an_apply_without_field_manager_is_422() {
    let fake = all();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}});
    let (code, o) = call(&fake, "PATCH", NS, APPLY, &ns);
    assert_eq!(code, 422, "{o}");
    assert_eq!(o["reason"], "Invalid");
    assert_eq!(
        o["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    assert!(fake.objects().is_empty());
}

#[test]
fn unknown_fields_are_500_on_built_in_types_and_422_or_pruned_on_custom_ones() {
    let fake = all();
    namespace(&fake);
    let mut s = secret(json!({}), json!({}));
    s["bogus"] = json!(1);
    let (code, o) = call(
        &fake,
        "PATCH",
        &format!("{SECRET}?fieldManager=shiftlab"),
        APPLY,
        &s,
    );
    assert_eq!(code, 500, "{o}");
    assert_eq!(
        o["message"],
        "failed to create typed patch object (lab/s1; v1, Kind=Secret): .bogus: field not declared in schema"
    );
    let vm = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "vm1", "namespace": "lab"}, "spec": {"runStrategy": "Halted"}, "bogus": 1});
    let path = "/apis/kubevirt.io/v1/namespaces/lab/virtualmachines/vm1";
    let (code, o) = call(
        &fake,
        "PATCH",
        &format!("{path}?fieldManager=shiftlab&fieldValidation=Strict"),
        APPLY,
        &vm,
    );
    assert_eq!(code, 422, "{o}");
    assert!(
        o["message"]
            .as_str()
            .unwrap()
            .ends_with(".bogus: field not declared in schema"),
        "{o}"
    );
    // Without strict validation the field is pruned, the rest stored.
    let (code, o) = call(
        &fake,
        "PATCH",
        &format!("{path}?fieldManager=shiftlab"),
        APPLY,
        &vm,
    );
    assert_eq!(code, 201, "{o}");
    assert!(o.get("bogus").is_none(), "{o}");
    assert!(get(&fake, path).1.get("bogus").is_none());
    assert_eq!(get(&fake, path).1["spec"]["runStrategy"], "Halted");
}

#[test]
fn a_stale_csr_approval_is_409_and_a_fresh_one_passes() {
    let fake = FakeKube::start(node_types());
    fake.insert(
        json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "csr-1"}, "spec": {}, "status": {}}),
    );
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1";
    let (_, mut csr) = get(&fake, path);
    // Someone else writes it between the read and the approval.
    let (code, _) = call(
        &fake,
        "PATCH",
        path,
        MERGE,
        &json!({"metadata": {"annotations": {"a": "b"}}}),
    );
    assert_eq!(code, 200);
    csr["status"]["conditions"] = json!([{"type": "Approved", "status": "True"}]);
    let (code, o) = call(
        &fake,
        "PUT",
        &format!("{path}/approval"),
        "application/json",
        &csr,
    );
    assert_eq!(code, 409, "{o}");
    assert_eq!(o["reason"], "Conflict");
    assert_eq!(
        o["message"],
        "Operation cannot be fulfilled on certificatesigningrequests.certificates.k8s.io \"csr-1\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert!(get(&fake, path).1["status"]["conditions"].is_null());
    // Read again, approve again: it passes.
    let (_, mut csr) = get(&fake, path);
    csr["status"]["conditions"] = json!([{"type": "Approved", "status": "True"}]);
    let (code, o) = call(
        &fake,
        "PUT",
        &format!("{path}/approval"),
        "application/json",
        &csr,
    );
    assert_eq!(code, 200, "{o}");
    assert_eq!(
        get(&fake, path).1["status"]["conditions"][0]["type"],
        "Approved"
    );
}

#[test]
fn a_deleted_namespace_terminates_refuses_new_content_then_goes_with_its_objects() {
    let fake = all();
    namespace(&fake);
    let mine = format!("{SECRET}?fieldManager=shiftlab");
    call(&fake, "PATCH", &mine, APPLY, &secret(json!({}), json!({})));
    let (code, o) = call(&fake, "DELETE", NS, "application/json", &json!({}));
    assert_eq!(code, 200, "{o}");
    let (_, ns) = get(&fake, NS);
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert!(ns["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    // New content is refused with the NamespaceLifecycle message; the existing
    // Secret may still be updated.
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": "lab"}});
    let (code, o) = call(
        &fake,
        "PATCH",
        "/api/v1/namespaces/lab/configmaps/late?fieldManager=shiftlab",
        APPLY,
        &other,
    );
    assert_eq!(code, 403, "{o}");
    assert_eq!(
        o["message"],
        "configmaps \"late\" is forbidden: unable to create new content in namespace lab because it is being terminated"
    );
    assert_eq!(o["details"]["causes"][0]["reason"], "NamespaceTerminating");
    assert_eq!(
        call(
            &fake,
            "PATCH",
            &mine,
            APPLY,
            &secret(json!({"a": "b"}), json!({}))
        )
        .0,
        200
    );
    // A few requests later the namespace controller has emptied and removed it.
    let mut polls = 0;
    while get(&fake, NS).0 == 200 {
        polls += 1;
        assert!(polls < 20, "the namespace never went");
    }
    assert_eq!(get(&fake, SECRET).0, 404);
    assert!(fake.objects().is_empty(), "{:?}", fake.objects().keys());
}

#[test]
fn a_held_namespace_stays_terminating() {
    let fake = all();
    namespace(&fake);
    fake.hold_deletions(true);
    call(&fake, "DELETE", NS, "application/json", &json!({}));
    for _ in 0..10 {
        assert_eq!(get(&fake, NS).1["status"]["phase"], "Terminating");
    }
    fake.hold_deletions(false);
    fake.settle();
    assert_eq!(get(&fake, NS).0, 404);
}

#[test]
fn foreground_deletion_keeps_the_owner_until_its_dependents_are_gone() {
    let fake = all();
    namespace(&fake);
    let vm = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "vm1", "namespace": "lab"}, "spec": {"runStrategy": "Halted"}});
    let path = "/apis/kubevirt.io/v1/namespaces/lab/virtualmachines/vm1";
    let (_, vm) = call(
        &fake,
        "PATCH",
        &format!("{path}?fieldManager=shiftlab"),
        APPLY,
        &vm,
    );
    // A dependent, as KubeVirt makes the VM's DataVolume's Secret-like objects.
    let dep = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1", "namespace": "lab",
        "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": "vm1",
            "uid": vm["metadata"]["uid"], "blockOwnerDeletion": true}]}});
    call(
        &fake,
        "PATCH",
        &format!("{SECRET}?fieldManager=kubevirt"),
        APPLY,
        &dep,
    );
    fake.deletion_lag(2);
    let (code, o) = call(
        &fake,
        "DELETE",
        path,
        "application/json",
        &json!({"propagationPolicy": "Foreground"}),
    );
    assert_eq!(code, 200, "{o}");
    assert_eq!(o["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    assert!(o["metadata"]["deletionTimestamp"].is_string());
    // The owner is there as long as its dependent is.
    let mut polls = 0;
    loop {
        let owner = get(&fake, path).0;
        let dependent = get(&fake, SECRET).0;
        if owner == 404 {
            assert_eq!(dependent, 404, "the owner went before its dependent");
            break;
        }
        polls += 1;
        assert!(polls < 20, "the owner never went");
    }
    assert!(polls >= 1, "the owner went at once");
    // A plain (background) delete is immediate.
    let s = secret(json!({}), json!({}));
    call(
        &fake,
        "PATCH",
        &format!("{SECRET}?fieldManager=shiftlab"),
        APPLY,
        &s,
    );
    assert_eq!(
        call(&fake, "DELETE", SECRET, "application/json", &json!({})).0,
        200
    );
    assert_eq!(get(&fake, SECRET).0, 404);
}
