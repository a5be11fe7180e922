use clap::Args;

/// Which libvirt to talk to when no cluster file says it.
#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// libvirt URI [default: the one the cluster was created with, $LIBVIRT_DEFAULT_URI, or qemu:///system]
    #[arg(short = 'c', long = "connect", value_name = "URI")]
    pub uri: Option<String>,
}
