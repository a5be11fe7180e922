//! The sizes below which an install does not finish, as opposed to the documented
//! minimums below which it is only slow (sizes.rs warns about those).
//!
//! - The agent installer's assisted-service keeps a host "insufficient" below its
//!   role's `HW_VALIDATOR_REQUIREMENTS`, and the install waits for it forever. The
//!   values are the ones the 4.18 agent config image sets in
//!   /usr/local/share/assisted-service/assisted-service.env (`"version":"default"`):
//!   master 4 cores / 16384 MiB / 100 GB, worker 2 / 8192 / 100, sno 8 / 16384 / 100.
//!   A single control plane is judged as "sno"; GB there are 10^9 bytes.
//! - A control plane (or the bootstrap) with less than 8 GiB cannot hold etcd, the
//!   API servers and their operators: every method, unless `--force`.

use crate::spec::types::{Method, NodeSize, Role};

/// assisted-service's requirements for one role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    /// `cpu_cores`: the host's logical CPUs, i.e. its vCPUs.
    pub numcpus: u64,
    /// `ram_mib`
    pub memory: u64,
    /// `disk_size_gb` (10^9 bytes) of the installation disk.
    pub disk_gb: u64,
}

const MASTER: Gate = Gate {
    numcpus: 4,
    memory: 16384,
    disk_gb: 100,
};
const WORKER: Gate = Gate {
    numcpus: 2,
    memory: 8192,
    disk_gb: 100,
};
const SNO: Gate = Gate {
    numcpus: 8,
    memory: 16384,
    disk_gb: 100,
};

/// Below this a control plane or bootstrap is refused unless `--force` (MiB).
pub const CONTROL_MIN_MEMORY: u64 = 8192;

/// The gate assisted-service holds a host of `role` to, and its name there.
pub fn assisted_gate(role: Role, single_node: bool) -> (Gate, &'static str) {
    match role {
        Role::Worker => (WORKER, "worker"),
        _ if single_node => (SNO, "sno"),
        _ => (MASTER, "master"),
    }
}

/// One value below its gate: the cluster-file key, the value and its unit, the
/// gate as assisted states it, and the least value that passes, in the key's unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    pub key: &'static str,
    pub value: u64,
    pub unit: &'static str,
    pub rule: String,
    pub gate: u64,
}

/// Every value of `size` below `gate`. shiftlab's `disk_size` is in GiB (libvirt's
/// G), assisted's in GB: compared in bytes.
pub fn shortfalls(size: &NodeSize, gate: Gate) -> Vec<Shortfall> {
    let mut out = Vec::new();
    if (size.numcpus as u64) < gate.numcpus {
        out.push(Shortfall {
            key: "numcpus",
            value: size.numcpus as u64,
            unit: "vCPUs",
            rule: format!("{} CPU cores", gate.numcpus),
            gate: gate.numcpus,
        });
    }
    if size.memory < gate.memory {
        out.push(Shortfall {
            key: "memory",
            value: size.memory,
            unit: "MiB",
            rule: format!("{} MiB", gate.memory),
            gate: gate.memory,
        });
    }
    if (size.disk_size << 30) < gate.disk_gb * 1_000_000_000 {
        out.push(Shortfall {
            key: "disk_size",
            value: size.disk_size,
            unit: "GB (GiB)",
            rule: format!("{} GB (10^9 bytes)", gate.disk_gb),
            // The smallest GiB count holding disk_gb GB.
            gate: (gate.disk_gb * 1_000_000_000).div_ceil(1 << 30),
        });
    }
    out
}

/// Is a node of `role` with `memory` MiB under the control-plane floor? The
/// bootstrap only counts where shiftlab makes it (UPI; IPI's is the installer's).
pub fn below_control_floor(role: Role, method: Method, memory: u64) -> bool {
    let counted = match role {
        Role::Ctlplane => true,
        Role::Bootstrap => method == Method::Upi,
        Role::Worker => false,
    };
    counted && memory < CONTROL_MIN_MEMORY
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(numcpus: u32, memory: u64, disk_size: u64) -> NodeSize {
        NodeSize {
            numcpus,
            memory,
            disk_size,
            extra_disks: vec![],
        }
    }

    #[test]
    fn gates_are_assisted_services_by_role() {
        assert_eq!(assisted_gate(Role::Ctlplane, false), (MASTER, "master"));
        assert_eq!(assisted_gate(Role::Ctlplane, true).0.numcpus, 8);
        assert_eq!(assisted_gate(Role::Worker, false).0.memory, 8192);
    }

    #[test]
    fn each_value_below_its_gate_is_named() {
        assert_eq!(shortfalls(&size(4, 16384, 100), MASTER), vec![]);
        let s = shortfalls(&size(2, 12288, 120), MASTER);
        let got: Vec<_> = s
            .iter()
            .map(|s| (s.key, s.value, s.gate, &*s.rule))
            .collect();
        assert_eq!(
            got,
            [
                ("numcpus", 2, 4, "4 CPU cores"),
                ("memory", 12288, 16384, "16384 MiB")
            ]
        );
        // 93 GiB is 99.86 GB, 94 GiB 100.93 GB.
        let s = shortfalls(&size(8, 16384, 93), SNO);
        assert_eq!((s[0].key, s[0].value, s[0].gate), ("disk_size", 93, 94));
        assert_eq!(s[0].rule, "100 GB (10^9 bytes)");
        assert_eq!(shortfalls(&size(8, 16384, 94), SNO), vec![]);
        assert_eq!(shortfalls(&size(2, 8192, 100), WORKER), vec![]);
    }

    #[test]
    fn the_control_floor_counts_control_planes_and_upis_bootstrap() {
        assert!(below_control_floor(Role::Ctlplane, Method::Ipi, 6144));
        assert!(!below_control_floor(Role::Ctlplane, Method::Ipi, 8192));
        assert!(below_control_floor(Role::Bootstrap, Method::Upi, 8191));
        assert!(!below_control_floor(Role::Bootstrap, Method::Sno, 4096));
        assert!(!below_control_floor(Role::Worker, Method::Upi, 4096));
    }
}
