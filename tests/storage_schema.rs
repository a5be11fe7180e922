//! The manifests of `storage:` and `monitoring:` against the schemas their readers
//! enforce (tests/fixtures/openshift-schema, README.md there names the sources):
//!
//! - the image registry `Config` against the extract of its CRD;
//! - the `cluster-monitoring-config` ConfigMap's `config.yaml` against the extract
//!   of the cluster-monitoring-operator's config types, which it reads strictly;
//! - core kinds (the provisioner's objects, the StorageClass, the ConfigMap, the
//!   registry's claim, the claim templates' spec) round-trip through k8s-openapi's
//!   types: a field those types do not know is dropped and the round trip differs.

mod common;

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolumeClaim, PersistentVolumeClaimSpec, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::StorageClass;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use shiftlab::spec::{self, ClusterSpec, Env, Storage};

fn fixture(name: &str) -> Value {
    let path = common::repo()
        .join("tests/fixtures/openshift-schema")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn validator(name: &str) -> jsonschema::Validator {
    jsonschema::draft202012::new(&fixture(name)).unwrap()
}

fn violations(v: &jsonschema::Validator, o: &Value) -> Vec<String> {
    v.iter_errors(o)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn spec(workers: u32, storage: &str) -> ClusterSpec {
    let text = format!(
        "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: {workers}\nstorage: {storage}\nmonitoring:\n  retention: 1d12h\n"
    );
    spec::from_str(&text, "t.yaml", &Env::default())
        .unwrap()
        .spec
}

/// Every manifest the lab adds, as JSON, for none, nfs (with workers and
/// compact) and lvms (set by hand on an OKD file: at install the registry on
/// emptyDir, after it the claims; the operator's own objects are checked in
/// tests/lvms_schema.rs).
fn rendered() -> Vec<(String, &'static str, Value)> {
    let mut out = Vec::new();
    for (workers, storage) in [
        (2, Storage::None),
        (2, Storage::Nfs),
        (0, Storage::Nfs),
        (2, Storage::Lvms),
    ] {
        let mut s = spec(
            workers,
            if storage == Storage::Nfs {
                "nfs"
            } else {
                "none"
            },
        );
        s.storage = storage;
        let plan = shiftlab::plan::derive(&s);
        for (path, text) in shiftlab::render::manifests::lab_manifests(&s, &plan) {
            let v: Value = yaml_serde::from_str(&text).unwrap();
            out.push((format!("{storage:?} with {workers} workers"), path, v));
        }
        // LVMS's claims come after the install, with its LVMCluster (checked in
        // tests/lvms_schema.rs).
        if storage == Storage::Lvms {
            // The registry as the after-install patch leaves it (a JSON merge
            // patch, RFC 7386: null removes).
            let config = out
                .iter()
                .rev()
                .find(|(_, _, v)| v["kind"] == "Config")
                .map(|(_, _, v)| v.clone())
                .unwrap();
            let patch: Value =
                serde_json::from_str(shiftlab::render::manifests::LVMS_REGISTRY_PATCH).unwrap();
            let patched = merge_patch(config, &patch);
            assert_eq!(
                patched["spec"]["storage"],
                serde_json::json!({"pvc": {"claim": "shiftlab-image-registry"}})
            );
            out.push(("Lvms registry patched".into(), "lvmcluster.yaml", patched));
            for doc in shiftlab::render::lvms::after_install(&s, 18).split("---\n") {
                let v: Value = yaml_serde::from_str(doc).unwrap();
                if v["kind"] != "LVMCluster" {
                    out.push(("Lvms after install".into(), "lvmcluster.yaml", v));
                }
            }
        }
    }
    out
}

/// RFC 7386 JSON merge patch.
fn merge_patch(mut target: Value, patch: &Value) -> Value {
    let Some(p) = patch.as_object() else {
        return patch.clone();
    };
    if !target.is_object() {
        target = serde_json::json!({});
    }
    let t = target.as_object_mut().unwrap();
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            let cur = t.remove(k).unwrap_or(Value::Null);
            t.insert(k.clone(), merge_patch(cur, v));
        }
    }
    target
}

fn round_trip<T: DeserializeOwned + Serialize>(what: &str, o: &Value) {
    let typed: T = serde_json::from_value(o.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(&back, o, "{what} changed in the round trip");
}

#[test]
fn every_rendered_object_validates() {
    let registry = validator("imageregistry-config.schema.json");
    let cmo = validator("cluster-monitoring-config.schema.json");
    let mut kinds = BTreeSet::new();
    let mut claims = 0;
    for (label, path, o) in rendered() {
        let what = format!("{label} {path}");
        let kind = o["kind"].as_str().unwrap().to_string();
        match kind.as_str() {
            "Config" => {
                let bad = violations(&registry, &o);
                assert!(bad.is_empty(), "{what}:\n{}", bad.join("\n"));
            }
            "ConfigMap" => {
                round_trip::<ConfigMap>(&what, &o);
                let cfg: Value =
                    yaml_serde::from_str(o["data"]["config.yaml"].as_str().unwrap()).unwrap();
                let bad = violations(&cmo, &cfg);
                assert!(bad.is_empty(), "{what}:\n{}", bad.join("\n"));
                for c in ["prometheusK8s", "alertmanagerMain"] {
                    let t = &cfg[c]["volumeClaimTemplate"]["spec"];
                    if !t.is_null() {
                        round_trip::<PersistentVolumeClaimSpec>(&what, t);
                        claims += 1;
                    }
                }
            }
            "Namespace" => round_trip::<Namespace>(&what, &o),
            "ServiceAccount" => round_trip::<ServiceAccount>(&what, &o),
            "ClusterRole" => round_trip::<ClusterRole>(&what, &o),
            "ClusterRoleBinding" => round_trip::<ClusterRoleBinding>(&what, &o),
            "Role" => round_trip::<Role>(&what, &o),
            "RoleBinding" => round_trip::<RoleBinding>(&what, &o),
            "Deployment" => round_trip::<Deployment>(&what, &o),
            "StorageClass" => round_trip::<StorageClass>(&what, &o),
            "PersistentVolumeClaim" => round_trip::<PersistentVolumeClaim>(&what, &o),
            // Checked by the tests of their own renderers.
            "Scheduler" | "IngressController" => {}
            other => panic!("{what}: no check for kind {other}"),
        }
        kinds.insert(kind);
    }
    assert_eq!(claims, 6, "three clusters with storage, two templates each");
    for k in [
        "Config",
        "ConfigMap",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "StorageClass",
        "PersistentVolumeClaim",
    ] {
        assert!(kinds.contains(k), "{k} was not rendered");
    }
}

/// The checks refuse what the real readers refuse.
#[test]
fn the_checks_bite() {
    let registry = validator("imageregistry-config.schema.json");
    let cmo = validator("cluster-monitoring-config.schema.json");
    let ok_config = json!({
        "apiVersion": "imageregistry.operator.openshift.io/v1", "kind": "Config",
        "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed", "replicas": 2, "storage": {"pvc": {"claim": ""}}},
    });
    assert!(violations(&registry, &ok_config).is_empty());
    type Mutation = (&'static str, fn(&mut Value));
    let bad: &[Mutation] = &[
        ("an unknown storage field", |c| {
            c["spec"]["storage"]["pvc"]["claimName"] = json!("x")
        }),
        ("a rollout strategy the CRD's pattern refuses", |c| {
            c["spec"]["rolloutStrategy"] = json!("Rolling")
        }),
        ("a management state that does not exist", |c| {
            c["spec"]["managementState"] = json!("managed")
        }),
        ("no replicas", |c| {
            c["spec"].as_object_mut().unwrap().remove("replicas");
        }),
        ("replicas as a string", |c| {
            c["spec"]["replicas"] = json!("2")
        }),
        ("something in emptyDir", |c| {
            c["spec"]["storage"]["emptyDir"] = json!({"medium": "Memory"})
        }),
    ];
    for (what, m) in bad {
        let mut c = ok_config.clone();
        m(&mut c);
        assert!(!violations(&registry, &c).is_empty(), "{what} passed");
    }
    let ok_cmo = json!({"prometheusK8s": {"retention": "1d", "volumeClaimTemplate": {"spec": {}}}});
    assert!(violations(&cmo, &ok_cmo).is_empty());
    for (what, c) in [
        (
            "a misspelt retention",
            json!({"prometheusK8s": {"retentionTime": "1d"}}),
        ),
        (
            "a component that does not exist",
            json!({"prometheus": {"retention": "1d"}}),
        ),
        (
            "a claim template's unknown key",
            json!({"alertmanagerMain": {"volumeClaimTemplate": {"storage": "1Gi"}}}),
        ),
        (
            "retention as a number",
            json!({"prometheusK8s": {"retention": 24}}),
        ),
    ] {
        assert!(!violations(&cmo, &c).is_empty(), "{what} passed");
    }
    // A field k8s-openapi does not know is lost in the round trip.
    let sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "x"}, "provisioner": "p", "parameter": {"a": "b"}});
    let typed: StorageClass = serde_json::from_value(sc.clone()).unwrap();
    assert_ne!(serde_json::to_value(&typed).unwrap(), sc);
}

/// The extracts are what the generators make of the upstream files
/// (README.md: `SHIFTLAB_IMAGEREGISTRY_CRD`, `SHIFTLAB_CMO_TYPES`).
#[test]
#[ignore = "needs the upstream files"]
fn the_extracts_match_upstream() {
    let dir = common::repo().join("tests/fixtures/openshift-schema");
    for (var, generator, extract) in [
        (
            "SHIFTLAB_IMAGEREGISTRY_CRD",
            "gen-imageregistry-schema.py",
            "imageregistry-config.schema.json",
        ),
        (
            "SHIFTLAB_CMO_TYPES",
            "gen-cmo-schema.py",
            "cluster-monitoring-config.schema.json",
        ),
    ] {
        let upstream =
            std::env::var(var).unwrap_or_else(|_| panic!("{var} names the upstream file"));
        let out = std::process::Command::new("python3")
            .arg(dir.join(generator))
            .arg(upstream)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{generator}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let made: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(made, fixture(extract), "{extract} differs from upstream");
    }
}
