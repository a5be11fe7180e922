//! `list` and `status`: what libvirt holds for shiftlab clusters.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;

use super::Host;

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ClusterSummary {
    pub cluster: String,
    pub network: Option<String>,
    pub nodes: usize,
    pub running: usize,
}

pub fn list(host: &Host) -> Result<Vec<ClusterSummary>> {
    let mut by: BTreeMap<String, ClusterSummary> = BTreeMap::new();
    fn entry<'a>(
        by: &'a mut BTreeMap<String, ClusterSummary>,
        cluster: &str,
    ) -> &'a mut ClusterSummary {
        by.entry(cluster.to_string())
            .or_insert_with(|| ClusterSummary {
                cluster: cluster.to_string(),
                network: None,
                nodes: 0,
                running: 0,
            })
    }
    for (n, o) in host.owned_networks()? {
        entry(&mut by, &o.cluster).network = Some(n.name()?);
    }
    for (d, o) in host.owned_domains()? {
        let e = entry(&mut by, &o.cluster);
        e.nodes += 1;
        if d.is_active()? {
            e.running += 1;
        }
    }
    Ok(by.into_values().collect())
}

#[derive(Debug, Serialize)]
pub struct NodeStatus {
    pub name: String,
    pub role: String,
    pub state: String,
    pub mac: Option<String>,
    pub planned_ip: Option<String>,
    pub leased_ip: Option<String>,
    /// A dual-stack lab's DHCPv6 lease to it, when libvirt knows its MAC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leased_ip6: Option<String>,
    pub console_log: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct ClusterStatus {
    pub cluster: String,
    pub network: Option<String>,
    pub network_active: bool,
    pub nodes: Vec<NodeStatus>,
}

fn first_attr(xml: &str, tag: &str, attr: &str) -> Option<String> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    doc.descendants()
        .find(|n| n.tag_name().name() == tag && n.attribute(attr).is_some())
        .and_then(|n| n.attribute(attr))
        .map(str::to_string)
}

pub fn status(host: &Host, cluster: &str) -> Result<Option<ClusterStatus>> {
    let networks: Vec<_> = host
        .owned_networks()?
        .into_iter()
        .filter(|(_, o)| o.cluster == cluster)
        .collect();
    // Planned addresses are the network's reservations.
    let mut planned: BTreeMap<String, String> = BTreeMap::new();
    let mut network = None;
    let mut network_active = false;
    for (n, _) in &networks {
        network = Some(n.name()?);
        network_active = n.is_active()?;
        let xml = n.xml_desc(0)?;
        if let Ok(doc) = roxmltree::Document::parse(&xml) {
            for h in doc.descendants().filter(|h| h.tag_name().name() == "host") {
                if let (Some(mac), Some(ip)) = (h.attribute("mac"), h.attribute("ip")) {
                    planned.insert(mac.to_lowercase(), ip.to_string());
                }
            }
        }
    }
    let mut nodes = Vec::new();
    for (d, o) in host
        .owned_domains()?
        .into_iter()
        .filter(|(_, o)| o.cluster == cluster)
    {
        let xml = d.xml_desc(0)?;
        let mac = first_attr(&xml, "mac", "address").map(|m| m.to_lowercase());
        let active = d.is_active()?;
        let leases = if active {
            d.interface_addresses(virt::sys::VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE, 0)
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        // libvirt's address types: 0 IPv4, 1 IPv6 (virIPAddrType).
        let leased = |typed: i64| {
            leases
                .iter()
                .flat_map(|i| &i.addrs)
                .find(|a| a.typed == typed)
                .map(|a| a.addr.clone())
        };
        let (leased_ip, leased_ip6) = (leased(0), leased(1));
        let state = match d.state()?.0 {
            virt::enumutil::Enum::Known(s) => format!("{s:?}").to_lowercase(),
            virt::enumutil::Enum::Unknown(n) => format!("unknown ({n})"),
        };
        nodes.push(NodeStatus {
            name: d.name()?,
            role: o.role.clone(),
            state,
            planned_ip: mac.as_ref().and_then(|m| planned.get(m).cloned()),
            mac,
            leased_ip,
            leased_ip6,
            console_log: first_attr(&xml, "log", "file"),
        });
    }
    if nodes.is_empty() && network.is_none() {
        return Ok(None);
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Some(ClusterStatus {
        cluster: cluster.to_string(),
        network,
        network_active,
        nodes,
    }))
}
