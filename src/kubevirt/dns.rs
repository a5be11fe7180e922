//! `network: pod`: the DNS records the user adds for the API and ingress
//! Services (shiftlab has no DNS server on the pod network). After the infra
//! target applies the objects, it reads the Services back and prints these
//! records with the addresses the cluster gave them (docs/kubevirt.md, "DNS
//! you must add").

use serde::Serialize;

use crate::plan::Plan;
use crate::spec::ServiceType;

/// A Service's addresses as the API reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServiceAddress {
    pub name: String,
    /// `spec.clusterIP`, allocated by the API server.
    pub cluster_ip: Option<String>,
    /// `status.loadBalancer.ingress[0]`: its `ip`, else its `hostname`.
    pub external: Option<String>,
    /// `(port, nodePort)` of each port that has a node port.
    pub node_ports: Vec<(u16, u16)>,
}

impl ServiceAddress {
    /// From a Service object as the API returns it.
    pub fn of(svc: &serde_json::Value) -> ServiceAddress {
        let str_at = |p: &str| {
            svc.pointer(p)
                .and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty() && *s != "None")
                .map(String::from)
        };
        ServiceAddress {
            name: str_at("/metadata/name").unwrap_or_default(),
            cluster_ip: str_at("/spec/clusterIP"),
            external: str_at("/status/loadBalancer/ingress/0/ip")
                .or_else(|| str_at("/status/loadBalancer/ingress/0/hostname")),
            node_ports: svc
                .pointer("/spec/ports")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    Some((
                        u16::try_from(p["port"].as_u64()?).ok()?,
                        u16::try_from(p["nodePort"].as_u64()?).ok()?,
                    ))
                })
                .collect(),
        }
    }
}

fn node_ports(s: &ServiceAddress) -> String {
    if s.node_ports.is_empty() {
        return "(no node ports yet)".into();
    }
    s.node_ports
        .iter()
        .map(|(p, n)| format!("{p} -> node port {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The records to add, one line each, for the API and ingress Services.
pub fn records(
    plan: &Plan,
    service_type: ServiceType,
    api: &ServiceAddress,
    ingress: &ServiceAddress,
) -> Vec<String> {
    let d = &plan.cluster_domain;
    let mut out = Vec::new();
    match service_type {
        ServiceType::LoadBalancer => {
            for (names, svc) in [
                (vec![format!("api.{d}"), format!("api-int.{d}")], api),
                (vec![format!("*.apps.{d}")], ingress),
            ] {
                for n in names {
                    out.push(match &svc.external {
                        Some(ip) => format!("{n} -> {ip} (Service {} EXTERNAL-IP)", svc.name),
                        None => format!(
                            "{n} -> pending: Service {} has no EXTERNAL-IP yet (is a load balancer such as MetalLB installed?)",
                            svc.name
                        ),
                    });
                }
            }
        }
        ServiceType::NodePort => {
            out.push(match &api.cluster_ip {
                Some(ip) => format!("api-int.{d} -> {ip} (Service {} CLUSTER-IP)", api.name),
                None => format!(
                    "api-int.{d} -> pending: Service {} has no CLUSTER-IP yet",
                    api.name
                ),
            });
            out.push(format!(
                "api.{d} -> your load balancer in front of the Kubernetes nodes: {}",
                node_ports(api)
            ));
            out.push(format!(
                "*.apps.{d} -> your load balancer in front of the Kubernetes nodes: {}",
                node_ports(ingress)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan() -> Plan {
        serde_json::from_str(include_str!("../../tests/golden/upi.plan.json")).unwrap()
    }

    #[test]
    fn reads_what_the_api_allocated() {
        let svc = json!({
            "metadata": {"name": "lab1-api"},
            "spec": {"clusterIP": "10.96.0.7", "ports": [
                {"port": 6443, "nodePort": 31443}, {"port": 22623, "nodePort": 32623}]},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.test"}]}},
        });
        let a = ServiceAddress::of(&svc);
        assert_eq!(a.cluster_ip.as_deref(), Some("10.96.0.7"));
        assert_eq!(a.external.as_deref(), Some("lb.example.test"));
        assert_eq!(a.node_ports, [(6443, 31443), (22623, 32623)]);
        // A headless Service has no cluster IP to point at.
        let headless = ServiceAddress::of(&json!({"spec": {"clusterIP": "None"}}));
        assert_eq!(headless.cluster_ip, None);
    }

    #[test]
    fn node_port_records_point_inside_at_the_cluster_ip_and_outside_at_node_ports() {
        let api = ServiceAddress {
            name: "lab1-api".into(),
            cluster_ip: Some("10.96.0.7".into()),
            external: None,
            node_ports: vec![(6443, 31443), (22623, 32623)],
        };
        let ingress = ServiceAddress {
            name: "lab1-ingress".into(),
            node_ports: vec![(80, 30080), (443, 30443)],
            ..Default::default()
        };
        let r = records(&plan(), ServiceType::NodePort, &api, &ingress);
        assert_eq!(
            r,
            [
                "api-int.lab1.lab.test -> 10.96.0.7 (Service lab1-api CLUSTER-IP)",
                "api.lab1.lab.test -> your load balancer in front of the Kubernetes nodes: 6443 -> node port 31443, 22623 -> node port 32623",
                "*.apps.lab1.lab.test -> your load balancer in front of the Kubernetes nodes: 80 -> node port 30080, 443 -> node port 30443",
            ]
        );
        let r = records(&plan(), ServiceType::LoadBalancer, &api, &ingress);
        assert!(
            r[0].starts_with("api.lab1.lab.test -> pending: Service lab1-api has no EXTERNAL-IP"),
            "{r:?}"
        );
    }
}
