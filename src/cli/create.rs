use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::install::target::Target;

/// Targets: each is reached with every target before it that is not done yet, and
/// recorded in the cluster's state, so a run can be stopped and resumed anywhere.
#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Write install-config.yaml (and agent-config.yaml for method agent) into the cluster's
    /// asset directory, with a backup of each; with --dir, only into DIR (a render: no state
    /// written, no plan pinned)
    InstallConfig(InstallConfigArgs),
    /// Run `openshift-install create manifests` and add the lab's manifests
    Manifests(TargetArgs),
    /// Run `openshift-install create ignition-configs`
    Ignition(TargetArgs),
    /// Run `openshift-install create single-node-ignition-config` (method sno)
    SingleNodeIgnition(TargetArgs),
    /// Make the live ISO the nodes boot: the CoreOS live ISO with the single node's
    /// Ignition embedded (sno), or `openshift-install agent create image` (agent)
    Iso(TargetArgs),
    /// Build the cluster's libvirt objects: network, pool, base image, volumes, Ignition,
    /// domains (in a rehearsal without a release: again each time, converging on the plan)
    Infra(InfraArgs),
    /// Wait for `openshift-install wait-for bootstrap-complete`
    BootstrapComplete(TargetArgs),
    /// Remove the bootstrap node (load-balancer backends, VM, volumes)
    BootstrapRemoval(TargetArgs),
    /// Start the nodes planned to start after bootstrap (UPI workers)
    Workers(TargetArgs),
    /// Approve the plan's nodes' certificate signing requests
    CsrApproval(TargetArgs),
    /// Wait for `openshift-install wait-for install-complete` and print how to log in
    InstallComplete(TargetArgs),
    /// Eject the live ISO from every node and remove its volume (sno, agent)
    EjectIso(TargetArgs),
    /// Every target: from the cluster file to a finished install
    Cluster(ClusterArgs),
}

impl CreateCommand {
    /// `--facts`, whichever target takes it.
    pub fn facts(&self) -> Option<&std::path::Path> {
        match self {
            CreateCommand::InstallConfig(_) => None,
            CreateCommand::Infra(a) => a.facts.as_deref(),
            CreateCommand::Cluster(a) => a.target.facts.as_deref(),
            other => other.target().and_then(|(_, a)| a.facts.as_deref()),
        }
    }

    /// `--force`, whichever target.
    pub fn force(&self) -> bool {
        match self {
            CreateCommand::InstallConfig(a) => a.force,
            CreateCommand::Infra(a) => a.force,
            CreateCommand::Cluster(a) => a.target.force,
            other => other.target().is_some_and(|(_, a)| a.force),
        }
    }

    /// The target and arguments of the subcommands that take nothing but the file.
    /// What the command asks of the cluster: its flow's end, or one target.
    pub fn aim(&self) -> crate::install::target::Aim {
        use crate::install::target::Aim;
        match self {
            CreateCommand::InstallConfig(_) => Aim::Target(Target::InstallConfig),
            CreateCommand::Infra(_) => Aim::Target(Target::Infra),
            CreateCommand::Cluster(_) => Aim::End,
            other => Aim::Target(other.target().expect("a target").0),
        }
    }

    pub fn target(&self) -> Option<(Target, &TargetArgs)> {
        match self {
            CreateCommand::Manifests(a) => Some((Target::Manifests, a)),
            CreateCommand::Ignition(a) => Some((Target::Ignition, a)),
            CreateCommand::SingleNodeIgnition(a) => Some((Target::SingleNodeIgnition, a)),
            CreateCommand::Iso(a) => Some((Target::Iso, a)),
            CreateCommand::EjectIso(a) => Some((Target::EjectIso, a)),
            CreateCommand::BootstrapComplete(a) => Some((Target::BootstrapComplete, a)),
            CreateCommand::BootstrapRemoval(a) => Some((Target::BootstrapRemoval, a)),
            CreateCommand::Workers(a) => Some((Target::Workers, a)),
            CreateCommand::CsrApproval(a) => Some((Target::CsrApproval, a)),
            CreateCommand::InstallComplete(a) => Some((Target::InstallComplete, a)),
            _ => None,
        }
    }
}

/// Which cluster: its name, or its cluster file.
#[derive(Debug, Args)]
pub struct Which {
    /// The cluster's name: the cluster file (and -P) its first target recorded is used
    #[arg(required_unless_present = "file", value_name = "NAME")]
    pub name: Option<crate::state::ClusterName>,

    /// The cluster file (with NAME, the file of that cluster)
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,

    #[command(flatten)]
    pub params: super::params::ParamArgs,
}

#[derive(Debug, Args)]
pub struct TargetArgs {
    #[command(flatten)]
    pub which: Which,

    /// Go on with a control plane or bootstrap under 8 GiB of memory (refused otherwise)
    #[arg(long)]
    pub force: bool,

    /// Decide the preflight over these recorded host facts (doctor -o json's "facts")
    #[arg(long, value_name = "FILE", hide = true)]
    pub facts: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// Restore the bundle at PATH instead of installing (docs/bundles.md): the file must plan
    /// the bundle's topology and identity (each difference named); then started as
    /// `bundle restore --start` does
    #[arg(long = "from-bundle", value_name = "PATH", requires = "file")]
    pub bundle: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InstallConfigArgs {
    #[command(flatten)]
    pub which: Which,

    /// Write the configs and their backups into DIR (0600) instead, and nothing into the
    /// state directory: the cluster file may still change afterwards
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Go on with a control plane or bootstrap under 8 GiB of memory (refused otherwise)
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct InfraArgs {
    #[command(flatten)]
    pub which: Which,

    /// Also start the nodes planned to start after bootstrap (UPI workers)
    #[arg(long)]
    pub start_workers: bool,

    /// Go on with a control plane or bootstrap under 8 GiB of memory (refused otherwise)
    #[arg(long)]
    pub force: bool,

    /// Decide the preflight over these recorded host facts (doctor -o json's "facts")
    #[arg(long, value_name = "FILE", hide = true)]
    pub facts: Option<PathBuf>,
}
