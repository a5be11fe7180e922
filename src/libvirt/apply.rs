//! `create infra`: bring libvirt to the plan. Idempotent: what exists and matches is
//! left alone, what is missing is created, and what differs in a way that cannot be
//! changed safely is reported, not touched.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use virt::domain::Domain;
use virt::network::Network;
use virt::storage_pool::StoragePool;
use virt::storage_vol::StorageVol;

use super::ledger::{self, Ledger};
use super::xml::esc;
use super::xml::parse::{network_subnets, network_subnets6};
use super::xml::write::{self as xml, Accel, NodePaths};
use super::{owner_of_domain, parallel, Host};
use crate::plan::{Node, Plan, Start};
use crate::spec::{DomainType, Graphics};
use crate::state::{ClusterDir, StateDir};

#[derive(Debug, Default)]
pub struct Report {
    pub created: Vec<String>,
    pub started: Vec<String>,
    pub unchanged: Vec<String>,
    /// Differences between the plan and libvirt that were not applied, and why.
    pub drift: Vec<String>,
}

pub struct ApplyOptions<'a> {
    /// The disk image fw_cfg nodes' overlays sit on (`None` when every node boots
    /// an ISO onto an empty disk).
    pub base_image: Option<&'a Path>,
    /// The live ISO the ISO-booting nodes get in their CD-ROM drive.
    pub iso: Option<&'a Path>,
    /// Per node: its Ignition config (fw_cfg nodes only).
    pub ignition: BTreeMap<String, Vec<u8>>,
    /// Also start the nodes planned to start after bootstrap (workers in UPI).
    pub start_all: bool,
}

/// The accelerator for this host and why. `auto` never falls back to TCG for a
/// real cluster (src/host/kvm.rs, `tcg_fallback`): an error before anything is
/// created.
pub fn choose_accel(host: &Host, wanted: DomainType, rehearsal: bool) -> Result<(Accel, String)> {
    let fallback = |reason: &str| {
        crate::host::kvm::tcg_fallback(reason, rehearsal)
            .map(|why| (Accel::Tcg, why))
            .map_err(|e| anyhow::anyhow!("{e}"))
    };
    match wanted {
        DomainType::Kvm => Ok((Accel::Kvm, "libvirt.domain_type is kvm".into())),
        DomainType::Qemu => Ok((Accel::Tcg, "libvirt.domain_type is qemu".into())),
        DomainType::Auto if host.is_local() => {
            let c = crate::host::kvm::check();
            if c.usable {
                Ok((Accel::Kvm, c.reason))
            } else {
                fallback(&c.reason)
            }
        }
        DomainType::Auto => {
            match host
                .conn
                .domain_capabilities(None, Some("x86_64"), None, Some("kvm"), 0)
            {
                Ok(_) => Ok((Accel::Kvm, "the remote libvirt offers KVM".into())),
                Err(_) => fallback("the remote libvirt offers no KVM"),
            }
        }
    }
}

/// Read a qcow2 header: the image's virtual size. Anything else is refused.
pub fn qcow2_virtual_size(path: &Path) -> Result<u64> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut h = [0u8; 32];
    f.read_exact(&mut h)
        .with_context(|| format!("reading {}", path.display()))?;
    if &h[0..4] != b"QFI\xfb" {
        bail!(
            "{} is not a qcow2 image (decompress a .qcow2.gz or .qcow2.xz first)",
            path.display()
        );
    }
    Ok(u64::from_be_bytes(h[24..32].try_into().unwrap_or_default()))
}

/// The base volume's name for this image file: derived from what identifies the
/// file without reading it (canonical path, size, modification time), so the
/// upload can go straight into the final volume; the content's sha256 is computed
/// while uploading and kept in the completion marker.
fn base_name(image: &Path) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(image).with_context(|| format!("reading {}", image.display()))?;
    let key = format!(
        "{}|{}|{}.{}",
        image
            .canonicalize()
            .unwrap_or_else(|_| image.to_path_buf())
            .display(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    );
    let digest = hex::encode(Sha256::digest(key.as_bytes()));
    Ok(format!("shiftlab-base-{}.qcow2", &digest[..16]))
}

/// The completion marker of a base volume: a small volume next to it holding the
/// sha256 of what was uploaded, created only after the upload finished and
/// libvirt read the result back as a qcow2 of the image's size. A base volume
/// without its marker is a partial upload (a crash, a kill, a full disk).
pub fn base_marker_name(base: &str) -> String {
    format!("{base}.sha256")
}

/// The digest a complete base volume's marker records, or `None` when the
/// marker is missing or unreadable (the volume is then partial).
fn marker_digest(host: &Host, pool: &StoragePool, base: &str) -> Result<Option<String>> {
    let Some(marker) = Host::volume(pool, &base_marker_name(base))? else {
        return Ok(None);
    };
    let text = host.download(&marker).unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_string();
    Ok((text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())).then_some(text))
}

/// A complete base volume other than `name` (the one named from this file's
/// path) with this file's content, and its name: the image imported before from
/// another path. Cheap checks first: without a complete base volume of the same
/// byte length and virtual size nothing is read. With one, the file is hashed
/// (read, not uploaded) and compared with the candidates' markers; a match is
/// remembered in the host record under `name`, so the next run of this path
/// reads nothing. A volume named `name` that exists wins (it is this path's own).
fn same_content(
    host: &Host,
    pool: &StoragePool,
    image: &Path,
    name: &str,
    (len, virtual_size): (u64, u64),
    state: &StateDir,
) -> Result<Option<(StorageVol, String)>> {
    if Host::volume(pool, name)?.is_some() {
        return Ok(None);
    }
    let pool_name = pool.name().context("reading the pool's name")?;
    let mut rec = ledger::load_host(state)?;
    let alias = rec
        .base_aliases
        .iter()
        .find(|(u, p, a, _)| *u == host.uri && *p == pool_name && a == name)
        .map(|(.., v)| v.clone());
    if let Some(v) = alias {
        if let (Some(vol), Some(_)) = (Host::volume(pool, &v)?, marker_digest(host, pool, &v)?) {
            tracing::info!(volume = %v, image = %image.display(), how = "remembered", "base image found by content");
            return Ok(Some((vol, v)));
        }
    }
    let mut candidates = Vec::new();
    for v in pool.list_all_volumes(0).context("listing volumes")? {
        let Ok(n) = v.name() else { continue };
        if !is_base_name(&n) || n == name {
            continue;
        }
        // VIR_STORAGE_VOL_GET_PHYSICAL: `allocation` is then the file's size.
        let physical = v.info_flags(1).map(|i| i.allocation).ok();
        let capacity = v.info().map(|i| i.capacity).ok();
        if physical != Some(len) || capacity != Some(virtual_size) {
            continue;
        }
        if let Some(d) = marker_digest(host, pool, &n)? {
            candidates.push((v, n, d));
        }
    }
    if candidates.is_empty() {
        return Ok(None);
    }
    let digest = crate::files::hash_file::<Sha256>(image)?;
    let Some((vol, used, _)) = candidates.into_iter().find(|(.., d)| *d == digest) else {
        return Ok(None);
    };
    rec.base_aliases
        .retain(|(u, p, a, _)| !(*u == host.uri && *p == pool_name && a == name));
    rec.base_aliases
        .push((host.uri.clone(), pool_name, name.to_string(), used.clone()));
    ledger::save_host(state, &rec)?;
    tracing::info!(volume = %used, image = %image.display(), how = "hashed", "base image found by content");
    Ok(Some((vol, used)))
}

/// Is this a base volume's name (`shiftlab-base-<16 hex>.qcow2`)?
fn is_base_name(n: &str) -> bool {
    n.strip_prefix("shiftlab-base-")
        .and_then(|r| r.strip_suffix(".qcow2"))
        .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

pub fn ensure_pool(
    host: &Host,
    plan: &Plan,
    state: &StateDir,
    report: &mut Report,
) -> Result<StoragePool> {
    let name = &plan.libvirt.pool;
    let pool = match host.pool(name)? {
        Some(p) => p,
        None => {
            // Recorded first: a crash right after defining still leaves a record.
            let mut rec = ledger::load_host(state)?;
            let key = (host.uri.clone(), name.clone());
            if !rec.pools.contains(&key) {
                rec.pools.push(key);
                ledger::save_host(state, &rec)?;
            }
            let p = host
                .conn
                .define_storage_pool_xml(
                    &xml::pool_xml(name, &plan.libvirt.pool_path.to_string_lossy()),
                    0,
                )
                .with_context(|| format!("defining pool {name}"))?;
            p.build(0)
                .with_context(|| format!("building pool {name}"))?;
            report.created.push(format!("pool {name}"));
            p
        }
    };
    if !pool.is_active()? {
        pool.create(0)
            .with_context(|| format!("starting pool {name}"))?;
    }
    let _ = pool.set_autostart(true);
    pool.refresh(0)
        .with_context(|| format!("refreshing pool {name}"))?;
    Ok(pool)
}

fn ensure_base(
    host: &Host,
    pool: &StoragePool,
    image: &Path,
    ledger: &mut Ledger,
    dirs: (&ClusterDir, &StateDir),
    report: &mut Report,
) -> Result<(StorageVol, u64)> {
    let (cluster_dir, state) = dirs;
    let virtual_size = qcow2_virtual_size(image)?;
    let name = base_name(image)?;
    let len = std::fs::metadata(image)?.len();
    // The same file under another path (a copy, a link, another mount) is the
    // same base: found by content, not imported twice.
    if let Some((vol, used)) = same_content(host, pool, image, &name, (len, virtual_size), state)? {
        if !ledger.base_volumes.contains(&used) {
            ledger.base_volumes.push(used.clone());
            ledger::save(cluster_dir, ledger)?;
        }
        report.unchanged.push(format!(
            "base image {used} (same content as {})",
            image.display()
        ));
        return Ok((vol, virtual_size));
    }
    if !ledger.base_volumes.contains(&name) {
        ledger.base_volumes.push(name.clone());
        ledger::save(cluster_dir, ledger)?;
    }
    let mut rec = ledger::load_host(state)?;
    let key = (host.uri.clone(), ledger.pool.clone(), name.clone());
    if !rec.base_images.contains(&key) {
        rec.base_images.push(key);
        ledger::save_host(state, &rec)?;
    }
    if let Some(v) = Host::volume(pool, &name)? {
        if marker_digest(host, pool, &name)?.is_some() {
            report.unchanged.push(format!("base image {name}"));
            return Ok((v, virtual_size));
        }
        // No marker: an upload that never finished. Never used; imported again.
        tracing::warn!(volume = %name, "removing a partial base image");
        v.delete(0).context("removing a partial base image")?;
    }
    if let Some(stale) = Host::volume(pool, &base_marker_name(&name))? {
        stale
            .delete(0)
            .context("removing a stale base image marker")?;
    }
    let started = std::time::Instant::now();
    // Declared as what it is (qcow2, libvirt's `qemu-img create` makes a small
    // header) and overwritten byte for byte by the upload: one write, no convert.
    // libvirt src/storage/storage_util.c, virStorageBackendVolUploadLocal: the
    // stream writes the target file as is, whatever its format.
    let vol = StorageVol::create_xml(pool, &xml::qcow2_volume_xml(&name, virtual_size, None), 0)
        .with_context(|| format!("creating volume {name}"))?;
    let header = vol.info().map(|i| i.allocation).unwrap_or(0);
    let fail = |vol: &StorageVol, e: anyhow::Error| {
        let _ = vol.delete(0);
        Err(e).with_context(|| format!("importing {}", image.display()))
    };
    if len < header {
        return fail(
            &vol,
            anyhow::anyhow!("the image ({len} bytes) is smaller than an empty qcow2 header"),
        );
    }
    let mut src = std::fs::File::open(image)?;
    let (digest, route) = match super::import::write_volume(host, pool, &vol, &mut src, len) {
        Ok(d) => d,
        Err(e) => return fail(&vol, e),
    };
    // Verify what libvirt now sees: the image's bytes, a qcow2 of its virtual size.
    pool.refresh(0)
        .with_context(|| format!("refreshing pool {}", ledger.pool))?;
    let vol = Host::volume(pool, &name)?.context("the base volume vanished after its upload")?;
    let capacity = vol.info().map(|i| i.capacity).unwrap_or(0);
    let physical = vol.info_flags(1).map(|i| i.allocation).unwrap_or(0);
    if capacity != virtual_size || physical != len {
        return fail(
            &vol,
            anyhow::anyhow!(
                "libvirt reads {physical} bytes and {capacity} bytes of capacity, the image has {len} bytes and says {virtual_size}"
            ),
        );
    }
    let marker_name = base_marker_name(&name);
    let marker = StorageVol::create_xml(pool, &xml::raw_volume_xml(&marker_name, 64), 0)
        .with_context(|| format!("creating volume {marker_name}"))?;
    if let Err(e) = host.upload(&marker, digest.as_bytes(), 64) {
        let _ = marker.delete(0);
        return fail(&vol, e);
    }
    tracing::info!(volume = %name, bytes = len, route = route.as_str(), seconds = %format!("{:.2}", started.elapsed().as_secs_f64()), "base image imported");
    report.created.push(format!(
        "base image {name} from {} (sha256 {digest})",
        image.display()
    ));
    Ok((vol, virtual_size))
}

/// The cluster's live ISO as a raw volume in the pool, uploaded under a temporary
/// name and named only when whole (as the base image), so that a run stopped
/// during the upload never leaves a truncated ISO a node would boot.
fn ensure_iso(
    host: &Host,
    pool: &StoragePool,
    iso: &Path,
    cluster: &str,
    ledger: &mut Ledger,
    cluster_dir: &ClusterDir,
    report: &mut Report,
) -> Result<String> {
    let name = super::iso::volume_name(cluster);
    let tmp = format!(".{name}.part");
    if ledger.add_volumes([name.as_str(), tmp.as_str()]) {
        ledger::save(cluster_dir, ledger)?;
    }
    if Host::volume(pool, &name)?.is_some() {
        report.unchanged.push(format!("live ISO {name}"));
        return Ok(name);
    }
    if let Some(stale) = Host::volume(pool, &tmp)? {
        stale.delete(0).context("removing a partial live ISO")?;
    }
    let len = std::fs::metadata(iso)
        .with_context(|| format!("reading {}", iso.display()))?
        .len();
    let vol = StorageVol::create_xml(pool, &xml::raw_volume_xml(&tmp, len), 0)
        .with_context(|| format!("creating volume {tmp}"))?;
    let mut file = std::fs::File::open(iso)?;
    if let Err(e) = super::import::write_volume(host, pool, &vol, &mut file, len) {
        let _ = vol.delete(0);
        return Err(e).with_context(|| format!("uploading {}", iso.display()));
    }
    StorageVol::create_xml_from(pool, &xml::raw_volume_xml(&name, len), &vol, 0)
        .with_context(|| format!("creating volume {name}"))?;
    vol.delete(0).context("removing the upload volume")?;
    report
        .created
        .push(format!("live ISO {name} from {}", iso.display()));
    Ok(name)
}

fn ensure_network(host: &Host, plan: &Plan, report: &mut Report) -> Result<Network> {
    let name = &plan.network.name;
    let net = match host.network(name)? {
        Some(n) => {
            reconcile_network(plan, &n, report)?;
            n
        }
        None => {
            let n = host
                .conn
                .define_network_xml(&xml::network_xml(plan))
                .with_context(|| format!("defining network {name}"))?;
            report.created.push(format!("network {name}"));
            n
        }
    };
    if !net.is_active()? {
        net.create()
            .with_context(|| format!("starting network {name}"))?;
        report.started.push(format!("network {name}"));
    }
    let _ = net.set_autostart(true);
    settle_ipv6(host, plan)?;
    Ok(net)
}

/// The bridge's IPv6 addresses usable before any node joins it
/// (host::ipv6::settle): the host's own lookups and the artifact server of a
/// lab whose only family is IPv6 need them. Only on this host's own bridge.
fn settle_ipv6(host: &Host, plan: &Plan) -> Result<()> {
    if !host.is_local() {
        return Ok(());
    }
    let done = crate::host::ipv6::settle_plan(plan)
        .with_context(|| format!("the IPv6 addresses of bridge {}", plan.network.bridge))?;
    for d in done {
        tracing::info!(network = %plan.network.name, "{d}");
    }
    Ok(())
}

/// Add what the plan has and the network lacks (new nodes' reservations and
/// records), live and persistent; report what differs otherwise.
fn reconcile_network(plan: &Plan, net: &Network, report: &mut Report) -> Result<()> {
    let name = &plan.network.name;
    if plan.network.mode == crate::spec::NetworkMode::Bridge {
        report.unchanged.push(format!("network {name}"));
        return Ok(());
    }
    let current = net.xml_desc(0)?;
    let doc = roxmltree::Document::parse(&current).context("parsing network XML")?;
    // The subnet the plan names first (IPv4's, else IPv6's) must be there.
    let subnets: Vec<ipnet::IpNet> = network_subnets(&current)
        .into_iter()
        .map(ipnet::IpNet::V4)
        .chain(network_subnets6(&current).into_iter().map(ipnet::IpNet::V6))
        .collect();
    let want = plan.network.host_cidr();
    if !subnets.contains(&want) {
        report.drift.push(format!(
            "network {name}: its subnets are {:?}, the plan says {want}; destroy and recreate the cluster to change it",
            subnets.iter().map(ToString::to_string).collect::<Vec<_>>()
        ));
        return Ok(());
    }
    // Which <ip> each family's reservations go under (a dual-stack lab has
    // two with DHCP): named, not left to libvirt's choice for -1.
    let (parent4, parent6) = dhcp_parents(&doc);
    // The reservations there, keyed as libvirt keys them: IPv4 by MAC, IPv6
    // by DUID (`id`).
    let hosts: Vec<(&str, String, String, String)> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "host")
        .filter_map(|n| {
            let (attr, key) = ["mac", "id"]
                .into_iter()
                .find_map(|a| n.attribute(a).map(|k| (a, k)))?;
            Some((
                attr,
                key.to_lowercase(),
                n.attribute("ip").unwrap_or_default().to_string(),
                n.attribute("name").unwrap_or_default().to_string(),
            ))
        })
        .collect();
    let mut dns_ips: Vec<String> = doc
        .descendants()
        .filter(|n| {
            n.tag_name().name() == "host"
                && n.parent().is_some_and(|p| p.tag_name().name() == "dns")
        })
        .filter_map(|n| n.attribute("ip").map(str::to_string))
        .collect();
    let flags = virt::sys::VIR_NETWORK_UPDATE_AFFECT_CONFIG
        | if net.is_active()? {
            virt::sys::VIR_NETWORK_UPDATE_AFFECT_LIVE
        } else {
            0
        };
    let mut added = 0;
    // What the plan reserves: each family under the <ip> of its own.
    let wanted = plan
        .network
        .reservations
        .iter()
        .map(|r| {
            (
                "mac",
                r.mac.to_lowercase(),
                &r.hostname,
                r.ip.to_string(),
                parent4,
            )
        })
        .chain(plan.network.ipv6.iter().flat_map(|v6| {
            v6.reservations.iter().map(|r| {
                (
                    "id",
                    r.id.to_lowercase(),
                    &r.hostname,
                    r.ip.to_string(),
                    parent6,
                )
            })
        }));
    for (attr, key, hostname, ip, parent) in wanted {
        let who = if attr == "id" {
            format!("DUID {key}")
        } else {
            key.clone()
        };
        match hosts.iter().find(|(a, k, _, _)| *a == attr && *k == key) {
            Some((_, _, at, host)) if *at == ip && host == hostname => {}
            Some((_, _, at, host)) => report.drift.push(format!(
                "network {name}: {who} is reserved for {host} at {at}, the plan says {hostname} at {ip}"
            )),
            None => {
                let entry = format!(
                    "<host {attr}='{}' name='{}' ip='{ip}'/>",
                    esc(&key),
                    esc(hostname)
                );
                net.update(
                    virt::sys::VIR_NETWORK_UPDATE_COMMAND_ADD_LAST,
                    virt::sys::VIR_NETWORK_SECTION_IP_DHCP_HOST,
                    parent,
                    &entry,
                    flags,
                )
                .with_context(|| format!("adding the reservation of {hostname} ({ip})"))?;
                added += 1;
            }
        }
    }
    // A and AAAA alike: libvirt adds a record whose address it lacks even when
    // another record (the other family's) carries the same names.
    let address = |k: crate::plan::RecordType| {
        matches!(
            k,
            crate::plan::RecordType::A | crate::plan::RecordType::AAAA
        )
    };
    for rec in plan.dns.iter().filter(|r| address(r.kind)) {
        if dns_ips.contains(&rec.value) {
            continue;
        }
        let mut names: Vec<String> = plan
            .dns
            .iter()
            .filter(|r| address(r.kind) && r.value == rec.value)
            .map(|r| r.name.clone())
            .collect();
        super::xml::write::ptr_first(plan, &rec.value, &mut names);
        let names: Vec<String> = names
            .iter()
            .map(|n| format!("<hostname>{}</hostname>", esc(n)))
            .collect();
        let entry = format!("<host ip='{}'>{}</host>", rec.value, names.join(""));
        net.update(
            virt::sys::VIR_NETWORK_UPDATE_COMMAND_ADD_LAST,
            virt::sys::VIR_NETWORK_SECTION_DNS_HOST,
            -1,
            &entry,
            flags,
        )
        .with_context(|| format!("adding the DNS record of {}", rec.name))?;
        added += 1;
        // That one entry carries every name of the address.
        dns_ips.push(rec.value.clone());
    }
    if added > 0 {
        report
            .created
            .push(format!("network {name}: {added} reservations and records"));
    } else {
        report.unchanged.push(format!("network {name}"));
    }
    Ok(())
}

/// The parent-index (libvirt's count of the network's `<ip>` elements, in
/// order) of the IPv4 and the IPv6 `<ip>` that hold DHCP; -1, libvirt's "the
/// only one with DHCP", when a family has none. Pure.
pub fn dhcp_parents(doc: &roxmltree::Document) -> (i32, i32) {
    let (mut v4, mut v6) = (-1, -1);
    let ips = doc
        .root_element()
        .children()
        .filter(|n| n.tag_name().name() == "ip");
    for (i, ip) in ips.enumerate() {
        if !ip.children().any(|c| c.tag_name().name() == "dhcp") {
            continue;
        }
        let slot = if ip.attribute("family") == Some("ipv6") {
            &mut v6
        } else {
            &mut v4
        };
        if *slot < 0 {
            *slot = i as i32;
        }
    }
    (v4, v6)
}

/// What happened to one node in `apply`.
struct NodeOutcome {
    name: String,
    created: Vec<String>,
    drift: Vec<String>,
}

struct NodeVolumes {
    ignition_path: Option<String>,
    /// The live ISO volume in the node's CD-ROM drive.
    cdrom: Option<String>,
}

fn ensure_node_volumes(
    host: &Host,
    pool: &StoragePool,
    node: &Node,
    base: Option<&(StorageVol, u64)>,
    ignition: Option<&[u8]>,
) -> Result<(NodeVolumes, Vec<String>)> {
    let mut created = Vec::new();
    for d in &node.disks {
        if Host::volume(pool, &d.volume)?.is_some() {
            continue;
        }
        let bytes = d.size_gb << 30;
        let xml = match d.kind {
            crate::plan::DiskKind::Root if node.boot == crate::plan::Boot::DiskFwCfg => {
                let (base, base_size) = base.context("a disk-booting node needs a base image")?;
                xml::qcow2_volume_xml(&d.volume, bytes.max(*base_size), Some(&base.path()?))
            }
            _ => xml::qcow2_volume_xml(&d.volume, bytes, None),
        };
        StorageVol::create_xml(pool, &xml, 0)
            .with_context(|| format!("creating volume {}", d.volume))?;
        created.push(format!("volume {}", d.volume));
    }
    let mut ignition_path = None;
    if let (Some(name), Some(bytes)) = (&node.ignition_volume, ignition) {
        let vol = match Host::volume(pool, name)? {
            Some(v) if v.info()?.capacity == bytes.len() as u64 => {
                // Same size: compare contents before deciding it is unchanged.
                let same = host.download(&v)? == bytes;
                if same {
                    v
                } else {
                    refresh_ignition(host, pool, name, bytes, node)?;
                    created.push(format!("ignition {name} (updated)"));
                    lookup(pool, name)?
                }
            }
            Some(_) => {
                refresh_ignition(host, pool, name, bytes, node)?;
                created.push(format!("ignition {name} (updated)"));
                lookup(pool, name)?
            }
            None => {
                let v =
                    StorageVol::create_xml(pool, &xml::raw_volume_xml(name, bytes.len() as u64), 0)
                        .with_context(|| format!("creating volume {name}"))?;
                host.upload(&v, bytes, bytes.len() as u64)
                    .with_context(|| format!("uploading {name}"))?;
                created.push(format!("ignition {name}"));
                v
            }
        };
        ignition_path = Some(vol.path()?);
    }
    Ok((
        NodeVolumes {
            ignition_path,
            cdrom: None,
        },
        created,
    ))
}

fn lookup(pool: &StoragePool, name: &str) -> Result<StorageVol> {
    Host::volume(pool, name)?.with_context(|| format!("volume {name} vanished"))
}

/// A changed Ignition is only replaced while its node is off: a running node has
/// read it already.
fn refresh_ignition(
    host: &Host,
    pool: &StoragePool,
    name: &str,
    bytes: &[u8],
    node: &Node,
) -> Result<()> {
    if let Some(d) = host.domain(&node.name)? {
        if d.is_active()? {
            bail!(
                "{}: its Ignition changed but the node is running; stop it first (it read its config at first boot)",
                node.name
            );
        }
    }
    if let Some(old) = Host::volume(pool, name)? {
        old.delete(0)
            .with_context(|| format!("removing old {name}"))?;
    }
    let v = StorageVol::create_xml(pool, &xml::raw_volume_xml(name, bytes.len() as u64), 0)
        .with_context(|| format!("creating volume {name}"))?;
    host.upload(&v, bytes, bytes.len() as u64)
        .with_context(|| format!("uploading {name}"))
}

/// Define the node's domain, or compare the existing one with the plan.
fn ensure_domain(
    host: &Host,
    plan: &Plan,
    node: &Node,
    accel: Accel,
    vols: &NodeVolumes,
    report_created: &mut Vec<String>,
    drift: &mut Vec<String>,
) -> Result<Domain> {
    let console = xml::console_log_path(&node.name);
    let paths = NodePaths {
        ignition: vols.ignition_path.as_deref(),
        console_log: &console,
        cdrom: vols.cdrom.as_deref(),
    };
    let want = xml::domain_xml(plan, node, accel, &paths);
    match host.domain(&node.name)? {
        None => {
            let d = host
                .conn
                .define_domain_xml(&want)
                .with_context(|| format!("defining domain {}", node.name))?;
            report_created.push(format!("domain {}", node.name));
            Ok(d)
        }
        Some(d) => {
            match owner_of_domain(&d)? {
                Some(o) if o.cluster == plan.cluster => {}
                _ => bail!(
                    "domain {} is not shiftlab's for {}",
                    node.name,
                    plan.cluster
                ),
            }
            let diffs = domain_differences(&d.xml_desc(0)?, node, plan.libvirt.graphics);
            if !diffs.is_empty() {
                if d.is_active()? {
                    drift.push(format!(
                        "{}: {} — the node is running, so nothing was changed; stop it (or destroy the cluster) to apply",
                        node.name,
                        diffs.join(", ")
                    ));
                } else {
                    host.conn
                        .define_domain_xml(&want)
                        .with_context(|| format!("redefining domain {}", node.name))?;
                    report_created.push(format!(
                        "domain {} (redefined: {})",
                        node.name,
                        diffs.join(", ")
                    ));
                }
            }
            Ok(d)
        }
    }
}

/// What of the plan's node an existing domain does not match.
pub fn domain_differences(domain_xml: &str, node: &Node, graphics: Graphics) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(doc) = roxmltree::Document::parse(domain_xml) else {
        return vec!["unreadable domain XML".into()];
    };
    let text = |tag: &str| {
        doc.root_element()
            .children()
            .find(|n| n.tag_name().name() == tag)
            .and_then(|n| n.text().map(str::to_string))
    };
    if let Some(mem) = text("memory").and_then(|m| m.trim().parse::<u64>().ok()) {
        // libvirt reports KiB.
        if mem != node.memory_mib * 1024 {
            out.push(format!(
                "memory is {} MiB, the plan says {} MiB",
                mem / 1024,
                node.memory_mib
            ));
        }
    }
    if let Some(v) = text("vcpu").and_then(|m| m.trim().parse::<u32>().ok()) {
        if v != node.vcpus {
            out.push(format!("{v} vCPUs, the plan says {}", node.vcpus));
        }
    }
    let macs: Vec<String> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "mac")
        .filter_map(|n| n.attribute("address").map(str::to_lowercase))
        .collect();
    if !macs.contains(&node.mac) {
        out.push(format!(
            "MAC is {}, the plan says {}",
            macs.join(","),
            node.mac
        ));
    }
    // A screen turned on (or off) in the cluster file reaches existing nodes too.
    let screens: Vec<&str> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "graphics")
        .filter_map(|n| n.attribute("type"))
        .collect();
    let want = match graphics {
        Graphics::None => None,
        Graphics::Vnc => Some("vnc"),
        Graphics::Spice => Some("spice"),
    };
    if screens.as_slice() != want.as_slice() {
        let is = if screens.is_empty() {
            "none".to_string()
        } else {
            screens.join(",")
        };
        out.push(format!(
            "graphics is {is}, the plan says {}",
            want.unwrap_or("none")
        ));
    }
    out
}

/// Apply the plan. The caller has run the preflight (`doctor::preflight::check`)
/// and applies only when it found nothing wrong.
pub fn apply(
    host: &Host,
    plan: &Plan,
    state: &StateDir,
    opts: &ApplyOptions,
) -> Result<(Report, Accel, String)> {
    let cluster_dir = &state.cluster(&plan.cluster);
    let mut ledger = ledger::load(cluster_dir)?.unwrap_or(Ledger {
        format: ledger::LEDGER_FORMAT,
        uri: host.uri.clone(),
        pool: plan.libvirt.pool.clone(),
        ..Ledger::default()
    });
    let (accel, why) = choose_accel(host, plan.libvirt.domain_type, plan.rehearsal)?;
    let mut report = Report::default();

    // The pool and the base image are shared with other clusters: one shiftlab at
    // a time makes them (else two fresh creates race on `pool already exists`).
    let host_lock = state.lock_host()?;
    let pool = ensure_pool(host, plan, state, &mut report)?;
    let base = match opts.base_image {
        Some(image) => Some(ensure_base(
            host,
            &pool,
            image,
            &mut ledger,
            (cluster_dir, state),
            &mut report,
        )?),
        None => None,
    };
    drop(host_lock);
    let iso_volume = match opts.iso {
        Some(iso) => Some(ensure_iso(
            host,
            &pool,
            iso,
            &plan.cluster,
            &mut ledger,
            cluster_dir,
            &mut report,
        )?),
        None => None,
    };
    // Intent on disk before the side effects.
    let names: Vec<String> = plan
        .nodes
        .iter()
        .flat_map(|n| n.volumes().cloned())
        .collect();
    if ledger.add_volumes(names.iter().map(String::as_str)) {
        ledger::save(cluster_dir, &ledger)?;
    }
    let _net = ensure_network(host, plan, &mut report)?;
    // Bare-metal IPI with external_bridge: veth: the bridge the installer's
    // bootstrap VM joins, linked to the network's bridge, now that it is up.
    if let Some(v) = &plan.network.veth {
        let made = crate::host::veth::ensure(&plan.cluster, &cluster_dir.host_links(), v)
            .context("making the veth-linked bridge")?;
        report.created.extend(made);
    }

    // Volumes and domains per node, in parallel, bounded below libvirtd's
    // max_client_requests (see libvirt::parallel).
    let (base, iso_volume) = (base.as_ref(), iso_volume.as_deref());
    let results: Vec<Result<NodeOutcome>> = parallel::map_bounded(
        &plan.nodes,
        parallel::WORKERS,
        |node| -> Result<NodeOutcome> {
            let ign = opts.ignition.get(&node.name).map(Vec::as_slice);
            if node.ignition_volume.is_some() && ign.is_none() {
                bail!("{}: no Ignition config to deliver", node.name);
            }
            let (vols, mut created) = ensure_node_volumes(host, &pool, node, base, ign)
                .with_context(|| format!("preparing the volumes of {}", node.name))?;
            let mut drift = Vec::new();
            let vols = NodeVolumes {
                cdrom: iso_volume
                    .filter(|_| node.boot == crate::plan::Boot::Iso)
                    .map(str::to_string),
                ..vols
            };
            ensure_domain(host, plan, node, accel, &vols, &mut created, &mut drift)?;
            Ok(NodeOutcome {
                name: node.name.clone(),
                created,
                drift,
            })
        },
        || Err(anyhow::anyhow!("a worker thread panicked")),
    );
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(NodeOutcome {
                name,
                created,
                drift,
            }) => {
                if created.is_empty() && drift.is_empty() {
                    report.unchanged.push(format!("node {name}"));
                }
                report.created.extend(created);
                report.drift.extend(drift);
            }
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    if !errors.is_empty() {
        bail!("creating nodes failed:\n  - {}", errors.join("\n  - "));
    }

    // Which nodes start now is the plan's (Start); they start together: libvirt returns
    // once QEMU runs, long before a guest boots, so a wave per role would only add
    // a sequential start without ordering anything that matters.
    let to_start: Vec<&Node> = plan
        .nodes
        .iter()
        .filter(|n| n.start == Start::Infra || (opts.start_all && n.start == Start::AfterBootstrap))
        .collect();
    for r in start_all(host, &to_start) {
        if let Some(name) = r? {
            report.started.push(format!("domain {name}"));
        }
    }
    Ok((report, accel, why))
}

/// Starts these nodes' domains that are not running, in parallel (bounded, see
/// [`parallel`]); each result names the domain when it was started.
fn start_all(host: &Host, nodes: &[&Node]) -> Vec<Result<Option<String>>> {
    parallel::map_bounded(
        nodes,
        parallel::WORKERS,
        |n| -> Result<Option<String>> {
            let d = host
                .domain(&n.name)?
                .with_context(|| format!("domain {} does not exist; run create infra", n.name))?;
            if d.is_active()? {
                return Ok(None);
            }
            d.create().with_context(|| format!("starting {}", n.name))?;
            Ok(Some(n.name.clone()))
        },
        || Err(anyhow::anyhow!("a worker thread panicked")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names_are_recognised_and_other_volumes_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("rhcos.qcow2");
        std::fs::write(&image, b"QFI\xfb").unwrap();
        let name = base_name(&image).unwrap();
        assert!(is_base_name(&name), "{name}");
        for other in [
            "shiftlab-base-0123.qcow2",
            "shiftlab-base-0123456789abcdef.qcow2.sha256",
            "shiftlab-base-0123456789abcdeg.qcow2",
            "lab1-ctlplane-0.qcow2",
        ] {
            assert!(!is_base_name(other), "{other}");
        }
    }

    /// A screen turned on in the cluster file is a difference of a headless
    /// domain (so `create infra` redefines it while off), and the other way round;
    /// the domain written for the plan has none.
    #[test]
    fn graphics_are_compared_with_the_plan() {
        let plan = crate::plan::from_yaml(
            "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\n",
        );
        let node = &plan.nodes[0];
        let paths = NodePaths {
            ignition: None,
            console_log: "/c.log",
            cdrom: None,
        };
        let headless = xml::domain_xml(&plan, node, Accel::Tcg, &paths);
        let mut vnc_plan = plan.clone();
        vnc_plan.libvirt.graphics = Graphics::Vnc;
        let vnc = xml::domain_xml(&vnc_plan, node, Accel::Tcg, &paths);
        // The written XML gives memory in MiB where libvirt reports KiB: only
        // the graphics line is looked at here.
        let graphics = |xml: &str, g: Graphics| -> Vec<String> {
            domain_differences(xml, node, g)
                .into_iter()
                .filter(|d| d.starts_with("graphics"))
                .collect()
        };
        assert!(graphics(&headless, Graphics::None).is_empty());
        assert!(graphics(&vnc, Graphics::Vnc).is_empty());
        assert_eq!(
            graphics(&headless, Graphics::Vnc),
            ["graphics is none, the plan says vnc"]
        );
        assert_eq!(
            graphics(&vnc, Graphics::Spice),
            ["graphics is vnc, the plan says spice"]
        );
        assert_eq!(
            graphics(&vnc, Graphics::None),
            ["graphics is vnc, the plan says none"]
        );
    }
}
