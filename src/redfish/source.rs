//! Where virtual media images may come from.
//!
//! A BMC fetches what a client names, so whoever holds its password could
//! make it read the host's own services (loopback, the host's addresses, a
//! metadata service on link-local) or probe ports. The rule, checked on the
//! URL as written and on every address a connection is about to use (at
//! every redirect hop, so DNS answers and redirects cannot sneak past it):
//!
//! - the host is written as it is used: no IPv4 as a number or short form
//!   (`2130706433`, `127.1`, octal, hex), no percent-escapes, no other
//!   spelling a URL parser rewrites;
//! - the address is not loopback, link-local, unspecified, multicast or
//!   broadcast, nor one of the host's own (read when the fetch starts);
//! - the address is inside the image networks when there are any (the lab
//!   BMC: the cluster's machine network);
//! - an address inside an explicitly allowed network (`--allow-image-source`)
//!   passes the last two checks whatever its class, never the first;
//! - a rehearsal's lab BMC (given its stand-in Ironic's CA) also reaches
//!   loopback, over https only, and only servers whose certificate chains to
//!   that CA ([`super::fetch`] verifies it): the stand-in serves the ISOs on
//!   127.0.0.1 where real Ironic serves them on the machine network, and a
//!   certificate from its CA, whose key only the stand-in holds, is what
//!   keeps the host's other loopback services out of reach.
//!
//! Clients get one message, [`UNREACHABLE`], for every source the rule
//! refuses (no connection is made); which rule goes to the BMC's log. An
//! allowed source that cannot be fetched is reported with its cause
//! ([`super::fetch::Cause`]).

use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs as _};
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs};
use ureq::unversioned::transport::NextTimeout;

/// The answer for every image source the rule refuses, whichever rule: the
/// BMC's log says which.
pub const UNREACHABLE: &str =
    "the image source is refused by the BMC's image-source rule (the BMC's log says which rule)";

/// The image-source rule of one BMC.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageSources {
    /// `None`: any address outside the refused classes; else only these.
    within: Option<Vec<IpNet>>,
    /// Allowed whatever their class (`--allow-image-source`).
    allow: Vec<IpNet>,
    /// A rehearsal's stand-in Ironic CA: loopback over https, verified
    /// against it (read when a connection is made: it appears after the BMC
    /// starts).
    standin_ca: Option<PathBuf>,
}

impl ImageSources {
    /// Any address but the refused classes and the host's own, plus `allow`
    /// (the standalone BMC).
    pub fn anywhere(allow: Vec<IpNet>) -> Self {
        ImageSources {
            within: None,
            allow,
            standin_ca: None,
        }
    }

    /// Only addresses inside `networks` (outside the refused classes), plus
    /// `allow` (the lab BMC: the cluster's machine network).
    pub fn within(networks: Vec<IpNet>, allow: Vec<IpNet>) -> Self {
        ImageSources {
            within: Some(networks),
            allow,
            standin_ca: None,
        }
    }

    /// Also loopback over https, from a server whose certificate chains to
    /// `ca` (a rehearsal's stand-in Ironic CA); `None` changes nothing.
    pub fn with_standin_ca(mut self, ca: Option<PathBuf>) -> Self {
        self.standin_ca = ca;
        self
    }

    /// The stand-in CA a connection to `ip` must verify against: `Some` when
    /// only the rehearsal's loopback exception admits `ip` (an explicit
    /// `--allow-image-source` keeps its own meaning: `--media-ca` or none).
    pub fn standin_ca_for(&self, ip: IpAddr) -> Option<&Path> {
        let ip = canonical(ip);
        let ca = self.standin_ca.as_deref()?;
        (ip.is_loopback() && !self.allow.iter().any(|n| n.contains(&ip))).then_some(ca)
    }

    /// Why `ip` is refused for a fetch over `scheme`; `None` if it may be
    /// fetched from (see [`Self::standin_ca_for`] for what it must show).
    pub fn fetch_refusal(&self, scheme: &str, ip: IpAddr, own: &[IpAddr]) -> Option<String> {
        let reason = self.refusal(ip, own)?;
        match self.standin_ca_for(ip) {
            Some(_) if scheme == "https" => None,
            Some(_) => Some(format!(
                "{reason}, which a rehearsal's BMC reads over https only (its stand-in Ironic's image server)"
            )),
            None => Some(reason),
        }
    }

    /// Why `ip` is refused as an image source, given the host's own
    /// addresses; `None` if it may be fetched from.
    pub fn refusal(&self, ip: IpAddr, own: &[IpAddr]) -> Option<String> {
        let ip = canonical(ip);
        if self.allow.iter().any(|n| n.contains(&ip)) {
            return None;
        }
        if let Some(class) = refused_class(ip) {
            return Some(format!("{ip} is a {class} address"));
        }
        if own.iter().any(|a| canonical(*a) == ip) {
            return Some(format!("{ip} is an address of this host"));
        }
        match &self.within {
            Some(nets) if !nets.iter().any(|n| n.contains(&ip)) => {
                let nets: Vec<String> = nets.iter().map(|n| n.to_string()).collect();
                Some(format!(
                    "{ip} is outside the image networks ({})",
                    nets.join(", ")
                ))
            }
            _ => None,
        }
    }

    /// The addresses of a resolved name that may be fetched from, or why
    /// none may.
    /// Strict: without the rehearsal's loopback exception, as for a URL
    /// another component fetches (its loopback is not the stand-in's).
    pub fn admit(&self, addrs: Vec<SocketAddr>, own: &[IpAddr]) -> Result<Vec<SocketAddr>, String> {
        admit_by(addrs, |ip| self.refusal(ip, own))
    }

    /// [`Self::admit`] for this BMC's own fetch over `scheme`, with the
    /// rehearsal's loopback exception.
    pub fn admit_fetch(
        &self,
        scheme: &str,
        addrs: Vec<SocketAddr>,
        own: &[IpAddr],
    ) -> Result<Vec<SocketAddr>, String> {
        admit_by(addrs, |ip| self.fetch_refusal(scheme, ip, own))
    }

    /// The whole rule without connecting, for a URL another component
    /// fetches (KubeVirt's CDI): the URL as written, then every address its
    /// host resolves to now.
    pub fn vet(&self, raw: &str) -> Result<(), String> {
        let url = check_url(raw)?;
        let host = url.host_str().ok_or("the URL has no host")?;
        let port = url.port_or_known_default().ok_or("the URL has no port")?;
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .or_else(|_| format!("{host}:{port}").to_socket_addrs())
            .map_err(|e| format!("resolving {host}: {e}"))?
            .collect();
        let own = host_addresses().map_err(|e| format!("reading this host's addresses: {e}"))?;
        self.admit(addrs, &own).map(|_| ())
    }
}

/// The addresses `refusal` finds nothing against, or every reason.
fn admit_by(
    addrs: Vec<SocketAddr>,
    refusal: impl Fn(IpAddr) -> Option<String>,
) -> Result<Vec<SocketAddr>, String> {
    let mut reasons = Vec::new();
    let allowed: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| match refusal(a.ip()) {
            Some(r) => {
                reasons.push(r);
                false
            }
            None => true,
        })
        .collect();
    if allowed.is_empty() {
        if reasons.is_empty() {
            return Err("the name has no address".into());
        }
        return Err(reasons.join("; "));
    }
    Ok(allowed)
}

/// An IPv4 address carried in IPv6 (`::ffff:a.b.c.d`) as the IPv4 address
/// it reaches.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// The refused class `ip` belongs to, if any.
fn refused_class(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(a) => {
            if a.is_loopback() {
                Some("loopback")
            } else if a.is_link_local() {
                Some("link-local")
            } else if a.octets()[0] == 0 {
                Some("unspecified")
            } else if a.is_multicast() {
                Some("multicast")
            } else if a.is_broadcast() {
                Some("broadcast")
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            let first = a.segments()[0];
            if a.is_loopback() {
                Some("loopback")
            } else if a.is_unspecified() {
                Some("unspecified")
            } else if a.is_multicast() {
                Some("multicast")
            } else if first & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if a.segments()[..6].iter().all(|s| *s == 0) {
                // ::a.b.c.d, the deprecated IPv4-compatible form
                Some("IPv4-compatible")
            } else {
                None
            }
        }
    }
}

/// Checks a URL as written and parses it: http or https, and a host the
/// parser keeps as written (see the module's rule).
pub fn check_url(raw: &str) -> Result<url::Url, String> {
    check_text(raw)?;
    let url = url::Url::parse(raw).map_err(|e| format!("the URL does not parse: {e}"))?;
    check_parsed(raw, &url)?;
    Ok(url)
}

/// Resolves a redirect's `Location` against the URL it came from and checks
/// it as [`check_url`] does.
pub fn check_redirect(base: &url::Url, location: &str) -> Result<url::Url, String> {
    check_text(location)?;
    let url = base
        .join(location)
        .map_err(|e| format!("the redirect does not parse: {e}"))?;
    check_parsed(location, &url)?;
    Ok(url)
}

/// The checked URL as the client sends it: ureq parses it again with
/// `http`'s parser, which must read the same host and port, or the check
/// would be of another server than the one fetched from.
pub fn as_sent(url: &url::Url) -> Result<ureq::http::Uri, String> {
    let uri: ureq::http::Uri = url
        .as_str()
        .parse()
        .map_err(|e| format!("the URL does not parse as the client reads it: {e}"))?;
    let checked = (url.host_str(), url.port_or_known_default());
    let sent = (
        uri.host(),
        uri.port_u16().or(match uri.scheme_str() {
            Some("http") => Some(80),
            Some("https") => Some(443),
            _ => None,
        }),
    );
    if checked != sent {
        return Err(format!(
            "the client reads the host {:?} port {:?}, not the {:?} port {:?} checked",
            sent.0, sent.1, checked.0, checked.1
        ));
    }
    Ok(uri)
}

fn check_text(raw: &str) -> Result<(), String> {
    // URL parsers drop tabs and newlines and trim spaces: what they fetch
    // would differ from what was checked.
    if raw.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err("the URL holds a space or a control character".into());
    }
    Ok(())
}

fn check_parsed(raw: &str, url: &url::Url) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "the scheme {} is not accepted; use http or https",
            url.scheme()
        ));
    }
    let Some(written) = written_host(raw) else {
        // a reference without a host keeps the one already checked
        return Ok(());
    };
    let used = url.host_str().unwrap_or("");
    if written.starts_with('[') {
        // an IPv6 literal: its address is what the address rule judges
        return Ok(());
    }
    if written.to_ascii_lowercase() != used {
        if looks_numeric(written) {
            return Err(format!(
                "the host {written} is an IPv4 address written as a number or in short form; write it as a.b.c.d"
            ));
        }
        return Err(format!(
            "the host {written} is not written as it is used ({used}); write it in ASCII without escapes"
        ));
    }
    Ok(())
}

/// Whether a host's last label is a number (decimal, or hex with 0x), which
/// makes a URL parser read the whole host as an IPv4 address.
fn looks_numeric(host: &str) -> bool {
    let last = host.trim_end_matches('.').rsplit('.').next().unwrap_or("");
    let hex = last.strip_prefix("0x").or_else(|| last.strip_prefix("0X"));
    match hex {
        Some(h) => h.bytes().all(|b| b.is_ascii_hexdigit()),
        None => !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// The host as written in `raw` (an absolute URL or a reference), cut where
/// a WHATWG parser cuts it for http(s) but not normalised, without the
/// user-info (which may hold a password); `None` when `raw` names no host
/// (a path or query reference).
pub fn written_host(raw: &str) -> Option<&str> {
    let scheme_end = raw.find(':').filter(|&i| {
        i > 0
            && raw.as_bytes()[0].is_ascii_alphabetic()
            && raw[..i]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    });
    let rest = match scheme_end {
        // http: and https: take the authority after any run of slashes
        Some(i) => raw[i + 1..].trim_start_matches(['/', '\\']),
        None => {
            let is_slash = |c: Option<char>| matches!(c, Some('/') | Some('\\'));
            let mut chars = raw.chars();
            if !(is_slash(chars.next()) && is_slash(chars.next())) {
                return None;
            }
            raw.trim_start_matches(['/', '\\'])
        }
    };
    let authority = rest.split(['/', '\\', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    if host_port.starts_with('[') {
        return Some(host_port.split_inclusive(']').next().unwrap_or(host_port));
    }
    Some(host_port.split(':').next().unwrap_or(""))
}

/// Every address on this host's interfaces, now.
pub fn host_addresses() -> io::Result<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: the family says which sockaddr the pointer holds.
            match unsafe { (*ifa.ifa_addr).sa_family } as i32 {
                libc::AF_INET => {
                    let sa = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                    out.push(IpAddr::from(u32::from_be(sa.sin_addr.s_addr).to_be_bytes()));
                }
                libc::AF_INET6 => {
                    let sa = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                    out.push(IpAddr::from(sa.sin6_addr.s6_addr));
                }
                _ => {}
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// A resolver for the image fetch: resolves as usual, then keeps only the
/// addresses the rule admits, so every connection (each redirect hop, each
/// DNS answer) is checked right before it is made.
#[derive(Debug)]
pub struct Resolver {
    sources: std::sync::Arc<ImageSources>,
    lookup: DefaultResolver,
}

impl Resolver {
    pub fn new(sources: ImageSources) -> Resolver {
        Resolver {
            sources: std::sync::Arc::new(sources),
            lookup: DefaultResolver::default(),
        }
    }
}

/// The rule's refusal of a resolved address, as the resolver's error carries
/// it (so the fetch tells it from a failed lookup).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// A loopback image server the rehearsal's stand-in CA does not vouch for
/// (the CA is missing or unusable, or did not sign the server's
/// certificate), as the fetch's errors carry it: the client reads it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StandinCa(pub String);

/// A failed lookup of the server's name, as the resolver's error carries it
/// (ureq reports it as any other I/O error).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Lookup(pub io::Error);

impl ureq::unversioned::resolver::Resolver for Resolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = match self.lookup.resolve(uri, config, timeout) {
            Ok(addrs) => addrs.to_vec(),
            Err(ureq::Error::Io(e)) => return Err(ureq::Error::Other(Box::new(Lookup(e)))),
            Err(e) => return Err(e),
        };
        let own = host_addresses()?;
        let scheme = uri.scheme_str().unwrap_or("");
        let admitted = self
            .sources
            .admit_fetch(scheme, addrs, &own)
            .map_err(|reason| ureq::Error::Other(Box::new(Refused(reason))))?;
        // Without the stand-in's CA nothing on loopback is connected to.
        if let Some(ca) = admitted
            .iter()
            .find_map(|a| self.sources.standin_ca_for(a.ip()))
        {
            if !ca.is_file() {
                return Err(ureq::Error::Other(Box::new(StandinCa(format!(
                    "the image server is on loopback, which this rehearsal's BMC fetches from only with a certificate from the cluster's stand-in Ironic CA, and {} does not exist (the stand-in has not started its image server)",
                    ca.display()
                )))));
            }
        }
        let mut out = self.empty();
        for addr in admitted {
            out.push(addr);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn hosts_written_in_another_form_are_refused_even_where_allowed() {
        for raw in [
            "http://2130706433/x.iso",
            "http://127.1/x.iso",
            "http://127.0.1/x.iso",
            "http://0x7f000001/x.iso",
            "http://0x7f.0.0.1/x.iso",
            "http://0177.0.0.1/x.iso",
            "http://127.0.0.1./x.iso",
            "http://017700000001:8080/x.iso",
            "http:2130706433/x.iso",
            "http:\\\\2130706433\\x.iso",
            "http://user:pw@2130706433/x.iso",
        ] {
            let e = check_url(raw).unwrap_err();
            assert!(
                e.contains("written as a number or in short form"),
                "{raw}: {e}"
            );
        }
        for raw in [
            "http://%31%32%37.0.0.1/x.iso",
            "http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/x.iso",
        ] {
            assert!(check_url(raw).is_err(), "{raw}");
        }
        for raw in ["http://127.0.0.1/x\t.iso", "http://127.\n1/", " http://a/"] {
            assert!(check_url(raw).unwrap_err().contains("control"), "{raw:?}");
        }
        for raw in [
            "file:///etc/passwd",
            "ftp://10.0.0.1/x",
            "gopher://10.0.0.1/",
        ] {
            assert!(check_url(raw).unwrap_err().contains("scheme"), "{raw}");
        }
        // as written = as used
        for raw in [
            "http://127.0.0.1:8080/x.iso",
            "https://10.0.0.5:6183/images/ironic-python-agent.iso",
            "http://Mirror.Example.COM/rhcos.iso",
            "http://user:pw@mirror.example.com/x.iso",
            "http://[::1]:8080/x.iso",
            "http://[fd00::5]/x.iso",
        ] {
            assert!(check_url(raw).is_ok(), "{raw}");
        }
    }

    #[test]
    fn the_client_reads_the_host_and_port_checked() {
        for raw in [
            "http://127.0.0.1:8080/x.iso",
            "https://10.0.0.5:6183/images/ironic-python-agent.iso?a=b#frag",
            "http://Mirror.Example.COM/rhcos.iso",
            "http://user:p%40w@mirror.example.com/x.iso",
            "http://[::1]:8080/x.iso",
            "https://[fd00::5]/x.iso",
            "http://10.0.0.5:80/x.iso",
        ] {
            let url = check_url(raw).unwrap();
            let uri = as_sent(&url).unwrap_or_else(|e| panic!("{raw}: {e}"));
            assert_eq!(uri.host(), url.host_str(), "{raw}");
        }
    }

    #[test]
    fn redirects_are_checked_as_written() {
        let base = check_url("http://10.0.0.5:8080/a/b.iso").unwrap();
        assert_eq!(
            check_redirect(&base, "c.iso").unwrap().as_str(),
            "http://10.0.0.5:8080/a/c.iso"
        );
        assert_eq!(
            check_redirect(&base, "/d.iso").unwrap().as_str(),
            "http://10.0.0.5:8080/d.iso"
        );
        for loc in [
            "//2130706433/x",
            "\\\\127.1/x",
            "/\\0x7f000001/x",
            "http://127.1/x",
            "https:2130706433/x",
        ] {
            assert!(check_redirect(&base, loc).is_err(), "{loc}");
        }
        assert!(check_redirect(&base, "file:///etc/shadow").is_err());
        assert_eq!(
            check_redirect(&base, "//10.0.0.6/x").unwrap().as_str(),
            "http://10.0.0.6/x"
        );
    }

    #[test]
    fn refused_classes_own_addresses_and_networks() {
        let own = [ip("192.168.1.10"), ip("10.88.0.1"), ip("fe80::1")];
        let any = ImageSources::anywhere(vec![]);
        for (addr, why) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("169.254.169.254", "link-local"),
            ("fe80::5", "link-local"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("::", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("ff02::1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("::7f00:1", "IPv4-compatible"),
            ("192.168.1.10", "an address of this host"),
            ("::ffff:10.88.0.1", "an address of this host"),
        ] {
            let r = any.refusal(ip(addr), &own).unwrap_or_default();
            assert!(r.contains(why), "{addr}: {r:?}");
        }
        for addr in ["10.0.0.5", "192.168.1.11", "203.0.113.7", "fd00::5"] {
            assert_eq!(any.refusal(ip(addr), &own), None, "{addr}");
        }

        // the lab BMC: its machine network only; the host's own address there is refused
        let lab = ImageSources::within(vec![net("192.168.126.0/24")], vec![]);
        assert_eq!(lab.refusal(ip("192.168.126.10"), &own), None);
        let r = lab.refusal(ip("10.0.0.5"), &own).unwrap();
        assert!(
            r.contains("outside the image networks (192.168.126.0/24)"),
            "{r}"
        );
        let lab_host = [ip("192.168.126.1")];
        assert!(lab.refusal(ip("192.168.126.1"), &lab_host).is_some());
        assert!(lab
            .refusal(ip("127.0.0.1"), &own)
            .unwrap()
            .contains("loopback"));

        // an explicit allowance covers what it names, loopback and own addresses included
        let mirror = ImageSources::within(
            vec![net("192.168.126.0/24")],
            vec![net("127.0.0.0/8"), net("192.168.1.10/32")],
        );
        assert_eq!(mirror.refusal(ip("127.0.0.1"), &own), None);
        assert_eq!(mirror.refusal(ip("::ffff:127.0.0.2"), &own), None);
        assert_eq!(mirror.refusal(ip("192.168.1.10"), &own), None);
        assert!(mirror.refusal(ip("::1"), &own).is_some());
        assert!(mirror.refusal(ip("169.254.169.254"), &own).is_some());
    }

    #[test]
    fn a_rehearsals_bmc_reads_loopback_over_https_only_under_its_standin_ca() {
        let own = [ip("127.0.0.1"), ip("192.168.1.10"), ip("192.168.126.1")];
        let ca = std::path::PathBuf::from("/state/clusters/lab1/assets/.ironic/tls/ca.crt");
        let lab = || ImageSources::within(vec![net("192.168.126.0/24")], vec![]);
        let rehearsal = lab().with_standin_ca(Some(ca.clone()));

        // loopback over https: admitted, and only under the cluster's CA
        for addr in ["127.0.0.1", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(
                rehearsal.fetch_refusal("https", ip(addr), &own),
                None,
                "{addr}"
            );
            assert_eq!(rehearsal.standin_ca_for(ip(addr)), Some(ca.as_path()));
        }
        // plain http to loopback: refused, saying why
        let r = rehearsal
            .fetch_refusal("http", ip("127.0.0.1"), &own)
            .unwrap();
        assert!(
            r.contains("127.0.0.1 is a loopback address") && r.contains("https only"),
            "{r}"
        );
        // the rest of the rule stands: the host's other addresses, other
        // classes, outside the machine network
        for (addr, why) in [
            ("192.168.1.10", "an address of this host"),
            ("192.168.126.1", "an address of this host"),
            ("169.254.169.254", "link-local"),
            ("10.0.0.5", "outside the image networks"),
        ] {
            let r = rehearsal.fetch_refusal("https", ip(addr), &own).unwrap();
            assert!(r.contains(why), "{addr}: {r}");
            assert_eq!(rehearsal.standin_ca_for(ip(addr)), None, "{addr}");
        }
        // the machine network: as before, under --media-ca (or none)
        assert_eq!(
            rehearsal.fetch_refusal("http", ip("192.168.126.10"), &own),
            None
        );
        assert_eq!(rehearsal.standin_ca_for(ip("192.168.126.10")), None);
        let sa = |s: &str| -> SocketAddr { s.parse().unwrap() };
        assert_eq!(
            rehearsal.admit_fetch("https", vec![sa("127.0.0.1:443")], &own),
            Ok(vec![sa("127.0.0.1:443")])
        );
        assert!(rehearsal
            .admit_fetch("http", vec![sa("127.0.0.1:80")], &own)
            .is_err());
        // what another component fetches (CDI) gets no exception
        assert!(rehearsal.admit(vec![sa("127.0.0.1:443")], &own).is_err());

        // not a rehearsal: loopback refused over either scheme, as before
        for scheme in ["https", "http"] {
            let r = lab().fetch_refusal(scheme, ip("127.0.0.1"), &own).unwrap();
            assert_eq!(r, "127.0.0.1 is a loopback address");
            assert_eq!(lab().standin_ca_for(ip("127.0.0.1")), None);
        }
        // an explicit allowance keeps its meaning (--media-ca or none)
        let allowed = ImageSources::within(vec![net("192.168.126.0/24")], vec![net("127.0.0.0/8")])
            .with_standin_ca(Some(ca));
        assert_eq!(allowed.fetch_refusal("http", ip("127.0.0.1"), &own), None);
        assert_eq!(allowed.standin_ca_for(ip("127.0.0.1")), None);
        assert!(allowed.standin_ca_for(ip("::1")).is_some());
    }

    #[test]
    fn a_name_keeps_only_its_admitted_addresses() {
        let any = ImageSources::anywhere(vec![]);
        let sa = |s: &str| -> SocketAddr { s.parse().unwrap() };
        assert_eq!(
            any.admit(vec![sa("127.0.0.1:80"), sa("10.0.0.5:80")], &[]),
            Ok(vec![sa("10.0.0.5:80")])
        );
        let e = any
            .admit(vec![sa("127.0.0.1:80"), sa("[::1]:80")], &[])
            .unwrap_err();
        assert!(
            e.contains("127.0.0.1 is a loopback") && e.contains("::1 is a loopback"),
            "{e}"
        );
        assert!(any.admit(vec![], &[]).is_err());
    }

    #[test]
    fn vetting_refuses_loopback_names_without_connecting() {
        let any = ImageSources::anywhere(vec![]);
        for raw in [
            "http://localhost:9/x.iso",
            "http://127.0.0.1:9/x.iso",
            "http://[::1]:9/x.iso",
            "http://2130706433:9/x.iso",
        ] {
            assert!(any.vet(raw).is_err(), "{raw}");
        }
        let allowed = ImageSources::anywhere(vec![net("127.0.0.0/8")]);
        assert_eq!(allowed.vet("http://127.0.0.1:9/x.iso"), Ok(()));
    }

    #[test]
    fn this_host_has_a_loopback_address() {
        let own = host_addresses().unwrap();
        assert!(own.iter().any(|a| a.is_loopback()), "{own:?}");
    }
}
