use std::time::Duration;

use anyhow::{Context, Result};

use crate::cli::serve::{HostDnsArg, ServeAction, ServeArgs};
use crate::host::dns::Mechanism;
use crate::serve::{self, daemon};
use crate::state::StateDir;

pub fn run(args: &ServeArgs, state: &StateDir) -> Result<()> {
    match &args.action {
        Some(ServeAction::RemoveBootstrap(c)) => {
            let _lock = super::lock_if_exists(state, &c.cluster)?;
            serve::remove_bootstrap(state, &c.cluster)?;
            println!("bootstrap removed from the load balancer of {}", c.cluster);
            Ok(())
        }
        Some(ServeAction::Forget(c)) => {
            let _lock = super::lock_if_exists(state, &c.cluster)?;
            serve::forget_cluster(state, &c.cluster)
        }
        Some(ServeAction::Notify { cluster }) => {
            if !serve::notify(state, cluster.as_deref())? {
                eprintln!("serve is not running");
            }
            Ok(())
        }
        Some(ServeAction::Status { cluster, output }) => {
            let s = serve::services_status(state, cluster)?;
            crate::output::emit(&mut std::io::stdout().lock(), *output, &s, || {
                status_table(&s)
            })
        }
        None if args.install_unit => {
            let exe = std::env::current_exe().context("locating the shiftlab executable")?;
            let root = std::path::absolute(&state.root).context("resolving the state directory")?;
            let msg = serve::unit::install(
                std::path::Path::new("/run"),
                std::path::Path::new("/etc/systemd/system"),
                &exe,
                &root,
            )?;
            println!("{msg}");
            Ok(())
        }
        None => {
            let opts = daemon::Options {
                state: state.clone(),
                http_port: args.http_port,
                host_dns: match args.host_dns {
                    HostDnsArg::Auto => daemon::HostDnsMode::Auto,
                    HostDnsArg::Off => daemon::HostDnsMode::Off,
                    HostDnsArg::Hosts => daemon::HostDnsMode::Use(Mechanism::HostsFile),
                    HostDnsArg::Networkmanager => {
                        daemon::HostDnsMode::Use(Mechanism::NetworkManagerDnsmasq)
                    }
                    HostDnsArg::Resolved => daemon::HostDnsMode::Use(Mechanism::SystemdResolved),
                },
                scan_interval: Duration::from_secs(args.scan_interval.max(1)),
            };
            runtime()?.block_on(daemon::run(opts, shutdown_signal()))
        }
    }
}

/// The runtime a daemon (serve, bmc) runs on.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Resolves on SIGTERM or SIGINT.
pub(super) async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

fn status_table(s: &serve::ServicesStatus) -> String {
    let mut out = format!(
        "cluster {}  (serve {})\n",
        s.cluster,
        if s.serve_running {
            "running"
        } else {
            "not running"
        }
    );
    match &s.load_balancer {
        None => out += "load balancer: none in this plan\n",
        Some(lb) => {
            out += &format!(
                "load balancer: {}{}\n",
                match lb.pid {
                    Some(p) => format!("haproxy pid {p}"),
                    None => "haproxy not running".into(),
                },
                if lb.bootstrap_removed {
                    ", bootstrap removed"
                } else {
                    ""
                }
            );
            for f in &lb.frontends {
                out += &format!("  {} {}\n", f.name, f.bind);
                for b in &f.backends {
                    out += &format!(
                        "    {:<24} {:<22} {}{}\n",
                        b.node,
                        b.address.to_string(),
                        b.status,
                        b.check
                            .as_deref()
                            .map(|c| format!(" ({c})"))
                            .unwrap_or_default()
                    );
                }
            }
        }
    }
    out += &format!(
        "http: {} ({} files in {})\n",
        s.http.url.as_deref().unwrap_or("not served"),
        s.http.files.len(),
        s.http.root.display()
    );
    out += &format!(
        "host dns: {} ({})\n",
        if s.host_dns.configured {
            "configured"
        } else {
            "not configured"
        },
        s.host_dns
            .mechanism
            .map(|m| m.as_str())
            .unwrap_or("no record")
    );
    out
}
