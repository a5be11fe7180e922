//! `network: pod`: the load balancer in front of the node VMs runs in the
//! KubeVirt cluster itself, as kcli does for its KubeVirt clusters (karmab/kcli
//! `kvirt/cluster/openshift/haproxy.cfg.kubevirt`: API and machine-config to
//! the bootstrap and control planes, 80/443 to the router nodes, by node DNS
//! name, each server health-checked; `kvirt/cluster/openshift/__init__.py`
//! puts Services of `LoadBalancer` or `NodePort` type in front). kcli runs its
//! HAProxy as a static pod on the control planes; shiftlab runs it as a
//! Deployment in the lab's namespace, so it is there before any node boots
//! and the bootstrap is balanced like the control planes.
//!
//! - a headless Service `<cluster>-nodes` gives each VM the DNS name
//!   `<node>.<cluster>-nodes.<namespace>.svc.<cluster domain>` (the VM's
//!   `hostname` and `subdomain`: kubevirt/user-guide `docs/network/dns.md`);
//! - a ConfigMap `<cluster>-haproxy` holds `haproxy.cfg`, rendered here;
//! - a Deployment `<cluster>-haproxy` runs HAProxy's official image on it;
//!   the config's hash is a pod-template annotation, so a changed config rolls
//!   the pods;
//! - the Services `<cluster>-api` and `<cluster>-ingress` select the HAProxy
//!   pods ([`super::render`]).
//!
//! The image runs HAProxy as a non-root user, so the ingress listeners bind
//! 8080 and 8443 and the ingress Service maps 80 and 443 onto them.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{KubevirtPlan, OWNER_LABEL};
use crate::plan::kubevirt::{haproxy_name as name, nodes_service_name};
use crate::plan::{Node, Plan};
use crate::render::haproxy::defaults;
use crate::spec::Role;

/// The label on the HAProxy pods, which the API and ingress Services select.
pub const HAPROXY_LABEL: &str = "shiftlab.io/haproxy";
/// The label KubeVirt puts on every virt-launcher pod (kubevirt/kubevirt
/// `pkg/virt-controller/services/template.go`, `podLabels`: `v1.AppLabel`
/// (`kubevirt.io`) is `virt-launcher`),
/// which the headless node Service selects (HAProxy's pods carry the owner
/// label too).
const VIRT_LAUNCHER: (&str, &str) = ("kubevirt.io", "virt-launcher");
/// Where the official image reads its configuration (its default command,
/// `haproxy -f /usr/local/etc/haproxy/haproxy.cfg`).
const CONFIG_DIR: &str = "/usr/local/etc/haproxy";
const HEALTH_PORT: u16 = 8404;
const REPLICAS: u32 = 2;

/// One listener: its name, the port HAProxy binds in its pod, the port on the
/// nodes, and whether its check is the API's `GET /readyz`.
struct Listener {
    name: &'static str,
    bind: u16,
    target: u16,
    readyz: bool,
    roles: Vec<Role>,
}

/// The role whose nodes run the routers: workers, or the control planes of a
/// compact cluster (as the plan's load balancer has it on libvirt).
pub fn router_role(plan: &Plan) -> Role {
    if plan.nodes.iter().any(|n| n.role == Role::Worker) {
        Role::Worker
    } else {
        Role::Ctlplane
    }
}

fn listeners(plan: &Plan) -> Vec<Listener> {
    let api = vec![Role::Bootstrap, Role::Ctlplane];
    let routers = vec![router_role(plan)];
    vec![
        Listener {
            name: "api",
            bind: 6443,
            target: 6443,
            readyz: true,
            roles: api.clone(),
        },
        Listener {
            name: "machine-config",
            bind: 22623,
            target: 22623,
            readyz: false,
            roles: api,
        },
        Listener {
            name: "ingress-https",
            bind: 8443,
            target: 443,
            readyz: false,
            roles: routers.clone(),
        },
        Listener {
            name: "ingress-http",
            bind: 8080,
            target: 80,
            readyz: false,
            roles: routers,
        },
    ]
}

/// The Service ports of pod mode: (Service name suffix, port name, Service
/// port, HAProxy's port).
pub fn service_ports() -> [(&'static str, &'static str, u16, u16); 4] {
    [
        ("api", "api", 6443, 6443),
        ("api", "machine-config", 22623, 22623),
        ("ingress", "http", 80, 8080),
        ("ingress", "https", 443, 8443),
    ]
}

/// A node's DNS name inside the KubeVirt cluster.
pub fn node_fqdn(plan: &Plan, kp: &KubevirtPlan, node: &Node) -> String {
    format!(
        "{}.{}.{}.svc.{}",
        node.name,
        nodes_service_name(plan),
        kp.namespace,
        kp.cluster_dns_domain
    )
}

/// The HAProxy configuration text.
pub fn config(plan: &Plan, kp: &KubevirtPlan) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "# HAProxy in front of cluster {cluster}'s nodes ({domain}), rendered by shiftlab from the cluster's plan.\n\
         # It runs as Deployment {name} in namespace {ns}; Services {cluster}-api and {cluster}-ingress select it.\n\
         # Nodes are found by DNS (headless Service {nodes}); one not yet running is down, not an error.\n\
         \n\
         global\n\
         \x20   log stdout format raw local0 notice\n\
         \x20   maxconn 4000\n\
         \n\
         resolvers cluster\n\
         \x20   parse-resolv-conf\n\
         \x20   hold valid 10s\n\
         \x20   hold nx 5s\n\
         \n\
         {defaults}\
         \n\
         frontend health\n\
         \x20   mode http\n\
         \x20   bind :{HEALTH_PORT}\n\
         \x20   monitor-uri /healthz\n",
        cluster = plan.cluster,
        domain = plan.cluster_domain,
        name = name(plan),
        ns = kp.namespace,
        nodes = nodes_service_name(plan),
        defaults = defaults(" resolvers cluster init-addr none"),
    );
    for l in listeners(plan) {
        let _ = write!(
            out,
            "\nfrontend {name}\n\
             \x20   bind :{bind}\n\
             \x20   default_backend {name}\n\
             \nbackend {name}\n\
             \x20   balance roundrobin\n",
            name = l.name,
            bind = l.bind,
        );
        let server_opts = if l.readyz {
            let _ = writeln!(out, "    option httpchk GET /readyz");
            let _ = writeln!(out, "    http-check expect status 200");
            // A rehearsal's stand-in nodes answer plain HTTP (render/haproxy.rs).
            if plan.rehearsal {
                "check"
            } else {
                "check check-ssl verify none"
            }
        } else {
            "check"
        };
        for n in plan.nodes.iter().filter(|n| l.roles.contains(&n.role)) {
            let _ = writeln!(
                out,
                "    server {} {}:{} {server_opts}",
                n.name,
                node_fqdn(plan, kp, n),
                l.target
            );
        }
    }
    out
}

fn metadata(name: &str, ns: &str, labels: &Map<String, Value>) -> Value {
    json!({"name": name, "namespace": ns, "labels": labels})
}

/// The headless Service that names the VMs in DNS. Not-ready pods are
/// published too: a node's name resolves as soon as its VM runs.
pub fn nodes_service(plan: &Plan, kp: &KubevirtPlan, labels: &Map<String, Value>) -> Value {
    let name = nodes_service_name(plan);
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(&name, &kp.namespace, labels),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": true,
            "selector": {OWNER_LABEL: plan.cluster, VIRT_LAUNCHER.0: VIRT_LAUNCHER.1},
        },
    })
}

pub fn config_map(plan: &Plan, kp: &KubevirtPlan, labels: &Map<String, Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(&name(plan), &kp.namespace, labels),
        "data": {"haproxy.cfg": config(plan, kp)},
    })
}

pub fn deployment(plan: &Plan, kp: &KubevirtPlan, labels: &Map<String, Value>) -> Value {
    let name = name(plan);
    let hash = hex::encode(Sha256::digest(config(plan, kp).as_bytes()));
    let selector = json!({OWNER_LABEL: plan.cluster, HAPROXY_LABEL: "true"});
    let mut pod_labels = labels.clone();
    pod_labels.insert(HAPROXY_LABEL.into(), json!("true"));
    let mut ports: Vec<Value> = service_ports()
        .iter()
        .map(|(_, n, _, p)| json!({"name": n, "containerPort": p, "protocol": "TCP"}))
        .collect();
    ports.push(json!({"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"}));
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(&name, &kp.namespace, labels),
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {"shiftlab.io/config-sha256": hash},
                },
                "spec": {
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "haproxy",
                        "image": kp.haproxy_image,
                        "ports": ports,
                        "readinessProbe": {
                            "httpGet": {"path": "/healthz", "port": HEALTH_PORT},
                            "periodSeconds": 5,
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": true}],
                    }],
                    "volumes": [{"name": "config", "configMap": {"name": name}}],
                },
            },
        },
    })
}
