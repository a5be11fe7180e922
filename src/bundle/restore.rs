//! `shiftlab bundle restore`: a fresh copy of a bundled lab. Each bundled disk
//! is imported once into the pool as a base volume named by its sha256 (with a
//! completion marker, as base images are) and shared by every restore; each
//! node gets a thin overlay on it, so a restore writes almost nothing and its
//! writes stay its own. The cluster's state comes back from the bundle (plan,
//! install state, assets, LB and BMC state) and the backend defines network
//! and domains from the bundled plan: the same names, MACs, addresses, DNS
//! records, load balancer and BMC. `--start` then goes through `start`.
//!
//! An interrupted restore (kill -9) is resumed by running it again: its
//! `restored-from.json` is written first, `complete: false` until the end.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use virt::storage_pool::StoragePool;
use virt::storage_vol::StorageVol;

use super::manifest::{self, Manifest, NodeRestore};
use crate::cluster::power::{self, PowerRecord, StartRequest};
use crate::libvirt::xml::write as xml;
use crate::libvirt::{ledger, Host};
use crate::plan::{Plan, Start};
use crate::progress::Sink;
use crate::state::{ClusterDir, StateDir};

/// `restored-from.json`: which bundle a cluster came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The bundle's directory, as given.
    pub bundle: String,
    /// sha256 of its `bundle.json`: the bundle's identity.
    pub manifest_sha256: String,
    /// When the bundled cluster's certificates were made.
    pub installed_at: Option<u64>,
    pub restored_at: u64,
    /// False until every step of the restore is done.
    pub complete: bool,
}

impl Origin {
    /// `status`'s line.
    pub fn line(&self) -> String {
        let installed = self
            .installed_at
            .and_then(|t| k8s_openapi::jiff::Timestamp::from_second(t as i64).ok())
            .map_or("no install recorded".to_string(), |t| {
                format!("installed {t}")
            });
        let unfinished = if self.complete {
            ""
        } else {
            "; the restore did not finish: run it again"
        };
        format!(
            "restored from bundle {} ({installed}){unfinished}",
            self.bundle
        )
    }
}

/// The bundle a cluster was restored from, when it was.
pub fn origin(dir: &ClusterDir) -> Result<Option<Origin>> {
    crate::files::read_json(&dir.restored_from())
}

/// What `bundle restore` did.
#[derive(Debug, Serialize)]
pub struct Restored {
    pub cluster: String,
    pub bundle: PathBuf,
    pub nodes: Vec<String>,
    /// Disks imported into the pool by this restore.
    pub imported: Vec<String>,
    /// Disks an earlier restore had imported already.
    pub shared: Vec<String>,
    pub start: Option<PowerRecord>,
}

impl Restored {
    pub fn table(&self) -> String {
        let mut s = format!(
            "restored {} from {}: {}\n",
            self.cluster,
            self.bundle.display(),
            self.nodes.join(", ")
        );
        if !self.imported.is_empty() {
            s.push_str(&format!("imported {}\n", self.imported.join(", ")));
        }
        if !self.shared.is_empty() {
            s.push_str(&format!(
                "already in the pool: {}\n",
                self.shared.join(", ")
            ));
        }
        match &self.start {
            Some(r) => s.push_str(&r.table()),
            None => s.push_str(&format!(
                "{} is defined and off: shiftlab start {} brings it up\n",
                self.cluster, self.cluster
            )),
        }
        s
    }
}

/// Why the bundled cluster cannot be restored next to what exists, if it
/// cannot: `subnets` are the bundle's (both families in a dual-stack lab),
/// `existing` is every cluster or libvirt network there is, by name, with its
/// subnets. Pure.
pub fn conflict(
    cluster: &str,
    subnets: &[IpNet],
    existing: &[(String, Vec<IpNet>)],
) -> Option<String> {
    for (name, nets) in existing {
        if name == cluster {
            return Some(format!(
                "a cluster named {cluster} exists: destroy it first (shiftlab destroy cluster {cluster}); \
a bundle's copies share its identity, so one of them lives on a host at a time"
            ));
        }
        let overlap = subnets.iter().find_map(|cidr| {
            nets.iter()
                .find(|n| n.contains(&cidr.network()) || cidr.contains(&n.network()))
                .map(|n| (n, cidr))
        });
        if let Some((n, cidr)) = overlap {
            return Some(format!(
                "{name} uses {n}, which overlaps the bundle's subnet {cidr}: destroy {name} first \
(the restored nodes keep their bundled addresses)"
            ));
        }
    }
    None
}

/// `bundle restore PATH`.
pub fn restore(
    state: &StateDir,
    path: &Path,
    connect: Option<&str>,
    start: Option<&StartRequest>,
    progress: &Sink,
) -> Result<Restored> {
    let (m, text) = super::store::read(path)?;
    let manifest_sha256 = hex::encode(Sha256::digest(text.as_bytes()));
    let plan_text = verified(path, &m, "state/plan.json")?;
    let plan = crate::state::plan_from_json(&String::from_utf8_lossy(&plan_text))
        .context("reading the bundle's plan")?;
    crate::kubevirt::refuse_libvirt_only(&plan, "bundle restore", "")?;
    let nodes = manifest::restore_plan(&m, &plan)?;
    let name = crate::state::ClusterName::parse(&m.cluster)?;
    let dir = state.cluster(name.as_str());
    let uri = crate::libvirt::uri(connect.or(Some(plan.libvirt.uri.as_str())));
    let host = Host::open(&uri)?;
    let resuming =
        origin(&dir)?.is_some_and(|o| o.manifest_sha256 == manifest_sha256 && !o.complete);
    let existing = existing(state, &host, if resuming { Some(&plan) } else { None })?;
    if let Some(why) = conflict(&m.cluster, &plan.network.subnets(), &existing) {
        bail!("not restoring {}: {why}", m.cluster);
    }
    let lock = dir.lock()?;
    let mut o = Origin {
        bundle: path
            .canonicalize()
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string(),
        manifest_sha256,
        installed_at: m.installed_at,
        restored_at: power::now(),
        complete: false,
    };
    crate::files::write_json(&dir.restored_from(), &o)?;
    // The cluster's state, as it was bundled (secrets among it: 0600).
    for f in m.files.iter().filter(|f| f.path.starts_with("state/")) {
        let rel = &f.path["state/".len()..];
        manifest::check_path(rel)?;
        let bytes = verified(path, &m, &f.path)?;
        let to = dir.path().join(rel);
        if let Some(d) = to.parent() {
            std::fs::create_dir_all(d)?;
        }
        crate::files::write_private(&to, &bytes)?;
    }
    // A lab restored stopped: no node starts until `start` says.
    let mut defined = plan.clone();
    defined
        .nodes
        .retain(|n| m.nodes.iter().any(|b| b.name == n.name));
    for n in &mut defined.nodes {
        n.start = Start::Bmc;
    }
    let mut report = crate::libvirt::apply::Report::default();
    let host_lock = state.lock_host()?;
    let pool = crate::libvirt::apply::ensure_pool(&host, &plan, state, &mut report)?;
    let mut l = ledger::load(&dir)?.unwrap_or(ledger::Ledger {
        format: ledger::LEDGER_FORMAT,
        uri: host.uri.clone(),
        pool: plan.libvirt.pool.clone(),
        ..ledger::Ledger::default()
    });
    let (mut imported, mut shared) = (Vec::new(), Vec::new());
    for n in &nodes {
        let file = path.join(&n.disk);
        match import_disk(&host, &pool, &file, n, &mut l, (&dir, state))? {
            true => imported.push(n.base_volume.clone()),
            false => shared.push(n.base_volume.clone()),
        }
    }
    drop(host_lock);
    for n in &nodes {
        overlay(&pool, n, &mut l, &dir)?;
    }
    let mut ignition = std::collections::BTreeMap::new();
    for node in defined.nodes.iter().filter(|n| n.ignition_volume.is_some()) {
        let rel = format!("ignition/{}.ign", node.name);
        if m.file(&rel).is_some() {
            ignition.insert(node.name.clone(), verified(path, &m, &rel)?);
        }
    }
    let http = plan
        .http_address()
        .map(|a| std::net::SocketAddr::new(a, crate::plan::DEFAULT_HTTP_PORT));
    let publish = |f: &str, bytes: &[u8]| crate::serve::http::publish_private(&dir, f, bytes);
    let say = |line: &str| progress.say(line);
    // The backend's preflight wants the image fw_cfg nodes sit on: a bundled
    // disk, which its import found by content above (nothing is imported twice).
    let first_disk = path.join(&nodes[0].disk);
    let inputs = crate::backend::Inputs {
        state,
        base_image: Some(&first_disk),
        installer: None,
        iso: None,
        pull_secret: None,
        ignition: &ignition,
        http,
        start_all: false,
        publish_private: &publish,
        say: &say,
    };
    let backend = crate::backend::libvirt::Libvirt::at(&host.uri);
    let r = crate::backend::Backend::apply(&backend, &defined, &dir, &inputs)
        .with_context(|| format!("defining {}'s network and nodes", m.cluster))?;
    if !r.drift.is_empty() {
        bail!(
            "{} differs from its bundle: {}",
            m.cluster,
            r.drift.join("; ")
        );
    }
    o.complete = true;
    crate::files::write_json(&dir.restored_from(), &o)?;
    drop(lock);
    let start = match start {
        Some(req) => Some(power::start_cluster(
            state,
            name.as_str(),
            connect,
            req,
            progress,
        )?),
        None => None,
    };
    Ok(Restored {
        cluster: m.cluster.clone(),
        bundle: path.to_path_buf(),
        nodes: nodes.iter().map(|n| n.node.clone()).collect(),
        imported,
        shared,
        start,
    })
}

/// `start`'s request for a restored cluster: the kubeconfig given, else its
/// own (restored with its assets); the API asked every 10 s.
pub fn start_request(kubeconfig: Option<PathBuf>, timeout: std::time::Duration) -> StartRequest {
    StartRequest {
        kubeconfig,
        no_api: false,
        timeout,
        interval: std::time::Duration::from_secs(10),
    }
}

/// Where a cluster file's plan leaves the bundled cluster's topology or
/// identity (cluster, domain, subnet, each node's name, role, MAC and
/// address), each as the field, the file's value and the bundle's. Pure.
pub fn differences(file: &Plan, bundled: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    let mut same = |field: String, f: String, b: String| {
        if f != b {
            out.push(format!("{field}: the file's {f}, the bundle's {b}"));
        }
    };
    same(
        "cluster".into(),
        file.cluster.clone(),
        bundled.cluster.clone(),
    );
    same("domain".into(), file.domain.clone(), bundled.domain.clone());
    let cidr = |p: &Plan| {
        let nets: Vec<String> = p.network.subnets().iter().map(|n| n.to_string()).collect();
        nets.join(", ")
    };
    same("network.cidr".into(), cidr(file), cidr(bundled));
    for b in &bundled.nodes {
        let Some(f) = file.node(&b.name) else {
            let node = format!("node {}", b.name);
            same(node, "no such node".into(), b.role.as_str().into());
            continue;
        };
        same(
            format!("{}.role", b.name),
            f.role.as_str().into(),
            b.role.as_str().into(),
        );
        same(format!("{}.mac", b.name), f.mac.clone(), b.mac.clone());
        same(format!("{}.ip", b.name), f.ip.to_string(), b.ip.to_string());
    }
    for f in file
        .nodes
        .iter()
        .filter(|f| bundled.node(&f.name).is_none())
    {
        let node = format!("node {}", f.name);
        same(node, f.role.as_str().into(), "no such node".into());
    }
    out
}

/// `create cluster -f FILE --from-bundle PATH`: the file (its plan here) must
/// plan the bundle's topology and identity, each difference named and
/// nothing done otherwise; then the bundle is restored and started.
pub fn from_file(
    state: &StateDir,
    file: &Plan,
    path: &Path,
    start: &StartRequest,
    progress: &Sink,
) -> Result<Restored> {
    let (m, _) = super::store::read(path)?;
    let text = verified(path, &m, "state/plan.json")?;
    let bundled = crate::state::plan_from_json(&String::from_utf8_lossy(&text))
        .context("reading the bundle's plan")?;
    let d = differences(file, &bundled);
    if !d.is_empty() {
        bail!(
            "not restoring {}: the cluster file does not plan the bundle's cluster:\n  - {}",
            path.display(),
            d.join("\n  - ")
        );
    }
    restore(state, path, None, Some(start), progress)
}

/// A bundle's file, read and checked against its manifest's sha256.
fn verified(bundle: &Path, m: &Manifest, rel: &str) -> Result<Vec<u8>> {
    let f = m
        .file(rel)
        .with_context(|| format!("the bundle has no {rel}"))?;
    let bytes =
        std::fs::read(bundle.join(rel)).with_context(|| format!("reading {rel} of the bundle"))?;
    let got = hex::encode(Sha256::digest(&bytes));
    if !got.eq_ignore_ascii_case(&f.sha256) {
        bail!(
            "{rel}: sha256 {got}, the bundle says {}: the bundle is damaged",
            f.sha256
        );
    }
    Ok(bytes)
}

/// The clusters of the state directory and the libvirt networks, with their
/// subnets; `own`: a resumed restore's plan, whose name and network are its own.
fn existing(
    state: &StateDir,
    host: &Host,
    own: Option<&Plan>,
) -> Result<Vec<(String, Vec<IpNet>)>> {
    let mut out = Vec::new();
    for d in state.cluster_dirs()? {
        if own.is_some_and(|p| p.cluster == d.name()) {
            continue;
        }
        let nets = d
            .read_plan()
            .map(|p| p.network.subnets())
            .unwrap_or_default();
        out.push((d.name().to_string(), nets));
    }
    for n in crate::doctor::facts::libvirt_networks(host).context("listing libvirt networks")? {
        if own.is_some_and(|p| p.network.name == n.name) {
            continue;
        }
        out.push((format!("libvirt network {}", n.name), n.subnets));
    }
    Ok(out)
}

/// Import one bundled disk as its base volume, unless a complete one with its
/// digest is in the pool; returns whether it was imported. Recorded (cluster
/// ledger, host record) before it is made, as base images are.
fn import_disk(
    host: &Host,
    pool: &StoragePool,
    file: &Path,
    n: &NodeRestore,
    l: &mut ledger::Ledger,
    (dir, state): (&ClusterDir, &StateDir),
) -> Result<bool> {
    let name = &n.base_volume;
    if !l.base_volumes.contains(name) {
        l.base_volumes.push(name.clone());
        ledger::save(dir, l)?;
    }
    let mut rec = ledger::load_host(state)?;
    let key = (host.uri.clone(), l.pool.clone(), name.clone());
    if !rec.base_images.contains(&key) {
        rec.base_images.push(key);
        ledger::save_host(state, &rec)?;
    }
    let marker_name = crate::libvirt::apply::base_marker_name(name);
    let marker = Host::volume(pool, &marker_name)?;
    let recorded = marker.as_ref().map(|v| {
        String::from_utf8_lossy(&host.download(v).unwrap_or_default())
            .trim()
            .to_string()
    });
    if let Some(v) = Host::volume(pool, name)? {
        match recorded.as_deref() {
            Some(d) if d == n.sha256 => return Ok(false),
            Some(d) => bail!(
                "volume {name} holds {d}, not the bundle's {}: remove it (shiftlab destroy --purge-images) and restore again",
                n.sha256
            ),
            None => {
                tracing::warn!(volume = %name, "removing a partial import");
                v.delete(0).context("removing a partial import")?;
            }
        }
    }
    if let Some(stale) = marker {
        stale.delete(0).context("removing a stale marker")?;
    }
    let virtual_size = crate::libvirt::apply::qcow2_virtual_size(file)?;
    let len = std::fs::metadata(file)?.len();
    let vol = StorageVol::create_xml(pool, &xml::qcow2_volume_xml(name, virtual_size, None), 0)
        .with_context(|| format!("creating volume {name}"))?;
    let mut src =
        std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
    let digest = match crate::libvirt::import::write_volume(host, pool, &vol, &mut src, len) {
        Ok((d, _)) => d,
        Err(e) => {
            let _ = vol.delete(0);
            return Err(e).with_context(|| format!("importing {}", file.display()));
        }
    };
    if digest != n.sha256 {
        let _ = vol.delete(0);
        bail!(
            "{}: sha256 {digest}, the bundle says {}: the bundle is damaged (shiftlab bundle verify)",
            n.disk,
            n.sha256
        );
    }
    let marker = StorageVol::create_xml(pool, &xml::raw_volume_xml(&marker_name, 64), 0)
        .with_context(|| format!("creating volume {marker_name}"))?;
    if let Err(e) = host.upload(&marker, digest.as_bytes(), 64) {
        let _ = marker.delete(0);
        let _ = vol.delete(0);
        return Err(e);
    }
    Ok(true)
}

/// The node's root disk: a thin overlay on its imported disk (recorded first).
fn overlay(
    pool: &StoragePool,
    n: &NodeRestore,
    l: &mut ledger::Ledger,
    dir: &ClusterDir,
) -> Result<()> {
    if l.add_volumes([n.overlay.as_str()]) {
        ledger::save(dir, l)?;
    }
    if Host::volume(pool, &n.overlay)?.is_some() {
        return Ok(());
    }
    let base = Host::volume(pool, &n.base_volume)?
        .with_context(|| format!("volume {} vanished", n.base_volume))?;
    let size = base.info()?.capacity.max(n.root_gb << 30);
    StorageVol::create_xml(
        pool,
        &xml::qcow2_volume_xml(&n.overlay, size, Some(&base.path()?)),
        0,
    )
    .with_context(|| format!("creating volume {}", n.overlay))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_next_to_its_name_or_subnet_is_refused_with_what_to_do() {
        let cidr: Vec<IpNet> = vec!["192.168.171.0/24".parse().unwrap()];
        let e = conflict("lab", &cidr, &[("lab".into(), vec![])]).unwrap();
        assert!(e.contains("shiftlab destroy cluster lab"), "{e}");
        let other = vec![("other".to_string(), vec!["192.168.0.0/16".parse().unwrap()])];
        let e = conflict("lab", &cidr, &other).unwrap();
        assert!(e.contains("other uses 192.168.0.0/16"), "{e}");
        let apart = vec![(
            "other".to_string(),
            vec!["192.168.172.0/24".parse().unwrap()],
        )];
        assert_eq!(conflict("lab", &cidr, &apart), None);
    }

    /// A dual-stack bundle's IPv6 subnet is checked as its IPv4 one is; the
    /// families never overlap each other.
    #[test]
    fn a_dual_stack_restore_checks_its_ipv6_subnet_too() {
        let lab: Vec<IpNet> = vec![
            "192.168.171.0/24".parse().unwrap(),
            "fd00:171::/64".parse().unwrap(),
        ];
        let other = vec![(
            "libvirt network other".to_string(),
            vec![
                "192.168.172.0/24".parse().unwrap(),
                "fd00:171::/48".parse().unwrap(),
            ],
        )];
        let e = conflict("lab", &lab, &other).unwrap();
        assert!(
            e.contains("libvirt network other uses fd00:171::/48, which overlaps the bundle's subnet fd00:171::/64"),
            "{e}"
        );
        let v4_only = vec![(
            "other".to_string(),
            vec!["192.168.172.0/24".parse().unwrap()],
        )];
        assert_eq!(conflict("lab", &lab, &v4_only), None);
    }

    #[test]
    fn status_says_where_a_cluster_came_from() {
        let mut o = Origin {
            bundle: "/b/lab".into(),
            manifest_sha256: "0".repeat(64),
            installed_at: Some(1_767_225_600),
            restored_at: 1_767_300_000,
            complete: true,
        };
        assert_eq!(
            o.line(),
            "restored from bundle /b/lab (installed 2026-01-01T00:00:00Z)"
        );
        o.complete = false;
        assert!(o.line().ends_with("run it again"), "{}", o.line());
    }

    /// A plan of `extra` over cluster lab1, domain example.com.
    fn plan(extra: &str) -> Plan {
        let mut yaml = String::from(extra);
        for (key, default) in [("cluster", "lab1"), ("domain", "example.com")] {
            if !extra.contains(&format!("{key}:")) {
                yaml.push_str(&format!("{key}: {default}\n"));
            }
        }
        crate::plan::from_yaml(&format!(
            "{yaml}distribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\n"
        ))
    }

    #[test]
    fn a_file_planning_the_bundles_cluster_has_no_difference() {
        let bundled = plan("workers: 2\n");
        assert_eq!(
            differences(&plan("workers: 2\n"), &bundled),
            Vec::<String>::new()
        );
    }

    #[test]
    fn each_difference_names_the_field_the_files_value_and_the_bundles() {
        let bundled = plan("workers: 1\n");
        let mut file = plan("workers: 2\ndomain: other.test\nnetwork: {cidr: 192.168.177.0/24}\n");
        let w0 = file
            .nodes
            .iter_mut()
            .find(|n| n.name == "lab1-worker-0")
            .unwrap();
        w0.mac = "52:54:00:aa:bb:cc".into();
        let b0 = bundled.node("lab1-worker-0").unwrap();
        let d = differences(&file, &bundled);
        let want = [
            "domain: the file's other.test, the bundle's example.com".to_string(),
            format!(
                "network.cidr: the file's 192.168.177.0/24, the bundle's {}",
                bundled.network.host_cidr()
            ),
            format!(
                "lab1-worker-0.mac: the file's 52:54:00:aa:bb:cc, the bundle's {}",
                b0.mac
            ),
            "node lab1-worker-1: the file's worker, the bundle's no such node".to_string(),
        ];
        for w in &want {
            assert!(d.contains(w), "{w} not in {d:#?}");
        }
        // The subnet moves every address: each named as the node's ip.
        let ip = "lab1-ctlplane-0.ip: the file's 192.168.177.";
        assert!(d.iter().any(|l| l.starts_with(ip)), "{d:#?}");
        let other = plan("cluster: lab2\n");
        let d = differences(&other, &plan(""));
        assert!(
            d.contains(&"cluster: the file's lab2, the bundle's lab1".to_string()),
            "{d:#?}"
        );
        assert!(
            d.iter().any(|l| l.starts_with(
                "node lab1-ctlplane-0: the file's no such node, the bundle's ctlplane"
            )),
            "{d:#?}"
        );
    }
}
