//! `libvirt:`: the connection, the storage pool, domain type and firmware.

use std::path::PathBuf;

use super::{pick, valid_name, Env};
use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;
use crate::spec::types::*;

pub fn resolve(raw: &RawSpec, env: &Env, d: &mut Diagnostics) -> LibvirtSpec {
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
