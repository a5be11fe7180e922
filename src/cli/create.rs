use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Write install-config.yaml (and agent-config.yaml for method agent) with backup copies
    InstallConfig(InstallConfigArgs),
    /// Build the cluster's libvirt objects: network, pool, base image, volumes, Ignition, domains
    Infra(InfraArgs),
}

#[derive(Debug, Args)]
pub struct InstallConfigArgs {
    /// The cluster file
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,

    /// Directory to write into (openshift-install's asset directory)
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct InfraArgs {
    /// The cluster file
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,

    /// Also start the nodes planned to start after bootstrap (UPI workers)
    #[arg(long)]
    pub start_workers: bool,
}
