//! `ntp_servers`: chrony MachineConfigs, one per machine config pool, as
//! OpenShift's "Configuring chrony time service" does (a Butane `openshift`
//! config compiled to a MachineConfig: `/etc/chrony.conf` as a data: URL, mode
//! 0644, overwritten, the `machineconfiguration.openshift.io/role` label). Pure:
//! a golden test pins each, and tests/machineconfig_schema.rs checks them
//! against the MachineConfig CRD.
//!
//! - **Ignition version.** 3.2.0, the one per-node configs use (src/ignition):
//!   the MCO parses 2.2 and 3.0 up to 3.4 (machine-config-operator
//!   pkg/controller/common/helpers.go, `IgnParseWrapper`), 3.2 since 4.8.
//! - **Both pools, always.** Every cluster has the `master` and `worker` pools
//!   (the MCO makes both; a compact cluster's is empty), and a worker added
//!   later (`shiftlab scale`) joins the worker pool: it gets the same servers.
//! - **chrony.conf.** The servers as `server … iburst` lines, then the rest of
//!   the example in OpenShift's docs (RHCOS's own defaults without its pool).

use anyhow::{Context, Result};
use ignition_config::v3_2::{Config, Storage};
use serde_json::json;

use crate::spec::ClusterSpec;

/// The control planes' MachineConfig, in the asset directory.
pub const MASTER: &str = "openshift/99-master-chrony-shiftlab.yaml";
/// The workers'.
pub const WORKER: &str = "openshift/99-worker-chrony-shiftlab.yaml";

/// The pools and the manifest of each.
const POOLS: [(&str, &str); 2] = [("master", MASTER), ("worker", WORKER)];

/// The file every node gets: `servers`, each polled at once on start (`iburst`).
pub fn chrony_conf(servers: &[String]) -> String {
    let mut s = String::from("# Written by shiftlab from the cluster file's ntp_servers.\n");
    for server in servers {
        s.push_str(&format!("server {server} iburst\n"));
    }
    s.push_str(
        "driftfile /var/lib/chrony/drift\nmakestep 1.0 3\nrtcsync\nlogdir /var/log/chrony\n",
    );
    s
}

/// The MachineConfig of `role`'s pool writing `conf` as `/etc/chrony.conf`.
pub fn machine_config(role: &str, conf: &str) -> String {
    // Plain strings and numbers into JSON and YAML: nothing there can fail.
    try_machine_config(role, conf).expect("a MachineConfig of strings serialises")
}

fn try_machine_config(role: &str, conf: &str) -> Result<String> {
    let ign = Config {
        storage: Some(Storage {
            files: Some(vec![crate::ignition::file("/etc/chrony.conf", conf, 0o644)]),
            ..Storage::default()
        }),
        ..Config::default()
    };
    let mc = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {
            "name": format!("99-{role}-chrony-shiftlab"),
            "labels": {"machineconfiguration.openshift.io/role": role},
        },
        "spec": {"config": serde_json::to_value(&ign).context("serialising Ignition")?},
    });
    yaml_serde::to_string(&mc).context("serialising the MachineConfig")
}

/// The servers the nodes use: `ntp_servers`, or with `host_ntp` the network's
/// gateway (the host, whose chrony serves the subnet: host::chrony).
pub fn servers(spec: &ClusterSpec) -> Vec<String> {
    if spec.host_ntp {
        let gateway = match (&spec.network.cidr, &spec.ipv6) {
            (Some(v4), _) => crate::addressing::gateway(v4).to_string(),
            (None, Some(v6)) => crate::addressing::gateway6(&v6.cidr).to_string(),
            (None, None) => return Vec::new(),
        };
        return vec![gateway];
    }
    spec.ntp_servers.clone()
}

/// The manifests for `spec`: none without servers (CoreOS's own pool).
pub fn manifests(spec: &ClusterSpec) -> Vec<(&'static str, String)> {
    let servers = servers(spec);
    if servers.is_empty() {
        return Vec::new();
    }
    let conf = chrony_conf(&servers);
    POOLS
        .iter()
        .map(|(role, path)| (*path, machine_config(role, &conf)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    /// Everything the lab adds (the one call of render::manifests here).
    fn lab(spec: &ClusterSpec) -> Vec<(&'static str, String)> {
        crate::render::manifests::lab_manifests(spec, &crate::plan::derive(spec))
    }

    fn spec(extra: &str) -> ClusterSpec {
        let text = format!(
            "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\nctlplanes: 3\nworkers: 0\n{extra}"
        );
        crate::spec::from_str(&text, "t.yaml", &crate::spec::Env::default())
            .unwrap()
            .spec
    }

    #[test]
    fn without_ntp_servers_nothing_is_rendered() {
        assert!(manifests(&spec("")).is_empty());
        assert!(!lab(&spec("")).iter().any(|(p, _)| p.contains("chrony")));
    }

    #[test]
    fn host_ntp_points_the_nodes_at_the_gateway() {
        let s = spec("host_ntp: true\nnetwork: {cidr: 192.168.140.0/24}\n");
        assert_eq!(servers(&s), ["192.168.140.1"]);
        let m = manifests(&s);
        assert_eq!(m.len(), 2);
        let conf = chrony_conf(&servers(&s));
        assert!(conf.contains("\nserver 192.168.140.1 iburst\n"), "{conf}");
        assert_eq!(m[0].1, machine_config("master", &conf));
    }

    #[test]
    fn each_pool_gets_its_labelled_config_with_the_servers() {
        let s = spec("ntp_servers: [ntp.lab.test, 192.168.126.1]\n");
        let m = manifests(&s);
        assert_eq!(
            m.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
            [MASTER, WORKER]
        );
        for ((path, text), role) in m.iter().zip(["master", "worker"]) {
            let v: serde_json::Value = yaml_serde::from_str(text).unwrap();
            assert_eq!(
                v["metadata"]["labels"]["machineconfiguration.openshift.io/role"],
                role
            );
            assert_eq!(v["metadata"]["name"], format!("99-{role}-chrony-shiftlab"));
            let ign = serde_json::to_string(&v["spec"]["config"]).unwrap();
            let (parsed, warnings) = ignition_config::Config::parse_str(&ign).unwrap();
            assert!(warnings.is_empty(), "{path}: {warnings:?}");
            let ignition_config::Config::V3_2(c) = parsed else {
                panic!("{path}: not 3.2")
            };
            let f = &c.storage.unwrap().files.unwrap()[0];
            assert_eq!(f.path, "/etc/chrony.conf");
            assert_eq!((f.mode, f.overwrite), (Some(0o644), Some(true)));
            let src = f.contents.as_ref().unwrap().source.as_deref().unwrap();
            let b64 = src
                .strip_prefix("data:text/plain;charset=utf-8;base64,")
                .unwrap();
            let conf = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            let conf = String::from_utf8(conf).unwrap();
            assert!(
                conf.contains("\nserver ntp.lab.test iburst\nserver 192.168.126.1 iburst\n"),
                "{conf}"
            );
            assert!(!conf.contains("pool "), "{conf}");
        }
        // The lab's manifests carry them.
        let lab = lab(&s);
        assert!(lab.iter().any(|(p, _)| *p == MASTER) && lab.iter().any(|(p, _)| *p == WORKER));
    }
}
