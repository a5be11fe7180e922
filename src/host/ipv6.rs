//! The host's IPv6, as a dual-stack lab's libvirt network needs it
//! (docs/ipv6.md). libvirt gives the bridge its IPv6 address and, for NAT66,
//! turns IPv6 forwarding on; a kernel that forwards ignores router
//! advertisements on links whose `accept_ra` is not 2, so libvirt refuses to
//! start such a network while routes learned from advertisements exist
//! ("Check the host setup: enabling IPv6 forwarding with RA routes without
//! accept_ra set to 2 is likely to cause routes loss. Interfaces to look at:
//! …", libvirt src/util/virnetdevip.c, `virNetDevIPCheckIPv6Forwarding`).
//! Debian 12's libvirt 9.0 finds those routes in `/proc/net/ipv6_route` by the
//! kernel's `RTF_ADDRCONF` flag (its debug log: "… iface sl6ra flags 00000001 :
//! RTF_ADDRCONF not set", seen in tests/e2e/ipv6.sh), then looks at each one's
//! link's `accept_ra`, then at the global one. Reading never changes anything.

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
    /// The links holding routes the kernel learned from router advertisements
    /// (`RTF_ADDRCONF` in `/proc/net/ipv6_route`), each with its `accept_ra`.
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

/// `RTF_ADDRCONF` (linux/ipv6_route.h): a route the kernel made from a router
/// advertisement (its default router and the advertised prefixes).
const RTF_ADDRCONF: u32 = 0x0004_0000;

/// The links of the `RTF_ADDRCONF` routes in `/proc/net/ipv6_route`
/// (destination, prefix, source, source prefix, next hop, metric, references,
/// use, flags, link), once each, in order.
pub fn parse_ra_links(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(flags) = f.get(8).and_then(|x| u32::from_str_radix(x, 16).ok()) else {
            continue;
        };
        if flags & RTF_ADDRCONF != 0 && f.len() >= 10 && !out.iter().any(|l| l == f[9]) {
            out.push(f[9].to_string());
        }
    }
    out
}

/// Whether `ip` is a tentative address of this host, from the text of
/// `/proc/net/if_inet6` (the address in 32 hex digits, then the link's index,
/// the prefix length, the scope and the flags in hex, and the link's name):
/// `IFA_F_TENTATIVE` (0x40) while duplicate address detection has not finished,
/// as on a lab bridge that has no carrier yet. Pure.
pub fn is_tentative(if_inet6: &str, ip: std::net::Ipv6Addr) -> bool {
    const IFA_F_TENTATIVE: u32 = 0x40;
    let hex = format!("{:032x}", u128::from(ip));
    if_inet6.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 6
            && f[0].eq_ignore_ascii_case(&hex)
            && u32::from_str_radix(f[4], 16).is_ok_and(|flags| flags & IFA_F_TENTATIVE != 0)
    })
}

/// The `ip` commands that make the lab bridge's tentative IPv6 addresses
/// usable: each deleted and added again with `nodad`. A bridge no node has
/// joined has no carrier, so duplicate address detection never runs and
/// libvirt's addresses (the gateway, the load balancer's VIPs) stay tentative:
/// the host cannot bind them, and the lab's dnsmasq answers nothing on them,
/// which leaves an IPv6 single-stack lab with no DNS and no artifact server
/// until its first VM starts. `accept_dad=0` on the bridge does not help once
/// the addresses are there, nor does `ip addr change … nodad`; a host-wide
/// `default.accept_dad` would reach every other link. The bridge is the lab's
/// own (libvirt's, for shiftlab's network), so nothing else shares these
/// addresses to detect. `wanted`: the plan's addresses with their prefixes.
/// Pure.
pub fn settle_commands(
    if_inet6: &str,
    bridge: &str,
    wanted: &[(std::net::Ipv6Addr, u8)],
) -> Vec<Vec<String>> {
    let on_bridge: String = if_inet6
        .lines()
        .filter(|l| l.split_whitespace().nth(5) == Some(bridge))
        .map(|l| format!("{l}\n"))
        .collect();
    wanted
        .iter()
        .filter(|(ip, _)| is_tentative(&on_bridge, *ip))
        .flat_map(|(ip, prefix)| {
            let at = format!("{ip}/{prefix}");
            [
                vec!["-6", "addr", "del", &at, "dev", bridge],
                vec!["-6", "addr", "add", &at, "dev", bridge, "nodad"],
            ]
            .map(|c| c.into_iter().map(String::from).collect())
        })
        .collect()
}

/// What [`settle`] takes for a lab's plan: its NAT bridge with its IPv6
/// gateway and load-balancer VIPs. `None` for an IPv4 lab, a bridge-mode lab
/// (the bridge is the user's, never touched) and a lab on a remote libvirt.
/// Pure.
pub fn settle_targets(plan: &crate::plan::Plan) -> Option<(&str, Vec<(std::net::Ipv6Addr, u8)>)> {
    let n = &plan.network;
    let v6 = n.ipv6.as_ref()?;
    if n.mode != crate::spec::NetworkMode::Nat || !crate::libvirt::uri_is_local(&plan.libvirt.uri) {
        return None;
    }
    let mut wanted = vec![(v6.gateway, v6.cidr.prefix_len())];
    wanted.extend(v6.host_addresses.iter().map(|a| (*a, 128)));
    Some((&n.bridge, wanted))
}

/// [`settle`] for a lab's plan ([`settle_targets`]).
pub fn settle_plan(plan: &crate::plan::Plan) -> anyhow::Result<Vec<String>> {
    match settle_targets(plan) {
        Some((bridge, wanted)) => settle(bridge, &wanted),
        None => Ok(Vec::new()),
    }
}

/// [`settle_commands`], run: what was re-added, for the log.
pub fn settle(bridge: &str, wanted: &[(std::net::Ipv6Addr, u8)]) -> anyhow::Result<Vec<String>> {
    use anyhow::Context;
    let text = std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default();
    let mut done = Vec::new();
    for argv in settle_commands(&text, bridge, wanted) {
        let out = std::process::Command::new("ip")
            .args(&argv)
            .output()
            .with_context(|| format!("running ip {}", argv.join(" ")))?;
        if !out.status.success() {
            anyhow::bail!(
                "ip {}: {}",
                argv.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        if argv[2] == "add" {
            done.push(format!(
                "{} on {bridge} without duplicate address detection",
                argv[3]
            ));
        }
    }
    Ok(done)
}

fn sysctl(path: &str) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/sys/net/ipv6/conf/{path}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// This network namespace's IPv6, read from `/proc`.
pub fn read() -> Ipv6Host {
    let enabled = std::path::Path::new("/proc/sys/net/ipv6").is_dir()
        && sysctl("all/disable_ipv6") == Some(0);
    let routes = std::fs::read_to_string("/proc/net/ipv6_route").ok();
    Ipv6Host {
        enabled,
        forwarding: sysctl("all/forwarding") == Some(1),
        accept_ra_all: sysctl("all/accept_ra"),
        ra_links: routes.map(|t| {
            parse_ra_links(&t)
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
    fn a_tentative_address_is_told_by_its_flags() {
        let text = "fd000194000000000000000000000001 05 40 00 c0    sl-b6\n\
                    fd000194000000000000000000000002 05 80 00 80    sl-b6\n\
                    fe80000000000000504c8ffffe1a2b3c 05 40 20 c0    sl-b6\n";
        assert!(is_tentative(text, "fd00:194::1".parse().unwrap()));
        assert!(!is_tentative(text, "fd00:194::2".parse().unwrap()));
        assert!(!is_tentative(text, "fd00:194::3".parse().unwrap()));
        assert!(!is_tentative("", "fd00:194::1".parse().unwrap()));
    }

    #[test]
    fn only_the_bridges_tentative_addresses_are_added_again_without_dad() {
        // The gateway and the VIP tentative on a bridge with no carrier; the
        // same gateway address on another link, and a settled one, untouched.
        let text = "fd000194000000000000000000000001 05 40 00 c0    sl-b6\n\
                    fd000194000000000000000000000002 05 80 00 c0    sl-b6\n\
                    fd000194000000000000000000000003 05 80 00 80    sl-b6\n\
                    fd000195000000000000000000000001 06 40 00 c0    other\n";
        let want = [
            ("fd00:194::1".parse().unwrap(), 64),
            ("fd00:194::2".parse().unwrap(), 128),
            ("fd00:194::3".parse().unwrap(), 128),
            ("fd00:195::1".parse().unwrap(), 64),
        ];
        let cmds: Vec<String> = settle_commands(text, "sl-b6", &want)
            .iter()
            .map(|c| c.join(" "))
            .collect();
        assert_eq!(
            cmds,
            [
                "-6 addr del fd00:194::1/64 dev sl-b6",
                "-6 addr add fd00:194::1/64 dev sl-b6 nodad",
                "-6 addr del fd00:194::2/128 dev sl-b6",
                "-6 addr add fd00:194::2/128 dev sl-b6 nodad",
            ]
        );
        assert!(settle_commands("", "sl-b6", &want).is_empty());
    }

    #[test]
    fn a_local_nat_lab_with_ipv6_settles_its_gateway_and_vips() {
        let v6 = crate::plan::from_yaml(
            "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nnetwork:\n  cidr: 'fd00:1:2:3::/64'\n",
        );
        let (bridge, wanted) = settle_targets(&v6).unwrap();
        assert_eq!(bridge, "sl-lab1");
        let shown: Vec<String> = wanted.iter().map(|(a, p)| format!("{a}/{p}")).collect();
        assert_eq!(shown, ["fd00:1:2:3::1/64", "fd00:1:2:3::2/128"]);
        let mut remote = v6.clone();
        remote.libvirt.uri = "qemu+ssh://root@kvm.example.test/system".into();
        assert!(settle_targets(&remote).is_none());
        let mut bridged = v6;
        bridged.network.mode = crate::spec::NetworkMode::Bridge;
        assert!(settle_targets(&bridged).is_none());
        let v4 = crate::plan::from_yaml(
            "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\n",
        );
        assert!(settle_targets(&v4).is_none());
    }

    #[test]
    fn advertised_routes_name_their_links_once() {
        // The kernel's lines for a host whose eth0 took a router advertisement: its
        // default route (RTF_GATEWAY|RTF_ADDRCONF|RTF_DEFAULT|RTF_EXPIRES|RTF_UP,
        // the kernel's rt6_add_dflt_router) and its prefix (RTF_ADDRCONF|
        // RTF_PREFIX_RT|RTF_EXPIRES|RTF_UP); a static route and the loopback's
        // do not count.
        let text = "\
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003     eth0
20010db8000100000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 004c0001     eth0
fd000005014000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 sl-ds-upi
00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
20010db8000200000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00440001    wlan0
";
        assert_eq!(parse_ra_links(text), ["eth0", "wlan0"]);
        assert!(parse_ra_links("").is_empty());
        assert!(parse_ra_links("garbage line\n").is_empty());
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
