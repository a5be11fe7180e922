//! `storage: lvms`: the OLM objects (render::lvms, install-time) against OLM's
//! own CRDs and the `LVMCluster` (after install) against lvm-operator's CRD
//! (tests/fixtures/olm-crds, README.md there names their source); the Namespace
//! round-trips through k8s-openapi. Each kind is the one its CRD serves.

mod common;
#[path = "support/openshift_crd.rs"]
mod openshift_crd;

use serde_json::Value;
use shiftlab::spec::{self, ClusterSpec, Env, Storage};

const CRDS: &str = "tests/fixtures/olm-crds";

fn spec(version: &str, workers: u32) -> ClusterSpec {
    let text = format!(
        "cluster: lab1\ndomain: lab.test\ndistribution: ocp\nversion: '{version}'\npull_secret: fixtures/pull-secret.json\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: {workers}\nextra_disks: [100]\nstorage: lvms\n"
    );
    let env = Env {
        base_dir: common::repo().join("tests"),
        ..Env::default()
    };
    match spec::from_str(&text, "t.yaml", &env) {
        Ok(r) => r.spec,
        Err(e) => panic!("{e:#}"),
    }
}

fn lab(s: &ClusterSpec) -> Vec<(&'static str, Value)> {
    shiftlab::render::manifests::lab_manifests(s, &shiftlab::plan::derive(s))
        .into_iter()
        .filter(|(p, _)| p.contains("-lvms-"))
        .map(|(p, t)| (p, yaml_serde::from_str(&t).unwrap()))
        .collect()
}

fn check(file: &str, crd: &str, version: &str, o: &Value) {
    let v = openshift_crd::validator(CRDS, file, crd, version);
    let bad = openshift_crd::violations(&v, o);
    assert!(bad.is_empty(), "{o}: {bad:?}");
    let (group, _) = crd.split_once('.').unwrap();
    assert_eq!(
        o["apiVersion"],
        format!("{}/{version}", &crd[group.len() + 1..]).as_str()
    );
}

#[test]
fn the_operator_group_and_subscription_match_olms_crds() {
    for (version, workers, ns) in [
        ("4.18", 2, "openshift-storage"),
        ("4.20.1", 0, "openshift-lvm-storage"),
    ] {
        let s = spec(version, workers);
        assert_eq!(s.storage, Storage::Lvms);
        let m = lab(&s);
        let kinds: Vec<_> = m.iter().map(|(_, o)| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Namespace", "OperatorGroup", "Subscription"]);
        for (path, o) in &m {
            assert!(path.starts_with("openshift/99-shiftlab-lvms-"), "{path}");
            match o["kind"].as_str().unwrap() {
                "Namespace" => {
                    let n: k8s_openapi::api::core::v1::Namespace =
                        serde_json::from_value(o.clone()).unwrap();
                    assert_eq!(&serde_json::to_value(&n).unwrap(), o);
                    assert_eq!(o["metadata"]["name"], ns);
                }
                "OperatorGroup" => {
                    check(
                        "operators.coreos.com_operatorgroups.yaml",
                        "operatorgroups.operators.coreos.com",
                        "v1",
                        o,
                    );
                    assert_eq!(o["spec"]["targetNamespaces"][0], ns);
                }
                "Subscription" => {
                    check(
                        "operators.coreos.com_subscriptions.yaml",
                        "subscriptions.operators.coreos.com",
                        "v1alpha1",
                        o,
                    );
                    assert_eq!(o["metadata"]["namespace"], ns);
                    assert_eq!(o["spec"]["name"], "lvms-operator");
                    assert_eq!(o["spec"]["source"], "redhat-operators");
                    let minor = version.split('.').nth(1).unwrap();
                    assert_eq!(o["spec"]["channel"], format!("stable-4.{minor}").as_str());
                }
                k => panic!("{k}"),
            }
        }
        let c: Value = yaml_serde::from_str(&shiftlab::render::lvms::lvm_cluster(
            if ns == "openshift-storage" { 18 } else { 20 },
        ))
        .unwrap();
        check(
            "lvm.topolvm.io_lvmclusters.yaml",
            "lvmclusters.lvm.topolvm.io",
            "v1alpha1",
            &c,
        );
        assert_eq!(c["metadata"]["namespace"], ns);
    }
}

#[test]
fn the_crd_check_refuses_what_the_api_server_would_prune() {
    // The validators are real: a misspelt field is a violation.
    let mut c: Value = yaml_serde::from_str(&shiftlab::render::lvms::lvm_cluster(18)).unwrap();
    c["spec"]["storage"]["deviceClasses"][0]["thinPool"] =
        c["spec"]["storage"]["deviceClasses"][0]["thinPoolConfig"].take();
    let v = openshift_crd::validator(
        CRDS,
        "lvm.topolvm.io_lvmclusters.yaml",
        "lvmclusters.lvm.topolvm.io",
        "v1alpha1",
    );
    assert!(!openshift_crd::violations(&v, &c).is_empty());
}

#[test]
fn without_lvms_nothing_of_it_is_rendered() {
    let mut s = spec("4.18", 2);
    s.storage = Storage::None;
    assert!(lab(&s).is_empty());
}
