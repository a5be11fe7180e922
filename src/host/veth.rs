//! The veth-linked bridge of a bare-metal IPI cluster (`network.external_bridge:
//! veth`): a Linux bridge (`baremetal` by default, the installer's default
//! `externalBridge`: openshift/installer pkg/types/baremetal/defaults/platform.go)
//! joined to the cluster's libvirt NAT bridge by a veth pair, one end in each.
//! The installer's bootstrap VM gets a NIC on it and so shares L2 — DHCP and DNS
//! from the network's dnsmasq — with the nodes.
//!
//! Linux links carry no libvirt metadata, so ownership is recorded twice, both
//! before anything depends on it: in the cluster directory (`host-links.json`,
//! written before the links are made) and on each link as its alias
//! (`shiftlab:<cluster>`, `ip link set … alias`). A link is removed only when it
//! is recorded *and* carries that alias; a bridge of the name that shiftlab did
//! not make is refused, never touched. Changes go through iproute2's `ip`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::Serialize;

pub use crate::plan::network::VethBridge;

/// The alias shiftlab gives the links it made for `cluster`.
pub fn alias(cluster: &str) -> String {
    format!("shiftlab:{cluster}")
}

/// What `ip -d link show` says about one link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    pub alias: Option<String>,
    /// The bridge it is a port of.
    pub master: Option<String>,
    /// `bridge`, `veth`, … (`None` for a plain device).
    pub kind: Option<String>,
    /// Administratively up (IFF_UP).
    pub up: bool,
}

/// One change to the host's links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    AddBridge(String),
    AddVeth(String, String),
    SetAlias(String, String),
    SetMaster(String, String),
    Up(String),
    Delete(String),
}

impl Action {
    fn argv(&self) -> Vec<String> {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self {
            Action::AddBridge(b) => v(&["link", "add", "name", b, "type", "bridge"]),
            Action::AddVeth(a, b) => v(&["link", "add", a, "type", "veth", "peer", "name", b]),
            Action::SetAlias(l, a) => v(&["link", "set", "dev", l, "alias", a]),
            Action::SetMaster(l, m) => v(&["link", "set", "dev", l, "master", m]),
            Action::Up(l) => v(&["link", "set", "dev", l, "up"]),
            Action::Delete(l) => v(&["link", "del", "dev", l]),
        }
    }
}

/// The links as they are now, by name (absent: not there).
pub type Observed = BTreeMap<String, Link>;

/// What takes the host from `seen` to the veth-linked bridge `v` of `cluster`
/// (pure). Refuses, before any change, links of those names that are not
/// shiftlab's for this cluster, and a missing NAT bridge.
pub fn ensure_actions(
    cluster: &str,
    v: &VethBridge,
    seen: &Observed,
) -> std::result::Result<Vec<Action>, String> {
    let ours = alias(cluster);
    if !seen.contains_key(&v.nat) {
        return Err(format!(
            "{}: the cluster network's bridge is not there (is its libvirt network started?)",
            v.nat
        ));
    }
    for name in v.owned() {
        if let Some(l) = seen.get(name) {
            if l.alias.as_deref() != Some(ours.as_str()) {
                return Err(format!(
                    "{name}: a host interface of that name exists and is not shiftlab's for {cluster} (alias {}); shiftlab never touches it: set network.external_bridge_name to another name",
                    l.alias.as_deref().unwrap_or("none")
                ));
            }
        }
    }
    let mut a = Vec::new();
    if !seen.contains_key(&v.bridge) {
        a.push(Action::AddBridge(v.bridge.clone()));
        a.push(Action::SetAlias(v.bridge.clone(), ours.clone()));
    }
    if !seen.contains_key(&v.bridge_end) || !seen.contains_key(&v.nat_end) {
        // One end without the other cannot be: deleting an end deletes the pair.
        for end in [&v.bridge_end, &v.nat_end] {
            if seen.contains_key(end) {
                a.push(Action::Delete(end.clone()));
            }
        }
        a.push(Action::AddVeth(v.bridge_end.clone(), v.nat_end.clone()));
        a.push(Action::SetAlias(v.bridge_end.clone(), ours.clone()));
        a.push(Action::SetAlias(v.nat_end.clone(), ours.clone()));
    }
    for (end, master) in [(&v.bridge_end, &v.bridge), (&v.nat_end, &v.nat)] {
        if seen.get(end.as_str()).and_then(|l| l.master.as_ref()) != Some(master) {
            a.push(Action::SetMaster(end.clone(), master.clone()));
        }
    }
    for l in [&v.bridge_end, &v.nat_end, &v.bridge] {
        if !seen.get(l.as_str()).is_some_and(|l| l.up) {
            a.push(Action::Up(l.clone()));
        }
    }
    Ok(a)
}

/// What removes the recorded links of `cluster` (pure): only those still there
/// with shiftlab's alias for the cluster.
pub fn remove_actions(cluster: &str, v: &VethBridge, seen: &Observed) -> Vec<Action> {
    let ours = alias(cluster);
    let mut a = Vec::new();
    let mut pair_gone = false;
    for name in v.owned() {
        let Some(l) = seen.get(name) else { continue };
        if l.alias.as_deref() != Some(ours.as_str()) {
            continue;
        }
        let is_end = name != v.bridge;
        if is_end && pair_gone {
            continue;
        }
        pair_gone |= is_end;
        a.push(Action::Delete(name.to_string()));
    }
    a
}

/// Whether a host bridge can carry a `mode: bridge` cluster (pure): a bridge,
/// and up.
pub fn check_host_bridge(name: &str, link: Option<&Link>) -> Option<String> {
    match link {
        None => Some(format!(
            "network.bridge {name}: no such interface on this host (mode bridge uses an existing bridge; shiftlab never creates or deletes it)"
        )),
        Some(l) if l.kind.as_deref() != Some("bridge") => Some(format!(
            "network.bridge {name}: not a bridge ({}); mode bridge needs a Linux bridge with the host's uplink in it",
            l.kind.as_deref().unwrap_or("a plain device")
        )),
        Some(l) if !l.up => Some(format!(
            "network.bridge {name}: the bridge is down; bring it up first (ip link set dev {name} up, or your network manager)"
        )),
        Some(_) => None,
    }
}

/// Parse `ip -j -d link show` output.
pub fn parse_links(json: &str) -> Result<Observed> {
    let v: Vec<serde_json::Value> = serde_json::from_str(json).context("parsing ip's JSON")?;
    let mut out = Observed::new();
    for l in v {
        let Some(name) = l.get("ifname").and_then(|n| n.as_str()) else {
            continue;
        };
        let s = |k: &str| l.get(k).and_then(|x| x.as_str()).map(str::to_string);
        out.insert(
            name.to_string(),
            Link {
                alias: s("ifalias"),
                master: s("master"),
                kind: l
                    .pointer("/linkinfo/info_kind")
                    .and_then(|k| k.as_str())
                    .map(str::to_string),
                up: l
                    .get("flags")
                    .and_then(|f| f.as_array())
                    .is_some_and(|f| f.iter().any(|x| x == "UP")),
            },
        );
    }
    Ok(out)
}

/// The host's links now.
pub fn observe() -> Result<Observed> {
    let out = Command::new("ip")
        .args(["-j", "-d", "link", "show"])
        .output()
        .context("running ip (iproute2) to list the host's links")?;
    if !out.status.success() {
        bail!(
            "ip -j -d link show: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_links(&String::from_utf8_lossy(&out.stdout))
}

fn run(a: &Action) -> Result<()> {
    let argv = a.argv();
    let out = Command::new("ip")
        .args(&argv)
        .output()
        .with_context(|| format!("running ip {}", argv.join(" ")))?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            argv.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The record (the cluster's `host-links.json`, `ClusterDir::host_links`).
fn read_record(record: &Path) -> Result<Option<VethBridge>> {
    let p = record;
    match std::fs::read_to_string(p) {
        Ok(t) => Ok(Some(
            serde_json::from_str(&t).with_context(|| format!("parsing {}", p.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
    }
}

/// The veth-linked bridge as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VethStatus {
    pub bridge: String,
    /// The bridge and both veth ends are there, shiftlab's, enslaved and up.
    pub linked: bool,
    /// What is missing or wrong, when not linked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// How the recorded links of `cluster` stand (pure).
pub fn status_of(cluster: &str, v: &VethBridge, seen: &Observed) -> VethStatus {
    let problem = match ensure_actions(cluster, v, seen) {
        Err(e) => Some(e),
        Ok(a) if a.is_empty() => None,
        Ok(a) => Some(format!(
            "{} change(s) to make; `shiftlab create infra` completes it",
            a.len()
        )),
    };
    VethStatus {
        bridge: v.bridge.clone(),
        linked: problem.is_none(),
        problem,
    }
}

/// The veth-linked bridge of the cluster in `dir`, if one is recorded.
pub fn status(cluster: &str, record: &Path) -> Result<Option<VethStatus>> {
    let Some(v) = read_record(record)? else {
        return Ok(None);
    };
    Ok(Some(status_of(cluster, &v, &observe()?)))
}

/// Make (or complete) the veth-linked bridge; returns what changed.
pub fn ensure(cluster: &str, record: &Path, v: &VethBridge) -> Result<Vec<String>> {
    let actions = ensure_actions(cluster, v, &observe()?).map_err(anyhow::Error::msg)?;
    if actions.is_empty() {
        return Ok(Vec::new());
    }
    // Intent first: a run killed after `ip link add` still knows the links.
    crate::files::write_atomic(record, &serde_json::to_vec_pretty(v)?)?;
    let mut done = Vec::new();
    for a in &actions {
        run(a)?;
        match a {
            Action::AddBridge(b) => done.push(format!("bridge {b} (veth-linked to {})", v.nat)),
            Action::AddVeth(x, y) => done.push(format!("veth pair {x}/{y}")),
            _ => {}
        }
    }
    Ok(done)
}

/// Remove the links recorded for `cluster` (those still carrying its alias),
/// then the record; returns what was removed.
pub fn remove(cluster: &str, record: &Path) -> Result<Vec<String>> {
    let Some(v) = read_record(record)? else {
        return Ok(Vec::new());
    };
    let mut removed = Vec::new();
    for a in remove_actions(cluster, &v, &observe()?) {
        run(&a)?;
        if let Action::Delete(l) = &a {
            removed.push(format!("host link {l}"));
        }
    }
    let _ = std::fs::remove_file(record);
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(alias: Option<&str>, master: Option<&str>, kind: &str, up: bool) -> Link {
        Link {
            alias: alias.map(str::to_string),
            master: master.map(str::to_string),
            kind: Some(kind.to_string()),
            up,
        }
    }

    fn v() -> VethBridge {
        VethBridge::new("lab1", "baremetal", "sl-lab1")
    }

    #[test]
    fn names_fit_interface_names() {
        let v = v();
        assert!(v.bridge_end.len() <= 15 && v.nat_end.len() <= 15, "{v:?}");
        assert_ne!(
            v.bridge_end,
            VethBridge::new("lab2", "baremetal", "x").bridge_end
        );
    }

    #[test]
    fn made_from_nothing_then_nothing_to_do() {
        let v = v();
        let mut seen = Observed::new();
        seen.insert("sl-lab1".into(), link(None, None, "bridge", true));
        let a = ensure_actions("lab1", &v, &seen).unwrap();
        assert_eq!(a[0], Action::AddBridge("baremetal".into()));
        assert_eq!(
            a[1],
            Action::SetAlias("baremetal".into(), "shiftlab:lab1".into())
        );
        assert!(a.contains(&Action::AddVeth(v.bridge_end.clone(), v.nat_end.clone())));
        assert!(a.contains(&Action::SetMaster(v.nat_end.clone(), "sl-lab1".into())));
        assert!(a.contains(&Action::Up("baremetal".into())));
        // Done: every link there, ours, enslaved and up.
        let ours = Some("shiftlab:lab1");
        seen.insert("baremetal".into(), link(ours, None, "bridge", true));
        seen.insert(
            v.bridge_end.clone(),
            link(ours, Some("baremetal"), "veth", true),
        );
        seen.insert(v.nat_end.clone(), link(ours, Some("sl-lab1"), "veth", true));
        assert_eq!(ensure_actions("lab1", &v, &seen).unwrap(), []);
        // Half made (killed between the steps): completed.
        seen.remove(&v.nat_end);
        let a = ensure_actions("lab1", &v, &seen).unwrap();
        assert_eq!(a[0], Action::Delete(v.bridge_end.clone()));
        assert!(a.contains(&Action::AddVeth(v.bridge_end.clone(), v.nat_end.clone())));
    }

    #[test]
    fn someone_else_s_bridge_is_refused_and_kept() {
        let v = v();
        let mut seen = Observed::new();
        seen.insert("sl-lab1".into(), link(None, None, "bridge", true));
        seen.insert("baremetal".into(), link(None, None, "bridge", true));
        let e = ensure_actions("lab1", &v, &seen).unwrap_err();
        assert!(
            e.contains("baremetal: a host interface of that name exists and is not shiftlab's"),
            "{e}"
        );
        assert!(e.contains("external_bridge_name"), "{e}");
        // Another cluster's: refused too, and not removed by this one.
        seen.insert(
            "baremetal".into(),
            link(Some("shiftlab:lab2"), None, "bridge", true),
        );
        assert!(ensure_actions("lab1", &v, &seen).is_err());
        assert_eq!(remove_actions("lab1", &v, &seen), []);
        // No NAT bridge: nothing to link to.
        let e = ensure_actions("lab1", &v, &Observed::new()).unwrap_err();
        assert!(e.contains("sl-lab1"), "{e}");
    }

    #[test]
    fn status_says_whether_it_is_linked() {
        let v = v();
        let ours = Some("shiftlab:lab1");
        let mut seen = Observed::new();
        seen.insert("sl-lab1".into(), link(None, None, "bridge", true));
        seen.insert("baremetal".into(), link(ours, None, "bridge", true));
        seen.insert(
            v.bridge_end.clone(),
            link(ours, Some("baremetal"), "veth", true),
        );
        seen.insert(v.nat_end.clone(), link(ours, Some("sl-lab1"), "veth", true));
        assert!(status_of("lab1", &v, &seen).linked);
        seen.remove(&v.nat_end);
        let st = status_of("lab1", &v, &seen);
        assert!(!st.linked && st.problem.unwrap().contains("create infra"));
        seen.remove("sl-lab1");
        assert!(status_of("lab1", &v, &seen)
            .problem
            .unwrap()
            .contains("not there"));
    }

    #[test]
    fn removal_takes_only_ours_and_the_pair_once() {
        let v = v();
        let ours = Some("shiftlab:lab1");
        let mut seen = Observed::new();
        seen.insert("sl-lab1".into(), link(None, None, "bridge", true));
        seen.insert("baremetal".into(), link(ours, None, "bridge", true));
        seen.insert(
            v.bridge_end.clone(),
            link(ours, Some("baremetal"), "veth", true),
        );
        seen.insert(v.nat_end.clone(), link(ours, Some("sl-lab1"), "veth", true));
        assert_eq!(
            remove_actions("lab1", &v, &seen),
            [
                Action::Delete(v.bridge_end.clone()),
                Action::Delete("baremetal".into())
            ]
        );
        assert_eq!(remove_actions("lab1", &v, &Observed::new()), []);
    }

    #[test]
    fn host_bridges_must_exist_be_bridges_and_be_up() {
        assert!(check_host_bridge("br0", None)
            .unwrap()
            .contains("no such interface"));
        let eth = link(None, None, "", true);
        let eth = Link { kind: None, ..eth };
        assert!(check_host_bridge("eth0", Some(&eth))
            .unwrap()
            .contains("not a bridge"));
        let down = link(None, None, "bridge", false);
        assert!(check_host_bridge("br0", Some(&down))
            .unwrap()
            .contains("down"));
        assert_eq!(
            check_host_bridge("br0", Some(&link(None, None, "bridge", true))),
            None
        );
    }

    #[test]
    fn ip_json_is_read() {
        let j = r#"[{"ifindex":4,"ifname":"baremetal","ifalias":"shiftlab:lab1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"linkinfo":{"info_kind":"bridge"}},
            {"ifindex":5,"ifname":"sl-bm-1","master":"baremetal","flags":["BROADCAST"],"linkinfo":{"info_kind":"veth"}},
            {"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP"]}]"#;
        let s = parse_links(j).unwrap();
        assert_eq!(
            s["baremetal"],
            link(Some("shiftlab:lab1"), None, "bridge", true)
        );
        assert_eq!(s["sl-bm-1"], link(None, Some("baremetal"), "veth", false));
        assert_eq!(s["lo"].kind, None);
    }
}
