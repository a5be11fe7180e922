//! The IPv6 half of a dual-stack plan (docs/ipv6.md): the network's IPv6
//! subnet with its DHCPv6 reservations, the VIPs, and the AAAA, `ip6.arpa` PTR
//! and `*.apps` records beside their IPv4 twins.
//!
//! DHCPv6 reservations are by DUID: libvirt's IPv6 `<host>` takes no `mac`
//! (libvirt formatnetwork.html, "there is no mac attribute since a MAC address
//! has no defined meaning in IPv6"), only `id` (a DUID) or `name`. A DUID is
//! what the client sends; CoreOS nodes send the link-layer DUID (DUID-LL, type
//! 3, hardware type 1 and the MAC: RFC 8415 section 11.4), because OpenShift
//! configures NetworkManager with `ipv6.dhcp-duid=ll` and `ipv6.dhcp-iaid=mac`
//! (openshift/assisted-service internal/common/common.go `Ipv6DuidRuntimeConf`,
//! the same line dev-scripts and ironic's ramdisk use) so that the address is
//! the same on every boot. A `name` reservation would depend on the hostname a
//! node sends before it has one.

use std::net::Ipv6Addr;

use ipnet::Ipv6Net;
use serde::{Deserialize, Serialize};

use super::{DnsRecord, Node, Plan, RecordType};
use crate::addressing;
use crate::spec::Ipv6Spec;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ipv6Network {
    pub cidr: Ipv6Net,
    /// The host's address on the bridge: the nodes' router (libvirt sends the
    /// router advertisements) and DNS server.
    pub gateway: Ipv6Addr,
    /// IPv6 is the primary family: listed first in the install-config.
    pub primary: bool,
    /// The load balancer's IPv6 addresses on the host side of the bridge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_addresses: Vec<Ipv6Addr>,
    pub dhcp: DhcpRange6,
    pub reservations: Vec<Reservation6>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DhcpRange6 {
    pub start: Ipv6Addr,
    pub end: Ipv6Addr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation6 {
    /// The node's DUID-LL ([`duid_ll`]).
    pub id: String,
    pub ip: Ipv6Addr,
    pub hostname: String,
}

/// The DUID-LL of a MAC: type 3 (`00:03`), hardware type 1 Ethernet (`00:01`),
/// then the MAC itself.
pub fn duid_ll(mac: &str) -> String {
    format!("00:03:00:01:{}", mac.to_ascii_lowercase())
}

impl Ipv6Network {
    /// `has_lb`: the host load balancer holds the IPv6 VIPs, as the IPv4 ones.
    pub fn new(v6: &Ipv6Spec, nodes: &[Node], has_lb: bool) -> Self {
        let mut host_addresses = Vec::new();
        if has_lb {
            host_addresses.push(v6.api_ip);
            if v6.ingress_ip != v6.api_ip {
                host_addresses.push(v6.ingress_ip);
            }
        }
        Ipv6Network {
            host_addresses,
            cidr: v6.cidr,
            gateway: addressing::gateway6(&v6.cidr),
            primary: v6.primary,
            dhcp: DhcpRange6 {
                start: v6.dhcp_start,
                end: v6.dhcp_end,
            },
            reservations: nodes
                .iter()
                .filter_map(|n| {
                    Some(Reservation6 {
                        id: duid_ll(&n.mac),
                        ip: n.ipv6?,
                        hostname: n.name.clone(),
                    })
                })
                .collect(),
        }
    }
}

/// The IPv6 VIPs and records, after the IPv4 ones: api and api-int AAAA, the
/// `*.apps` wildcard, the API's PTR where no node holds its address, and every
/// node's AAAA and PTR.
pub fn add_records(plan: &mut Plan, v6: &Ipv6Spec) {
    plan.vips.api6 = Some(v6.api_ip);
    plan.vips.ingress6 = Some(v6.ingress_ip);
    let cd = plan.cluster_domain.clone();
    let rec = |name: String, kind: RecordType, value: String| DnsRecord { name, kind, value };
    let mut dns = vec![
        rec(format!("api.{cd}"), RecordType::AAAA, v6.api_ip.to_string()),
        rec(
            format!("api-int.{cd}"),
            RecordType::AAAA,
            v6.api_ip.to_string(),
        ),
        rec(
            format!("*.apps.{cd}"),
            RecordType::Wildcard6,
            v6.ingress_ip.to_string(),
        ),
    ];
    if !plan.nodes.iter().any(|n| n.ipv6 == Some(v6.api_ip)) {
        dns.push(rec(
            addressing::reverse_name6(v6.api_ip),
            RecordType::PTR,
            format!("api.{cd}"),
        ));
    }
    for n in &plan.nodes {
        let Some(ip) = n.ipv6 else { continue };
        dns.push(rec(n.fqdn.clone(), RecordType::AAAA, ip.to_string()));
        dns.push(rec(
            addressing::reverse_name6(ip),
            RecordType::PTR,
            n.fqdn.clone(),
        ));
    }
    plan.dns.extend(dns);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duid_ll_is_type_3_ethernet_and_the_mac() {
        assert_eq!(
            duid_ll("52:54:00:AB:cd:01"),
            "00:03:00:01:52:54:00:ab:cd:01"
        );
    }
}
