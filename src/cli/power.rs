use clap::Args;

use super::OutputFormat;

// The subcommands' help is on their variants in cli/mod.rs; docs/stop-start.md has the rest.
#[derive(Debug, Args)]
pub struct StopArgs {
    /// The cluster's name
    pub name: crate::state::ClusterName,

    /// Seconds each group (workers, then control planes) gets to shut down before it is forced off
    #[arg(long, value_name = "SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,

    /// Stop even within 24 hours of the install (before the first certificate rotation), or on IPI with an API that does not answer (metal3 may power the nodes back on)
    #[arg(long)]
    pub force: bool,

    #[command(flatten)]
    pub connect: super::connect::ConnectArgs,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// The cluster's name
    pub name: crate::state::ClusterName,

    /// Seconds to wait for the API and for the nodes to be Ready
    #[arg(long, value_name = "SECONDS", default_value_t = 1800,
          value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,

    /// Seconds between two looks at the API (1 to 300)
    #[arg(long, value_name = "SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub interval: u64,

    /// Only power the nodes on: no API wait, no CSR approval
    #[arg(long)]
    pub no_api: bool,

    /// The cluster's admin kubeconfig [default: <state>/clusters/<NAME>/assets/auth/kubeconfig]
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub connect: super::connect::ConnectArgs,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}
