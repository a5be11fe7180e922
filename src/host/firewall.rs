//! The host firewall: let a cluster's nodes reach the host services they need
//! (load balancer 6443/22623/80/443, the HTTP artifact server, the lab BMC) when
//! the host filters traffic from its guests, and take exactly that back at destroy.
//!
//! Why it is needed (facts, cited):
//! - libvirt puts a NAT network's bridge into firewalld's `libvirt` zone, whose
//!   low-priority reject blocks guest→host traffic except dhcp, dhcpv6, dns, ssh,
//!   tftp (libvirt `src/network/libvirt.zone` @3b71f2e42dc6c5453d09136578bfb868874da088;
//!   zone assignment in `src/network/bridge_driver_linux.c`). dev-scripts opens
//!   ports there at runtime (`firewall-cmd --zone=libvirt --add-port=6443/tcp`,
//!   openshift-metal3/dev-scripts@655d6bacdea8c5b7632c64a32ddb6f920cd3d941
//!   `external_loadbalancer.sh` l.10–12, removed in `agent/cleanup.sh` l.46–48).
//! - libvirt's own rules never block guest→host: its nftables backend keeps the
//!   host-input chains compiled out (`src/network/network_nftables.c`
//!   @06e7fee707d34b316e71fede88ec44b6e3b89c40, `VIR_NFTABLES_INCLUDE_HOST_RULES`),
//!   its iptables backend only inserts ACCEPTs for DHCP/DNS. Only the host's own
//!   policy (firewalld, ufw, a default-drop nftables or iptables INPUT) does.
//!
//! What shiftlab adds, per backend, always scoped to the cluster's subnet as
//! source, the service's address as destination and the service's TCP port:
//! - **firewalld**: runtime rich rules (never `--permanent`) in the zone of the
//!   cluster's bridge (`libvirt` for shiftlab's NAT bridge). A zone holds every
//!   libvirt bridge, so the source subnet and destination address keep the rule to
//!   this cluster. Rich rules without a priority sort before the zone's
//!   `priority=32767` reject.
//! - **ufw**: `ufw allow in on <bridge> from <subnet> to <addr> port <p> proto tcp
//!   comment 'shiftlab <cluster>'`, removed with `ufw delete` of the same rule. ufw
//!   has no runtime-only rules: they are saved in /etc/ufw/user.rules until
//!   destroy. (ufw 0.36.2 `backend_iptables.py` l.1039–1051 matches a delete on every
//!   field; the comment must match too unless the delete gives none.)
//! - **nftables** (no firewalld, no ufw): an `accept` in a table of its own would not
//!   help. Every base chain on a hook sees the packet in priority order; an accept
//!   ends only that chain, while a drop anywhere is final ("an accept verdict …
//!   isn't necessarily final. However, the same is not true of packets that are
//!   subjected to a drop verdict", nftables wiki, Configuring chains, base chain
//!   priority). So the rule is inserted at the top of each input base chain that
//!   may drop, tagged with the comment `shiftlab <cluster> <addr>:<port>`; destroy
//!   deletes the rules of those chains that carry the cluster's comment (by
//!   handle). Runtime only: nothing is written to /etc/nftables.conf.
//! - **iptables** (legacy, or iptables-nft's `ip filter INPUT`): `iptables -I INPUT`
//!   with the same match and an `-m comment`, removed with `iptables -D`.
//!
//! IPv6 (a dual-stack lab, docs/ipv6.md): the load balancer's IPv6 VIP gets the
//! same openings from the cluster's IPv6 subnet, in each backend's IPv6 words:
//! firewalld rich rules with `family="ipv6"`, `ip6 saddr`/`ip6 daddr` in nftables
//! chains of family `inet` or `ip6` (a chain of family `ip` sees no IPv6), and
//! `ip6tables` beside `iptables` (separate tables in the kernel, and iptables-nft
//! keeps them in `ip filter` and `ip6 filter`). ufw takes either family in one
//! rule. A host whose IPv6 input drops but whose labs are IPv4 only is left as it
//! is: only the families of a cluster's openings count.
//!
//! Detection and rendering are pure functions of recorded command outputs; the
//! record of what was added (`host-firewall.json` in the cluster's directory) is
//! what destroy removes. `shiftlab serve` applies it (it runs the services the
//! rules are for) and re-applies it after a restart or a firewalld reload.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::process::Command;

use anyhow::{bail, Context, Result};
use ipnet::{Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plan::Plan;

/// NTP's port (UDP).
pub const NTP_PORT: u16 = 123;

/// One port on one host address that the cluster's nodes must reach.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Opening {
    /// IPv4, or a dual-stack lab's IPv6 (records of older shiftlabs are IPv4).
    pub address: IpAddr,
    pub port: u16,
    /// What listens there (`api`, `http artifacts`, …), for people.
    pub service: String,
    /// TCP unless said (records written before UDP openings existed say nothing).
    #[serde(default, skip_serializing_if = "Protocol::is_tcp")]
    pub protocol: Protocol,
}

/// The transport of an [`Opening`]: TCP for every service but the host's NTP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }

    fn is_tcp(&self) -> bool {
        *self == Protocol::Tcp
    }
}

impl Opening {
    fn v6(&self) -> bool {
        self.address.is_ipv6()
    }
}

/// Everything a cluster needs opened, from its plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Openings {
    pub cluster: String,
    /// The cluster's bridge: where the traffic comes in.
    pub bridge: String,
    /// The cluster's IPv4 subnet: where its IPv4 traffic comes from (none in
    /// an IPv6 single-stack lab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Ipv4Net>,
    /// A dual-stack lab's IPv6 subnet: where its IPv6 traffic comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source6: Option<Ipv6Net>,
    pub ports: Vec<Opening>,
}

impl Openings {
    /// The load balancer's frontends, the HTTP artifact server (`http`, where
    /// serve binds it), the lab BMC and the NFS export (`storage: nfs`), each once.
    pub fn from_plan(plan: &Plan, http: Option<SocketAddr>) -> Self {
        let mut seen = BTreeSet::new();
        let mut ports = Vec::new();
        let mut add = |address: IpAddr, port: u16, service: &str| {
            if seen.insert((address, port)) {
                ports.push(Opening {
                    address,
                    port,
                    service: service.to_string(),
                    protocol: Protocol::Tcp,
                });
            }
        };
        let lb = plan.load_balancer.iter().flat_map(|lb| &lb.frontends);
        for f in lb.clone() {
            if let Some(a) = f.address {
                add(a.into(), f.port, &f.name);
            }
        }
        // The IPv6 binds after every IPv4 one: an IPv4 lab's list is unchanged.
        let source6 = plan.network.ipv6.as_ref().map(|n| n.cidr);
        for f in lb.filter(|_| source6.is_some()) {
            if let Some(a) = f.address6 {
                add(a.into(), f.port, &f.name);
            }
        }
        if let Some(h) = http {
            add(h.ip(), h.port(), "http artifacts");
        }
        if let Some(b) = &plan.bmc {
            add(b.address, b.port, "redfish bmc");
        }
        if let Some(n) = plan.storage.as_ref().and_then(|s| s.nfs.as_ref()) {
            add(n.server, crate::host::nfs::PORT, "nfs");
        }
        if plan.network.host_ntp {
            // The host's chrony answers NTP at the gateway (host::chrony).
            ports.push(Opening {
                address: plan.network.host_ip(),
                port: NTP_PORT,
                service: "ntp (host chrony)".into(),
                protocol: Protocol::Udp,
            });
        }
        Openings {
            cluster: plan.cluster.clone(),
            bridge: plan.network.bridge.clone(),
            source: plan.network.cidr,
            source6,
            ports,
        }
    }

    /// Whether any opening is IPv4, and whether any is IPv6.
    fn families(&self) -> (bool, bool) {
        (
            self.ports.iter().any(|p| !p.v6()),
            self.ports.iter().any(Opening::v6),
        )
    }

    /// Where an opening's traffic comes from: the subnet of its family. An
    /// IPv6 opening of a record without `source6` (none is written so) is
    /// scoped to its own address, which no node has: closed, not widened.
    fn source_of(&self, p: &Opening) -> String {
        match p.address {
            IpAddr::V4(a) => self.source.unwrap_or_else(|| Ipv4Net::from(a)).to_string(),
            IpAddr::V6(a) => self.source6.unwrap_or_else(|| Ipv6Net::from(a)).to_string(),
        }
    }

    /// The comment every nftables/iptables rule of this cluster carries (a UDP
    /// rule's ends in `/udp`: the same port may be open for TCP too).
    fn comment(&self, o: &Opening) -> String {
        let udp = if o.protocol == Protocol::Udp {
            "/udp"
        } else {
            ""
        };
        // SocketAddr's form: `[addr]:port` for IPv6, the port stays readable.
        let at = std::net::SocketAddr::new(o.address, o.port);
        format!("{}{at}{udp}", comment_prefix(&self.cluster))
    }
}

fn comment_prefix(cluster: &str) -> String {
    format!("shiftlab {cluster} ")
}

/// An nftables base chain on the input hook that may drop.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NftChain {
    pub family: String,
    pub table: String,
    pub chain: String,
}

impl NftChain {
    /// Whether the chain sees the opening's family: `inet` both, `ip` IPv4,
    /// `ip6` IPv6.
    fn sees(&self, p: &Opening) -> bool {
        self.sees_any(!p.v6(), p.v6())
    }

    /// Whether the chain sees either of these families (IPv4, IPv6).
    fn sees_any(&self, v4: bool, v6: bool) -> bool {
        match self.family.as_str() {
            "inet" => v4 || v6,
            "ip6" => v6,
            _ => v4,
        }
    }
}

/// What filters guest→host traffic on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Backend {
    /// firewalld is running: it owns the ruleset.
    Firewalld,
    /// ufw is active.
    Ufw,
    /// Plain netfilter: input base chains that may drop, and/or an iptables
    /// (ip6tables) INPUT that may drop.
    Netfilter {
        nft_chains: Vec<NftChain>,
        iptables: bool,
        /// Records of older shiftlabs say nothing: no ip6tables rule was added.
        #[serde(default)]
        ip6tables: bool,
    },
    /// Nothing filters input: nothing to add.
    Open,
}

impl Backend {
    pub fn describe(&self) -> String {
        match self {
            Backend::Firewalld => "firewalld".into(),
            Backend::Ufw => "ufw".into(),
            Backend::Netfilter {
                nft_chains,
                iptables,
                ip6tables,
            } => {
                let mut parts: Vec<String> = nft_chains
                    .iter()
                    .map(|c| format!("nftables {} {} {}", c.family, c.table, c.chain))
                    .collect();
                if *iptables {
                    parts.push("iptables INPUT".into());
                }
                if *ip6tables {
                    parts.push("ip6tables INPUT".into());
                }
                parts.join(", ")
            }
            Backend::Open => "no input filtering".into(),
        }
    }

    /// The places of this backend that concern openings of these families
    /// (IPv4, IPv6): a drop in a family the cluster does not use needs no rule.
    pub fn for_families(self, v4: bool, v6: bool) -> Backend {
        match self {
            Backend::Netfilter {
                nft_chains,
                iptables,
                ip6tables,
            } => {
                let nft_chains: Vec<NftChain> = nft_chains
                    .into_iter()
                    .filter(|c| c.sees_any(v4, v6))
                    .collect();
                let (iptables, ip6tables) = (iptables && v4, ip6tables && v6);
                if nft_chains.is_empty() && !iptables && !ip6tables {
                    Backend::Open
                } else {
                    Backend::Netfilter {
                        nft_chains,
                        iptables,
                        ip6tables,
                    }
                }
            }
            other => other,
        }
    }
}

/// The outputs detection reads; `None` where the command is not installed (or
/// cannot run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probe {
    /// `firewall-cmd --state`: `running` (exit 0) or `not running` (exit 252).
    pub firewalld_state: Option<String>,
    /// `ufw status`: `Status: active` or `Status: inactive`.
    pub ufw_status: Option<String>,
    /// `nft -j list ruleset`.
    pub nft_ruleset: Option<String>,
    /// `iptables -S` (the filter table).
    pub iptables_rules: Option<String>,
    /// `ip6tables -S` (the filter table).
    pub ip6tables_rules: Option<String>,
}

/// Which backend guards this host's input, from recorded outputs. firewalld and
/// ufw each own the rules they generate (a rule added beside them is lost at their
/// next reload), so they win; otherwise every nftables and iptables place that may
/// drop gets the rules.
pub fn decide(p: &Probe) -> Backend {
    if p.firewalld_state.as_deref().map(str::trim) == Some("running") {
        return Backend::Firewalld;
    }
    if p.ufw_status
        .as_deref()
        .and_then(|s| s.lines().next())
        .is_some_and(|l| l.trim() == "Status: active")
    {
        return Backend::Ufw;
    }
    let nft_chains = p
        .nft_ruleset
        .as_deref()
        .map(blocking_nft_chains)
        .unwrap_or_default();
    let iptables = p.iptables_rules.as_deref().is_some_and(iptables_blocks);
    let ip6tables = p.ip6tables_rules.as_deref().is_some_and(iptables_blocks);
    if nft_chains.is_empty() && !iptables && !ip6tables {
        return Backend::Open;
    }
    Backend::Netfilter {
        nft_chains,
        iptables,
        ip6tables,
    }
}

/// Input base chains (families ip, ip6 and inet) whose policy drops, or that
/// drop or reject in themselves or in a chain they jump to. iptables-nft's own
/// chains (`ip filter INPUT`, `ip6 filter INPUT`) are left to iptables and
/// ip6tables, which manage them.
pub fn blocking_nft_chains(json: &str) -> Vec<NftChain> {
    let Ok(v) = serde_json::from_str::<Value>(json) else {
        return Vec::new();
    };
    let items = v["nftables"].as_array().cloned().unwrap_or_default();
    let key = |o: &Value| {
        (
            o["family"].as_str().unwrap_or("").to_string(),
            o["table"].as_str().unwrap_or("").to_string(),
        )
    };
    // Rules of every chain, to follow jumps.
    let rules_of = |fam: &str, table: &str, chain: &str| -> Vec<Value> {
        items
            .iter()
            .filter_map(|i| i.get("rule"))
            .filter(|r| {
                r["family"] == fam && r["table"] == table && r["chain"].as_str() == Some(chain)
            })
            .cloned()
            .collect()
    };
    fn drops(
        fam: &str,
        table: &str,
        chain: &str,
        rules_of: &dyn Fn(&str, &str, &str) -> Vec<Value>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        if !seen.insert(chain.to_string()) {
            return false;
        }
        rules_of(fam, table, chain).iter().any(|r| {
            r["expr"].as_array().into_iter().flatten().any(|e| {
                e.get("drop").is_some()
                    || e.get("reject").is_some()
                    || ["jump", "goto"].iter().any(|j| {
                        e[j]["target"]
                            .as_str()
                            .is_some_and(|t| drops(fam, table, t, rules_of, seen))
                    })
            })
        })
    }
    let mut out = Vec::new();
    for c in items.iter().filter_map(|i| i.get("chain")) {
        let (fam, table) = key(c);
        let name = c["name"].as_str().unwrap_or("");
        if c["hook"] != "input" || !matches!(fam.as_str(), "ip" | "ip6" | "inet") {
            continue;
        }
        if (fam == "ip" || fam == "ip6") && table == "filter" && name == "INPUT" {
            continue;
        }
        let policy_drops = c["policy"] == "drop";
        if policy_drops || drops(&fam, &table, name, &rules_of, &mut BTreeSet::new()) {
            out.push(NftChain {
                family: fam,
                table,
                chain: name.to_string(),
            });
        }
    }
    out.sort();
    out
}

/// Whether iptables' filter INPUT may drop: policy DROP, or a DROP/REJECT in INPUT
/// or in a chain INPUT jumps to (`iptables -S` output; `ip6tables -S` alike).
pub fn iptables_blocks(rules: &str) -> bool {
    fn drops(rules: &str, chain: &str, seen: &mut BTreeSet<String>) -> bool {
        if !seen.insert(chain.to_string()) {
            return false;
        }
        rules.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() >= 3 && f[0] == "-P" && f[1] == chain {
                return f[2] == "DROP";
            }
            if f.len() < 2 || f[0] != "-A" || f[1] != chain {
                return false;
            }
            let target = f
                .windows(2)
                .find(|w| w[0] == "-j" || w[0] == "-g")
                .map(|w| w[1]);
            match target {
                Some("DROP") | Some("REJECT") => true,
                // Any other non-terminal target may be a user chain: follow it.
                Some(t) if !matches!(t, "ACCEPT" | "RETURN" | "LOG") => drops(rules, t, seen),
                _ => false,
            }
        })
    }
    drops(rules, "INPUT", &mut BTreeSet::new())
}

/// A firewalld rich rule for one opening.
pub fn rich_rule(o: &Openings, p: &Opening) -> String {
    format!(
        "rule family=\"{}\" source address=\"{}\" destination address=\"{}\" port port=\"{}\" protocol=\"{}\" accept",
        if p.v6() { "ipv6" } else { "ipv4" },
        o.source_of(p),
        p.address,
        p.port,
        p.protocol.as_str()
    )
}

/// `ufw` arguments adding (or, with `delete`, removing) one opening.
pub fn ufw_args(o: &Openings, p: &Opening, delete: bool) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    if delete {
        a.push("delete".into());
    }
    a.extend(
        [
            "allow",
            "in",
            "on",
            &o.bridge,
            "from",
            &o.source_of(p),
            "to",
            &p.address.to_string(),
            "port",
            &p.port.to_string(),
            "proto",
            p.protocol.as_str(),
            "comment",
        ]
        .map(String::from),
    );
    a.push(format!("shiftlab {}", o.cluster));
    a
}

/// The nftables rule (after `insert rule <family> <table> <chain>`, of a chain
/// that [sees](NftChain::sees) its family).
pub fn nft_rule(o: &Openings, p: &Opening) -> String {
    let ip = if p.v6() { "ip6" } else { "ip" };
    format!(
        "iifname \"{}\" {ip} saddr {} {ip} daddr {} {} dport {} accept comment \"{}\"",
        o.bridge,
        o.source_of(p),
        p.address,
        p.protocol.as_str(),
        p.port,
        o.comment(p)
    )
}

/// The iptables rule spec (after `-I INPUT`, `-C INPUT` or `-D INPUT`), of
/// `ip6tables` for an IPv6 opening ([`iptables_program`]).
pub fn iptables_spec(o: &Openings, p: &Opening) -> Vec<String> {
    [
        "-i",
        &o.bridge,
        "-s",
        &o.source_of(p),
        "-d",
        &format!("{}/{}", p.address, if p.v6() { 128 } else { 32 }),
        "-p",
        p.protocol.as_str(),
        "-m",
        p.protocol.as_str(),
        "--dport",
        &p.port.to_string(),
        "-m",
        "comment",
        "--comment",
        &o.comment(p),
        "-j",
        "ACCEPT",
    ]
    .map(String::from)
    .to_vec()
}

/// The program that holds an opening's rule: `iptables`, or `ip6tables` for IPv6.
pub fn iptables_program(p: &Opening) -> &'static str {
    if p.v6() {
        "ip6tables"
    } else {
        "iptables"
    }
}

/// The zone firewalld gives the bridge: `--get-zone-of-interface` (exit 0 with the
/// zone), else the default zone, which takes traffic of interfaces bound to none.
pub fn zone_from(of_interface: &Output, default_zone: &Output) -> Option<String> {
    let pick = |o: &Output| {
        let z = o.stdout.trim();
        (o.code == Some(0) && !z.is_empty() && !z.contains(' ')).then(|| z.to_string())
    };
    pick(of_interface).or_else(|| pick(default_zone))
}

/// What was added for a cluster: enough to take exactly that away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub backend: Backend,
    /// firewalld's zone the rules went into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    pub openings: Openings,
}

impl Record {
    /// The changes, one line each, as a person would type them.
    pub fn lines(&self) -> Vec<String> {
        let o = &self.openings;
        let mut out = Vec::new();
        for p in &o.ports {
            match &self.backend {
                Backend::Firewalld => out.push(format!(
                    "firewall-cmd --zone={} --add-rich-rule='{}'   # {}",
                    self.zone.as_deref().unwrap_or("?"),
                    rich_rule(o, p),
                    p.service
                )),
                Backend::Ufw => out.push(format!(
                    "ufw {}   # {}",
                    shell_words(&ufw_args(o, p, false)),
                    p.service
                )),
                Backend::Netfilter {
                    nft_chains,
                    iptables,
                    ip6tables,
                } => {
                    for c in nft_chains.iter().filter(|c| c.sees(p)) {
                        out.push(format!(
                            "nft insert rule {} {} {} '{}'   # {}",
                            c.family,
                            c.table,
                            c.chain,
                            nft_rule(o, p),
                            p.service
                        ));
                    }
                    if in_iptables(p, *iptables, *ip6tables) {
                        out.push(format!(
                            "{} -I INPUT {}   # {}",
                            iptables_program(p),
                            shell_words(&iptables_spec(o, p)),
                            p.service
                        ));
                    }
                }
                Backend::Open => {}
            }
        }
        out
    }
}

fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=".contains(c))
            {
                a.clone()
            } else {
                format!("'{a}'")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What preflight says about the host firewall for a cluster.
pub fn preflight_lines(record: &Record) -> Vec<String> {
    let head = match &record.backend {
        Backend::Open => {
            return vec![format!(
                "host firewall: nothing filters traffic from {} to this host: no rule needed",
                record.openings.bridge
            )]
        }
        Backend::Firewalld => format!(
            "host firewall: firewalld is running; shiftlab serve will add runtime rules (not --permanent) to zone {}, removed at destroy:",
            record.zone.as_deref().unwrap_or("?")
        ),
        Backend::Ufw => "host firewall: ufw is active; shiftlab serve will add these ufw rules (saved by ufw until destroy removes them):".to_string(),
        Backend::Netfilter { .. } => format!(
            "host firewall: {} may drop traffic from the nodes; shiftlab serve will insert runtime rules, removed at destroy:",
            record.backend.describe()
        ),
    };
    let mut v = vec![head];
    v.extend(
        record
            .lines()
            .into_iter()
            .map(|l| format!("  will add: {l}")),
    );
    v
}

/// One command's result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// `None` when killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs the firewall tools. `Ok(None)` when the program is not installed.
pub trait Runner: Send + Sync {
    fn run(&self, argv: &[String]) -> Result<Option<Output>>;
}

/// The real programs.
#[derive(Debug, Clone, Copy, Default)]
pub struct System;

impl Runner for System {
    fn run(&self, argv: &[String]) -> Result<Option<Output>> {
        let out = match Command::new(&argv[0]).args(&argv[1..]).output() {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("running {}", argv[0])),
        };
        tracing::debug!(?argv, code = ?out.status.code(), "firewall command");
        Ok(Some(Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }))
    }
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// The host's firewall, through `runner`.
pub struct Firewall<'r> {
    pub runner: &'r dyn Runner,
}

impl Firewall<'_> {
    fn run(&self, parts: Vec<String>) -> Result<Option<Output>> {
        self.runner.run(&parts)
    }

    /// Run and require success.
    fn must(&self, parts: Vec<String>) -> Result<Output> {
        let shown = parts.join(" ");
        match self.run(parts)? {
            Some(o) if o.ok() => Ok(o),
            Some(o) => bail!("{shown}: {}", o.stderr.trim()),
            None => bail!("{shown}: not installed"),
        }
    }

    /// Gather the outputs [`decide`] reads.
    pub fn probe(&self) -> Result<Probe> {
        let text = |o: Option<Output>| o.map(|o| o.stdout);
        let nft = self
            .run(argv(&["nft", "-j", "list", "ruleset"]))?
            .filter(Output::ok);
        let ipt = self
            .run(argv(&["iptables", "-w", "-S"]))?
            .filter(Output::ok);
        let ip6t = self
            .run(argv(&["ip6tables", "-w", "-S"]))?
            .filter(Output::ok);
        Ok(Probe {
            firewalld_state: text(self.run(argv(&["firewall-cmd", "--state"]))?),
            ufw_status: text(self.run(argv(&["ufw", "status"]))?.filter(Output::ok)),
            nft_ruleset: text(nft),
            iptables_rules: text(ipt),
            ip6tables_rules: text(ip6t),
        })
    }

    /// firewalld's zone for the bridge.
    fn zone(&self, bridge: &str) -> Result<String> {
        let of = self
            .run(vec![
                "firewall-cmd".into(),
                format!("--get-zone-of-interface={bridge}"),
            ])?
            .unwrap_or_default();
        let def = self
            .run(argv(&["firewall-cmd", "--get-default-zone"]))?
            .unwrap_or_default();
        zone_from(&of, &def).context("firewalld names no zone for the bridge and no default zone")
    }

    /// What [`Self::apply`] would add, without adding it (preflight).
    pub fn plan(&self, openings: &Openings) -> Result<Record> {
        let (v4, v6) = openings.families();
        let backend = decide(&self.probe()?).for_families(v4, v6);
        let zone = match backend {
            Backend::Firewalld => Some(self.zone(&openings.bridge)?),
            _ => None,
        };
        Ok(Record {
            backend,
            zone,
            openings: openings.clone(),
        })
    }

    /// Add what is missing of `openings` on this host's firewall. Idempotent.
    pub fn apply(&self, openings: &Openings) -> Result<Record> {
        let record = self.plan(openings)?;
        let o = &record.openings;
        match &record.backend {
            Backend::Open => {}
            Backend::Firewalld => {
                let zone = record.zone.as_deref().unwrap_or_default();
                for p in &o.ports {
                    let rule = rich_rule(o, p);
                    let q = self.run(vec![
                        "firewall-cmd".into(),
                        format!("--zone={zone}"),
                        format!("--query-rich-rule={rule}"),
                    ])?;
                    if !q.is_some_and(|q| q.ok()) {
                        self.must(vec![
                            "firewall-cmd".into(),
                            format!("--zone={zone}"),
                            format!("--add-rich-rule={rule}"),
                        ])?;
                    }
                }
            }
            Backend::Ufw => {
                // ufw skips a rule it has ("Skipping adding existing rule").
                for p in &o.ports {
                    let mut a = vec!["ufw".to_string()];
                    a.extend(ufw_args(o, p, false));
                    self.must(a)?;
                }
            }
            Backend::Netfilter {
                nft_chains,
                iptables,
                ip6tables,
            } => {
                for c in nft_chains {
                    let have = self.nft_rules(c)?;
                    for p in o.ports.iter().filter(|p| c.sees(p)) {
                        if have.iter().any(|(_, comment)| *comment == o.comment(p)) {
                            continue;
                        }
                        self.must(vec![
                            "nft".into(),
                            "insert".into(),
                            "rule".into(),
                            c.family.clone(),
                            c.table.clone(),
                            c.chain.clone(),
                            nft_rule(o, p),
                        ])?;
                    }
                }
                for p in o
                    .ports
                    .iter()
                    .filter(|p| in_iptables(p, *iptables, *ip6tables))
                {
                    let spec = iptables_spec(o, p);
                    if !self.iptables(p, &["-C", "INPUT"], &spec)?.ok() {
                        let out = self.iptables(p, &["-I", "INPUT"], &spec)?;
                        if !out.ok() {
                            bail!("{} -I INPUT: {}", iptables_program(p), out.stderr.trim());
                        }
                    }
                }
            }
        }
        Ok(record)
    }

    /// Whether each of `openings` has its rule on the host's firewall as it is
    /// now (the rehearsal report); `Backend::Open` with no rows when nothing
    /// filters. Changes nothing.
    pub fn in_place(&self, openings: &Openings) -> Result<(Backend, Vec<(Opening, bool)>)> {
        let record = self.plan(openings)?;
        let o = &record.openings;
        let mut out = Vec::new();
        for p in &o.ports {
            let ok = match &record.backend {
                Backend::Open => continue,
                Backend::Firewalld => self
                    .run(vec![
                        "firewall-cmd".into(),
                        format!("--zone={}", record.zone.as_deref().unwrap_or_default()),
                        format!("--query-rich-rule={}", rich_rule(o, p)),
                    ])?
                    .is_some_and(|q| q.ok()),
                // `ufw status`: `<addr> <port>/tcp on <bridge> ALLOW IN <subnet> # …`.
                Backend::Ufw => self.run(argv(&["ufw", "status"]))?.is_some_and(|s| {
                    s.stdout.lines().any(|l| {
                        l.starts_with(&format!(
                            "{} {}/{} ",
                            p.address,
                            p.port,
                            p.protocol.as_str()
                        )) && l.contains("ALLOW")
                            && l.contains(&o.source_of(p))
                    })
                }),
                Backend::Netfilter {
                    nft_chains,
                    iptables,
                    ip6tables,
                } => {
                    let mut ok = true;
                    for c in nft_chains.iter().filter(|c| c.sees(p)) {
                        ok &= self
                            .nft_rules(c)?
                            .iter()
                            .any(|(_, comment)| *comment == o.comment(p));
                    }
                    if in_iptables(p, *iptables, *ip6tables) {
                        ok &= self
                            .iptables(p, &["-C", "INPUT"], &iptables_spec(o, p))?
                            .ok();
                    }
                    ok
                }
            };
            out.push((p.clone(), ok));
        }
        Ok((record.backend, out))
    }

    /// `iptables` (`ip6tables` for an IPv6 opening) with `verb` and `spec`.
    fn iptables(&self, p: &Opening, verb: &[&str], spec: &[String]) -> Result<Output> {
        let program = iptables_program(p);
        let mut a = argv(&[program, "-w"]);
        a.extend(verb.iter().map(|s| s.to_string()));
        a.extend(spec.iter().cloned());
        self.run(a)?
            .with_context(|| format!("{program}: not installed"))
    }

    /// (handle, comment) of every rule of a chain; empty when the chain is gone.
    fn nft_rules(&self, c: &NftChain) -> Result<Vec<(u64, String)>> {
        let Some(out) = self.run(argv(&[
            "nft", "-j", "-a", "list", "chain", &c.family, &c.table, &c.chain,
        ]))?
        else {
            return Ok(Vec::new());
        };
        if !out.ok() {
            return Ok(Vec::new());
        }
        Ok(nft_rule_comments(&out.stdout))
    }

    /// Take away what `record` says was added. Idempotent; fine when the backend
    /// is gone (runtime rules went with it).
    pub fn remove(&self, record: &Record) -> Result<()> {
        let o = &record.openings;
        match &record.backend {
            Backend::Open => {}
            Backend::Firewalld => {
                let running = self
                    .run(argv(&["firewall-cmd", "--state"]))?
                    .is_some_and(|s| s.ok());
                if !running {
                    return Ok(());
                }
                let zone = record.zone.as_deref().unwrap_or_default();
                for p in &o.ports {
                    // Removing a rule that is not there is a warning, exit 0.
                    self.must(vec![
                        "firewall-cmd".into(),
                        format!("--zone={zone}"),
                        format!("--remove-rich-rule={}", rich_rule(o, p)),
                    ])?;
                }
            }
            Backend::Ufw => {
                for p in &o.ports {
                    let mut a = vec!["ufw".to_string()];
                    a.extend(ufw_args(o, p, true));
                    match self.run(a)? {
                        Some(out) if out.ok() => {}
                        Some(out) if out.stdout.contains("non-existent") => {}
                        Some(out) => bail!("ufw delete: {}", out.stderr.trim()),
                        None => {}
                    }
                }
            }
            Backend::Netfilter {
                nft_chains,
                iptables,
                ip6tables,
            } => {
                let prefix = comment_prefix(&o.cluster);
                for c in nft_chains {
                    for (handle, comment) in self.nft_rules(c)? {
                        if comment.starts_with(&prefix) {
                            self.must(vec![
                                "nft".into(),
                                "delete".into(),
                                "rule".into(),
                                c.family.clone(),
                                c.table.clone(),
                                c.chain.clone(),
                                "handle".into(),
                                handle.to_string(),
                            ])?;
                        }
                    }
                }
                for p in o
                    .ports
                    .iter()
                    .filter(|p| in_iptables(p, *iptables, *ip6tables))
                {
                    let spec = iptables_spec(o, p);
                    while self.iptables(p, &["-C", "INPUT"], &spec)?.ok() {
                        let out = self.iptables(p, &["-D", "INPUT"], &spec)?;
                        if !out.ok() {
                            bail!("{} -D INPUT: {}", iptables_program(p), out.stderr.trim());
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether an opening's rule goes to iptables (IPv4) or ip6tables (IPv6), as
/// the backend found each of them dropping.
fn in_iptables(p: &Opening, iptables: bool, ip6tables: bool) -> bool {
    if p.v6() {
        ip6tables
    } else {
        iptables
    }
}

/// (handle, comment) of the rules in `nft -j -a list chain` output.
pub fn nft_rule_comments(json: &str) -> Vec<(u64, String)> {
    let Ok(v) = serde_json::from_str::<Value>(json) else {
        return Vec::new();
    };
    v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i.get("rule"))
        .filter_map(|r| Some((r["handle"].as_u64()?, r["comment"].as_str()?.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn plan(name: &str) -> Plan {
        let text = match name {
            "upi" => include_str!("../../tests/golden/upi.plan.json"),
            _ => unreachable!(),
        };
        serde_json::from_str(text).unwrap()
    }

    /// tests/golden/ipv6/upi.plan.json: dual-stack, IPv4 primary.
    fn dual_stack() -> Openings {
        let plan: Plan =
            serde_json::from_str(include_str!("../../tests/golden/ipv6/upi.plan.json")).unwrap();
        Openings::from_plan(&plan, Some("192.168.140.1:8080".parse().unwrap()))
    }

    fn upi() -> Openings {
        Openings::from_plan(&plan("upi"), Some("192.168.126.1:8080".parse().unwrap()))
    }

    #[test]
    fn openings_are_the_lb_frontends_http_and_bmc_once_each() {
        let o = upi();
        assert_eq!(o.bridge, "sl-lab1");
        assert_eq!(o.source.unwrap().to_string(), "192.168.126.0/24");
        let got: Vec<String> = o
            .ports
            .iter()
            .map(|p| format!("{}:{} {}", p.address, p.port, p.service))
            .collect();
        assert_eq!(
            got,
            [
                "192.168.126.2:6443 api",
                "192.168.126.2:22623 machine-config",
                "192.168.126.2:443 ingress-https",
                "192.168.126.2:80 ingress-http",
                "192.168.126.1:8080 http artifacts",
            ]
        );
        // The lab BMC of an ipi plan is opened too.
        let mut p = plan("upi");
        p.bmc = Some(crate::plan::BmcPlan {
            address: "192.168.126.1".parse().unwrap(),
            port: 8443,
            username: "admin".into(),
            endpoint: "https://192.168.126.1:8443".into(),
            verify_certificate: false,
        });
        p.load_balancer = None;
        let o = Openings::from_plan(&p, None);
        assert_eq!(o.ports.len(), 1);
        assert_eq!(
            (o.ports[0].port, o.ports[0].service.as_str()),
            (8443, "redfish bmc")
        );
    }

    #[test]
    fn storage_nfs_opens_2049_on_the_gateway_for_the_subnet() {
        let mut p = plan("upi");
        p.storage = crate::plan::storage::StoragePlan::derive(
            crate::spec::Storage::Nfs,
            &p.cluster,
            "192.168.126.1".parse().unwrap(),
            p.network.host_cidr(),
        );
        let o = Openings::from_plan(&p, None);
        assert_eq!(o.source.unwrap().to_string(), "192.168.126.0/24");
        let nfs: Vec<String> = o
            .ports
            .iter()
            .filter(|p| p.service == "nfs")
            .map(|p| format!("{}:{}", p.address, p.port))
            .collect();
        assert_eq!(nfs, ["192.168.126.1:2049"]);
        // Without storage (and with storage: lvms) nothing is opened for NFS.
        assert!(!upi().ports.iter().any(|p| p.port == 2049));
        p.storage = crate::plan::storage::StoragePlan::derive(
            crate::spec::Storage::Lvms,
            &p.cluster,
            "192.168.126.1".parse().unwrap(),
            p.network.host_cidr(),
        );
        assert!(!Openings::from_plan(&p, None)
            .ports
            .iter()
            .any(|p| p.port == 2049));
    }

    #[test]
    fn rules_render_scoped_to_subnet_address_and_port() {
        let o = upi();
        let p = &o.ports[0];
        assert_eq!(
            rich_rule(&o, p),
            "rule family=\"ipv4\" source address=\"192.168.126.0/24\" destination address=\"192.168.126.2\" port port=\"6443\" protocol=\"tcp\" accept"
        );
        assert_eq!(
            ufw_args(&o, p, false).join(" "),
            "allow in on sl-lab1 from 192.168.126.0/24 to 192.168.126.2 port 6443 proto tcp comment shiftlab lab1"
        );
        assert_eq!(ufw_args(&o, p, true)[0], "delete");
        assert_eq!(
            nft_rule(&o, p),
            "iifname \"sl-lab1\" ip saddr 192.168.126.0/24 ip daddr 192.168.126.2 tcp dport 6443 accept comment \"shiftlab lab1 192.168.126.2:6443\""
        );
        assert_eq!(
            iptables_spec(&o, p).join(" "),
            "-i sl-lab1 -s 192.168.126.0/24 -d 192.168.126.2/32 -p tcp -m tcp --dport 6443 -m comment --comment shiftlab lab1 192.168.126.2:6443 -j ACCEPT"
        );
    }

    /// `host_ntp`: UDP port 123 at the gateway, from the subnet only, in every
    /// backend's words; a record of an older shiftlab (no `protocol`) is TCP.
    #[test]
    fn the_host_ntp_opening_is_udp_123_at_the_gateway() {
        let mut pl = plan("upi");
        pl.network.host_ntp = true;
        let o = Openings::from_plan(&pl, None);
        let p = o.ports.last().unwrap();
        assert_eq!(
            (p.address.to_string(), p.port, p.protocol),
            ("192.168.126.1".to_string(), 123, Protocol::Udp)
        );
        assert_eq!(
            rich_rule(&o, p),
            "rule family=\"ipv4\" source address=\"192.168.126.0/24\" destination address=\"192.168.126.1\" port port=\"123\" protocol=\"udp\" accept"
        );
        assert_eq!(
            ufw_args(&o, p, false).join(" "),
            "allow in on sl-lab1 from 192.168.126.0/24 to 192.168.126.1 port 123 proto udp comment shiftlab lab1"
        );
        assert_eq!(
            nft_rule(&o, p),
            "iifname \"sl-lab1\" ip saddr 192.168.126.0/24 ip daddr 192.168.126.1 udp dport 123 accept comment \"shiftlab lab1 192.168.126.1:123/udp\""
        );
        assert_eq!(
            iptables_spec(&o, p).join(" "),
            "-i sl-lab1 -s 192.168.126.0/24 -d 192.168.126.1/32 -p udp -m udp --dport 123 -m comment --comment shiftlab lab1 192.168.126.1:123/udp -j ACCEPT"
        );
        assert!(!upi().ports.iter().any(|p| p.protocol == Protocol::Udp));
        let old: Opening =
            serde_json::from_str(r#"{"address":"192.168.126.2","port":6443,"service":"api"}"#)
                .unwrap();
        assert_eq!(old.protocol, Protocol::Tcp);
        assert!(!serde_json::to_string(&old).unwrap().contains("protocol"));
    }

    // Recorded on this machine's kind of host: `firewall-cmd --state` exits 252 with
    // "not running" when firewalld is stopped; `ufw status` prints "Status: inactive".
    #[test]
    fn firewalld_and_ufw_win() {
        let mut p = Probe {
            firewalld_state: Some("running\n".into()),
            ufw_status: Some("Status: active\n".into()),
            nft_ruleset: Some(NFT_DROP.into()),
            iptables_rules: Some("-P INPUT DROP\n".into()),
            ip6tables_rules: Some("-P INPUT ACCEPT\n".into()),
        };
        assert_eq!(decide(&p), Backend::Firewalld);
        p.firewalld_state = Some("not running\n".into());
        assert_eq!(decide(&p), Backend::Ufw);
        p.ufw_status = Some("Status: inactive\n".into());
        assert_eq!(
            decide(&p),
            Backend::Netfilter {
                nft_chains: vec![NftChain {
                    family: "inet".into(),
                    table: "filter".into(),
                    chain: "input".into()
                }],
                iptables: true,
                ip6tables: false,
            }
        );
        assert_eq!(decide(&Probe::default()), Backend::Open);
    }

    /// `nft -j list ruleset` of Debian's /etc/nftables.conf with the input policy
    /// set to drop, beside libvirt's nftables-backend table (forward only) and
    /// iptables-nft's `ip filter INPUT` (left to iptables).
    const NFT_DROP: &str = r#"{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}},
 {"table": {"family": "inet", "name": "filter", "handle": 1}},
 {"chain": {"family": "inet", "table": "filter", "name": "input", "handle": 1, "type": "filter", "hook": "input", "prio": 0, "policy": "drop"}},
 {"chain": {"family": "inet", "table": "filter", "name": "forward", "handle": 2, "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}},
 {"rule": {"family": "inet", "table": "filter", "chain": "input", "handle": 4, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}}, {"accept": null}]}},
 {"table": {"family": "ip", "name": "libvirt_network", "handle": 2}},
 {"chain": {"family": "ip", "table": "libvirt_network", "name": "forward", "handle": 1, "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}},
 {"table": {"family": "ip", "name": "filter", "handle": 3}},
 {"chain": {"family": "ip", "table": "filter", "name": "INPUT", "handle": 1, "type": "filter", "hook": "input", "prio": 0, "policy": "drop"}}
]}"#;

    #[test]
    fn nft_chains_that_may_drop() {
        assert_eq!(
            blocking_nft_chains(NFT_DROP),
            vec![NftChain {
                family: "inet".into(),
                table: "filter".into(),
                chain: "input".into()
            }]
        );
        // Policy accept, but a jump to a chain that rejects.
        let jump = r#"{"nftables": [
 {"chain": {"family": "ip", "table": "t", "name": "in", "type": "filter", "hook": "input", "prio": 0, "policy": "accept"}},
 {"chain": {"family": "ip", "table": "t", "name": "guard"}},
 {"rule": {"family": "ip", "table": "t", "chain": "in", "handle": 2, "expr": [{"jump": {"target": "guard"}}]}},
 {"rule": {"family": "ip", "table": "t", "chain": "guard", "handle": 3, "expr": [{"reject": null}]}}
]}"#;
        assert_eq!(blocking_nft_chains(jump).len(), 1);
        // Accept-only input chains, other families (an ip6 chain is IPv6's:
        // for_families keeps it only for a lab that has IPv6) and garbage: nothing.
        let open = r#"{"nftables": [
 {"chain": {"family": "inet", "table": "t", "name": "in", "type": "filter", "hook": "input", "prio": 0, "policy": "accept"}},
 {"chain": {"family": "arp", "table": "t", "name": "in", "type": "filter", "hook": "input", "prio": 0, "policy": "drop"}}
]}"#;
        assert!(blocking_nft_chains(open).is_empty());
        assert!(blocking_nft_chains("not json").is_empty());
    }

    #[test]
    fn iptables_input_that_may_drop() {
        // libvirt 9.0's iptables backend on Debian 12: accepts only.
        let libvirt = "-P INPUT ACCEPT\n-P FORWARD ACCEPT\n-P OUTPUT ACCEPT\n-N LIBVIRT_INP\n-A INPUT -j LIBVIRT_INP\n-A LIBVIRT_INP -i virbr0 -p udp -m udp --dport 53 -j ACCEPT\n";
        assert!(!iptables_blocks(libvirt));
        assert!(iptables_blocks("-P INPUT DROP\n"));
        assert!(iptables_blocks(
            "-P INPUT ACCEPT\n-A INPUT -j REJECT --reject-with icmp-host-prohibited\n"
        ));
        assert!(iptables_blocks(
            "-P INPUT ACCEPT\n-N guard\n-A INPUT -j guard\n-A guard -j DROP\n"
        ));
        // A DROP elsewhere is not INPUT's.
        assert!(!iptables_blocks(
            "-P INPUT ACCEPT\n-P FORWARD DROP\n-A FORWARD -j DROP\n"
        ));
    }

    #[test]
    fn zone_of_the_bridge_else_the_default() {
        let ok = |s: &str| Output {
            code: Some(0),
            stdout: format!("{s}\n"),
            stderr: String::new(),
        };
        let none = Output {
            code: Some(2),
            stdout: "no zone\n".into(),
            stderr: String::new(),
        };
        assert_eq!(
            zone_from(&ok("libvirt"), &ok("public")).as_deref(),
            Some("libvirt")
        );
        assert_eq!(zone_from(&none, &ok("public")).as_deref(), Some("public"));
        assert_eq!(zone_from(&none, &Output::default()), None);
    }

    /// Answers from a scripted table and records every command.
    struct Script {
        answers: Vec<(&'static str, Output)>,
        calls: Mutex<Vec<String>>,
    }

    impl Runner for Script {
        fn run(&self, argv: &[String]) -> Result<Option<Output>> {
            let line = argv.join(" ");
            self.calls.lock().unwrap().push(line.clone());
            Ok(self
                .answers
                .iter()
                .find(|(prefix, _)| line.starts_with(prefix))
                .map(|(_, o)| o.clone()))
        }
    }

    fn out(code: i32, stdout: &str) -> Output {
        Output {
            code: Some(code),
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    #[test]
    fn firewalld_adds_missing_runtime_rules_and_removes_them() {
        let s = Script {
            answers: vec![
                ("firewall-cmd --state", out(0, "running\n")),
                ("firewall-cmd --get-zone-of-interface=sl-lab1", out(0, "libvirt\n")),
                // The api rule is there already; the others are not.
                (
                    "firewall-cmd --zone=libvirt --query-rich-rule=rule family=\"ipv4\" source address=\"192.168.126.0/24\" destination address=\"192.168.126.2\" port port=\"6443\"",
                    out(0, "yes\n"),
                ),
                ("firewall-cmd --zone=libvirt --query-rich-rule", out(1, "no\n")),
                ("firewall-cmd --zone=libvirt --add-rich-rule", out(0, "success\n")),
                ("firewall-cmd --zone=libvirt --remove-rich-rule", out(0, "success\n")),
            ],
            calls: Mutex::new(Vec::new()),
        };
        let fw = Firewall { runner: &s };
        let rec = fw.apply(&upi()).unwrap();
        assert_eq!(rec.backend, Backend::Firewalld);
        assert_eq!(rec.zone.as_deref(), Some("libvirt"));
        let calls = s.calls.lock().unwrap().clone();
        let adds: Vec<&String> = calls.iter().filter(|c| c.contains("--add-")).collect();
        assert_eq!(adds.len(), 4, "{calls:#?}");
        assert!(calls.iter().all(|c| !c.contains("--permanent")));
        assert!(adds
            .iter()
            .all(|c| c.contains("source address=\"192.168.126.0/24\"")));
        s.calls.lock().unwrap().clear();
        fw.remove(&rec).unwrap();
        let calls = s.calls.lock().unwrap().clone();
        assert_eq!(
            calls
                .iter()
                .filter(|c| c.contains("--remove-rich-rule"))
                .count(),
            5
        );
        // The record survives a round trip through its file.
        let back: Record = serde_json::from_str(&serde_json::to_string(&rec).unwrap()).unwrap();
        assert_eq!(back, rec);
    }

    #[test]
    fn preflight_says_what_it_will_add() {
        let rec = Record {
            backend: Backend::Firewalld,
            zone: Some("libvirt".into()),
            openings: upi(),
        };
        let lines = preflight_lines(&rec);
        assert!(lines[0].contains("firewalld is running"), "{lines:?}");
        assert!(lines[0].contains("zone libvirt"));
        assert_eq!(lines.len(), 6);
        assert!(lines[1].starts_with(
            "  will add: firewall-cmd --zone=libvirt --add-rich-rule='rule family=\"ipv4\""
        ));
        assert!(lines[1].ends_with("# api"));
        let open = Record {
            backend: Backend::Open,
            ..rec.clone()
        };
        assert_eq!(preflight_lines(&open).len(), 1);
        let nft = Record {
            backend: Backend::Netfilter {
                nft_chains: vec![NftChain {
                    family: "inet".into(),
                    table: "filter".into(),
                    chain: "input".into(),
                }],
                iptables: false,
                ip6tables: false,
            },
            zone: None,
            openings: upi(),
        };
        let lines = preflight_lines(&nft);
        assert!(
            lines[0].contains("nftables inet filter input may drop"),
            "{lines:?}"
        );
        assert!(lines[1].contains("nft insert rule inet filter input 'iifname \"sl-lab1\""));
    }

    /// A dual-stack lab: each load balancer frontend on its IPv6 VIP too, from
    /// the IPv6 subnet, in each backend's IPv6 words; the IPv4 list first and
    /// as an IPv4 lab's.
    #[test]
    fn a_dual_stack_lab_opens_the_lb_on_its_ipv6_vip_from_its_ipv6_subnet() {
        let o = dual_stack();
        assert_eq!(o.source6.unwrap().to_string(), "fd00:5:140::/64");
        let got: Vec<String> = o
            .ports
            .iter()
            .map(|p| format!("{} {} {}", o.comment(p), p.service, o.source_of(p)))
            .collect();
        assert_eq!(
            got,
            [
                "shiftlab ds-upi 192.168.140.2:6443 api 192.168.140.0/24",
                "shiftlab ds-upi 192.168.140.2:22623 machine-config 192.168.140.0/24",
                "shiftlab ds-upi 192.168.140.2:443 ingress-https 192.168.140.0/24",
                "shiftlab ds-upi 192.168.140.2:80 ingress-http 192.168.140.0/24",
                "shiftlab ds-upi [fd00:5:140::2]:6443 api fd00:5:140::/64",
                "shiftlab ds-upi [fd00:5:140::2]:22623 machine-config fd00:5:140::/64",
                "shiftlab ds-upi [fd00:5:140::2]:443 ingress-https fd00:5:140::/64",
                "shiftlab ds-upi [fd00:5:140::2]:80 ingress-http fd00:5:140::/64",
                "shiftlab ds-upi 192.168.140.1:8080 http artifacts 192.168.140.0/24",
            ]
        );
        let p = &o.ports[4];
        assert_eq!(
            rich_rule(&o, p),
            "rule family=\"ipv6\" source address=\"fd00:5:140::/64\" destination address=\"fd00:5:140::2\" port port=\"6443\" protocol=\"tcp\" accept"
        );
        assert_eq!(
            ufw_args(&o, p, false).join(" "),
            "allow in on sl-ds-upi from fd00:5:140::/64 to fd00:5:140::2 port 6443 proto tcp comment shiftlab ds-upi"
        );
        assert_eq!(
            nft_rule(&o, p),
            "iifname \"sl-ds-upi\" ip6 saddr fd00:5:140::/64 ip6 daddr fd00:5:140::2 tcp dport 6443 accept comment \"shiftlab ds-upi [fd00:5:140::2]:6443\""
        );
        assert_eq!(iptables_program(p), "ip6tables");
        assert_eq!(
            iptables_spec(&o, p).join(" "),
            "-i sl-ds-upi -s fd00:5:140::/64 -d fd00:5:140::2/128 -p tcp -m tcp --dport 6443 -m comment --comment shiftlab ds-upi [fd00:5:140::2]:6443 -j ACCEPT"
        );
        assert_eq!(iptables_program(&o.ports[0]), "iptables");
        // A record: the IPv6 subnet is kept; a record of an older shiftlab has none.
        let back: Openings = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
        assert_eq!(back, o);
        assert!(!serde_json::to_string(&upi()).unwrap().contains("source6"));
        // Without its subnet an IPv6 opening is scoped to its own address: closed.
        let mut bare = o.clone();
        bare.source6 = None;
        assert_eq!(bare.source_of(p), "fd00:5:140::2/128");
    }

    /// Each family's rules go where that family is filtered: `inet` chains take
    /// both, `ip` only IPv4, `ip6` only IPv6; iptables IPv4, ip6tables IPv6.
    /// A drop in a family the lab does not use needs nothing.
    #[test]
    fn each_family_goes_to_the_places_that_filter_it() {
        let chain = |family: &str| NftChain {
            family: family.into(),
            table: "t".into(),
            chain: "input".into(),
        };
        let all = Backend::Netfilter {
            nft_chains: vec![chain("inet"), chain("ip"), chain("ip6")],
            iptables: true,
            ip6tables: true,
        };
        let rec = Record {
            backend: all.clone(),
            zone: None,
            openings: dual_stack(),
        };
        let lines = rec.lines();
        let of = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
        // 9 openings: 5 IPv4 (4 LB + HTTP), 4 IPv6.
        assert_eq!(of("nft insert rule inet t input"), 9);
        assert_eq!(of("nft insert rule ip t input"), 5);
        assert_eq!(of("nft insert rule ip6 t input"), 4);
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with("iptables -I INPUT"))
                .count(),
            5
        );
        assert_eq!(of("ip6tables -I INPUT"), 4);
        assert!(lines
            .iter()
            .filter(|l| l.starts_with("nft insert rule ip6 "))
            .all(|l| l.contains(" ip6 saddr fd00:5:140::/64 ")));
        // An IPv4-only lab: the IPv6 places are not its concern.
        assert_eq!(
            all.clone().for_families(true, false),
            Backend::Netfilter {
                nft_chains: vec![chain("inet"), chain("ip")],
                iptables: true,
                ip6tables: false,
            }
        );
        let v6_only = Backend::Netfilter {
            nft_chains: vec![chain("ip6")],
            iptables: false,
            ip6tables: true,
        };
        assert_eq!(v6_only.clone().for_families(true, false), Backend::Open);
        assert_eq!(v6_only.clone().for_families(true, true), v6_only);
        assert_eq!(
            Backend::Firewalld.for_families(true, false),
            Backend::Firewalld
        );
        // Records of an older shiftlab have no `ip6tables`: none was added.
        let old: Backend =
            serde_json::from_str(r#"{"kind":"netfilter","nft_chains":[],"iptables":true}"#)
                .unwrap();
        assert_eq!(
            old,
            Backend::Netfilter {
                nft_chains: vec![],
                iptables: true,
                ip6tables: false
            }
        );
    }

    /// ip6 input chains are found like inet ones; iptables-nft's `ip6 filter
    /// INPUT` is ip6tables', read through `ip6tables -S`.
    #[test]
    fn ip6_input_chains_and_ip6tables_are_found() {
        let json = r#"{"nftables": [{"metainfo": {}},
 {"chain": {"family": "ip6", "table": "guard", "name": "in", "handle": 1, "type": "filter", "hook": "input", "prio": 0, "policy": "drop"}},
 {"chain": {"family": "ip6", "table": "filter", "name": "INPUT", "handle": 2, "type": "filter", "hook": "input", "prio": 0, "policy": "drop"}}]}"#;
        assert_eq!(
            blocking_nft_chains(json),
            vec![NftChain {
                family: "ip6".into(),
                table: "guard".into(),
                chain: "in".into()
            }]
        );
        let p = Probe {
            ip6tables_rules: Some("-P INPUT DROP\n-P FORWARD ACCEPT\n".into()),
            ..Probe::default()
        };
        assert_eq!(
            decide(&p),
            Backend::Netfilter {
                nft_chains: vec![],
                iptables: false,
                ip6tables: true
            }
        );
        assert_eq!(
            Backend::Netfilter {
                nft_chains: vec![],
                iptables: true,
                ip6tables: true
            }
            .describe(),
            "iptables INPUT, ip6tables INPUT"
        );
    }

    #[test]
    fn nft_comments_are_read_with_handles() {
        let json = r#"{"nftables": [{"metainfo": {}}, {"chain": {"family": "inet", "table": "filter", "name": "input", "handle": 1}},
 {"rule": {"family": "inet", "table": "filter", "chain": "input", "handle": 7, "comment": "shiftlab lab1 192.168.126.2:6443", "expr": []}},
 {"rule": {"family": "inet", "table": "filter", "chain": "input", "handle": 4, "expr": []}}]}"#;
        assert_eq!(
            nft_rule_comments(json),
            vec![(7, "shiftlab lab1 192.168.126.2:6443".to_string())]
        );
    }
}
