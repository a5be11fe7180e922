//! Pure renderers: a plan in, the Kubernetes objects of its cluster out, in the
//! order they are applied. Nothing here reads or writes anything; the secret
//! part (each node's pointer Ignition, which names the HTTP server's token) is
//! passed in.
//!
//! Shapes follow KubeVirt's `kubevirt.io/v1` API (kubevirt/kubevirt
//! `staging/src/kubevirt.io/api/core/v1/types.go`, `schema.go`), CDI's
//! DataVolume (`kubevirt/containerized-data-importer`
//! `staging/src/kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1/types.go`)
//! and Multus' NetworkAttachmentDefinition (`k8snetworkplumbingwg/network-attachment-definition-client`).
//!
//! Ignition reaches a node through `cloudInitConfigDrive.secretRef`: KubeVirt
//! puts the Secret's `userdata` key on a config drive, which CoreOS' Ignition
//! reads on the KubeVirt platform. The alternative, the
//! `kubevirt.io/ignitiondata` annotation, is refused by KubeVirt's VM admitter
//! unless the `ExperimentalIgnitionSupport` feature gate is on
//! (kubevirt/kubevirt `pkg/virt-api/webhooks/validating-webhook/admitters/vms-admitter.go`:
//! "ExperimentalIgnitionSupport feature gate is not enabled in kubevirt-config"),
//! and it would leave the config readable by anyone who may read VMs. The
//! Secret holds only a pointer config that merges the node's full config from
//! shiftlab's HTTP server behind the cluster's token.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde_json::{json, Map, Value};

use super::{haproxy, KubevirtPlan, NODE_LABEL, OWNER_LABEL, ROLE_LABEL};
use crate::plan::kubevirt::{
    haproxy_name, has_secret, nad_name, nodes_service_name, secret_name, service_names,
};
use crate::plan::{Boot, DiskKind, Node, Plan, Start};
use crate::spec::{PodNetwork, Role};

/// The kinds shiftlab creates, with where the API serves them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Namespace,
    NetworkAttachmentDefinition,
    Secret,
    Service,
    ConfigMap,
    Deployment,
    VirtualMachine,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::Namespace,
        Kind::NetworkAttachmentDefinition,
        Kind::Secret,
        Kind::Service,
        Kind::ConfigMap,
        Kind::Deployment,
        Kind::VirtualMachine,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::NetworkAttachmentDefinition => "NetworkAttachmentDefinition",
            Kind::Secret => "Secret",
            Kind::Service => "Service",
            Kind::ConfigMap => "ConfigMap",
            Kind::Deployment => "Deployment",
            Kind::VirtualMachine => "VirtualMachine",
        }
    }

    /// API group ("" for the core group).
    pub fn group(self) -> &'static str {
        match self {
            Kind::Namespace | Kind::Secret | Kind::Service | Kind::ConfigMap => "",
            Kind::Deployment => "apps",
            Kind::NetworkAttachmentDefinition => "k8s.cni.cncf.io",
            Kind::VirtualMachine => "kubevirt.io",
        }
    }

    pub fn version(self) -> &'static str {
        "v1"
    }

    pub fn api_version(self) -> String {
        match self.group() {
            "" => self.version().to_string(),
            g => format!("{g}/{}", self.version()),
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            Kind::Namespace => "namespaces",
            Kind::NetworkAttachmentDefinition => "network-attachment-definitions",
            Kind::Secret => "secrets",
            Kind::Service => "services",
            Kind::ConfigMap => "configmaps",
            Kind::Deployment => "deployments",
            Kind::VirtualMachine => "virtualmachines",
        }
    }

    pub fn namespaced(self) -> bool {
        self != Kind::Namespace
    }
}

/// One object to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub kind: Kind,
    pub name: String,
    /// The whole object as the API takes it.
    pub body: Value,
}

impl Object {
    pub fn reference(&self) -> String {
        format!("{}/{}", self.kind.as_str(), self.name)
    }
}

/// What rendering needs beyond the plan.
pub struct Inputs<'a> {
    /// The node disk source: `http(s)://` (CDI http import) or `docker://`
    /// (CDI registry import of a containerDisk image).
    pub image: &'a str,
    /// Per node booting from disk, its pointer Ignition (a secret).
    pub userdata: &'a BTreeMap<String, String>,
}

pub use crate::kube::owner::{owner_labels, owner_selector};

fn metadata(name: &str, namespace: Option<&str>, labels: Map<String, Value>) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    if let Some(ns) = namespace {
        m.insert("namespace".into(), json!(ns));
    }
    m.insert("labels".into(), Value::Object(labels));
    Value::Object(m)
}

/// Render every object of the cluster, in apply order.
pub fn render(plan: &Plan, inputs: &Inputs) -> Result<Vec<Object>> {
    let kp = super::plan_of(plan)?;
    let ns = kp.namespace.as_str();
    let labels = owner_labels(&plan.cluster);
    let mut out = Vec::new();
    out.push(Object {
        kind: Kind::Namespace,
        name: ns.to_string(),
        body: json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": metadata(ns, None, labels.clone()),
        }),
    });
    if kp.network == PodNetwork::Multus {
        out.push(network_attachment(plan, kp));
    }
    for node in plan.nodes.iter().filter(|n| has_secret(n)) {
        let Some(userdata) = inputs.userdata.get(&node.name) else {
            bail!("no Ignition for {}", node.name);
        };
        out.push(secret(plan, ns, node, userdata));
    }
    if kp.network == PodNetwork::Pod {
        let lb = haproxy_name(plan);
        out.push(Object {
            kind: Kind::Service,
            name: nodes_service_name(plan),
            body: haproxy::nodes_service(plan, kp, &labels),
        });
        out.push(Object {
            kind: Kind::ConfigMap,
            name: lb.clone(),
            body: haproxy::config_map(plan, kp, &labels),
        });
        out.push(Object {
            kind: Kind::Deployment,
            name: lb,
            body: haproxy::deployment(plan, kp, &labels),
        });
        out.extend(services(plan, kp));
    }
    for node in &plan.nodes {
        out.push(virtual_machine(plan, kp, node, inputs.image)?);
    }
    debug_assert_eq!(
        out.iter().map(Object::reference).collect::<Vec<_>>(),
        kp.objects
    );
    Ok(out)
}

/// A bridge CNI attachment on the host bridge (containernetworking/plugins
/// `plugins/main/bridge`: `bridge`, `vlan`); no IPAM, the lab's own DHCP hands
/// out the planned addresses.
fn network_attachment(plan: &Plan, kp: &KubevirtPlan) -> Object {
    let name = nad_name(plan);
    let mut config = json!({
        "cniVersion": "0.3.1",
        "name": name,
        "type": "bridge",
        "bridge": kp.bridge,
        "ipam": {},
    });
    if let Some(vlan) = kp.vlan {
        config["vlan"] = json!(vlan);
    }
    Object {
        kind: Kind::NetworkAttachmentDefinition,
        name: name.clone(),
        body: json!({
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": metadata(&name, Some(&kp.namespace), owner_labels(&plan.cluster)),
            "spec": {"config": config.to_string()},
        }),
    }
}

fn secret(plan: &Plan, ns: &str, node: &Node, userdata: &str) -> Object {
    use base64::Engine;
    let name = secret_name(node);
    Object {
        kind: Kind::Secret,
        name: name.clone(),
        body: json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata(&name, Some(ns), owner_labels(&plan.cluster)),
            "type": "Opaque",
            // KubeVirt reads the config drive's user data from the key `userdata`
            // (or `userData`): kubevirt/kubevirt pkg/cloud-init/cloud-init.go.
            "data": {"userdata": base64::engine::general_purpose::STANDARD.encode(userdata)},
        }),
    }
}

/// The API and ingress Services of pod mode, in front of the in-cluster
/// HAProxy ([`haproxy`]).
fn services(plan: &Plan, kp: &KubevirtPlan) -> Vec<Object> {
    service_names(plan)
        .into_iter()
        .zip(["api", "ingress"])
        .map(|(name, which)| {
            let ports: Vec<Value> = haproxy::service_ports()
                .iter()
                .filter(|(s, ..)| *s == which)
                .map(|(_, n, port, target)| {
                    json!({"name": n, "protocol": "TCP", "port": port, "targetPort": target})
                })
                .collect();
            Object {
                kind: Kind::Service,
                name: name.clone(),
                body: json!({
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": metadata(&name, Some(&kp.namespace), owner_labels(&plan.cluster)),
                    "spec": {
                        "type": kp.service_type.as_str(),
                        "selector": {OWNER_LABEL: plan.cluster, haproxy::HAPROXY_LABEL: "true"},
                        "ports": ports,
                    },
                }),
            }
        })
        .collect()
}

fn quantity_gb(gb: u64) -> String {
    // Kubernetes quantities: `G` is 10^9 bytes, what the cluster file means.
    format!("{gb}G")
}

fn volume_name(i: usize) -> String {
    if i == 0 {
        "root".into()
    } else {
        format!("disk{i}")
    }
}

fn virtual_machine(plan: &Plan, kp: &KubevirtPlan, node: &Node, image: &str) -> Result<Object> {
    let ns = kp.namespace.as_str();
    let mut labels = owner_labels(&plan.cluster);
    labels.insert(NODE_LABEL.into(), json!(node.name));
    labels.insert(ROLE_LABEL.into(), json!(node.role.as_str()));
    let pod_labels = labels.clone();

    let source = if node.boot == Boot::VirtualMedia {
        // Ironic writes the image onto the disk: it starts blank.
        json!({"blank": {}})
    } else if image.starts_with("docker://") {
        json!({"registry": {"url": image}})
    } else if image.starts_with("http://") || image.starts_with("https://") {
        json!({"http": {"url": image}})
    } else {
        bail!("{image:?}: the node image must be an http(s):// or docker:// URL");
    };
    let mut dv_templates = Vec::new();
    let mut disks = Vec::new();
    let mut volumes = Vec::new();
    for (i, d) in node.disks.iter().enumerate() {
        let vol = volume_name(i);
        let dv = format!("{}-{vol}", node.name);
        let mut storage = json!({"resources": {"requests": {"storage": quantity_gb(d.size_gb)}}});
        if let Some(sc) = &kp.storage_class {
            storage["storageClassName"] = json!(sc);
        }
        dv_templates.push(json!({
            "metadata": {"name": dv, "labels": owner_labels(&plan.cluster)},
            "spec": {
                "source": if d.kind == DiskKind::Root { source.clone() } else { json!({"blank": {}}) },
                "storage": storage,
            },
        }));
        let mut disk = json!({"name": vol, "disk": {"bus": "virtio"}});
        if i == 0 {
            disk["bootOrder"] = json!(1);
        }
        disks.push(disk);
        volumes.push(json!({"name": vol, "dataVolume": {"name": dv}}));
    }
    if has_secret(node) {
        disks.push(json!({"name": "cloudinitdisk", "disk": {"bus": "virtio"}}));
        volumes.push(json!({
            "name": "cloudinitdisk",
            "cloudInitConfigDrive": {"secretRef": {"name": secret_name(node)}},
        }));
    }
    let (interface, network) = match kp.network {
        PodNetwork::Multus => (
            json!({"name": "lab", "bridge": {}, "macAddress": node.mac}),
            json!({"name": "lab", "multus": {"networkName": nad_name(plan)}}),
        ),
        PodNetwork::Pod => (
            json!({"name": "default", "masquerade": {}, "macAddress": node.mac}),
            json!({"name": "default", "pod": {}}),
        ),
    };
    let run_strategy = match node.start {
        Start::Infra => "Always",
        // Started by the workers target, or by the BMC on Ironic's request.
        Start::AfterBootstrap | Start::Bmc => "Halted",
    };
    let mut spec = json!({
        "domain": {
            "cpu": {"cores": node.vcpus},
            "memory": {"guest": format!("{}Mi", node.memory_mib)},
            "resources": {"requests": {"memory": format!("{}Mi", node.memory_mib)}},
            // The plan's UUID: the same SMBIOS UUID and Redfish system id as on libvirt.
            "firmware": {"uuid": node.uuid},
            "devices": {"disks": disks, "interfaces": [interface]},
        },
        "hostname": node.name,
        "networks": [network],
        "volumes": volumes,
    });
    if kp.network == PodNetwork::Pod {
        // `<node>.<cluster>-nodes.<namespace>.svc.<domain>`: how the in-cluster
        // HAProxy finds it.
        spec["subdomain"] = json!(nodes_service_name(plan));
    }
    if node.role == Role::Ctlplane {
        // Control planes spread across hosts where there are enough of them
        // (preferred, so a small cluster still schedules them all).
        spec["affinity"] = json!({"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {OWNER_LABEL: plan.cluster, ROLE_LABEL: "ctlplane"}},
                    "topologyKey": "kubernetes.io/hostname",
                },
            }],
        }});
    }
    Ok(Object {
        kind: Kind::VirtualMachine,
        name: node.name.clone(),
        body: json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": metadata(&node.name, Some(ns), labels),
            "spec": {
                "runStrategy": run_strategy,
                "dataVolumeTemplates": dv_templates,
                "template": {
                    "metadata": {"labels": pod_labels},
                    "spec": spec,
                },
            },
        }),
    })
}

/// Objects as one YAML stream (`---` between documents).
pub fn to_yaml(objects: &[Object]) -> Result<String> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&yaml_serde::to_string(&o.body)?);
    }
    Ok(out)
}
