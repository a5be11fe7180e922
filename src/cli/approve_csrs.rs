use std::path::PathBuf;

use clap::Args;

use super::OutputFormat;

// The subcommand's help is on its variant in cli/mod.rs; the rules are in docs/csr.md.
#[derive(Debug, Args)]
pub struct ApproveCsrsArgs {
    /// The cluster's name
    pub name: crate::state::ClusterName,

    /// Keep approving until every node's client and serving CSRs are approved
    #[arg(long)]
    pub watch: bool,

    /// With --watch, go on until Ctrl-C (day 2: nodes added later, a cluster coming back)
    #[arg(long, requires = "watch")]
    pub forever: bool,

    /// With --watch, seconds between two looks at the pending CSRs (1 to 300)
    #[arg(long, value_name = "SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub interval: u64,

    /// With --watch, wait only for these nodes (repeatable) [default: every node but the bootstrap]
    #[arg(long = "node", value_name = "NODE", requires = "watch")]
    pub nodes: Vec<String>,

    /// The cluster's admin kubeconfig [default: <state>/clusters/<NAME>/assets/auth/kubeconfig]
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}
