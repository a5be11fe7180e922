//! The plan's derivation from the resolved cluster file, one concern a function:
//! the nodes (names, addresses, MACs, disks, how each boots), the load balancer,
//! the DNS records, the network. Pure: reads nothing, writes nothing.

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::addressing::{self, stable_hash};
use crate::spec::{ClusterSpec, Method, NetworkSpec, NodeSize, Role};

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

/// The node's UUID: name-based, from the cluster and node name
/// ([`addressing::stable_uuid`], the one deriver).
pub fn uuid_for(cluster: &str, node: &str) -> String {
    addressing::stable_uuid(&["uuid", cluster, node])
}

pub fn node_name(cluster: &str, role: Role, index: u32) -> String {
    role.node_name(cluster, index)
}

/// Derive the plan. Pure: reads nothing, writes nothing.
pub fn derive(spec: &ClusterSpec) -> Plan {
    let cd = spec.cluster_domain();
    let net = &spec.network;
    let method = spec.method;
    let bmc = bmc(spec);
    let nodes = nodes(spec, &cd, bmc.as_ref());
    let has_lb = matches!(method, Method::Upi | Method::Agent) && spec.ctlplanes != 1;
    let load_balancer = has_lb.then(|| load_balancer(spec, &nodes));
    let dns = dns_records(&cd, net, &nodes);
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
        network: network(spec, &cd, &nodes, has_lb),
        vips: Vips {
            api: net.api_ip,
            ingress: net.ingress_ip,
            api6: None,
            ingress6: None,
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
            graphics: spec.libvirt.graphics,
            cpu_model: spec.libvirt.cpu_model.clone(),
            cpu_level: None,
            image: spec.image.clone(),
        },
        kubevirt: None,
        storage: None,
    };
    if let Some(v6) = &spec.ipv6 {
        ipv6::add_records(&mut plan, v6);
    }
    plan.storage = storage::StoragePlan::derive(
        spec.storage,
        &spec.cluster,
        plan.network.host_ip(),
        plan.network.host_cidr(),
    );
    plan.kubevirt = spec
        .kubevirt
        .as_ref()
        .map(|k| kubevirt::KubevirtPlan::derive(k, &plan));
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

/// The lab BMC, for bare-metal IPI.
fn bmc(spec: &ClusterSpec) -> Option<BmcPlan> {
    (spec.method == Method::Ipi).then(|| BmcPlan {
        address: spec.bmc.address,
        port: spec.bmc.port,
        username: spec.bmc.username.clone(),
        endpoint: format!(
            "https://{}",
            std::net::SocketAddr::new(spec.bmc.address, spec.bmc.port)
        ),
        verify_certificate: spec.bmc.verify_certificate,
    })
}

/// Every node, in a fixed order (bootstrap, control planes, workers) so that a new
/// worker is always last.
fn nodes(spec: &ClusterSpec, cd: &str, bmc: Option<&BmcPlan>) -> Vec<Node> {
    let net = &spec.network;
    let method = spec.method;
    let mut members: Vec<(Role, u32)> = Vec::new();
    if method == Method::Upi {
        members.push((Role::Bootstrap, 0));
    }
    members.extend((0..spec.ctlplanes).map(|i| (Role::Ctlplane, i)));
    members.extend((0..spec.workers).map(|i| (Role::Worker, i)));

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
        // The same offset in each family's subnet; `ip` is IPv4's where the
        // lab has IPv4.
        let at = first_offset(role).saturating_add(index);
        let ip4 = net.cidr.map(|c| addressing::offset(&c, at));
        let ip6 = spec
            .ipv6
            .as_ref()
            .map(|v6| addressing::offset6(&v6.cidr, at));
        nodes.push(Node {
            fqdn: format!("{name}.{cd}"),
            ip: match (ip4, ip6) {
                (Some(a), _) => IpAddr::V4(a),
                (None, Some(a)) => IpAddr::V6(a),
                (None, None) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            },
            ipv6: ip6,
            mac,
            vcpus: size.numcpus,
            memory_mib: size.memory,
            disks,
            ignition_volume: (boot == Boot::DiskFwCfg).then(|| format!("{name}.ign")),
            boot,
            start,
            bmc: bmc.map(|b| NodeBmc {
                address: format!(
                    "redfish-virtualmedia+https://{}/redfish/v1/Systems/{uuid}",
                    std::net::SocketAddr::new(b.address, b.port)
                ),
                system_id: format!("/redfish/v1/Systems/{uuid}"),
            }),
            uuid,
            name,
            role,
            index,
        });
    }
    nodes
}

/// The host load balancer (UPI and agent with more than one node): the API and
/// the Machine Config Server on control planes (and the bootstrap), ingress on the
/// nodes that run routers.
fn load_balancer(spec: &ClusterSpec, nodes: &[Node]) -> LoadBalancer {
    let net = &spec.network;
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
    let router_roles = router_roles(spec.method, spec.workers);
    let v6 = spec.ipv6.as_ref();
    let ingress_backends = |port: u16| -> Vec<Backend> {
        nodes
            .iter()
            .filter(|n| router_roles.contains(&n.role))
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
                address6: v6.map(|v| v.api_ip),
                port: 6443,
                check: HealthCheck::HttpsReadyz,
                backends: api_backends(6443),
            },
            Frontend {
                name: "machine-config".into(),
                address: net.api_ip,
                address6: v6.map(|v| v.api_ip),
                port: 22623,
                check: HealthCheck::Tcp,
                backends: api_backends(22623),
            },
            Frontend {
                name: "ingress-https".into(),
                address: net.ingress_ip,
                address6: v6.map(|v| v.ingress_ip),
                port: 443,
                check: HealthCheck::Tcp,
                backends: ingress_backends(443),
            },
            Frontend {
                name: "ingress-http".into(),
                address: net.ingress_ip,
                address6: v6.map(|v| v.ingress_ip),
                port: 80,
                check: HealthCheck::Tcp,
                backends: ingress_backends(80),
            },
        ],
    }
}

/// The roles whose nodes may run the default router, so the ingress backends.
/// Routers go where the IngressController's node selector (the worker role)
/// finds schedulable nodes; a control plane carries the worker role while it is
/// schedulable. Compact: the control planes. UPI with workers: the workers (its
/// manifests make control planes unschedulable and pin the IngressController
/// to the worker role: src/render/manifests.rs). Agent: assisted-service makes
/// control planes schedulable with fewer than 2 workers (openshift/assisted-service
/// internal/common/common.go, `ShouldMastersBeSchedulable`:
/// `MinimumNumberOfWorkersForNonSchedulableMastersClusterInHaMode` = 2), and
/// the agent installer takes no scheduler manifest of shiftlab's, so the
/// routers may land on any node.
pub fn router_roles(method: Method, workers: u32) -> Vec<Role> {
    match (method, workers) {
        (_, 0) => vec![Role::Ctlplane],
        (Method::Agent, 1) => vec![Role::Ctlplane, Role::Worker],
        _ => vec![Role::Worker],
    }
}

/// api, api-int, `*.apps`, the API's PTR where no node holds its address, and
/// every node's A and PTR record; none in an IPv6 single-stack lab (its
/// records are all [`ipv6::add_records`]').
fn dns_records(cd: &str, net: &NetworkSpec, nodes: &[Node]) -> Vec<DnsRecord> {
    let (Some(api_ip), Some(ingress_ip)) = (net.api_ip, net.ingress_ip) else {
        return Vec::new();
    };
    let mut dns = vec![
        DnsRecord {
            name: format!("api.{cd}"),
            kind: RecordType::A,
            value: api_ip.to_string(),
        },
        DnsRecord {
            name: format!("api-int.{cd}"),
            kind: RecordType::A,
            value: api_ip.to_string(),
        },
        DnsRecord {
            name: format!("*.apps.{cd}"),
            kind: RecordType::Wildcard,
            value: ingress_ip.to_string(),
        },
    ];
    if !nodes.iter().any(|n| n.ipv4() == Some(api_ip)) {
        dns.push(DnsRecord {
            name: addressing::reverse_name(api_ip),
            kind: RecordType::PTR,
            value: format!("api.{cd}"),
        });
    }
    for n in nodes {
        let Some(ip) = n.ipv4() else { continue };
        dns.push(DnsRecord {
            name: n.fqdn.clone(),
            kind: RecordType::A,
            value: ip.to_string(),
        });
        dns.push(DnsRecord {
            name: addressing::reverse_name(ip),
            kind: RecordType::PTR,
            value: n.fqdn.clone(),
        });
    }
    dns
}

/// The libvirt network: subnet, DHCP range and reservations, and the host's own
/// addresses on it (the load balancer's VIPs).
fn network(spec: &ClusterSpec, cd: &str, nodes: &[Node], has_lb: bool) -> NetworkPlan {
    let net = &spec.network;
    let cidr = net.cidr;
    let mut host_addresses: Vec<Ipv4Addr> = Vec::new();
    if let (true, Some(api), Some(ingress)) = (has_lb, net.api_ip, net.ingress_ip) {
        host_addresses.push(api);
        if ingress != api {
            host_addresses.push(ingress);
        }
    }
    NetworkPlan {
        name: net.name.clone(),
        mode: net.mode,
        bridge: net.bridge.clone(),
        cidr,
        netmask: cidr.map(|c| c.netmask()),
        gateway: cidr.map(|c| addressing::gateway(&c)),
        host_addresses,
        domain: cd.to_string(),
        dhcp: net
            .dhcp_start
            .zip(net.dhcp_end)
            .map(|(start, end)| DhcpRange { start, end }),
        reservations: nodes
            .iter()
            .filter_map(|n| {
                Some(Reservation {
                    mac: n.mac.clone(),
                    ip: n.ipv4()?,
                    hostname: n.name.clone(),
                })
            })
            .collect(),
        veth: net
            .veth_bridge
            .as_ref()
            .map(|b| network::VethBridge::new(&spec.cluster, b, &net.bridge)),
        host_ntp: spec.host_ntp,
        ipv6: spec
            .ipv6
            .as_ref()
            .map(|v6| ipv6::Ipv6Network::new(v6, nodes, has_lb)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routers_may_run_where_the_cluster_schedules_them() {
        use Role::{Ctlplane, Worker};
        for m in [Method::Upi, Method::Agent] {
            assert_eq!(router_roles(m, 0), [Ctlplane], "{m:?} compact");
            assert_eq!(router_roles(m, 2), [Worker], "{m:?} 2 workers");
            assert_eq!(router_roles(m, 5), [Worker], "{m:?} 5 workers");
        }
        // One worker: UPI pins the IngressController to the workers; assisted
        // leaves the control planes schedulable.
        assert_eq!(router_roles(Method::Upi, 1), [Worker]);
        assert_eq!(router_roles(Method::Agent, 1), [Ctlplane, Worker]);
    }
}
