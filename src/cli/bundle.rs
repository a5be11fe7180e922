use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::OutputFormat;

// docs/bundles.md has the rest.
#[derive(Debug, Subcommand)]
pub enum BundleCommand {
    /// Stop an installed cluster as `stop` does and write it out as a bundle: each node's disk
    /// flattened into one compressed qcow2, its state and identity; bundle.json last
    Create(CreateArgs),
    /// Bring up a fresh copy of a bundled lab: its disks imported once into the pool, a thin
    /// overlay per node, the same names, MACs, addresses, DNS, load balancer and BMC
    Restore(RestoreArgs),
    /// List the bundles under <state>/bundles
    List(ListArgs),
    /// Show a bundle's manifest: cluster, release, certificates, node identities
    Inspect(PickArgs),
    /// Check every file of a bundle against its sha256; exit 1 when one differs
    Verify(PickArgs),
    /// Remove a bundle: the files its manifest lists and nothing else
    Delete(PickArgs),
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The cluster's name
    pub name: crate::state::ClusterName,

    /// The bundle's directory [default: <state>/bundles/<NAME>]
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,

    /// Bundle even within 24 hours of the install (before the first certificate rotation):
    /// every restore then comes back with expired certificates and CSRs to approve
    #[arg(long)]
    pub force: bool,

    /// Seconds each group (workers, then control planes) gets to shut down before it is forced off
    #[arg(long, value_name = "SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,

    #[command(flatten)]
    pub connect: super::connect::ConnectArgs,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The bundle's directory
    pub path: PathBuf,

    /// Start the restored cluster as `start` does (control planes first, CSRs approved)
    #[arg(long)]
    pub start: bool,

    /// With --start: the admin kubeconfig to approve CSRs and watch the nodes through
    /// [default: the restored cluster's own, <state>/clusters/<NAME>/assets/auth/kubeconfig]
    #[arg(long, value_name = "FILE", requires = "start")]
    pub kubeconfig: Option<PathBuf>,

    /// With --start: seconds to wait for the API and for the nodes to be Ready
    #[arg(long, value_name = "SECONDS", default_value_t = 1800,
          value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,

    #[command(flatten)]
    pub connect: super::connect::ConnectArgs,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct PickArgs {
    /// The bundle: its name under <state>/bundles, or its directory (a path with a /)
    pub bundle: String,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}
