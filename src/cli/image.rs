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
    /// Where to write the qcow2 (or, with --iso, the ISO)
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Build the stand-in live ISO instead: boots like CoreOS's live ISO, takes an
    /// Ignition embedded with `coreos-installer iso ignition embed`, installs itself
    /// to the node's disk and reboots from it
    #[arg(long)]
    pub iso: bool,
    /// The x86-64 level the image stands in for (x86-64-v1, -v2, -v3): it
    /// refuses to come up on a CPU without it, as a CoreOS built for it would
    #[arg(long, value_name = "LEVEL", value_parser = parse_level)]
    pub cpu_level: Option<crate::release::CpuLevel>,
}

fn parse_level(s: &str) -> Result<crate::release::CpuLevel, String> {
    crate::release::CpuLevel::parse(s)
        .ok_or_else(|| format!("{s:?} is not one of x86-64-v1, x86-64-v2, x86-64-v3"))
}
