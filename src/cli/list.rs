use clap::Args;

use super::connect::ConnectArgs;
use super::OutputFormat;

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,

    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}
