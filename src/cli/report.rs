use clap::Args;

use super::OutputFormat;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The rehearsal cluster's name
    pub name: crate::state::ClusterName,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}
