use std::io::Write;

use anyhow::{bail, Context, Result};

use crate::cli::inspect::{ConnectArgs, DestroyArgs, DestroyCommand, ListArgs, StatusArgs};
use crate::libvirt::{destroy, inspect, ledger, Host};
use crate::output::emit;
use crate::plan::render_table_rows;
use crate::state::{ClusterName, StateDir};

fn uri(connect: &ConnectArgs, recorded: Option<String>) -> String {
    crate::libvirt::uri(connect.uri.as_deref().or(recorded.as_deref()))
}

pub fn list(args: &ListArgs, out: &mut dyn Write) -> Result<()> {
    let host = Host::open(&uri(&args.connect, None))?;
    let clusters = inspect::list(&host)?;
    emit(out, args.output, &clusters, || {
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
    })
}

pub fn status(args: &StatusArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let recorded = ledger::load(&state.cluster(&args.name))?.map(|l| l.uri);
    let host = Host::open(&uri(&args.connect, recorded))?;
    let Some(libvirt) = inspect::status(&host, &args.name)? else {
        bail!("no shiftlab cluster named {} on {}", args.name, host.uri);
    };
    // The host services are known only where the cluster's plan is recorded.
    let services = if state.cluster(&args.name).join("plan.json").exists() {
        Some(crate::serve::services_status(state, &args.name)?)
    } else {
        None
    };
    let status = FullStatus { libvirt, services };
    emit(out, args.output, &status, || {
        let st = &status.libvirt;
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
        let rows: Vec<Vec<String>> = st
            .nodes
            .iter()
            .map(|n| {
                let dash = || "-".to_string();
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
        if let Some(sv) = &status.services {
            s.push_str(&services_table(sv));
        }
        s
    })
}

pub fn destroy(cmd: &DestroyCommand, state: &StateDir) -> Result<()> {
    let DestroyCommand::Cluster(args) = cmd;
    destroy_cluster(args, state)
}

fn destroy_cluster(args: &DestroyArgs, state: &StateDir) -> Result<()> {
    let (name, spec_uri) = match (&args.name, &args.file) {
        (Some(n), _) => (n.clone(), None),
        (None, Some(f)) => {
            let loaded = super::load_spec(f)?;
            (
                ClusterName::parse(&loaded.spec.cluster)?,
                Some(loaded.spec.libvirt.uri.clone()),
            )
        }
        (None, None) => bail!("name the cluster or give its file with -f"),
    };
    // Not under a running install or create: they hold the cluster's lock.
    let _lock = super::lock_if_exists(state, &name)?;
    let dir = state.cluster(&name);
    let recorded = ledger::load(&dir)?.map(|l| l.uri);
    let host = Host::open(&uri(&args.connect, spec_uri.or(recorded)))?;
    // The host services first: HAProxy stopped, host DNS entries removed.
    let had_services = dir.join("plan.json").exists();
    crate::serve::forget_cluster(state, &name).context("stopping the cluster's host services")?;
    let mut removed = destroy::destroy(&host, &name, state, args.purge_images)?;
    if had_services {
        removed.insert(
            0,
            format!("host services of {name} (load balancer, HTTP, host DNS)"),
        );
    }
    if removed.is_empty() {
        println!(
            "nothing to remove: no shiftlab objects for {name} on {}",
            host.uri
        );
    }
    for r in removed {
        println!("removed {r}");
    }
    Ok(())
}

#[derive(serde::Serialize)]
struct FullStatus {
    #[serde(flatten)]
    libvirt: inspect::ClusterStatus,
    services: Option<crate::serve::ServicesStatus>,
}

fn services_table(sv: &crate::serve::ServicesStatus) -> String {
    let mut s = String::new();
    if !sv.serve_running {
        s.push_str(
            "\nshiftlab serve is not running: no load balancer, HTTP server or host DNS updates\n",
        );
    }
    if let Some(lb) = &sv.load_balancer {
        s.push_str(&format!(
            "\nload balancer: {} ({}){}\n",
            if lb.running { "running" } else { "stopped" },
            lb.config.display(),
            if lb.bootstrap_removed {
                ", bootstrap removed"
            } else {
                ""
            }
        ));
        let rows: Vec<Vec<String>> = lb
            .frontends
            .iter()
            .flat_map(|f| {
                f.backends.iter().map(move |b| {
                    vec![
                        f.name.clone(),
                        f.bind.to_string(),
                        b.node.clone(),
                        b.address.to_string(),
                        b.status.clone(),
                        b.check.clone().unwrap_or_else(|| "-".into()),
                    ]
                })
            })
            .collect();
        s.push_str(&render_table_rows(
            &[
                "FRONTEND", "LISTEN", "BACKEND", "ADDRESS", "STATUS", "CHECK",
            ],
            &rows,
        ));
    }
    s.push_str(&format!(
        "\nHTTP artifacts: {} ({} files)\n",
        sv.http.url.clone().unwrap_or_else(|| "not served".into()),
        sv.http.files.len()
    ));
    s.push_str(&format!(
        "host DNS: {}{}\n",
        if sv.host_dns.configured {
            "configured"
        } else {
            "not configured"
        },
        sv.host_dns
            .mechanism
            .as_ref()
            .map(|m| format!(" via {m:?}"))
            .unwrap_or_default()
    ));
    if let Some(n) = &sv.host_dns.note {
        s.push_str(&format!("  ({n})\n"));
    }
    s
}
