use std::path::PathBuf;

use clap::Args;

use super::OutputFormat;

// The subcommand's help is on its variant in cli/mod.rs; docs/troubleshooting.md has the rest.
#[derive(Debug, Args)]
pub struct GatherArgs {
    /// The cluster's name
    pub name: crate::state::ClusterName,

    /// The tarball to write [default: ./shiftlab-gather-NAME-<unix time>.tar.gz]
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Do not run openshift-install gather bootstrap even when the bootstrap runs
    #[arg(long)]
    pub no_bootstrap: bool,

    #[command(flatten)]
    pub connect: super::connect::ConnectArgs,

    /// Output format (of the summary)
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}
