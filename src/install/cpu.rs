//! The CPU the nodes will get against the level the release's CoreOS stream
//! needs (src/release/cpu_level.rs), decided before anything is created: by
//! `plan` when the cluster file names a local installer, by the release target
//! otherwise. `--force` does not skip it: an image built for a level the CPU
//! lacks does not boot at all.

use std::collections::BTreeSet;

use anyhow::{bail, Result};

use crate::release::cpu_level::{self, GuestCpu, StreamLevel};
use crate::spec::{BackendKind, ClusterSpec, DomainType};

/// What decides the nodes' CPU, as far as the spec and this machine tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeCpu {
    /// `libvirt.cpu_model`.
    Model(String),
    /// QEMU's TCG with the model shiftlab picks for the level.
    Tcg,
    /// KVM with the host's CPU; `value` is `libvirt.domain_type`'s.
    Host {
        value: &'static str,
        flags: BTreeSet<String>,
    },
    /// Not knowable here (a remote libvirt host, KubeVirt): why.
    Unknown(&'static str),
}

/// The nodes' CPU for `spec`. `kvm_usable` and `host_flags` are asked only
/// when the answer depends on them (a local libvirt without a model).
pub fn node_cpu(
    spec: &ClusterSpec,
    kvm_usable: impl FnOnce() -> bool,
    host_flags: impl FnOnce() -> Option<BTreeSet<String>>,
) -> NodeCpu {
    if spec.backend == BackendKind::Kubevirt {
        return NodeCpu::Unknown("KubeVirt VMs get the CPU their cluster gives them");
    }
    if let Some(m) = &spec.libvirt.cpu_model {
        return NodeCpu::Model(m.clone());
    }
    let value = match spec.libvirt.domain_type {
        DomainType::Qemu => return NodeCpu::Tcg,
        DomainType::Kvm => "kvm",
        DomainType::Auto => "auto",
    };
    if !crate::libvirt::uri_is_local(&spec.libvirt.uri) {
        return NodeCpu::Unknown("the remote libvirt host's CPU is not read from here");
    }
    if value == "auto" && !kvm_usable() {
        return NodeCpu::Tcg;
    }
    match host_flags() {
        Some(flags) => NodeCpu::Host { value, flags },
        None => NodeCpu::Unknown("/proc/cpuinfo is not readable"),
    }
}

/// Refuse when the nodes' CPU lacks the stream's level; else a note for the user.
pub fn check(stream: &StreamLevel, cpu: &NodeCpu) -> Result<String> {
    let guest = match cpu {
        NodeCpu::Model(name) => GuestCpu::Model {
            field: "libvirt.cpu_model",
            name,
        },
        NodeCpu::Tcg => {
            let model = cpu_level::tcg_model(stream.level);
            return Ok(format!(
                "{}: QEMU's TCG runs the nodes as {model}",
                stream.rule()
            ));
        }
        NodeCpu::Host { value, flags } => GuestCpu::Host {
            field: "libvirt.domain_type",
            value,
            flags,
        },
        NodeCpu::Unknown(why) => {
            return Ok(format!("{}: not checked ({why})", stream.rule()));
        }
    };
    if let Err(e) = cpu_level::check(stream, &guest) {
        bail!("{e}");
    }
    Ok(format!("{}: the nodes' CPU has it", stream.rule()))
}

/// [`node_cpu`] on this machine: KVM's own verdict and `/proc/cpuinfo`.
pub fn node_cpu_here(spec: &ClusterSpec) -> NodeCpu {
    node_cpu(
        spec,
        || crate::host::kvm::check().usable,
        || {
            std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .map(|t| cpu_level::cpuinfo_flags(&t))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(libvirt: &str) -> ClusterSpec {
        let text = format!(
            "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\n{libvirt}"
        );
        crate::spec::from_str(&text, "t.yaml", &crate::spec::Env::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .spec
    }

    fn c10s() -> StreamLevel {
        cpu_level::stream_level(
            r#"{"stream":"c10s","architectures":{"x86_64":{"artifacts":{"qemu":{"release":"10.0.20250628-0"}}}}}"#,
        )
        .unwrap()
    }

    fn v2_flags() -> Option<BTreeSet<String>> {
        Some(
            "cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3"
                .split(' ')
                .map(str::to_string)
                .collect(),
        )
    }

    #[test]
    fn which_cpu_the_nodes_get() {
        let never = || -> bool { panic!("KVM asked") };
        let no_flags = || -> Option<BTreeSet<String>> { panic!("cpuinfo read") };
        assert_eq!(
            node_cpu(&spec("libvirt:\n  cpu_model: Nehalem\n"), never, no_flags),
            NodeCpu::Model("Nehalem".into())
        );
        assert_eq!(
            node_cpu(&spec("libvirt:\n  domain_type: qemu\n"), never, no_flags),
            NodeCpu::Tcg
        );
        assert!(matches!(
            node_cpu(
                &spec("libvirt:\n  uri: qemu+ssh://h/system\n  domain_type: kvm\n"),
                never,
                no_flags
            ),
            NodeCpu::Unknown(_)
        ));
        let local = "libvirt:\n  uri: qemu:///system\n";
        assert_eq!(node_cpu(&spec(local), || false, no_flags), NodeCpu::Tcg);
        assert!(matches!(
            node_cpu(&spec(local), || true, v2_flags),
            NodeCpu::Host { value: "auto", .. }
        ));
    }

    #[test]
    fn c10s_on_a_v2_cpu_is_refused() {
        let e = check(&c10s(), &NodeCpu::Model("Nehalem".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("libvirt.cpu_model: Nehalem lacks avx, avx2, bmi1, bmi2, f16c, fma, abm, movbe, xsave (x86-64-v3): stream c10s"),
            "{e}"
        );
        let host = NodeCpu::Host {
            value: "kvm",
            flags: v2_flags().unwrap(),
        };
        let e = check(&c10s(), &host).unwrap_err().to_string();
        assert!(
            e.starts_with("libvirt.domain_type: kvm runs the nodes under KVM"),
            "{e}"
        );
        let ok = check(&c10s(), &NodeCpu::Tcg).unwrap();
        assert!(
            ok.ends_with("QEMU's TCG runs the nodes as Haswell-noTSX-IBRS"),
            "{ok}"
        );
        assert!(check(&c10s(), &NodeCpu::Model("Haswell-noTSX-IBRS".into())).is_ok());
    }
}
