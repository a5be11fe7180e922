//! `install-config.yaml` and `agent-config.yaml`, rendered from the spec and the plan.

use std::net::IpAddr;

use serde::Serialize;

use crate::plan::Plan;
use crate::spec::{ClusterSpec, Firmware, Method, Role};

/// The secrets a rendering needs. Kept apart from spec and plan so that neither can
/// leak them into plan output or logs.
pub struct Secrets {
    /// The pull secret, as compact JSON.
    pub pull_secret: String,
    /// The BMC password (bare-metal IPI only).
    pub bmc_password: Option<String>,
    /// The lab BMC's CA certificate (PEM), when the installer is to verify the
    /// BMC (bare-metal IPI with `bmc.verify_certificate: true`). Not a secret, but
    /// like the password it lives in the cluster's state, not in the plan.
    pub bmc_ca: Option<String>,
}

/// The documented fake pull secret OKD accepts when no real one is given.
pub const OKD_FAKE_PULL_SECRET: &str = r#"{"auths":{"fake":{"auth":"aWQ6cGFzcwo="}}}"#;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InstallConfig {
    api_version: &'static str,
    base_domain: String,
    metadata: Metadata,
    compute: Vec<Pool>,
    control_plane: Pool,
    networking: Networking,
    platform: Platform,
    #[serde(skip_serializing_if = "Option::is_none")]
    bootstrap_in_place: Option<BootstrapInPlace>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    fips: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    proxy: Option<Proxy>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    image_digest_sources: Vec<DigestSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    additional_trust_bundle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    capabilities: Option<Caps>,
    pull_secret: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ssh_key: Option<String>,
}

#[derive(Serialize)]
struct Metadata {
    name: String,
}

#[derive(Serialize)]
struct Pool {
    name: &'static str,
    replicas: u32,
    hyperthreading: &'static str,
    architecture: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Networking {
    network_type: String,
    cluster_network: Vec<ClusterNet>,
    service_network: Vec<String>,
    machine_network: Vec<MachineNet>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterNet {
    cidr: String,
    host_prefix: u8,
}

#[derive(Serialize)]
struct MachineNet {
    cidr: String,
}

/// Exactly one of the two is set; a struct rather than an enum so that YAML gets
/// a plain mapping (`platform: {none: {}}`) and not a tagged value.
#[derive(Serialize)]
struct Platform {
    #[serde(skip_serializing_if = "Option::is_none")]
    none: Option<Empty>,
    #[serde(skip_serializing_if = "Option::is_none")]
    baremetal: Option<Baremetal>,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Baremetal {
    #[serde(rename = "apiVIPs")]
    api_vips: Vec<String>,
    #[serde(rename = "ingressVIPs")]
    ingress_vips: Vec<String>,
    provisioning_network: &'static str,
    external_bridge: String,
    /// The CA Ironic verifies the BMCs with (PEM). openshift/installer PR #10072
    /// (METAL-1105, the enhancement enhancements/security/bmc-ca-certificate-support.md)
    /// added `platform.baremetal.bmcVerifyCA`: the bootstrap VM's Ironic and the
    /// cluster's (a ConfigMap in openshift-machine-api) trust it for hosts whose
    /// `disableCertificateVerification` is false. `additionalTrustBundle` is not
    /// it: the enhancement's "Alternatives" says Ironic on the bootstrap VM does
    /// not use the cluster-wide bundle.
    #[serde(rename = "bmcVerifyCA", skip_serializing_if = "Option::is_none")]
    bmc_verify_ca: Option<String>,
    #[serde(rename = "libvirtURI")]
    libvirt_uri: String,
    hosts: Vec<BmHost>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BmHost {
    name: String,
    role: &'static str,
    #[serde(rename = "bootMACAddress")]
    boot_mac_address: String,
    boot_mode: &'static str,
    root_device_hints: RootDeviceHints,
    bmc: Bmc,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RootDeviceHints {
    device_name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Bmc {
    address: String,
    username: String,
    password: String,
    disable_certificate_verification: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BootstrapInPlace {
    installation_disk: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Proxy {
    #[serde(skip_serializing_if = "Option::is_none")]
    http_proxy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    https_proxy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    no_proxy: Option<String>,
}

#[derive(Serialize)]
struct DigestSource {
    source: String,
    mirrors: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Caps {
    #[serde(skip_serializing_if = "Option::is_none")]
    baseline_capability_set: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    additional_enabled_capabilities: Vec<String>,
}

/// Render `install-config.yaml`. `trust_bundle` is the PEM text of
/// `additional_trust_bundle`, read by the caller.
pub fn install_config(
    spec: &ClusterSpec,
    plan: &Plan,
    secrets: &Secrets,
    trust_bundle: Option<&str>,
) -> String {
    let compute_replicas = match spec.method {
        // UPI workers are ours, not a MachineSet's; SNO has none.
        Method::Upi | Method::Sno => 0,
        Method::Ipi | Method::Agent => spec.workers,
    };
    let platform = match spec.method {
        Method::Ipi => Platform {
            none: None,
            baremetal: Some(Baremetal {
                api_vips: per_family(plan.vips.api, plan.vips.api6, plan),
                ingress_vips: per_family(plan.vips.ingress, plan.vips.ingress6, plan),
                provisioning_network: "Disabled",
                external_bridge: plan.network.external_bridge().to_string(),
                bmc_verify_ca: if spec.bmc.verify_certificate {
                    secrets
                        .bmc_ca
                        .as_ref()
                        .map(|c| c.trim_end().to_string() + "\n")
                } else {
                    None
                },
                libvirt_uri: plan.libvirt.uri.clone(),
                hosts: plan
                    .nodes
                    .iter()
                    .filter_map(|n| {
                        let bmc = n.bmc.as_ref()?;
                        Some(BmHost {
                            name: n.name.clone(),
                            role: if n.role == Role::Worker {
                                "worker"
                            } else {
                                "master"
                            },
                            boot_mac_address: n.mac.clone(),
                            boot_mode: match spec.libvirt.firmware {
                                Firmware::Uefi => "UEFI",
                                Firmware::Bios => "legacy",
                            },
                            root_device_hints: RootDeviceHints {
                                device_name: spec.installation_disk.clone(),
                            },
                            bmc: Bmc {
                                address: bmc.address.clone(),
                                username: spec.bmc.username.clone(),
                                password: secrets.bmc_password.clone().unwrap_or_default(),
                                disable_certificate_verification: !spec.bmc.verify_certificate,
                            },
                        })
                    })
                    .collect(),
            }),
        },
        _ => Platform {
            none: Some(Empty {}),
            baremetal: None,
        },
    };
    let ssh_key = (!spec.ssh_keys.is_empty()).then(|| {
        spec.ssh_keys
            .iter()
            .map(|k| k.key.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    });
    let cfg = InstallConfig {
        api_version: "v1",
        base_domain: spec.domain.clone(),
        metadata: Metadata {
            name: spec.cluster.clone(),
        },
        compute: vec![Pool {
            name: "worker",
            replicas: compute_replicas,
            hyperthreading: "Enabled",
            architecture: "amd64",
        }],
        control_plane: Pool {
            name: "master",
            replicas: spec.ctlplanes,
            hyperthreading: "Enabled",
            architecture: "amd64",
        },
        networking: networking(spec, plan),
        platform,
        bootstrap_in_place: (spec.method == Method::Sno).then(|| BootstrapInPlace {
            installation_disk: spec.installation_disk.clone(),
        }),
        fips: spec.fips,
        proxy: spec.proxy.as_ref().map(|p| Proxy {
            http_proxy: p.http_proxy.clone(),
            https_proxy: p.https_proxy.clone(),
            no_proxy: p.no_proxy.clone(),
        }),
        image_digest_sources: spec
            .image_digest_sources
            .iter()
            .map(|s| DigestSource {
                source: s.source.clone(),
                mirrors: s.mirrors.clone(),
            })
            .collect(),
        additional_trust_bundle: trust_bundle.map(|t| t.trim_end().to_string() + "\n"),
        capabilities: spec.capabilities.as_ref().map(|c| Caps {
            baseline_capability_set: c.baseline_capability_set.clone(),
            additional_enabled_capabilities: c.additional_enabled_capabilities.clone(),
        }),
        pull_secret: secrets.pull_secret.clone(),
        ssh_key,
    };
    yaml_serde::to_string(&cfg).expect("install-config serialises")
}

/// One entry per family the lab has, the primary family first: OpenShift
/// wants every dual-stack list in the same order (installer,
/// `validateNetworkingIPVersion`).
fn per_family<A: ToString, B: ToString>(v4: Option<A>, v6: Option<B>, plan: &Plan) -> Vec<String> {
    let primary6 = plan.network.ipv6.as_ref().is_some_and(|n| n.primary);
    let (v4, v6) = (v4.map(|a| a.to_string()), v6.map(|b| b.to_string()));
    let both = if primary6 { [v6, v4] } else { [v4, v6] };
    both.into_iter().flatten().collect()
}

/// `networking`: the pod, service and machine networks, both families in a
/// dual-stack lab (the IPv6 host prefix is always 64).
fn networking(spec: &ClusterSpec, plan: &Plan) -> Networking {
    let v6 = spec.ipv6.as_ref();
    let host_prefix = |cidr: &str| match v6 {
        Some(v6) if cidr == v6.cluster_network.to_string() => v6.cluster_network_host_prefix,
        _ => spec.cluster_network_host_prefix,
    };
    Networking {
        network_type: spec.network_type.clone(),
        cluster_network: per_family(spec.cluster_network, v6.map(|v| v.cluster_network), plan)
            .into_iter()
            .map(|cidr| ClusterNet {
                host_prefix: host_prefix(&cidr),
                cidr,
            })
            .collect(),
        service_network: per_family(spec.service_network, v6.map(|v| v.service_network), plan),
        machine_network: per_family(plan.network.cidr, v6.map(|v| v.cidr), plan)
            .into_iter()
            .map(|cidr| MachineNet { cidr })
            .collect(),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentConfig {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    #[serde(rename = "rendezvousIP")]
    rendezvous_ip: String,
    hosts: Vec<AgentHost>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentHost {
    hostname: String,
    role: &'static str,
    interfaces: Vec<Interface>,
    root_device_hints: RootDeviceHints,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Interface {
    name: &'static str,
    mac_address: String,
}

/// The NIC name CoreOS gives the first virtio NIC on the q35 machines shiftlab defines.
pub const AGENT_INTERFACE: &str = "enp1s0";

/// The agent install's rendezvous IP: the first control plane's address, which
/// must be a host address of the machine network outside the DHCP range (the
/// installer requires it to be a node's: pkg/asset/agent/agentconfig validation
/// of `rendezvousIP`; a DHCP lease could move it).
pub fn rendezvous_ip(plan: &Plan) -> anyhow::Result<std::net::IpAddr> {
    let node = plan
        .nodes_with_role(Role::Ctlplane)
        .next()
        .ok_or_else(|| anyhow::anyhow!("agent: no control plane to be the rendezvous host"))?;
    // The primary family's: IPv4's (an agent lab is never IPv6-primary
    // dual-stack: spec::resolve::ipv6), or IPv6's in an IPv6 single-stack lab.
    let (ip, net) = (node.ip, &plan.network);
    let (subnet, gateway, range) = match (ip, net.ipv6.as_ref()) {
        (IpAddr::V6(_), Some(v6)) => (
            ipnet::IpNet::V6(v6.cidr),
            IpAddr::V6(v6.gateway),
            Some((IpAddr::V6(v6.dhcp.start), IpAddr::V6(v6.dhcp.end))),
        ),
        _ => (
            net.host_cidr(),
            net.host_ip(),
            net.dhcp.as_ref().map(|d| (d.start.into(), d.end.into())),
        ),
    };
    if !subnet.contains(&ip)
        || ip == subnet.network()
        || (ip.is_ipv4() && ip == subnet.broadcast())
        || ip == gateway
    {
        anyhow::bail!(
            "agent: the rendezvous IP {ip} ({}) is not a host address of the machine network {subnet}; use a network whose node addresses fit it",
            node.name,
        );
    }
    if let Some((start, end)) = range.filter(|(s, e)| (*s..=*e).contains(&ip)) {
        anyhow::bail!(
            "agent: the rendezvous IP {ip} ({}) is inside the DHCP range {start}-{end}; move the range away from the node addresses",
            node.name,
        );
    }
    Ok(ip)
}

/// Render `agent-config.yaml` (agent method). The rendezvous host is the first
/// control plane.
pub fn agent_config(spec: &ClusterSpec, plan: &Plan) -> String {
    let rendezvous = rendezvous_ip(plan)
        .map(|ip| ip.to_string())
        .unwrap_or_default();
    let cfg = AgentConfig {
        api_version: "v1beta1",
        kind: "AgentConfig",
        metadata: Metadata {
            name: spec.cluster.clone(),
        },
        rendezvous_ip: rendezvous,
        hosts: plan
            .nodes
            .iter()
            .map(|n| AgentHost {
                hostname: n.name.clone(),
                role: if n.role == Role::Worker {
                    "worker"
                } else {
                    "master"
                },
                interfaces: vec![Interface {
                    name: AGENT_INTERFACE,
                    mac_address: n.mac.clone(),
                }],
                root_device_hints: RootDeviceHints {
                    device_name: spec.installation_disk.clone(),
                },
            })
            .collect(),
    };
    yaml_serde::to_string(&cfg).expect("agent-config serialises")
}

#[cfg(test)]
mod rendezvous_tests {
    use super::*;

    fn plan() -> Plan {
        crate::plan::from_yaml(
            "cluster: lab1\ndistribution: okd\nmethod: agent\nrehearsal: true\nworkers: 2\nssh_keys: ['ssh-ed25519 AAAA k']\n",
        )
    }

    #[test]
    fn the_rendezvous_ip_is_the_first_control_plane_s_fixed_address() {
        let mut p = plan();
        let first = p.nodes_with_role(Role::Ctlplane).next().unwrap().ip;
        assert_eq!(rendezvous_ip(&p).unwrap(), first);
        let yaml = agent_config(&spec_of(&p), &p);
        assert!(yaml.contains(&format!("rendezvousIP: {first}")), "{yaml}");
        // A DHCP range over it: a lease could take it.
        p.network.dhcp.as_mut().unwrap().start = p.nodes[0].ipv4().unwrap();
        let e = rendezvous_ip(&p).unwrap_err().to_string();
        assert!(e.contains("inside the DHCP range"), "{e}");
        // Outside the machine network.
        let mut p = plan();
        p.network.cidr = Some("192.0.2.0/28".parse().unwrap());
        let e = rendezvous_ip(&p).unwrap_err().to_string();
        assert!(
            e.contains("not a host address of the machine network"),
            "{e}"
        );
    }

    fn spec_of(_p: &Plan) -> crate::spec::ClusterSpec {
        crate::spec::from_str(
            "cluster: lab1\ndistribution: okd\nmethod: agent\nrehearsal: true\nworkers: 2\nssh_keys: ['ssh-ed25519 AAAA k']\n",
            "t.yaml",
            &crate::spec::Env::default(),
        )
        .unwrap()
        .spec
    }
}
