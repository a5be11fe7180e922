//! Where things live in the cluster network: the subnet's fixed offsets, the NAT
//! bridge's name, and the stable digest names and MACs are derived from. Fixed
//! offsets, so that a node's address depends only on its role and index: adding
//! workers never renumbers anyone.
//!
//! Neutral ground: it imports neither `spec` (which checks the user's addresses
//! against this layout) nor `plan` (which lays the nodes out with it).
//!
//! ```text
//! .1         gateway (the host)
//! .2         API: the load balancer on the host (upi, agent) or the API VIP (ipi)
//! .3         ingress VIP (ipi)
//! .10        bootstrap
//! .11–.15    control planes 0–4
//! .20–       workers 0, 1, …
//! top quarter of the subnet: DHCP pool for unplanned machines
//! ```
//!
//! A dual-stack lab's IPv6 subnet uses the same offsets (`::1` the gateway,
//! `::b` control plane 0, …), so a node's two addresses end alike.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};
use sha2::{Digest, Sha256};

pub const GATEWAY_OFFSET: u32 = 1;
pub const API_OFFSET: u32 = 2;
pub const INGRESS_OFFSET: u32 = 3;
pub const BOOTSTRAP_OFFSET: u32 = 10;
pub const CTLPLANE_OFFSET: u32 = 11;
pub const WORKER_OFFSET: u32 = 20;

pub fn offset(net: &Ipv4Net, n: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(net.network()).saturating_add(n))
}

pub fn gateway(net: &Ipv4Net) -> Ipv4Addr {
    offset(net, GATEWAY_OFFSET)
}

/// The host's address in a lab's IPv6 subnet, at the IPv4 gateway's offset.
pub fn gateway6(net: &Ipv6Net) -> Ipv6Addr {
    offset6(net, GATEWAY_OFFSET)
}

pub fn first_host(net: &Ipv4Net) -> Ipv4Addr {
    offset(net, 1)
}

pub fn last_host(net: &Ipv4Net) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(net.broadcast()).saturating_sub(1))
}

/// A usable host address of the subnet: not the network or broadcast address.
pub fn is_host(net: &Ipv4Net, ip: Ipv4Addr) -> bool {
    net.contains(&ip) && ip != net.network() && ip != net.broadcast()
}

/// The address of node `index` of a role whose nodes start at `first` (one of
/// [`BOOTSTRAP_OFFSET`], [`CTLPLANE_OFFSET`], [`WORKER_OFFSET`]).
pub fn node_ip(net: &Ipv4Net, first: u32, index: u32) -> Ipv4Addr {
    offset(net, first.saturating_add(index))
}

/// First and last planned node address.
pub fn node_range(
    net: &Ipv4Net,
    bootstrap: bool,
    ctlplanes: u32,
    workers: u32,
) -> (Ipv4Addr, Ipv4Addr) {
    let first = if bootstrap {
        node_ip(net, BOOTSTRAP_OFFSET, 0)
    } else {
        node_ip(net, CTLPLANE_OFFSET, 0)
    };
    let last = if workers > 0 {
        node_ip(net, WORKER_OFFSET, workers - 1)
    } else {
        node_ip(net, CTLPLANE_OFFSET, ctlplanes.saturating_sub(1))
    };
    (first, last)
}

/// The default DHCP pool: the top quarter of the subnet, below the broadcast address.
pub fn default_dhcp(net: &Ipv4Net) -> (Ipv4Addr, Ipv4Addr) {
    let size = 1u64 << (32 - net.prefix_len());
    let start = offset(net, (size * 3 / 4) as u32);
    (start, last_host(net))
}

/// The Linux bridge of a NAT network: at most 15 characters, stable per cluster.
pub fn bridge_name(cluster: &str) -> String {
    let candidate = format!("sl-{cluster}");
    if candidate.len() <= 15 {
        return candidate;
    }
    let digest = stable_hash(&["bridge", cluster]);
    // Cluster names are ASCII; anything else (an invalid name still being
    // reported) gets a name from the digest alone rather than a split character.
    let head = cluster
        .get(..6)
        .filter(|h| h.is_ascii())
        .unwrap_or(&digest[4..10]);
    format!("sl-{head}-{}", &digest[..4])
}

/// Hex SHA-256 over the parts, separated so that ("ab","c") and ("a","bc") differ:
/// the seed of every derived name, MAC and UUID, the same on every host and run.
pub fn stable_hash(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize())
}

/// A name-based UUID (RFC 9562 version 8) from the parts ([`stable_hash`]'s
/// first 16 bytes, version and variant set): the one UUID deriver, for the
/// plan's nodes and the BMC's own ids alike.
pub fn stable_uuid(parts: &[&str]) -> String {
    let digest = hex::decode(stable_hash(parts)).unwrap_or_default();
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `d.c.b.a.in-addr.arpa` for an address.
pub fn reverse_name(ip: Ipv4Addr) -> String {
    let o = ip.octets();
    format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0])
}

/// [`offset`] in an IPv6 subnet.
pub fn offset6(net: &Ipv6Net, n: u32) -> Ipv6Addr {
    Ipv6Addr::from(u128::from(net.network()).saturating_add(u128::from(n)))
}

/// A usable host address of an IPv6 subnet: not the subnet-router anycast
/// address (the subnet's first; IPv6 has no broadcast).
pub fn is_host6(net: &Ipv6Net, ip: Ipv6Addr) -> bool {
    net.contains(&ip) && ip != net.network()
}

/// The default DHCPv6 pool: the top quarter of the subnet's first /112 (of
/// the whole subnet when it is smaller). libvirt takes no larger range: the
/// start and end of an IPv6 `<range>` may differ in their last 16 bits only
/// (src/util/virsocketaddr.c, `virSocketAddrGetRange`: "range … is too large
/// (> 65535)"). A /64 gets `::c000` to `::ffff`, above the nodes' offsets.
pub fn default_dhcp6(net: &Ipv6Net) -> (Ipv6Addr, Ipv6Addr) {
    let bits = (128 - u32::from(net.prefix_len())).min(16);
    let size = 1u128 << bits;
    let first = u128::from(net.network());
    (
        Ipv6Addr::from(first + size / 4 * 3),
        Ipv6Addr::from(first + size - 1),
    )
}

/// The nibble-reversed `….ip6.arpa` name of an IPv6 address (RFC 3596).
pub fn reverse_name6(ip: Ipv6Addr) -> String {
    let mut out = String::new();
    for b in ip.octets().iter().rev() {
        out.push_str(&format!("{:x}.{:x}.", b & 0xf, b >> 4));
    }
    out + "ip6.arpa"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_uuids_are_version_8_and_the_plans_node_uuids() {
        // tests/golden/upi.plan.json's bootstrap node: the plan's UUIDs stay.
        assert_eq!(
            stable_uuid(&["uuid", "lab1", "lab1-bootstrap"]),
            "a4cfe583-5cf2-8e58-bb23-d1c39bbdb51c"
        );
        let u = stable_uuid(&["redfish", "vm1"]);
        assert_eq!(u, stable_uuid(&["redfish", "vm1"]));
        assert_ne!(u, stable_uuid(&["redfish", "vm2"]));
        // 8-4-4-4-12 hex digits, version 8, the RFC's variant (10xx).
        let groups: Vec<usize> = u.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{u}");
        assert!(u.chars().all(|c| c == '-' || c.is_ascii_hexdigit()), "{u}");
        assert_eq!(&u[14..15], "8", "{u}");
        assert!("89ab".contains(&u[19..20]), "{u}");
    }

    #[test]
    fn layout_of_a_24() {
        let net: Ipv4Net = "192.168.126.0/24".parse().unwrap();
        assert_eq!(gateway(&net).to_string(), "192.168.126.1");
        assert_eq!(
            node_ip(&net, WORKER_OFFSET, 2).to_string(),
            "192.168.126.22"
        );
        let (s, e) = default_dhcp(&net);
        assert_eq!(
            (s.to_string(), e.to_string()),
            ("192.168.126.192".into(), "192.168.126.254".into())
        );
        assert_eq!(
            reverse_name("192.168.126.11".parse().unwrap()),
            "11.126.168.192.in-addr.arpa"
        );
    }

    #[test]
    fn layout_of_an_ipv6_64() {
        let net: Ipv6Net = "fd00:1:2:3::/64".parse().unwrap();
        assert_eq!(offset6(&net, CTLPLANE_OFFSET).to_string(), "fd00:1:2:3::b");
        assert!(is_host6(&net, offset6(&net, 1)));
        assert!(!is_host6(&net, net.network()));
        let (s, e) = default_dhcp6(&net);
        assert_eq!(
            (s.to_string(), e.to_string()),
            ("fd00:1:2:3::c000".into(), "fd00:1:2:3::ffff".into())
        );
        // Smaller than a /112: the subnet's own top quarter.
        let small: Ipv6Net = "fd00:1:2:3::100/120".parse().unwrap();
        let (s, e) = default_dhcp6(&small);
        assert_eq!(
            (s.to_string(), e.to_string()),
            ("fd00:1:2:3::1c0".into(), "fd00:1:2:3::1ff".into())
        );
        // RFC 3596 section 2.5's example address.
        assert_eq!(
            reverse_name6("4321:0:1:2:3:4:567:89ab".parse().unwrap()),
            "b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa"
        );
    }

    #[test]
    fn bridge_names_of_any_text_fit_linux() {
        for c in [
            "aaaaaé-bbbbbbbbbb",
            "😀😀😀😀😀",
            "ééééééééééé",
            "abcdefghijklmnopq",
        ] {
            let b = bridge_name(c);
            assert!(b.len() <= 15 && b.is_ascii(), "{c}: {b}");
        }
    }

    #[test]
    fn bridge_names_fit_linux() {
        assert_eq!(bridge_name("lab1"), "sl-lab1");
        let long = bridge_name("averyveryverylongclustername");
        assert!(long.len() <= 15, "{long}");
        assert_ne!(long, bridge_name("averyveryverylongclusternamf"));
    }
}
