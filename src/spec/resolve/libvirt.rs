//! `libvirt:`: the connection, the storage pool, domain type, firmware and the
//! graphical console.

use std::path::PathBuf;

use super::{pick, valid_name, Env};
use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;
use crate::spec::types::*;

pub fn resolve(raw: &RawSpec, env: &Env, rehearsal: bool, d: &mut Diagnostics) -> LibvirtSpec {
    let libvirt = LibvirtSpec {
        uri: crate::spec::uri::choose_uri(
            raw.libvirt.uri.as_ref().map(|s| s.v.as_str()),
            env.libvirt_default_uri.as_deref(),
        ),
        pool: match &raw.libvirt.pool {
            Some(p) => {
                if !valid_name(&p.v, 64) {
                    d.error(
                        &p.field,
                        format!(
                            "{:?} is not a valid pool name: letters, digits, '-', '_' and '.'",
                            p.v
                        ),
                    );
                }
                p.v.clone()
            }
            None => "shiftlab".into(),
        },
        pool_path: raw.libvirt.pool_path.as_ref().map_or_else(
            || PathBuf::from("/var/lib/libvirt/images/shiftlab"),
            |p| {
                if !p.v.starts_with('/') {
                    d.error(
                        &p.field,
                        format!("{:?} must be an absolute path on the libvirt host", p.v),
                    );
                }
                PathBuf::from(&p.v)
            },
        ),
        domain_type: pick(
            &[
                ("auto", DomainType::Auto),
                ("kvm", DomainType::Kvm),
                ("qemu", DomainType::Qemu),
            ],
            &raw.libvirt.domain_type,
            DomainType::Auto,
            d,
        ),
        firmware: pick(
            &[("bios", Firmware::Bios), ("uefi", Firmware::Uefi)],
            &raw.libvirt.firmware,
            Firmware::Bios,
            d,
        ),
        graphics: pick(
            &[
                ("none", Graphics::None),
                ("vnc", Graphics::Vnc),
                ("spice", Graphics::Spice),
            ],
            &raw.libvirt.graphics,
            default_graphics(rehearsal),
            d,
        ),
        cpu_model: raw.libvirt.cpu_model.as_ref().map(|m| {
            if crate::release::cpu_level::model_missing(&m.v, crate::release::CpuLevel::V1)
                .is_none()
            {
                let names: Vec<&str> = crate::release::cpu_level::MODELS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect();
                d.error(
                    &m.field,
                    format!(
                        "{:?} is not a QEMU x86 CPU model shiftlab knows the features of; use one of {}",
                        m.v,
                        names.join(", ")
                    ),
                );
            }
            m.v.clone()
        }),
    };
    if libvirt.uri.trim().is_empty() {
        d.error(
            "libvirt.uri",
            format!("empty; use e.g. {}", crate::spec::uri::SYSTEM_URI),
        );
    }
    libvirt
}

/// A real cluster gets a VNC screen, as kcli's VMs do (its `vnc` default) and
/// virt-manager shows; a rehearsal's stand-in nodes have nothing to show, so
/// they stay headless (and QEMU under TCG does not draw a screen for nothing).
fn default_graphics(rehearsal: bool) -> Graphics {
    if rehearsal {
        Graphics::None
    } else {
        Graphics::Vnc
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::{from_str, Env, Graphics};

    fn graphics(extra: &str) -> Graphics {
        let text =
            format!("cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n{extra}");
        from_str(&text, "t.yaml", &Env::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .spec
            .libvirt
            .graphics
    }

    #[test]
    fn a_real_cluster_has_a_screen_and_a_rehearsal_none_unless_asked() {
        assert_eq!(graphics(""), Graphics::Vnc);
        assert_eq!(graphics("rehearsal: true\n"), Graphics::None);
        assert_eq!(graphics("libvirt: {graphics: none}\n"), Graphics::None);
        assert_eq!(graphics("libvirt: {graphics: spice}\n"), Graphics::Spice);
        assert_eq!(
            graphics("rehearsal: true\nlibvirt: {graphics: vnc}\n"),
            Graphics::Vnc
        );
    }
}
