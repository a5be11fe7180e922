use std::path::PathBuf;

use clap::Args;

use super::OutputFormat;

// The subcommands' help is on their variants in cli/mod.rs; docs/access.md has the rest.
#[derive(Debug, Args)]
pub struct EnvArgs {
    /// The cluster's name
    pub name: crate::state::ClusterName,

    /// Output format (table: a line for a POSIX shell's eval)
    #[arg(short, long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct SshArgs {
    /// The cluster's name
    pub name: crate::state::ClusterName,

    /// The node: its full name (lab1-ctlplane-0) or the part after the cluster's (ctlplane-0)
    pub node: String,

    /// A command to run on the node instead of a login shell
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,

    /// The private key to log in with [default: ssh's own (agent, ~/.ssh/id_*)]
    #[arg(short = 'i', long = "identity", value_name = "FILE")]
    pub identity: Option<PathBuf>,

    /// Print the ssh command line instead of running it
    #[arg(long)]
    pub print: bool,
}

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// The cluster's name
    pub name: crate::state::ClusterName,

    /// The node: its full name (lab1-ctlplane-0) or the part after the cluster's (ctlplane-0)
    pub node: String,

    /// Take the console from another client that holds it (virsh console's --force)
    #[arg(long)]
    pub force: bool,

    #[command(flatten)]
    pub connect: super::connect::ConnectArgs,
}
