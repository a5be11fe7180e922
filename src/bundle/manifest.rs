//! `bundle.json`: what a bundle holds and who its nodes are. Written last by
//! `bundle create`, so a directory without it is no bundle; read first by every
//! other bundle command. Pure: the model, its checks, the restore's plan.

use std::net::IpAddr;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::plan::{DiskKind, Plan};
use crate::spec::Role;

/// The manifest's format; another is refused by name.
pub const FORMAT: u32 = 1;

/// The manifest's file name, at the bundle's top.
pub const MANIFEST: &str = "bundle.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub cluster: String,
    pub domain: String,
    pub method: String,
    /// The release the install reported (`None` for a lab without install).
    pub release_version: Option<String>,
    pub rehearsal: bool,
    /// When the bundle was made, seconds since the epoch.
    pub created_at: u64,
    /// When the install's certificates were made (the ignition target).
    pub installed_at: Option<u64>,
    /// The earliest notAfter of the certificates found in the install's
    /// assets, seconds since the epoch.
    pub certificates_expire: Option<i64>,
    pub nodes: Vec<NodeIdentity>,
    /// Every file of the bundle but this one, by path relative to the bundle.
    pub files: Vec<FileEntry>,
}

/// A node as etcd and its certificates know it: restore must keep all of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeIdentity {
    pub name: String,
    pub role: Role,
    pub mac: String,
    pub ip: IpAddr,
    /// Its disk in the bundle (relative).
    pub disk: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// Where a node's disk goes in a bundle.
pub fn disk_path(node: &str) -> String {
    format!("disks/{node}.qcow2")
}

/// The identities of the plan's nodes that are bundled (`bundled`: their names).
pub fn identities(plan: &Plan, bundled: &[String]) -> Vec<NodeIdentity> {
    plan.nodes
        .iter()
        .filter(|n| bundled.contains(&n.name))
        .map(|n| NodeIdentity {
            name: n.name.clone(),
            role: n.role,
            mac: n.mac.clone(),
            ip: n.ip,
            disk: disk_path(&n.name),
        })
        .collect()
}

/// A path inside a bundle: relative, plain components only (a manifest from
/// elsewhere must not reach outside its directory).
pub fn check_path(p: &str) -> Result<()> {
    use std::path::Component;
    let path = std::path::Path::new(p);
    if p.is_empty()
        || p == MANIFEST
        || !path.components().all(|c| matches!(c, Component::Normal(_)))
    {
        bail!("bundle path {p:?} is not a plain relative path inside the bundle");
    }
    Ok(())
}

impl Manifest {
    /// Read and check a manifest's text: its format, its cluster name, every
    /// path, every digest's form, and a disk listed for each node.
    pub fn parse(text: &str) -> Result<Manifest> {
        #[derive(Deserialize)]
        struct Format {
            format: u32,
        }
        let f: Format = serde_json::from_str(text)?;
        if f.format != FORMAT {
            bail!(
                "bundle format {} is not {FORMAT} (made by another shiftlab version)",
                f.format
            );
        }
        let m: Manifest = serde_json::from_str(text)?;
        if !crate::spec::is_cluster_name(&m.cluster) {
            bail!(
                "the bundle's cluster name {:?} is not a cluster name",
                m.cluster
            );
        }
        for f in &m.files {
            check_path(&f.path)?;
            if f.sha256.len() != 64 || !f.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                bail!("{}: sha256 {:?} is not a sha256", f.path, f.sha256);
            }
        }
        if m.nodes.is_empty() {
            bail!("the bundle has no node");
        }
        for n in &m.nodes {
            if m.file(&n.disk).is_none() {
                bail!(
                    "node {}: its disk {} is not among the bundle's files",
                    n.name,
                    n.disk
                );
            }
        }
        Ok(m)
    }

    pub fn file(&self, path: &str) -> Option<&FileEntry> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// Does the plan give every bundled node the identity the bundle recorded?
/// Names, roles, MACs and addresses are what etcd's members and the
/// certificates are bound to; a plan that moves any of them cannot run the
/// bundled disks. Errors name the node, the field and both values.
pub fn check_identity(m: &Manifest, plan: &Plan) -> Result<()> {
    let mut wrong = Vec::new();
    if plan.cluster != m.cluster {
        wrong.push(format!(
            "cluster is {}, the bundle's is {}",
            plan.cluster, m.cluster
        ));
    }
    if plan.domain != m.domain {
        wrong.push(format!(
            "domain is {}, the bundle's is {}",
            plan.domain, m.domain
        ));
    }
    for id in &m.nodes {
        let Some(n) = plan.node(&id.name) else {
            wrong.push(format!("node {} is not planned", id.name));
            continue;
        };
        if n.role != id.role {
            wrong.push(format!(
                "{}: role is {}, the bundle's is {}",
                id.name,
                n.role.as_str(),
                id.role.as_str()
            ));
        }
        if n.mac != id.mac {
            wrong.push(format!(
                "{}: MAC is {}, the bundle's is {}",
                id.name, n.mac, id.mac
            ));
        }
        if n.ip != id.ip {
            wrong.push(format!(
                "{}: address is {}, the bundle's is {}",
                id.name, n.ip, id.ip
            ));
        }
    }
    if !wrong.is_empty() {
        bail!(
            "the plan does not keep the bundle's identity: {}",
            wrong.join("; ")
        );
    }
    Ok(())
}

/// The pool volume a bundled disk is imported as: named by its content's
/// sha256, as base images are (`shiftlab-base-<16 hex>.qcow2`, with the full
/// digest in its marker), so every restore of it shares one import and
/// `destroy --purge-images` treats it as the base image it is.
pub fn base_volume(sha256: &str) -> String {
    format!("shiftlab-base-{}.qcow2", &sha256[..16])
}

/// One node of a restore: its disk in the bundle, the base volume that disk
/// becomes, and the node's root overlay on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRestore {
    pub node: String,
    pub disk: String,
    pub sha256: String,
    pub base_volume: String,
    pub overlay: String,
    /// The overlay's capacity: the plan's root disk, at least the base's.
    pub root_gb: u64,
}

/// The restore's plan: per bundled node, what is imported and what overlay
/// sits on it. The identity is checked first.
pub fn restore_plan(m: &Manifest, plan: &Plan) -> Result<Vec<NodeRestore>> {
    check_identity(m, plan)?;
    let mut out = Vec::new();
    for id in &m.nodes {
        let Some(n) = plan.node(&id.name) else {
            bail!("node {} is not planned", id.name);
        };
        let Some(root) = n.disks.iter().find(|d| d.kind == DiskKind::Root) else {
            bail!("node {}: the plan gives it no root disk", id.name);
        };
        let Some(f) = m.file(&id.disk) else {
            bail!(
                "node {}: its disk {} is not in the bundle",
                id.name,
                id.disk
            );
        };
        out.push(NodeRestore {
            node: id.name.clone(),
            disk: id.disk.clone(),
            sha256: f.sha256.to_lowercase(),
            base_volume: base_volume(&f.sha256.to_lowercase()),
            overlay: root.volume.clone(),
            root_gb: root.size_gb,
        });
    }
    Ok(out)
}

/// The earliest notAfter among the certificates in `blobs`: PEM blocks, and
/// the base64 `*-data:` values of kubeconfigs (the admin's client
/// certificate, the CA). Anything unreadable is passed over.
pub fn earliest_not_after<'a>(blobs: impl IntoIterator<Item = &'a [u8]>) -> Option<i64> {
    use base64::Engine;
    let mut best: Option<i64> = None;
    let mut take = |pem: &[u8]| {
        for p in x509_parser::pem::Pem::iter_from_buffer(pem).flatten() {
            if p.label != "CERTIFICATE" {
                continue;
            }
            if let Ok(c) = p.parse_x509() {
                let t = c.validity().not_after.timestamp();
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        }
    };
    for blob in blobs {
        take(blob);
        for line in String::from_utf8_lossy(blob).lines() {
            let Some((key, value)) = line.trim().split_once(':') else {
                continue;
            };
            if !key.ends_with("-data") {
                continue;
            }
            if let Ok(pem) = base64::engine::general_purpose::STANDARD.decode(value.trim()) {
                take(&pem);
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        crate::plan::from_yaml(
            "cluster: lab1\ndomain: example.com\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: 1\n",
        )
    }

    fn manifest(p: &Plan) -> Manifest {
        let names: Vec<String> = p
            .nodes
            .iter()
            .filter(|n| n.role != Role::Bootstrap)
            .map(|n| n.name.clone())
            .collect();
        let nodes = identities(p, &names);
        Manifest {
            format: FORMAT,
            cluster: p.cluster.clone(),
            domain: p.domain.clone(),
            method: "upi".into(),
            release_version: None,
            rehearsal: true,
            created_at: 1_700_000_000,
            installed_at: None,
            certificates_expire: None,
            files: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| FileEntry {
                    path: n.disk.clone(),
                    sha256: format!("{i:x}").repeat(64),
                    bytes: 10,
                })
                .collect(),
            nodes,
        }
    }

    #[test]
    fn the_manifest_round_trips_and_is_checked() {
        let p = plan();
        let m = manifest(&p);
        let text = serde_json::to_string_pretty(&m).unwrap();
        assert_eq!(Manifest::parse(&text).unwrap(), m);
        assert!(
            text.contains("\"disk\": \"disks/lab1-ctlplane-0.qcow2\""),
            "{text}"
        );
        assert!(!m.nodes.iter().any(|n| n.role == Role::Bootstrap));

        let other = text.replace("\"format\": 1", "\"format\": 7");
        let e = Manifest::parse(&other).unwrap_err().to_string();
        assert!(e.contains("bundle format 7 is not 1"), "{e}");

        let mut bad = m.clone();
        bad.files[0].path = "../../etc/passwd".into();
        let e = Manifest::parse(&serde_json::to_string(&bad).unwrap()).unwrap_err();
        assert!(e.to_string().contains("not a plain relative path"), "{e}");

        let mut bad = m.clone();
        bad.files.remove(0);
        let e = Manifest::parse(&serde_json::to_string(&bad).unwrap()).unwrap_err();
        assert!(
            e.to_string().contains("is not among the bundle's files"),
            "{e}"
        );

        let mut bad = m;
        bad.cluster = "../x".into();
        assert!(Manifest::parse(&serde_json::to_string(&bad).unwrap()).is_err());
    }

    #[test]
    fn paths_stay_inside_the_bundle() {
        check_path("disks/a.qcow2").unwrap();
        check_path("state/assets/auth/kubeconfig").unwrap();
        for bad in ["", "/etc/passwd", "a/../b", "../a", "./a", "bundle.json"] {
            assert!(check_path(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_plan_that_moves_a_node_is_refused_by_name() {
        let p = plan();
        let m = manifest(&p);
        check_identity(&m, &p).unwrap();
        let mut moved = p.clone();
        moved
            .nodes
            .iter_mut()
            .find(|n| n.name == "lab1-worker-0")
            .unwrap()
            .mac = "52:54:00:00:00:01".into();
        let n = moved
            .nodes
            .iter_mut()
            .find(|n| n.name == "lab1-ctlplane-1")
            .unwrap();
        n.ip = "10.9.9.9".parse().unwrap();
        let e = check_identity(&m, &moved).unwrap_err().to_string();
        assert!(
            e.contains("lab1-worker-0: MAC is 52:54:00:00:00:01, the bundle's is"),
            "{e}"
        );
        assert!(e.contains("lab1-ctlplane-1: address is 10.9.9.9"), "{e}");
        let mut fewer = p.clone();
        fewer.nodes.retain(|n| n.name != "lab1-worker-0");
        let e = check_identity(&m, &fewer).unwrap_err().to_string();
        assert!(e.contains("node lab1-worker-0 is not planned"), "{e}");
    }

    #[test]
    fn the_restore_plan_puts_each_overlay_on_its_bundled_disk() {
        let p = plan();
        let m = manifest(&p);
        let r = restore_plan(&m, &p).unwrap();
        assert_eq!(r.len(), m.nodes.len());
        let w = r.iter().find(|n| n.node == "lab1-worker-0").unwrap();
        let sha = &m.file(&w.disk).unwrap().sha256;
        assert_eq!(w.base_volume, format!("shiftlab-base-{}.qcow2", &sha[..16]));
        let planned = p.node("lab1-worker-0").unwrap();
        assert_eq!(w.overlay, planned.disks[0].volume);
        // Two nodes with different disks never share a base volume.
        assert_ne!(r[0].base_volume, r[1].base_volume);
    }

    #[test]
    fn the_earliest_certificate_is_found_in_pem_and_kubeconfigs() {
        use base64::Engine;
        let cert = |days: i64| {
            let mut p = rcgen::CertificateParams::new(vec!["x".to_string()]).unwrap();
            p.not_before = rcgen::date_time_ymd(2026, 1, 1);
            p.not_after = p.not_before + std::time::Duration::from_secs(days as u64 * 86400);
            let k = rcgen::KeyPair::generate().unwrap();
            p.self_signed(&k).unwrap().pem()
        };
        let (a, b) = (cert(10), cert(3));
        let kubeconfig = format!(
            "users:\n- name: admin\n  user:\n    client-certificate-data: {}\n",
            base64::engine::general_purpose::STANDARD.encode(&b)
        );
        let jan1 = 1_767_225_600;
        assert_eq!(earliest_not_after([a.as_bytes()]), Some(jan1 + 10 * 86400));
        assert_eq!(
            earliest_not_after([a.as_bytes(), kubeconfig.as_bytes()]),
            Some(jan1 + 3 * 86400)
        );
        assert_eq!(
            earliest_not_after([kubeconfig.as_bytes(), a.as_bytes()]),
            Some(jan1 + 3 * 86400),
            "the earliest, wherever it comes"
        );
        assert_eq!(earliest_not_after([b"no certificate".as_slice()]), None);
    }
}
