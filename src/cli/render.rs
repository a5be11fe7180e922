use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// The backends `render` writes objects for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RenderBackend {
    /// KubeVirt objects as YAML (Namespace, Secrets, Services or a
    /// NetworkAttachmentDefinition, VirtualMachines)
    Kubevirt,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The cluster file (with `backend: kubevirt`)
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,

    #[command(flatten)]
    pub params: super::params::ParamArgs,

    /// The backend whose objects to write
    #[arg(long, value_enum)]
    pub backend: RenderBackend,

    /// Where to write them (created if missing); one file per object, Secrets 0600
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}
