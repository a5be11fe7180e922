//! The platform monitoring stack's settings: the `cluster-monitoring-config`
//! ConfigMap in `openshift-monitoring`, whose `config.yaml` the
//! cluster-monitoring-operator reads (openshift/cluster-monitoring-operator,
//! pkg/manifests/types.go `ClusterMonitoringConfiguration`; it unmarshals strictly,
//! so an unknown field stops the operator: tests check every field against that
//! file). Pure; golden in tests/golden.rs.
//!
//! - `prometheusK8s.retention`: the cluster file's `monitoring.retention`.
//! - With `storage: nfs`: a `volumeClaimTemplate` for Prometheus and Alertmanager
//!   with no `storageClassName`, so the claims go to the default StorageClass
//!   (src/render/storage.rs); with `storage: lvms` the same on LVMS's class, after
//!   the install ([`lvms_after_install`]). Sizes for a lab: Prometheus keeps a day by default, a
//!   few GiB on a small cluster, so 10Gi each (two replicas); Alertmanager keeps
//!   silences and notifications only, 1Gi each. The Prometheus Operator asks
//!   ReadWriteOnce when a template names no access mode.

use serde_json::json;

use crate::spec::{ClusterSpec, Storage};

/// Where the ConfigMap goes.
pub const PATH: &str = "openshift/99-shiftlab-cluster-monitoring-config.yaml";
/// Each Prometheus replica's claim.
pub const PROMETHEUS_SIZE: &str = "10Gi";
/// Each Alertmanager replica's claim.
pub const ALERTMANAGER_SIZE: &str = "1Gi";

/// Where the claims go: none, the default class, or a named one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claims<'a> {
    None,
    DefaultClass,
    Class(&'a str),
}

/// The `config.yaml` the operator reads. At install only `storage: nfs` has a
/// class (LVMS's comes after the install: [`lvms_after_install`]; claims that
/// cannot bind would keep monitoring unavailable and the install incomplete).
pub fn config(spec: &ClusterSpec) -> String {
    let claims = if spec.storage == Storage::Nfs {
        Claims::DefaultClass
    } else {
        Claims::None
    };
    config_with(spec, claims)
}

fn config_with(spec: &ClusterSpec, claims: Claims) -> String {
    let claim = |size: &str| {
        let mut c = json!({"spec": {"resources": {"requests": {"storage": size}}}});
        if let Claims::Class(class) = claims {
            c["spec"]["storageClassName"] = json!(class);
        }
        c
    };
    let mut prometheus = json!({"retention": spec.monitoring.retention});
    let mut cfg = json!({});
    if claims != Claims::None {
        prometheus["volumeClaimTemplate"] = claim(PROMETHEUS_SIZE);
        cfg["alertmanagerMain"] = json!({"volumeClaimTemplate": claim(ALERTMANAGER_SIZE)});
    }
    cfg["prometheusK8s"] = prometheus;
    yaml_serde::to_string(&cfg).expect("a JSON value serialises")
}

fn config_map(config: String) -> String {
    let cm = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cluster-monitoring-config", "namespace": "openshift-monitoring"},
        "data": {"config.yaml": config},
    });
    yaml_serde::to_string(&cm).expect("a JSON value serialises")
}

/// The ConfigMap, by its manifest path.
pub fn manifests(spec: &ClusterSpec) -> Vec<(&'static str, String)> {
    vec![(PATH, config_map(config(spec)))]
}

/// `storage: lvms`, after the install: the ConfigMap again, its claims on LVMS's
/// class (named, as the registry's claim).
pub fn lvms_after_install(spec: &ClusterSpec) -> String {
    config_map(config_with(spec, Claims::Class(super::lvms::STORAGE_CLASS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> ClusterSpec {
        let text =
            format!("cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n{extra}");
        crate::spec::from_str(&text, "t.yaml", &crate::spec::Env::default())
            .unwrap()
            .spec
    }

    fn cfg(s: &ClusterSpec) -> yaml_serde::Value {
        let m = manifests(s);
        let cm: yaml_serde::Value = yaml_serde::from_str(&m[0].1).unwrap();
        assert_eq!(cm["metadata"]["name"], "cluster-monitoring-config");
        assert_eq!(cm["metadata"]["namespace"], "openshift-monitoring");
        yaml_serde::from_str(cm["data"]["config.yaml"].as_str().unwrap()).unwrap()
    }

    #[test]
    fn without_storage_only_the_retention() {
        let c = cfg(&spec(""));
        assert_eq!(c["prometheusK8s"]["retention"], "24h");
        assert!(c["prometheusK8s"]["volumeClaimTemplate"].is_null());
        assert!(c["alertmanagerMain"].is_null());
        let c = cfg(&spec("monitoring:\n  retention: 3d\n"));
        assert_eq!(c["prometheusK8s"]["retention"], "3d");
    }

    #[test]
    fn with_storage_claims_on_the_default_class() {
        let c = cfg(&spec("storage: nfs\nmonitoring:\n  retention: 7d\n"));
        assert_eq!(c["prometheusK8s"]["retention"], "7d");
        let p = &c["prometheusK8s"]["volumeClaimTemplate"]["spec"];
        assert_eq!(p["resources"]["requests"]["storage"], PROMETHEUS_SIZE);
        assert!(p["storageClassName"].is_null(), "the default StorageClass");
        let a = &c["alertmanagerMain"]["volumeClaimTemplate"]["spec"];
        assert_eq!(a["resources"]["requests"]["storage"], ALERTMANAGER_SIZE);
        assert!(a["storageClassName"].is_null());
    }
}
