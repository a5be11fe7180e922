use std::path::PathBuf;

use clap::Args;

use super::OutputFormat;

// The subcommand's help is on its variant in cli/mod.rs; docs/doctor.md has the checks.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// A cluster file: also check capacity, ports and names for its plan
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,

    #[command(flatten)]
    pub params: super::params::ParamArgs,

    #[command(flatten)]
    pub connect: super::connect::ConnectArgs,

    /// Decide over these recorded host facts (doctor -o json's "facts") instead of reading the host
    #[arg(long, value_name = "FILE", hide = true)]
    pub facts: Option<PathBuf>,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}
