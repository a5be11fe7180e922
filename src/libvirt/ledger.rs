//! The record of what shiftlab created for a cluster on libvirt. Domains and
//! networks carry ownership metadata in their XML; pools and volumes cannot (libvirt
//! has no metadata for them), so they are recorded here — before they are created,
//! so that a crash in between still leaves a record destroy can follow.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::files::{read_json, write_json};
use crate::state::{ClusterDir, StateDir};

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

pub fn load(cluster: &ClusterDir) -> Result<Option<Ledger>> {
    read_json(&cluster.ledger())
}

pub fn save(cluster: &ClusterDir, l: &Ledger) -> Result<()> {
    write_json(&cluster.ledger(), l)
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
    /// (libvirt URI, pool, the base name of a file's path, the base volume with
    /// its content): the same image found under another path, so it is not
    /// imported twice (`apply::same_content`).
    #[serde(default)]
    pub base_aliases: Vec<(String, String, String, String)>,
}

pub fn load_host(state: &StateDir) -> Result<HostRecord> {
    Ok(
        read_json(&state.libvirt_host_record())?.unwrap_or_else(|| HostRecord {
            format: LEDGER_FORMAT,
            ..HostRecord::default()
        }),
    )
}

pub fn save_host(state: &StateDir, r: &HostRecord) -> Result<()> {
    write_json(&state.libvirt_host_record(), r)
}
