//! Node sizes per role: defaults from the documented minimums, top-level keys for
//! every role, a role's own keys over them; bounds and boot minimums checked.

use super::hardware;
use super::topology::Topology;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::{RawSize, RawSpec, Src};
use crate::spec::types::*;

/// Upper bounds of the numbers a cluster file may hold (documented in
/// docs/cluster-file.md): far above any lab, low enough that no arithmetic on them
/// overflows (`memory` in KiB, disk sizes in bytes) and every device gets a name.
pub const MAX_NUMCPUS: u64 = 256;
pub const MAX_MEMORY_MIB: u64 = 4 << 20; // 4 TiB
pub const MAX_DISK_GB: u64 = 64 << 10; // 64 TiB
/// Extra disks are vdb, vdc, …: 16 keeps them well inside vdb..vdz.
pub const MAX_EXTRA_DISKS: usize = 16;

/// Below these, a node cannot boot at all: an error, not a warning.
const BOOT_MIN_MEMORY: u64 = 2048;
const BOOT_MIN_DISK: u64 = 20;
const REHEARSAL_MIN_MEMORY: u64 = 128;
/// A stand-in booting the live ISO (sno, agent): what tests/e2e/standin-iso.sh
/// boots it with.
const REHEARSAL_ISO_MEMORY: u64 = 320;

pub struct Sizes {
    pub bootstrap: NodeSize,
    pub ctlplane: NodeSize,
    pub worker: NodeSize,
}

pub fn resolve(raw: &RawSpec, topo: &Topology, cluster: &str, d: &mut Diagnostics) -> Sizes {
    let rehearsal = topo.rehearsal;
    let size = |role, own, d: &mut Diagnostics| {
        let size = size_for(role, topo, &raw.all, own, d);
        if !rehearsal {
            gates(role, topo, cluster, &size, &raw.all, own, d);
        }
        size
    };
    Sizes {
        bootstrap: size(Role::Bootstrap, &raw.bootstrap, d),
        ctlplane: size(Role::Ctlplane, &raw.ctlplane, d),
        worker: size(Role::Worker, &raw.worker, d),
    }
}

/// The hard gates (hardware.rs) outside a rehearsal: assisted-service's for method
/// agent, the control-plane memory floor for every method.
fn gates(
    role: Role,
    topo: &Topology,
    cluster: &str,
    size: &NodeSize,
    all: &RawSize,
    own: &RawSize,
    d: &mut Diagnostics,
) {
    let count = match role {
        Role::Bootstrap => 1,
        Role::Ctlplane => topo.ctlplanes,
        Role::Worker => topo.workers,
    };
    if count == 0 {
        return;
    }
    let nodes = match count {
        1 => role.node_name(cluster, 0),
        2 => format!(
            "{}, {}",
            role.node_name(cluster, 0),
            role.node_name(cluster, 1)
        ),
        n => format!(
            "{} … {}",
            role.node_name(cluster, 0),
            role.node_name(cluster, n - 1)
        ),
    };
    let field = |key: &str| {
        let src = match key {
            "numcpus" => own.numcpus.as_ref().or(all.numcpus.as_ref()),
            "memory" => own.memory.as_ref().or(all.memory.as_ref()),
            _ => own.disk_size.as_ref().or(all.disk_size.as_ref()),
        };
        src.map_or_else(|| format!("{}.{key}", role.as_str()), |s| s.field.clone())
    };
    if topo.method == Method::Agent {
        if role == Role::Bootstrap {
            return; // the agent installer makes no bootstrap node
        }
        let (gate, name) = hardware::assisted_gate(role, topo.single_node());
        for s in hardware::shortfalls(size, gate) {
            d.error(
                field(s.key),
                format!(
                    "{} {} is below assisted-service's {name} gate of {} ({nodes}): the agent install would keep the host insufficient and wait forever; use at least {} {} (rehearsal: true is exempt)",
                    s.value, s.unit, s.rule, s.gate, s.unit,
                ),
            );
        }
    } else if size.memory >= BOOT_MIN_MEMORY
        && hardware::below_control_floor(role, topo.method, size.memory)
    {
        // (Below BOOT_MIN_MEMORY, size_for already said it cannot boot.)
        d.forcible(
            field("memory"),
            format!(
                "{} MiB is below the {} MiB a {} needs for etcd and the API servers ({nodes}); use at least {} MiB",
                size.memory,
                hardware::CONTROL_MIN_MEMORY,
                role_label(role, topo.method),
                hardware::CONTROL_MIN_MEMORY
            ),
        );
    }
}

/// Documented minimums (OpenShift's "Minimum resource requirements for cluster installation") as (vCPUs, MiB, GB): below them we warn.
pub fn documented_minimum(role: Role, method: Method) -> (u64, u64, u64) {
    match (role, method) {
        (Role::Ctlplane, Method::Sno) => (8, 16384, 120),
        (Role::Bootstrap, _) | (Role::Ctlplane, _) => (4, 16384, 100),
        (Role::Worker, _) => (2, 8192, 100),
    }
}

fn default_size(role: Role, method: Method, rehearsal: bool) -> NodeSize {
    if rehearsal {
        return NodeSize {
            numcpus: 1,
            // A live ISO boot holds the disk image it installs in memory too.
            memory: if matches!(method, Method::Sno | Method::Agent) {
                REHEARSAL_ISO_MEMORY
            } else {
                256
            },
            disk_size: 1,
            extra_disks: vec![],
        };
    }
    let (numcpus, memory, disk) = documented_minimum(role, method);
    NodeSize {
        numcpus: numcpus as u32,
        memory,
        // A little above the minimum: overlays are thin, and etcd likes room.
        disk_size: disk.max(120),
        extra_disks: vec![],
    }
}

fn size_for(
    role: Role,
    topo: &Topology,
    all: &RawSize,
    own: &RawSize,
    d: &mut Diagnostics,
) -> NodeSize {
    let (method, rehearsal) = (topo.method, topo.rehearsal);
    let mut def = default_size(role, method, rehearsal);
    if method == Method::Agent && !rehearsal {
        // The defaults pass assisted-service's gate (a single node's is 8 cores).
        let (gate, _) = hardware::assisted_gate(role, topo.single_node());
        def.numcpus = def.numcpus.max(gate.numcpus as u32);
        def.memory = def.memory.max(gate.memory);
    }
    let numcpus = own.numcpus.as_ref().or(all.numcpus.as_ref());
    let memory = own.memory.as_ref().or(all.memory.as_ref());
    let disk = own.disk_size.as_ref().or(all.disk_size.as_ref());
    let extra = own.extra_disks.as_ref().or(all.extra_disks.as_ref());
    let name = |s: Option<&Src<u64>>, key: &str| {
        s.map(|s| s.field.clone())
            .unwrap_or_else(|| format!("{}.{key}", role.as_str()))
    };
    // A value above its bound is reported and replaced by the default, so that
    // nothing downstream computes with it while the other checks go on.
    let mut bounded = |s: Option<&Src<u64>>, key: &str, max: u64, unit: &str, def: u64| match s {
        Some(s) if s.v > max => {
            d.error(
                name(Some(s), key),
                format!(
                    "{} {unit} is more than shiftlab supports; use at most {max} {unit}",
                    s.v
                ),
            );
            def
        }
        Some(s) => s.v,
        None => def,
    };
    let mut size = NodeSize {
        numcpus: bounded(numcpus, "numcpus", MAX_NUMCPUS, "vCPUs", def.numcpus as u64) as u32,
        memory: bounded(memory, "memory", MAX_MEMORY_MIB, "MiB", def.memory),
        disk_size: bounded(disk, "disk_size", MAX_DISK_GB, "GB", def.disk_size),
        extra_disks: extra.map_or(def.extra_disks.clone(), |s| s.v.clone()),
    };
    if size.extra_disks.len() > MAX_EXTRA_DISKS {
        let f = extra
            .map(|s| s.field.clone())
            .unwrap_or_else(|| format!("{}.extra_disks", role.as_str()));
        d.error(
            f,
            format!(
                "{} extra disks is more than shiftlab supports; use at most {MAX_EXTRA_DISKS}",
                size.extra_disks.len()
            ),
        );
        size.extra_disks.truncate(MAX_EXTRA_DISKS);
    }
    let (min_cpu, min_mem, min_disk) = documented_minimum(role, method);
    if size.numcpus == 0 {
        d.error(
            name(numcpus, "numcpus"),
            "0 vCPUs cannot boot; use 1 or more",
        );
    } else if !rehearsal && method != Method::Agent && (size.numcpus as u64) < min_cpu {
        d.warn(
            name(numcpus, "numcpus"),
            format!(
                "{} vCPUs is below the documented minimum of {min_cpu} for a {}",
                size.numcpus,
                role_label(role, method)
            ),
        );
    }
    let boot_min = if rehearsal {
        REHEARSAL_MIN_MEMORY
    } else {
        BOOT_MIN_MEMORY
    };
    if size.memory < boot_min {
        d.error(
            name(memory, "memory"),
            format!(
                "{} MiB cannot boot {}; use at least {boot_min} MiB{}",
                size.memory,
                if rehearsal {
                    "a stand-in node"
                } else {
                    "CoreOS"
                },
                if rehearsal {
                    ""
                } else {
                    " (documented minimum: see docs/cluster-file.md)"
                }
            ),
        );
    } else if !rehearsal
        && method != Method::Agent
        && !hardware::below_control_floor(role, method, size.memory)
        && size.memory < min_mem
    {
        d.warn(
            name(memory, "memory"),
            format!(
                "{} MiB is below the documented minimum of {min_mem} MiB for a {}; labs often run smaller, but installs may be slow or fail",
                size.memory,
                role_label(role, method)
            ),
        );
    }
    let disk_boot_min = if rehearsal { 1 } else { BOOT_MIN_DISK };
    if size.disk_size < disk_boot_min {
        d.error(
            name(disk, "disk_size"),
            format!(
                "{} GB is too small to hold {}; use at least {disk_boot_min} GB",
                size.disk_size,
                if rehearsal {
                    "the stand-in image"
                } else {
                    "CoreOS"
                }
            ),
        );
    } else if !rehearsal && method != Method::Agent && size.disk_size < min_disk {
        let text = format!(
            "{} GB is below the documented minimum of {min_disk} GB for a {}",
            size.disk_size,
            role_label(role, method)
        );
        // An ISO install writes CoreOS to the disk and refuses a smaller one late
        // (the assisted-service's host validation; bootstrap-in-place's
        // install-to-disk): say so before anything is made. Rehearsals are exempt.
        if method == Method::Sno {
            d.error(
                name(disk, "disk_size"),
                format!("{text}; method {method} installs to it (rehearsal: true is exempt)"),
            );
        } else {
            d.warn(name(disk, "disk_size"), text);
        }
    }
    for (i, gb) in size.extra_disks.iter_mut().enumerate() {
        let f = extra
            .map(|s| s.field.clone())
            .unwrap_or_else(|| format!("{}.extra_disks", role.as_str()));
        if *gb == 0 {
            d.error(
                format!("{f}[{i}]"),
                "0 GB is not a disk size; use 1 or more",
            );
        } else if *gb > MAX_DISK_GB {
            d.error(
                format!("{f}[{i}]"),
                format!("{gb} GB is more than shiftlab supports; use at most {MAX_DISK_GB} GB"),
            );
            *gb = 1;
        }
    }
    size
}

fn role_label(role: Role, method: Method) -> &'static str {
    match (role, method) {
        (Role::Ctlplane, Method::Sno) => "single node",
        (Role::Bootstrap, _) => "bootstrap node",
        (Role::Ctlplane, _) => "control plane node",
        (Role::Worker, _) => "worker",
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::{from_str, Env};

    fn load(text: &str) -> Result<crate::spec::Loaded, crate::spec::InvalidSpec> {
        from_str(
            &format!("cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n{text}"),
            "t.yaml",
            &Env::default(),
        )
    }

    #[test]
    fn a_single_node_agent_is_held_to_assisteds_sno_gate() {
        let one = load("method: agent\nctlplanes: 1\nworkers: 0\n").unwrap();
        // The defaults pass it: 8 cores.
        assert_eq!(one.spec.size(crate::spec::Role::Ctlplane).numcpus, 8);
        let e = load("method: agent\nctlplanes: 1\nworkers: 0\nctlplane:\n  numcpus: 4\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ctlplane.numcpus: 4 vCPUs is below assisted-service's sno gate of 8 CPU cores (lab1-ctlplane-0): the agent install would keep the host insufficient and wait forever; use at least 8 vCPUs"),
            "{e}"
        );
        // --force does not lift it, and a rehearsal is exempt.
        let forced = crate::spec::from_str_with(
            "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\nmethod: agent\nctlplanes: 1\nworkers: 0\nnumcpus: 4\n",
            "t.yaml",
            &Env::default(),
            crate::spec::Overrides {
                force: true,
                ..Default::default()
            },
        );
        assert!(forced.is_err());
        load("method: agent\nrehearsal: true\nctlplanes: 1\nworkers: 0\nnumcpus: 1\n").unwrap();
    }

    #[test]
    fn iso_installs_refuse_a_disk_below_the_minimum_unless_rehearsal() {
        let e = load("method: sno\ndisk_size: 60\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("60 GB is below the documented minimum of 120 GB for a single node"),
            "{e}"
        );
        let e = load("method: agent\nworkers: 2\nworker:\n  disk_size: 50\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("worker.disk_size: 50 GB (GiB) is below assisted-service's worker gate of 100 GB (10^9 bytes)"),
            "{e}"
        );
        let sno = load("method: sno\nrehearsal: true\ndisk_size: 1\n").unwrap();
        // Its stand-in boots the live ISO: more memory than a disk boot.
        assert_eq!(sno.spec.size(crate::spec::Role::Ctlplane).memory, 320);
        // UPI keeps it a warning (its overlays are thin).
        let upi = load("disk_size: 60\n").unwrap();
        assert!(upi
            .warnings
            .iter()
            .any(|w| w.to_string().contains("below the documented minimum")));
    }
}
