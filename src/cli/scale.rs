use std::path::PathBuf;

use clap::Args;

use super::OutputFormat;

// The subcommand's help is on its variant in cli/mod.rs; docs/scale.md has the rest.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// The cluster's name
    pub name: crate::state::ClusterName,

    /// The number of workers wanted
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub workers: u32,

    /// The cluster file (its workers: is overridden by --workers) [default: the one the
    /// cluster's install recorded, with the count of the last scale]
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,

    #[command(flatten)]
    pub params: super::params::ParamArgs,

    /// Seconds a worker's drain (its pods' evictions) may take before scale gives up
    #[arg(long, value_name = "SECONDS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub drain_timeout: u64,

    /// Seconds new workers get to be Ready (their CSRs approved meanwhile)
    #[arg(long, value_name = "SECONDS", default_value_t = 1800,
          value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,

    /// The cluster's admin kubeconfig [default: <state>/clusters/<NAME>/assets/auth/kubeconfig]
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Go on with a control plane under 8 GiB of memory in the cluster file (refused otherwise)
    #[arg(long)]
    pub force: bool,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}
