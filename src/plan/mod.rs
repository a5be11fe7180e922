//! The plan: everything derived from the cluster file, computed without touching the
//! host. Same spec in, byte-identical plan out.

mod derive;
pub mod diff;
pub mod installer_vm;
pub mod ipv6;
pub mod kubevirt;
pub mod network;
pub mod storage;
mod table;

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::spec::{DomainType, Firmware, Graphics, Method, NetworkMode, Role};

pub use derive::{derive, node_name, uuid_for};
pub use table::{render_table, render_table_rows};

/// Default port of the HTTP artifact server on each cluster's address.
pub const DEFAULT_HTTP_PORT: u16 = 8080;

/// Bumped when the plan's meaning changes, so persisted plans can be told apart.
pub const PLAN_FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub format: u32,
    pub cluster: String,
    pub domain: String,
    /// `<cluster>.<domain>`
    pub cluster_domain: String,
    pub distribution: String,
    pub version: String,
    pub method: Method,
    /// install-config `platform`: `none` or `baremetal`.
    pub platform: String,
    pub rehearsal: bool,
    pub network: NetworkPlan,
    pub vips: Vips,
    pub nodes: Vec<Node>,
    pub dns: Vec<DnsRecord>,
    pub load_balancer: Option<LoadBalancer>,
    pub bmc: Option<BmcPlan>,
    pub libvirt: LibvirtPlan,
    /// `backend: kubevirt`: where the VMs go and the objects made for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubevirt: Option<kubevirt::KubevirtPlan>,
    /// `storage:` other than none: what the host exports and the cluster mounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<storage::StoragePlan>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkPlan {
    pub name: String,
    pub mode: NetworkMode,
    pub bridge: String,
    /// The IPv4 subnet, its netmask and the host's address on it; `None` in an
    /// IPv6 single-stack lab, whose network is [`NetworkPlan::ipv6`] alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<Ipv4Net>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmask: Option<Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Ipv4Addr>,
    /// IPv4 host addresses on the bridge besides the gateway (the load balancer's).
    pub host_addresses: Vec<Ipv4Addr>,
    /// DNS domain the network is authoritative for: the cluster domain.
    pub domain: String,
    /// The DHCPv4 pool and reservations (none in an IPv6 single-stack lab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp: Option<DhcpRange>,
    pub reservations: Vec<Reservation>,
    /// Bare-metal IPI with `external_bridge: veth`: the bridge the installer's
    /// bootstrap VM joins, veth-linked to this network's bridge, made and removed
    /// by shiftlab (src/host/veth.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub veth: Option<network::VethBridge>,
    /// `host_ntp`: the host's chrony serves time to this network, at its
    /// gateway (host::chrony).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_ntp: bool,
    /// Dual-stack and IPv6 single-stack: the network's IPv6 subnet, DHCPv6
    /// range and reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<ipv6::Ipv6Network>,
}

impl NetworkPlan {
    /// The installer's `externalBridge`: the veth-linked bridge, else the
    /// network's own.
    pub fn external_bridge(&self) -> &str {
        self.veth.as_ref().map_or(&self.bridge, |v| &v.bridge)
    }

    /// Every subnet of the network: the IPv4 one, then the IPv6 one.
    pub fn subnets(&self) -> Vec<ipnet::IpNet> {
        let mut out: Vec<ipnet::IpNet> = self.cidr.map(ipnet::IpNet::V4).into_iter().collect();
        out.extend(self.ipv6.as_ref().map(|v6| ipnet::IpNet::V6(v6.cidr)));
        out
    }

    /// The host's address on the network: the IPv4 gateway, else (IPv6
    /// single-stack) the IPv6 one.
    pub fn host_ip(&self) -> IpAddr {
        match (self.gateway, &self.ipv6) {
            (Some(g), _) => g.into(),
            (None, Some(v6)) => v6.gateway.into(),
            (None, None) => Ipv4Addr::UNSPECIFIED.into(),
        }
    }

    /// The subnet of [`NetworkPlan::host_ip`]: the IPv4 one, else the IPv6 one.
    pub fn host_cidr(&self) -> ipnet::IpNet {
        match (self.cidr, &self.ipv6) {
            (Some(v4), _) => v4.into(),
            (None, Some(v6)) => v6.cidr.into(),
            (None, None) => ipnet::IpNet::V4(Ipv4Net::default()),
        }
    }

    /// The primary subnet: the one listed first in the install-config.
    pub fn primary_cidr(&self) -> ipnet::IpNet {
        match (self.cidr, &self.ipv6) {
            (Some(v4), Some(v6)) if !v6.primary => v4.into(),
            (_, Some(v6)) => v6.cidr.into(),
            (Some(v4), None) => v4.into(),
            (None, None) => ipnet::IpNet::V4(Ipv4Net::default()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DhcpRange {
    pub start: Ipv4Addr,
    pub end: Ipv4Addr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub mac: String,
    pub ip: Ipv4Addr,
    pub hostname: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vips {
    /// The IPv4 VIPs; `None` in an IPv6 single-stack lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Ipv4Addr>,
    /// Dual-stack and IPv6 single-stack: the IPv6 VIPs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api6: Option<std::net::Ipv6Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress6: Option<std::net::Ipv6Addr>,
}

impl Vips {
    /// The API VIP the host uses: IPv4's, else (IPv6 single-stack) IPv6's.
    pub fn api_ip(&self) -> IpAddr {
        self.api
            .map(IpAddr::V4)
            .or(self.api6.map(IpAddr::V6))
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }

    /// The ingress VIP the host uses, as [`Vips::api_ip`].
    pub fn ingress_ip(&self) -> IpAddr {
        self.ingress
            .map(IpAddr::V4)
            .or(self.ingress6.map(IpAddr::V6))
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }
}

/// How a node gets its first boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Boot {
    /// CoreOS disk overlay, Ignition through QEMU fw_cfg.
    DiskFwCfg,
    /// A live ISO with the Ignition embedded (single node, agent).
    Iso,
    /// Powered on and given an ISO by the installer through the Redfish BMC.
    VirtualMedia,
}

/// When a node is first started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Start {
    /// As soon as the infrastructure is there.
    Infra,
    /// After the bootstrap is complete (UPI workers).
    AfterBootstrap,
    /// Never by shiftlab: the installer powers it on through the BMC.
    Bmc,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    /// Volume name in the pool.
    pub volume: String,
    /// GB, as libvirt counts them (2^30 bytes).
    pub size_gb: u64,
    pub kind: DiskKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiskKind {
    /// A thin qcow2 overlay on the base image (or an empty disk for ISO installs).
    Root,
    Extra,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeBmc {
    /// `redfish-virtualmedia+https://<ip>:<port>/redfish/v1/Systems/<uuid>`
    pub address: String,
    pub system_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Libvirt domain name, DHCP hostname and Kubernetes node name.
    pub name: String,
    pub role: Role,
    pub index: u32,
    pub fqdn: String,
    pub mac: String,
    /// The address the host reaches the node at: its IPv4 address, or in an
    /// IPv6 single-stack lab its IPv6 one.
    pub ip: IpAddr,
    /// Dual-stack and IPv6 single-stack: the node's IPv6 address (a DHCPv6
    /// reservation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<std::net::Ipv6Addr>,
    /// Libvirt domain UUID, stable per cluster and node; the BMC's system id.
    pub uuid: String,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub disks: Vec<Disk>,
    /// Volume holding this node's Ignition, for fw_cfg delivery.
    pub ignition_volume: Option<String>,
    pub boot: Boot,
    pub start: Start,
    pub bmc: Option<NodeBmc>,
}

impl Node {
    /// The node's IPv4 address, if the lab has IPv4.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        match self.ip {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        }
    }

    /// The pool volumes shiftlab makes for the node: its disks, then its
    /// Ignition volume (fw_cfg delivery).
    pub fn volumes(&self) -> impl Iterator<Item = &String> {
        self.disks
            .iter()
            .map(|d| &d.volume)
            .chain(self.ignition_volume.as_ref())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordType {
    A,
    PTR,
    /// A wildcard A record (`*.apps`), served through dnsmasq's `address=` option.
    #[serde(rename = "A-wildcard")]
    Wildcard,
    /// Dual-stack: a node's or the API's IPv6 address.
    AAAA,
    /// Dual-stack: the `*.apps` wildcard's IPv6 address, served as the IPv4 one is.
    #[serde(rename = "AAAA-wildcard")]
    Wildcard6,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsRecord {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: RecordType,
    pub value: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HealthCheck {
    /// HTTPS `GET /readyz`, expecting 200.
    HttpsReadyz,
    Tcp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backend {
    pub node: String,
    /// The node's [`Node::ip`].
    pub ip: IpAddr,
    pub port: u16,
    /// Removed once bootstrap is complete.
    pub bootstrap: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frontend {
    pub name: String,
    /// The IPv4 VIP; `None` in an IPv6 single-stack lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Ipv4Addr>,
    /// The IPv6 VIP for the same frontend (docs/ipv6.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address6: Option<std::net::Ipv6Addr>,
    pub port: u16,
    pub check: HealthCheck,
    pub backends: Vec<Backend>,
}

impl Frontend {
    /// Every address the frontend binds: the IPv4 VIP, then the IPv6 one.
    pub fn addresses(&self) -> Vec<IpAddr> {
        let v4 = self.address.map(IpAddr::V4);
        v4.into_iter()
            .chain(self.address6.map(IpAddr::V6))
            .collect()
    }

    /// The address a client on the host tries first.
    pub fn first_address(&self) -> IpAddr {
        self.addresses()
            .first()
            .copied()
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancer {
    pub frontends: Vec<Frontend>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BmcPlan {
    pub address: std::net::IpAddr,
    pub port: u16,
    pub username: String,
    /// `https://<address>:<port>` (`https://[<address>]:<port>` for IPv6)
    pub endpoint: String,
    pub verify_certificate: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibvirtPlan {
    pub uri: String,
    pub pool: String,
    pub pool_path: PathBuf,
    pub domain_type: DomainType,
    pub firmware: Firmware,
    /// `libvirt.graphics`. Plans recorded before it existed read as headless,
    /// which is what their domains are; headless is left out of the JSON so
    /// their fingerprints stay as they were.
    #[serde(default, skip_serializing_if = "Graphics::is_none")]
    pub graphics: Graphics,
    /// The local base image to import, when the cluster file names one.
    pub image: Option<PathBuf>,
    /// `libvirt.cpu_model`: the QEMU CPU model every node gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// The x86-64 level the release's CoreOS stream needs, once the release
    /// target read it (src/release/cpu_level.rs): under TCG without a
    /// `cpu_model` it picks the model. Not in the cluster file: set by `create`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_level: Option<crate::release::CpuLevel>,
}

/// The plan of a cluster file's text: the unit tests' one fixture.
#[cfg(test)]
pub(crate) fn from_yaml(text: &str) -> Plan {
    let loaded = crate::spec::from_str(text, "t.yaml", &crate::spec::Env::default());
    derive(&loaded.unwrap_or_else(|e| panic!("{e}")).spec)
}

impl Plan {
    /// The cluster address the artifact server binds: the host's address on a
    /// libvirt network (its gateway), or the load balancer's address on an
    /// existing bridge. `None` when the host has no address of its own there.
    pub fn http_address(&self) -> Option<IpAddr> {
        match self.network.mode {
            NetworkMode::Nat => Some(self.network.host_ip()),
            // The load balancer's first address: IPv4's, else (IPv6
            // single-stack) IPv6's.
            NetworkMode::Bridge => {
                let v6 = self.network.ipv6.iter().flat_map(|n| &n.host_addresses);
                let v4 = self.network.host_addresses.iter().map(|&a| IpAddr::V4(a));
                v4.chain(v6.map(|&a| IpAddr::V6(a))).next()
            }
        }
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    pub fn nodes_with_role(&self, role: Role) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(move |n| n.role == role)
    }
}
