//! `list`: the clusters of a state directory and those libvirt holds, one row
//! each, with what one side lacks. Without libvirt the state alone is listed.

use anyhow::Result;
use serde::Serialize;

use crate::libvirt::inspect::ClusterSummary;
use crate::plan::Plan;
use crate::state::StateDir;

/// One cluster as `list` shows it. `nodes` and `running` are `None` when
/// libvirt was not reached.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Listed {
    pub cluster: String,
    pub network: Option<String>,
    pub nodes: Option<usize>,
    pub running: Option<usize>,
    /// Whether the state directory has the cluster.
    pub state: bool,
    /// What is not there that should be ("no VMs", "no state").
    pub missing: Vec<String>,
}

/// A cluster of the state directory: its name, and its plan when recorded
/// (`Err`: why it is not readable).
pub type InState = (String, Option<Result<Plan, String>>);

/// Both sides merged, by name. `libvirt` is what the host at `uri` holds, or
/// `None` when it was not reached.
pub fn merge(state: Vec<InState>, libvirt: Option<&[ClusterSummary]>, uri: &str) -> Vec<Listed> {
    let mut rows: std::collections::BTreeMap<String, Listed> = Default::default();
    for (name, plan) in state {
        let mut missing = Vec::new();
        match &plan {
            None => missing.push("no plan (create infra not run)".to_string()),
            Some(Err(why)) => missing.push(format!("plan unreadable: {why}")),
            Some(Ok(p)) if p.kubevirt.is_some() => {}
            Some(Ok(p)) if libvirt.is_some() && p.libvirt.uri != uri => {
                missing.push(format!("its VMs are on {}, not looked at", p.libvirt.uri))
            }
            Some(Ok(_)) if libvirt.is_some_and(|l| !l.iter().any(|c| c.cluster == name)) => {
                missing.push(format!("no VMs or network on {uri}"))
            }
            Some(Ok(_)) => {}
        }
        rows.insert(
            name.clone(),
            Listed {
                cluster: name,
                network: None,
                nodes: libvirt.map(|_| 0),
                running: libvirt.map(|_| 0),
                state: true,
                missing,
            },
        );
    }
    for c in libvirt.unwrap_or_default() {
        let row = rows.entry(c.cluster.clone()).or_insert_with(|| Listed {
            cluster: c.cluster.clone(),
            network: None,
            nodes: None,
            running: None,
            state: false,
            missing: vec!["no state".into()],
        });
        if c.nodes == 0 && row.state && row.missing.is_empty() {
            row.missing.push("no VMs".into());
        }
        row.network = c.network.clone();
        row.nodes = Some(c.nodes);
        row.running = Some(c.running);
    }
    rows.into_values().collect()
}

/// The state directory's clusters, each with its plan when recorded.
pub fn in_state(state: &StateDir) -> Result<Vec<InState>> {
    let mut out = Vec::new();
    for dir in state.cluster_dirs()? {
        let plan = match dir.has_plan() {
            Ok(false) => None,
            Ok(true) => Some(dir.read_plan().map_err(|e| format!("{e:#}"))),
            Err(e) => Some(Err(format!("{e:#}"))),
        };
        out.push((dir.name().to_string(), plan));
    }
    Ok(out)
}

pub fn table(rows: &[Listed]) -> String {
    let n = |v: Option<usize>| v.map_or_else(|| "?".into(), |v| v.to_string());
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|c| {
            vec![
                c.cluster.clone(),
                c.network.clone().unwrap_or_else(|| "-".into()),
                n(c.nodes),
                n(c.running),
                if c.missing.is_empty() {
                    "-".into()
                } else {
                    c.missing.join("; ")
                },
            ]
        })
        .collect();
    crate::plan::render_table_rows(
        &["CLUSTER", "NETWORK", "NODES", "RUNNING", "MISSING"],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(name: &str, uri: &str) -> Plan {
        crate::plan::from_yaml(&format!("cluster: {name}\ndomain: example.com\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nlibvirt:\n  uri: {uri}\n"))
    }

    fn summary(name: &str, nodes: usize) -> ClusterSummary {
        ClusterSummary {
            cluster: name.into(),
            network: Some(format!("shiftlab-{name}")),
            nodes,
            running: nodes,
        }
    }

    #[test]
    fn each_side_says_what_the_other_lacks() {
        let u = "qemu:///system";
        let state = vec![
            ("lab1".to_string(), Some(Ok(plan("lab1", u)))),
            ("lab2".to_string(), Some(Ok(plan("lab2", u)))),
            ("lab3".to_string(), None),
            (
                "lab4".to_string(),
                Some(Ok(plan("lab4", "qemu+ssh://h/system"))),
            ),
        ];
        let libvirt = [summary("lab1", 3), summary("lab5", 1)];
        let rows = merge(state, Some(&libvirt), u);
        let missing: Vec<(&str, Vec<&str>)> = rows
            .iter()
            .map(|r| {
                (
                    r.cluster.as_str(),
                    r.missing.iter().map(|m| m.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            missing,
            [
                ("lab1", vec![]),
                ("lab2", vec!["no VMs or network on qemu:///system"]),
                ("lab3", vec!["no plan (create infra not run)"]),
                (
                    "lab4",
                    vec!["its VMs are on qemu+ssh://h/system, not looked at"]
                ),
                ("lab5", vec!["no state"]),
            ]
        );
        assert_eq!(rows[0].nodes, Some(3));
        assert!(!rows[4].state);
        let t = table(&rows);
        assert!(t.lines().any(|l| l.starts_with("lab1 ")), "{t}");
    }

    #[test]
    fn without_libvirt_the_state_alone_with_unknown_counts() {
        let rows = merge(
            vec![("lab1".to_string(), Some(Ok(plan("lab1", "qemu:///system"))))],
            None,
            "qemu:///system",
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].nodes, None);
        assert!(rows[0].missing.is_empty(), "{:?}", rows[0].missing);
        assert!(table(&rows).contains("lab1  "));
    }
}
