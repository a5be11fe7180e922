//! `destroy`: remove every libvirt object shiftlab created for a cluster, and nothing
//! else. Domains and networks are found by their ownership metadata; volumes through
//! the ledger and the owned domains' own XML.

use std::path::Path;

use anyhow::{Context, Result};

use super::ledger;
use super::{domain_storage, Host};

/// Remove the cluster's objects; returns what was removed, in order.
pub fn destroy(
    host: &Host,
    cluster: &str,
    cluster_dir: &Path,
    purge_images: bool,
) -> Result<Vec<String>> {
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
        if d.is_active()? {
            d.destroy().with_context(|| format!("stopping {name}"))?;
        }
        let flags = virt::sys::VIR_DOMAIN_UNDEFINE_NVRAM
            | virt::sys::VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
            | virt::sys::VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA;
        d.undefine_flags(flags)
            .with_context(|| format!("undefining {name}"))?;
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

    if let (true, Some(l)) = (purge_images, &ledger) {
        removed.extend(purge_base_images(host, cluster, cluster_dir, l)?);
    }

    if cluster_dir.exists() {
        std::fs::remove_dir_all(cluster_dir)
            .with_context(|| format!("removing {}", cluster_dir.display()))?;
        removed.push(format!("state {}", cluster_dir.display()));
    }
    Ok(removed)
}

/// Base images go only when no other cluster records them and no volume in the pool
/// still has them as backing store; the pool goes when shiftlab made it and it is empty.
fn purge_base_images(
    host: &Host,
    cluster: &str,
    cluster_dir: &Path,
    l: &ledger::Ledger,
) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let Some(pool) = host.pool(&l.pool)? else {
        return Ok(removed);
    };
    if !pool.is_active()? {
        return Ok(removed);
    }
    pool.refresh(0)?;
    let others: Vec<ledger::Ledger> = cluster_dir
        .parent()
        .and_then(|p| std::fs::read_dir(p).ok())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy() != cluster)
        .filter_map(|e| ledger::load(&e.path()).ok().flatten())
        .collect();
    let vols = pool.list_all_volumes(0)?;
    for base in &l.base_volumes {
        if others.iter().any(|o| o.base_volumes.contains(base)) {
            continue;
        }
        let Some(bv) = Host::volume(&pool, base)? else {
            continue;
        };
        let path = bv.path()?;
        let backed = vols.iter().any(|v| {
            v.xml_desc(0)
                .map(|x| {
                    x.contains(&format!("<path>{path}</path>"))
                        && !x.contains(&format!("<name>{base}</name>"))
                })
                .unwrap_or(false)
        });
        if backed {
            continue;
        }
        bv.delete(0).with_context(|| format!("deleting {base}"))?;
        removed.push(format!("volume {base}"));
    }
    pool.refresh(0)?;
    let pool_owned_elsewhere = others.iter().any(|o| o.pool == l.pool);
    if l.created_pool && !pool_owned_elsewhere && pool.num_of_volumes()? == 0 {
        pool.destroy().context("stopping the pool")?;
        let _ = pool.delete(0);
        pool.undefine().context("undefining the pool")?;
        removed.push(format!("pool {}", l.pool));
    }
    Ok(removed)
}
