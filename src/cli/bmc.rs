//! `shiftlab bmc`: a standalone Redfish BMC for libvirt domains.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::redfish::bmc::{DEFAULT_MAX_IMAGE_BYTES, DEFAULT_SESSION_TIMEOUT};

/// Serve a Redfish BMC for libvirt domains.
///
/// Exposes the chosen domains as Redfish Systems (addressed by domain UUID;
/// a domain name redirects to its UUID) with power, boot override, virtual
/// media and sessions, the way Ironic's `sushy` drives them. TLS and
/// authentication are on by default: the CA is created in the state
/// directory (`ca.crt`, to give to install-config or Ironic), and a random
/// password is generated into `<state-dir>/password` (mode 0600) unless
/// SHIFTLAB_BMC_PASSWORD or --password-file gives one.
///
/// Examples:
///
///   shiftlab bmc --listen 192.168.130.1:8443 --cluster lab1
///
///   shiftlab bmc --allow vm1 --allow vm2 --connect qemu:///system
///
/// Then point Ironic or install-config at
/// redfish-virtualmedia+https://<listen>/redfish/v1/Systems/<domain-uuid>.
#[derive(Debug, Clone, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct BmcArgs {
    /// Address and port to listen on; binds only this address.
    #[arg(long, default_value = "127.0.0.1:8443")]
    pub listen: SocketAddr,
    /// libvirt connection URI [default: $LIBVIRT_DEFAULT_URI, else qemu:///system].
    #[arg(long, short = 'c', value_name = "URI")]
    pub connect: Option<String>,
    /// Expose the domains whose shiftlab ownership metadata names this cluster.
    #[arg(long, conflicts_with = "allow")]
    pub cluster: Option<crate::state::ClusterName>,
    /// Expose this domain (name or UUID); repeat for more.
    #[arg(long, value_name = "DOMAIN")]
    pub allow: Vec<String>,
    /// Storage pool that receives virtual media images.
    #[arg(long, default_value = "default")]
    pub pool: String,
    /// Largest virtual media image accepted, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_IMAGE_BYTES)]
    pub max_image_bytes: u64,
    /// Directory for the CA, certificates, password and media cache
    /// [default: <shiftlab state dir>/bmc].
    #[arg(long, value_name = "DIR")]
    pub bmc_dir: Option<PathBuf>,
    /// User name clients authenticate as.
    #[arg(long, default_value = "admin")]
    pub user: String,
    /// File holding the password (created with a random one if missing)
    /// [default: <state-dir>/password].
    #[arg(long)]
    pub password_file: Option<PathBuf>,
    /// Extra DNS names for the server certificate (the listen IP is always in it).
    #[arg(long, value_name = "NAME")]
    pub san: Vec<String>,
    /// Idle timeout of Redfish sessions, in seconds.
    #[arg(long, default_value_t = DEFAULT_SESSION_TIMEOUT.as_secs())]
    pub session_timeout: u64,
    /// Serve plain HTTP instead of TLS.
    #[arg(long)]
    pub insecure_http: bool,
    /// Accept requests without credentials (only with --insecure-http; for benchmarks).
    #[arg(long, requires = "insecure_http")]
    pub no_auth: bool,
    /// Also fetch virtual media from this network, whatever its addresses
    /// are (loopback or this host's included); repeat for more. Without it,
    /// any address but loopback, link-local, unspecified, multicast and this
    /// host's own (docs/bmc.md, "Where images come from").
    #[arg(long, value_name = "CIDR")]
    pub allow_image_source: Vec<ipnet::IpNet>,
    /// Verify image servers' certificates against the CA(s) in this PEM
    /// file; without it, HTTPS image servers are not verified, as hardware
    /// BMCs do not.
    #[arg(long, value_name = "FILE")]
    pub media_ca: Option<PathBuf>,
    /// Serve in-memory systems with these names instead of libvirt domains (for trying clients).
    #[arg(long, hide = true, value_name = "NAME")]
    pub fake: Vec<String>,
}
