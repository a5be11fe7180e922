//! `shiftlab scale NAME --workers N`: the plan for N workers (new workers planned
//! deterministically after the existing ones, which never change), then:
//!
//! - up: the infra target converges libvirt on the new plan (volumes, domains,
//!   DHCP/DNS entries), the new workers are started, the plan is recorded so that
//!   `shiftlab serve` puts them into the ingress backends, and with an API their
//!   CSRs are approved until they are Ready (`kube::ready`);
//! - down: the workers to go are the highest-numbered; with an API each is
//!   cordoned and drained through evictions that honour PodDisruptionBudgets
//!   (`kube::drain`), its Node deleted; then its VM, volumes, DHCP reservation and
//!   DNS entries go, and the recorded plan drops it from the load balancer.
//!
//! Refused: going below the ingress controller's replicas (routers run on
//! workers; fewer workers than replicas leaves routers unscheduled).

use anyhow::{bail, Context, Result};

use crate::libvirt::Host;
use crate::plan::{Node, Plan};
use crate::spec::Role;

/// What a scale changes.
#[derive(Debug, PartialEq, Eq)]
pub struct Change<'a> {
    pub add: Vec<&'a Node>,
    pub remove: Vec<&'a Node>,
}

/// The workers to add (in `new`, not in `old`) and to remove (in `old`, not in
/// `new`), the latter highest index first. Refused when `new` has fewer workers
/// than `ingress_replicas` (when the API said how many) and fewer than `old`.
pub fn change<'a>(
    old: &'a Plan,
    new: &'a Plan,
    ingress_replicas: Option<u32>,
) -> Result<Change<'a>> {
    let workers = |p: &'a Plan| {
        p.nodes
            .iter()
            .filter(|n| n.role == Role::Worker)
            .collect::<Vec<_>>()
    };
    let (was, will) = (workers(old), workers(new));
    for n in &will {
        if let Some(o) = was.iter().find(|o| o.name == n.name) {
            if o.mac != n.mac || o.ip != n.ip {
                bail!(
                    "{} would change (address or MAC) in the new plan; refusing",
                    n.name
                );
            }
        }
    }
    if let Some(r) = ingress_replicas {
        if (will.len() as u32) < r && will.len() < was.len() {
            bail!(
                "the default ingress controller runs {r} router replicas on workers: {} worker(s) would leave {} of them unscheduled and the routes served by fewer. Scale it first (oc -n openshift-ingress-operator patch ingresscontroller/default --type merge -p '{{\"spec\":{{\"replicas\":{}}}}}') or keep {r} workers",
                will.len(),
                r - will.len() as u32,
                will.len().max(1)
            );
        }
    }
    let add = will
        .iter()
        .filter(|n| !was.iter().any(|o| o.name == n.name))
        .copied()
        .collect();
    let mut remove: Vec<&Node> = was
        .iter()
        .filter(|o| !will.iter().any(|n| n.name == o.name))
        .copied()
        .collect();
    remove.sort_by_key(|n| std::cmp::Reverse(n.index));
    Ok(Change { add, remove })
}

/// Remove a node's DHCP reservation and DNS host entry from the cluster's
/// network (libvirt `virNetworkUpdate` DELETE, the elements as the network holds
/// them). Idempotent: entries already gone are not looked for again.
pub fn forget_in_network(host: &Host, plan: &Plan, node: &Node) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let Some(net) = host.network(&plan.network.name)? else {
        return Ok(removed);
    };
    let xml = net.xml_desc(0).context("reading the network XML")?;
    let doc = roxmltree::Document::parse(&xml).context("parsing network XML")?;
    let flags = virt::sys::VIR_NETWORK_UPDATE_AFFECT_CONFIG
        | if net.is_active()? {
            virt::sys::VIR_NETWORK_UPDATE_AFFECT_LIVE
        } else {
            0
        };
    let ip = node.ip.to_string();
    let mut edits = Vec::new();
    for h in doc.descendants().filter(|n| n.tag_name().name() == "host") {
        let in_dhcp = h.parent().is_some_and(|p| p.tag_name().name() == "dhcp");
        let in_dns = h.parent().is_some_and(|p| p.tag_name().name() == "dns");
        let ours = h.attribute("ip") == Some(ip.as_str())
            || h.attribute("mac")
                .is_some_and(|m| m.eq_ignore_ascii_case(&node.mac));
        if !ours {
            continue;
        }
        let text = xml[h.range()].to_string();
        if in_dhcp {
            edits.push((
                virt::sys::VIR_NETWORK_SECTION_IP_DHCP_HOST,
                text,
                "reservation",
            ));
        } else if in_dns {
            edits.push((virt::sys::VIR_NETWORK_SECTION_DNS_HOST, text, "DNS entry"));
        }
    }
    for (section, text, what) in edits {
        net.update(
            virt::sys::VIR_NETWORK_UPDATE_COMMAND_DELETE,
            section,
            -1,
            &text,
            flags,
        )
        .with_context(|| format!("removing the {what} of {}", node.name))?;
        removed.push(format!("{what} of {} ({ip})", node.name));
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(workers: u32) -> Plan {
        let text = format!("cluster: lab1\ndomain: example.com\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: {workers}\n");
        crate::plan::derive(
            &crate::spec::from_str(&text, "t.yaml", &crate::spec::Env::default())
                .unwrap()
                .spec,
        )
    }

    #[test]
    fn up_adds_after_the_existing_and_down_removes_the_last_first() {
        let (one, three) = (plan(1), plan(3));
        let c = change(&one, &three, None).unwrap();
        let names = |v: &[&Node]| v.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&c.add), ["lab1-worker-1", "lab1-worker-2"]);
        assert!(c.remove.is_empty());
        // The existing worker is the same node in both plans.
        assert_eq!(one.node("lab1-worker-0"), three.node("lab1-worker-0"));
        let c = change(&three, &one, None).unwrap();
        assert_eq!(names(&c.remove), ["lab1-worker-2", "lab1-worker-1"]);
        assert!(change(&three, &three, None).unwrap().add.is_empty());
    }

    #[test]
    fn below_the_ingress_replicas_is_refused_with_the_reason() {
        let (one, three) = (plan(1), plan(3));
        let e = change(&three, &one, Some(2)).unwrap_err().to_string();
        assert!(
            e.contains("2 router replicas") && e.contains("1 of them unscheduled"),
            "{e}"
        );
        // Up is never refused; neither is down to the replicas.
        assert!(change(&one, &three, Some(2)).is_ok());
        assert!(change(&three, &plan(2), Some(2)).is_ok());
    }
}
