//! What a plan needs from its host beyond its own nodes: the VM the installer
//! makes there for itself.
//!
//! IPI: `openshift-install create cluster` on the baremetal platform boots a
//! bootstrap VM through libvirt on the host (`platform.baremetal.libvirtURI`)
//! and keeps it until the control planes have taken over: the current
//! installer's `<infraID>-live-provisioner`, a live ISO with a 20 GiB
//! `<infraID>-scratch` disk, 6 GiB of memory and 4 vCPUs (the older
//! `<infraID>-bootstrap` had the same size and a 20 GiB disk), in a pool of its
//! own under `/var/lib/libvirt/openshift-images`. It runs while the control
//! planes install, so the host carries both at once. A rehearsal's is not
//! counted: the stand-in installer makes it small (512 MiB, 1 vCPU, a sparse
//! scratch disk the stand-in barely writes: `rehearse::installer`), and only when
//! the method's flow runs; a rehearsal's `create infra` (the lab flow) makes
//! none, and the plan does not know which flow will run.

use super::Plan;
use crate::spec::Method;

const GIB: u64 = 1 << 30;

/// A VM the installer makes on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallerVm {
    pub memory_mib: u64,
    pub vcpus: u32,
    pub disk_bytes: u64,
}

/// The installer's bootstrap VM of an IPI install; `None` for the others.
pub fn bootstrap_vm(plan: &Plan) -> Option<InstallerVm> {
    (plan.method == Method::Ipi && !plan.rehearsal).then_some(InstallerVm {
        memory_mib: 6 * 1024,
        vcpus: 4,
        disk_bytes: 20 * GIB,
    })
}

impl InstallerVm {
    /// How messages name it.
    pub fn name(&self) -> String {
        format!(
            "the installer's bootstrap VM (<infraID>-live-provisioner: {} GiB, {} vCPUs, {} GiB scratch disk)",
            self.memory_mib / 1024,
            self.vcpus,
            self.disk_bytes / GIB
        )
    }
}

/// Memory (MiB), vCPUs and early disk use the host needs for the plan's nodes
/// (`node_disk`: what they are expected to use) and the installer's VM.
pub fn host_need(plan: &Plan, node_disk: u64) -> (u64, u32, u64) {
    let vm = bootstrap_vm(plan);
    let memory = plan.nodes.iter().map(|n| n.memory_mib).sum::<u64>()
        + vm.as_ref().map_or(0, |v| v.memory_mib);
    let vcpus =
        plan.nodes.iter().map(|n| n.vcpus).sum::<u32>() + vm.as_ref().map_or(0, |v| v.vcpus);
    (memory, vcpus, node_disk + installer_disk(plan))
}

/// Bytes of the installer's VM's disk (0 without one).
pub fn installer_disk(plan: &Plan) -> u64 {
    bootstrap_vm(plan).map_or(0, |v| v.disk_bytes)
}

/// The words a disk message adds for the installer's VM ("" without one).
pub fn installer_disk_words(plan: &Plan) -> String {
    bootstrap_vm(plan)
        .map(|v| format!(" (with {})", v.name()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan of `method`; `real`: one the real installer runs (the flag a
    /// cluster file sets with a release and a pull secret).
    fn plan(method: &str, real: bool) -> Plan {
        let text = format!(
            "cluster: lab1\ndomain: example.com\ndistribution: okd\nrehearsal: true\n\
             ssh_keys: ['ssh-ed25519 AAAA k']\nworkers: 2\nmethod: {method}\n"
        );
        let mut p = crate::plan::derive(
            &crate::spec::from_str(&text, "t.yaml", &crate::spec::Env::default())
                .unwrap()
                .spec,
        );
        p.rehearsal = !real;
        p
    }

    #[test]
    fn ipi_counts_the_installers_bootstrap_vm() {
        let ipi = plan("ipi", true);
        let nodes_mem: u64 = ipi.nodes.iter().map(|n| n.memory_mib).sum();
        let nodes_cpu: u32 = ipi.nodes.iter().map(|n| n.vcpus).sum();
        assert_eq!(
            host_need(&ipi, 100),
            (nodes_mem + 6144, nodes_cpu + 4, 100 + 20 * GIB)
        );
        let words = installer_disk_words(&ipi);
        assert!(
            words.contains("live-provisioner") && words.contains("20 GiB scratch disk"),
            "{words}"
        );
        // UPI's bootstrap is a plan node; a rehearsal's installer is the stand-in.
        for other in [plan("upi", true), plan("ipi", false)] {
            assert_eq!(bootstrap_vm(&other), None);
            assert_eq!(installer_disk(&other), 0);
            assert_eq!(installer_disk_words(&other), "");
        }
    }
}
