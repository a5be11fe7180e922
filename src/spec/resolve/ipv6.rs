//! Dual-stack (docs/ipv6.md): the IPv6 halves of `network.cidr`, `api_ip`,
//! `ingress_ip`, `cluster_network` and `service_network`, checked as their IPv4
//! halves are (size, reserved ranges, OVN's internal ranges, overlaps, VIPs clear
//! of the gateway, the nodes and the DHCP range), plus what OpenShift's installer
//! refuses of IPv6 (openshift/installer pkg/types/validation/installconfig.go,
//! `validateNetworkingIPVersion` and `validateClusterNetwork`).
//!
//! IPv6 single-stack (`network.cidr` IPv6 alone) is this half without the
//! IPv4 one (spec::resolve::network refuses its IPv4 values); IPv6 is then
//! the primary family.

use std::net::Ipv6Addr;

use ipnet::Ipv6Net;

use super::network::ClusterNetworks;
use super::topology::Topology;
use crate::addressing;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::{RawSpec, Src};
use crate::spec::types::*;

/// OpenShift's usual IPv6 pod and service networks (the defaults;
/// openshift-metal3/dev-scripts' CLUSTER_SUBNET_V6 and SERVICE_SUBNET_V6). The
/// host prefix must be 64 (installer, `validateClusterNetwork`).
pub const DEFAULT_CLUSTER_NETWORK6: &str = "fd01::/48";
pub const DEFAULT_SERVICE_NETWORK6: &str = "fd02::/112";
pub const HOST_PREFIX6: u8 = 64;

/// OVN-Kubernetes' internal IPv6 ranges, the defaults of
/// openshift/cluster-network-operator pkg/network/ovn_kubernetes.go
/// (`defaultV6InternalSubnet`, `defaultV6TransitSwitchSubnet`) and the
/// masquerade range the installer checks against
/// (`validateNetworkNotOverlapDefaultOVNSubnets`: `fd69::/112`).
pub const OVN_RANGES6: [(&str, &str); 3] = [
    ("fd98::/64", "OVN's join switch"),
    ("fd97::/64", "OVN's transit switch"),
    ("fd69::/112", "OVN's masquerade range"),
];

/// Never a lab network: not unicast, or not routable on a link.
const RESERVED6: [(&str, &str); 5] = [
    ("::/127", "the unspecified and loopback addresses"),
    ("::ffff:0:0/96", "IPv4-mapped addresses"),
    ("fe80::/10", "link-local addresses"),
    ("ff00::/8", "multicast"),
    ("64:ff9b::/96", "the NAT64 prefix"),
];

/// Documentation ranges (RFC 3849, RFC 9637): a rehearsal's lab never leaves
/// the host, so it may use them; a real cluster may not.
const DOCUMENTATION6: [&str; 2] = ["2001:db8::/32", "3fff::/20"];

/// The smallest and largest IPv6 lab subnet: /64 is what SLAAC and most
/// tooling expect; /120 holds 256 addresses, as a v4 /24.
const PREFIX_RANGE: (u8, u8) = (64, 120);

/// Kubernetes' API server refuses an IPv6 service range wider than /108
/// (20 bits of service addresses).
const SERVICE_PREFIX_MIN: u8 = 108;

fn overlaps6(a: &Ipv6Net, b: &Ipv6Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// A written value's field and text.
pub(super) fn given<T: ToString>(s: &Option<Src<T>>) -> Option<(String, String)> {
    s.as_ref().map(|s| (s.field.clone(), s.v.to_string()))
}

fn net(s: &str) -> Ipv6Net {
    s.parse().expect("a constant CIDR")
}

/// The IPv6 half, `None` for an IPv4-only file (and after an error that leaves
/// none to plan).
pub fn resolve(
    raw: &RawSpec,
    topo: &Topology,
    nets: &ClusterNetworks,
    d: &mut Diagnostics,
) -> Option<Ipv6Spec> {
    let n = &raw.network;
    let Some(cidr) = &n.cidr6 else {
        // IPv6 values without an IPv6 machine network.
        for (src, what) in [
            (given(&n.api_ip6), "api_ip"),
            (given(&n.ingress_ip6), "ingress_ip"),
            (given(&raw.cluster_network6), "cluster_network"),
            (given(&raw.service_network6), "service_network"),
        ] {
            if let Some((field, value)) = src {
                d.error(
                    field,
                    format!("{value}: an IPv6 {what} needs an IPv6 network.cidr: write network.cidr as [<IPv4 CIDR>, <IPv6 CIDR>] for dual-stack"),
                );
            }
        }
        return None;
    };
    let mut ok = subnet(cidr, topo.rehearsal, d);
    let cluster = cluster_network(raw, d);
    let service = service_network(raw, d);
    ok &= disjoint(cidr, &cluster, &service, d);
    ok &= family_rules(raw, topo, nets, n.ipv6_first, d);
    if !ok {
        return None;
    }
    let (dhcp_start, dhcp_end) = addressing::default_dhcp6(&cidr.v);
    let (api_ip, ingress_ip) = vips(raw, &cidr.v, topo, (dhcp_start, dhcp_end), d)?;
    Some(Ipv6Spec {
        cidr: cidr.v,
        api_ip,
        ingress_ip,
        dhcp_start,
        dhcp_end,
        cluster_network: cluster.v,
        cluster_network_host_prefix: HOST_PREFIX6,
        service_network: service.v,
        primary: n.ipv6_first,
    })
}

/// The machine network's IPv6 subnet: its size, a unicast range, clear of
/// OVN's ranges; documentation ranges only in a rehearsal.
fn subnet(cidr: &Src<Ipv6Net>, rehearsal: bool, d: &mut Diagnostics) -> bool {
    let (v, field) = (cidr.v, &cidr.field);
    let p = v.prefix_len();
    if p < PREFIX_RANGE.0 || p > PREFIX_RANGE.1 {
        d.error(
            field,
            format!(
                "{v}: /{p} is not a usable IPv6 lab network size; use a prefix from /{} to /{} (e.g. /64)",
                PREFIX_RANGE.0, PREFIX_RANGE.1
            ),
        );
        return false;
    }
    let mut ok = true;
    for (r, what) in RESERVED6 {
        if overlaps6(&v, &net(r)) {
            d.error(
                field,
                format!(
                    "{v} overlaps {r}, {what}; use a unique local range such as fd00:1:2:3::/64"
                ),
            );
            ok = false;
        }
    }
    for r in DOCUMENTATION6 {
        if !rehearsal && overlaps6(&v, &net(r)) {
            d.error(
                field,
                format!("{v} is in the documentation range {r}, allowed only in a rehearsal (rehearsal: true); use a unique local range such as fd00:1:2:3::/64"),
            );
            ok = false;
        }
    }
    ok & clear_of_ovn(&v, field, d)
}

fn clear_of_ovn(v: &Ipv6Net, field: &str, d: &mut Diagnostics) -> bool {
    let mut ok = true;
    for (r, what) in OVN_RANGES6 {
        if overlaps6(v, &net(r)) {
            d.error(
                field,
                format!("{v} overlaps {r}, {what}; choose another range"),
            );
            ok = false;
        }
    }
    ok
}

fn cluster_network(raw: &RawSpec, d: &mut Diagnostics) -> Src<Ipv6Net> {
    let c = raw.cluster_network6.clone().unwrap_or(Src {
        v: net(DEFAULT_CLUSTER_NETWORK6),
        field: "cluster_network".into(),
    });
    if c.v.prefix_len() >= HOST_PREFIX6 {
        d.error(
            &c.field,
            format!(
                "{}: the IPv6 cluster network must be wider than /{HOST_PREFIX6}, each node's share (the installer's IPv6 hostPrefix is always 64); e.g. {DEFAULT_CLUSTER_NETWORK6}",
                c.v
            ),
        );
    }
    clear_of_ovn(&c.v, &c.field, d);
    c
}

fn service_network(raw: &RawSpec, d: &mut Diagnostics) -> Src<Ipv6Net> {
    let s = raw.service_network6.clone().unwrap_or(Src {
        v: net(DEFAULT_SERVICE_NETWORK6),
        field: "service_network".into(),
    });
    if s.v.prefix_len() < SERVICE_PREFIX_MIN {
        d.error(
            &s.field,
            format!(
                "{}: an IPv6 service network may be at most /{SERVICE_PREFIX_MIN} (Kubernetes' limit); e.g. {DEFAULT_SERVICE_NETWORK6}",
                s.v
            ),
        );
    }
    clear_of_ovn(&s.v, &s.field, d);
    s
}

/// The three IPv6 networks must not overlap.
fn disjoint(
    cidr: &Src<Ipv6Net>,
    cluster: &Src<Ipv6Net>,
    service: &Src<Ipv6Net>,
    d: &mut Diagnostics,
) -> bool {
    let mut ok = true;
    for (a, b, bname) in [
        (cidr, cluster, "cluster_network"),
        (cidr, service, "service_network"),
        (service, cluster, "cluster_network"),
    ] {
        if overlaps6(&a.v, &b.v) {
            d.error(
                &a.field,
                format!(
                    "{} overlaps {bname} {}; the three IPv6 networks must be disjoint",
                    a.v, b.v
                ),
            );
            ok = false;
        }
    }
    ok
}

/// What the installer refuses of IPv6, and what shiftlab plans for libvirt only.
fn family_rules(
    raw: &RawSpec,
    topo: &Topology,
    nets: &ClusterNetworks,
    ipv6_first: bool,
    d: &mut Diagnostics,
) -> bool {
    let mut ok = true;
    if nets.network_type != "OVNKubernetes" {
        d.error(
            raw.network_type
                .as_ref()
                .map_or("network_type", |s| s.field.as_str()),
            format!(
                "{}: dual-stack needs OVNKubernetes (the installer refuses IPv6 with any other network type)",
                nets.network_type
            ),
        );
        ok = false;
    }
    // The installer takes an IPv6-primary dual-stack only on platform baremetal
    // (`allowV6Primary`); upi, sno and agent are platform none. IPv6
    // single-stack it takes on both.
    let dual = raw.network.cidr.is_some();
    if let Some(c) = raw.network.cidr6.as_ref().filter(|_| ipv6_first && dual) {
        if topo.method != Method::Ipi {
            d.error(
                &c.field,
                format!(
                    "{}: IPv6 first (the primary family) is accepted by the installer only on platform baremetal (method ipi); method {} is platform none: list the IPv4 CIDR first",
                    c.v, topo.method
                ),
            );
            ok = false;
        }
    }
    if let Some(b) = raw.backend.as_ref().filter(|b| b.v == "kubevirt") {
        d.error(
            &b.field,
            "IPv6 (dual-stack or single-stack) is planned for the libvirt backend only; give network.cidr an IPv4 CIDR alone",
        );
        ok = false;
    }
    ok
}

/// The IPv6 API and ingress VIPs: the same offsets and rules as IPv4's
/// (network::vips); `None` after an error.
fn vips(
    raw: &RawSpec,
    cidr: &Ipv6Net,
    topo: &Topology,
    (dhcp_start, dhcp_end): (Ipv6Addr, Ipv6Addr),
    d: &mut Diagnostics,
) -> Option<(Ipv6Addr, Ipv6Addr)> {
    let n = &raw.network;
    let node = |first: u32, i: u32| addressing::offset6(cidr, first.saturating_add(i));
    let ctlplane0 = node(addressing::CTLPLANE_OFFSET, 0);
    let first_node = if topo.method == Method::Upi {
        node(addressing::BOOTSTRAP_OFFSET, 0)
    } else {
        ctlplane0
    };
    let last_node = if topo.workers > 0 {
        node(addressing::WORKER_OFFSET, topo.workers - 1)
    } else {
        node(
            addressing::CTLPLANE_OFFSET,
            topo.ctlplanes.saturating_sub(1),
        )
    };
    if last_node >= dhcp_start {
        let field = n
            .cidr6
            .as_ref()
            .map_or("network.cidr", |s| s.field.as_str());
        d.error(
            field,
            format!("the nodes' IPv6 addresses {first_node} to {last_node} reach the DHCPv6 range from {dhcp_start}; use a larger IPv6 network (e.g. a /64)"),
        );
        return None;
    }
    let api = addressing::offset6(cidr, addressing::API_OFFSET);
    let (def_api, def_ingress) = if topo.single_node() {
        (ctlplane0, ctlplane0)
    } else if topo.method == Method::Ipi {
        (api, addressing::offset6(cidr, addressing::INGRESS_OFFSET))
    } else {
        (api, api)
    };
    let api_ip = n.api_ip6.as_ref().map_or(def_api, |s| s.v);
    let ingress_ip = n.ingress_ip6.as_ref().map_or(def_ingress, |s| s.v);
    let gateway = addressing::gateway6(cidr);
    let mut ok = true;
    for (ip, src, which) in [
        (api_ip, &n.api_ip6, "api_ip"),
        (ingress_ip, &n.ingress_ip6, "ingress_ip"),
    ] {
        let Some(src) = src else { continue };
        let problem = if topo.single_node() {
            (ip != ctlplane0).then(|| format!("{ip}: a single-node cluster has no load balancer or VIP; the IPv6 {which} is the node's own address {ctlplane0} (leave it out)"))
        } else if !addressing::is_host6(cidr, ip) {
            Some(format!("{ip} is outside the cluster's IPv6 network {cidr}; use an address of it below {dhcp_start}, e.g. {api}"))
        } else if ip == gateway {
            Some(format!(
                "{ip} is the IPv6 gateway (the host); choose another address, e.g. {api}"
            ))
        } else if dhcp_start <= ip && ip <= dhcp_end {
            Some(format!("{ip} is inside the DHCPv6 range {dhcp_start} to {dhcp_end}; a lease could take it. Choose e.g. {api}"))
        } else if first_node <= ip && ip <= last_node {
            Some(format!("{ip} is a node's IPv6 address (nodes use {first_node} to {last_node}); choose e.g. {api}"))
        } else {
            None
        };
        if let Some(p) = problem {
            d.error(&src.field, p);
            ok = false;
        }
    }
    if topo.method == Method::Ipi && api_ip == ingress_ip {
        d.error(
            n.ingress_ip6
                .as_ref()
                .map_or("network.ingress_ip", |s| s.field.as_str()),
            format!("{ingress_ip} is also the IPv6 API VIP; bare-metal IPI needs two different VIPs per family"),
        );
        ok = false;
    }
    ok.then_some((api_ip, ingress_ip))
}
