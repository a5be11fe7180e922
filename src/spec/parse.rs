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

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
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
}

#[derive(Debug, Default, Clone)]
pub struct RawLibvirt {
    pub uri: Option<Src<String>>,
    pub pool: Option<Src<String>>,
    pub pool_path: Option<Src<String>>,
    pub domain_type: Option<Src<String>>,
    pub firmware: Option<Src<String>>,
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
    pub address: Option<Src<Ipv4Addr>>,
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
    pub fips: Option<Src<bool>>,
    pub proxy: Option<RawProxy>,
    pub image_digest_sources: Vec<(String, Vec<String>)>,
    pub additional_trust_bundle: Option<Src<String>>,
    pub capabilities: Option<RawCapabilities>,
    pub manifests: Option<Src<String>>,
    pub openshift_install: Option<Src<String>>,
    pub mirror: Option<Src<String>>,
    pub release_key: Option<Src<String>>,
    pub bmc: RawBmc,
    pub backend: Option<Src<String>>,
    pub kubevirt: Option<RawKubevirt>,
}

/// Top-level keys of shiftlab's own format.
pub const TOP_KEYS: &[&str] = &[
    "cluster",
    "domain",
    "distribution",
    "version",
    "pull_secret",
    "ssh_keys",
    "method",
    "ctlplanes",
    "workers",
    "numcpus",
    "memory",
    "disk_size",
    "extra_disks",
    "bootstrap",
    "ctlplane",
    "worker",
    "network",
    "libvirt",
    "image",
    "rehearsal",
    "installation_disk",
    "network_type",
    "cluster_network",
    "cluster_network_host_prefix",
    "service_network",
    "fips",
    "proxy",
    "image_digest_sources",
    "additional_trust_bundle",
    "capabilities",
    "manifests",
    "openshift_install",
    "mirror",
    "release_key",
    "bmc",
    "backend",
    "kubevirt",
];

const SIZE_KEYS: &[&str] = &["numcpus", "memory", "disk_size", "extra_disks"];
const NETWORK_KEYS: &[&str] = &[
    "name",
    "mode",
    "bridge",
    "cidr",
    "api_ip",
    "ingress_ip",
    "dhcp_start",
    "dhcp_end",
    "mac_prefix",
    "external_bridge",
    "external_bridge_name",
];
const LIBVIRT_KEYS: &[&str] = &["uri", "pool", "pool_path", "domain_type", "firmware"];
const BMC_KEYS: &[&str] = &[
    "address",
    "port",
    "username",
    "password",
    "verify_certificate",
];
const KUBEVIRT_KEYS: &[&str] = &[
    "kubeconfig",
    "context",
    "namespace",
    "storage_class",
    "network",
    "bridge",
    "vlan",
    "service_type",
    "image",
    "http_url",
    "haproxy_image",
    "cluster_dns_domain",
];
const PROXY_KEYS: &[&str] = &["http_proxy", "https_proxy", "no_proxy"];
const CAPABILITY_KEYS: &[&str] = &["baseline_capability_set", "additional_enabled_capabilities"];

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

fn ipv4(field: &str, v: Value, d: &mut Diagnostics) -> Option<Src<Ipv4Addr>> {
    let s = string(field, v, d)?;
    match s.v.trim().parse::<Ipv4Addr>() {
        Ok(ip) => Some(Src {
            v: ip,
            field: s.field,
        }),
        Err(_) => {
            d.error(
                field,
                format!(
                    "{:?} is not an IPv4 address; expected e.g. 192.168.126.2",
                    s.v
                ),
            );
            None
        }
    }
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

fn size(obj: &mut Obj, into: &mut RawSize, d: &mut Diagnostics) {
    if let Some((f, v)) = obj.take("numcpus") {
        set_once(&mut into.numcpus, uint(&f, v, d), d);
    }
    if let Some((f, v)) = obj.take("memory") {
        set_once(&mut into.memory, uint(&f, v, d), d);
    }
    if let Some((f, v)) = obj.take("disk_size") {
        set_once(&mut into.disk_size, uint(&f, v, d), d);
    }
    if let Some((f, v)) = obj.take("extra_disks") {
        set_once(&mut into.extra_disks, list_of_uints(&f, v, d), d);
    }
}

/// Parse the YAML text of a cluster file. Errors and warnings go to `d`; `None` when
/// the text is not a YAML mapping at all, so nothing else can be said about it.
pub fn parse(text: &str, d: &mut Diagnostics) -> Option<RawSpec> {
    let mut raw = RawSpec::default();
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
    let mut top = Obj::new("", map);

    if let Some((f, v)) = top.take("cluster") {
        raw.cluster = string(&f, v, d);
    }
    if let Some((f, v)) = top.take("domain") {
        raw.domain = string(&f, v, d);
    }
    if let Some((f, v)) = top.take("distribution") {
        raw.distribution = string(&f, v, d);
    }
    for dist in kcli_flags(&mut top, "distribution", d) {
        set_once(&mut raw.distribution, Some(dist), d);
    }
    if let Some((f, v)) = top.take("version") {
        raw.version = release(&f, v, d);
    }
    if let Some((f, v)) = top.take("tag") {
        raw.tag = release(&f, v, d);
    }
    if let Some((f, v)) = top.take("pull_secret") {
        raw.pull_secret = string(&f, v, d);
    }
    let own = top.take("ssh_keys").into_iter();
    for (f, v) in own.chain(kcli_aliases(&mut top, "ssh_keys")) {
        set_once(&mut raw.ssh_keys, list_of_strings(&f, v, d), d);
    }
    // kcli's `keys` adds to whichever list is there.
    for key in kcli::additions("ssh_keys") {
        let Some((f, v)) = top.take(key) else {
            continue;
        };
        if let Some(list) = list_of_strings(&f, v, d) {
            match &mut raw.ssh_keys {
                Some(prev) => prev.v.extend(list.v),
                None => raw.ssh_keys = Some(list),
            }
        }
    }
    if let Some((f, v)) = top.take("method") {
        raw.method = string(&f, v, d);
    }
    for method in kcli_flags(&mut top, "method", d) {
        set_once(&mut raw.method, Some(method), d);
    }
    let own = top.take("ctlplanes").into_iter();
    for (f, v) in own.chain(kcli_aliases(&mut top, "ctlplanes")) {
        set_once(&mut raw.ctlplanes, uint(&f, v, d), d);
    }
    if let Some((f, v)) = top.take("workers") {
        raw.workers = uint(&f, v, d);
    }

    // Sizes: top-level keys apply to every role; role mappings and kcli's
    // `<role>_<key>` names override them.
    size(&mut top, &mut raw.all, d);
    for (role, slot) in [
        ("bootstrap", &mut raw.bootstrap),
        ("ctlplane", &mut raw.ctlplane),
        ("worker", &mut raw.worker),
    ] {
        if let Some((f, v)) = top.take(role) {
            if let Some(m) = mapping(&f, v, d) {
                let mut obj = Obj::new(role, m);
                size(&mut obj, slot, d);
                obj.finish(SIZE_KEYS, d);
            }
        }
        for (key, target) in [("memory", &mut slot.memory), ("numcpus", &mut slot.numcpus)] {
            for (f, v) in kcli_aliases(&mut top, &format!("{role}.{key}")) {
                set_once(target, uint(&f, v, d), d);
            }
        }
        for (f, v) in kcli_aliases(&mut top, &format!("{role}.extra_disks")) {
            set_once(&mut slot.extra_disks, list_of_uints(&f, v, d), d);
        }
    }

    if let Some((f, v)) = top.take("network") {
        match v {
            // kcli: the name of the libvirt network.
            Value::String(s) => {
                raw.network.name = Some(Src { v: s, field: f });
            }
            other => {
                if let Some(m) = mapping(&f, other, d) {
                    network(Obj::new("network", m), &mut raw.network, d);
                }
            }
        }
    }
    for (field, slot) in [
        ("network.api_ip", &mut raw.network.api_ip),
        ("network.ingress_ip", &mut raw.network.ingress_ip),
    ] {
        for (f, v) in kcli_aliases(&mut top, field) {
            set_once(slot, ipv4(&f, v, d), d);
        }
    }

    if let Some((f, v)) = top.take("libvirt") {
        if let Some(m) = mapping(&f, v, d) {
            let mut obj = Obj::new("libvirt", m);
            for (key, slot) in [
                ("uri", &mut raw.libvirt.uri),
                ("pool", &mut raw.libvirt.pool),
                ("pool_path", &mut raw.libvirt.pool_path),
                ("domain_type", &mut raw.libvirt.domain_type),
                ("firmware", &mut raw.libvirt.firmware),
            ] {
                if let Some((f, v)) = obj.take(key) {
                    *slot = string(&f, v, d);
                }
            }
            obj.finish(LIBVIRT_KEYS, d);
        }
    }
    for (f, v) in kcli_aliases(&mut top, "libvirt.pool") {
        set_once(&mut raw.libvirt.pool, string(&f, v, d), d);
    }
    for fw in kcli_flags(&mut top, "libvirt.firmware", d) {
        set_once(&mut raw.libvirt.firmware, Some(fw), d);
    }

    if let Some((f, v)) = top.take("image") {
        raw.image = string(&f, v, d);
    }
    if let Some((f, v)) = top.take("rehearsal") {
        raw.rehearsal = boolean(&f, v, d);
    }
    if let Some((f, v)) = top.take("installation_disk") {
        raw.installation_disk = string(&f, v, d);
    }
    if let Some((f, v)) = top.take("network_type") {
        raw.network_type = string(&f, v, d);
    }
    let own = top.take("cluster_network").into_iter();
    for (f, v) in own.chain(kcli_aliases(&mut top, "cluster_network")) {
        set_once(&mut raw.cluster_network, cidr(&f, v, d), d);
    }
    if let Some((f, v)) = top.take("cluster_network_host_prefix") {
        raw.cluster_network_host_prefix = uint(&f, v, d);
    }
    let own = top.take("service_network").into_iter();
    for (f, v) in own.chain(kcli_aliases(&mut top, "service_network")) {
        set_once(&mut raw.service_network, cidr(&f, v, d), d);
    }
    if let Some((f, v)) = top.take("fips") {
        raw.fips = boolean(&f, v, d);
    }
    if let Some((f, v)) = top.take("proxy") {
        if let Some(m) = mapping(&f, v, d) {
            let mut obj = Obj::new("proxy", m);
            let mut p = RawProxy::default();
            for (key, slot) in [
                ("http_proxy", &mut p.http_proxy),
                ("https_proxy", &mut p.https_proxy),
                ("no_proxy", &mut p.no_proxy),
            ] {
                if let Some((f, v)) = obj.take(key) {
                    *slot = string(&f, v, d);
                }
            }
            obj.finish(PROXY_KEYS, d);
            raw.proxy = Some(p);
        }
    }
    if let Some((f, v)) = top.take("image_digest_sources") {
        match v {
            Value::Sequence(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    let field = format!("{f}[{i}]");
                    let Some(m) = mapping(&field, item, d) else {
                        continue;
                    };
                    let mut obj = Obj::new(&field, m);
                    let source = obj
                        .take("source")
                        .and_then(|(f, v)| string(&f, v, d))
                        .map(|s| s.v);
                    let mirrors = obj
                        .take("mirrors")
                        .and_then(|(f, v)| list_of_strings(&f, v, d))
                        .map(|s| s.v)
                        .unwrap_or_default();
                    obj.finish(&["source", "mirrors"], d);
                    match source {
                        Some(s) if !mirrors.is_empty() => {
                            raw.image_digest_sources.push((s, mirrors))
                        }
                        _ => d.error(
                            field,
                            "needs `source` (a repository) and `mirrors` (a non-empty list)",
                        ),
                    }
                }
            }
            other => d.error(
                f,
                format!(
                    "{} is not a list of {{source, mirrors}} entries",
                    show(&other)
                ),
            ),
        }
    }
    if let Some((f, v)) = top.take("additional_trust_bundle") {
        raw.additional_trust_bundle = string(&f, v, d);
    }
    if let Some((f, v)) = top.take("capabilities") {
        if let Some(m) = mapping(&f, v, d) {
            let mut obj = Obj::new("capabilities", m);
            let mut c = RawCapabilities::default();
            if let Some((f, v)) = obj.take("baseline_capability_set") {
                c.baseline_capability_set = string(&f, v, d);
            }
            if let Some((f, v)) = obj.take("additional_enabled_capabilities") {
                if let Some(l) = list_of_strings(&f, v, d) {
                    c.additional_enabled_capabilities = l.v;
                }
            }
            obj.finish(CAPABILITY_KEYS, d);
            raw.capabilities = Some(c);
        }
    }
    if let Some((f, v)) = top.take("manifests") {
        raw.manifests = string(&f, v, d);
    }
    if let Some((f, v)) = top.take("mirror") {
        raw.mirror = string(&f, v, d);
    }
    if let Some((f, v)) = top.take("openshift_install") {
        raw.openshift_install = string(&f, v, d);
    }
    if let Some((f, v)) = top.take("release_key") {
        raw.release_key = string(&f, v, d);
    }
    if let Some((f, v)) = top.take("bmc") {
        if let Some(m) = mapping(&f, v, d) {
            let mut obj = Obj::new("bmc", m);
            if let Some((f, v)) = obj.take("address") {
                raw.bmc.address = ipv4(&f, v, d);
            }
            if let Some((f, v)) = obj.take("port") {
                raw.bmc.port = uint(&f, v, d);
            }
            if let Some((f, v)) = obj.take("username") {
                raw.bmc.username = string(&f, v, d);
            }
            if let Some((f, v)) = obj.take("password") {
                raw.bmc.password = string(&f, v, d);
            }
            if let Some((f, v)) = obj.take("verify_certificate") {
                raw.bmc.verify_certificate = boolean(&f, v, d);
            }
            obj.finish(BMC_KEYS, d);
        }
    }

    if let Some((f, v)) = top.take("backend") {
        raw.backend = string(&f, v, d);
    }
    if let Some((f, v)) = top.take("kubevirt") {
        if let Some(m) = mapping(&f, v, d) {
            let mut obj = Obj::new("kubevirt", m);
            let mut k = RawKubevirt::default();
            for (key, slot) in [
                ("kubeconfig", &mut k.kubeconfig),
                ("context", &mut k.context),
                ("namespace", &mut k.namespace),
                ("storage_class", &mut k.storage_class),
                ("network", &mut k.network),
                ("bridge", &mut k.bridge),
                ("service_type", &mut k.service_type),
                ("image", &mut k.image),
                ("http_url", &mut k.http_url),
                ("haproxy_image", &mut k.haproxy_image),
                ("cluster_dns_domain", &mut k.cluster_dns_domain),
            ] {
                if let Some((f, v)) = obj.take(key) {
                    *slot = string(&f, v, d);
                }
            }
            if let Some((f, v)) = obj.take("vlan") {
                k.vlan = uint(&f, v, d);
            }
            obj.finish(KUBEVIRT_KEYS, d);
            raw.kubevirt = Some(k);
        }
    }

    // kcli keys shiftlab knows but does not use.
    for (key, why) in kcli::ignored() {
        if top.map.remove(key).is_some() {
            d.warn(key, format!("kcli parameter ignored: {why}"));
        }
    }

    let known: Vec<&str> = TOP_KEYS.iter().copied().chain(kcli::read()).collect();
    top.finish(&known, d);
    Some(raw)
}

fn network(mut obj: Obj, into: &mut RawNetwork, d: &mut Diagnostics) {
    if let Some((f, v)) = obj.take("name") {
        into.name = string(&f, v, d);
    }
    if let Some((f, v)) = obj.take("mode") {
        into.mode = string(&f, v, d);
    }
    if let Some((f, v)) = obj.take("bridge") {
        into.bridge = string(&f, v, d);
    }
    if let Some((f, v)) = obj.take("cidr") {
        into.cidr = cidr(&f, v, d);
    }
    if let Some((f, v)) = obj.take("api_ip") {
        into.api_ip = ipv4(&f, v, d);
    }
    if let Some((f, v)) = obj.take("ingress_ip") {
        into.ingress_ip = ipv4(&f, v, d);
    }
    if let Some((f, v)) = obj.take("dhcp_start") {
        into.dhcp_start = ipv4(&f, v, d);
    }
    if let Some((f, v)) = obj.take("dhcp_end") {
        into.dhcp_end = ipv4(&f, v, d);
    }
    if let Some((f, v)) = obj.take("mac_prefix") {
        into.mac_prefix = string(&f, v, d);
    }
    if let Some((f, v)) = obj.take("external_bridge") {
        into.external_bridge = string(&f, v, d);
    }
    if let Some((f, v)) = obj.take("external_bridge_name") {
        into.external_bridge_name = string(&f, v, d);
    }
    obj.finish(NETWORK_KEYS, d);
}
