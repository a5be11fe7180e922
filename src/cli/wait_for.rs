use clap::{Args, Subcommand};

/// The waits of openshift-install's `wait-for`: each waits only, reaching
/// nothing before it.
#[derive(Debug, Subcommand)]
pub enum WaitForCommand {
    /// Wait until the bootstrap is complete (infra done); exit 5 when it fails
    BootstrapComplete(WaitArgs),
    /// Wait until the install is complete (the targets before it done); exit 6 when it fails
    InstallComplete(WaitArgs),
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    #[command(flatten)]
    pub which: super::create::Which,
}
