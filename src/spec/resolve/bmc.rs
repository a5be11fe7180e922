//! `bmc:`: shiftlab's Redfish BMC (method `ipi`), by default on the gateway.

use crate::addressing;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;
use crate::spec::types::*;

pub fn resolve(raw: &RawSpec, network: &NetworkSpec, d: &mut Diagnostics) -> BmcSpec {
    BmcSpec {
        address: raw
            .bmc
            .address
            .as_ref()
            .map_or(addressing::gateway(&network.cidr), |s| s.v),
        port: match &raw.bmc.port {
            Some(p) if p.v == 0 || p.v > 65535 => {
                d.error(&p.field, format!("{} is not a TCP port (1-65535)", p.v));
                8443
            }
            Some(p) => p.v as u16,
            None => 8443,
        },
        username: raw
            .bmc
            .username
            .as_ref()
            .map_or("admin".into(), |s| s.v.clone()),
        password: raw.bmc.password.as_ref().map(|s| s.v.clone()),
        verify_certificate: raw.bmc.verify_certificate.as_ref().is_some_and(|s| s.v),
    }
}
