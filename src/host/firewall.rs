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
//! Detection and rendering are pure functions of recorded command outputs; the
//! record of what was added (`host-firewall.json` in the cluster's directory) is
//! what destroy removes. `shiftlab serve` applies it (it runs the services the
//! rules are for) and re-applies it after a restart or a firewalld reload.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;

use anyhow::{bail, Context, Result};
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plan::Plan;

/// NTP's port (UDP).
pub const NTP_PORT: u16 = 123;

/// One port on one host address that the cluster's nodes must reach.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Opening {
    pub address: Ipv4Addr,
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

/// Everything a cluster needs opened, from its plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Openings {
    pub cluster: String,
    /// The cluster's bridge: where the traffic comes in.
    pub bridge: String,
    /// The cluster's subnet: where the traffic comes from.
    pub source: Ipv4Net,
    pub ports: Vec<Opening>,
}

impl Openings {
    /// The load balancer's frontends, the HTTP artifact server (`http`, where
    /// serve binds it), the lab BMC and the NFS export (`storage: nfs`), each once.
    pub fn from_plan(plan: &Plan, http: Option<SocketAddrV4>) -> Self {
        let mut seen = BTreeSet::new();
        let mut ports = Vec::new();
        let mut add = |address: Ipv4Addr, port: u16, service: &str| {
            if seen.insert((address, port)) {
                ports.push(Opening {
                    address,
                    port,
                    service: service.to_string(),
                    protocol: Protocol::Tcp,
                });
            }
        };
        for f in plan.load_balancer.iter().flat_map(|lb| &lb.frontends) {
            add(f.address, f.port, &f.name);
        }
        if let Some(h) = http {
            add(*h.ip(), h.port(), "http artifacts");
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
                address: plan.network.gateway,
                port: NTP_PORT,
                service: "ntp (host chrony)".into(),
                protocol: Protocol::Udp,
            });
        }
        Openings {
            cluster: plan.cluster.clone(),
            bridge: plan.network.bridge.clone(),
            source: plan.network.cidr,
            ports,
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
        format!(
            "{}{}:{}{udp}",
            comment_prefix(&self.cluster),
            o.address,
            o.port
        )
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

/// What filters guest→host traffic on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Backend {
    /// firewalld is running: it owns the ruleset.
    Firewalld,
    /// ufw is active.
    Ufw,
    /// Plain netfilter: input base chains that may drop, and/or an iptables INPUT
    /// that may drop.
    Netfilter {
        nft_chains: Vec<NftChain>,
        iptables: bool,
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
            } => {
                let mut parts: Vec<String> = nft_chains
                    .iter()
                    .map(|c| format!("nftables {} {} {}", c.family, c.table, c.chain))
                    .collect();
                if *iptables {
                    parts.push("iptables INPUT".into());
                }
                parts.join(", ")
            }
            Backend::Open => "no input filtering".into(),
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
    if nft_chains.is_empty() && !iptables {
        return Backend::Open;
    }
    Backend::Netfilter {
        nft_chains,
        iptables,
    }
}

/// Input base chains (families ip and inet) whose policy drops, or that drop or
/// reject in themselves or in a chain they jump to. iptables-nft's own chain
/// (`ip filter INPUT`) is left to iptables, which manages it.
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
        if c["hook"] != "input" || !(fam == "ip" || fam == "inet") {
            continue;
        }
        if fam == "ip" && table == "filter" && name == "INPUT" {
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
/// or in a chain INPUT jumps to (`iptables -S` output).
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
        "rule family=\"ipv4\" source address=\"{}\" destination address=\"{}\" port port=\"{}\" protocol=\"{}\" accept",
        o.source,
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
            &o.source.to_string(),
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

/// The nftables rule (after `insert rule <family> <table> <chain>`).
pub fn nft_rule(o: &Openings, p: &Opening) -> String {
    format!(
        "iifname \"{}\" ip saddr {} ip daddr {} {} dport {} accept comment \"{}\"",
        o.bridge,
        o.source,
        p.address,
        p.protocol.as_str(),
        p.port,
        o.comment(p)
    )
}

/// The iptables rule spec (after `-I INPUT`, `-C INPUT` or `-D INPUT`).
pub fn iptables_spec(o: &Openings, p: &Opening) -> Vec<String> {
    [
        "-i",
        &o.bridge,
        "-s",
        &o.source.to_string(),
        "-d",
        &format!("{}/32", p.address),
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
                } => {
                    for c in nft_chains {
                        out.push(format!(
                            "nft insert rule {} {} {} '{}'   # {}",
                            c.family,
                            c.table,
                            c.chain,
                            nft_rule(o, p),
                            p.service
                        ));
                    }
                    if *iptables {
                        out.push(format!(
                            "iptables -I INPUT {}   # {}",
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
        Ok(Probe {
            firewalld_state: text(self.run(argv(&["firewall-cmd", "--state"]))?),
            ufw_status: text(self.run(argv(&["ufw", "status"]))?.filter(Output::ok)),
            nft_ruleset: text(nft),
            iptables_rules: text(ipt),
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
        let backend = decide(&self.probe()?);
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
            } => {
                for c in nft_chains {
                    let have = self.nft_rules(c)?;
                    for p in &o.ports {
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
                if *iptables {
                    for p in &o.ports {
                        let spec = iptables_spec(o, p);
                        if !self.iptables(&["-C", "INPUT"], &spec)?.ok() {
                            let out = self.iptables(&["-I", "INPUT"], &spec)?;
                            if !out.ok() {
                                bail!("iptables -I INPUT: {}", out.stderr.trim());
                            }
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
                            && l.contains(&o.source.to_string())
                    })
                }),
                Backend::Netfilter {
                    nft_chains,
                    iptables,
                } => {
                    let mut ok = true;
                    for c in nft_chains {
                        ok &= self
                            .nft_rules(c)?
                            .iter()
                            .any(|(_, comment)| *comment == o.comment(p));
                    }
                    if *iptables {
                        ok &= self.iptables(&["-C", "INPUT"], &iptables_spec(o, p))?.ok();
                    }
                    ok
                }
            };
            out.push((p.clone(), ok));
        }
        Ok((record.backend, out))
    }

    fn iptables(&self, verb: &[&str], spec: &[String]) -> Result<Output> {
        let mut a = argv(&["iptables", "-w"]);
        a.extend(verb.iter().map(|s| s.to_string()));
        a.extend(spec.iter().cloned());
        self.run(a)?.context("iptables: not installed")
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
                if *iptables {
                    for p in &o.ports {
                        let spec = iptables_spec(o, p);
                        while self.iptables(&["-C", "INPUT"], &spec)?.ok() {
                            let out = self.iptables(&["-D", "INPUT"], &spec)?;
                            if !out.ok() {
                                bail!("iptables -D INPUT: {}", out.stderr.trim());
                            }
                        }
                    }
                }
            }
        }
        Ok(())
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

    fn upi() -> Openings {
        Openings::from_plan(&plan("upi"), Some("192.168.126.1:8080".parse().unwrap()))
    }

    #[test]
    fn openings_are_the_lb_frontends_http_and_bmc_once_each() {
        let o = upi();
        assert_eq!(o.bridge, "sl-lab1");
        assert_eq!(o.source.to_string(), "192.168.126.0/24");
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
            p.network.cidr,
        );
        let o = Openings::from_plan(&p, None);
        assert_eq!(o.source.to_string(), "192.168.126.0/24");
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
            p.network.cidr,
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
                iptables: true
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
        // Accept-only input chains, ip6 tables and garbage: nothing.
        let open = r#"{"nftables": [
 {"chain": {"family": "inet", "table": "t", "name": "in", "type": "filter", "hook": "input", "prio": 0, "policy": "accept"}},
 {"chain": {"family": "ip6", "table": "t", "name": "in", "type": "filter", "hook": "input", "prio": 0, "policy": "drop"}}
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
