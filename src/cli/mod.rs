//! Command-line definitions (clap derive). No logic here: each subcommand's work lives
//! in the module of its concept.

pub mod access;
pub mod approve_csrs;
pub mod bmc;
pub mod bundle;
pub mod completion;
pub mod connect;
pub mod create;
pub mod destroy;
pub mod doctor;
pub mod gather;
pub mod image;
pub mod list;
pub mod params;
pub mod plan;
pub mod power;
pub mod render;
pub mod report;
pub mod scale;
pub mod serve;
pub mod status;
pub mod users;
pub mod wait_for;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "shiftlab",
    version,
    about = "OpenShift and OKD labs on one libvirt/KVM host, in one command",
    long_about = "shiftlab deploys OpenShift and OKD onto a libvirt/KVM host: the cluster's network \
with DHCP and DNS, CoreOS VMs, a load balancer, an HTTP server for Ignition and ISOs, a Redfish BMC \
per VM, and the install itself.",
    after_long_help = crate::exit_status::help_text()
)]
pub struct Cli {
    /// Where shiftlab keeps cluster state [default: $SHIFTLAB_HOME, /var/lib/shiftlab for root,
    /// else ~/.local/share/shiftlab]
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// More log output (-v info, -vv debug, -vvv trace)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Colour FAIL, WARN and OK: auto on a terminal unless NO_COLOR is set
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t)]
    pub color: crate::color::ColorChoice,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a cluster file and print the plan derived from it; touches nothing
    Plan(plan::PlanArgs),
    /// Write the objects a cluster file makes on a backend as files (KubeVirt: YAML);
    /// touches no cluster
    Render(render::RenderArgs),
    /// Reach a target of the install (e.g. install-config); rerun on a cluster with another
    /// `workers:` it scales first (only the workers may change once installed)
    #[command(subcommand)]
    Create(create::CreateCommand),
    /// Wait for bootstrap-complete or install-complete alone, as `openshift-install wait-for`:
    /// the targets before it must be done; nothing is reached for it
    #[command(subcommand)]
    WaitFor(wait_for::WaitForCommand),
    /// Remove what shiftlab created
    #[command(subcommand)]
    Destroy(destroy::DestroyCommand),
    /// List the shiftlab clusters: those of the state directory and those on libvirt, with what
    /// either lacks (without libvirt, the state's alone)
    List(list::ListArgs),
    /// Show a cluster's nodes: role, power state, MAC, planned and leased address, console log
    Status(status::StatusArgs),
    /// What a rehearsal proved on this host: DHCP, DNS, the load balancer, bootstrap
    /// removal, firewall, boot path, BMC, VIPs, CSRs, each proven, failed or not
    /// applicable with its evidence; exit 9 when a check failed
    Report(report::ReportArgs),
    /// Approve the cluster's node CSRs: client CSRs from the node bootstrapper and serving
    /// CSRs from the nodes, for nodes of the plan only
    ApproveCsrs(approve_csrs::ApproveCsrsArgs),
    /// The lab's htpasswd users on an installed cluster, through its API: list, add (a
    /// cluster-admin with --admin), remove (kubeadmin too, once another cluster-admin has
    /// logged in)
    Users(users::UsersArgs),
    /// Print the shell line that points oc and kubectl at the cluster (eval "$(shiftlab env NAME)")
    Env(access::EnvArgs),
    /// Log in to a node as core over SSH, or run a command there
    Ssh(access::SshArgs),
    /// Attach to a node's serial console through libvirt (Ctrl-] leaves)
    Console(access::ConsoleArgs),
    /// Change a cluster's number of workers. UPI: new ones created, started, CSRs approved;
    /// removed ones drained (evictions honouring PodDisruptionBudgets) and deleted. IPI: new
    /// VMs on the lab BMC with a BareMetalHost each and the worker MachineSet scaled; removed
    /// ones' Machines deleted first. `create` rerun with another `workers:` does the same
    Scale(scale::ScaleArgs),
    /// Shut a cluster down: workers first, ACPI then forced after a timeout; refused within
    /// 24 h of the install unless --force
    Stop(power::StopArgs),
    /// Start a cluster: control planes first, then workers; wait for the API, approve the
    /// plan's nodes' pending CSRs (a node powered on may re-bootstrap once), wait until they
    /// are Ready with a heartbeat since the start
    Start(power::StartArgs),
    /// Lab bundles: an installed cluster written out once, fresh copies of it restored in the
    /// time its VMs take to boot (docs/bundles.md)
    #[command(subcommand)]
    Bundle(bundle::BundleCommand),
    /// Check the host before an install: virtualisation, host files and services, capacity
    /// for a cluster file's plan; exit 0 fine, 3 warnings, 4 failures
    Doctor(doctor::DoctorArgs),
    /// Collect a cluster's logs, state and libvirt XML into one tarball, secrets redacted,
    /// and name the known symptoms found
    Gather(gather::GatherArgs),
    /// Build images shiftlab needs
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// Run the host services of every cluster (HAProxy, HTTP artifacts, host DNS)
    Serve(serve::ServeArgs),
    /// Serve a standalone Redfish BMC for libvirt domains (power, boot, virtual media)
    Bmc(bmc::BmcArgs),
    /// The rehearsal's Ironic: drive hosts' BMCs through Ironic's Redfish sequence
    /// (input JSON on stdin; run by the stand-in installer)
    #[command(hide = true)]
    IronicStandin,
    /// Print a shell completion script
    Completion(completion::CompletionArgs),
    /// Write man pages for every command into a directory
    Man(completion::ManArgs),
}

pub use crate::output::OutputFormat;
