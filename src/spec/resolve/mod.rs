//! From raw values to a [`ClusterSpec`]: defaults, then every check of meaning.
//!
//! One function per section of the cluster file, each in its own file, called in
//! order by [`resolve`]; a later section gets what it needs of an earlier one as a
//! typed value. A new section (a method's own settings, a `backend:`) is one more
//! file and one more call here.
//!
//! Reads (never writes) the files the cluster file names — pull secret, SSH keys,
//! trust bundle, manifests directory, image, release key — so that a bad path is
//! reported before the host is touched.

mod bmc;
mod capabilities;
mod credentials;
mod fips;
mod hardware;
mod identity;
mod install;
mod ipv6;
mod kubevirt;
mod libvirt;
mod monitoring;
mod network;
mod release;
mod sizes;
mod storage;
mod time;
mod users;
pub use capabilities::enabled as capability_enabled;
pub use sizes::documented_minimum;
pub use versions::minor as version_minor;
mod topology;
mod versions;

use std::path::{Path, PathBuf};

use ipnet::Ipv4Net;

use super::diag::Diagnostics;
use super::parse::{RawSpec, Src};
use super::types::*;

pub use identity::{is_cluster_name, is_dns_label, parse_version, CLUSTER_NAME_RULE};
pub use kubevirt::is_dns_subdomain;
pub use users::{
    check_user_name, is_user_name, read_password_file, MAX_PASSWORD_BYTES, USER_NAME_RULE,
};

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
            libvirt_default_uri: crate::spec::uri::env_uri(),
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

/// Resolve and check everything. Errors and warnings go to `d`; the returned spec is
/// only meaningful when `d` holds no errors.
pub fn resolve(raw: RawSpec, env: &Env, d: &mut Diagnostics) -> ClusterSpec {
    let id = identity::resolve(&raw, d);
    let creds = credentials::resolve(&raw, id.distribution, env, d);
    fips::check(&raw, &creds.ssh_keys, d);
    let topo = topology::resolve(&raw, d);
    let users = users::resolve(&raw, env, d);
    let sizes = sizes::resolve(&raw, &topo, &id.cluster, d);
    let nets = network::cluster_networks(&raw, &id.version, d);
    let network = network::machine_network(&raw, &id.cluster, &topo, &nets, d);
    let ipv6 = ipv6::resolve(&raw, &topo, &nets, d);
    let libvirt = libvirt::resolve(&raw, env, topo.rehearsal, d);
    let install = install::resolve(&raw, env, d);
    if let Some(caps) = &install.capabilities {
        let minor = versions::minor(&id.version).unwrap_or(capabilities::NEWEST_MINOR);
        for p in capabilities::check(caps, minor, topo.method == Method::Ipi) {
            d.error(p.field, p.message);
        }
    }
    let release = release::resolve(&raw, env, d);
    let bmc = bmc::resolve(&raw, &network, ipv6.as_ref(), d);
    let method_field = raw.method.as_ref().map_or("method", |m| m.field.as_str());
    for (field, message) in versions::refusals(
        &id.version,
        topo.method,
        method_field,
        raw.bmc.verify_certificate.as_ref(),
    ) {
        d.error(field, message);
    }
    let (backend, kubevirt) = kubevirt::resolve(&raw, env, &id.cluster, topo.method, &network, d);
    let storage = storage::resolve(&raw, &id, install.capabilities.as_ref(), &topo, &sizes, d);
    storage::nfs_served_here(&raw, storage, backend, network.mode, d);
    let monitoring = monitoring::resolve(&raw, d);
    let (ntp_servers, host_ntp) = time::resolve(&raw, &network, backend, d);

    ClusterSpec {
        cluster: id.cluster,
        domain: id.domain,
        distribution: id.distribution,
        version: id.version,
        pull_secret: creds.pull_secret,
        users,
        ssh_keys: creds.ssh_keys,
        method: topo.method,
        ctlplanes: topo.ctlplanes,
        workers: topo.workers,
        bootstrap: sizes.bootstrap,
        ctlplane: sizes.ctlplane,
        worker: sizes.worker,
        network,
        libvirt,
        image: release.image,
        rehearsal: topo.rehearsal,
        installation_disk: install.installation_disk,
        network_type: nets.network_type,
        cluster_network: nets.cluster_network,
        cluster_network_host_prefix: nets.host_prefix,
        service_network: nets.service_network,
        ipv6,
        fips: install.fips,
        ntp_servers,
        host_ntp,
        proxy: install.proxy,
        image_digest_sources: install.image_digest_sources,
        additional_trust_bundle: install.additional_trust_bundle,
        trust_bundle_pem: install.trust_bundle_pem,
        capabilities: install.capabilities,
        manifests: install.manifests,
        openshift_install: release.openshift_install,
        mirror: release.mirror,
        release_key: release.release_key,
        bmc,
        backend,
        kubevirt,
        storage,
        monitoring,
    }
}

/// Names libvirt accepts for networks, pools and bridges (up to `max` bytes).
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

fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}
