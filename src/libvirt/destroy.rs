//! `destroy`: remove every libvirt object shiftlab created for a cluster, and nothing
//! else. Domains and networks are found by their ownership metadata; volumes through
//! the ledger (never merely because an owned domain uses them: a volume the user put
//! into a node's CD-ROM is the user's).

use anyhow::{Context, Result};

use super::ledger;
use super::xml::parse::{domain_storage, DomainStorage};
use super::xml::write::console_log_path;
use super::{Host, MEDIA_VOLUME_PREFIX};
use crate::state::{ClusterDir, ClusterName, StateDir};

/// Stop a domain and undefine it with its NVRAM, managed save and snapshot metadata.
fn stop_and_undefine(d: &virt::domain::Domain, name: &str) -> Result<()> {
    if d.is_active()? {
        d.destroy().with_context(|| format!("stopping {name}"))?;
    }
    // A driver that knows no NVRAM (and so has none to keep) refuses the flag;
    // a plain undefine is then the same thing.
    let flags = virt::sys::VIR_DOMAIN_UNDEFINE_NVRAM
        | virt::sys::VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
        | virt::sys::VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA;
    if d.undefine_flags(flags).is_err() {
        d.undefine().with_context(|| format!("undefining {name}"))?;
    }
    Ok(())
}

/// The serial console log shiftlab configured for `domain`, if its XML names the one
/// shiftlab writes (`/var/log/libvirt/qemu/<domain>-console.log`) and nothing else.
pub fn own_console_log(domain: &str, xml: &str) -> Option<String> {
    let expected = console_log_path(domain);
    let doc = roxmltree::Document::parse(xml).ok()?;
    doc.descendants()
        .filter(|n| n.tag_name().name() == "log")
        .filter(|n| n.parent().is_some_and(|p| p.tag_name().name() == "serial"))
        .filter_map(|n| n.attribute("file"))
        .find(|f| *f == expected)
        .map(str::to_string)
}

/// Remove console logs of removed domains: only on a local hypervisor (a remote
/// host's files are out of reach and say so).
fn remove_console_logs(host: &Host, logs: &[String], removed: &mut Vec<String>) {
    for log in logs {
        if !host.is_local() {
            removed.push(format!(
                "(console log {log} left on the remote host {})",
                host.uri
            ));
            continue;
        }
        match std::fs::remove_file(log) {
            Ok(()) => removed.push(format!("console log {log}")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("removing {log}: {e}"),
        }
    }
}

/// Whether `name` is a volume the BMC streamed into the pool (virtual media): ours,
/// by the prefix only the BMC uses.
fn is_bmc_media(name: &str) -> bool {
    name.starts_with(MEDIA_VOLUME_PREFIX)
}

/// Remove the cluster's objects; returns what was removed, in order.
pub fn destroy(
    host: &Host,
    cluster: &ClusterName,
    state: &StateDir,
    purge_images: bool,
) -> Result<Vec<String>> {
    let cluster_dir = state.cluster(cluster.as_str());
    let mut removed = Vec::new();
    let ledger = ledger::load(&cluster_dir)?;
    // Volumes shiftlab created for the cluster: exactly the ledger's.
    let mut volumes: Vec<(String, String)> = Vec::new();
    if let Some(l) = &ledger {
        volumes.extend(l.volumes.iter().map(|v| (l.pool.clone(), v.clone())));
    }
    // Volumes merely used by the cluster's domains: BMC media may go once unused,
    // anything else is the user's and stays.
    let mut used: Vec<(String, String)> = Vec::new();
    let mut logs = Vec::new();

    let owned = host.owned_domains()?;
    for (d, o) in owned.iter().filter(|(_, o)| o.cluster == cluster.as_str()) {
        let name = d.name()?;
        let xml = d.xml_desc(0)?;
        let storage = domain_storage(&xml);
        logs.extend(own_console_log(&name, &xml));
        stop_and_undefine(d, &name)?;
        removed.push(format!("domain {name} ({})", o.role));
        used.extend(storage.volumes);
        for f in &storage.files {
            if let Ok(v) = host.conn.lookup_storage_vol_by_path(f) {
                if let Ok(vname) = v.name() {
                    let pool = v
                        .lookup_storage_pool()
                        .and_then(|p| p.name())
                        .unwrap_or_default();
                    used.push((pool, vname));
                }
            }
        }
    }
    // A volume still used by a remaining domain (anyone's) is never removed.
    let remaining: Vec<DomainStorage> = host
        .conn
        .list_all_domains(0)
        .context("listing domains")?
        .iter()
        .filter_map(|d| d.xml_desc(0).ok())
        .map(|x| domain_storage(&x))
        .collect();
    let still_used: Vec<(String, String)> =
        remaining.iter().flat_map(|s| s.volumes.clone()).collect();
    let still_used_files: Vec<String> = remaining.iter().flat_map(|s| s.files.clone()).collect();
    let mut left = Vec::new();
    for (pool, vol) in used {
        if volumes.contains(&(pool.clone(), vol.clone())) {
            continue;
        }
        if is_bmc_media(&vol) {
            volumes.push((pool, vol));
        } else if let Some(p) = host.pool(&pool)? {
            if Host::volume(&p, &vol).ok().flatten().is_some() {
                left.push(format!("{pool}/{vol}"));
            }
        }
    }
    volumes.sort();
    volumes.dedup();
    for (pool_name, vol) in &volumes {
        if still_used.contains(&(pool_name.clone(), vol.clone())) {
            continue;
        }
        let Some(pool) = host.pool(pool_name)? else {
            continue;
        };
        if !pool.is_active()? {
            continue;
        }
        let _ = pool.refresh(0);
        if let Some(v) = Host::volume(&pool, vol)? {
            if v.path().is_ok_and(|p| still_used_files.contains(&p)) {
                continue;
            }
            v.delete(0)
                .with_context(|| format!("deleting volume {vol}"))?;
            removed.push(format!("volume {vol}"));
        }
    }
    left.sort();
    left.dedup();
    for l in left {
        removed.push(format!("(volume {l} left: not shiftlab's)"));
    }
    remove_console_logs(host, &logs, &mut removed);

    for (n, _) in host
        .owned_networks()?
        .iter()
        .filter(|(_, o)| o.cluster == cluster.as_str())
    {
        let name = n.name()?;
        if n.is_active()? {
            n.destroy()
                .with_context(|| format!("stopping network {name}"))?;
        }
        n.undefine()
            .with_context(|| format!("undefining network {name}"))?;
        removed.push(format!("network {name}"));
    }

    if let Some(dir) = state.remove_cluster(cluster)? {
        removed.push(format!("state {}", dir.display()));
    }
    if purge_images {
        removed.extend(purge_base_images(host, state)?);
    }
    Ok(removed)
}

/// Base images go only when no remaining cluster records them and no volume still
/// has them as backing store; a pool goes when shiftlab made it and it is empty.
fn purge_base_images(host: &Host, state: &StateDir) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let mut rec = ledger::load_host(state)?;
    let clusters: Vec<ledger::Ledger> = state
        .cluster_dirs()?
        .iter()
        .filter_map(|c| ledger::load(c).ok().flatten())
        .collect();
    let mut kept = Vec::new();
    for (uri, pool_name, base) in std::mem::take(&mut rec.base_images) {
        let keep = |k: &mut Vec<_>| k.push((uri.clone(), pool_name.clone(), base.clone()));
        if uri != host.uri || clusters.iter().any(|c| c.base_volumes.contains(&base)) {
            keep(&mut kept);
            continue;
        }
        let Some(pool) = host.pool(&pool_name)? else {
            continue;
        };
        if !pool.is_active()? {
            keep(&mut kept);
            continue;
        }
        pool.refresh(0)?;
        let marker = Host::volume(&pool, &super::apply::base_marker_name(&base))?;
        let Some(bv) = Host::volume(&pool, &base)? else {
            if let Some(m) = marker {
                m.delete(0)
                    .with_context(|| format!("deleting the marker of {base}"))?;
            }
            continue;
        };
        let path = bv.path()?;
        let backing = format!("<path>{path}</path>");
        let backed = pool.list_all_volumes(0)?.iter().any(|v| {
            v.name().is_ok_and(|n| n != base) && v.xml_desc(0).is_ok_and(|x| x.contains(&backing))
        });
        if backed {
            keep(&mut kept);
            continue;
        }
        // The marker first: a base volume without it is never taken as complete.
        if let Some(m) = marker {
            m.delete(0)
                .with_context(|| format!("deleting the marker of {base}"))?;
        }
        bv.delete(0).with_context(|| format!("deleting {base}"))?;
        removed.push(format!("volume {base}"));
    }
    rec.base_images = kept;
    // An alias of a base that is gone is no alias.
    rec.base_aliases.retain(|(u, p, _, v)| {
        *u != host.uri
            || rec
                .base_images
                .iter()
                .any(|(bu, bp, bv)| bu == u && bp == p && bv == v)
    });
    let mut pools_kept = Vec::new();
    for (uri, pool_name) in std::mem::take(&mut rec.pools) {
        let in_use = uri != host.uri
            || clusters.iter().any(|c| c.pool == pool_name)
            || rec
                .base_images
                .iter()
                .any(|(u, p, _)| *u == uri && *p == pool_name);
        let pool = if in_use { None } else { host.pool(&pool_name)? };
        match pool {
            Some(p)
                if p.is_active()? && {
                    p.refresh(0)?;
                    p.num_of_volumes()? == 0
                } =>
            {
                p.destroy().context("stopping the pool")?;
                let _ = p.delete(0);
                p.undefine().context("undefining the pool")?;
                removed.push(format!("pool {pool_name}"));
            }
            None if !in_use => {}
            _ => pools_kept.push((uri, pool_name)),
        }
    }
    rec.pools = pools_kept;
    ledger::save_host(state, &rec)?;
    Ok(removed)
}

/// Remove one node (the bootstrap after bootstrap-complete): its domain and its
/// volumes, and forget them in the ledger. Running it again does nothing.
pub fn remove_node(
    host: &Host,
    cluster: &str,
    node: &crate::plan::Node,
    pool_name: &str,
    cluster_dir: &ClusterDir,
) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let mut logs = Vec::new();
    if let Some(d) = host.domain(&node.name)? {
        match super::owner_of_domain(&d)? {
            Some(o) if o.cluster == cluster => {}
            _ => anyhow::bail!("domain {} is not shiftlab's for {cluster}", node.name),
        }
        logs.extend(own_console_log(&node.name, &d.xml_desc(0)?));
        stop_and_undefine(&d, &node.name)?;
        removed.push(format!("domain {}", node.name));
    }
    remove_console_logs(host, &logs, &mut removed);
    let names: Vec<String> = node.volumes().cloned().collect();
    if let Some(pool) = host.pool(pool_name)? {
        if pool.is_active()? {
            let _ = pool.refresh(0);
            for v in &names {
                if let Some(vol) = Host::volume(&pool, v)? {
                    vol.delete(0)
                        .with_context(|| format!("deleting volume {v}"))?;
                    removed.push(format!("volume {v}"));
                }
            }
        }
    }
    if let Some(mut l) = ledger::load(cluster_dir)? {
        l.volumes.retain(|v| !names.contains(v));
        ledger::save(cluster_dir, &l)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_console_log_shiftlab_configured() {
        let xml = |f: &str| {
            format!("<domain><devices><serial type='pty'><log file='{f}' append='on'/></serial></devices></domain>")
        };
        assert_eq!(
            own_console_log(
                "lab1-worker-0",
                &xml("/var/log/libvirt/qemu/lab1-worker-0-console.log")
            ),
            Some("/var/log/libvirt/qemu/lab1-worker-0-console.log".into())
        );
        // A log the user pointed elsewhere, or another domain's, is not ours to delete.
        assert_eq!(
            own_console_log("lab1-worker-0", &xml("/home/me/keep.log")),
            None
        );
        assert_eq!(
            own_console_log(
                "lab1-worker-0",
                &xml("/var/log/libvirt/qemu/lab1-worker-1-console.log")
            ),
            None
        );
        assert_eq!(own_console_log("lab1-worker-0", "not xml"), None);
    }

    #[test]
    fn bmc_media_by_prefix() {
        assert!(is_bmc_media("shiftlab-media-0a1b.iso"));
        assert!(!is_bmc_media("user.iso"));
    }
}
