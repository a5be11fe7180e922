use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::connect::ConnectArgs;

#[derive(Debug, Subcommand)]
pub enum DestroyCommand {
    /// Remove every libvirt object and all state shiftlab created for a cluster, and nothing else
    Cluster(DestroyArgs),
}

#[derive(Debug, Args)]
pub struct DestroyArgs {
    /// The cluster's name (or give its cluster file with -f)
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub name: Option<crate::state::ClusterName>,

    /// The cluster file
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,

    #[command(flatten)]
    pub params: super::params::ParamArgs,

    /// Also remove the base images no other cluster uses (and the pool, if shiftlab made it and it is empty)
    #[arg(long)]
    pub purge_images: bool,

    /// Also remove the cluster's NFS export data (storage: nfs), kept otherwise
    #[arg(long)]
    pub purge_storage: bool,

    #[command(flatten)]
    pub connect: ConnectArgs,
}
