//! Facts about the host shiftlab runs on: KVM, routes, free space; and what
//! shiftlab changes on it: host DNS, the host firewall; AppArmor/SELinux checks.

pub mod chrony;
pub mod clock;
pub mod dns;
pub mod fips;
pub mod firewall;
pub mod ipv6;
pub mod kvm;
pub mod nfs;
pub mod security;
pub mod sockets;
pub mod veth;

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

/// IPv4 routes of this host's network namespace: (interface, destination).
pub fn routes() -> Vec<(String, Ipv4Net)> {
    let Ok(text) = std::fs::read_to_string("/proc/net/route") else {
        return Vec::new();
    };
    parse_routes(&text)
}

/// Parse `/proc/net/route` (little-endian hex addresses).
pub fn parse_routes(text: &str) -> Vec<(String, Ipv4Net)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let dest = u32::from_str_radix(f[1], 16).ok()?;
            let mask = u32::from_str_radix(f[7], 16).ok()?;
            // The kernel prints the address's bytes as a native-endian word.
            let dest = Ipv4Addr::from(dest.to_ne_bytes());
            let prefix = mask.count_ones() as u8;
            // The default route overlaps everything and says nothing.
            if prefix == 0 {
                return None;
            }
            Some((f[0].to_string(), Ipv4Net::new(dest, prefix).ok()?))
        })
        .collect()
}

/// IPv6 routes of this host's network namespace: (interface, destination).
pub fn routes6() -> Vec<(String, Ipv6Net)> {
    let Ok(text) = std::fs::read_to_string("/proc/net/ipv6_route") else {
        return Vec::new();
    };
    parse_routes6(&text)
}

/// Parse `/proc/net/ipv6_route`: destination (32 hex digits), its prefix length
/// (hex), source, source prefix, next hop, metric, reference count, use, flags,
/// interface. The default route and link-local and multicast routes (on every
/// link, a lab's subnet is never in them) are left out.
pub fn parse_routes6(text: &str) -> Vec<(String, Ipv6Net)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 {
                return None;
            }
            let dest = Ipv6Addr::from(u128::from_str_radix(f[0], 16).ok()?);
            let prefix = u8::from_str_radix(f[1], 16).ok()?;
            let net = Ipv6Net::new(dest, prefix).ok()?;
            let noise = ["fe80::/10", "ff00::/8"]
                .iter()
                .any(|r| r.parse::<Ipv6Net>().is_ok_and(|r| r.contains(&net)));
            (prefix != 0 && !noise).then(|| (f[9].to_string(), net))
        })
        .collect()
}

/// Free bytes on the filesystem holding `path` (or its nearest existing parent).
pub fn free_bytes(path: &std::path::Path) -> Option<u64> {
    let mut p = path.to_path_buf();
    while !p.exists() {
        p = p.parent()?.to_path_buf();
    }
    let c = std::ffi::CString::new(p.to_string_lossy().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a zeroed out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_routes_parse() {
        // The shape of /proc/net/ipv6_route: a ULA /64 on a bridge, a host's own
        // /128 on it, the default route, link-local and multicast ones.
        let text = "\
fd000005014000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 sl-lab\n\
fd000005014000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001 lo\n\
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth0\n\
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth0\n\
ff000000000000000000000000000000 08 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000003 00000000 00000001 eth0\n";
        assert_eq!(
            parse_routes6(text),
            vec![
                ("sl-lab".to_string(), "fd00:5:140::/64".parse().unwrap()),
                ("lo".to_string(), "fd00:5:140::1/128".parse().unwrap()),
            ]
        );
    }

    #[test]
    fn routes_parse() {
        let text =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
virbr0\t007AA8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let r = parse_routes(text);
        assert_eq!(
            r,
            vec![("virbr0".to_string(), "192.168.122.0/24".parse().unwrap())]
        );
    }
}
