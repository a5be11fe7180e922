//! `ntp_servers` (kcli's `ntp_server`): the time servers every node's chrony
//! uses, written into `/etc/chrony.conf` by a MachineConfig (render::chrony).
//! Each entry becomes a `server` line, so only a host name or an IPv4 address
//! gets through: anything else (a space, a newline, a chrony option) would be
//! configuration of its own.
//!
//! `host_ntp: true`: the host's chrony serves the cluster's subnet
//! (host::chrony) and the nodes use the network's gateway. Only where the
//! gateway is this host: a NAT network shiftlab creates on libvirt.

use std::net::IpAddr;

use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;
use crate::spec::types::{BackendKind, NetworkMode, NetworkSpec};

/// What an entry may be, for messages.
const RULE: &str = "expected a host name (letters, digits, '-', labels joined by '.') or an IPv4 address, e.g. ntp.lab.test or 192.168.126.1";

/// A DNS host name as chrony resolves it: labels of letters, digits and `-`
/// (not at either end), at most 63 bytes each and 253 in all.
fn is_host_name(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
        // A last label of digits only (`10.1`) is a mistyped address, not a name
        // (RFC 3696, section 2).
        && !s.rsplit('.').next().unwrap_or("").bytes().all(|c| c.is_ascii_digit())
}

/// The servers, and whether the host serves time to the lab.
pub fn resolve(
    raw: &RawSpec,
    network: &NetworkSpec,
    backend: BackendKind,
    d: &mut Diagnostics,
) -> (Vec<String>, bool) {
    let servers = servers(raw, d);
    let Some(host) = raw.host_ntp.as_ref().filter(|h| h.v) else {
        return (servers, false);
    };
    if !servers.is_empty() {
        d.error(
            &host.field,
            "points the nodes at the network's gateway, the host; leave `ntp_servers` out, or set host_ntp: false to use `ntp_servers`",
        );
    }
    if backend == BackendKind::Kubevirt {
        d.error(
            &host.field,
            "KubeVirt nodes do not reach this host's network gateway; use `ntp_servers`",
        );
    } else if network.mode == NetworkMode::Bridge {
        d.error(
            &host.field,
            "with network.mode: bridge the gateway is the LAN's router, not this host; use `ntp_servers`",
        );
    }
    (servers, true)
}

fn servers(raw: &RawSpec, d: &mut Diagnostics) -> Vec<String> {
    let Some(list) = &raw.ntp_servers else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for (i, entry) in list.v.iter().enumerate() {
        let field = format!("{}[{i}]", list.field);
        let s = entry.trim();
        let problem = match s.parse::<IpAddr>() {
            Ok(IpAddr::V4(_)) => None,
            Ok(IpAddr::V6(_)) => Some("is an IPv6 address: the nodes have IPv4 only"),
            Err(_) if is_host_name(s) => None,
            Err(_) => Some("is not a host name or IPv4 address"),
        };
        if let Some(p) = problem {
            d.error(&field, format!("{entry:?} {p}; {RULE}"));
        } else if out.iter().any(|o| o.eq_ignore_ascii_case(s)) {
            d.error(&field, format!("{entry:?} is listed twice"));
        } else {
            out.push(s.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::spec::{from_str, Env};

    fn load(extra: &str) -> Result<crate::spec::Loaded, crate::spec::InvalidSpec> {
        let text =
            format!("cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n{extra}");
        from_str(&text, "t.yaml", &Env::default())
    }

    #[test]
    fn names_and_addresses_are_kept_in_order() {
        let l = load("ntp_servers: [ntp.lab.test, 192.168.126.1, Clock-1.Example.org]\n").unwrap();
        assert_eq!(
            l.spec.ntp_servers,
            ["ntp.lab.test", "192.168.126.1", "Clock-1.Example.org"]
        );
        assert!(load("").unwrap().spec.ntp_servers.is_empty());
        assert!(load("ntp_servers: []\n")
            .unwrap()
            .spec
            .ntp_servers
            .is_empty());
    }

    #[test]
    fn kclis_ntp_server_is_one_server() {
        let l = load("ntp_server: 10.0.0.5\n").unwrap();
        assert_eq!(l.spec.ntp_servers, ["10.0.0.5"]);
        let e = load("ntp_server: a.test\nntp_servers: [b.test]\n").unwrap_err();
        assert!(
            e.errors.iter().any(|d| d.field == "ntp_server"
                && d.message.contains("sets the same thing as `ntp_servers`")),
            "{e}"
        );
    }

    #[test]
    fn host_ntp_is_for_a_nat_network_on_libvirt_without_ntp_servers() {
        let l = load("host_ntp: true\n").unwrap();
        assert!(l.spec.host_ntp);
        assert!(l.spec.ntp_servers.is_empty());
        assert!(!load("host_ntp: false\n").unwrap().spec.host_ntp);
        for (extra, says) in [
            ("ntp_servers: [a.test]\n", "leave `ntp_servers` out"),
            (
                "network: {mode: bridge, bridge: br0}\n",
                "the gateway is the LAN's router",
            ),
            (
                "backend: kubevirt\nkubevirt: {kubeconfig: /nonexistent}\n",
                "KubeVirt nodes",
            ),
        ] {
            let e = load(&format!("host_ntp: true\n{extra}")).unwrap_err();
            assert!(
                e.errors
                    .iter()
                    .any(|d| d.field == "host_ntp" && d.message.contains(says)),
                "{extra}: {e}"
            );
        }
    }

    #[test]
    fn bad_entries_name_field_value_and_what_is_valid() {
        for (value, field, says) in [
            (
                "'ntp.lab.test iburst'",
                "ntp_servers[0]",
                "not a host name or IPv4 address",
            ),
            (
                "\"a.test\\nallow all\"",
                "ntp_servers[0]",
                "not a host name or IPv4 address",
            ),
            (
                "'-bad.test'",
                "ntp_servers[0]",
                "not a host name or IPv4 address",
            ),
            (
                "'a..test'",
                "ntp_servers[0]",
                "not a host name or IPv4 address",
            ),
            (
                "'10.1'",
                "ntp_servers[0]",
                "not a host name or IPv4 address",
            ),
            ("'fd00::1'", "ntp_servers[0]", "IPv6"),
            ("''", "ntp_servers[0]", "not a host name or IPv4 address"),
        ] {
            let e = load(&format!("ntp_servers: [{value}]\n")).unwrap_err();
            let d = e
                .errors
                .iter()
                .find(|d| d.field == field)
                .unwrap_or_else(|| panic!("{value}: {e}"));
            assert!(d.message.contains(says), "{value}: {}", d.message);
            assert!(
                d.message.contains("e.g. ntp.lab.test or 192.168.126.1"),
                "{}",
                d.message
            );
        }
        let e = load("ntp_servers: [a.test, A.test]\n").unwrap_err();
        assert!(
            e.errors
                .iter()
                .any(|d| d.field == "ntp_servers[1]" && d.message.contains("listed twice")),
            "{e}"
        );
        let e = load("ntp_servers: {a: 1}\n").unwrap_err();
        assert!(e.errors.iter().any(|d| d.field == "ntp_servers"), "{e}");
    }
}
