use std::time::Duration;

use anyhow::Result;

use crate::cli::serve::{HostDnsArg, HostFirewallArg, ServeAction, ServeArgs};
use crate::daemon::{self, HostDnsMode};
use crate::host::dns::Mechanism;
use crate::serve;
use crate::state::StateDir;

pub fn run(args: &ServeArgs, state: &StateDir) -> Result<()> {
    match &args.action {
        Some(ServeAction::RemoveBootstrap(c)) => {
            let _lock = state.cluster(&c.cluster).lock_if_exists()?;
            serve::remove_bootstrap(state, &c.cluster)?;
            println!("bootstrap removed from the load balancer of {}", c.cluster);
            Ok(())
        }
        Some(ServeAction::Forget(c)) => {
            let _lock = state.cluster(&c.cluster).lock_if_exists()?;
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
                format!("cluster {}\n{}", s.cluster, s.table())
            })
        }
        None if args.install_unit => {
            println!("{}", serve::unit::install_for(state)?);
            Ok(())
        }
        None => {
            // Checked before serve starts anything.
            let web = daemon::web::Config::parse(
                args.web.as_deref().unwrap_or(daemon::web::DEFAULT_ADDR),
                args.web_token_file.as_deref(),
            )?;
            if let Some(ca) = &args.media_ca {
                crate::redfish::fetch::check_media_ca(ca)?;
            }
            daemon::run_until_signal(daemon::Options {
                state: state.clone(),
                http_port: args.http_port,
                host_dns: match args.host_dns {
                    HostDnsArg::Auto => HostDnsMode::Auto,
                    HostDnsArg::Off => HostDnsMode::Off,
                    HostDnsArg::Hosts => HostDnsMode::Use(Mechanism::HostsFile),
                    HostDnsArg::Local => HostDnsMode::Use(Mechanism::LocalDns),
                    HostDnsArg::Networkmanager => {
                        HostDnsMode::Use(Mechanism::NetworkManagerDnsmasq)
                    }
                    HostDnsArg::Resolved => HostDnsMode::Use(Mechanism::SystemdResolved),
                },
                host_firewall: args.host_firewall == HostFirewallArg::Auto,
                scan_interval: Duration::from_secs(args.scan_interval.max(1)),
                web,
                // The default address is a convenience: taken, serve goes on without it.
                web_required: args.web.is_some(),
                allow_image_source: args.allow_image_source.clone(),
                media_ca: args.media_ca.clone(),
            })
        }
    }
}
