//! The cluster's networks: the pod and service networks with `network_type`, and
//! the machine network (`network:`) laid out by [`crate::addressing`].

use ipnet::Ipv4Net;

use super::ipv6::given;
use super::topology::Topology;
use super::{overlaps, pick, valid_name};
use crate::addressing;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::{RawNetwork, RawSpec};
use crate::spec::types::*;

/// OVN-Kubernetes' internal ranges: a machine network inside them breaks the cluster.
pub const OVN_RANGES: [(&str, &str); 3] = [
    ("100.64.0.0/16", "OVN's join switch"),
    ("100.88.0.0/16", "OVN's transit switch"),
    ("169.254.0.0/17", "OVN's masquerade range"),
];

pub const DEFAULT_CIDR: &str = "192.168.126.0/24";

/// The networks inside the cluster, which the machine network must not overlap.
/// No IPv4 pod and service networks in an IPv6 single-stack lab.
pub struct ClusterNetworks {
    pub network_type: String,
    pub cluster_network: Option<Ipv4Net>,
    pub host_prefix: u8,
    pub service_network: Option<Ipv4Net>,
}

/// `network.cidr` is one IPv6 CIDR alone: the lab has no IPv4 (docs/ipv6.md).
pub fn ipv6_only(raw: &RawSpec) -> bool {
    raw.network.cidr.is_none() && raw.network.cidr6.is_some()
}

/// An IPv6 single-stack file's IPv4 values: each refused, naming the field.
fn refuse_ipv4_values(raw: &RawSpec, d: &mut Diagnostics) {
    let n = &raw.network;
    let given = [
        given(&n.api_ip),
        given(&n.ingress_ip),
        given(&n.dhcp_start),
        given(&n.dhcp_end),
        given(&raw.cluster_network),
        given(&raw.service_network),
        raw.cluster_network_host_prefix
            .as_ref()
            .map(|s| (s.field.clone(), format!("/{}", s.v))),
    ];
    for (field, value) in given.into_iter().flatten() {
        d.error(
            field,
            format!("{value}: an IPv4 value in an IPv6 single-stack lab (network.cidr is IPv6 alone); remove it, or add an IPv4 CIDR to network.cidr for dual-stack"),
        );
    }
}

pub fn cluster_networks(raw: &RawSpec, version: &Version, d: &mut Diagnostics) -> ClusterNetworks {
    if ipv6_only(raw) {
        refuse_ipv4_values(raw, d);
        return ClusterNetworks {
            network_type: network_type(raw, version, d),
            cluster_network: None,
            host_prefix: 23,
            service_network: None,
        };
    }
    let cluster_network = raw
        .cluster_network
        .as_ref()
        .map_or_else(|| "10.128.0.0/14".parse().unwrap(), |s| s.v);
    let service_network = raw
        .service_network
        .as_ref()
        .map_or_else(|| "172.30.0.0/16".parse().unwrap(), |s| s.v);
    let host_prefix = raw.cluster_network_host_prefix.as_ref().map_or(23, |s| s.v);
    if let Some(hp) = &raw.cluster_network_host_prefix {
        if hp.v <= cluster_network.prefix_len() as u64 || hp.v > 28 {
            d.error(
                &hp.field,
                format!(
                    "{} must be longer than the cluster network's /{} and at most 28",
                    hp.v,
                    cluster_network.prefix_len()
                ),
            );
        }
    }
    if overlaps(&cluster_network, &service_network) {
        d.error(
            raw.service_network
                .as_ref()
                .map_or("service_network".into(), |s| s.field.clone()),
            format!("{service_network} overlaps the cluster network {cluster_network}"),
        );
    }
    for (net, field, def) in [
        (&cluster_network, &raw.cluster_network, "cluster_network"),
        (&service_network, &raw.service_network, "service_network"),
    ] {
        for (r, what) in OVN_RANGES {
            let r: Ipv4Net = r.parse().unwrap();
            if overlaps(net, &r) {
                d.error(
                    field.as_ref().map_or(def.into(), |s| s.field.clone()),
                    format!("{net} overlaps {r}, {what}; choose another range"),
                );
            }
        }
    }
    ClusterNetworks {
        network_type: network_type(raw, version, d),
        cluster_network: Some(cluster_network),
        host_prefix: host_prefix.min(32) as u8,
        service_network: Some(service_network),
    }
}

/// `network_type`: OVN-Kubernetes, or OpenShiftSDN before 4.15.
fn network_type(raw: &RawSpec, version: &Version, d: &mut Diagnostics) -> String {
    match &raw.network_type {
        Some(s) => {
            match s.v.as_str() {
                "OVNKubernetes" => {}
                "OpenShiftSDN" => {
                    if super::versions::minor(version).is_some_and(|m| m >= 15) {
                        d.error(
                            &s.field,
                            "OpenShiftSDN was removed in 4.15; use OVNKubernetes",
                        );
                    } else {
                        d.warn(&s.field, "OpenShiftSDN is deprecated and gone from 4.15 on");
                    }
                }
                other => d.error(
                    &s.field,
                    format!("{other:?} is not one of OVNKubernetes, OpenShiftSDN"),
                ),
            }
            s.v.clone()
        }
        None => "OVNKubernetes".into(),
    }
}

/// `network:`: the subnet, its VIPs and DHCP range, checked against the node
/// layout of `topo` and the networks inside the cluster. Each concern has its own
/// function below, called in the order their errors are reported.
pub fn machine_network(
    raw: &RawSpec,
    cluster: &str,
    topo: &Topology,
    nets: &ClusterNetworks,
    d: &mut Diagnostics,
) -> NetworkSpec {
    let n = &raw.network;
    // An IPv6 single-stack lab has no IPv4 half (its IPv4 values were refused
    // with the cluster networks); its IPv6 one is spec::resolve::ipv6's.
    let cidr = (!ipv6_only(raw)).then(|| subnet(n, nets, d));
    let mode = pick(
        &[("nat", NetworkMode::Nat), ("bridge", NetworkMode::Bridge)],
        &n.mode,
        NetworkMode::Nat,
        d,
    );
    let (name, bridge) = names(n, cluster, mode, d);
    let v4 = cidr.map(|cidr| {
        let layout = layout(n, &cidr, topo, d);
        let vips = vips(n, &cidr, topo, &layout, d);
        (cidr, layout, vips)
    });
    let mac_prefix = mac_prefix(n, d);
    let veth_bridge = external_bridge(topo.method, mode, &bridge, n, d);
    NetworkSpec {
        name,
        mode,
        bridge,
        veth_bridge,
        cidr,
        api_ip: v4.as_ref().map(|(_, _, (api, _))| *api),
        ingress_ip: v4.as_ref().map(|(_, _, (_, ingress))| *ingress),
        dhcp_start: v4.as_ref().map(|(_, l, _)| l.dhcp_start),
        dhcp_end: v4.as_ref().map(|(_, l, _)| l.dhcp_end),
        mac_prefix,
    }
}

/// The field an error about the subnet names: what the user wrote, else `network.cidr`.
fn cidr_field(n: &RawNetwork) -> String {
    n.cidr
        .as_ref()
        .map_or("network.cidr".to_string(), |s| s.field.clone())
}

/// `network.cidr`: its size, a unicast range, clear of OVN's internal ranges and of
/// the pod and service networks.
fn subnet(n: &RawNetwork, nets: &ClusterNetworks, d: &mut Diagnostics) -> Ipv4Net {
    let cidr_field = cidr_field(n);
    // kcli files carry the VIPs but not the subnet: take the API address's /24 then.
    let mut cidr: Ipv4Net = match (&n.cidr, &n.api_ip) {
        (Some(c), _) => c.v,
        (None, Some(api)) => {
            Ipv4Net::new(api.v, 24).map_or_else(|_| DEFAULT_CIDR.parse().unwrap(), |n| n.trunc())
        }
        (None, None) => DEFAULT_CIDR.parse().unwrap(),
    };
    if cidr.prefix_len() > 27 || cidr.prefix_len() < 8 {
        d.error(
            &cidr_field,
            format!(
                "/{} is not a usable lab network size; use a prefix from /8 to /27 (e.g. /24)",
                cidr.prefix_len()
            ),
        );
        cidr = DEFAULT_CIDR.parse().unwrap();
    }
    let addr = cidr.network();
    if addr.is_loopback() || addr.is_multicast() || addr.is_unspecified() || addr.octets()[0] >= 240
    {
        d.error(
            &cidr_field,
            format!("{cidr} is not a usable unicast network; use a private range such as 192.168.126.0/24"),
        );
    }
    for (r, what) in OVN_RANGES {
        let r: Ipv4Net = r.parse().unwrap();
        if overlaps(&cidr, &r) {
            d.error(
                &cidr_field,
                format!("{cidr} overlaps {r}, {what}; choose another range, e.g. 192.168.126.0/24"),
            );
        }
    }
    for (other, name) in [
        (nets.cluster_network, "cluster_network"),
        (nets.service_network, "service_network"),
    ] {
        let Some(other) = &other else { continue };
        if overlaps(&cidr, other) {
            d.error(
                &cidr_field,
                format!("{cidr} overlaps {name} {other}; the three networks must be disjoint"),
            );
        }
    }
    cidr
}

/// The libvirt network's name and its bridge (a host bridge in mode bridge).
fn names(
    n: &RawNetwork,
    cluster: &str,
    mode: NetworkMode,
    d: &mut Diagnostics,
) -> (String, String) {
    let name = match &n.name {
        Some(s) if s.v == "default" => {
            d.error(
                &s.field,
                format!(
                    "\"default\" (libvirt's own network, kcli's default) is not supported by shiftlab because it adds the cluster's DNS records and DHCP reservations only to a network it creates and owns: leave `network` out (shiftlab creates shiftlab-{cluster}, a NAT network as default is) or name a new one"
                ),
            );
            s.v.clone()
        }
        Some(s) => {
            if !valid_name(&s.v, 64) {
                d.error(
                    &s.field,
                    format!(
                        "{:?} is not a valid libvirt network name: up to 64 letters, digits, '-', '_' and '.'",
                        s.v
                    ),
                );
            }
            s.v.clone()
        }
        None => format!("shiftlab-{cluster}"),
    };
    let bridge = match (&n.bridge, mode) {
        (Some(b), _) => {
            if !valid_name(&b.v, 15) {
                d.error(
                    &b.field,
                    format!(
                        "{:?} is not a valid bridge name: up to 15 letters, digits, '-', '_' and '.'",
                        b.v
                    ),
                );
            }
            b.v.clone()
        }
        (None, NetworkMode::Bridge) => {
            d.error(
                "network.bridge",
                "missing: mode bridge needs the name of an existing host bridge, e.g. br0",
            );
            String::new()
        }
        (None, NetworkMode::Nat) => addressing::bridge_name(cluster),
    };
    (name, bridge)
}

/// Where addresses go in the subnet: the gateway, the nodes' fixed range, the DHCP range.
struct Layout {
    gateway: std::net::Ipv4Addr,
    /// First and last node address.
    nodes: (std::net::Ipv4Addr, std::net::Ipv4Addr),
    /// The nodes do not fit in the subnet (already reported).
    too_many: bool,
    dhcp_start: std::net::Ipv4Addr,
    dhcp_end: std::net::Ipv4Addr,
}

/// The DHCP range (`dhcp_start`, `dhcp_end`) and whether the nodes fit beside it.
fn layout(n: &RawNetwork, cidr: &Ipv4Net, topo: &Topology, d: &mut Diagnostics) -> Layout {
    let gateway = addressing::gateway(cidr);
    let bootstrap = topo.method == Method::Upi;
    let nodes = addressing::node_range(cidr, bootstrap, topo.ctlplanes, topo.workers);
    let last_node = nodes.1;
    let (mut def_start, mut def_end) = addressing::default_dhcp(cidr);
    // A VIP written into the default range (kcli's are .253 and .252) moves the
    // range off it; a range the file sets is the user's, and checked as written.
    if n.dhcp_start.is_none() && n.dhcp_end.is_none() {
        let vips: Vec<_> = [&n.api_ip, &n.ingress_ip]
            .into_iter()
            .flatten()
            .map(|s| s.v)
            .collect();
        (def_start, def_end) = clear_of((def_start, def_end), &vips);
    }
    let dhcp_start = n.dhcp_start.as_ref().map_or(def_start, |s| s.v);
    let dhcp_end = n.dhcp_end.as_ref().map_or(def_end, |s| s.v);
    let dhcp_field = n
        .dhcp_start
        .as_ref()
        .map_or("network.dhcp_start".to_string(), |s| s.field.clone());
    for (ip, src, which) in [
        (dhcp_start, &n.dhcp_start, "dhcp_start"),
        (dhcp_end, &n.dhcp_end, "dhcp_end"),
    ] {
        if src.is_some() && !addressing::is_host(cidr, ip) {
            d.error(
                format!("network.{which}"),
                format!(
                    "{ip} is not a host address of {cidr} (valid: {} to {})",
                    addressing::first_host(cidr),
                    addressing::last_host(cidr)
                ),
            );
        }
    }
    if dhcp_start > dhcp_end {
        d.error(
            &dhcp_field,
            format!("the DHCP range {dhcp_start}-{dhcp_end} is empty: dhcp_start must not be after dhcp_end"),
        );
    }
    if dhcp_start <= gateway && gateway <= dhcp_end {
        d.error(
            &dhcp_field,
            format!("the DHCP range {dhcp_start}-{dhcp_end} contains the gateway {gateway}"),
        );
    }

    // Nodes live at fixed offsets so that adding workers never renumbers anyone.
    let too_many = !addressing::is_host(cidr, last_node) || last_node < nodes.0;
    if too_many {
        d.error(
            n.cidr.as_ref().map_or("workers".to_string(), |_| cidr_field(n)),
            format!(
                "{} nodes do not fit in {cidr}: node addresses start at {} and the subnet ends at {}; use fewer workers or a larger network (e.g. a /24)",
                topo.ctlplanes + topo.workers + u32::from(bootstrap),
                nodes.0,
                addressing::last_host(cidr)
            ),
        );
    } else if dhcp_start <= last_node && nodes.0 <= dhcp_end {
        d.error(
            if n.dhcp_start.is_some() || n.dhcp_end.is_some() {
                dhcp_field.clone()
            } else {
                "workers".to_string()
            },
            format!(
                "node addresses {} to {last_node} overlap the DHCP range {dhcp_start}-{dhcp_end}; use fewer workers, a larger network, or move the DHCP range",
                nodes.0
            ),
        );
    }
    Layout {
        gateway,
        nodes,
        too_many,
        dhcp_start,
        dhcp_end,
    }
}

/// The largest part of the range `(start, end)` that holds none of `taken` (the
/// lower one of two as large); the range itself when it holds none, or when every
/// address of it is taken.
fn clear_of(
    (start, end): (std::net::Ipv4Addr, std::net::Ipv4Addr),
    taken: &[std::net::Ipv4Addr],
) -> (std::net::Ipv4Addr, std::net::Ipv4Addr) {
    let (lo, hi) = (u32::from(start), u32::from(end));
    let mut cuts: Vec<u32> = taken
        .iter()
        .map(|&ip| u32::from(ip))
        .filter(|ip| (lo..=hi).contains(ip))
        .collect();
    if cuts.is_empty() {
        return (start, end);
    }
    cuts.sort_unstable();
    let mut best: Option<(u32, u32)> = None;
    let mut from = lo;
    for cut in cuts.into_iter().chain([hi.saturating_add(1)]) {
        if cut > from {
            let part = (from, cut - 1);
            if best.is_none_or(|(a, b)| part.1 - part.0 > b - a) {
                best = Some(part);
            }
        }
        from = cut.saturating_add(1);
    }
    best.map_or((start, end), |(a, b)| (a.into(), b.into()))
}

/// The API and ingress VIPs: defaults per method, and a written one clear of the
/// gateway, the DHCP range and the nodes.
fn vips(
    n: &RawNetwork,
    cidr: &Ipv4Net,
    topo: &Topology,
    layout: &Layout,
    d: &mut Diagnostics,
) -> (std::net::Ipv4Addr, std::net::Ipv4Addr) {
    let single_node = topo.single_node();
    let Layout {
        gateway,
        nodes: (first_node, last_node),
        too_many,
        dhcp_start,
        dhcp_end,
    } = *layout;
    let ctlplane0 = addressing::node_ip(cidr, addressing::CTLPLANE_OFFSET, 0);
    let (def_api, def_ingress) = if single_node {
        (ctlplane0, ctlplane0)
    } else if topo.method == Method::Ipi {
        (
            addressing::offset(cidr, addressing::API_OFFSET),
            addressing::offset(cidr, addressing::INGRESS_OFFSET),
        )
    } else {
        let lb = addressing::offset(cidr, addressing::API_OFFSET);
        (lb, lb)
    };
    let api_ip = n.api_ip.as_ref().map_or(def_api, |s| s.v);
    let ingress_ip = n.ingress_ip.as_ref().map_or(def_ingress, |s| s.v);
    for (ip, src, which) in [
        (api_ip, &n.api_ip, "api_ip"),
        (ingress_ip, &n.ingress_ip, "ingress_ip"),
    ] {
        let Some(src) = src else { continue };
        let field = &src.field;
        if single_node {
            if ip != ctlplane0 {
                d.error(
                    field,
                    format!(
                        "{ip}: a single-node cluster has no load balancer or VIP; {which} is the node's own address {ctlplane0} (leave it out)"
                    ),
                );
            }
            continue;
        }
        if !addressing::is_host(cidr, ip) {
            d.error(
                field,
                format!(
                    "{ip} is outside the cluster network {cidr}; use an address from {} to {} outside the DHCP range",
                    addressing::first_host(cidr),
                    addressing::last_host(cidr)
                ),
            );
        } else if ip == gateway {
            d.error(
                field,
                format!(
                    "{ip} is the network's gateway (the host); choose another address, e.g. {}",
                    addressing::offset(cidr, addressing::API_OFFSET)
                ),
            );
        } else if dhcp_start <= ip && ip <= dhcp_end {
            d.error(
                field,
                format!(
                    "{ip} is inside the DHCP range {dhcp_start}-{dhcp_end}; a lease could take it. Choose an address outside it, e.g. {}",
                    addressing::offset(cidr, addressing::API_OFFSET)
                ),
            );
        } else if !too_many && first_node <= ip && ip <= last_node {
            d.error(
                field,
                format!(
                    "{ip} is a node's address (nodes use {first_node} to {last_node}); choose e.g. {}",
                    addressing::offset(cidr, addressing::API_OFFSET)
                ),
            );
        }
    }
    if topo.method == Method::Ipi && api_ip == ingress_ip {
        d.error(
            n.ingress_ip
                .as_ref()
                .map_or("network.ingress_ip".into(), |s| s.field.clone()),
            format!("{ingress_ip} is also the API VIP; bare-metal IPI needs two different VIPs"),
        );
    }
    (api_ip, ingress_ip)
}

/// `network.mac_prefix`, libvirt's own 52:54:00 by default.
fn mac_prefix(n: &RawNetwork, d: &mut Diagnostics) -> [u8; 3] {
    match &n.mac_prefix {
        Some(s) => match parse_mac_prefix(&s.v) {
            Ok(p) => p,
            Err(e) => {
                d.error(&s.field, e);
                [0x52, 0x54, 0x00]
            }
        },
        None => [0x52, 0x54, 0x00],
    }
}

/// `external_bridge` (bare-metal IPI): the bridge the installer's bootstrap VM
/// joins. `own` (the default): the network's own bridge; `veth`: a Linux bridge
/// (`external_bridge_name`, default `baremetal`, the installer's default
/// externalBridge) linked to the NAT bridge by a veth pair (src/host/veth.rs).
fn external_bridge(
    method: Method,
    mode: NetworkMode,
    bridge: &str,
    n: &RawNetwork,
    d: &mut Diagnostics,
) -> Option<String> {
    let veth = match &n.external_bridge {
        None => false,
        Some(s) if method != Method::Ipi => {
            d.error(
                &s.field,
                format!("only method ipi has an installer's bootstrap VM to attach; method {method} has no external bridge"),
            );
            false
        }
        Some(s) => match s.v.as_str() {
            "own" => false,
            "veth" if mode == NetworkMode::Bridge => {
                d.error(
                    &s.field,
                    "veth links a bridge to the NAT network; with mode bridge the bootstrap VM joins the host bridge itself (use own)",
                );
                false
            }
            "veth" => true,
            other => {
                d.error(
                    &s.field,
                    format!("{other:?} is not one of own (the network's bridge), veth (a bridge veth-linked to it)"),
                );
                false
            }
        },
    };
    let name = match &n.external_bridge_name {
        Some(s) if !veth => {
            d.error(
                &s.field,
                "names the veth-linked bridge: only with external_bridge: veth",
            );
            return None;
        }
        Some(s) => {
            if !valid_name(&s.v, 15) {
                d.error(
                    &s.field,
                    format!(
                        "{:?} is not a valid bridge name: up to 15 letters, digits, '-', '_' and '.'",
                        s.v
                    ),
                );
            } else if s.v == bridge {
                d.error(
                    &s.field,
                    format!("{} is the network's own bridge; the veth-linked bridge needs a name of its own", s.v),
                );
            }
            s.v.clone()
        }
        None => "baremetal".to_string(),
    };
    veth.then_some(name)
}

fn parse_mac_prefix(s: &str) -> Result<[u8; 3], String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bytes: Vec<u8> = parts
        .iter()
        .filter(|p| p.len() == 2)
        .filter_map(|p| u8::from_str_radix(p, 16).ok())
        .collect();
    if parts.len() != 3 || bytes.len() != 3 {
        return Err(format!(
            "{s:?} is not a MAC prefix: use three hex octets such as 52:54:00"
        ));
    }
    if bytes[0] & 1 == 1 {
        return Err(format!(
            "{s:?} is a multicast prefix (lowest bit of the first octet set); use e.g. 52:54:00"
        ));
    }
    Ok([bytes[0], bytes[1], bytes[2]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_moves_off_the_vips_in_it() {
        let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().unwrap();
        let range = (ip("192.168.122.192"), ip("192.168.122.254"));
        // kcli's VIPs: the range ends below them.
        assert_eq!(
            clear_of(range, &[ip("192.168.122.253"), ip("192.168.122.252")]),
            (ip("192.168.122.192"), ip("192.168.122.251"))
        );
        // At its start: the range begins after it.
        assert_eq!(
            clear_of(range, &[ip("192.168.122.192")]),
            (ip("192.168.122.193"), ip("192.168.122.254"))
        );
        // In the middle: the larger side.
        assert_eq!(
            clear_of(range, &[ip("192.168.122.200")]),
            (ip("192.168.122.201"), ip("192.168.122.254"))
        );
        // Outside: unchanged.
        assert_eq!(clear_of(range, &[ip("192.168.122.2")]), range);
    }

    #[test]
    fn mac_prefixes() {
        assert_eq!(parse_mac_prefix("52:54:00").unwrap(), [0x52, 0x54, 0]);
        assert!(parse_mac_prefix("01:00:5e").is_err());
        assert!(parse_mac_prefix("52:54").is_err());
        assert!(parse_mac_prefix("52:54:zz").is_err());
    }
}
