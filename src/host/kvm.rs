//! Does KVM really work here? `/dev/kvm` existing is not enough: in nested
//! virtualisation it can exist and accept guests that then hang, because the outer
//! hypervisor does not pass the CPU features a modern kernel needs. CoreOS (RHEL 9
//! based) needs x86-64-v2, so we ask KVM which CPUID bits it can give a guest and
//! use it only when every x86-64-v2 feature is there.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;

/// The verdict and the reason, to tell the user which accelerator was chosen and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvmCheck {
    pub usable: bool,
    pub reason: String,
}

const KVM_GET_API_VERSION: libc::c_ulong = 0xAE00;
const KVM_GET_SUPPORTED_CPUID: libc::c_ulong = 0xC008_AE05;
const MAX_ENTRIES: usize = 256;
/// struct kvm_cpuid_entry2: function, index, flags, eax, ebx, ecx, edx, padding[3].
const ENTRY_WORDS: usize = 10;

/// x86-64-v2 features: (CPUID leaf, register, bit, name). Register 2 = ECX.
const X86_64_V2: [(u32, usize, u32, &str); 7] = [
    (1, 2, 0, "sse3"),
    (1, 2, 9, "ssse3"),
    (1, 2, 13, "cx16"),
    (1, 2, 19, "sse4.1"),
    (1, 2, 20, "sse4.2"),
    (1, 2, 23, "popcnt"),
    (0x8000_0001, 2, 0, "lahf_lm"),
];

/// Which x86-64-v2 features are missing from a KVM supported-CPUID table, given as
/// (function, index, eax, ebx, ecx, edx) entries. Pure, for tests.
pub fn missing_v2_features(entries: &[(u32, u32, [u32; 4])]) -> Vec<&'static str> {
    X86_64_V2
        .iter()
        .filter(|(leaf, reg, bit, _)| {
            !entries
                .iter()
                .any(|(f, idx, regs)| f == leaf && *idx == 0 && regs[*reg] & (1 << bit) != 0)
        })
        .map(|(_, _, _, name)| *name)
        .collect()
}

pub fn check() -> KvmCheck {
    let file = match OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        Ok(f) => f,
        Err(e) => {
            return KvmCheck {
                usable: false,
                reason: format!("/dev/kvm cannot be opened ({e})"),
            }
        }
    };
    let fd = file.as_raw_fd();
    // SAFETY: ioctls on a KVM fd we own, with a buffer sized as the kernel expects.
    let api = unsafe { libc::ioctl(fd, KVM_GET_API_VERSION, 0) };
    if api != 12 {
        return KvmCheck {
            usable: false,
            reason: format!("unexpected KVM API version {api}"),
        };
    }
    let mut buf = vec![0u32; 2 + MAX_ENTRIES * ENTRY_WORDS];
    buf[0] = MAX_ENTRIES as u32;
    let rc = unsafe { libc::ioctl(fd, KVM_GET_SUPPORTED_CPUID, buf.as_mut_ptr()) };
    if rc < 0 {
        return KvmCheck {
            usable: false,
            reason: format!(
                "KVM does not report its CPUID ({})",
                std::io::Error::last_os_error()
            ),
        };
    }
    let n = (buf[0] as usize).min(MAX_ENTRIES);
    let entries: Vec<(u32, u32, [u32; 4])> = (0..n)
        .map(|i| {
            let e = &buf[2 + i * ENTRY_WORDS..2 + (i + 1) * ENTRY_WORDS];
            (e[0], e[1], [e[3], e[4], e[5], e[6]])
        })
        .collect();
    let missing = missing_v2_features(&entries);
    if missing.is_empty() {
        KvmCheck {
            usable: true,
            reason: "KVM works and offers x86-64-v2 to guests".into(),
        }
    } else {
        KvmCheck {
            usable: false,
            reason: format!(
                "/dev/kvm exists but cannot give guests x86-64-v2 (missing {}), as in nested virtualisation; CoreOS would hang",
                missing.join(", ")
            ),
        }
    }
}

/// `domain_type: auto` found no usable KVM: may the cluster fall back to QEMU's
/// TCG? A rehearsal (stand-in nodes) may; a real cluster may not unless the user
/// asked for `qemu` by name: under TCG, etcd and the API server are an order of
/// magnitude slower and miss the installer's timeouts (etcd wants fsync and
/// heartbeats within its 100 ms interval: etcd's "Hardware recommendations"), so the
/// install would run for hours and fail. Returns the note for the user, or the
/// refusal with how to get KVM (nested virtualisation: the kernel's
/// Documentation/virt/kvm/x86/running-nested-guests.rst; libvirt's
/// `host-passthrough` CPU mode, formatdomain "CPU model and topology").
pub fn tcg_fallback(reason: &str, rehearsal: bool) -> Result<String, String> {
    if rehearsal {
        return Ok(format!(
            "{reason}: using QEMU's TCG (slower; fine for stand-in nodes)"
        ));
    }
    Err(format!(
        "{reason}, and a real cluster under QEMU's TCG (software emulation) misses every installer timeout: shiftlab does not fall back to it on its own. \
Give this host KVM: on bare metal, enable VT-x/AMD-V in the firmware; inside a VM, enable nested virtualisation on the outer host \
(/sys/module/kvm_intel/parameters/nested, or kvm_amd, must say Y or 1: `options kvm_intel nested=1` in /etc/modprobe.d/kvm.conf, then reload the module) \
and give this VM the host's CPU (libvirt `<cpu mode='host-passthrough'/>`, QEMU `-cpu host`) so that KVM can offer x86-64-v2. \
To run under TCG anyway, ask for it: `libvirt: {{domain_type: qemu}}` in the cluster file"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_cluster_never_falls_back_to_tcg_silently() {
        let e = tcg_fallback("/dev/kvm cannot be opened (No such file)", false).unwrap_err();
        assert!(e.starts_with("/dev/kvm cannot be opened"), "{e}");
        assert!(e.contains("nested"), "{e}");
        assert!(e.contains("host-passthrough"), "{e}");
        assert!(e.contains("domain_type: qemu"), "{e}");
        let ok = tcg_fallback("/dev/kvm cannot be opened (No such file)", true).unwrap();
        assert!(ok.contains("TCG"), "{ok}");
    }

    #[test]
    fn nested_kvm_without_sse3_is_refused() {
        // Leaf 1 ECX as seen on a nested host: cx16 but no sse3/ssse3/sse4/popcnt.
        let nested = [
            (1, 0, [0, 0, 0x8120_2000, 0]),
            (0x8000_0001, 0, [0, 0, 0x40_0393, 0]),
        ];
        assert_eq!(
            missing_v2_features(&nested),
            vec!["sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"]
        );
        let full = [
            (1, 0, [0, 0, 0x0098_2201, 0]),
            (0x8000_0001, 0, [0, 0, 1, 0]),
        ];
        assert!(missing_v2_features(&full).is_empty());
    }
}
