//! Reading the cluster file's YAML into raw, still-unchecked values.
//!
//! Every field is taken out of the YAML mapping by name; whatever is left at the end is
//! an unknown key. Type errors are collected, never returned early, so the user sees
//! every problem of the file in one run.
//!
//! The parser reads YAML 1.2 (core schema). kcli reads its parameter files with
//! PyYAML's `yaml.safe_load` (kcli kvirt/common/__init__.py, `get_parameters`), which
//! is YAML 1.1; where the two disagree on a value a kcli file can hold, the field
//! readers below decide, each saying which rule it follows:
//!
//! | written | YAML 1.2 | PyYAML (kcli) | shiftlab |
//! |---|---|---|---|
//! | `yes` `no` `on` `off` | string | boolean | boolean in a boolean field, text elsewhere |
//! | `1_000` | string | 1000 | 1000 in a number field |
//! | `010` | string | 8 (octal) | error in a number field: ambiguous |
//! | `tag: 4.20` | 4.2 | 4.2, made `4.20` by kcli | `4.20` (`version` too) |
//! | `<<: *anchor` | a key `<<` | merge | merge |
//! | `52:54:00` | string | 190440 (base 60) | string |
//! | a key twice | error | last wins | error |

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use yaml_serde::{Mapping, Value};

use super::diag::{suggest, Diagnostics};
use super::kcli;

/// A value together with the field name the user wrote it under, so that later
/// checks can name `master_memory` when that is what the file says.
#[derive(Debug, Clone)]
pub struct Src<T> {
    pub v: T,
    pub field: String,
}

/// Sizes for one role (or for every role, from the top-level kcli-style keys).
#[derive(Debug, Default, Clone)]
pub struct RawSize {
    pub numcpus: Option<Src<u64>>,
    pub memory: Option<Src<u64>>,
    pub disk_size: Option<Src<u64>>,
    pub extra_disks: Option<Src<Vec<u64>>>,
}

#[derive(Debug, Default, Clone)]
pub struct RawNetwork {
    pub name: Option<Src<String>>,
    pub mode: Option<Src<String>>,
    pub bridge: Option<Src<String>>,
    pub cidr: Option<Src<Ipv4Net>>,
    pub api_ip: Option<Src<Ipv4Addr>>,
    pub ingress_ip: Option<Src<Ipv4Addr>>,
    pub dhcp_start: Option<Src<Ipv4Addr>>,
    pub dhcp_end: Option<Src<Ipv4Addr>>,
    pub mac_prefix: Option<Src<String>>,
    pub external_bridge: Option<Src<String>>,
    pub external_bridge_name: Option<Src<String>>,
    /// The IPv6 halves of `cidr`, `api_ip` and `ingress_ip` when written as a
    /// list of one address per family (dual-stack, docs/ipv6.md).
    pub cidr6: Option<Src<Ipv6Net>>,
    pub api_ip6: Option<Src<Ipv6Addr>>,
    pub ingress_ip6: Option<Src<Ipv6Addr>>,
    /// `cidr` names IPv6 first (or alone): IPv6 is the primary family.
    pub ipv6_first: bool,
}

#[derive(Debug, Default, Clone)]
pub struct RawLibvirt {
    pub uri: Option<Src<String>>,
    pub pool: Option<Src<String>>,
    pub pool_path: Option<Src<String>>,
    pub domain_type: Option<Src<String>>,
    pub firmware: Option<Src<String>>,
    pub cpu_model: Option<Src<String>>,
    pub graphics: Option<Src<String>>,
}

#[derive(Debug, Default, Clone)]
pub struct RawKubevirt {
    pub kubeconfig: Option<Src<String>>,
    pub context: Option<Src<String>>,
    pub namespace: Option<Src<String>>,
    pub storage_class: Option<Src<String>>,
    pub network: Option<Src<String>>,
    pub bridge: Option<Src<String>>,
    pub vlan: Option<Src<u64>>,
    pub service_type: Option<Src<String>>,
    pub image: Option<Src<String>>,
    pub http_url: Option<Src<String>>,
    pub haproxy_image: Option<Src<String>>,
    pub cluster_dns_domain: Option<Src<String>>,
}

#[derive(Debug, Default, Clone)]
pub struct RawBmc {
    pub address: Option<Src<IpAddr>>,
    pub port: Option<Src<u64>>,
    pub username: Option<Src<String>>,
    pub password: Option<Src<String>>,
    pub verify_certificate: Option<Src<bool>>,
}

#[derive(Debug, Default, Clone)]
pub struct RawProxy {
    pub http_proxy: Option<Src<String>>,
    pub https_proxy: Option<Src<String>>,
    pub no_proxy: Option<Src<String>>,
}

#[derive(Debug, Default, Clone)]
pub struct RawCapabilities {
    pub baseline_capability_set: Option<Src<String>>,
    pub additional_enabled_capabilities: Vec<String>,
}

/// Everything the file said, typed but not yet checked for meaning.
#[derive(Debug, Default, Clone)]
pub struct RawSpec {
    pub cluster: Option<Src<String>>,
    pub domain: Option<Src<String>>,
    pub distribution: Option<Src<String>>,
    pub version: Option<Src<String>>,
    pub tag: Option<Src<String>>,
    pub pull_secret: Option<Src<String>>,
    pub users: Vec<RawUser>,
    pub ssh_keys: Option<Src<Vec<String>>>,
    pub method: Option<Src<String>>,
    pub ctlplanes: Option<Src<u64>>,
    pub workers: Option<Src<u64>>,
    pub all: RawSize,
    pub bootstrap: RawSize,
    pub ctlplane: RawSize,
    pub worker: RawSize,
    pub network: RawNetwork,
    pub libvirt: RawLibvirt,
    pub image: Option<Src<String>>,
    pub rehearsal: Option<Src<bool>>,
    pub installation_disk: Option<Src<String>>,
    pub network_type: Option<Src<String>>,
    pub cluster_network: Option<Src<Ipv4Net>>,
    pub cluster_network_host_prefix: Option<Src<u64>>,
    pub service_network: Option<Src<Ipv4Net>>,
    /// The IPv6 entries of `cluster_network` and `service_network` (dual-stack).
    pub cluster_network6: Option<Src<Ipv6Net>>,
    pub service_network6: Option<Src<Ipv6Net>>,
    pub fips: Option<Src<bool>>,
    pub ntp_servers: Option<Src<Vec<String>>>,
    pub host_ntp: Option<Src<bool>>,
    pub proxy: Option<RawProxy>,
    pub image_digest_sources: Vec<(String, Vec<String>)>,
    pub additional_trust_bundle: Option<Src<String>>,
    /// kcli's `ca`: the trust bundle's PEM text, in the file itself.
    pub trust_bundle_pem: Option<Src<String>>,
    pub capabilities: Option<RawCapabilities>,
    pub manifests: Option<Src<String>>,
    pub openshift_install: Option<Src<String>>,
    pub mirror: Option<Src<String>>,
    pub release_key: Option<Src<String>>,
    pub bmc: RawBmc,
    pub backend: Option<Src<String>>,
    pub kubevirt: Option<RawKubevirt>,
    pub storage: Option<Src<String>>,
    pub monitoring: RawMonitoring,
}

#[derive(Debug, Default, Clone)]
pub struct RawMonitoring {
    pub retention: Option<Src<String>>,
}

/// One entry of `users:`, with the field it was written under (`users[0]`).
#[derive(Debug, Default, Clone)]
pub struct RawUser {
    pub field: String,
    pub name: Option<Src<String>>,
    pub password_file: Option<Src<String>>,
    pub admin: Option<Src<bool>>,
}

/// How a YAML value is shown in a message: short, quoted when it is a string.
pub fn show(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => show(&t.value),
    }
}

/// A mapping being taken apart key by key.
struct Obj {
    prefix: String,
    map: Mapping,
}

impl Obj {
    fn new(prefix: &str, map: Mapping) -> Self {
        Obj {
            prefix: prefix.to_string(),
            map,
        }
    }

    fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{}", self.prefix, key)
        }
    }

    fn take(&mut self, key: &str) -> Option<(String, Value)> {
        let v = self.map.remove(key)?;
        if v.is_null() {
            // `key:` with nothing after it means "default", as in most YAML tools.
            return None;
        }
        Some((self.path(key), v))
    }

    /// Report whatever was not taken as unknown, with a suggestion where one is close.
    fn finish(mut self, known: &[&str], d: &mut Diagnostics) {
        let map = std::mem::take(&mut self.map);
        for (k, _) in map {
            let key = match &k {
                Value::String(s) => s.clone(),
                other => show(other),
            };
            let field = self.prefix_join(&key);
            let mut msg = "unknown key".to_string();
            if let Some(s) = suggest(&key, known.iter().copied()) {
                msg.push_str(&format!("; did you mean `{}`?", self.prefix_join(s)));
            } else if !self.prefix.is_empty() {
                msg.push_str(&format!("; valid keys here: {}", known.join(", ")));
            }
            d.error(field, msg);
        }
    }

    fn prefix_join(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{}", self.prefix, key)
        }
    }
}

fn string(field: &str, v: Value, d: &mut Diagnostics) -> Option<Src<String>> {
    match v {
        Value::String(s) => Some(Src {
            v: s,
            field: field.into(),
        }),
        // Unquoted numbers are common for versions (`version: 4.18`) and tags.
        Value::Number(n) => Some(Src {
            v: n.to_string(),
            field: field.into(),
        }),
        other => {
            d.error(field, format!("{} is not a string", show(&other)));
            None
        }
    }
}

/// `version` and `tag`: text, but a number as kcli reads it. PyYAML reads `4.20` as
/// the float 4.2; kcli turns a float with one decimal digit other than 0 back into
/// the minor it meant by appending a 0 (kcli kvirt/cluster/openshift/__init__.py,
/// `create`: `if isinstance(tag, float) and ... len(str(tag).split('.')[1]) == 1`).
/// No supported release is 4.1–4.9, so the same rule holds for `version`.
fn release(field: &str, v: Value, d: &mut Diagnostics) -> Option<Src<String>> {
    let from_float = matches!(&v, Value::Number(n) if n.is_f64());
    let mut s = string(field, v, d)?;
    if from_float {
        if let Some((_, frac)) = s.v.split_once('.') {
            if frac.len() == 1 && frac != "0" {
                s.v.push('0');
            }
        }
    }
    Some(s)
}

fn uint(field: &str, v: Value, d: &mut Diagnostics) -> Option<Src<u64>> {
    match &v {
        Value::Number(n) if n.as_u64().is_some() => Some(Src {
            v: n.as_u64().unwrap_or_default(),
            field: field.into(),
        }),
        // YAML 1.2 leaves these plain scalars as text; PyYAML's int resolver
        // (pyyaml lib/yaml/resolver.py) reads `[-+]?0[0-7_]+` as octal and
        // `[1-9][0-9_]*` as decimal with `_` separators.
        Value::String(s) if is_leading_zero_number(s.trim()) => {
            let t = s.trim();
            let kcli = u64::from_str_radix(&t.replace('_', ""), 8)
                .map_or("text".to_string(), |n| format!("the octal number {n}"));
            let plain = t.trim_start_matches(['0', '_']).replace('_', "");
            let plain = if plain.is_empty() { "0" } else { &plain };
            d.error(
                field,
                format!(
                    "{t:?} has a leading zero: kcli (YAML 1.1) reads it as {kcli}, YAML 1.2 as {plain}; write the number without the leading zero"
                ),
            );
            None
        }
        Value::String(s) if decimal(s.trim()).is_some() => Some(Src {
            v: decimal(s.trim()).unwrap_or_default(),
            field: field.into(),
        }),
        other => {
            d.error(
                field,
                format!("{} is not a whole number (0 or more)", show(other)),
            );
            None
        }
    }
}

/// Digits with a redundant leading zero (`010`, `00`): read differently by YAML 1.1
/// and 1.2, so never guessed.
fn is_leading_zero_number(s: &str) -> bool {
    let s = s.strip_prefix('+').unwrap_or(s);
    s.len() > 1 && s.starts_with('0') && s.bytes().all(|b| b.is_ascii_digit() || b == b'_')
}

/// A decimal whole number: digits, with PyYAML's `_` separators after the first.
fn decimal(s: &str) -> Option<u64> {
    let s = s.strip_prefix('+').unwrap_or(s);
    let first = s.bytes().next()?;
    if !first.is_ascii_digit() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        return None;
    }
    s.replace('_', "").parse().ok()
}

/// PyYAML's YAML 1.1 booleans beyond YAML 1.2's true/false (pyyaml
/// lib/yaml/resolver.py, the `tag:yaml.org,2002:bool` resolver); `y` and `n` are
/// not among them.
fn yaml11_bool(s: &str) -> Option<bool> {
    match s {
        "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

fn boolean(field: &str, v: Value, d: &mut Diagnostics) -> Option<Src<bool>> {
    match v {
        Value::Bool(b) => Some(Src {
            v: b,
            field: field.into(),
        }),
        Value::String(s) if yaml11_bool(&s).is_some() => Some(Src {
            v: yaml11_bool(&s).unwrap_or_default(),
            field: field.into(),
        }),
        other => {
            d.error(field, format!("{} is not true or false", show(&other)));
            None
        }
    }
}

/// An address of the type `T` parses, else an error naming `what` it is not
/// and an `example`.
fn address<T: std::str::FromStr>(
    field: &str,
    v: Value,
    d: &mut Diagnostics,
    what: &str,
    example: &str,
) -> Option<Src<T>> {
    let s = string(field, v, d)?;
    match s.v.trim().parse::<T>() {
        Ok(ip) => Some(Src {
            v: ip,
            field: s.field,
        }),
        Err(_) => {
            d.error(
                field,
                format!("{:?} is not {what}; expected e.g. {example}", s.v),
            );
            None
        }
    }
}

/// An address of either family.
fn ip(field: &str, v: Value, d: &mut Diagnostics) -> Option<Src<IpAddr>> {
    address(
        field,
        v,
        d,
        "an IP address",
        "192.168.126.1 or fd00:1:2:3::1",
    )
}

fn ipv4(field: &str, v: Value, d: &mut Diagnostics) -> Option<Src<Ipv4Addr>> {
    address(field, v, d, "an IPv4 address", "192.168.126.2")
}

fn cidr(field: &str, v: Value, d: &mut Diagnostics) -> Option<Src<Ipv4Net>> {
    let s = string(field, v, d)?;
    match s.v.trim().parse::<Ipv4Net>() {
        Ok(net) if net.addr() != net.network() => {
            d.error(
                field,
                format!("{:?} has host bits set; did you mean {}?", s.v, net.trunc()),
            );
            None
        }
        Ok(net) => Some(Src {
            v: net,
            field: s.field,
        }),
        Err(_) => {
            d.error(
                field,
                format!(
                    "{:?} is not an IPv4 CIDR; expected e.g. 192.168.126.0/24",
                    s.v
                ),
            );
            None
        }
    }
}

/// One text per address family: a single value, or a list of two (dual-stack),
/// each with its field name (`network.cidr[1]`).
fn family_items(field: &str, v: Value, d: &mut Diagnostics) -> Vec<Src<String>> {
    match v {
        Value::Sequence(items) if items.len() == 1 || items.len() == 2 => items
            .into_iter()
            .enumerate()
            .filter_map(|(i, item)| string(&format!("{field}[{i}]"), item, d))
            .collect(),
        Value::Sequence(items) => {
            d.error(
                field,
                format!(
                    "a list of {} entries; give one value, or two for dual-stack (one IPv4, one IPv6)",
                    items.len()
                ),
            );
            Vec::new()
        }
        other => string(field, other, d).into_iter().collect(),
    }
}

/// Two values of one family in a dual-stack pair: reported on the second.
fn same_family_twice(s: &Src<String>, d: &mut Diagnostics) {
    d.error(
        &s.field,
        format!(
            "{:?} is a second address of the same family; a dual-stack pair has one IPv4 and one IPv6 value",
            s.v
        ),
    );
}

/// A CIDR of either family, or a pair of one IPv4 and one IPv6 CIDR; and
/// whether IPv6 came first. An address with host bits set is refused as in
/// [`cidr`].
#[allow(clippy::type_complexity)]
fn cidrs_per_family(
    field: &str,
    v: Value,
    d: &mut Diagnostics,
) -> (Option<Src<Ipv4Net>>, Option<Src<Ipv6Net>>, bool) {
    let (mut v4, mut v6, mut v6_first) = (None, None, false);
    for s in family_items(field, v, d) {
        let net = match s.v.trim().parse::<IpNet>() {
            Ok(net) if net.addr() != net.network() => {
                d.error(
                    &s.field,
                    format!("{:?} has host bits set; did you mean {}?", s.v, net.trunc()),
                );
                continue;
            }
            Ok(net) => net,
            Err(_) => {
                d.error(
                    &s.field,
                    format!(
                        "{:?} is not an IPv4 or IPv6 CIDR; expected e.g. 192.168.126.0/24 or fd00:1:2:3::/64",
                        s.v
                    ),
                );
                continue;
            }
        };
        match net {
            IpNet::V4(n) if v4.is_none() => {
                v4 = Some(Src {
                    v: n,
                    field: s.field,
                })
            }
            IpNet::V6(n) if v6.is_none() => {
                v6_first = v4.is_none();
                v6 = Some(Src {
                    v: n,
                    field: s.field,
                });
            }
            _ => same_family_twice(&s, d),
        }
    }
    (v4, v6, v6_first)
}

/// An address of either family, or a pair of one IPv4 and one IPv6 address.
fn addrs_per_family(
    field: &str,
    v: Value,
    d: &mut Diagnostics,
) -> (Option<Src<Ipv4Addr>>, Option<Src<Ipv6Addr>>) {
    let (mut v4, mut v6) = (None, None);
    for s in family_items(field, v, d) {
        match s.v.trim().parse::<IpAddr>() {
            Ok(IpAddr::V4(ip)) if v4.is_none() => {
                v4 = Some(Src {
                    v: ip,
                    field: s.field,
                })
            }
            Ok(IpAddr::V6(ip)) if v6.is_none() => {
                v6 = Some(Src {
                    v: ip,
                    field: s.field,
                })
            }
            Ok(_) => same_family_twice(&s, d),
            Err(_) => d.error(
                &s.field,
                format!(
                    "{:?} is not an IP address; expected e.g. 192.168.126.2 or fd00:1:2:3::2",
                    s.v
                ),
            ),
        }
    }
    (v4, v6)
}

fn list_of_strings(field: &str, v: Value, d: &mut Diagnostics) -> Option<Src<Vec<String>>> {
    match v {
        Value::Sequence(items) => {
            let mut out = Vec::new();
            for (i, item) in items.into_iter().enumerate() {
                if let Some(s) = string(&format!("{field}[{i}]"), item, d) {
                    out.push(s.v);
                }
            }
            Some(Src {
                v: out,
                field: field.into(),
            })
        }
        // A single string is accepted where a list is expected (kcli's `pub_key`).
        Value::String(s) => Some(Src {
            v: vec![s],
            field: field.into(),
        }),
        other => {
            d.error(field, format!("{} is not a list of strings", show(&other)));
            None
        }
    }
}

fn list_of_uints(field: &str, v: Value, d: &mut Diagnostics) -> Option<Src<Vec<u64>>> {
    match v {
        Value::Sequence(items) => {
            let mut out = Vec::new();
            for (i, item) in items.into_iter().enumerate() {
                // kcli also writes extra disks as `{size: 10}`.
                let item = match item {
                    Value::Mapping(mut m) => m.remove("size").unwrap_or(Value::Null),
                    other => other,
                };
                if let Some(n) = uint(&format!("{field}[{i}]"), item, d) {
                    out.push(n.v);
                }
            }
            Some(Src {
                v: out,
                field: field.into(),
            })
        }
        other => {
            d.error(
                field,
                format!(
                    "{} is not a list of sizes in GB, e.g. [50, 100]",
                    show(&other)
                ),
            );
            None
        }
    }
}

fn mapping(field: &str, v: Value, d: &mut Diagnostics) -> Option<Mapping> {
    match v {
        Value::Mapping(m) => Some(m),
        other => {
            d.error(field, format!("{} is not a mapping", show(&other)));
            None
        }
    }
}

/// Set `slot` once; a second source for the same setting is an error naming both.
fn set_once<T>(slot: &mut Option<Src<T>>, value: Option<Src<T>>, d: &mut Diagnostics) {
    let Some(value) = value else { return };
    if let Some(prev) = slot {
        d.error(
            value.field.clone(),
            format!(
                "sets the same thing as `{}`; keep only one of them",
                prev.field
            ),
        );
        return;
    }
    *slot = Some(value);
}

/// The values of `field`'s kcli aliases (kcli.rs), in table order.
fn kcli_aliases(top: &mut Obj, field: &str) -> Vec<(String, Value)> {
    kcli::aliases(field).filter_map(|k| top.take(k)).collect()
}

/// A kcli boolean that chooses a value of `field` (`okd: true` → `distribution:
/// okd`), as that value under the kcli key's name.
fn kcli_flags(top: &mut Obj, field: &str, d: &mut Diagnostics) -> Vec<Src<String>> {
    let mut out = Vec::new();
    for (key, yes, no) in kcli::flags(field) {
        let Some((f, v)) = top.take(key) else {
            continue;
        };
        if let Some(b) = boolean(&f, v, d) {
            if let Some(value) = if b.v { Some(yes) } else { no } {
                out.push(Src {
                    v: value.to_string(),
                    field: b.field,
                });
            }
        }
    }
    out
}

/// kcli's `apps`: its `nfs` app (a host export and nfs-subdir-external-provisioner
/// as the default StorageClass, kcli kvirt/cluster/openshift/apps/nfs/install.sh)
/// is `storage: nfs`; shiftlab installs no other app, so those are a warning.
fn kcli_apps(top: &mut Obj, storage: &mut Option<Src<String>>, d: &mut Diagnostics) {
    if let Some((f, v)) = top.take("nfs_default_storageclass") {
        if boolean(&f, v, d).is_some_and(|b| !b.v) {
            d.error(
                f,
                "false is not supported by shiftlab because with `storage: nfs` its \
                 StorageClass is the cluster's default",
            );
        }
    }
    let Some((f, v)) = top.take("apps") else {
        return;
    };
    let Value::Sequence(apps) = v else {
        d.error(&f, format!("{} is not a list of kcli apps", show(&v)));
        return;
    };
    let mut others = Vec::new();
    for app in apps {
        let name = match &app {
            Value::String(s) => Some(s.as_str()),
            Value::Mapping(m) => m.get("name").and_then(Value::as_str),
            _ => None,
        };
        match (name, &app) {
            (Some("nfs"), Value::Mapping(m)) if m.len() > 1 => d.error(
                &f,
                "`{name: nfs, ...}` with settings is not supported by shiftlab: write `nfs` \
                 and its settings (`nfs_*`) at the top, where shiftlab checks them",
            ),
            (Some("nfs"), _) => set_once(
                storage,
                Some(Src {
                    v: "nfs".to_string(),
                    field: f.clone(),
                }),
                d,
            ),
            _ => others.push(name.map_or_else(|| show(&app), str::to_string)),
        }
    }
    if !others.is_empty() {
        d.warn(
            &f,
            format!(
                "kcli parameter ignored: kcli day-2 apps are not installed by shiftlab ({})",
                others.join(", ")
            ),
        );
    }
}

/// One key of a section of the cluster file: its name, and how it is read out of
/// the section's mapping into the section's raw values. Each section has one
/// table of these; the parser walks it and the unknown-key check lists its names,
/// so a key cannot be read without being known, or known without being read.
struct Key<T: 'static> {
    name: &'static str,
    read: fn(&mut Obj, &'static str, &mut T, &mut Diagnostics),
}

/// A key whose value sets one field, read by `$reader` (`string`, `uint`, …).
macro_rules! field {
    ($name:ident: $reader:ident) => {
        Key {
            name: stringify!($name),
            read: |obj, key, into, d| {
                if let Some((f, v)) = obj.take(key) {
                    into.$name = $reader(&f, v, d);
                }
            },
        }
    };
}

/// Like [`field!`], for a field that another spelling (a kcli alias) may also set.
macro_rules! field_once {
    ($name:ident: $reader:ident) => {
        Key {
            name: stringify!($name),
            read: |obj, key, into, d| {
                if let Some((f, v)) = obj.take(key) {
                    set_once(&mut into.$name, $reader(&f, v, d), d);
                }
            },
        }
    };
}

/// Like [`field_once!`], read from the key and then from its kcli aliases
/// (kcli.rs): setting both is an error naming the second.
macro_rules! field_or_alias {
    ($name:ident: $reader:ident) => {
        Key {
            name: stringify!($name),
            read: |obj, key, into, d| {
                let own = obj.take(key).into_iter();
                for (f, v) in own.chain(kcli_aliases(obj, key)) {
                    set_once(&mut into.$name, $reader(&f, v, d), d);
                }
            },
        }
    };
}

/// A string field that a kcli boolean may also choose (`okd: true` →
/// `distribution: okd`, kcli.rs).
macro_rules! field_or_flag {
    ($name:ident) => {
        Key {
            name: stringify!($name),
            read: |obj, key, into, d| {
                if let Some((f, v)) = obj.take(key) {
                    into.$name = string(&f, v, d);
                }
                for chosen in kcli_flags(obj, key, d) {
                    set_once(&mut into.$name, Some(chosen), d);
                }
            },
        }
    };
}

/// Read a section's keys in table order into `into`, then report whatever the
/// mapping holds besides as unknown.
fn section<T>(mut obj: Obj, table: &[Key<T>], into: &mut T, d: &mut Diagnostics) {
    for k in table {
        (k.read)(&mut obj, k.name, into, d);
    }
    obj.finish(&names(table), d);
}

fn names<T>(table: &[Key<T>]) -> Vec<&'static str> {
    table.iter().map(|k| k.name).collect()
}

/// A section given as a mapping under `key` of `obj`, read through its table.
fn nested<T: Default>(
    obj: &mut Obj,
    key: &str,
    table: &[Key<T>],
    d: &mut Diagnostics,
) -> Option<T> {
    let (f, v) = obj.take(key)?;
    let m = mapping(&f, v, d)?;
    let mut into = T::default();
    section(Obj::new(&f, m), table, &mut into, d);
    Some(into)
}

/// Sizes, of one role (`ctlplane:`) or of every role (the same keys at the top).
const SIZE: &[Key<RawSize>] = &[
    field_once!(numcpus: uint),
    field_once!(memory: uint),
    field_once!(disk_size: uint),
    field_once!(extra_disks: list_of_uints),
];

const NETWORK: &[Key<RawNetwork>] = &[
    field!(name: string),
    field!(mode: string),
    field!(bridge: string),
    Key {
        name: "cidr",
        read: |obj, key, into, d| {
            if let Some((f, v)) = obj.take(key) {
                let (v4, v6, v6_first) = cidrs_per_family(&f, v, d);
                (into.cidr, into.cidr6, into.ipv6_first) = (v4, v6, v6_first);
            }
        },
    },
    Key {
        name: "api_ip",
        read: |obj, key, into, d| {
            if let Some((f, v)) = obj.take(key) {
                (into.api_ip, into.api_ip6) = addrs_per_family(&f, v, d);
            }
        },
    },
    Key {
        name: "ingress_ip",
        read: |obj, key, into, d| {
            if let Some((f, v)) = obj.take(key) {
                (into.ingress_ip, into.ingress_ip6) = addrs_per_family(&f, v, d);
            }
        },
    },
    field!(dhcp_start: ipv4),
    field!(dhcp_end: ipv4),
    field!(mac_prefix: string),
    field!(external_bridge: string),
    field!(external_bridge_name: string),
];

const LIBVIRT: &[Key<RawLibvirt>] = &[
    field!(uri: string),
    field!(pool: string),
    field!(pool_path: string),
    field!(domain_type: string),
    field!(firmware: string),
    field!(cpu_model: string),
    field!(graphics: string),
];

const BMC: &[Key<RawBmc>] = &[
    field!(address: ip),
    field!(port: uint),
    field!(username: string),
    field!(password: string),
    field!(verify_certificate: boolean),
];

const MONITORING: &[Key<RawMonitoring>] = &[field!(retention: string)];

const KUBEVIRT: &[Key<RawKubevirt>] = &[
    field!(kubeconfig: string),
    field!(context: string),
    field!(namespace: string),
    field!(storage_class: string),
    field!(network: string),
    field!(bridge: string),
    field!(vlan: uint),
    field!(service_type: string),
    field!(image: string),
    field!(http_url: string),
    field!(haproxy_image: string),
    field!(cluster_dns_domain: string),
];

const PROXY: &[Key<RawProxy>] = &[
    field!(http_proxy: string),
    field!(https_proxy: string),
    field!(no_proxy: string),
];

const CAPABILITIES: &[Key<RawCapabilities>] = &[
    field!(baseline_capability_set: string),
    Key {
        name: "additional_enabled_capabilities",
        read: |obj, key, into, d| {
            if let Some(l) = obj.take(key).and_then(|(f, v)| list_of_strings(&f, v, d)) {
                into.additional_enabled_capabilities = l.v;
            }
        },
    },
];

/// One entry of `image_digest_sources`.
#[derive(Default)]
struct RawDigestSource {
    source: Option<Src<String>>,
    mirrors: Option<Src<Vec<String>>>,
}

const DIGEST_SOURCE: &[Key<RawDigestSource>] =
    &[field!(source: string), field!(mirrors: list_of_strings)];

/// The top level of shiftlab's own format, in the order the keys are read (which
/// is the order their errors are reported in). An entry also reads the kcli
/// spellings of its field (kcli.rs), right after the field itself, so that
/// setting both is reported against the second.
const TOP: &[Key<RawSpec>] = &[
    field!(cluster: string),
    field!(domain: string),
    field_or_flag!(distribution),
    Key {
        name: "version",
        read: |obj, key, into, d| {
            if let Some((f, v)) = obj.take(key) {
                into.version = release(&f, v, d);
            }
            // kcli's `tag`: the release on the channel `version` names.
            if let Some((f, v)) = obj.take("tag") {
                into.tag = release(&f, v, d);
            }
        },
    },
    field!(pull_secret: string),
    Key {
        name: "users",
        read: users,
    },
    Key {
        name: "ssh_keys",
        read: |obj, key, into, d| {
            let own = obj.take(key).into_iter();
            for (f, v) in own.chain(kcli_aliases(obj, key)) {
                set_once(&mut into.ssh_keys, list_of_strings(&f, v, d), d);
            }
            // kcli's `keys` adds to whichever list is there; empty (kcli's
            // default), it adds nothing and leaves the keys found in ~/.ssh.
            for add in kcli::additions(key) {
                let Some((f, v)) = obj.take(add) else {
                    continue;
                };
                if let Some(list) = list_of_strings(&f, v, d).filter(|l| !l.v.is_empty()) {
                    match &mut into.ssh_keys {
                        Some(prev) => prev.v.extend(list.v),
                        None => into.ssh_keys = Some(list),
                    }
                }
            }
        },
    },
    field_or_flag!(method),
    field_or_alias!(ctlplanes: uint),
    field!(workers: uint),
    // Sizes: the top-level keys apply to every role; role mappings and kcli's
    // `<role>_<key>` names override them.
    Key {
        name: "numcpus",
        read: top_size,
    },
    Key {
        name: "memory",
        read: top_size,
    },
    Key {
        name: "disk_size",
        read: top_size,
    },
    Key {
        name: "extra_disks",
        read: top_size,
    },
    Key {
        name: "bootstrap",
        read: role_size,
    },
    Key {
        name: "ctlplane",
        read: role_size,
    },
    Key {
        name: "worker",
        read: role_size,
    },
    Key {
        name: "network",
        read: |obj, key, into, d| {
            if let Some((f, v)) = obj.take(key) {
                match v {
                    // kcli: the name of the libvirt network.
                    Value::String(s) => into.network.name = Some(Src { v: s, field: f }),
                    other => {
                        if let Some(m) = mapping(&f, other, d) {
                            section(Obj::new(&f, m), NETWORK, &mut into.network, d);
                        }
                    }
                }
            }
            for (field, slot) in [
                ("network.api_ip", &mut into.network.api_ip),
                ("network.ingress_ip", &mut into.network.ingress_ip),
            ] {
                for (f, v) in kcli_aliases(obj, field) {
                    set_once(slot, ipv4(&f, v, d), d);
                }
            }
            for (f, v) in kcli_aliases(obj, "network.cidr") {
                set_once(&mut into.network.cidr, cidr(&f, v, d), d);
            }
        },
    },
    Key {
        name: "libvirt",
        read: |obj, key, into, d| {
            if let Some((f, v)) = obj.take(key) {
                if let Some(m) = mapping(&f, v, d) {
                    section(Obj::new(&f, m), LIBVIRT, &mut into.libvirt, d);
                }
            }
            for (f, v) in kcli_aliases(obj, "libvirt.pool") {
                set_once(&mut into.libvirt.pool, string(&f, v, d), d);
            }
            for fw in kcli_flags(obj, "libvirt.firmware", d) {
                set_once(&mut into.libvirt.firmware, Some(fw), d);
            }
        },
    },
    field!(image: string),
    field!(rehearsal: boolean),
    field_or_alias!(installation_disk: string),
    field!(network_type: string),
    Key {
        name: "cluster_network",
        read: |obj, key, into, d| {
            let own = obj.take(key).into_iter();
            for (f, v) in own.chain(kcli_aliases(obj, key)) {
                let (v4, v6, _) = cidrs_per_family(&f, v, d);
                set_once(&mut into.cluster_network, v4, d);
                set_once(&mut into.cluster_network6, v6, d);
            }
        },
    },
    field!(cluster_network_host_prefix: uint),
    Key {
        name: "service_network",
        read: |obj, key, into, d| {
            let own = obj.take(key).into_iter();
            for (f, v) in own.chain(kcli_aliases(obj, key)) {
                let (v4, v6, _) = cidrs_per_family(&f, v, d);
                set_once(&mut into.service_network, v4, d);
                set_once(&mut into.service_network6, v6, d);
            }
        },
    },
    field!(fips: boolean),
    Key {
        name: "storage",
        read: |obj, key, into, d| {
            if let Some((f, v)) = obj.take(key) {
                into.storage = string(&f, v, d);
            }
            kcli_apps(obj, &mut into.storage, d);
        },
    },
    Key {
        name: "monitoring",
        read: |obj, key, into, d| {
            if let Some(m) = nested(obj, key, MONITORING, d) {
                into.monitoring = m;
            }
            for (f, v) in kcli_aliases(obj, "monitoring.retention") {
                set_once(&mut into.monitoring.retention, string(&f, v, d), d);
            }
        },
    },
    field_or_alias!(ntp_servers: list_of_strings),
    field!(host_ntp: boolean),
    Key {
        name: "proxy",
        read: kcli_proxy,
    },
    Key {
        name: "image_digest_sources",
        read: |obj, key, into, d| {
            digest_sources(obj, key, into, d);
            kcli_mirrors(obj, into, d);
        },
    },
    Key {
        name: "additional_trust_bundle",
        read: |obj, key, into, d| {
            if let Some((f, v)) = obj.take(key) {
                into.additional_trust_bundle = string(&f, v, d);
            }
            // kcli's `ca`: the bundle's PEM text itself.
            if let Some((f, v)) = obj.take("ca") {
                let pem = string(&f, v, d);
                if let (Some(path), Some(pem)) = (&into.additional_trust_bundle, &pem) {
                    d.error(
                        &pem.field,
                        format!(
                            "sets the same thing as `{}`; keep only one of them",
                            path.field
                        ),
                    );
                } else {
                    into.trust_bundle_pem = pem;
                }
            }
        },
    },
    Key {
        name: "capabilities",
        read: |obj, key, into, d| into.capabilities = nested(obj, key, CAPABILITIES, d),
    },
    field!(manifests: string),
    field!(mirror: string),
    field!(openshift_install: string),
    field!(release_key: string),
    Key {
        name: "bmc",
        read: |obj, key, into, d| {
            if let Some(b) = nested(obj, key, BMC, d) {
                into.bmc = b;
            }
        },
    },
    field!(backend: string),
    Key {
        name: "kubevirt",
        read: |obj, key, into, d| into.kubevirt = nested(obj, key, KUBEVIRT, d),
    },
];

/// Top-level keys of shiftlab's own format.
pub fn top_keys() -> impl Iterator<Item = &'static str> {
    TOP.iter().map(|k| k.name)
}

/// `numcpus` and the like at the top: the size of every role.
fn top_size(obj: &mut Obj, key: &'static str, into: &mut RawSpec, d: &mut Diagnostics) {
    if let Some(k) = SIZE.iter().find(|k| k.name == key) {
        (k.read)(obj, key, &mut into.all, d);
    }
}

/// A role's sizes: its mapping (`ctlplane: {memory: …}`), then kcli's
/// `<role>_memory`, `<role>_numcpus` and `extra_<role>_disks` spellings.
fn role_size(obj: &mut Obj, role: &'static str, into: &mut RawSpec, d: &mut Diagnostics) {
    let slot = match role {
        "bootstrap" => &mut into.bootstrap,
        "ctlplane" => &mut into.ctlplane,
        _ => &mut into.worker,
    };
    if let Some((f, v)) = obj.take(role) {
        if let Some(m) = mapping(&f, v, d) {
            section(Obj::new(role, m), SIZE, slot, d);
        }
    }
    for (key, target) in [("memory", &mut slot.memory), ("numcpus", &mut slot.numcpus)] {
        for (f, v) in kcli_aliases(obj, &format!("{role}.{key}")) {
            set_once(target, uint(&f, v, d), d);
        }
    }
    for (f, v) in kcli_aliases(obj, &format!("{role}.extra_disks")) {
        set_once(&mut slot.extra_disks, list_of_uints(&f, v, d), d);
    }
}

/// `proxy:`, then kcli's flat `http_proxy`, `https_proxy` and `no_proxy`. As kcli's
/// install-config template has it (kcli kvirt/cluster/openshift/install-config.yaml),
/// a kcli proxy without a scheme is `http://` and `http_proxy` is the HTTPS proxy too
/// unless `https_proxy` says otherwise.
fn kcli_proxy(obj: &mut Obj, key: &'static str, into: &mut RawSpec, d: &mut Diagnostics) {
    let own = nested(obj, key, PROXY, d);
    let had = own.is_some();
    let mut p = own.unwrap_or_default();
    let mut any = false;
    for (field, slot) in [
        ("proxy.http_proxy", &mut p.http_proxy),
        ("proxy.https_proxy", &mut p.https_proxy),
        ("proxy.no_proxy", &mut p.no_proxy),
    ] {
        for (f, v) in kcli_aliases(obj, field) {
            let mut s = string(&f, v, d);
            if let Some(s) = s.as_mut().filter(|_| field != "proxy.no_proxy") {
                if !s.v.contains("://") {
                    s.v.insert_str(0, "http://");
                }
            }
            any |= s.is_some();
            set_once(slot, s, d);
        }
    }
    if any && p.https_proxy.is_none() {
        p.https_proxy = p
            .http_proxy
            .clone()
            .filter(|h| kcli::aliases("proxy.http_proxy").any(|k| k == h.field));
    }
    if had || any {
        into.proxy = Some(p);
    }
}

/// kcli's mirrors: `disconnected_url`, a registry holding the release under
/// kcli's layout (the `imageContentSources` of kcli's install-config template), and
/// `imagecontentsources`, a list of `{source, mirror}` (kcli's hypershift form) or
/// `{source, mirrors}`. Both add to `image_digest_sources`.
fn kcli_mirrors(obj: &mut Obj, into: &mut RawSpec, d: &mut Diagnostics) {
    if let Some(url) = obj
        .take("disconnected_url")
        .and_then(|(f, v)| string(&f, v, d))
    {
        // kcli drops a scheme the same way.
        let reg = url
            .v
            .trim()
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string();
        if reg.is_empty() || reg.contains(char::is_whitespace) {
            d.error(
                &url.field,
                format!(
                    "{:?} is not a registry address; expected e.g. registry.lab.test:5000",
                    url.v
                ),
            );
        } else {
            let okd = into.distribution.as_ref().is_some_and(|s| s.v == "okd");
            into.image_digest_sources.extend([
                (
                    "quay.io/openshift-release-dev/ocp-v4.0-art-dev".to_string(),
                    vec![
                        format!("{reg}/openshift-release-dev/ocp-v4.0-art-dev"),
                        format!("{reg}/openshift/release"),
                    ],
                ),
                (
                    "quay.io/openshift-release-dev".to_string(),
                    vec![format!("{reg}/openshift-release-dev")],
                ),
                if okd {
                    (
                        "registry.ci.openshift.org/origin".to_string(),
                        vec![format!("{reg}/origin")],
                    )
                } else {
                    (
                        "registry.ci.openshift.org/ocp/release".to_string(),
                        vec![format!("{reg}/openshift-release-dev")],
                    )
                },
            ]);
        }
    }
    let Some((f, v)) = obj.take("imagecontentsources") else {
        return;
    };
    let Value::Sequence(items) = v else {
        d.error(
            f,
            format!("{} is not a list of {{source, mirror}} entries", show(&v)),
        );
        return;
    };
    for (i, item) in items.into_iter().enumerate() {
        let field = format!("{f}[{i}]");
        let Some(mut m) = mapping(&field, item, d) else {
            continue;
        };
        // kcli's entries name one `mirror`; shiftlab's, a list of `mirrors`.
        if let Some(one) = m.remove("mirror") {
            if m.contains_key("mirrors") {
                d.error(
                    &field,
                    "has both `mirror` and `mirrors`; keep only one of them",
                );
                continue;
            }
            m.insert(Value::from("mirrors"), Value::Sequence(vec![one]));
        }
        let mut entry = RawDigestSource::default();
        section(Obj::new(&field, m), DIGEST_SOURCE, &mut entry, d);
        match (entry.source, entry.mirrors) {
            (Some(s), Some(m)) if !m.v.is_empty() => into.image_digest_sources.push((s.v, m.v)),
            _ => d.error(
                field,
                "needs `source` (a repository) and `mirror` (a registry path holding its images)",
            ),
        }
    }
}

/// `image_digest_sources`: a list of `{source, mirrors}` mappings.
fn digest_sources(obj: &mut Obj, key: &'static str, into: &mut RawSpec, d: &mut Diagnostics) {
    let Some((f, v)) = obj.take(key) else {
        return;
    };
    let items = match v {
        Value::Sequence(items) => items,
        other => {
            d.error(
                f,
                format!(
                    "{} is not a list of {{source, mirrors}} entries",
                    show(&other)
                ),
            );
            return;
        }
    };
    for (i, item) in items.into_iter().enumerate() {
        let field = format!("{f}[{i}]");
        let Some(m) = mapping(&field, item, d) else {
            continue;
        };
        let mut entry = RawDigestSource::default();
        section(Obj::new(&field, m), DIGEST_SOURCE, &mut entry, d);
        match (entry.source, entry.mirrors) {
            (Some(s), Some(m)) if !m.v.is_empty() => into.image_digest_sources.push((s.v, m.v)),
            _ => d.error(
                field,
                "needs `source` (a repository) and `mirrors` (a non-empty list)",
            ),
        }
    }
}

const USER: &[Key<RawUser>] = &[
    field!(name: string),
    field!(password_file: string),
    field!(admin: boolean),
];

/// `users:`, a list of `{name, password_file, admin}` (checked in resolve/users.rs).
fn users(obj: &mut Obj, key: &'static str, into: &mut RawSpec, d: &mut Diagnostics) {
    let Some((f, v)) = obj.take(key) else {
        return;
    };
    let Value::Sequence(items) = v else {
        d.error(
            f,
            format!(
                "{} is not a list of {{name, password_file, admin}} entries",
                show(&v)
            ),
        );
        return;
    };
    for (i, item) in items.into_iter().enumerate() {
        let field = format!("{f}[{i}]");
        let Some(m) = mapping(&field, item, d) else {
            continue;
        };
        let mut entry = RawUser {
            field: field.clone(),
            ..RawUser::default()
        };
        section(Obj::new(&field, m), USER, &mut entry, d);
        into.users.push(entry);
    }
}

/// Parse the YAML text of a cluster file. Errors and warnings go to `d`; `None` when
/// the text is not a YAML mapping at all, so nothing else can be said about it.
#[cfg(test)]
pub fn parse(text: &str, d: &mut Diagnostics) -> Option<RawSpec> {
    parse_with(text, d, |_, _| {})
}

/// [`parse`], with `edit` given the file's top-level mapping before any field is
/// read: `-P`'s overrides (params.rs).
pub fn parse_with(
    text: &str,
    d: &mut Diagnostics,
    edit: impl FnOnce(&mut Mapping, &mut Diagnostics),
) -> Option<RawSpec> {
    // `<<: *anchor` merges as in YAML 1.1 and PyYAML: the mapping's own keys win.
    let parsed = yaml_serde::from_str::<Value>(text).and_then(|mut v| {
        v.apply_merge()?;
        Ok(v)
    });
    let root: Value = match parsed {
        Ok(v) => v,
        Err(e) => {
            let at = e
                .location()
                .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                .unwrap_or_default();
            d.error("(file)", format!("not valid YAML{at}: {e}"));
            return None;
        }
    };
    let map = match root {
        Value::Mapping(m) => m,
        Value::Null => Mapping::new(),
        other => {
            d.error(
                "(file)",
                format!(
                    "the file must be a YAML mapping of keys, not {}",
                    show(&other)
                ),
            );
            return None;
        }
    };
    let mut map = map;
    edit(&mut map, d);
    let mut top = Obj::new("", map);
    let mut raw = RawSpec::default();
    for k in TOP {
        (k.read)(&mut top, k.name, &mut raw, d);
    }
    // kcli's description of its own plan.
    top.map.remove("info");
    // kcli keys shiftlab knows but reads no value from: quiet when they leave the
    // feature as kcli has it by default, else a warning or a refusal saying why.
    for (key, k) in kcli::unread() {
        let Some(v) = top.map.remove(key) else {
            continue;
        };
        let shown = if kcli::SECRET.contains(&key) {
            "a password (not shown)".to_string()
        } else {
            show(&v)
        };
        match k {
            kcli::Key::Ignored(default, why) if !kcli::at_rest(default, &v) => {
                d.warn(key, format!("kcli parameter ignored: {why}"));
            }
            kcli::Key::Refused(default, why) if !kcli::at_rest(default, &v) => {
                d.error(
                    key,
                    format!("{shown} is not supported by shiftlab because {why}"),
                );
            }
            _ => {}
        }
    }
    let known: Vec<&str> = top_keys().chain(kcli::read()).collect();
    top.finish(&known, d);
    Some(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key a table names is read: written with a value of the wrong kind, it
    /// draws an error naming the key, never "unknown key".
    #[test]
    fn every_key_of_every_table_is_read() {
        fn check<T>(prefix: &str, table: &[Key<T>]) {
            for k in table {
                let path = if prefix.is_empty() {
                    k.name.to_string()
                } else {
                    format!("{prefix}.{}", k.name)
                };
                // A list of lists is no valid value for any key.
                let yaml = match prefix {
                    "" => format!("{}: [[1]]\n", k.name),
                    p => format!("{p}:\n  {}: [[1]]\n", k.name),
                };
                let mut d = Diagnostics::default();
                parse(&yaml, &mut d);
                assert!(
                    d.errors.iter().any(|e| e.field.starts_with(&path)),
                    "{path} drew no error of its own: {:?}",
                    d.errors
                );
                assert!(
                    !d.errors
                        .iter()
                        .any(|e| e.message.starts_with("unknown key")),
                    "{path} is in a table but reported unknown: {:?}",
                    d.errors
                );
            }
        }
        check("", TOP);
        check("ctlplane", SIZE);
        check("network", NETWORK);
        check("libvirt", LIBVIRT);
        check("bmc", BMC);
        check("kubevirt", KUBEVIRT);
        check("proxy", PROXY);
        check("capabilities", CAPABILITIES);
    }

    /// kcli's default `keys: []` adds no key, and so does not stop shiftlab from
    /// finding the user's keys in ~/.ssh.
    #[test]
    fn empty_kcli_keys_say_nothing() {
        let mut d = Diagnostics::default();
        let raw = parse("keys: []\n", &mut d).unwrap();
        assert!(raw.ssh_keys.is_none(), "{:?}", raw.ssh_keys);
        let raw = parse("keys: [a.pub]\n", &mut d).unwrap();
        assert_eq!(raw.ssh_keys.map(|k| k.v), Some(vec!["a.pub".to_string()]));
        assert!(d.errors.is_empty(), "{:?}", d.errors);
    }

    /// A key no table names is unknown, and the message lists the section's table.
    #[test]
    fn unknown_keys_list_the_sections_table() {
        let mut d = Diagnostics::default();
        parse("libvirt:\n  zzz: 1\n", &mut d);
        assert_eq!(d.errors.len(), 1, "{:?}", d.errors);
        assert_eq!(d.errors[0].field, "libvirt.zzz");
        assert_eq!(
            d.errors[0].message,
            format!(
                "unknown key; valid keys here: {}",
                names(LIBVIRT).join(", ")
            )
        );
    }
}
