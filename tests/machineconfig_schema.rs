//! The MachineConfigs shiftlab renders (src/render/chrony.rs), against the
//! MachineConfig CRD of openshift/api (tests/fixtures/openshift-crds, README.md
//! there names the commit): the CRD's `openAPIV3Schema` as a JSON Schema, with
//! unknown fields refused where the API server would prune them. The Ignition
//! config inside (`spec.config`, which the CRD leaves open) is parsed by the
//! `ignition-config` crate.

mod common;
#[path = "support/openshift_crd.rs"]
mod openshift_crd;

use base64::Engine;
use serde_json::{json, Value};
use shiftlab::render::{chrony, manifests};
use shiftlab::spec::{self, Env};

fn compact() -> spec::ClusterSpec {
    let dir = common::repo().join("tests/golden");
    let text = std::fs::read_to_string(dir.join("compact.cluster.yaml")).unwrap();
    let env = Env {
        home: None,
        base_dir: dir,
        libvirt_default_uri: None,
    };
    spec::from_str(&text, "compact.cluster.yaml", &env)
        .unwrap_or_else(|e| panic!("{e}"))
        .spec
}

/// Everything the lab adds for the golden compact cluster (the one call of
/// render::manifests here).
fn lab() -> Vec<(&'static str, String)> {
    let spec = compact();
    manifests::lab_manifests(&spec, &shiftlab::plan::derive(&spec))
}

/// The lab's MachineConfigs (the golden compact cluster has `ntp_servers`).
fn machine_configs() -> Vec<(&'static str, Value)> {
    lab()
        .into_iter()
        .map(|(p, t)| (p, yaml_serde::from_str::<Value>(&t).unwrap()))
        .filter(|(_, v)| v["kind"] == "MachineConfig")
        .collect()
}

#[test]
fn chrony_machine_configs_validate_against_the_crd() {
    let v = openshift_crd::v1_validator(
        "machineconfigs.crd.yaml",
        "machineconfigs.machineconfiguration.openshift.io",
    );
    let mcs = machine_configs();
    assert_eq!(
        mcs.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
        [chrony::MASTER, chrony::WORKER]
    );
    for (path, mc) in &mcs {
        assert_eq!(
            mc["apiVersion"], "machineconfiguration.openshift.io/v1",
            "{path}"
        );
        let errors = openshift_crd::violations(&v, mc);
        assert!(errors.is_empty(), "{path}: {errors:#?}");
    }
    // The validator refuses what the API server would drop or reject.
    let mut bad = mcs[0].1.clone();
    bad["spec"]["kernelArgs"] = json!(["a"]);
    assert!(
        !openshift_crd::violations(&v, &bad).is_empty(),
        "an unknown spec field passed"
    );
    let mut bad = mcs[0].1.clone();
    bad["spec"]["fips"] = json!("yes");
    assert!(
        !openshift_crd::violations(&v, &bad).is_empty(),
        "a string fips passed"
    );
    let mut bad = mcs[0].1.clone();
    bad["spec"]["config"] = json!("{}");
    assert!(
        !openshift_crd::violations(&v, &bad).is_empty(),
        "a string config passed"
    );
}

#[test]
fn the_embedded_ignition_writes_chrony_conf_with_the_servers() {
    let mcs = machine_configs();
    assert_eq!(mcs.len(), 2, "one MachineConfig per pool");
    for (path, mc) in mcs {
        let role = mc["metadata"]["labels"]["machineconfiguration.openshift.io/role"]
            .as_str()
            .unwrap_or_else(|| panic!("{path}: no role label"));
        assert!(path.contains(&format!("99-{role}-chrony")), "{path}");
        let ign = serde_json::to_vec(&mc["spec"]["config"]).unwrap();
        let (parsed, warnings) = ignition_config::Config::parse_slice(&ign).unwrap();
        assert!(warnings.is_empty(), "{path}: {warnings:?}");
        let ignition_config::Config::V3_2(c) = parsed else {
            panic!("{path}: not Ignition 3.2.0")
        };
        let files = c.storage.unwrap().files.unwrap();
        assert_eq!(files.len(), 1, "{path}");
        let f = &files[0];
        assert_eq!(f.path, "/etc/chrony.conf");
        assert_eq!(f.mode, Some(0o644));
        assert_eq!(f.overwrite, Some(true));
        let src = f.contents.as_ref().unwrap().source.as_deref().unwrap();
        let b64 = src
            .strip_prefix("data:text/plain;charset=utf-8;base64,")
            .unwrap_or_else(|| panic!("{path}: {src}"));
        let conf = String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap();
        let servers: Vec<&str> = conf
            .lines()
            .filter_map(|l| l.strip_prefix("server "))
            .collect();
        assert_eq!(
            servers,
            ["ntp.lab.test iburst", "192.168.127.1 iburst"],
            "{path}: {conf}"
        );
        assert!(!conf.lines().any(|l| l.starts_with("pool ")), "{conf}");
    }
}

/// Through the stand-in installer (assets/rehearsal/openshift-install, which
/// packs `openshift/*` into `bootstrap.ign` under /opt/openshift as the real
/// one does): the chrony MachineConfigs written where the manifests target
/// writes them reach the bootstrap node, byte for byte.
#[test]
fn the_machine_configs_reach_bootstrap_ign() {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(
        common::repo().join("tests/golden/compact.install-config.yaml"),
        d.path().join("install-config.yaml"),
    )
    .unwrap();
    let fake = |verb: &str| {
        let out =
            std::process::Command::new(common::repo().join("assets/rehearsal/openshift-install"))
                .args(["create", verb, "--dir"])
                .arg(d.path())
                .output()
                .unwrap();
        assert!(
            out.status.success(),
            "{verb}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    fake("manifests");
    let ours = lab();
    for (rel, text) in &ours {
        std::fs::write(d.path().join(rel), text).unwrap();
    }
    fake("ignition-configs");
    let ign: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("bootstrap.ign")).unwrap())
            .unwrap();
    let chrony: Vec<_> = ours.iter().filter(|(r, _)| r.contains("chrony")).collect();
    assert_eq!(
        chrony.len(),
        2,
        "{:?}",
        ours.iter().map(|(r, _)| r).collect::<Vec<_>>()
    );
    for (rel, text) in chrony {
        let at = format!("/opt/openshift/{rel}");
        let entry = ign["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == at.as_str())
            .unwrap_or_else(|| panic!("{at} is not in bootstrap.ign"));
        let src = entry["contents"]["source"].as_str().unwrap();
        let b64 = src
            .strip_prefix("data:text/plain;charset=utf-8;base64,")
            .unwrap();
        let got = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert_eq!(String::from_utf8(got).unwrap(), *text, "{at}");
    }
}
