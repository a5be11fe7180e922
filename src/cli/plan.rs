use std::path::PathBuf;

use clap::Args;

use super::OutputFormat;

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The cluster file (YAML; kcli parameter files are accepted)
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,

    #[command(flatten)]
    pub params: super::params::ParamArgs,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,

    /// Go on with a control plane or bootstrap under 8 GiB of memory (refused otherwise)
    #[arg(long)]
    pub force: bool,

    /// Print the fully resolved cluster file (every default filled in) instead of the plan
    #[arg(long, hide = true)]
    pub resolved: bool,
}
