//! The handler trait between the HTTP service and the VM layer, the boot
//! override state machine both machines share, and an in-memory machine for
//! tests and demos.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::model::{
    BootEnabled, BootMode, BootOverride, BootPatch, BootTarget, Cpus, Disk, InsertRequest,
    MediaSlot, MediaState, Nic, PowerState, ResetType, SystemInfo, SystemRef,
};

/// Why a machine refused or failed an operation. The service maps each
/// variant to an HTTP status; `Backend` details are logged, never sent.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// No system with that UUID or name is exposed (404).
    #[error("system not found")]
    NotFound,
    /// The system's state does not allow the operation (409).
    #[error("{0}")]
    Conflict(String),
    /// The operation's input is unusable, e.g. the image cannot be fetched (400).
    #[error("{0}")]
    BadRequest(String),
    /// Anything else (500).
    #[error(transparent)]
    Backend(#[from] anyhow::Error),
}

impl MachineError {
    /// InsertMedia while the slot holds a medium (Ironic ejects first).
    pub fn medium_inserted() -> Self {
        MachineError::Conflict("a medium is already inserted; eject it first".into())
    }
}

/// What the Redfish service needs from the machines it manages. Calls may
/// block (libvirt, downloads); the HTTP layer runs them off its event loop.
pub trait Machine: Send + Sync + 'static {
    /// Every exposed system.
    fn list(&self) -> Result<Vec<SystemRef>, MachineError>;
    /// Finds an exposed system by UUID (canonical) or name (alias).
    fn resolve(&self, id: &str) -> Result<SystemRef, MachineError>;
    /// Reads a system; never writes anything.
    fn system(&self, uuid: &str) -> Result<SystemInfo, MachineError>;
    fn reset(&self, uuid: &str, reset: ResetType) -> Result<(), MachineError>;
    fn set_boot(&self, uuid: &str, patch: BootPatch) -> Result<(), MachineError>;
    fn insert_media(
        &self,
        uuid: &str,
        slot: MediaSlot,
        request: &InsertRequest,
    ) -> Result<(), MachineError>;
    fn eject_media(&self, uuid: &str, slot: MediaSlot) -> Result<(), MachineError>;

    /// A system as [`Machine::system`] would report it, from memory only:
    /// never blocks, never calls the backend. `None` when only the backend
    /// could tell (the caller then calls `system` off its event loop), and
    /// for any `uuid` other than the canonical one `resolve` returns. The
    /// same `Arc` comes back for as long as the system is unchanged, so a
    /// caller may keep what it derives from it (a rendered body) by identity.
    fn peek(&self, _uuid: &str) -> Option<Arc<SystemInfo>> {
        None
    }
}

/// Boot override as the BMC keeps it: the requested target and mode of
/// enablement, plus what to return to once a `Once` override is consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootState {
    pub target: BootTarget,
    pub enabled: BootEnabled,
    /// Set while `Once` is armed: the override to restore after the next start.
    pub previous: Option<(BootTarget, BootEnabled)>,
}

impl Default for BootState {
    fn default() -> Self {
        BootState {
            target: BootTarget::Hdd,
            enabled: BootEnabled::Continuous,
            previous: None,
        }
    }
}

impl BootState {
    /// The state after a PATCH (the mode is handled apart: it is firmware).
    pub fn apply(&self, patch: &BootPatch) -> BootState {
        let target = patch.target.unwrap_or(self.target);
        let enabled = patch.enabled.unwrap_or(self.enabled);
        let previous = match enabled {
            BootEnabled::Once if self.enabled == BootEnabled::Once => self.previous,
            BootEnabled::Once => Some((self.target, self.enabled)),
            _ => None,
        };
        BootState {
            target,
            enabled,
            previous,
        }
    }

    /// The state after the system starts: an armed `Once` is consumed.
    /// `None` when nothing changes.
    pub fn consume_once(&self) -> Option<BootState> {
        if self.enabled != BootEnabled::Once {
            return None;
        }
        let (target, enabled) = self
            .previous
            .unwrap_or((BootTarget::None, BootEnabled::Disabled));
        Some(BootState {
            target,
            enabled,
            previous: None,
        })
    }

    /// The device class the firmware should try first.
    pub fn first_device(&self) -> BootTarget {
        match (self.enabled, self.target) {
            (BootEnabled::Disabled, _) | (_, BootTarget::None) => BootTarget::Hdd,
            (_, t) => t,
        }
    }
}

/// One system of the in-memory machine.
#[derive(Debug, Clone)]
pub struct MemorySystem {
    pub uuid: String,
    pub name: String,
    pub power: PowerState,
    pub boot: BootState,
    pub mode: BootMode,
    pub cpus: Cpus,
    pub memory_mib: u64,
    pub nics: Vec<Nic>,
    pub disks: Vec<Disk>,
    pub media: Option<String>,
    pub secure_boot: bool,
    /// Device class each start booted from, in order.
    pub boots: Vec<BootTarget>,
}

impl MemorySystem {
    pub fn new(uuid: &str, name: &str) -> Self {
        MemorySystem {
            uuid: uuid.to_string(),
            name: name.to_string(),
            power: PowerState::Off,
            boot: BootState::default(),
            mode: BootMode::UEFI,
            cpus: Cpus::flat(2, "QEMU Virtual CPU (qemu64)"),
            memory_mib: 4096,
            nics: vec![Nic {
                id: "52:54:00:00:00:01".into(),
                mac: "52:54:00:00:00:01".into(),
            }],
            disks: vec![Disk {
                name: "vda".into(),
                capacity_bytes: Some(20 << 30),
            }],
            media: None,
            secure_boot: false,
            boots: Vec::new(),
        }
    }

    fn start(&mut self) {
        self.power = PowerState::On;
        self.boots.push(self.boot.first_device());
        if let Some(next) = self.boot.consume_once() {
            self.boot = next;
        }
    }

    fn info(&self) -> SystemInfo {
        SystemInfo {
            uuid: self.uuid.clone(),
            name: self.name.clone(),
            power: self.power,
            boot: BootOverride {
                target: self.boot.target,
                enabled: self.boot.enabled,
                mode: self.mode,
            },
            cpus: self.cpus.clone(),
            memory_mib: self.memory_mib,
            nics: self.nics.clone(),
            disks: self.disks.clone(),
            media: vec![MediaState {
                slot: MediaSlot::Cd,
                inserted: self.media.is_some(),
                image: self.media.clone(),
                write_protected: true,
            }],
            secure_boot: self.secure_boot,
        }
    }
}

/// A machine that keeps its systems in memory: the service's stub for
/// tests, and a backend for trying clients without libvirt.
#[derive(Debug, Default)]
pub struct MemoryMachine {
    systems: Mutex<BTreeMap<String, MemorySystem>>,
    /// What [`Machine::peek`] last handed out, per system: the same `Arc`
    /// while the system is unchanged.
    peeked: Mutex<BTreeMap<String, Arc<SystemInfo>>>,
}

impl MemoryMachine {
    pub fn new(systems: impl IntoIterator<Item = MemorySystem>) -> Self {
        MemoryMachine {
            systems: Mutex::new(systems.into_iter().map(|s| (s.uuid.clone(), s)).collect()),
            peeked: Mutex::default(),
        }
    }

    /// A snapshot of one system, for assertions.
    pub fn get(&self, uuid: &str) -> Option<MemorySystem> {
        self.lock().get(uuid).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, MemorySystem>> {
        self.systems.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with<T>(
        &self,
        uuid: &str,
        f: impl FnOnce(&mut MemorySystem) -> Result<T, MachineError>,
    ) -> Result<T, MachineError> {
        let mut all = self.lock();
        let s = all.get_mut(uuid).ok_or(MachineError::NotFound)?;
        f(s)
    }
}

impl Machine for MemoryMachine {
    fn list(&self) -> Result<Vec<SystemRef>, MachineError> {
        Ok(self
            .lock()
            .values()
            .map(|s| SystemRef {
                uuid: s.uuid.clone(),
                name: s.name.clone(),
            })
            .collect())
    }

    fn resolve(&self, id: &str) -> Result<SystemRef, MachineError> {
        self.lock()
            .values()
            .find(|s| s.uuid.eq_ignore_ascii_case(id) || s.name == id)
            .map(|s| SystemRef {
                uuid: s.uuid.clone(),
                name: s.name.clone(),
            })
            .ok_or(MachineError::NotFound)
    }

    fn system(&self, uuid: &str) -> Result<SystemInfo, MachineError> {
        self.with(uuid, |s| Ok(s.info()))
    }

    fn reset(&self, uuid: &str, reset: ResetType) -> Result<(), MachineError> {
        self.with(uuid, |s| {
            let on = s.power == PowerState::On;
            match reset {
                ResetType::On | ResetType::ForceOn => {
                    if !on {
                        s.start();
                    }
                }
                ResetType::ForceOff => s.power = PowerState::Off,
                ResetType::GracefulShutdown if on => s.power = PowerState::Off,
                ResetType::ForceRestart => {
                    s.power = PowerState::Off;
                    s.start();
                }
                ResetType::GracefulRestart | ResetType::Nmi if on => {}
                _ => return Err(MachineError::Conflict(format!("{} is powered off", s.name))),
            }
            Ok(())
        })
    }

    fn set_boot(&self, uuid: &str, patch: BootPatch) -> Result<(), MachineError> {
        self.with(uuid, |s| {
            s.boot = s.boot.apply(&patch);
            if let Some(mode) = patch.mode {
                s.mode = mode;
            }
            Ok(())
        })
    }

    fn insert_media(
        &self,
        uuid: &str,
        _slot: MediaSlot,
        request: &InsertRequest,
    ) -> Result<(), MachineError> {
        self.with(uuid, |s| {
            if s.media.is_some() {
                return Err(MachineError::medium_inserted());
            }
            s.media = Some(request.image.clone());
            Ok(())
        })
    }

    fn eject_media(&self, uuid: &str, _slot: MediaSlot) -> Result<(), MachineError> {
        self.with(uuid, |s| {
            s.media = None;
            Ok(())
        })
    }

    fn peek(&self, uuid: &str) -> Option<Arc<SystemInfo>> {
        let info = self.lock().get(uuid)?.info();
        let mut peeked = self.peeked.lock().unwrap_or_else(|e| e.into_inner());
        match peeked.get(uuid) {
            Some(last) if **last == info => Some(last.clone()),
            _ => {
                let info = Arc::new(info);
                peeked.insert(uuid.to_string(), info.clone());
                Some(info)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(target: Option<BootTarget>, enabled: Option<BootEnabled>) -> BootPatch {
        BootPatch {
            target,
            enabled,
            mode: None,
        }
    }

    #[test]
    fn once_is_armed_then_consumed_and_the_previous_override_returns() {
        let s = BootState::default();
        let armed = s.apply(&patch(Some(BootTarget::Cd), Some(BootEnabled::Once)));
        assert_eq!(armed.first_device(), BootTarget::Cd);
        assert_eq!(
            armed.previous,
            Some((BootTarget::Hdd, BootEnabled::Continuous))
        );
        // re-arming keeps the original previous override
        let rearmed = armed.apply(&patch(Some(BootTarget::Pxe), None));
        assert_eq!(rearmed.previous, armed.previous);
        let after = rearmed.consume_once().unwrap();
        assert_eq!(after, BootState::default());
        assert_eq!(after.consume_once(), None);
    }

    #[test]
    fn continuous_and_disabled() {
        let s = BootState::default()
            .apply(&patch(Some(BootTarget::Pxe), Some(BootEnabled::Continuous)));
        assert_eq!(s.first_device(), BootTarget::Pxe);
        assert_eq!(s.consume_once(), None);
        let d = s.apply(&patch(None, Some(BootEnabled::Disabled)));
        assert_eq!(d.first_device(), BootTarget::Hdd);
    }

    #[test]
    fn memory_machine_follows_ironics_virtual_media_sequence() {
        let m = MemoryMachine::new([MemorySystem::new("u1", "n1")]);
        m.reset("u1", ResetType::On).unwrap();
        m.reset("u1", ResetType::ForceOff).unwrap();
        m.eject_media("u1", MediaSlot::Cd).unwrap();
        let req = InsertRequest {
            image: "http://h/x.iso".into(),
            inserted: true,
            write_protected: true,
        };
        m.insert_media("u1", MediaSlot::Cd, &req).unwrap();
        assert!(matches!(
            m.insert_media("u1", MediaSlot::Cd, &req),
            Err(MachineError::Conflict(_))
        ));
        m.set_boot(
            "u1",
            BootPatch {
                mode: Some(BootMode::Legacy),
                ..Default::default()
            },
        )
        .unwrap();
        m.set_boot("u1", patch(Some(BootTarget::Cd), Some(BootEnabled::Once)))
            .unwrap();
        m.reset("u1", ResetType::On).unwrap();
        let info = m.system("u1").unwrap();
        assert_eq!(info.power, PowerState::On);
        assert_eq!(
            info.boot,
            BootOverride {
                target: BootTarget::Hdd,
                enabled: BootEnabled::Continuous,
                mode: BootMode::Legacy
            }
        );
        assert_eq!(info.media[0].image.as_deref(), Some("http://h/x.iso"));
        m.reset("u1", ResetType::ForceRestart).unwrap();
        assert_eq!(
            m.get("u1").unwrap().boots,
            vec![BootTarget::Hdd, BootTarget::Cd, BootTarget::Hdd]
        );
        m.reset("u1", ResetType::ForceOff).unwrap();
        assert!(matches!(
            m.reset("u1", ResetType::Nmi),
            Err(MachineError::Conflict(_))
        ));
        assert!(matches!(m.system("nope"), Err(MachineError::NotFound)));
        assert_eq!(m.resolve("n1").unwrap().uuid, "u1");
    }
}
