//! What changed between two plans: a fingerprint to notice, and a readable list to
//! say what. Pure; the install driver uses it to refuse building a different plan
//! than the one the installer's assets were made from.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Plan;

/// Plan fields that shape only how a node's VM is presented, not the installer's
/// assets or the cluster: a change never pins (an installed cluster takes it, and
/// a cluster recorded before the field existed is not refused), and applies at
/// the next `create infra` (a stopped domain redefined, a running one reported
/// as drift).
pub const NOT_PINNED: &[&str] = &["libvirt.graphics"];

fn pinned(line: &str) -> bool {
    !NOT_PINNED.iter().any(|p| {
        line.strip_prefix(p)
            .is_some_and(|rest| rest.starts_with(':'))
    })
}

/// [`diff`] without the [`NOT_PINNED`] fields: what a done target pins.
pub fn pinned_diff(old: &Plan, new: &Plan) -> Vec<String> {
    diff(old, new).into_iter().filter(|l| pinned(l)).collect()
}

/// sha256 of the plan's JSON: equal plans, equal fingerprints.
pub fn fingerprint(plan: &Plan) -> String {
    let json = serde_json::to_vec(plan).expect("a plan serialises");
    hex::encode(Sha256::digest(json))
}

/// Every difference from `old` to `new`, one line each, as `path: old → new`,
/// `path: added` or `path: removed`. Lists of named things (nodes, backends, …)
/// are compared by name, so adding a worker reads as one added node.
pub fn diff(old: &Plan, new: &Plan) -> Vec<String> {
    let (a, b) = (
        serde_json::to_value(old).expect("a plan serialises"),
        serde_json::to_value(new).expect("a plan serialises"),
    );
    let mut out = Vec::new();
    walk("", &a, &b, &mut out);
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn short(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

/// The key of each item of a list of named things: its `name`, with its `type`
/// when it has one, as DNS records do (a dual-stack node's A and AAAA records
/// share a name). `None` when an item has no name.
fn named(items: &[Value]) -> Option<Vec<(String, &Value)>> {
    items
        .iter()
        .map(|v| {
            let name = v.get("name")?.as_str()?;
            let key = match v.get("type").and_then(Value::as_str) {
                Some(t) => format!("{name} {t}"),
                None => name.to_string(),
            };
            Some((key, v))
        })
        .collect()
}

fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                match y.get(k) {
                    Some(vb) => walk(&join(path, k), va, vb, out),
                    None => out.push(format!("{}: removed", join(path, k))),
                }
            }
            for k in y.keys().filter(|k| !x.contains_key(*k)) {
                out.push(format!("{}: added", join(path, k)));
            }
        }
        (Value::Array(x), Value::Array(y)) => match (named(x), named(y)) {
            (Some(nx), Some(ny)) if !nx.is_empty() || !ny.is_empty() => {
                for (name, va) in &nx {
                    let p = format!("{path}[{name}]");
                    match ny.iter().find(|(n, _)| n == name) {
                        Some((_, vb)) => walk(&p, va, vb, out),
                        None => out.push(format!("{p}: removed")),
                    }
                }
                for (name, _) in ny.iter().filter(|(n, _)| !nx.iter().any(|(m, _)| m == n)) {
                    out.push(format!("{path}[{name}]: added"));
                }
            }
            _ if x != y => out.push(format!("{path}: {} → {}", short(a), short(b))),
            _ => {}
        },
        _ if a != b => out.push(format!("{path}: {} → {}", short(a), short(b))),
        _ => {}
    }
}

/// The workers' count of a plan.
pub fn workers(plan: &Plan) -> usize {
    plan.nodes
        .iter()
        .filter(|n| n.role == crate::spec::Role::Worker)
        .count()
}

/// The differences from `old` to `new` besides the workers themselves: both plans
/// without their worker nodes and every list entry naming one (DHCP reservations,
/// load-balancer backends, DNS records, BMC systems, …). Empty when only the
/// worker count changed, which an installed cluster can take (`scale`); anything
/// else it cannot.
pub fn beyond_workers(old: &Plan, new: &Plan) -> Vec<String> {
    let mut names = std::collections::BTreeSet::new();
    for n in old.nodes.iter().chain(&new.nodes) {
        if n.role == crate::spec::Role::Worker {
            names.insert(n.name.clone());
            names.insert(n.fqdn.clone());
        }
    }
    let strip = |p: &Plan| {
        let mut v = serde_json::to_value(p).expect("a plan serialises");
        drop_naming(&mut v, &names);
        v
    };
    let mut out = Vec::new();
    walk("", &strip(old), &strip(new), &mut out);
    out.retain(|l| pinned(l));
    out
}

/// Remove, in every array under `v`, the objects whose `name`, `node`,
/// `hostname` or `value` (a PTR record's target) is one of `names`.
fn drop_naming(v: &mut Value, names: &std::collections::BTreeSet<String>) {
    match v {
        Value::Array(items) => {
            items.retain(|i| {
                !["name", "node", "hostname", "value"].iter().any(|k| {
                    i.get(k)
                        .and_then(Value::as_str)
                        .is_some_and(|s| names.contains(s))
                })
            });
            items.iter_mut().for_each(|i| drop_naming(i, names));
        }
        Value::Object(map) => map.values_mut().for_each(|i| drop_naming(i, names)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &str) -> Plan {
        let text = format!(
            "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\n{extra}"
        );
        crate::plan::from_yaml(&text)
    }

    #[test]
    fn equal_plans_have_equal_fingerprints_and_no_diff() {
        assert_eq!(fingerprint(&plan("")), fingerprint(&plan("")));
        assert!(diff(&plan(""), &plan("")).is_empty());
    }

    #[test]
    fn an_added_worker_reads_as_one_node() {
        let (a, b) = (plan("workers: 2\n"), plan("workers: 3\n"));
        assert_ne!(fingerprint(&a), fingerprint(&b));
        let d = diff(&a, &b);
        assert!(
            d.contains(&"nodes[lab1-worker-2]: added".to_string()),
            "{d:#?}"
        );
        // Existing nodes are unchanged (the plan never renumbers them).
        assert!(
            !d.iter().any(|l| l.starts_with("nodes[lab1-worker-0]")),
            "{d:#?}"
        );
    }

    #[test]
    fn a_changed_value_shows_both_sides() {
        let d = diff(
            &plan("network:\n  cidr: 192.168.126.0/24\n"),
            &plan("network:\n  cidr: 192.168.127.0/24\n"),
        );
        assert!(
            d.contains(&"network.cidr: 192.168.126.0/24 → 192.168.127.0/24".to_string()),
            "{d:#?}"
        );
    }

    #[test]
    fn only_the_workers_changing_is_nothing_beyond_them() {
        let (one, three) = (plan("workers: 1\n"), plan("workers: 3\n"));
        assert!(!diff(&one, &three).is_empty());
        assert_eq!(beyond_workers(&one, &three), Vec::<String>::new());
        assert_eq!(beyond_workers(&three, &one), Vec::<String>::new());
        assert_eq!((workers(&one), workers(&three)), (1, 3));
        // Anything else is named, the worker change itself not.
        let d = beyond_workers(&one, &plan("workers: 3\nctlplane: {memory: 20000}\n"));
        assert!(d.iter().all(|l| l.contains("ctlplane")), "{d:#?}");
        assert!(!d.is_empty());
        // A dual-stack lab: the workers' IPv6 reservations and records too;
        // an A and a AAAA record of one name are two records.
        let ds = |w: u32| {
            plan(&format!(
                "workers: {w}\nnetwork:\n  cidr: [192.168.126.0/24, 'fd00:1:2:3::/64']\n"
            ))
        };
        assert!(diff(&ds(1), &ds(1)).is_empty());
        assert_eq!(beyond_workers(&ds(1), &ds(3)), Vec::<String>::new());
        assert_eq!(beyond_workers(&ds(3), &ds(1)), Vec::<String>::new());
        // From compact to workers: the routers leave the control planes.
        let d = beyond_workers(&plan("workers: 0\n"), &one);
        assert!(
            d.iter().any(|l| l.starts_with("load_balancer.frontends")),
            "{d:#?}"
        );
    }
}
