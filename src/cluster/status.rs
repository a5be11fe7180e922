//! `shiftlab status`: one function gathers it, one type holds it.

use anyhow::{bail, Result};
use serde::Serialize;

use crate::install::state::InstallStatus;
use crate::libvirt::inspect::{self, ClusterStatus, ClusterSummary};
use crate::libvirt::Host;
use crate::plan::render_table_rows;
use crate::serve::ServicesStatus;
use crate::state::{ClusterDir, StateDir};

/// Everything known of a cluster. Its JSON is `shiftlab status -o json`'s.
#[derive(Debug, Serialize)]
pub struct Status {
    /// The libvirt objects (network, nodes) at the top level.
    #[serde(flatten)]
    pub libvirt: ClusterStatus,
    /// The host services, known where the cluster's plan is recorded.
    pub services: Option<ServicesStatus>,
    /// The install targets, known once one ran.
    pub install: Option<InstallStatus>,
    /// The installer's own bootstrap VM (bare-metal IPI), while it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub installer_bootstrap: Option<crate::install::ipi::BootstrapVm>,
}

/// Gather the status of `cluster` on `host`. Changes nothing.
pub fn status(host: &Host, state: &StateDir, cluster: &ClusterDir) -> Result<Status> {
    let libvirt = match inspect::status(host, cluster.name())? {
        Some(l) => l,
        // Planned, or installing before `infra` made anything: its services
        // and targets without libvirt objects.
        None if cluster.has_plan()
            || cluster.install_state().is_file()
            || cluster.install_plan().is_file() =>
        {
            ClusterStatus {
                cluster: cluster.name().to_string(),
                network: None,
                network_active: false,
                nodes: Vec::new(),
            }
        }
        None => bail!(
            "no shiftlab cluster named {} on {}",
            cluster.name(),
            host.uri
        ),
    };
    let services = if cluster.has_plan() {
        Some(crate::serve::services_status(state, cluster.name())?)
    } else {
        None
    };
    Ok(Status {
        libvirt,
        services,
        install: crate::install::status(cluster)?,
        // Status shows what it can: a metadata.json it cannot read is a warning.
        installer_bootstrap: crate::install::ipi::bootstrap_vm(host, cluster).unwrap_or_else(|e| {
            tracing::warn!("the installer's bootstrap VM: {e:#}");
            None
        }),
    })
}

impl Status {
    /// The human form.
    pub fn table(&self) -> String {
        let st = &self.libvirt;
        let mut s = format!(
            "cluster {}: network {} ({})\n\n",
            st.cluster,
            st.network.clone().unwrap_or_else(|| "-".into()),
            if st.network_active {
                "active"
            } else {
                "inactive"
            }
        );
        let dash = || "-".to_string();
        let rows: Vec<Vec<String>> = st
            .nodes
            .iter()
            .map(|n| {
                vec![
                    n.name.clone(),
                    n.role.clone(),
                    n.state.clone(),
                    n.mac.clone().unwrap_or_else(dash),
                    n.planned_ip.clone().unwrap_or_else(dash),
                    n.leased_ip.clone().unwrap_or_else(dash),
                    n.console_log.clone().unwrap_or_else(dash),
                ]
            })
            .collect();
        s.push_str(&render_table_rows(
            &[
                "NODE",
                "ROLE",
                "STATE",
                "MAC",
                "PLANNED IP",
                "LEASED IP",
                "CONSOLE LOG",
            ],
            &rows,
        ));
        if let Some(b) = &self.installer_bootstrap {
            s.push_str(&format!(
                "\ninstaller's bootstrap VM {}: {} on {}\n",
                b.name,
                if b.running { "running" } else { "shut off" },
                if b.bridges.is_empty() {
                    "no bridge".to_string()
                } else {
                    b.bridges.join(", ")
                }
            ));
        }
        if let Some(sv) = &self.services {
            s.push('\n');
            s.push_str(&sv.table());
        }
        if let Some(i) = &self.install {
            s.push_str(&i.table());
        }
        s
    }
}

/// `shiftlab list`'s table.
pub fn list_table(clusters: &[ClusterSummary]) -> String {
    let rows: Vec<Vec<String>> = clusters
        .iter()
        .map(|c| {
            vec![
                c.cluster.clone(),
                c.network.clone().unwrap_or_else(|| "-".into()),
                c.nodes.to_string(),
                c.running.to_string(),
            ]
        })
        .collect();
    render_table_rows(&["CLUSTER", "NETWORK", "NODES", "RUNNING"], &rows)
}
