//! The plan: everything derived from the cluster file, computed without touching the
//! host. Same spec in, byte-identical plan out.

pub mod diff;
mod table;

use std::net::Ipv4Addr;
use std::path::PathBuf;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::addressing::{self, stable_hash};
use crate::spec::{ClusterSpec, DomainType, Firmware, Method, NetworkMode, NodeSize, Role};

pub use table::{render_table, render_table_rows};

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
    pub kubevirt: Option<crate::kubevirt::KubevirtPlan>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkPlan {
    pub name: String,
    pub mode: NetworkMode,
    pub bridge: String,
    pub cidr: Ipv4Net,
    pub netmask: Ipv4Addr,
    pub gateway: Ipv4Addr,
    /// Host addresses on the bridge besides the gateway (the load balancer's).
    pub host_addresses: Vec<Ipv4Addr>,
    /// DNS domain the network is authoritative for: the cluster domain.
    pub domain: String,
    pub dhcp: DhcpRange,
    pub reservations: Vec<Reservation>,
    /// Bare-metal IPI with `external_bridge: veth`: the bridge the installer's
    /// bootstrap VM joins, veth-linked to this network's bridge, made and removed
    /// by shiftlab (src/host/veth.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub veth: Option<crate::host::veth::VethBridge>,
}

impl NetworkPlan {
    /// The installer's `externalBridge`: the veth-linked bridge, else the
    /// network's own.
    pub fn external_bridge(&self) -> &str {
        self.veth.as_ref().map_or(&self.bridge, |v| &v.bridge)
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
    pub api: Ipv4Addr,
    pub ingress: Ipv4Addr,
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
    pub ip: Ipv4Addr,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordType {
    A,
    PTR,
    /// A wildcard A record (`*.apps`), served through dnsmasq's `address=` option.
    #[serde(rename = "A-wildcard")]
    Wildcard,
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
    pub ip: Ipv4Addr,
    pub port: u16,
    /// Removed once bootstrap is complete.
    pub bootstrap: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frontend {
    pub name: String,
    pub address: Ipv4Addr,
    pub port: u16,
    pub check: HealthCheck,
    pub backends: Vec<Backend>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancer {
    pub frontends: Vec<Frontend>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BmcPlan {
    pub address: Ipv4Addr,
    pub port: u16,
    pub username: String,
    /// `https://<address>:<port>`
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
    /// The local base image to import, when the cluster file names one.
    pub image: Option<PathBuf>,
}

/// Where a role's nodes start in the subnet.
fn first_offset(role: Role) -> u32 {
    match role {
        Role::Bootstrap => addressing::BOOTSTRAP_OFFSET,
        Role::Ctlplane => addressing::CTLPLANE_OFFSET,
        Role::Worker => addressing::WORKER_OFFSET,
    }
}

fn mac_for(prefix: [u8; 3], cluster: &str, node: &str, salt: u32) -> String {
    let salt = salt.to_string();
    let digest = stable_hash(&["mac", cluster, node, &salt]);
    let b = hex::decode(&digest[..6]).unwrap_or_default();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        prefix[0], prefix[1], prefix[2], b[0], b[1], b[2]
    )
}

/// A name-based UUID (RFC 9562 version 8) from the cluster and node name.
pub fn uuid_for(cluster: &str, node: &str) -> String {
    let digest = hex::decode(stable_hash(&["uuid", cluster, node])).unwrap_or_default();
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

pub fn node_name(cluster: &str, role: Role, index: u32) -> String {
    match role {
        Role::Bootstrap => format!("{cluster}-bootstrap"),
        _ => format!("{cluster}-{}-{index}", role.as_str()),
    }
}

/// Derive the plan. Pure: reads nothing, writes nothing.
pub fn derive(spec: &ClusterSpec) -> Plan {
    let cd = spec.cluster_domain();
    let net = &spec.network;
    let cidr = net.cidr;
    let method = spec.method;

    let mut members: Vec<(Role, u32)> = Vec::new();
    if method == Method::Upi {
        members.push((Role::Bootstrap, 0));
    }
    members.extend((0..spec.ctlplanes).map(|i| (Role::Ctlplane, i)));
    members.extend((0..spec.workers).map(|i| (Role::Worker, i)));

    let bmc = (method == Method::Ipi).then(|| BmcPlan {
        address: spec.bmc.address,
        port: spec.bmc.port,
        username: spec.bmc.username.clone(),
        endpoint: format!("https://{}:{}", spec.bmc.address, spec.bmc.port),
        verify_certificate: spec.bmc.verify_certificate,
    });

    let mut used_macs: Vec<String> = Vec::new();
    let mut nodes = Vec::new();
    for (role, index) in members {
        let name = node_name(&spec.cluster, role, index);
        // Nodes come in a fixed order and a new worker is always last, so resolving a
        // (vanishingly rare) collision by salting the later node never moves an
        // existing node's MAC.
        let mut salt = 0;
        let mut mac = mac_for(net.mac_prefix, &spec.cluster, &name, salt);
        while used_macs.contains(&mac) {
            salt += 1;
            mac = mac_for(net.mac_prefix, &spec.cluster, &name, salt);
        }
        used_macs.push(mac.clone());
        let size: &NodeSize = spec.size(role);
        let mut disks = vec![Disk {
            volume: format!("{name}.qcow2"),
            size_gb: size.disk_size,
            kind: DiskKind::Root,
        }];
        disks.extend(size.extra_disks.iter().enumerate().map(|(i, gb)| Disk {
            volume: format!("{name}-disk{}.qcow2", i + 1),
            size_gb: *gb,
            kind: DiskKind::Extra,
        }));
        let (boot, start) = match (method, role) {
            (Method::Upi, Role::Worker) => (Boot::DiskFwCfg, Start::AfterBootstrap),
            (Method::Upi, _) => (Boot::DiskFwCfg, Start::Infra),
            (Method::Sno | Method::Agent, _) => (Boot::Iso, Start::Infra),
            (Method::Ipi, _) => (Boot::VirtualMedia, Start::Bmc),
        };
        let uuid = uuid_for(&spec.cluster, &name);
        nodes.push(Node {
            fqdn: format!("{name}.{cd}"),
            ip: addressing::node_ip(&cidr, first_offset(role), index),
            mac,
            vcpus: size.numcpus,
            memory_mib: size.memory,
            disks,
            ignition_volume: (boot == Boot::DiskFwCfg).then(|| format!("{name}.ign")),
            boot,
            start,
            bmc: bmc.as_ref().map(|b| NodeBmc {
                address: format!(
                    "redfish-virtualmedia+https://{}:{}/redfish/v1/Systems/{uuid}",
                    b.address, b.port
                ),
                system_id: format!("/redfish/v1/Systems/{uuid}"),
            }),
            uuid,
            name,
            role,
            index,
        });
    }

    let single_node = spec.ctlplanes == 1;
    let has_lb = matches!(method, Method::Upi | Method::Agent) && !single_node;
    let load_balancer = has_lb.then(|| {
        let api_backends = |port: u16| -> Vec<Backend> {
            nodes
                .iter()
                .filter(|n| matches!(n.role, Role::Bootstrap | Role::Ctlplane))
                .map(|n| Backend {
                    node: n.name.clone(),
                    ip: n.ip,
                    port,
                    bootstrap: n.role == Role::Bootstrap,
                })
                .collect()
        };
        // Routers run on workers; in a compact cluster on the control planes.
        let router_role = if spec.workers > 0 {
            Role::Worker
        } else {
            Role::Ctlplane
        };
        let ingress_backends = |port: u16| -> Vec<Backend> {
            nodes
                .iter()
                .filter(|n| n.role == router_role)
                .map(|n| Backend {
                    node: n.name.clone(),
                    ip: n.ip,
                    port,
                    bootstrap: false,
                })
                .collect()
        };
        LoadBalancer {
            frontends: vec![
                Frontend {
                    name: "api".into(),
                    address: net.api_ip,
                    port: 6443,
                    check: HealthCheck::HttpsReadyz,
                    backends: api_backends(6443),
                },
                Frontend {
                    name: "machine-config".into(),
                    address: net.api_ip,
                    port: 22623,
                    check: HealthCheck::Tcp,
                    backends: api_backends(22623),
                },
                Frontend {
                    name: "ingress-https".into(),
                    address: net.ingress_ip,
                    port: 443,
                    check: HealthCheck::Tcp,
                    backends: ingress_backends(443),
                },
                Frontend {
                    name: "ingress-http".into(),
                    address: net.ingress_ip,
                    port: 80,
                    check: HealthCheck::Tcp,
                    backends: ingress_backends(80),
                },
            ],
        }
    });

    let mut host_addresses = Vec::new();
    if has_lb {
        host_addresses.push(net.api_ip);
        if net.ingress_ip != net.api_ip {
            host_addresses.push(net.ingress_ip);
        }
    }

    let mut dns = vec![
        DnsRecord {
            name: format!("api.{cd}"),
            kind: RecordType::A,
            value: net.api_ip.to_string(),
        },
        DnsRecord {
            name: format!("api-int.{cd}"),
            kind: RecordType::A,
            value: net.api_ip.to_string(),
        },
        DnsRecord {
            name: format!("*.apps.{cd}"),
            kind: RecordType::Wildcard,
            value: net.ingress_ip.to_string(),
        },
    ];
    if !nodes.iter().any(|n| n.ip == net.api_ip) {
        dns.push(DnsRecord {
            name: addressing::reverse_name(net.api_ip),
            kind: RecordType::PTR,
            value: format!("api.{cd}"),
        });
    }
    for n in &nodes {
        dns.push(DnsRecord {
            name: n.fqdn.clone(),
            kind: RecordType::A,
            value: n.ip.to_string(),
        });
        dns.push(DnsRecord {
            name: addressing::reverse_name(n.ip),
            kind: RecordType::PTR,
            value: n.fqdn.clone(),
        });
    }

    let mut plan = Plan {
        format: PLAN_FORMAT,
        cluster: spec.cluster.clone(),
        domain: spec.domain.clone(),
        cluster_domain: cd.clone(),
        distribution: spec.distribution.to_string(),
        version: spec.version.to_string(),
        method,
        platform: if method == Method::Ipi {
            "baremetal"
        } else {
            "none"
        }
        .into(),
        rehearsal: spec.rehearsal,
        network: NetworkPlan {
            name: net.name.clone(),
            mode: net.mode,
            bridge: net.bridge.clone(),
            cidr,
            netmask: cidr.netmask(),
            gateway: addressing::gateway(&cidr),
            host_addresses,
            domain: cd,
            dhcp: DhcpRange {
                start: net.dhcp_start,
                end: net.dhcp_end,
            },
            reservations: nodes
                .iter()
                .map(|n| Reservation {
                    mac: n.mac.clone(),
                    ip: n.ip,
                    hostname: n.name.clone(),
                })
                .collect(),
            veth: net
                .veth_bridge
                .as_ref()
                .map(|b| crate::host::veth::VethBridge::new(&spec.cluster, b, &net.bridge)),
        },
        vips: Vips {
            api: net.api_ip,
            ingress: net.ingress_ip,
        },
        nodes,
        dns,
        load_balancer,
        bmc,
        libvirt: LibvirtPlan {
            uri: spec.libvirt.uri.clone(),
            pool: spec.libvirt.pool.clone(),
            pool_path: spec.libvirt.pool_path.clone(),
            domain_type: spec.libvirt.domain_type,
            firmware: spec.libvirt.firmware,
            image: spec.image.clone(),
        },
        kubevirt: None,
    };
    plan.kubevirt = spec
        .kubevirt
        .as_ref()
        .map(|k| crate::kubevirt::KubevirtPlan::derive(k, &plan));
    // On the pod network the API and ingress are Services: no host load balancer.
    if spec
        .kubevirt
        .as_ref()
        .is_some_and(|k| k.network == crate::spec::PodNetwork::Pod)
    {
        plan.load_balancer = None;
    }
    plan
}

impl Plan {
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    pub fn nodes_with_role(&self, role: Role) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(move |n| n.role == role)
    }
}
