use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Build the stand-in node image: a ~10 MB bootable qcow2 that acts out a node's
    /// network role (rehearsals and tests)
    Standin(StandinArgs),
}

#[derive(Debug, Args)]
pub struct StandinArgs {
    /// Where to write the qcow2
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}
