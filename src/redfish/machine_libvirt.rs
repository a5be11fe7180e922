//! The [`Machine`] over libvirt: systems are persistent domains exposed by
//! ownership metadata (lab mode) or an allow-list (standalone mode). Every
//! read-modify-write of a domain definition runs under a per-domain lock;
//! reads never write.
//!
//! GETs cost no libvirt call: each exposed domain's power state and
//! definition (boot override, media, NICs, disks) are kept in memory and kept
//! true by libvirt's domain lifecycle events ([`crate::libvirt::events`]): a
//! start or stop behind the BMC's back (`virsh start`/`destroy`) flips the
//! cached power state, a (re)definition (`virsh edit`, `virsh define`) or any
//! other event drops the entry so the next GET reads it again. Changes made
//! through the BMC drop the entry at once, without waiting for the event.
//! When the connection closes (libvirtd restarted), the cache is emptied and
//! the next request reconnects and subscribes again (the resync); without
//! events (a driver that has none) every GET reads libvirt. Writes always
//! re-read the definition under the per-domain lock.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use anyhow::{Context as _, Result};
use virt::domain::Domain;
use virt::sys;

use super::machine::{BootState, Machine, MachineError};
use super::media::MediaStore;
use super::metadata::{BmcMeta, MediaRecord};
use super::model::*;
use crate::libvirt::events::{self, Change, Notice, Subscription};
use crate::libvirt::xml::{edit, parse, BootDevice, DomainView};
use crate::libvirt::{owner_of_domain, Host};
use crate::spec::Firmware;

/// Which domains are exposed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Domains whose shiftlab owner metadata names this cluster.
    Cluster(String),
    /// Domains named (or with a UUID) in the list.
    Allow(Vec<String>),
}

#[derive(Debug, Clone)]
pub struct LibvirtConfig {
    pub uri: String,
    pub scope: Scope,
    /// Storage pool for virtual media volumes.
    pub pool: String,
    /// Where the media cache index is kept.
    pub state_dir: PathBuf,
    pub max_image_bytes: u64,
    /// Where images may be fetched from.
    pub image_sources: super::source::ImageSources,
    /// CA that image servers' certificates must come from; `None`: not verified.
    pub media_ca: Option<PathBuf>,
}

/// A domain definition as the BMC reads it: libvirt's part and the BMC's record.
struct Definition {
    view: DomainView,
    meta: BmcMeta,
}

impl Definition {
    fn read(xml: &str) -> Result<Definition, MachineError> {
        Ok(Definition {
            view: parse::domain(xml)?,
            meta: BmcMeta::read(xml)?,
        })
    }

    fn has_media(&self) -> bool {
        self.view.cdroms.iter().any(|c| c.inserted())
    }

    /// The boot override the domain reports: the BMC's record when it still
    /// matches the definition, else what the definition says.
    fn boot_state(&self) -> BootState {
        let view = &self.view;
        match self.meta.boot {
            Some(b) if view.effective_first(device(b.first_device())) == view.first_boot => b,
            _ => BootState {
                target: target(view.first_boot),
                enabled: if view.first_boot.is_none() {
                    BootEnabled::Disabled
                } else {
                    BootEnabled::Continuous
                },
                previous: None,
            },
        }
    }

    /// The definition with the BMC's record changed by `f`.
    fn with_meta(&self, xml: &str, f: impl FnOnce(&mut BmcMeta)) -> Result<String, MachineError> {
        let mut meta = self.meta.clone();
        f(&mut meta);
        Ok(meta.write(xml)?)
    }
}

/// The device class a Redfish boot target names (`None` boots the disk).
fn device(t: BootTarget) -> BootDevice {
    match t {
        BootTarget::Cd => BootDevice::Cdrom,
        BootTarget::Pxe => BootDevice::Network,
        BootTarget::Hdd | BootTarget::None => BootDevice::Disk,
    }
}

fn target(d: Option<BootDevice>) -> BootTarget {
    match d {
        Some(BootDevice::Cdrom) => BootTarget::Cd,
        Some(BootDevice::Network) => BootTarget::Pxe,
        Some(BootDevice::Disk) => BootTarget::Hdd,
        None => BootTarget::None,
    }
}

fn firmware(mode: BootMode) -> Firmware {
    match mode {
        BootMode::UEFI => Firmware::Uefi,
        BootMode::Legacy => Firmware::Bios,
    }
}

fn mode(firmware: Firmware) -> BootMode {
    match firmware {
        Firmware::Uefi => BootMode::UEFI,
        Firmware::Bios => BootMode::Legacy,
    }
}

/// An exposed domain as a GET reports it: its definition, and its power
/// state, which lifecycle events flip in place.
struct Snapshot {
    def: Definition,
    disks: Vec<Disk>,
    active: AtomicBool,
    /// What [`Machine::peek`] hands out, built at first use: Off, then On.
    /// Immutable like the definition, so a body rendered from one stays true
    /// while this snapshot is the cache's entry and the power state matches.
    shared: [OnceLock<Arc<SystemInfo>>; 2],
}

impl Snapshot {
    /// The system as a GET reports it, with this power state.
    fn info(&self, uuid: &str, active: bool) -> SystemInfo {
        let power = if active {
            PowerState::On
        } else {
            PowerState::Off
        };
        let view = &self.def.view;
        let boot = self.def.boot_state();
        let media = match view.cdroms.iter().find(|c| c.inserted()) {
            Some(cd) => {
                let image = match (&cd.volume, &self.def.meta.media) {
                    (Some((p, v)), Some(m)) if *p == m.pool && *v == m.volume => {
                        Some(m.image.clone())
                    }
                    (Some((p, v)), _) => Some(format!("{p}/{v}")),
                    (None, _) => cd.file.clone(),
                };
                MediaState {
                    slot: MediaSlot::Cd,
                    inserted: true,
                    image,
                    write_protected: true,
                }
            }
            None => MediaState {
                slot: MediaSlot::Cd,
                inserted: false,
                image: None,
                write_protected: true,
            },
        };
        let disks = self.disks.clone();
        SystemInfo {
            uuid: uuid.to_string(),
            name: view.name.clone(),
            power,
            boot: BootOverride {
                target: boot.target,
                enabled: boot.enabled,
                mode: mode(view.firmware),
            },
            cpus: cpus(view),
            memory_mib: view.memory_kib / 1024,
            nics: view
                .macs
                .iter()
                .map(|m| Nic {
                    id: m.replace(':', ""),
                    mac: m.clone(),
                })
                .collect(),
            disks,
            media: vec![media],
            secure_boot: view.secure_boot,
        }
    }
}

/// The volume behind a disk's source as [`parse::domain`] reads it: a path,
/// or `pool/volume` for a `type='volume'` disk.
fn disk_volume(host: &Host, source: &str) -> Option<virt::storage_vol::StorageVol> {
    if source.starts_with('/') {
        return host.conn.lookup_storage_vol_by_path(source).ok();
    }
    let (pool, volume) = source.split_once('/')?;
    Host::volume(&host.pool(pool).ok()??, volume).ok()?
}

/// The processors a domain shows its guest: its `<cpu><topology>`, else one
/// socket per vCPU (QEMU's default); the model as `<cpu>` sets it.
fn cpus(view: &DomainView) -> Cpus {
    let model = match (view.cpu_mode.as_deref(), view.cpu_model.as_deref()) {
        (Some(mode @ ("host-passthrough" | "host-model" | "maximum")), _) => {
            format!("host CPU ({mode})")
        }
        (_, Some(model)) => format!("QEMU Virtual CPU ({model})"),
        // libvirt's and QEMU's default x86 model
        _ => "QEMU Virtual CPU (qemu64)".to_string(),
    };
    let mut cpus = match view.cpu_topology {
        Some((sockets, cores, threads)) => Cpus {
            sockets,
            cores,
            threads,
            model,
            arch: String::new(),
        },
        None => Cpus::flat(view.vcpus, &model),
    };
    // libvirt's default architecture is the host's; shiftlab's hosts are x86_64
    cpus.arch = view.arch.clone().unwrap_or_else(|| "x86_64".into());
    cpus
}

/// The in-memory state and what keeps it true; shared with the event callback.
#[derive(Default)]
struct Cache {
    /// By lower-case UUID.
    entries: Mutex<HashMap<String, Arc<Snapshot>>>,
    /// Bumped by every event and every change made through the BMC: a read
    /// that started before a bump does not enter the cache (it may be stale).
    generation: AtomicU64,
    /// Events arrive on the current connection; entries may be served.
    live: AtomicBool,
    /// The connection closed: reconnect (and resync) at the next request.
    closed: AtomicBool,
    /// Domains running on a consumed `Once` override (their live boot order is
    /// the override's, their definition's is not).
    once_live: Mutex<std::collections::HashSet<String>>,
}

impl Cache {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Snapshot>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn hear(&self, notice: Notice) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        match notice {
            Notice::Domain { uuid, change } => {
                let mut entries = self.entries();
                if change == Change::Stopped {
                    self.once().remove(&uuid);
                }
                match (change, entries.get(&uuid)) {
                    (Change::Started, Some(s)) => s.active.store(true, Ordering::SeqCst),
                    (Change::Stopped, Some(s)) => s.active.store(false, Ordering::SeqCst),
                    _ => {
                        entries.remove(&uuid);
                    }
                }
            }
            Notice::Closed => {
                self.live.store(false, Ordering::SeqCst);
                self.closed.store(true, Ordering::SeqCst);
                self.entries().clear();
            }
        }
    }

    fn once(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.once_live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A domain reset: was it running on a `Once` override (which that reset
    /// ends)?
    fn once_ended(&self, uuid: &str) -> bool {
        self.once().remove(uuid)
    }

    /// Forgets a domain the BMC itself just changed.
    fn invalidate(&self, uuid: &str) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries().remove(&uuid.to_ascii_lowercase());
    }
}

/// The connection and the event subscription on it.
struct Link {
    host: Host,
    _events: Option<Subscription>,
}

impl Link {
    fn open(uri: &str, cache: &Arc<Cache>) -> Result<Link> {
        events::ensure_loop()?;
        let host = Host::open(uri)?;
        let sink = cache.clone();
        let restart_uri = uri.to_string();
        let sub = match events::subscribe(&host.conn, move |n| {
            if let Notice::Domain {
                uuid,
                change: Change::Reset,
            } = &n
            {
                if sink.once_ended(uuid) {
                    let (uri, uuid) = (restart_uri.clone(), uuid.clone());
                    // Not on libvirt's event thread: the restart calls libvirt.
                    std::thread::spawn(move || restart_after_once(&uri, &uuid));
                }
            }
            sink.hear(n)
        }) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "no libvirt events: every GET reads libvirt"
                );
                None
            }
        };
        cache.entries().clear();
        cache.generation.fetch_add(1, Ordering::SeqCst);
        cache.closed.store(false, Ordering::SeqCst);
        cache.live.store(sub.is_some(), Ordering::SeqCst);
        Ok(Link { host, _events: sub })
    }
}

/// A `Once` override covers one boot (Redfish `BootSourceOverrideEnabled`,
/// DSP0268: "Once" — boot from the target on the next boot, then return to
/// the normal order). A reset of a running domain is a new boot to a real BMC,
/// but QEMU resets with the live boot order, the override's: a live ISO that
/// installed itself and rebooted would boot the ISO again. So a reset after a
/// `Once` boot becomes a power cycle, which starts from the definition's order
/// (the disk first).
fn restart_after_once(uri: &str, uuid: &str) {
    let run = || -> Result<String> {
        let host = Host::open(uri)?;
        let dom = host
            .conn
            .lookup_domain_by_uuid_string(uuid)
            .context("looking up the domain")?;
        let name = dom.name().unwrap_or_default();
        // Let libvirt settle the reset it is reporting first.
        std::thread::sleep(std::time::Duration::from_secs(1));
        dom.destroy().context("powering off")?;
        dom.create().context("powering on")?;
        // libvirt may still be finishing its handling of the old process's
        // reset and stop the new one (seen as "shut off (crashed)" seconds
        // after the start, under load): started again while it stands so.
        for _ in 0..5 {
            std::thread::sleep(std::time::Duration::from_secs(2));
            if crashed(&dom) {
                tracing::warn!(domain = %name, "stopped right after the power cycle; starting it again");
                dom.create().context("powering on again")?;
            }
        }
        Ok(name)
    };
    match run() {
        Ok(name) => tracing::info!(
            domain = %name,
            "reset after a one-time boot: power cycled to boot from its boot order"
        ),
        Err(e) => {
            tracing::warn!(%uuid, error = format!("{e:#}"), "power cycle after a one-time boot failed")
        }
    }
}

/// Is the domain shut off with libvirt's reason "crashed"?
fn crashed(dom: &Domain) -> bool {
    let (mut state, mut reason): (std::os::raw::c_int, std::os::raw::c_int) = (-1, -1);
    // SAFETY: dom is a valid domain handle; the out pointers live for the call.
    let ok = unsafe { sys::virDomainGetState(dom.as_ptr(), &mut state, &mut reason, 0) } == 0;
    ok && state == sys::VIR_DOMAIN_SHUTOFF as std::os::raw::c_int
        && reason == sys::VIR_DOMAIN_SHUTOFF_CRASHED as std::os::raw::c_int
}

pub struct LibvirtMachine {
    uri: String,
    link: RwLock<Arc<Link>>,
    cache: Arc<Cache>,
    scope: Scope,
    media: MediaStore,
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

fn backend(e: virt::error::Error, what: &str) -> MachineError {
    MachineError::Backend(anyhow::Error::new(e).context(what.to_string()))
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.chars().enumerate().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

impl LibvirtMachine {
    pub fn open(cfg: &LibvirtConfig) -> Result<Self> {
        let cache = Arc::new(Cache::default());
        let link = Link::open(&cfg.uri, &cache)?;
        Ok(LibvirtMachine {
            uri: cfg.uri.clone(),
            link: RwLock::new(Arc::new(link)),
            cache,
            scope: cfg.scope.clone(),
            media: MediaStore::new(
                &cfg.pool,
                cfg.state_dir.join("media-cache.json"),
                cfg.max_image_bytes,
                super::fetch::Fetcher::new(cfg.image_sources.clone(), cfg.media_ca.as_deref())?,
            ),
            locks: Mutex::new(HashMap::new()),
        })
    }

    /// Are GETs served from memory (events arrive on a live connection)?
    pub fn events_live(&self) -> bool {
        self.cache.live.load(Ordering::SeqCst)
    }

    /// The current connection; a new one (events subscribed again, cache
    /// emptied) when the last one closed.
    fn link(&self) -> Result<Arc<Link>, MachineError> {
        let current = self.link.read().unwrap_or_else(|e| e.into_inner()).clone();
        if !self.cache.closed.load(Ordering::SeqCst) && events::is_alive(&current.host.conn) {
            return Ok(current);
        }
        let mut slot = self.link.write().unwrap_or_else(|e| e.into_inner());
        if Arc::ptr_eq(&slot, &current) {
            let link = Link::open(&self.uri, &self.cache).map_err(MachineError::Backend)?;
            tracing::info!(uri = %self.uri, "reconnected to libvirt; cache resynced");
            *slot = Arc::new(link);
        }
        Ok(slot.clone())
    }

    /// The exposed domain as a GET reports it: from memory while events are
    /// live, else read (and remembered when no event came in between).
    fn snapshot(&self, uuid: &str) -> Result<Arc<Snapshot>, MachineError> {
        let key = uuid.to_ascii_lowercase();
        let link = self.link()?;
        if self.events_live() {
            if let Some(s) = self.cache.entries().get(&key) {
                return Ok(s.clone());
            }
        }
        let generation = self.cache.generation.load(Ordering::SeqCst);
        let dom = self.domain_on(&link.host, uuid)?;
        let def = Definition::read(&Self::config_xml(&dom)?)?;
        let active = dom
            .is_active()
            .map_err(|e| backend(e, "reading domain state"))?;
        let disks = def
            .view
            .disks
            .iter()
            .map(|(dev, src)| Disk {
                name: dev.clone(),
                capacity_bytes: src
                    .as_deref()
                    .and_then(|s| disk_volume(&link.host, s))
                    .and_then(|v| v.info().ok())
                    .map(|i| i.capacity),
            })
            .collect();
        let snap = Arc::new(Snapshot {
            def,
            disks,
            active: AtomicBool::new(active),
            shared: Default::default(),
        });
        if self.events_live() {
            let mut entries = self.cache.entries();
            if self.cache.generation.load(Ordering::SeqCst) == generation {
                entries.insert(key, snap.clone());
            }
        }
        Ok(snap)
    }

    fn exposed(&self, dom: &Domain, name: &str, uuid: &str) -> bool {
        match &self.scope {
            Scope::Cluster(c) => {
                owner_of_domain(dom).is_ok_and(|o| o.is_some_and(|o| o.cluster == *c))
            }
            Scope::Allow(list) => list
                .iter()
                .any(|a| a == name || a.eq_ignore_ascii_case(uuid)),
        }
    }

    /// The exposed domain with this UUID.
    fn domain(&self, uuid: &str) -> Result<Domain, MachineError> {
        self.domain_on(&self.link()?.host, uuid)
    }

    fn domain_on(&self, host: &Host, uuid: &str) -> Result<Domain, MachineError> {
        let dom = host
            .conn
            .lookup_domain_by_uuid_string(uuid)
            .map_err(|_| MachineError::NotFound)?;
        let name = dom.name().map_err(|e| backend(e, "reading domain name"))?;
        if !dom.is_persistent().unwrap_or(false) || !self.exposed(&dom, &name, uuid) {
            return Err(MachineError::NotFound);
        }
        Ok(dom)
    }

    fn lock(&self, uuid: &str) -> Arc<Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(uuid.to_ascii_lowercase()).or_default().clone()
    }

    fn config_xml(dom: &Domain) -> Result<String, MachineError> {
        dom.xml_desc(sys::VIR_DOMAIN_XML_INACTIVE | sys::VIR_DOMAIN_XML_SECURE)
            .map_err(|e| backend(e, "reading domain definition"))
    }

    fn define(&self, xml: &str) -> Result<(), MachineError> {
        let dom = self
            .link()?
            .host
            .conn
            .define_domain_xml(xml)
            .map_err(|e| backend(e, "redefining domain"))?;
        if let Ok(uuid) = dom.uuid_string() {
            self.cache.invalidate(&uuid);
        }
        Ok(())
    }

    /// Starts the domain and consumes an armed `Once` override. Caller holds the lock.
    fn start(&self, dom: &Domain) -> Result<(), MachineError> {
        dom.create().map_err(|e| backend(e, "starting domain"))?;
        let xml = Self::config_xml(dom)?;
        let def = Definition::read(&xml)?;
        if let Some(next) = def.boot_state().consume_once() {
            if let Ok(uuid) = dom.uuid_string() {
                self.cache.once().insert(uuid.to_ascii_lowercase());
            }
            let xml = edit::set_boot_order(&xml, device(next.first_device()))?;
            let xml = def.with_meta(&xml, |m| m.boot = Some(next))?;
            self.define(&xml)?;
            tracing::info!(domain = %def.view.name, target = %next.target, "one-time boot override consumed");
        }
        Ok(())
    }

    /// Applies a reset. Caller holds the domain's lock.
    fn reset_locked(&self, dom: &Domain, reset: ResetType) -> Result<(), MachineError> {
        let active = dom
            .is_active()
            .map_err(|e| backend(e, "reading domain state"))?;
        let off = || MachineError::Conflict("the system is powered off".into());
        match reset {
            ResetType::On | ResetType::ForceOn => {
                if !active {
                    self.start(dom)?;
                }
            }
            ResetType::ForceOff => {
                if active {
                    dom.destroy().map_err(|e| backend(e, "destroying domain"))?;
                }
            }
            ResetType::GracefulShutdown => {
                if !active {
                    return Err(off());
                }
                dom.shutdown()
                    .map_err(|e| backend(e, "shutting down domain"))?;
            }
            ResetType::GracefulRestart => {
                if !active {
                    return Err(off());
                }
                dom.reboot(0).map_err(|e| backend(e, "rebooting domain"))?;
            }
            ResetType::ForceRestart => {
                // destroy + start, so a changed definition (boot override,
                // media, firmware) takes effect, as on a real power cycle.
                if active {
                    dom.destroy().map_err(|e| backend(e, "destroying domain"))?;
                }
                self.start(dom)?;
            }
            ResetType::Nmi => {
                if !active {
                    return Err(off());
                }
                // SAFETY: the pointer is valid while `dom` lives.
                let rc = unsafe { sys::virDomainInjectNMI(dom.as_ptr(), 0) };
                if rc < 0 {
                    return Err(backend(virt::error::Error::last_error(), "injecting nmi"));
                }
            }
        }
        Ok(())
    }

    fn live_update(dom: &Domain, device: &str) {
        if !dom.is_active().unwrap_or(false) {
            return;
        }
        if let Err(e) = dom.update_device_flags(device, sys::VIR_DOMAIN_AFFECT_LIVE) {
            tracing::warn!(error = %e, "changing the running domain's cdrom; the change applies at the next start");
        }
    }
}

impl Machine for LibvirtMachine {
    fn list(&self) -> Result<Vec<SystemRef>, MachineError> {
        let doms = self
            .link()?
            .host
            .conn
            .list_all_domains(sys::VIR_CONNECT_LIST_DOMAINS_PERSISTENT)
            .map_err(|e| backend(e, "listing domains"))?;
        let mut out = Vec::new();
        for d in doms {
            let (Ok(name), Ok(uuid)) = (d.name(), d.uuid_string()) else {
                continue;
            };
            if self.exposed(&d, &name, &uuid) {
                out.push(SystemRef { uuid, name });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn resolve(&self, id: &str) -> Result<SystemRef, MachineError> {
        if is_uuid(id) {
            let snap = self.snapshot(id)?;
            return Ok(SystemRef {
                uuid: id.to_string(),
                name: snap.def.view.name.clone(),
            });
        }
        let dom = self
            .link()?
            .host
            .conn
            .lookup_domain_by_name(id)
            .map_err(|_| MachineError::NotFound)?;
        let uuid = dom
            .uuid_string()
            .map_err(|e| backend(e, "reading domain uuid"))?;
        let name = dom.name().map_err(|e| backend(e, "reading domain name"))?;
        if !dom.is_persistent().unwrap_or(false) || !self.exposed(&dom, &name, &uuid) {
            return Err(MachineError::NotFound);
        }
        // Canonical form is what libvirt prints; a UUID in another case is the same system.
        let uuid = if uuid.eq_ignore_ascii_case(id) {
            id.to_string()
        } else {
            uuid
        };
        Ok(SystemRef { uuid, name })
    }

    fn system(&self, uuid: &str) -> Result<SystemInfo, MachineError> {
        let snap = self.snapshot(uuid)?;
        Ok(snap.info(uuid, snap.active.load(Ordering::SeqCst)))
    }

    fn peek(&self, uuid: &str) -> Option<Arc<SystemInfo>> {
        if !self.events_live() || self.cache.closed.load(Ordering::SeqCst) {
            return None;
        }
        // A reconnect holds the write lock across libvirt calls: never wait for it.
        let link = self.link.try_read().ok()?.clone();
        if !events::is_alive(&link.host.conn) {
            return None;
        }
        // Only the canonical (lower-case, as libvirt prints it) UUID: any
        // other spelling is reported as requested, by `system`.
        let snap = self.cache.entries().get(uuid)?.clone();
        let active = snap.active.load(Ordering::SeqCst);
        let shared = snap.shared[usize::from(active)]
            .get_or_init(|| Arc::new(snap.info(uuid, active)))
            .clone();
        Some(shared)
    }

    fn reset(&self, uuid: &str, reset: ResetType) -> Result<(), MachineError> {
        let dom = self.domain(uuid)?;
        let lock = self.lock(uuid);
        let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
        // A GET right after this request must not serve the state from
        // before it, whatever the event's timing.
        let result = self.reset_locked(&dom, reset);
        self.cache.invalidate(uuid);
        result
    }

    fn set_boot(&self, uuid: &str, patch: BootPatch) -> Result<(), MachineError> {
        let dom = self.domain(uuid)?;
        let lock = self.lock(uuid);
        let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
        let xml = Self::config_xml(&dom)?;
        let def = Definition::read(&xml)?;
        let view = &def.view;
        let current = def.boot_state();
        let next = current.apply(&patch);
        let first = device(next.first_device());
        let mut new = xml.clone();
        if view.effective_first(first) != view.first_boot || def.meta.boot.is_none() {
            new = edit::set_boot_order(&new, first)?;
        }
        if let Some(fw) = patch.mode.map(firmware).filter(|f| *f != view.firmware) {
            new = edit::set_firmware(&new, fw)?;
        }
        if next != current || def.meta.boot.is_none() {
            new = def.with_meta(&new, |m| m.boot = Some(next))?;
        }
        if new != xml {
            self.define(&new)?;
            tracing::info!(domain = %view.name, target = %next.target, enabled = %next.enabled, "boot override set");
        }
        Ok(())
    }

    fn insert_media(
        &self,
        uuid: &str,
        _slot: MediaSlot,
        request: &InsertRequest,
    ) -> Result<(), MachineError> {
        let dom = self.domain(uuid)?;
        if Definition::read(&Self::config_xml(&dom)?)?.has_media() {
            return Err(MachineError::medium_inserted());
        }
        // The download runs without the domain lock: other requests proceed.
        let volume = self.media.acquire(&self.link()?.host, &request.image)?;
        let result = (|| {
            let lock = self.lock(uuid);
            let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
            let xml = Self::config_xml(&dom)?;
            let def = Definition::read(&xml)?;
            if def.has_media() {
                return Err(MachineError::medium_inserted());
            }
            let pool = self.media.pool().to_string();
            let (new, cdrom) = edit::insert_cdrom(&xml, &pool, &volume)?;
            // A new drive needs its place in the boot order.
            let new = edit::set_boot_order(&new, device(def.boot_state().first_device()))?;
            let record = MediaRecord {
                image: request.image.clone(),
                pool,
                volume: volume.clone(),
            };
            let new = def.with_meta(&new, |m| m.media = Some(record))?;
            self.define(&new)?;
            Self::live_update(&dom, &cdrom);
            Ok(())
        })();
        self.media.unpin(&volume);
        if result.is_err() {
            let released = self
                .link()
                .and_then(|l| Ok(self.media.release(&l.host, &volume)?));
            if let Err(e) = released {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "cleaning up after a failed insert"
                );
            }
        }
        result
    }

    fn eject_media(&self, uuid: &str, _slot: MediaSlot) -> Result<(), MachineError> {
        let dom = self.domain(uuid)?;
        let released: Vec<String> = {
            let lock = self.lock(uuid);
            let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
            let xml = Self::config_xml(&dom)?;
            let def = Definition::read(&xml)?;
            if !def.has_media() && def.meta.media.is_none() {
                return Ok(());
            }
            let (new, emptied) = edit::eject_cdroms(&xml)?;
            let new = def.with_meta(&new, |m| m.media = None)?;
            self.define(&new)?;
            for cdrom in &emptied {
                Self::live_update(&dom, cdrom);
            }
            def.view
                .cdroms
                .iter()
                .filter_map(|c| c.volume.as_ref())
                .filter(|(p, _)| p == self.media.pool())
                .map(|(_, v)| v.clone())
                .collect()
        };
        for volume in released {
            let released = self
                .link()
                .and_then(|l| Ok(self.media.release(&l.host, &volume)?));
            if let Err(e) = released {
                tracing::warn!(error = format!("{e:#}"), %volume, "removing an unused media volume");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reset(uuid: &str) -> Notice {
        Notice::Domain {
            uuid: uuid.into(),
            change: Change::Reset,
        }
    }

    #[test]
    fn processors_come_from_the_topology_else_one_socket_per_vcpu() {
        let xml = |cpu: &str| {
            format!("<domain type='qemu'><name>n</name><vcpu>6</vcpu><os><type arch='x86_64'>hvm</type></os>{cpu}<devices/></domain>")
        };
        let view = |cpu: &str| parse::domain(&xml(cpu)).unwrap();
        let c = cpus(&view(""));
        assert_eq!((c.sockets, c.cores, c.threads), (6, 1, 1));
        assert_eq!(c.model, "QEMU Virtual CPU (qemu64)");
        assert_eq!(c.arch, "x86_64");
        let c = cpus(&view(
            "<cpu mode='host-passthrough'><topology sockets='1' cores='3' threads='2'/></cpu>",
        ));
        assert_eq!((c.sockets, c.cores, c.threads, c.logical()), (1, 3, 2, 6));
        assert_eq!(c.model, "host CPU (host-passthrough)");
        let c = cpus(&view("<cpu mode='custom'><model>EPYC</model></cpu>"));
        assert_eq!(c.model, "QEMU Virtual CPU (EPYC)");
    }

    #[test]
    fn a_once_boot_ends_at_its_first_reset_or_stop() {
        let c = Cache::default();
        let u = "0b0e1c4e-6b2e-4b7a-9a0e-2f6f3c2d1a00";
        assert!(!c.once_ended(u), "a domain never started on Once");
        c.once().insert(u.into());
        c.hear(reset(u));
        assert!(c.once_ended(u), "the first reset ends the Once boot");
        assert!(
            !c.once_ended(u),
            "a second reset boots the definition's order"
        );
        c.once().insert(u.into());
        c.hear(Notice::Domain {
            uuid: u.into(),
            change: Change::Stopped,
        });
        assert!(!c.once_ended(u), "a power off ends it too");
    }
}
