//! Virtual media images in a libvirt storage pool: each image is streamed
//! once from its URL into a volume through a libvirt upload stream (no
//! temporary copy), hashed on the way, and reused while any domain uses it:
//! the same URL is revalidated with a conditional GET, and the same content
//! under another URL maps to the existing volume. Volumes nobody uses are
//! deleted on eject. Images come through [`Fetcher`], under the BMC's
//! image-source rule.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use virt::storage_vol::StorageVol;

use super::fetch::Fetcher;
use super::machine::MachineError;
use crate::libvirt::xml::{parse, write};
use crate::libvirt::{Host, MEDIA_VOLUME_PREFIX as VOLUME_PREFIX};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Entry {
    url: String,
    etag: Option<String>,
    last_modified: Option<String>,
    length: u64,
    sha256: String,
    volume: String,
}

#[derive(Debug, Default)]
struct State {
    entries: Vec<Entry>,
    /// Volumes an insert is about to attach: never deleted meanwhile.
    pins: HashMap<String, usize>,
}

/// The image cache of one pool.
pub struct MediaStore {
    pool: String,
    index_path: PathBuf,
    max_bytes: u64,
    state: Mutex<State>,
    url_locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    fetcher: Fetcher,
}

impl MediaStore {
    pub fn new(pool: &str, index_path: PathBuf, max_bytes: u64, fetcher: Fetcher) -> Self {
        let entries = std::fs::read(&index_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        MediaStore {
            pool: pool.to_string(),
            index_path,
            max_bytes,
            state: Mutex::new(State {
                entries,
                pins: HashMap::new(),
            }),
            url_locks: Mutex::new(HashMap::new()),
            fetcher,
        }
    }

    pub fn pool(&self) -> &str {
        &self.pool
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn save(&self, entries: &[Entry]) {
        let write = || -> Result<()> {
            if let Some(dir) = self.index_path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            crate::files::write_private(&self.index_path, &serde_json::to_vec_pretty(entries)?)
        };
        if let Err(e) = write() {
            tracing::warn!(error = format!("{e:#}"), "saving the media cache index");
        }
    }

    fn volume(&self, host: &Host, name: &str) -> Option<StorageVol> {
        let pool = host.pool(&self.pool).ok()??;
        Host::volume(&pool, name).ok()?
    }

    /// Returns a pinned volume holding the image at `url`, downloading it if
    /// needed. Call [`MediaStore::unpin`] once the volume is attached.
    pub fn acquire(&self, host: &Host, url: &str) -> Result<String, MachineError> {
        let url_lock = {
            let mut locks = self.url_locks.lock().unwrap_or_else(|e| e.into_inner());
            locks.entry(url.to_string()).or_default().clone()
        };
        let _same_url = url_lock.lock().unwrap_or_else(|e| e.into_inner());
        let cached = {
            let st = self.state();
            st.entries.iter().find(|e| e.url == url).cloned()
        };
        let cached = cached.filter(|e| self.volume(host, &e.volume).is_some());
        let mut conditions = Vec::new();
        if let Some(c) = &cached {
            if let Some(etag) = &c.etag {
                conditions.push(("If-None-Match", etag.as_str()));
            }
            if let Some(lm) = &c.last_modified {
                conditions.push(("If-Modified-Since", lm.as_str()));
            }
        }
        let resp = self.fetcher.get(url, &conditions)?;
        if resp.status() == 304 {
            if let Some(c) = cached {
                if self.pin(host, &c.volume) {
                    tracing::info!(volume = %c.volume, "image unchanged, reusing its volume");
                    return Ok(c.volume);
                }
            }
        }
        if resp.status() != 200 {
            return Err(MachineError::BadRequest(format!(
                "fetching the image failed: HTTP {}",
                resp.status().as_u16()
            )));
        }
        let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok());
        let length: u64 = header("Content-Length")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                MachineError::BadRequest("the image server sent no Content-Length".into())
            })?;
        if length == 0 || length > self.max_bytes {
            return Err(MachineError::BadRequest(format!(
                "the image is {length} bytes; accepted sizes are 1 to {} bytes",
                self.max_bytes
            )));
        }
        let etag = header("ETag").map(str::to_string);
        let last_modified = header("Last-Modified").map(str::to_string);
        let name = format!(
            "{VOLUME_PREFIX}{}.iso",
            hex::encode(super::auth::random_bytes(6).map_err(MachineError::Backend)?)
        );
        self.pin_name(&name);
        let started = std::time::Instant::now();
        let digest =
            match self.stream_into_volume(host, &name, length, resp.into_body().into_reader()) {
                Ok(d) => d,
                Err(e) => {
                    self.unpin(&name);
                    return Err(e);
                }
            };
        tracing::info!(volume = %name, bytes = length, elapsed_ms = started.elapsed().as_millis() as u64, "image streamed into the pool");
        let mut st = self.state();
        // Same content already stored under another volume: keep that one.
        let same = st
            .entries
            .iter()
            .find(|e| e.sha256 == digest && e.volume != name)
            .map(|e| e.volume.clone())
            .filter(|v| self.volume(host, v).is_some());
        let volume = match same {
            Some(existing) => {
                *st.pins.entry(existing.clone()).or_default() += 1;
                if let Some(v) = self.volume(host, &name) {
                    let _ = v.delete(0);
                }
                Self::unpin_locked(&mut st, &name);
                existing
            }
            None => name,
        };
        st.entries.retain(|e| e.url != url);
        st.entries.push(Entry {
            url: url.to_string(),
            etag,
            last_modified,
            length,
            sha256: digest,
            volume: volume.clone(),
        });
        let entries = st.entries.clone();
        drop(st);
        self.save(&entries);
        Ok(volume)
    }

    fn stream_into_volume(
        &self,
        host: &Host,
        name: &str,
        length: u64,
        body: impl std::io::Read,
    ) -> Result<String, MachineError> {
        let pool = host
            .pool(&self.pool)?
            .with_context(|| format!("no pool {}", self.pool))?;
        let vol = StorageVol::create_xml(&pool, &write::media_volume_xml(name, length), 0)
            .with_context(|| format!("creating volume {name}"))?;
        let mut image = Image {
            body,
            length,
            total: 0,
            hasher: Sha256::new(),
        };
        match host.upload(&vol, &mut image, length) {
            Ok(()) => Ok(hex::encode(image.hasher.finalize())),
            Err(e) => {
                let _ = vol.delete(0);
                // The image's own faults are the client's to fix; the rest is ours.
                if e.downcast_ref::<std::io::Error>().is_some() {
                    Err(MachineError::BadRequest(format!("{e:#}")))
                } else {
                    Err(MachineError::Backend(e))
                }
            }
        }
    }

    fn pin_name(&self, name: &str) {
        *self.state().pins.entry(name.to_string()).or_default() += 1;
    }

    /// Pins an existing volume; false if it is gone.
    fn pin(&self, host: &Host, name: &str) -> bool {
        let mut st = self.state();
        if self.volume(host, name).is_none() {
            return false;
        }
        *st.pins.entry(name.to_string()).or_default() += 1;
        true
    }

    fn unpin_locked(st: &mut State, name: &str) {
        if let Some(n) = st.pins.get_mut(name) {
            *n -= 1;
            if *n == 0 {
                st.pins.remove(name);
            }
        }
    }

    pub fn unpin(&self, name: &str) {
        Self::unpin_locked(&mut self.state(), name);
    }

    /// Deletes `volume` if the BMC created it, no insert is using it and no
    /// domain on the connection refers to it.
    pub fn release(&self, host: &Host, volume: &str) -> Result<()> {
        if !volume.starts_with(VOLUME_PREFIX) {
            return Ok(());
        }
        let mut st = self.state();
        if st.pins.contains_key(volume) || in_use(host, &self.pool, volume)? {
            return Ok(());
        }
        if let Some(v) = self.volume(host, volume) {
            v.delete(0)
                .with_context(|| format!("deleting volume {volume}"))?;
            tracing::info!(%volume, "deleted unused media volume");
        }
        st.entries.retain(|e| e.volume != volume);
        let entries = st.entries.clone();
        drop(st);
        self.save(&entries);
        Ok(())
    }
}

/// An image body on its way into a volume: hashed, and held to its
/// Content-Length (a short or long body is an error, which aborts the upload).
struct Image<R> {
    body: R,
    length: u64,
    total: u64,
    hasher: Sha256,
}

impl<R: std::io::Read> std::io::Read for Image<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self
            .body
            .read(buf)
            .map_err(|e| std::io::Error::new(e.kind(), format!("reading the image: {e}")))?;
        self.total += n as u64;
        if self.total > self.length {
            return Err(std::io::Error::other(
                "the image is longer than its Content-Length",
            ));
        }
        if n == 0 && self.total != self.length {
            return Err(std::io::Error::other(format!(
                "the image ended after {} of {} bytes",
                self.total, self.length
            )));
        }
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Whether any domain (defined or running) refers to `pool/volume`.
fn in_use(host: &Host, pool: &str, volume: &str) -> Result<bool> {
    let vol_path = host
        .pool(pool)
        .ok()
        .flatten()
        .and_then(|p| Host::volume(&p, volume).ok().flatten())
        .and_then(|v| v.path().ok());
    for dom in host.conn.list_all_domains(0).context("listing domains")? {
        let mut xmls = vec![dom
            .xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE)
            .context("reading domain xml")?];
        if dom.is_active().unwrap_or(false) {
            xmls.push(dom.xml_desc(0).context("reading domain xml")?);
        }
        for xml in xmls {
            let view = parse::domain(&xml)?;
            let uses = view.cdroms.iter().any(|c| {
                c.volume
                    .as_ref()
                    .is_some_and(|(p, v)| p == pool && v == volume)
                    || (c.file.is_some() && c.file == vol_path)
            }) || view.disks.iter().any(|(_, s)| {
                s.as_deref() == Some(&format!("{pool}/{volume}")) || (s.is_some() && *s == vol_path)
            });
            if uses {
                return Ok(true);
            }
        }
    }
    Ok(false)
}
