//! `bmc:`: shiftlab's Redfish BMC (method `ipi`), by default on the gateway of
//! the primary family.

use std::net::IpAddr;

use crate::addressing;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;
use crate::spec::types::*;

pub fn resolve(
    raw: &RawSpec,
    network: &NetworkSpec,
    ipv6: Option<&Ipv6Spec>,
    d: &mut Diagnostics,
) -> BmcSpec {
    let gateway = match (ipv6, &network.cidr) {
        (Some(v6), _) if v6.primary => IpAddr::V6(addressing::gateway6(&v6.cidr)),
        (_, Some(v4)) => IpAddr::V4(addressing::gateway(v4)),
        // An error already said why there is no network: any address will do.
        (_, None) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    };
    let address = match &raw.bmc.address {
        None => gateway,
        // Where the nodes reach it: an IPv6 BMC for a lab whose nodes have IPv6.
        Some(s) if s.v.is_ipv6() && raw.network.cidr6.is_none() => {
            d.error(
                &s.field,
                format!(
                    "{}: an IPv6 BMC address needs a dual-stack network.cidr ([<IPv4 CIDR>, <IPv6 CIDR>]); use an IPv4 address such as {gateway}",
                    s.v
                ),
            );
            gateway
        }
        Some(s) if s.v.is_ipv4() && network.cidr.is_none() && raw.network.cidr6.is_some() => {
            d.error(
                &s.field,
                format!(
                    "{}: an IPv4 BMC address in an IPv6 single-stack lab, whose nodes have no IPv4; use an IPv6 address such as {gateway}",
                    s.v
                ),
            );
            gateway
        }
        Some(s) => s.v,
    };
    BmcSpec {
        address,
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
