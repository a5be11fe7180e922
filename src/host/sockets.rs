//! The host's listening TCP sockets, from `/proc/net/tcp` and `tcp6`: which
//! ports are taken (doctor), whether NFS-Ganesha bound the gateway alone
//! (serve), whether serve's BMC listens on a still-tentative IPv6 address
//! (create). One parser for all three.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `/proc/net/tcp` (or `tcp6`, `v6`): the listening sockets (state `0A`).
/// The kernel prints each 32-bit word of an address in host byte order. Pure.
pub fn parse_listening(text: &str, v6: bool) -> Vec<SocketAddr> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 4 || f[3] != "0A" {
                return None;
            }
            let (addr, port) = f[1].split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let words: Vec<u32> = (0..addr.len() / 8)
                .map(|i| u32::from_str_radix(&addr[i * 8..i * 8 + 8], 16))
                .collect::<Result<_, _>>()
                .ok()?;
            let ip: IpAddr = if v6 {
                if words.len() != 4 {
                    return None;
                }
                let mut b = [0u8; 16];
                for (i, w) in words.iter().enumerate() {
                    b[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
                }
                Ipv6Addr::from(b).into()
            } else {
                Ipv4Addr::from(words.first()?.to_ne_bytes()).into()
            };
            Some(SocketAddr::new(ip, port))
        })
        .collect()
}

/// The local addresses with a socket listening on `port`, from the text of
/// `/proc/net/tcp` and `/proc/net/tcp6`; an IPv4-mapped IPv6 address (a
/// dual-stack socket bound to an IPv4 address) is given as the IPv4 address.
/// Pure.
pub fn listeners(tcp: &str, tcp6: &str, port: u16) -> Vec<IpAddr> {
    parse_listening(tcp, false)
        .into_iter()
        .chain(parse_listening(tcp6, true))
        .filter(|s| s.port() == port)
        .map(|s| match s.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        })
        .collect()
}

/// [`listeners`] on this host now (files it cannot read count as empty).
pub fn listening_on(port: u16) -> Vec<IpAddr> {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    listeners(&read("/proc/net/tcp"), &read("/proc/net/tcp6"), port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_are_read_from_proc() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0\n\
   1: 0100A8C0:01BB 0200A8C0:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1\n";
        assert_eq!(
            parse_listening(tcp, false),
            vec!["127.0.0.1:8080".parse().unwrap()]
        );
        let tcp6 = "  sl  local_address remote_address st\n\
   0: 00000000000000000000000001000000:0016 00000000000000000000000000000000:0000 0A 0\n";
        assert_eq!(
            parse_listening(tcp6, true),
            vec!["[::1]:22".parse().unwrap()]
        );
    }

    #[test]
    fn listeners_of_a_port_over_both_files() {
        // Recorded: ganesha.nfsd with Bind_addr 10.77.0.1, on a host with an
        // IPv6 link-local address (bound as ::ffff:10.77.0.1), then on one
        // without (bound to ::), and a v4 listener on 127.0.0.1:80.
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
            0: 0100007F:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n";
        let mapped = "  sl  local_address                         remote_address                        st\n   \
            0: 0000000000000000FFFF000001004D0A:0801 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 8191708 1 000000003b2c098e 100 0 0 10 0\n";
        let any = "  sl  local_address                         remote_address                        st\n   \
            0: 00000000000000000000000000000000:0801 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 8188883 1 000000003b2c098e 100 0 0 10 0\n";
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(listeners(tcp, mapped, 2049), vec![ip("10.77.0.1")]);
        assert_eq!(listeners(tcp, mapped, 80), vec![ip("127.0.0.1")]);
        assert_eq!(listeners(tcp, any, 2049), vec![ip("::")]);
        // A connection (not LISTEN) on the port is no listener.
        let est = any.replace(" 0A ", " 01 ");
        assert!(listeners("", &est, 2049).is_empty());
    }
}
