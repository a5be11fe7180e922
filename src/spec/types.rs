//! The resolved cluster file: what the user asked for, with every default filled in.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use ipnet::{Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    Ocp,
    Okd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// User-provisioned infrastructure, `platform: none`; shiftlab provides DNS, LB and VMs.
    Upi,
    /// Single node through bootstrap-in-place.
    Sno,
    /// Bare-metal IPI (`platform: baremetal`) with virtual media through shiftlab's BMC.
    Ipi,
    /// The agent-based installer.
    Agent,
}

impl Method {
    pub const ALL: [&'static str; 4] = ["upi", "sno", "ipi", "agent"];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Bootstrap,
    Ctlplane,
    Worker,
}

impl Role {
    /// A node's name (its VM and hostname): `<cluster>-bootstrap`,
    /// `<cluster>-<role>-<index>`.
    pub fn node_name(self, cluster: &str, index: u32) -> String {
        match self {
            Role::Bootstrap => format!("{cluster}-bootstrap"),
            _ => format!("{cluster}-{}-{index}", self.as_str()),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Bootstrap => "bootstrap",
            Role::Ctlplane => "ctlplane",
            Role::Worker => "worker",
        }
    }

    /// The role name OpenShift itself uses (install-config, Ignition, MCS paths).
    pub fn openshift_name(self) -> &'static str {
        match self {
            Role::Bootstrap => "bootstrap",
            Role::Ctlplane => "master",
            Role::Worker => "worker",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Upi => "upi",
            Method::Sno => "sno",
            Method::Ipi => "ipi",
            Method::Agent => "agent",
        })
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Distribution::Ocp => "ocp",
            Distribution::Okd => "okd",
        })
    }
}

/// A release channel of the OpenShift update graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Stable,
    Fast,
    Candidate,
    Latest,
}

/// What `version:` asked for. Resolving it to a concrete release needs the network
/// and happens in the release module; the plan keeps the request as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Version {
    /// `4.18.7`, or an OKD tag such as `4.17.0-okd-scos.0`.
    Exact { version: String },
    /// `4.18`: the newest stable 4.18.z.
    Minor { minor: u32 },
    /// `stable`, `stable-4.18`, `candidate-4.19`, `latest`.
    Channel {
        channel: Channel,
        minor: Option<u32>,
    },
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Exact { version } => f.write_str(version),
            Version::Minor { minor } => write!(f, "4.{minor}"),
            Version::Channel { channel, minor } => {
                let c = match channel {
                    Channel::Stable => "stable",
                    Channel::Fast => "fast",
                    Channel::Candidate => "candidate",
                    Channel::Latest => "latest",
                };
                match minor {
                    Some(m) => write!(f, "{c}-4.{m}"),
                    None => f.write_str(c),
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeSize {
    pub numcpus: u32,
    /// MiB
    pub memory: u64,
    /// GB (10^9 bytes are what users type; libvirt is given GiB-exact sizes, see plan)
    pub disk_size: u64,
    /// sizes in GB of additional empty disks
    pub extra_disks: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// A libvirt network with its own bridge, NAT to the outside.
    Nat,
    /// An existing host bridge; DHCP and DNS are then not libvirt's.
    Bridge,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkSpec {
    pub name: String,
    pub mode: NetworkMode,
    pub bridge: String,
    /// The IPv4 half: all five present, or (IPv6 single-stack, docs/ipv6.md)
    /// all absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cidr: Option<Ipv4Net>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_ip: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress_ip: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dhcp_start: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dhcp_end: Option<Ipv4Addr>,
    #[serde(serialize_with = "mac_prefix_text")]
    pub mac_prefix: [u8; 3],
    /// Bare-metal IPI, `external_bridge: veth`: the veth-linked bridge the
    /// installer's bootstrap VM joins (src/host/veth.rs); `None`: the network's
    /// own bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub veth_bridge: Option<String>,
}

/// The IPv6 half of a dual-stack or IPv6 single-stack lab (docs/ipv6.md,
/// spec::resolve::ipv6): the machine network's IPv6 subnet, VIPs and DHCPv6
/// range, and the pod and service networks' IPv6 ranges. The IPv4 half is
/// [`NetworkSpec`] and the top-level `cluster_network`/`service_network`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ipv6Spec {
    pub cidr: Ipv6Net,
    pub api_ip: Ipv6Addr,
    pub ingress_ip: Ipv6Addr,
    pub dhcp_start: Ipv6Addr,
    pub dhcp_end: Ipv6Addr,
    pub cluster_network: Ipv6Net,
    /// Always 64: the installer refuses any other for IPv6.
    pub cluster_network_host_prefix: u8,
    pub service_network: Ipv6Net,
    /// IPv6 is the primary family: listed first everywhere.
    pub primary: bool,
}

fn mac_prefix_text<S: serde::Serializer>(p: &[u8; 3], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{:02x}:{:02x}:{:02x}", p[0], p[1], p[2]))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DomainType {
    Auto,
    Kvm,
    Qemu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Firmware {
    Bios,
    Uefi,
}

/// `libvirt.graphics`: a screen for virt-manager besides the serial console.
/// Always on 127.0.0.1 (see libvirt::xml::write::domain_xml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Graphics {
    /// Headless: the serial console only (a rehearsal's default, and what
    /// plans recorded before the field existed describe).
    #[default]
    None,
    Vnc,
    Spice,
}

impl Graphics {
    pub fn is_none(&self) -> bool {
        *self == Graphics::None
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LibvirtSpec {
    pub uri: String,
    pub pool: String,
    pub pool_path: PathBuf,
    pub domain_type: DomainType,
    pub firmware: Firmware,
    pub graphics: Graphics,
    /// A QEMU CPU model every node gets instead of the default (KVM: the host's
    /// CPU; TCG: the model for the stream's level, release::cpu_level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProxySpec {
    pub http_proxy: Option<String>,
    pub https_proxy: Option<String>,
    pub no_proxy: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageDigestSource {
    pub source: String,
    pub mirrors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    pub baseline_capability_set: Option<String>,
    pub additional_enabled_capabilities: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BmcSpec {
    /// The address the BMC listens on; the cluster gateway of the primary
    /// family unless set (an IPv6 one only in a dual-stack lab).
    pub address: std::net::IpAddr,
    pub port: u16,
    pub username: String,
    /// Never serialised: a secret. `None` means "generate one per lab".
    #[serde(skip)]
    pub password: Option<String>,
    pub verify_certificate: bool,
}

/// Where a cluster's VMs run: `backend:` in the cluster file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// libvirt on one host (the default).
    #[default]
    Libvirt,
    /// KubeVirt on a Kubernetes cluster (docs/kubevirt.md).
    Kubevirt,
}

impl BackendKind {
    pub fn is_libvirt(&self) -> bool {
        *self == BackendKind::Libvirt
    }
}

/// How KubeVirt VMs are networked: `kubevirt.network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PodNetwork {
    /// The pod network; API and ingress are Services.
    Pod,
    /// A Multus NetworkAttachmentDefinition on a host bridge (or VLAN): the
    /// cluster's own subnet, DHCP, DNS and VIPs carry over.
    Multus,
}

/// The Service type of API and ingress in `pod` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServiceType {
    LoadBalancer,
    NodePort,
}

impl ServiceType {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::LoadBalancer => "LoadBalancer",
            ServiceType::NodePort => "NodePort",
        }
    }
}

/// `kubevirt:`: where and how the VMs of a `backend: kubevirt` cluster run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubevirtSpec {
    /// The kubeconfig file (checked to exist when the file is loaded).
    pub kubeconfig: PathBuf,
    /// Its context; the kubeconfig's current context when unset.
    pub context: Option<String>,
    /// The namespace every object goes into (a DNS-1123 label).
    pub namespace: String,
    /// The StorageClass of the CDI DataVolumes; the cluster default when unset.
    pub storage_class: Option<String>,
    pub network: PodNetwork,
    /// `multus`: the host bridge the NetworkAttachmentDefinition attaches to.
    pub bridge: String,
    /// `multus`: an optional VLAN on that bridge.
    pub vlan: Option<u16>,
    /// `pod`: how API and ingress Services are exposed.
    pub service_type: ServiceType,
    /// The node disk: an `http(s)://` URL CDI imports, or `docker://` for a
    /// containerDisk. Unset: the release's stream metadata `kubevirt` image.
    pub image: Option<String>,
    /// The base URL at which VMs reach shiftlab's HTTP server (the pointer
    /// Ignition merges the node's config from there).
    pub http_url: Option<String>,
    /// `pod`: the image of the in-cluster HAProxy in front of the nodes.
    /// (Defaults when read back: a plan recorded before the field existed.)
    #[serde(default = "default_haproxy_image")]
    pub haproxy_image: String,
    /// `pod`: the Kubernetes cluster's DNS domain, under which HAProxy finds
    /// the node VMs (`<node>.<subdomain>.<namespace>.svc.<domain>`).
    #[serde(default = "default_cluster_dns_domain")]
    pub cluster_dns_domain: String,
}

/// The in-cluster HAProxy's image in `pod` mode: HAProxy's official image,
/// an LTS branch.
pub const DEFAULT_HAPROXY_IMAGE: &str = "docker.io/library/haproxy:3.0";
/// Kubernetes' default cluster DNS domain (kubelet `--cluster-domain`).
pub const DEFAULT_CLUSTER_DNS_DOMAIN: &str = "cluster.local";

fn default_haproxy_image() -> String {
    DEFAULT_HAPROXY_IMAGE.to_string()
}

fn default_cluster_dns_domain() -> String {
    DEFAULT_CLUSTER_DNS_DOMAIN.to_string()
}

/// An SSH public key and where it came from (a path, or `literal`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SshKey {
    pub source: String,
    pub key: String,
}

/// `storage:`: where the cluster's persistent volumes come from (docs/storage.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Storage {
    /// No StorageClass: the registry keeps emptyDir, monitoring keeps no data.
    #[default]
    None,
    /// A per-cluster NFS export from the host and a provisioner in the cluster.
    Nfs,
    /// The LVM Storage operator on every node's extra disks.
    Lvms,
}

impl Storage {
    pub const ALL: [&'static str; 3] = ["none", "nfs", "lvms"];

    pub fn is_none(&self) -> bool {
        *self == Storage::None
    }
}

/// `monitoring:`: the platform monitoring stack (docs/storage.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MonitoringSpec {
    /// How long Prometheus keeps samples, a Prometheus duration (`24h`, `1d12h`).
    pub retention: String,
}

impl MonitoringSpec {
    /// A lab's default: a day of metrics is enough to debug an install and keeps
    /// Prometheus small (OpenShift's own default is 15d).
    pub const DEFAULT_RETENTION: &'static str = "24h";

    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl Default for MonitoringSpec {
    fn default() -> Self {
        MonitoringSpec {
            retention: Self::DEFAULT_RETENTION.to_string(),
        }
    }
}

/// One of `users:`: an htpasswd user of the cluster's OAuth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    pub name: String,
    /// Path only; `None`: shiftlab generates one into `auth/<name>-password`.
    pub password_file: Option<PathBuf>,
    pub admin: bool,
}

/// The whole cluster file after defaults and validation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterSpec {
    pub cluster: String,
    pub domain: String,
    pub distribution: Distribution,
    pub version: Version,
    /// Path only: the contents are a secret and are read when rendering.
    pub pull_secret: Option<PathBuf>,
    /// `users:`, the lab's htpasswd users (docs/users.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<User>,
    pub ssh_keys: Vec<SshKey>,
    pub method: Method,
    pub ctlplanes: u32,
    pub workers: u32,
    pub bootstrap: NodeSize,
    pub ctlplane: NodeSize,
    pub worker: NodeSize,
    pub network: NetworkSpec,
    pub libvirt: LibvirtSpec,
    /// Local CoreOS qcow2 (or, in rehearsal, the stand-in image) to import.
    pub image: Option<PathBuf>,
    /// Tiny stand-in nodes instead of CoreOS: relaxes size limits.
    pub rehearsal: bool,
    pub installation_disk: String,
    pub network_type: String,
    /// The IPv4 pod and service networks; `None` in an IPv6 single-stack lab.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_network: Option<Ipv4Net>,
    pub cluster_network_host_prefix: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_network: Option<Ipv4Net>,
    /// Dual-stack and IPv6 single-stack: the IPv6 networks (docs/ipv6.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Spec>,
    pub fips: bool,
    /// `ntp_servers`: the time servers every node's chrony uses (host names or
    /// IPv4 addresses; render::chrony). Empty: CoreOS's default pool.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ntp_servers: Vec<String>,
    /// `host_ntp`: the host's chrony serves time to the cluster's subnet and
    /// the nodes take it from the network's gateway (host::chrony).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub host_ntp: bool,
    pub proxy: Option<ProxySpec>,
    pub image_digest_sources: Vec<ImageDigestSource>,
    pub additional_trust_bundle: Option<PathBuf>,
    /// The trust bundle's PEM text given in the file itself (kcli's `ca`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_bundle_pem: Option<String>,
    pub capabilities: Option<Capabilities>,
    pub manifests: Option<PathBuf>,
    /// The `openshift-install` binary to drive, when not the release's own.
    pub openshift_install: Option<PathBuf>,
    /// Where releases come from: a mirror URL or a local directory laid out like one.
    pub mirror: Option<String>,
    /// An OpenPGP public key that must have signed the release's `sha256sum.txt`.
    pub release_key: Option<PathBuf>,
    pub bmc: BmcSpec,
    /// `backend:`; libvirt unless the file says otherwise.
    #[serde(skip_serializing_if = "BackendKind::is_libvirt")]
    pub backend: BackendKind,
    /// `kubevirt:`, set exactly when `backend: kubevirt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubevirt: Option<KubevirtSpec>,
    /// `storage:`; none unless the file says otherwise.
    #[serde(skip_serializing_if = "Storage::is_none")]
    pub storage: Storage,
    /// `monitoring:`; shown only when not the default.
    #[serde(skip_serializing_if = "MonitoringSpec::is_default")]
    pub monitoring: MonitoringSpec,
}

impl ClusterSpec {
    /// `<cluster>.<domain>`, the zone every record lives in.
    pub fn cluster_domain(&self) -> String {
        format!("{}.{}", self.cluster, self.domain)
    }

    pub fn size(&self, role: Role) -> &NodeSize {
        match role {
            Role::Bootstrap => &self.bootstrap,
            Role::Ctlplane => &self.ctlplane,
            Role::Worker => &self.worker,
        }
    }
}
