//! The human view of a plan (`shiftlab plan`, default output).

use std::fmt::Write;
use std::net::SocketAddr;

use super::{Boot, Plan, Start};

fn row(out: &mut String, cols: &[String], widths: &[usize]) {
    let mut line = String::new();
    for (i, c) in cols.iter().enumerate() {
        if i + 1 == cols.len() {
            line.push_str(c);
        } else {
            let _ = write!(line, "{:<w$}  ", c, w = widths[i]);
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

/// A table as a string: columns padded to their widest cell.
pub fn render_table_rows(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    table(&mut out, header, rows);
    out
}

/// Columns padded to their widest cell.
pub fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    row(
        out,
        &header.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
        &widths,
    );
    for r in rows {
        row(out, r, &widths);
    }
}

pub fn render_table(plan: &Plan) -> String {
    let mut out = String::new();
    let n = &plan.network;
    let _ = writeln!(
        out,
        "cluster {} ({} {}, method {}, platform {}){}",
        plan.cluster_domain,
        plan.distribution,
        plan.version,
        plan.method,
        plan.platform,
        if plan.rehearsal { ", rehearsal" } else { "" }
    );
    let mode = match n.mode {
        crate::spec::NetworkMode::Nat => "nat",
        crate::spec::NetworkMode::Bridge => "bridge",
    };
    match (n.cidr, n.gateway, &n.dhcp) {
        (Some(cidr), Some(gateway), Some(dhcp)) => {
            let _ = writeln!(
                out,
                "network {} ({mode}, bridge {}): {cidr} gateway {gateway}, DHCP {}-{}",
                n.name, n.bridge, dhcp.start, dhcp.end
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "network {} ({mode}, bridge {}): IPv6 single-stack",
                n.name, n.bridge
            );
        }
    }
    if let Some(v6) = &n.ipv6 {
        let _ = writeln!(
            out,
            "network IPv6 ({} family): {} gateway {}, DHCPv6 {}-{}; api {}  ingress {}",
            if v6.primary { "primary" } else { "second" },
            v6.cidr,
            v6.gateway,
            v6.dhcp.start,
            v6.dhcp.end,
            plan.vips.api6.map(|a| a.to_string()).unwrap_or_default(),
            plan.vips
                .ingress6
                .map(|a| a.to_string())
                .unwrap_or_default(),
        );
    }
    if let Some(v) = &n.veth {
        let _ = writeln!(
            out,
            "installer's bootstrap VM on {} (made by shiftlab, veth {}/{} to {})",
            v.bridge, v.bridge_end, v.nat_end, v.nat
        );
    }
    let _ = writeln!(
        out,
        "api {}  ingress {}  libvirt {} pool {}\n",
        plan.vips.api_ip(),
        plan.vips.ingress_ip(),
        plan.libvirt.uri,
        plan.libvirt.pool
    );
    let rows: Vec<Vec<String>> = plan
        .nodes
        .iter()
        .map(|node| {
            let disks: Vec<String> = node
                .disks
                .iter()
                .map(|d| format!("{}G", d.size_gb))
                .collect();
            vec![
                node.name.clone(),
                node.role.to_string(),
                match node.ipv6 {
                    Some(v6) if node.ipv4().is_some() => format!("{} {v6}", node.ip),
                    _ => node.ip.to_string(),
                },
                node.mac.clone(),
                node.vcpus.to_string(),
                format!("{} MiB", node.memory_mib),
                disks.join("+"),
                match node.boot {
                    Boot::DiskFwCfg => "disk+fw_cfg",
                    // The live ISO installs to the disk, the node reboots from it.
                    Boot::Iso => "iso, then disk",
                    Boot::VirtualMedia => "virtual media",
                }
                .into(),
                match node.start {
                    Start::Infra => "with infra",
                    Start::AfterBootstrap => "after bootstrap",
                    Start::Bmc => "by installer (BMC)",
                }
                .into(),
            ]
        })
        .collect();
    table(
        &mut out,
        &[
            "NODE", "ROLE", "IP", "MAC", "CPU", "MEMORY", "DISKS", "BOOT", "START",
        ],
        &rows,
    );
    out.push('\n');
    let rows: Vec<Vec<String>> = plan
        .dns
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                match r.kind {
                    super::RecordType::A => "A",
                    super::RecordType::PTR => "PTR",
                    super::RecordType::Wildcard => "A (wildcard)",
                    super::RecordType::AAAA => "AAAA",
                    super::RecordType::Wildcard6 => "AAAA (wildcard)",
                }
                .into(),
                r.value.clone(),
            ]
        })
        .collect();
    table(&mut out, &["DNS NAME", "TYPE", "VALUE"], &rows);
    if let Some(lb) = &plan.load_balancer {
        out.push('\n');
        let rows: Vec<Vec<String>> = lb
            .frontends
            .iter()
            .map(|f| {
                let backends: Vec<String> = f
                    .backends
                    .iter()
                    .map(|b| {
                        if b.bootstrap {
                            format!("{} (bootstrap)", b.node)
                        } else {
                            b.node.clone()
                        }
                    })
                    .collect();
                vec![
                    f.name.clone(),
                    f.addresses()
                        .into_iter()
                        .map(|a| SocketAddr::new(a, f.port).to_string())
                        .collect::<Vec<_>>()
                        .join(" "),
                    match f.check {
                        super::HealthCheck::HttpsReadyz => "https /readyz",
                        super::HealthCheck::Tcp => "tcp",
                    }
                    .to_string(),
                    backends.join(", "),
                ]
            })
            .collect();
        table(
            &mut out,
            &["LB FRONTEND", "LISTEN", "CHECK", "BACKENDS"],
            &rows,
        );
    }
    if let Some(b) = &plan.bmc {
        out.push('\n');
        let _ = writeln!(out, "BMC {} (user {})", b.endpoint, b.username);
        let rows: Vec<Vec<String>> = plan
            .nodes
            .iter()
            .filter_map(|n| {
                n.bmc
                    .as_ref()
                    .map(|b| vec![n.name.clone(), b.address.clone()])
            })
            .collect();
        table(&mut out, &["NODE", "BMC ADDRESS"], &rows);
    }
    if let Some(k) = &plan.kubevirt {
        out.push('\n');
        let _ = writeln!(
            out,
            "KubeVirt namespace {} ({} network{}), kubeconfig {}{}",
            k.namespace,
            match k.network {
                crate::spec::PodNetwork::Pod => "pod",
                crate::spec::PodNetwork::Multus => "multus",
            },
            match k.network {
                crate::spec::PodNetwork::Pod => format!(", {} Services", k.service_type.as_str()),
                crate::spec::PodNetwork::Multus => format!(" on bridge {}", k.bridge),
            },
            k.kubeconfig.display(),
            k.context
                .as_ref()
                .map(|c| format!(" context {c}"))
                .unwrap_or_default()
        );
        let rows: Vec<Vec<String>> = k
            .objects
            .iter()
            .map(|o| {
                let (kind, name) = o.split_once('/').unwrap_or((o, ""));
                vec![kind.to_string(), name.to_string()]
            })
            .collect();
        table(&mut out, &["KIND", "NAME"], &rows);
    }
    out
}
