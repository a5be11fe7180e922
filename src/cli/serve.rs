use clap::{Args, Subcommand, ValueEnum};

use super::OutputFormat;

/// Host services for every cluster of this host: one HAProxy per cluster, the
/// HTTP artifact server, host DNS
#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    long_about = "Run the host services of every cluster in the state directory, in the foreground: \
one HAProxy per cluster bound to its load-balancer address (rendered from the plan, validated by \
`haproxy -c`, reloaded gracefully, restarted with backoff), an HTTP server for its Ignition files \
and ISOs on the cluster's address, host DNS for api and *.apps, and a live web page of every lab \
with its JSON API (--web, default 127.0.0.1:8090). New, changed and destroyed \
clusters are picked up without a restart (control socket <state>/serve.sock, and a rescan every \
--scan-interval seconds). See docs/serve.md and docs/dns.md."
)]
pub struct ServeArgs {
    /// Write and enable a systemd unit running `shiftlab serve` (where systemd is PID 1)
    #[arg(long)]
    pub install_unit: bool,

    /// Port of the HTTP artifact server on each cluster's address
    #[arg(long, value_name = "PORT", default_value_t = crate::plan::DEFAULT_HTTP_PORT)]
    pub http_port: u16,

    /// How the host resolves api and *.apps of each cluster
    #[arg(long, value_enum, value_name = "HOW", default_value_t = HostDnsArg::Auto)]
    pub host_dns: HostDnsArg,

    /// Open the host firewall (firewalld, ufw, nftables or iptables) for each
    /// cluster's nodes to reach its services, runtime rules removed at destroy
    /// (docs/firewall.md)
    #[arg(long, value_enum, value_name = "HOW", default_value_t = HostFirewallArg::Auto)]
    pub host_firewall: HostFirewallArg,

    /// Seconds between rescans of the state directory
    #[arg(long, value_name = "SECONDS", default_value_t = 2)]
    pub scan_interval: u64,

    /// Address of the lab's web page and its JSON API, or `off` [default:
    /// 127.0.0.1:8090]. An address that is not loopback needs --web-token-file
    /// (docs/serve.md, "Web page")
    #[arg(long, value_name = "ADDR|off")]
    pub web: Option<String>,

    /// File holding the token the web page requires (16+ letters, digits,
    /// '-', '.', '_' or '~'; mode 0600); required to bind --web beyond loopback
    #[arg(long, value_name = "PATH")]
    pub web_token_file: Option<std::path::PathBuf>,

    /// Let the lab BMC (ipi clusters) also fetch virtual media from this
    /// network, loopback included; repeat for more. Without it, the lab BMC
    /// fetches from the cluster's machine network only (docs/bmc.md)
    #[arg(long, value_name = "CIDR")]
    pub allow_image_source: Vec<ipnet::IpNet>,

    /// Make the lab BMC verify image servers' certificates against the
    /// CA(s) in this PEM file (docs/bmc.md)
    #[arg(long, value_name = "FILE")]
    pub media_ca: Option<std::path::PathBuf>,

    #[command(subcommand)]
    pub action: Option<ServeAction>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HostDnsArg {
    /// NetworkManager's dnsmasq, else systemd-resolved, else /etc/hosts
    Auto,
    /// NetworkManager's dnsmasq plugin (split DNS)
    Networkmanager,
    /// systemd-resolved per-link DNS (split DNS)
    Resolved,
    /// A marked block in /etc/hosts
    Hosts,
    /// serve answers the cluster zones on 127.0.1.53, named first in
    /// /etc/resolv.conf; other names are refused and go to the next nameserver
    /// (for hosts without NetworkManager's dnsmasq or systemd-resolved)
    Local,
    /// Leave host DNS alone
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HostFirewallArg {
    /// Detect what filters traffic from the nodes and add exactly the rules needed
    Auto,
    /// Leave the host firewall alone
    Off,
}

#[derive(Debug, Subcommand)]
pub enum ServeAction {
    /// Take the bootstrap out of the load balancer's backends (after bootstrap-complete)
    RemoveBootstrap(ClusterArg),
    /// Stop a cluster's host services and remove its host DNS entries (destroy does this)
    Forget(ClusterArg),
    /// Ask a running serve to look at the state now
    Notify {
        /// Only this cluster
        cluster: Option<crate::state::ClusterName>,
    },
    /// Show a cluster's load balancer, HTTP endpoint and host DNS
    Status {
        cluster: crate::state::ClusterName,
        #[arg(short, long, value_enum, default_value_t)]
        output: OutputFormat,
    },
}

#[derive(Debug, Args)]
pub struct ClusterArg {
    /// The cluster's name
    pub cluster: crate::state::ClusterName,
}
