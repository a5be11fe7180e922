//! Typed values shared by the request parser, the resource builders and the
//! machines: what a Redfish client can ask for and what a system reports.

use std::fmt;

/// Live power state of a system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerState {
    On,
    Off,
}

impl PowerState {
    pub fn as_str(self) -> &'static str {
        match self {
            PowerState::On => "On",
            PowerState::Off => "Off",
        }
    }
}

macro_rules! redfish_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// Every value, in the order advertised in `@Redfish.AllowableValues`.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => stringify!($variant)),+ }
            }

            /// Parses the exact Redfish spelling (Redfish enums are case-sensitive).
            pub fn parse(s: &str) -> Option<Self> {
                match s { $(stringify!($variant) => Some($name::$variant),)+ _ => None }
            }

            pub fn allowable() -> Vec<&'static str> {
                Self::ALL.iter().map(|v| v.as_str()).collect()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

redfish_enum!(
    /// `ResetType` values accepted by `ComputerSystem.Reset`.
    ResetType {
        On,
        ForceOn,
        ForceOff,
        GracefulShutdown,
        GracefulRestart,
        ForceRestart,
        Nmi,
    }
);

redfish_enum!(
    /// `BootSourceOverrideTarget` values this BMC can honour.
    BootTarget { None, Pxe, Hdd, Cd }
);

redfish_enum!(
    /// `BootSourceOverrideEnabled`.
    BootEnabled {
        Disabled,
        Once,
        Continuous,
    }
);

redfish_enum!(
    /// `BootSourceOverrideMode`: firmware the system starts with.
    BootMode { UEFI, Legacy }
);

redfish_enum!(
    /// Virtual media slots of a system.
    MediaSlot { Cd }
);

/// Boot override as reported by a system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootOverride {
    pub target: BootTarget,
    pub enabled: BootEnabled,
    pub mode: BootMode,
}

/// A PATCH of `Boot`: every field is optional, absent ones are left alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootPatch {
    pub target: Option<BootTarget>,
    pub enabled: Option<BootEnabled>,
    pub mode: Option<BootMode>,
}

impl BootPatch {
    pub fn is_empty(&self) -> bool {
        self.target.is_none() && self.enabled.is_none() && self.mode.is_none()
    }
}

/// What `InsertMedia` asked for, already validated (scheme, shape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertRequest {
    pub image: String,
    /// `Inserted` from the request; only `true` is meaningful.
    pub inserted: bool,
    /// `WriteProtected` from the request; only `true` is supported.
    pub write_protected: bool,
}

/// A system as addressed by clients: the UUID is the Redfish `Id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemRef {
    pub uuid: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    pub id: String,
    pub mac: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// Target device name (`vda`, `sda`).
    pub name: String,
    pub capacity_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaState {
    pub slot: MediaSlot,
    pub inserted: bool,
    /// The image URL as inserted, when known.
    pub image: Option<String>,
    pub write_protected: bool,
}

/// The processors of a system: `sockets` packages of `cores` cores of
/// `threads` threads each, all of one `model` and architecture (libvirt's
/// name: `x86_64`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpus {
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    pub model: String,
    pub arch: String,
}

impl Cpus {
    /// What QEMU gives a domain with `vcpus` and no topology: one
    /// single-core, single-thread socket per vCPU.
    pub fn flat(vcpus: u32, model: &str) -> Cpus {
        Cpus {
            sockets: vcpus.max(1),
            cores: 1,
            threads: 1,
            model: model.to_string(),
            arch: "x86_64".to_string(),
        }
    }

    /// Logical CPUs: what `ProcessorSummary/Count` and Ironic's `cpus` report.
    pub fn logical(&self) -> u32 {
        self.sockets * self.cores * self.threads
    }
}

/// Everything a GET of a System (and its sub-resources) shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemInfo {
    pub uuid: String,
    pub name: String,
    pub power: PowerState,
    pub boot: BootOverride,
    pub cpus: Cpus,
    pub memory_mib: u64,
    pub nics: Vec<Nic>,
    pub disks: Vec<Disk>,
    pub media: Vec<MediaState>,
    /// The firmware verifies what it boots (an OVMF secure-boot loader).
    pub secure_boot: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_round_trip_their_redfish_spelling() {
        for r in ResetType::ALL {
            assert_eq!(ResetType::parse(r.as_str()), Some(*r));
        }
        assert_eq!(ResetType::parse("forceoff"), None);
        assert_eq!(BootMode::parse("UEFI"), Some(BootMode::UEFI));
        assert_eq!(BootTarget::allowable(), vec!["None", "Pxe", "Hdd", "Cd"]);
    }
}
