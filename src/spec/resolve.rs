//! From raw values to a [`ClusterSpec`]: defaults, then every check of meaning.
//!
//! Reads (never writes) the files the cluster file names — pull secret, SSH keys,
//! trust bundle, manifests directory — so that a bad path is reported before the
//! host is touched.

use std::path::{Path, PathBuf};

use ipnet::Ipv4Net;

use super::diag::Diagnostics;
use super::parse::{RawSize, RawSpec, Src};
use super::types::*;
use crate::addressing;

/// What resolution may look at outside the file itself. Passed in so that tests are
/// independent of the machine they run on.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// Where `~` points.
    pub home: Option<PathBuf>,
    /// The cluster file's directory: relative paths in the file are relative to it.
    pub base_dir: PathBuf,
    /// `LIBVIRT_DEFAULT_URI`, when set.
    pub libvirt_default_uri: Option<String>,
}

impl Env {
    pub fn from_process(cluster_file: &Path) -> Self {
        Env {
            home: std::env::var_os("HOME").map(PathBuf::from),
            base_dir: cluster_file
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            libvirt_default_uri: std::env::var("LIBVIRT_DEFAULT_URI")
                .ok()
                .filter(|s| !s.is_empty()),
        }
    }

    /// Expand `~/` and make relative paths relative to the cluster file.
    pub fn path(&self, p: &str) -> PathBuf {
        if let Some(rest) = p.strip_prefix("~/") {
            if let Some(h) = &self.home {
                return h.join(rest);
            }
        }
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }
}

/// OVN-Kubernetes' internal ranges: a machine network inside them breaks the cluster.
pub const OVN_RANGES: [(&str, &str); 3] = [
    ("100.64.0.0/16", "OVN's join switch"),
    ("100.88.0.0/16", "OVN's transit switch"),
    ("169.254.0.0/17", "OVN's masquerade range"),
];

pub const DEFAULT_CIDR: &str = "192.168.126.0/24";
pub const DEFAULT_DOMAIN: &str = "lab.test";

/// Documented minimums (openshift.md): below them we warn.
fn documented_minimum(role: Role, method: Method) -> (u64, u64, u64) {
    match (role, method) {
        (Role::Ctlplane, Method::Sno) => (8, 16384, 120),
        (Role::Bootstrap, _) | (Role::Ctlplane, _) => (4, 16384, 100),
        (Role::Worker, _) => (2, 8192, 100),
    }
}

fn default_size(role: Role, method: Method, rehearsal: bool) -> NodeSize {
    if rehearsal {
        return NodeSize {
            numcpus: 1,
            memory: 256,
            disk_size: 1,
            extra_disks: vec![],
        };
    }
    let (numcpus, memory, disk) = documented_minimum(role, method);
    NodeSize {
        numcpus: numcpus as u32,
        memory,
        // A little above the minimum: overlays are thin, and etcd likes room.
        disk_size: disk.max(120),
        extra_disks: vec![],
    }
}

/// Upper bounds of the numbers a cluster file may hold (documented in
/// docs/cluster-file.md): far above any lab, low enough that no arithmetic on them
/// overflows (`memory` in KiB, disk sizes in bytes) and every device gets a name.
pub const MAX_NUMCPUS: u64 = 256;
pub const MAX_MEMORY_MIB: u64 = 4 << 20; // 4 TiB
pub const MAX_DISK_GB: u64 = 64 << 10; // 64 TiB
/// Extra disks are vdb, vdc, …: 16 keeps them well inside vdb..vdz.
pub const MAX_EXTRA_DISKS: usize = 16;
/// One host's lab: more workers than this is a typo.
pub const MAX_WORKERS: u64 = 500;

/// Below these, a node cannot boot at all: an error, not a warning.
const BOOT_MIN_MEMORY: u64 = 2048;
const BOOT_MIN_DISK: u64 = 20;
const REHEARSAL_MIN_MEMORY: u64 = 128;

/// An armored public key block, or a binary OpenPGP public-key packet (old or new
/// packet format, tag 6).
fn looks_like_pgp_key(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    if bytes.len() > super::MAX_INPUT_BYTES as usize {
        return false;
    }
    let text = String::from_utf8_lossy(&bytes);
    text.contains("-----BEGIN PGP PUBLIC KEY BLOCK-----")
        || matches!(bytes.first(), Some(b) if *b == 0xc6 || (*b & 0xfc) == 0x98)
}

/// What a cluster name may be, for messages.
pub const CLUSTER_NAME_RULE: &str =
    "use 1 to 32 lowercase letters, digits and '-', starting with a letter";

/// The one rule for cluster names: a DNS label of at most 32 characters that starts
/// with a letter. Everything that takes a cluster name (the cluster file, the CLI,
/// serve's control socket) checks it here; the name also becomes a path component.
pub fn is_cluster_name(s: &str) -> bool {
    is_dns_label(s) && s.len() <= 32 && s.as_bytes()[0].is_ascii_lowercase()
}

pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_domain(s: &str) -> bool {
    s.len() <= 253 && !s.is_empty() && s.split('.').all(is_dns_label)
}

fn valid_name(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn pick<T: Clone>(
    choices: &[(&str, T)],
    v: &Option<Src<String>>,
    default: T,
    d: &mut Diagnostics,
) -> T {
    let Some(s) = v else { return default };
    match choices.iter().find(|(name, _)| *name == s.v) {
        Some((_, t)) => t.clone(),
        None => {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            d.error(
                &s.field,
                format!("{:?} is not one of {}", s.v, names.join(", ")),
            );
            default
        }
    }
}

/// Parse a `version:` value (with kcli's `tag` already folded in).
pub fn parse_version(s: &str) -> Result<Version, String> {
    let valid = "use e.g. 4.18.7, 4.18, stable-4.18, candidate-4.19 or latest";
    let minor_of = |m: &str| -> Result<u32, String> {
        let (maj, min) = m
            .split_once('.')
            .ok_or_else(|| format!("{s:?} is not a version; {valid}"))?;
        let maj: u32 = maj
            .parse()
            .map_err(|_| format!("{s:?} is not a version; {valid}"))?;
        let min: u32 = min
            .parse()
            .map_err(|_| format!("{s:?} is not a version; {valid}"))?;
        if maj != 4 {
            return Err(format!(
                "{s:?}: only OpenShift/OKD 4 is supported (4.14 and later)"
            ));
        }
        if min < 14 {
            return Err(format!(
                "{s:?} is older than 4.14, the oldest release shiftlab supports"
            ));
        }
        Ok(min)
    };
    let channels = [
        ("stable", Channel::Stable),
        ("fast", Channel::Fast),
        ("candidate", Channel::Candidate),
        ("latest", Channel::Latest),
    ];
    for (name, ch) in channels {
        if s == name {
            return Ok(Version::Channel {
                channel: ch,
                minor: None,
            });
        }
        if let Some(rest) = s.strip_prefix(name).and_then(|r| r.strip_prefix('-')) {
            return Ok(Version::Channel {
                channel: ch,
                minor: Some(minor_of(rest)?),
            });
        }
    }
    let (core, suffix) = match s.split_once('-') {
        Some((c, sfx)) => (c, Some(sfx)),
        None => (s, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    match (parts.len(), numeric, suffix) {
        (2, true, None) => Ok(Version::Minor {
            minor: minor_of(core)?,
        }),
        (3, true, sfx)
            if sfx.is_none_or(|x| {
                !x.is_empty()
                    && x.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
            }) =>
        {
            minor_of(&format!("{}.{}", parts[0], parts[1]))?;
            Ok(Version::Exact {
                version: s.to_string(),
            })
        }
        _ => Err(format!("{s:?} is not a version; {valid}")),
    }
}

fn check_pull_secret(field: &str, path: &Path, d: &mut Diagnostics) {
    let text = match super::read_input(path) {
        Ok(t) => t,
        Err(e) => {
            d.error(field, format!("cannot read {}: {e}", path.display()));
            return;
        }
    };
    // Never echo the contents: serde_json's messages carry only line and column.
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) if v.get("auths").is_some_and(|a| a.is_object()) => {}
        Ok(_) => d.error(
            field,
            format!(
                "{} is JSON but has no `auths` object; a pull secret looks like {{\"auths\": {{…}}}}",
                path.display()
            ),
        ),
        Err(e) => d.error(
            field,
            format!("{} is not valid JSON ({e})", path.display()),
        ),
    }
}

fn is_public_key(s: &str) -> bool {
    ["ssh-", "ecdsa-", "sk-"].iter().any(|p| s.starts_with(p))
}

fn resolve_ssh_keys(raw: &Option<Src<Vec<String>>>, env: &Env, d: &mut Diagnostics) -> Vec<SshKey> {
    let mut out = Vec::new();
    match raw {
        Some(list) => {
            for (i, entry) in list.v.iter().enumerate() {
                let field = format!("{}[{i}]", list.field);
                let entry = entry.trim();
                if is_public_key(entry) {
                    out.push(SshKey {
                        source: "literal".into(),
                        key: entry.to_string(),
                    });
                    continue;
                }
                let path = env.path(entry);
                match super::read_input(&path) {
                    Ok(t) if t.contains("PRIVATE KEY") => d.error(
                        field,
                        format!(
                            "{} is a private key; give the public key (usually the .pub file beside it)",
                            path.display()
                        ),
                    ),
                    Ok(t) if is_public_key(t.trim()) => out.push(SshKey {
                        source: entry.to_string(),
                        key: t.trim().to_string(),
                    }),
                    Ok(_) => d.error(
                        field,
                        format!(
                            "{} is not an SSH public key (expected a line starting with ssh-, ecdsa- or sk-)",
                            path.display()
                        ),
                    ),
                    Err(e) => d.error(
                        field,
                        format!("cannot read SSH key {}: {e}", path.display()),
                    ),
                }
            }
        }
        None => {
            // Default: every ~/.ssh/id_*.pub, in name order so the plan is stable.
            let mut found = Vec::new();
            if let Some(home) = &env.home {
                if let Ok(rd) = std::fs::read_dir(home.join(".ssh")) {
                    for e in rd.flatten() {
                        let name = e.file_name().to_string_lossy().to_string();
                        if name.starts_with("id_") && name.ends_with(".pub") {
                            found.push(e.path());
                        }
                    }
                }
            }
            found.sort();
            for p in found {
                if let Ok(t) = super::read_input(&p) {
                    if is_public_key(t.trim()) {
                        out.push(SshKey {
                            source: p.display().to_string(),
                            key: t.trim().to_string(),
                        });
                    }
                }
            }
            if out.is_empty() {
                d.warn(
                    "ssh_keys",
                    "no key given and none found in ~/.ssh/id_*.pub: you will not be able to ssh to the nodes",
                );
            }
        }
    }
    out
}

fn size_for(
    role: Role,
    method: Method,
    rehearsal: bool,
    all: &RawSize,
    own: &RawSize,
    d: &mut Diagnostics,
) -> NodeSize {
    let def = default_size(role, method, rehearsal);
    let numcpus = own.numcpus.as_ref().or(all.numcpus.as_ref());
    let memory = own.memory.as_ref().or(all.memory.as_ref());
    let disk = own.disk_size.as_ref().or(all.disk_size.as_ref());
    let extra = own.extra_disks.as_ref().or(all.extra_disks.as_ref());
    let name = |s: Option<&Src<u64>>, key: &str| {
        s.map(|s| s.field.clone())
            .unwrap_or_else(|| format!("{}.{key}", role.as_str()))
    };
    // A value above its bound is reported and replaced by the default, so that
    // nothing downstream computes with it while the other checks go on.
    let mut bounded = |s: Option<&Src<u64>>, key: &str, max: u64, unit: &str, def: u64| match s {
        Some(s) if s.v > max => {
            d.error(
                name(Some(s), key),
                format!(
                    "{} {unit} is more than shiftlab supports; use at most {max} {unit}",
                    s.v
                ),
            );
            def
        }
        Some(s) => s.v,
        None => def,
    };
    let mut size = NodeSize {
        numcpus: bounded(numcpus, "numcpus", MAX_NUMCPUS, "vCPUs", def.numcpus as u64) as u32,
        memory: bounded(memory, "memory", MAX_MEMORY_MIB, "MiB", def.memory),
        disk_size: bounded(disk, "disk_size", MAX_DISK_GB, "GB", def.disk_size),
        extra_disks: extra.map_or(def.extra_disks.clone(), |s| s.v.clone()),
    };
    if size.extra_disks.len() > MAX_EXTRA_DISKS {
        let f = extra
            .map(|s| s.field.clone())
            .unwrap_or_else(|| format!("{}.extra_disks", role.as_str()));
        d.error(
            f,
            format!(
                "{} extra disks is more than shiftlab supports; use at most {MAX_EXTRA_DISKS}",
                size.extra_disks.len()
            ),
        );
        size.extra_disks.truncate(MAX_EXTRA_DISKS);
    }
    let (min_cpu, min_mem, min_disk) = documented_minimum(role, method);
    if size.numcpus == 0 {
        d.error(
            name(numcpus, "numcpus"),
            "0 vCPUs cannot boot; use 1 or more",
        );
    } else if !rehearsal && (size.numcpus as u64) < min_cpu {
        d.warn(
            name(numcpus, "numcpus"),
            format!(
                "{} vCPUs is below the documented minimum of {min_cpu} for a {}",
                size.numcpus,
                role_label(role, method)
            ),
        );
    }
    let boot_min = if rehearsal {
        REHEARSAL_MIN_MEMORY
    } else {
        BOOT_MIN_MEMORY
    };
    if size.memory < boot_min {
        d.error(
            name(memory, "memory"),
            format!(
                "{} MiB cannot boot {}; use at least {boot_min} MiB{}",
                size.memory,
                if rehearsal {
                    "a stand-in node"
                } else {
                    "CoreOS"
                },
                if rehearsal {
                    ""
                } else {
                    " (documented minimum: see docs/cluster-file.md)"
                }
            ),
        );
    } else if !rehearsal && size.memory < min_mem {
        d.warn(
            name(memory, "memory"),
            format!(
                "{} MiB is below the documented minimum of {min_mem} MiB for a {}; labs often run smaller, but installs may be slow or fail",
                size.memory,
                role_label(role, method)
            ),
        );
    }
    let disk_boot_min = if rehearsal { 1 } else { BOOT_MIN_DISK };
    if size.disk_size < disk_boot_min {
        d.error(
            name(disk, "disk_size"),
            format!(
                "{} GB is too small to hold {}; use at least {disk_boot_min} GB",
                size.disk_size,
                if rehearsal {
                    "the stand-in image"
                } else {
                    "CoreOS"
                }
            ),
        );
    } else if !rehearsal && size.disk_size < min_disk {
        d.warn(
            name(disk, "disk_size"),
            format!(
                "{} GB is below the documented minimum of {min_disk} GB",
                size.disk_size
            ),
        );
    }
    for (i, gb) in size.extra_disks.iter_mut().enumerate() {
        let f = extra
            .map(|s| s.field.clone())
            .unwrap_or_else(|| format!("{}.extra_disks", role.as_str()));
        if *gb == 0 {
            d.error(
                format!("{f}[{i}]"),
                "0 GB is not a disk size; use 1 or more",
            );
        } else if *gb > MAX_DISK_GB {
            d.error(
                format!("{f}[{i}]"),
                format!("{gb} GB is more than shiftlab supports; use at most {MAX_DISK_GB} GB"),
            );
            *gb = 1;
        }
    }
    size
}

fn role_label(role: Role, method: Method) -> &'static str {
    match (role, method) {
        (Role::Ctlplane, Method::Sno) => "single node",
        (Role::Bootstrap, _) => "bootstrap node",
        (Role::Ctlplane, _) => "control plane node",
        (Role::Worker, _) => "worker",
    }
}

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// Resolve and check everything. Errors and warnings go to `d`; the returned spec is
/// only meaningful when `d` holds no errors.
pub fn resolve(raw: RawSpec, env: &Env, d: &mut Diagnostics) -> ClusterSpec {
    let cluster = match &raw.cluster {
        Some(c) => {
            if !is_cluster_name(&c.v) {
                d.error(
                    &c.field,
                    format!(
                        "{:?} is not a valid cluster name: {CLUSTER_NAME_RULE} (it becomes a DNS label and part of every node name)",
                        c.v
                    ),
                );
            }
            c.v.clone()
        }
        None => {
            d.error(
                "cluster",
                "missing: name the cluster, e.g. `cluster: lab1` (a DNS label)",
            );
            "cluster".into()
        }
    };
    let domain = match &raw.domain {
        Some(s) => {
            let v = s.v.trim_end_matches('.').to_string();
            if !is_domain(&v) {
                d.error(
                    &s.field,
                    format!(
                        "{:?} is not a valid DNS domain: use lowercase labels of letters, digits and '-' separated by dots, e.g. lab.example.com",
                        s.v
                    ),
                );
            }
            v
        }
        None => DEFAULT_DOMAIN.to_string(),
    };
    let distribution = pick(
        &[("ocp", Distribution::Ocp), ("okd", Distribution::Okd)],
        &raw.distribution,
        Distribution::Ocp,
        d,
    );

    let version_text = match (&raw.version, &raw.tag) {
        (None, None) => Some(("stable".to_string(), "version".to_string())),
        (Some(v), None) => Some((v.v.clone(), v.field.clone())),
        (None, Some(t)) => Some((tag_version("stable", &t.v), t.field.clone())),
        (Some(v), Some(t)) => {
            if ["stable", "fast", "candidate", "latest"].contains(&v.v.as_str()) {
                Some((tag_version(&v.v, &t.v), t.field.clone()))
            } else {
                d.error(
                    &t.field,
                    format!(
                        "`tag` {:?} and `version` {:?} conflict: with a tag, version must be a channel (stable, fast, candidate, latest)",
                        t.v, v.v
                    ),
                );
                None
            }
        }
    };
    let version = match version_text.map(|(s, f)| (parse_version(&s), f)) {
        Some((Ok(v), _)) => v,
        Some((Err(e), field)) => {
            d.error(field, e);
            Version::Channel {
                channel: Channel::Stable,
                minor: None,
            }
        }
        None => Version::Channel {
            channel: Channel::Stable,
            minor: None,
        },
    };

    let pull_secret = match &raw.pull_secret {
        Some(p) => {
            let path = env.path(&p.v);
            check_pull_secret(&p.field, &path, d);
            Some(path)
        }
        None => {
            if distribution == Distribution::Ocp {
                d.error(
                    "pull_secret",
                    "missing: OCP needs a pull secret file (download it from console.redhat.com/openshift/install/pull-secret); OKD can do without",
                );
            }
            None
        }
    };
    let ssh_keys = resolve_ssh_keys(&raw.ssh_keys, env, d);

    let method = pick(
        &[
            ("upi", Method::Upi),
            ("sno", Method::Sno),
            ("ipi", Method::Ipi),
            ("agent", Method::Agent),
        ],
        &raw.method,
        Method::Upi,
        d,
    );
    let rehearsal = raw.rehearsal.as_ref().is_some_and(|r| r.v);

    let ctlplanes = match &raw.ctlplanes {
        Some(c) => {
            if ![1, 3, 4, 5].contains(&c.v) {
                d.error(
                    &c.field,
                    format!(
                        "{} control planes is not supported; use 1 (single node), 3, 4 or 5",
                        c.v
                    ),
                );
            } else if c.v == 1 && matches!(method, Method::Upi | Method::Ipi) {
                d.error(
                    &c.field,
                    format!(
                        "1 control plane needs method sno or agent (single node); method {method} needs 3, 4 or 5"
                    ),
                );
            } else if c.v != 1 && method == Method::Sno {
                d.error(
                    &c.field,
                    format!("method sno has exactly 1 control plane, not {}", c.v),
                );
            }
            // An unsupported count is reported above; the rest goes on with a
            // supported one.
            if [1, 3, 4, 5].contains(&c.v) {
                c.v as u32
            } else {
                3
            }
        }
        None if method == Method::Sno => 1,
        None => 3,
    };
    let single_node = ctlplanes == 1;
    let workers = match &raw.workers {
        Some(w) => {
            if single_node && w.v > 0 {
                d.error(
                    &w.field,
                    format!(
                        "a single-node cluster (method {method}) has no workers; set workers: 0 or use 3 control planes"
                    ),
                );
            }
            if w.v > MAX_WORKERS {
                d.error(
                    &w.field,
                    format!(
                        "{} workers is more than shiftlab supports on one host; use at most {MAX_WORKERS}",
                        w.v
                    ),
                );
                0
            } else {
                w.v as u32
            }
        }
        None if single_node => 0,
        None => 2,
    };

    let bootstrap = size_for(
        Role::Bootstrap,
        method,
        rehearsal,
        &raw.all,
        &raw.bootstrap,
        d,
    );
    let ctlplane = size_for(
        Role::Ctlplane,
        method,
        rehearsal,
        &raw.all,
        &raw.ctlplane,
        d,
    );
    let worker = size_for(Role::Worker, method, rehearsal, &raw.all, &raw.worker, d);

    let cluster_network = raw
        .cluster_network
        .as_ref()
        .map_or_else(|| "10.128.0.0/14".parse().unwrap(), |s| s.v);
    let service_network = raw
        .service_network
        .as_ref()
        .map_or_else(|| "172.30.0.0/16".parse().unwrap(), |s| s.v);
    let host_prefix = raw.cluster_network_host_prefix.as_ref().map_or(23, |s| s.v);
    if let Some(hp) = &raw.cluster_network_host_prefix {
        if hp.v <= cluster_network.prefix_len() as u64 || hp.v > 28 {
            d.error(
                &hp.field,
                format!(
                    "{} must be longer than the cluster network's /{} and at most 28",
                    hp.v,
                    cluster_network.prefix_len()
                ),
            );
        }
    }
    if overlaps(&cluster_network, &service_network) {
        d.error(
            raw.service_network
                .as_ref()
                .map_or("service_network".into(), |s| s.field.clone()),
            format!("{service_network} overlaps the cluster network {cluster_network}"),
        );
    }
    for (net, field, def) in [
        (&cluster_network, &raw.cluster_network, "cluster_network"),
        (&service_network, &raw.service_network, "service_network"),
    ] {
        for (r, what) in OVN_RANGES {
            let r: Ipv4Net = r.parse().unwrap();
            if overlaps(net, &r) {
                d.error(
                    field.as_ref().map_or(def.into(), |s| s.field.clone()),
                    format!("{net} overlaps {r}, {what}; choose another range"),
                );
            }
        }
    }

    let network = resolve_network(
        &raw,
        &cluster,
        method,
        ctlplanes,
        workers,
        &cluster_network,
        &service_network,
        d,
    );

    let libvirt = LibvirtSpec {
        uri: raw
            .libvirt
            .uri
            .as_ref()
            .map(|s| s.v.clone())
            .or_else(|| env.libvirt_default_uri.clone())
            .unwrap_or_else(|| "qemu:///system".into()),
        pool: match &raw.libvirt.pool {
            Some(p) => {
                if !valid_name(&p.v, 64) {
                    d.error(
                        &p.field,
                        format!(
                            "{:?} is not a valid pool name: letters, digits, '-', '_' and '.'",
                            p.v
                        ),
                    );
                }
                p.v.clone()
            }
            None => "shiftlab".into(),
        },
        pool_path: raw.libvirt.pool_path.as_ref().map_or_else(
            || PathBuf::from("/var/lib/libvirt/images/shiftlab"),
            |p| {
                if !p.v.starts_with('/') {
                    d.error(
                        &p.field,
                        format!("{:?} must be an absolute path on the libvirt host", p.v),
                    );
                }
                PathBuf::from(&p.v)
            },
        ),
        domain_type: pick(
            &[
                ("auto", DomainType::Auto),
                ("kvm", DomainType::Kvm),
                ("qemu", DomainType::Qemu),
            ],
            &raw.libvirt.domain_type,
            DomainType::Auto,
            d,
        ),
        firmware: pick(
            &[("bios", Firmware::Bios), ("uefi", Firmware::Uefi)],
            &raw.libvirt.firmware,
            Firmware::Bios,
            d,
        ),
    };
    if libvirt.uri.trim().is_empty() {
        d.error("libvirt.uri", "empty; use e.g. qemu:///system");
    }

    let network_type = match &raw.network_type {
        Some(s) => {
            match s.v.as_str() {
                "OVNKubernetes" => {}
                "OpenShiftSDN" => {
                    if matches!(&version, Version::Exact { .. } | Version::Minor { .. } | Version::Channel { minor: Some(_), .. } if version_minor(&version).is_some_and(|m| m >= 15))
                    {
                        d.error(
                            &s.field,
                            "OpenShiftSDN was removed in 4.15; use OVNKubernetes",
                        );
                    } else {
                        d.warn(&s.field, "OpenShiftSDN is deprecated and gone from 4.15 on");
                    }
                }
                other => d.error(
                    &s.field,
                    format!("{other:?} is not one of OVNKubernetes, OpenShiftSDN"),
                ),
            }
            s.v.clone()
        }
        None => "OVNKubernetes".into(),
    };

    let proxy = raw.proxy.as_ref().map(|p| {
        for (slot, schemes) in [
            (&p.http_proxy, &["http://"][..]),
            (&p.https_proxy, &["http://", "https://"][..]),
        ] {
            if let Some(s) = slot {
                if !schemes.iter().any(|sch| s.v.starts_with(sch)) {
                    d.error(
                        &s.field,
                        format!(
                            "{:?} must be a URL starting with {}",
                            s.v,
                            schemes.join(" or ")
                        ),
                    );
                }
            }
        }
        ProxySpec {
            http_proxy: p.http_proxy.as_ref().map(|s| s.v.clone()),
            https_proxy: p.https_proxy.as_ref().map(|s| s.v.clone()),
            no_proxy: p.no_proxy.as_ref().map(|s| s.v.clone()),
        }
    });

    let additional_trust_bundle = raw.additional_trust_bundle.as_ref().map(|s| {
        let path = env.path(&s.v);
        match super::read_input(&path) {
            Ok(t) if t.contains("-----BEGIN CERTIFICATE-----") => {}
            Ok(_) => d.error(
                &s.field,
                format!("{} holds no PEM certificate", path.display()),
            ),
            Err(e) => d.error(&s.field, format!("cannot read {}: {e}", path.display())),
        }
        path
    });
    let capabilities = raw.capabilities.as_ref().map(|c| {
        if let Some(b) = &c.baseline_capability_set {
            let ok = b.v == "None"
                || b.v == "vCurrent"
                || b.v
                    .strip_prefix("v4.")
                    .is_some_and(|m| !m.is_empty() && m.bytes().all(|x| x.is_ascii_digit()));
            if !ok {
                d.error(
                    &b.field,
                    format!("{:?} is not one of None, vCurrent, v4.N (e.g. v4.14)", b.v),
                );
            }
        }
        Capabilities {
            baseline_capability_set: c.baseline_capability_set.as_ref().map(|s| s.v.clone()),
            additional_enabled_capabilities: c.additional_enabled_capabilities.clone(),
        }
    });
    let manifests = raw.manifests.as_ref().map(|s| {
        let path = env.path(&s.v);
        if !path.is_dir() {
            d.error(
                &s.field,
                format!("{} is not a directory of manifests", path.display()),
            );
        }
        path
    });

    let openshift_install = raw.openshift_install.as_ref().map(|s| {
        let path = env.path(&s.v);
        let executable = std::fs::metadata(&path)
            .map(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
            .unwrap_or(false);
        if !executable {
            d.error(
                &s.field,
                format!(
                    "{} is not an executable file (the openshift-install binary)",
                    path.display()
                ),
            );
        }
        path
    });

    let bmc = BmcSpec {
        address: raw
            .bmc
            .address
            .as_ref()
            .map_or(addressing::gateway(&network.cidr), |s| s.v),
        port: match &raw.bmc.port {
            Some(p) if p.v == 0 || p.v > 65535 => {
                d.error(&p.field, format!("{} is not a TCP port (1-65535)", p.v));
                8443
            }
            Some(p) => p.v as u16,
            None => 8443,
        },
        username: raw
            .bmc
            .username
            .as_ref()
            .map_or("admin".into(), |s| s.v.clone()),
        password: raw.bmc.password.as_ref().map(|s| s.v.clone()),
        verify_certificate: raw.bmc.verify_certificate.as_ref().is_some_and(|s| s.v),
    };

    if rehearsal && raw.image.is_none() {
        // Not an error: `create infra` can build the stand-in image itself.
    }

    ClusterSpec {
        cluster,
        domain,
        distribution,
        version,
        pull_secret,
        ssh_keys,
        method,
        ctlplanes,
        workers,
        bootstrap,
        ctlplane,
        worker,
        network,
        libvirt,
        image: raw.image.as_ref().map(|s| {
            let path = env.path(&s.v);
            if !path.is_file() {
                d.error(
                    &s.field,
                    format!(
                        "{} is not a file: `image` is the path of a CoreOS qcow2 image (kcli's `image`, a template name, has no meaning here)",
                        path.display()
                    ),
                );
            }
            path
        }),
        rehearsal,
        installation_disk: raw
            .installation_disk
            .as_ref()
            .map_or("/dev/vda".into(), |s| s.v.clone()),
        network_type,
        cluster_network,
        cluster_network_host_prefix: host_prefix.min(32) as u8,
        service_network,
        fips: raw.fips.as_ref().is_some_and(|s| s.v),
        proxy,
        image_digest_sources: raw
            .image_digest_sources
            .iter()
            .map(|(s, m)| ImageDigestSource {
                source: s.clone(),
                mirrors: m.clone(),
            })
            .collect(),
        additional_trust_bundle,
        capabilities,
        manifests,
        openshift_install,
        mirror: raw.mirror.as_ref().map(|s| {
            let v = s.v.trim_end_matches('/').to_string();
            let url = v.starts_with("http://") || v.starts_with("https://");
            if !url && !v.starts_with("file://") && !env.path(&v).is_dir() {
                d.error(
                    &s.field,
                    format!(
                        "{:?} is neither an http(s) URL nor an existing directory",
                        s.v
                    ),
                );
            }
            if v.starts_with("http://") && raw.release_key.is_none() {
                d.warn(
                    &s.field,
                    format!(
                        "{v} is plain HTTP: the downloads are checked against its sha256sum.txt, which comes over the same plain HTTP, so anyone on the path can replace both; use https://, or set release_key to verify the list's signature"
                    ),
                );
            }
            if url || v.starts_with("file://") {
                v
            } else {
                env.path(&v).display().to_string()
            }
        }),
        release_key: raw.release_key.as_ref().map(|s| {
            let path = env.path(&s.v);
            match super::read_input(&path).map(|_| ()).or_else(|e| {
                // A binary key is not text: read it as bytes, still bounded.
                if e.kind() == std::io::ErrorKind::InvalidData {
                    std::fs::read(&path).map(|_| ())
                } else {
                    Err(e)
                }
            }) {
                Ok(()) if looks_like_pgp_key(&path) => {}
                Ok(()) => d.error(
                    &s.field,
                    format!(
                        "{} is not an OpenPGP public key (armored `-----BEGIN PGP PUBLIC KEY BLOCK-----` or binary)",
                        path.display()
                    ),
                ),
                Err(e) => d.error(&s.field, format!("cannot read {}: {e}", path.display())),
            }
            path
        }),
        bmc,
    }
}

fn version_minor(v: &Version) -> Option<u32> {
    match v {
        Version::Exact { version } => version.split('.').nth(1)?.parse().ok(),
        Version::Minor { minor } => Some(*minor),
        Version::Channel { minor, .. } => *minor,
    }
}

fn tag_version(channel: &str, tag: &str) -> String {
    // kcli: `tag: 4.17` picks a minor on a channel; a full `4.17.3` is exact.
    if tag.split('.').count() >= 3 {
        tag.to_string()
    } else {
        format!("{channel}-{tag}")
    }
}

#[allow(clippy::too_many_arguments)]
fn resolve_network(
    raw: &RawSpec,
    cluster: &str,
    method: Method,
    ctlplanes: u32,
    workers: u32,
    cluster_network: &Ipv4Net,
    service_network: &Ipv4Net,
    d: &mut Diagnostics,
) -> NetworkSpec {
    let n = &raw.network;
    let cidr_field = n
        .cidr
        .as_ref()
        .map_or("network.cidr".to_string(), |s| s.field.clone());
    // kcli files carry the VIPs but not the subnet: take the API address's /24 then.
    let mut cidr: Ipv4Net = match (&n.cidr, &n.api_ip) {
        (Some(c), _) => c.v,
        (None, Some(api)) => {
            Ipv4Net::new(api.v, 24).map_or_else(|_| DEFAULT_CIDR.parse().unwrap(), |n| n.trunc())
        }
        (None, None) => DEFAULT_CIDR.parse().unwrap(),
    };
    if cidr.prefix_len() > 27 || cidr.prefix_len() < 8 {
        d.error(
            &cidr_field,
            format!(
                "/{} is not a usable lab network size; use a prefix from /8 to /27 (e.g. /24)",
                cidr.prefix_len()
            ),
        );
        cidr = DEFAULT_CIDR.parse().unwrap();
    }
    let addr = cidr.network();
    if addr.is_loopback() || addr.is_multicast() || addr.is_unspecified() || addr.octets()[0] >= 240
    {
        d.error(
            &cidr_field,
            format!("{cidr} is not a usable unicast network; use a private range such as 192.168.126.0/24"),
        );
    }
    for (r, what) in OVN_RANGES {
        let r: Ipv4Net = r.parse().unwrap();
        if overlaps(&cidr, &r) {
            d.error(
                &cidr_field,
                format!("{cidr} overlaps {r}, {what}; choose another range, e.g. 192.168.126.0/24"),
            );
        }
    }
    for (other, name) in [
        (cluster_network, "cluster_network"),
        (service_network, "service_network"),
    ] {
        if overlaps(&cidr, other) {
            d.error(
                &cidr_field,
                format!("{cidr} overlaps {name} {other}; the three networks must be disjoint"),
            );
        }
    }

    let mode = pick(
        &[("nat", NetworkMode::Nat), ("bridge", NetworkMode::Bridge)],
        &n.mode,
        NetworkMode::Nat,
        d,
    );
    let name = match &n.name {
        Some(s) => {
            if !valid_name(&s.v, 64) {
                d.error(
                    &s.field,
                    format!(
                        "{:?} is not a valid libvirt network name: up to 64 letters, digits, '-', '_' and '.'",
                        s.v
                    ),
                );
            }
            s.v.clone()
        }
        None => format!("shiftlab-{cluster}"),
    };
    let bridge = match (&n.bridge, mode) {
        (Some(b), _) => {
            if !valid_name(&b.v, 15) {
                d.error(
                    &b.field,
                    format!(
                        "{:?} is not a valid bridge name: up to 15 letters, digits, '-', '_' and '.'",
                        b.v
                    ),
                );
            }
            b.v.clone()
        }
        (None, NetworkMode::Bridge) => {
            d.error(
                "network.bridge",
                "missing: mode bridge needs the name of an existing host bridge, e.g. br0",
            );
            String::new()
        }
        (None, NetworkMode::Nat) => addressing::bridge_name(cluster),
    };

    let gateway = addressing::gateway(&cidr);
    let single_node = ctlplanes == 1;
    let bootstrap = method == Method::Upi;
    let node_ips = addressing::node_range(&cidr, bootstrap, ctlplanes, workers);
    let last_node = node_ips.1;
    let (def_start, def_end) = addressing::default_dhcp(&cidr);
    let dhcp_start = n.dhcp_start.as_ref().map_or(def_start, |s| s.v);
    let dhcp_end = n.dhcp_end.as_ref().map_or(def_end, |s| s.v);
    let dhcp_field = n
        .dhcp_start
        .as_ref()
        .map_or("network.dhcp_start".to_string(), |s| s.field.clone());
    for (ip, src, which) in [
        (dhcp_start, &n.dhcp_start, "dhcp_start"),
        (dhcp_end, &n.dhcp_end, "dhcp_end"),
    ] {
        if src.is_some() && !addressing::is_host(&cidr, ip) {
            d.error(
                format!("network.{which}"),
                format!(
                    "{ip} is not a host address of {cidr} (valid: {} to {})",
                    addressing::first_host(&cidr),
                    addressing::last_host(&cidr)
                ),
            );
        }
    }
    if dhcp_start > dhcp_end {
        d.error(
            &dhcp_field,
            format!("the DHCP range {dhcp_start}-{dhcp_end} is empty: dhcp_start must not be after dhcp_end"),
        );
    }
    if dhcp_start <= gateway && gateway <= dhcp_end {
        d.error(
            &dhcp_field,
            format!("the DHCP range {dhcp_start}-{dhcp_end} contains the gateway {gateway}"),
        );
    }

    // Nodes live at fixed offsets so that adding workers never renumbers anyone.
    let too_many = !addressing::is_host(&cidr, last_node) || last_node < node_ips.0;
    if too_many {
        d.error(
            n.cidr.as_ref().map_or("workers".to_string(), |_| cidr_field.clone()),
            format!(
                "{} nodes do not fit in {cidr}: node addresses start at {} and the subnet ends at {}; use fewer workers or a larger network (e.g. a /24)",
                ctlplanes + workers + u32::from(bootstrap),
                node_ips.0,
                addressing::last_host(&cidr)
            ),
        );
    } else if dhcp_start <= last_node && node_ips.0 <= dhcp_end {
        d.error(
            if n.dhcp_start.is_some() || n.dhcp_end.is_some() {
                dhcp_field.clone()
            } else {
                "workers".to_string()
            },
            format!(
                "node addresses {} to {last_node} overlap the DHCP range {dhcp_start}-{dhcp_end}; use fewer workers, a larger network, or move the DHCP range",
                node_ips.0
            ),
        );
    }

    let ctlplane0 = addressing::node_ip(&cidr, addressing::CTLPLANE_OFFSET, 0);
    let (def_api, def_ingress) = if single_node {
        (ctlplane0, ctlplane0)
    } else if method == Method::Ipi {
        (
            addressing::offset(&cidr, addressing::API_OFFSET),
            addressing::offset(&cidr, addressing::INGRESS_OFFSET),
        )
    } else {
        let lb = addressing::offset(&cidr, addressing::API_OFFSET);
        (lb, lb)
    };
    let api_ip = n.api_ip.as_ref().map_or(def_api, |s| s.v);
    let ingress_ip = n.ingress_ip.as_ref().map_or(def_ingress, |s| s.v);
    for (ip, src, which) in [
        (api_ip, &n.api_ip, "api_ip"),
        (ingress_ip, &n.ingress_ip, "ingress_ip"),
    ] {
        let Some(src) = src else { continue };
        let field = &src.field;
        if single_node {
            if ip != ctlplane0 {
                d.error(
                    field,
                    format!(
                        "{ip}: a single-node cluster has no load balancer or VIP; {which} is the node's own address {ctlplane0} (leave it out)"
                    ),
                );
            }
            continue;
        }
        if !addressing::is_host(&cidr, ip) {
            d.error(
                field,
                format!(
                    "{ip} is outside the cluster network {cidr}; use an address from {} to {} outside the DHCP range",
                    addressing::first_host(&cidr),
                    addressing::last_host(&cidr)
                ),
            );
        } else if ip == gateway {
            d.error(
                field,
                format!(
                    "{ip} is the network's gateway (the host); choose another address, e.g. {}",
                    addressing::offset(&cidr, addressing::API_OFFSET)
                ),
            );
        } else if dhcp_start <= ip && ip <= dhcp_end {
            d.error(
                field,
                format!(
                    "{ip} is inside the DHCP range {dhcp_start}-{dhcp_end}; a lease could take it. Choose an address outside it, e.g. {}",
                    addressing::offset(&cidr, addressing::API_OFFSET)
                ),
            );
        } else if !too_many && node_ips.0 <= ip && ip <= last_node {
            d.error(
                field,
                format!(
                    "{ip} is a node's address (nodes use {} to {last_node}); choose e.g. {}",
                    node_ips.0,
                    addressing::offset(&cidr, addressing::API_OFFSET)
                ),
            );
        }
    }
    if method == Method::Ipi && api_ip == ingress_ip {
        d.error(
            n.ingress_ip
                .as_ref()
                .map_or("network.ingress_ip".into(), |s| s.field.clone()),
            format!("{ingress_ip} is also the API VIP; bare-metal IPI needs two different VIPs"),
        );
    }

    let mac_prefix = match &n.mac_prefix {
        Some(s) => match parse_mac_prefix(&s.v) {
            Ok(p) => p,
            Err(e) => {
                d.error(&s.field, e);
                [0x52, 0x54, 0x00]
            }
        },
        None => [0x52, 0x54, 0x00],
    };

    NetworkSpec {
        name,
        mode,
        bridge,
        cidr,
        api_ip,
        ingress_ip,
        dhcp_start,
        dhcp_end,
        mac_prefix,
    }
}

fn parse_mac_prefix(s: &str) -> Result<[u8; 3], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bytes: Vec<u8> = parts
        .iter()
        .filter(|p| p.len() == 2)
        .filter_map(|p| u8::from_str_radix(p, 16).ok())
        .collect();
    if parts.len() != 3 || bytes.len() != 3 {
        return Err(format!(
            "{s:?} is not a MAC prefix: use three hex octets such as 52:54:00"
        ));
    }
    if bytes[0] & 1 == 1 {
        return Err(format!(
            "{s:?} is a multicast prefix (lowest bit of the first octet set); use e.g. 52:54:00"
        ));
    }
    Ok([bytes[0], bytes[1], bytes[2]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("4.18.7").unwrap(),
            Version::Exact {
                version: "4.18.7".into()
            }
        );
        assert_eq!(parse_version("4.18").unwrap(), Version::Minor { minor: 18 });
        assert_eq!(
            parse_version("candidate-4.19").unwrap(),
            Version::Channel {
                channel: Channel::Candidate,
                minor: Some(19)
            }
        );
        assert!(parse_version("4.17.0-okd-scos.0").is_ok());
        assert!(parse_version("4.12")
            .unwrap_err()
            .contains("older than 4.14"));
        assert!(parse_version("banana").is_err());
        assert!(parse_version("stable-5.1").is_err());
        assert!(parse_version("4.18.x").is_err());
    }

    #[test]
    fn mac_prefixes() {
        assert_eq!(parse_mac_prefix("52:54:00").unwrap(), [0x52, 0x54, 0]);
        assert!(parse_mac_prefix("01:00:5e").is_err());
        assert!(parse_mac_prefix("52:54").is_err());
        assert!(parse_mac_prefix("52:54:zz").is_err());
    }

    #[test]
    fn a_plain_http_mirror_is_warned_about_unless_signatures_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.asc");
        std::fs::write(
            &key,
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n-----END PGP PUBLIC KEY BLOCK-----\n",
        )
        .unwrap();
        let env = Env {
            base_dir: dir.path().into(),
            ..Env::default()
        };
        let load = |extra: &str| {
            crate::spec::from_str(
                &format!(
                    "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n{extra}"
                ),
                "t.yaml",
                &env,
            )
            .unwrap()
            .warnings
        };
        let w = load("mirror: http://mirror.lab/pub\n");
        assert!(
            w.iter()
                .any(|d| d.field == "mirror" && d.message.contains("plain HTTP")),
            "{w:?}"
        );
        assert!(!load("mirror: https://mirror.lab/pub\n")
            .iter()
            .any(|d| d.field == "mirror"));
        assert!(
            !load("mirror: http://mirror.lab/pub\nrelease_key: key.asc\n")
                .iter()
                .any(|d| d.field == "mirror")
        );
        // A release_key that is not a key is an error naming the field.
        std::fs::write(dir.path().join("not-a-key"), "hello").unwrap();
        let e = crate::spec::from_str(
            "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\nrelease_key: not-a-key\n",
            "t.yaml",
            &env,
        )
        .unwrap_err();
        assert!(
            e.errors.iter().any(
                |d| d.field == "release_key" && d.message.contains("not an OpenPGP public key")
            ),
            "{e:?}"
        );
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns_label("lab1"));
        assert!(!is_dns_label("Lab1"));
        assert!(!is_dns_label("-lab"));
        assert!(is_domain("lab.example.com"));
        assert!(!is_domain("lab..com"));
    }
}
