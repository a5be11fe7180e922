//! Per-node Ignition: a config of one pinned spec version that carries the node's
//! own settings and merges the installer's config (never an edit of it).

use anyhow::{Context, Result};
use base64::Engine;
use ignition_config::v3_2::{Config, File, IgnitionConfig, Passwd, Resource, Storage, User};

use crate::plan::{Node, Plan};

/// The spec version every per-node config is written in.
pub const SPEC_VERSION: &str = "3.2.0";

fn data_url(bytes: &[u8]) -> String {
    format!(
        "data:text/plain;charset=utf-8;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// A file Ignition writes whole (overwriting), its contents as a data: URL.
pub fn file(path: &str, contents: &str, mode: i64) -> File {
    let mut f = File::new(path.to_string());
    f.contents = Some(Resource {
        source: Some(data_url(contents.as_bytes())),
        ..Resource::default()
    });
    f.mode = Some(mode);
    f.overwrite = Some(true);
    f
}

/// The node's config. `installer` is the installer's config for the node's role
/// (`bootstrap.ign`, `master.ign`, `worker.ign`), merged as is when given.
pub fn node_config(
    plan: &Plan,
    node: &Node,
    ssh_keys: &[String],
    installer: Option<&[u8]>,
) -> Result<String> {
    if let Some(bytes) = installer {
        // Refuse to wrap something that is not an Ignition config at all.
        ignition_config::Config::parse_slice(bytes)
            .context("parsing the installer's Ignition config")?;
    }
    let mut cfg = Config::default();
    if let Some(bytes) = installer {
        cfg.ignition.config = Some(IgnitionConfig {
            merge: Some(vec![Resource {
                source: Some(data_url(bytes)),
                ..Resource::default()
            }]),
            replace: None,
        });
    }
    cfg.storage = Some(Storage {
        files: Some(vec![
            file("/etc/hostname", &node.name, 0o644),
            file("/etc/shiftlab/role", node.role.as_str(), 0o644),
            file("/etc/shiftlab/cluster-domain", &plan.cluster_domain, 0o644),
        ]),
        ..Storage::default()
    });
    if !ssh_keys.is_empty() {
        let mut core = User::new("core".into());
        core.ssh_authorized_keys = Some(ssh_keys.to_vec());
        cfg.passwd = Some(Passwd {
            users: Some(vec![core]),
            groups: None,
        });
    }
    serde_json::to_string(&cfg).context("serialising Ignition")
}

/// A pointer config: nothing of its own, the whole config merged from `url`
/// (Ignition fetches it at first boot). Used where the config cannot travel
/// with the VM, e.g. a KubeVirt config drive Secret.
pub fn pointer_config(url: &str) -> Result<String> {
    let mut cfg = Config::default();
    cfg.ignition.config = Some(IgnitionConfig {
        merge: Some(vec![Resource {
            source: Some(url.to_string()),
            ..Resource::default()
        }]),
        replace: None,
    });
    serde_json::to_string(&cfg).context("serialising Ignition")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        crate::plan::from_yaml(
            "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\n",
        )
    }

    #[test]
    fn wraps_without_editing_and_parses_back() {
        let p = plan();
        let node = &p.nodes[1];
        let installer = br#"{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://api-int.lab1.lab.test:22623/config/master"}]}}}"#;
        let text = node_config(&p, node, &["ssh-ed25519 AAAA k".into()], Some(installer)).unwrap();
        let (parsed, warnings) = ignition_config::Config::parse_str(&text).unwrap();
        assert!(warnings.is_empty());
        let ignition_config::Config::V3_2(c) = parsed else {
            panic!("not 3.2")
        };
        let merged = &c.ignition.config.unwrap().merge.unwrap()[0];
        let b64 = merged.source.as_ref().unwrap().split(',').nth(1).unwrap();
        let original = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert_eq!(original, installer);
        let files = c.storage.unwrap().files.unwrap();
        assert_eq!(files[0].path, "/etc/hostname");
        assert!(node_config(&p, node, &[], Some(b"not json")).is_err());
    }
}
