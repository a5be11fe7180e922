//! The record of what shiftlab created for a cluster on libvirt. Domains and
//! networks carry ownership metadata in their XML; pools and volumes cannot (libvirt
//! has no metadata for them), so they are recorded here — before they are created,
//! so that a crash in between still leaves a record destroy can follow.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::files::write_atomic;

pub const LEDGER_FORMAT: u32 = 1;

#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ledger {
    pub format: u32,
    pub uri: String,
    pub pool: String,
    /// Volumes created (or about to be) for this cluster, by name.
    pub volumes: Vec<String>,
    /// Base image volumes this cluster uses.
    pub base_volumes: Vec<String>,
}

pub fn path(cluster_dir: &Path) -> PathBuf {
    cluster_dir.join("libvirt.json")
}

pub fn load(cluster_dir: &Path) -> Result<Option<Ledger>> {
    let p = path(cluster_dir);
    match std::fs::read_to_string(&p) {
        Ok(t) => Ok(Some(
            serde_json::from_str(&t).with_context(|| format!("reading {}", p.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
    }
}

pub fn save(cluster_dir: &Path, l: &Ledger) -> Result<()> {
    let mut text = serde_json::to_string_pretty(l)?;
    text.push('\n');
    write_atomic(&path(cluster_dir), text.as_bytes())
}

impl Ledger {
    /// Record volumes before they are created; returns whether anything was new.
    pub fn add_volumes<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) -> bool {
        let mut changed = false;
        for n in names {
            if !self.volumes.iter().any(|v| v == n) {
                self.volumes.push(n.to_string());
                changed = true;
            }
        }
        changed
    }
}

/// What shiftlab created on a libvirt host that outlives one cluster: the pools it
/// made and the base images it imported. `destroy --purge-images` removes them once
/// no cluster uses them.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostRecord {
    pub format: u32,
    /// (libvirt URI, pool)
    pub pools: Vec<(String, String)>,
    /// (libvirt URI, pool, volume)
    pub base_images: Vec<(String, String, String)>,
}

pub fn host_record_path(state_root: &Path) -> PathBuf {
    state_root.join("libvirt-host.json")
}

pub fn load_host(state_root: &Path) -> Result<HostRecord> {
    let p = host_record_path(state_root);
    match std::fs::read_to_string(&p) {
        Ok(t) => serde_json::from_str(&t).with_context(|| format!("reading {}", p.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HostRecord {
            format: LEDGER_FORMAT,
            ..HostRecord::default()
        }),
        Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
    }
}

pub fn save_host(state_root: &Path, r: &HostRecord) -> Result<()> {
    let mut text = serde_json::to_string_pretty(r)?;
    text.push('\n');
    write_atomic(&host_record_path(state_root), text.as_bytes())
}
