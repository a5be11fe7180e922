use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::OutputFormat;

// The subcommand's help is on its variant in cli/mod.rs; the rules are in docs/users.md.
#[derive(Debug, Args)]
pub struct UsersArgs {
    /// The cluster's name
    pub name: crate::state::ClusterName,

    #[command(subcommand)]
    pub action: UsersAction,

    /// The cluster's admin kubeconfig [default: <state>/clusters/<NAME>/assets/auth/kubeconfig]
    #[arg(long, value_name = "PATH", global = true)]
    pub kubeconfig: Option<PathBuf>,

    /// Output format
    #[arg(short, long, value_enum, default_value_t, global = true)]
    pub output: OutputFormat,
}

#[derive(Debug, Subcommand)]
pub enum UsersAction {
    /// The users of the htpasswd identity provider: cluster-admin or not, logged in or
    /// not; and whether kubeadmin is still there. Never a password or a hash
    List,
    /// Add a user (or give it a new password, or make it a cluster-admin); rerun with the
    /// same password changes nothing. Adds the htpasswd identity provider if the cluster
    /// has none
    Add(AddArgs),
    /// Remove a user: its htpasswd line, the cluster-admin binding shiftlab made, its User
    /// and Identity. `remove kubeadmin` only once another cluster-admin has logged in
    Remove(RemoveArgs),
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The user's login name (as the cluster file's users: name)
    pub user: String,

    /// Make the user a cluster-admin (a ClusterRoleBinding shiftlab owns)
    #[arg(long)]
    pub admin: bool,

    /// A file holding the password on one line [default: a generated one, written 0600 to
    /// <state>/clusters/<NAME>/assets/auth/<USER>-password]
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The user's login name, or kubeadmin
    pub user: String,
}
