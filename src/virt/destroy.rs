//! `destroy`: remove every libvirt object shiftlab created for a cluster, and nothing
//! else. Domains and networks are found by their ownership metadata; volumes through
//! the ledger and the owned domains' own XML.

use std::path::Path;

use anyhow::{Context, Result};

use super::ledger;
use super::{domain_storage, Host};

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

/// Remove the cluster's objects; returns what was removed, in order.
pub fn destroy(
    host: &Host,
    cluster: &str,
    state_root: &Path,
    purge_images: bool,
) -> Result<Vec<String>> {
    let cluster_dir = &state_root.join("clusters").join(cluster);
    let mut removed = Vec::new();
    let ledger = ledger::load(cluster_dir)?;
    let mut volumes: Vec<(String, String)> = Vec::new();
    let mut files: Vec<String> = Vec::new();
    if let Some(l) = &ledger {
        volumes.extend(l.volumes.iter().map(|v| (l.pool.clone(), v.clone())));
    }

    let owned = host.owned_domains()?;
    for (d, o) in owned.iter().filter(|(_, o)| o.cluster == cluster) {
        let name = d.name()?;
        let storage = domain_storage(&d.xml_desc(0)?);
        stop_and_undefine(d, &name)?;
        removed.push(format!("domain {name} ({})", o.role));
        volumes.extend(storage.volumes);
        files.extend(storage.files);
    }
    // A file (Ignition, an inserted ISO) goes only when no remaining domain uses it.
    let still_used: Vec<String> = host
        .owned_domains()?
        .iter()
        .flat_map(|(d, _)| {
            d.xml_desc(0)
                .map(|x| domain_storage(&x).files)
                .unwrap_or_default()
        })
        .collect();
    for f in files.iter().filter(|f| !still_used.contains(f)) {
        if let Ok(v) = host.conn.lookup_storage_vol_by_path(f) {
            if let Ok(name) = v.name() {
                let pool = v
                    .lookup_storage_pool()
                    .and_then(|p| p.name())
                    .unwrap_or_default();
                volumes.push((pool, name));
            }
        }
    }
    volumes.sort();
    volumes.dedup();
    for (pool_name, vol) in &volumes {
        let Some(pool) = host.pool(pool_name)? else {
            continue;
        };
        if !pool.is_active()? {
            continue;
        }
        let _ = pool.refresh(0);
        if let Some(v) = Host::volume(&pool, vol)? {
            v.delete(0)
                .with_context(|| format!("deleting volume {vol}"))?;
            removed.push(format!("volume {vol}"));
        }
    }

    for (n, _) in host
        .owned_networks()?
        .iter()
        .filter(|(_, o)| o.cluster == cluster)
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

    if cluster_dir.exists() {
        std::fs::remove_dir_all(cluster_dir)
            .with_context(|| format!("removing {}", cluster_dir.display()))?;
        removed.push(format!("state {}", cluster_dir.display()));
    }
    if purge_images {
        removed.extend(purge_base_images(host, state_root)?);
    }
    Ok(removed)
}

/// Base images go only when no remaining cluster records them and no volume still
/// has them as backing store; a pool goes when shiftlab made it and it is empty.
fn purge_base_images(host: &Host, state_root: &Path) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let mut rec = ledger::load_host(state_root)?;
    let clusters: Vec<ledger::Ledger> = std::fs::read_dir(state_root.join("clusters"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| ledger::load(&e.path()).ok().flatten())
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
        let Some(bv) = Host::volume(&pool, &base)? else {
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
        bv.delete(0).with_context(|| format!("deleting {base}"))?;
        removed.push(format!("volume {base}"));
    }
    rec.base_images = kept;
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
    ledger::save_host(state_root, &rec)?;
    Ok(removed)
}

/// Remove one node (the bootstrap after bootstrap-complete): its domain and its
/// volumes, and forget them in the ledger. Running it again does nothing.
pub fn remove_node(
    host: &Host,
    cluster: &str,
    node: &crate::plan::Node,
    pool_name: &str,
    state_root: &Path,
) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    if let Some(d) = host.domain(&node.name)? {
        match super::owner_of_domain(&d)? {
            Some(o) if o.cluster == cluster => {}
            _ => anyhow::bail!("domain {} is not shiftlab's for {cluster}", node.name),
        }
        stop_and_undefine(&d, &node.name)?;
        removed.push(format!("domain {}", node.name));
    }
    let names: Vec<String> = node
        .disks
        .iter()
        .map(|d| d.volume.clone())
        .chain(node.ignition_volume.clone())
        .collect();
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
    let dir = state_root.join("clusters").join(cluster);
    if let Some(mut l) = ledger::load(&dir)? {
        l.volumes.retain(|v| !names.contains(v));
        ledger::save(&dir, &l)?;
    }
    Ok(removed)
}
