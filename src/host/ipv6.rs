//! The host's IPv6, as a dual-stack lab's libvirt network needs it
//! (docs/ipv6.md). libvirt gives the bridge its IPv6 address and, for NAT66,
//! turns IPv6 forwarding on; a kernel that forwards ignores router
//! advertisements on links whose `accept_ra` is not 2, so libvirt refuses to
//! start such a network while routes learned from advertisements exist
//! ("Check the host setup: enabling IPv6 forwarding with RA routes without
//! accept_ra set to 2 is likely to cause routes loss. Interfaces to look at:
//! …", libvirt src/util/virnetdevip.c, `virNetDevIPCheckIPv6Forwarding`: the
//! routes whose protocol is `ra`, each link's `accept_ra`, then the global
//! one). Reading never changes anything.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ipv6Host {
    /// The kernel has IPv6 (`/proc/sys/net/ipv6`) and it is not disabled
    /// (`net.ipv6.conf.all.disable_ipv6` 0).
    pub enabled: bool,
    /// `net.ipv6.conf.all.forwarding`.
    pub forwarding: bool,
    /// `net.ipv6.conf.all.accept_ra`.
    pub accept_ra_all: Option<i32>,
    /// The links holding routes learned from router advertisements
    /// (`ip -6 route show table all proto ra`), each with its `accept_ra`.
    /// `None`: the routes could not be read.
    pub ra_links: Option<Vec<RaLink>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaLink {
    pub iface: String,
    pub accept_ra: Option<i32>,
}

impl Ipv6Host {
    /// The links that make libvirt refuse to start an IPv6 NAT network:
    /// libvirt's rule (virNetDevIPCheckIPv6Forwarding) is that every link with
    /// an advertised route has `accept_ra` 2, or else the global one is 2.
    pub fn blocking_links(&self) -> Vec<&RaLink> {
        if self.accept_ra_all == Some(2) {
            return Vec::new();
        }
        self.ra_links
            .iter()
            .flatten()
            .filter(|l| l.accept_ra != Some(2))
            .collect()
    }
}

/// The links named in `ip -6 -o route show table all proto ra`: each `dev X`
/// of a line (a multipath route names several), once each, in order.
pub fn parse_ra_route_links(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            if pair[0] == "dev" && !out.iter().any(|l| l == pair[1]) {
                out.push(pair[1].to_string());
            }
        }
    }
    out
}

fn sysctl(path: &str) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/sys/net/ipv6/conf/{path}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// This network namespace's IPv6, read from `/proc/sys` and iproute2.
pub fn read() -> Ipv6Host {
    let enabled = std::path::Path::new("/proc/sys/net/ipv6").is_dir()
        && sysctl("all/disable_ipv6") == Some(0);
    let routes = std::process::Command::new("ip")
        .args(["-6", "-o", "route", "show", "table", "all", "proto", "ra"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    Ipv6Host {
        enabled,
        forwarding: sysctl("all/forwarding") == Some(1),
        accept_ra_all: sysctl("all/accept_ra"),
        ra_links: routes.map(|t| {
            parse_ra_route_links(&t)
                .into_iter()
                .map(|iface| RaLink {
                    accept_ra: sysctl(&format!("{iface}/accept_ra")),
                    iface,
                })
                .collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_routes_name_their_links_once() {
        let text = "default via fe80::1 dev eth0 metric 1024 expires 1790sec hoplimit 64 pref medium\n\
                    2001:db8:1::/64 dev eth0 metric 256 expires 86390sec pref medium\n\
                    default metric 1024 pref medium\\\tnexthop via fe80::2 dev wlan0 weight 1\\\tnexthop via fe80::3 dev eth1 weight 1\n";
        assert_eq!(parse_ra_route_links(text), ["eth0", "wlan0", "eth1"]);
        assert!(parse_ra_route_links("").is_empty());
    }

    fn host(all: Option<i32>, links: &[(&str, i32)]) -> Ipv6Host {
        Ipv6Host {
            enabled: true,
            forwarding: false,
            accept_ra_all: all,
            ra_links: Some(
                links
                    .iter()
                    .map(|(i, a)| RaLink {
                        iface: i.to_string(),
                        accept_ra: Some(*a),
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn libvirts_rule_each_advertised_link_at_2_or_the_global_one() {
        assert!(host(Some(1), &[]).blocking_links().is_empty());
        assert!(host(Some(1), &[("eth0", 2)]).blocking_links().is_empty());
        let h = host(Some(1), &[("eth0", 1), ("eth1", 2)]);
        let b: Vec<_> = h.blocking_links().iter().map(|l| &l.iface).collect();
        assert_eq!(b, ["eth0"]);
        assert!(host(Some(2), &[("eth0", 1)]).blocking_links().is_empty());
        // Routes not read: nothing to name (the check says it could not tell).
        let unread = Ipv6Host {
            ra_links: None,
            ..host(Some(1), &[])
        };
        assert!(unread.blocking_links().is_empty());
    }
}
