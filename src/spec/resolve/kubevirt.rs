//! `backend:` and `kubevirt:`: where the VMs run, and for KubeVirt the
//! kubeconfig, namespace, storage class and network mode. Every check runs
//! before anything is created: a missing kubeconfig or unknown context, a
//! namespace or StorageClass name Kubernetes would refuse (its DNS-1123 rules,
//! kubernetes apimachinery `pkg/util/validation/validation.go`).

use std::path::Path;

use super::{is_dns_label, pick, Env};
use crate::spec::diag::Diagnostics;
use crate::spec::parse::{RawSpec, Src};
use crate::spec::types::*;

/// A DNS-1123 subdomain: what Kubernetes accepts as most object names
/// (StorageClass included): lowercase labels joined by dots, at most 253.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// A container image reference: `[registry/]path[:tag][@digest]`, no scheme,
/// no whitespace (distribution/reference's grammar, loosely: the registry
/// refuses what this lets through, before any VM exists).
fn is_image_reference(s: &str) -> bool {
    !s.is_empty()
        && !s.contains("://")
        && s.bytes().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_' | b'/' | b':' | b'@')
        })
        && s.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric())
}

pub fn resolve(
    raw: &RawSpec,
    env: &Env,
    cluster: &str,
    method: Method,
    network: &NetworkSpec,
    d: &mut Diagnostics,
) -> (BackendKind, Option<KubevirtSpec>) {
    let backend = pick(
        &[
            ("libvirt", BackendKind::Libvirt),
            ("kubevirt", BackendKind::Kubevirt),
        ],
        &raw.backend,
        BackendKind::Libvirt,
        d,
    );
    if backend == BackendKind::Kubevirt && network.veth_bridge.is_some() {
        d.error(
            "network.external_bridge",
            "veth links bridges on a libvirt host; on backend kubevirt the installer's bootstrap VM joins the multus network (leave external_bridge out)",
        );
    }
    let Some(k) = &raw.kubevirt else {
        if backend == BackendKind::Kubevirt {
            d.error(
                "kubevirt",
                "missing: backend: kubevirt needs at least kubevirt.kubeconfig (docs/kubevirt.md)",
            );
        }
        return (backend, None);
    };
    // A `backend:` that names no backend already drew its error; the section is
    // then checked as written, so that a typo there hides none of its problems.
    let backend_unknown = raw
        .backend
        .as_ref()
        .is_some_and(|b| !matches!(b.v.as_str(), "libvirt" | "kubevirt"));
    if backend != BackendKind::Kubevirt && !backend_unknown {
        d.error(
            "kubevirt",
            "set, but backend is not kubevirt; add `backend: kubevirt`",
        );
        return (backend, None);
    }
    let kubeconfig = k
        .kubeconfig
        .as_ref()
        .map_or_else(|| env.path("~/.kube/config"), |s| env.path(&s.v));
    let field = k
        .kubeconfig
        .as_ref()
        .map_or("kubevirt.kubeconfig", |s| s.field.as_str())
        .to_string();
    let context = k.context.as_ref().map(|s| s.v.clone());
    check_kubeconfig(&kubeconfig, &field, k.context.as_ref(), d);

    let namespace = match &k.namespace {
        Some(s) => {
            if !is_dns_label(&s.v) {
                d.error(
                    &s.field,
                    format!(
                        "{:?} is not a namespace name: a DNS-1123 label (lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit)",
                        s.v
                    ),
                );
            }
            s.v.clone()
        }
        None => cluster.to_string(),
    };
    let storage_class = k.storage_class.as_ref().map(|s| {
        if !is_dns_subdomain(&s.v) {
            d.error(
                &s.field,
                format!(
                    "{:?} is not a StorageClass name: a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253)",
                    s.v
                ),
            );
        }
        s.v.clone()
    });
    let net = pick(
        &[("pod", PodNetwork::Pod), ("multus", PodNetwork::Multus)],
        &k.network,
        PodNetwork::Pod,
        d,
    );
    let bridge = match &k.bridge {
        Some(s) => {
            if s.v.is_empty()
                || s.v.len() > 15
                || !s
                    .v
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            {
                d.error(
                    &s.field,
                    format!("{:?} is not a Linux bridge name (at most 15 of letters, digits, '-', '_', '.')", s.v),
                );
            }
            s.v.clone()
        }
        None => network.bridge.clone(),
    };
    let vlan = k.vlan.as_ref().and_then(|s| {
        if s.v == 0 || s.v > 4094 {
            d.error(&s.field, format!("{} is not a VLAN id (1-4094)", s.v));
            None
        } else {
            Some(s.v as u16)
        }
    });
    let service_type = pick(
        &[
            ("LoadBalancer", ServiceType::LoadBalancer),
            ("NodePort", ServiceType::NodePort),
        ],
        &k.service_type,
        ServiceType::LoadBalancer,
        d,
    );
    let image = k.image.as_ref().map(|s| {
        let ok = ["http://", "https://", "docker://"]
            .iter()
            .any(|p| s.v.strip_prefix(p).is_some_and(|rest| !rest.is_empty()));
        if !ok || s.v.chars().any(char::is_whitespace) {
            d.error(
                &s.field,
                format!(
                    "{:?}: use an http(s):// URL of a disk image (imported by CDI) or docker://IMAGE (a containerDisk)",
                    s.v
                ),
            );
        }
        s.v.clone()
    });
    let http_url = k.http_url.as_ref().map(|s| {
        let ok = ["http://", "https://"]
            .iter()
            .any(|p| s.v.strip_prefix(p).is_some_and(|rest| !rest.is_empty()));
        if !ok || s.v.chars().any(char::is_whitespace) {
            d.error(&s.field, format!("{:?} is not an http(s):// URL", s.v));
        }
        s.v.trim_end_matches('/').to_string()
    });
    let haproxy_image = k.haproxy_image.as_ref().map_or_else(
        || DEFAULT_HAPROXY_IMAGE.to_string(),
        |s| {
            if !is_image_reference(&s.v) {
                d.error(
                    &s.field,
                    format!(
                        "{:?} is not a container image reference (e.g. docker.io/library/haproxy:3.0, no scheme)",
                        s.v
                    ),
                );
            }
            s.v.clone()
        },
    );
    let cluster_dns_domain = k.cluster_dns_domain.as_ref().map_or_else(
        || DEFAULT_CLUSTER_DNS_DOMAIN.to_string(),
        |s| {
            if !is_dns_subdomain(&s.v) {
                d.error(
                    &s.field,
                    format!(
                        "{:?} is not a DNS domain (lowercase labels joined by dots)",
                        s.v
                    ),
                );
            }
            s.v.clone()
        },
    );
    if net == PodNetwork::Multus {
        for (set, field) in [
            (&k.haproxy_image, "kubevirt.haproxy_image"),
            (&k.cluster_dns_domain, "kubevirt.cluster_dns_domain"),
        ] {
            if set.is_some() {
                d.warn(
                    field,
                    "only used with network: pod (multus uses shiftlab serve's HAProxy)",
                );
            }
        }
    }
    // A rehearsal without a release has no stream metadata to take the node
    // image from (install/target.rs `without_release`).
    let rehearsal = raw.rehearsal.as_ref().is_some_and(|r| r.v);
    if image.is_none() && rehearsal && raw.mirror.is_none() && raw.openshift_install.is_none() {
        d.error(
            "kubevirt.image",
            "missing: a rehearsal without a release has no stream metadata to take the node image from; give an http(s):// or docker:// image",
        );
    }
    if let Some(i) = &raw.image {
        d.warn(
            &i.field,
            "a local image is not used on backend kubevirt (CDI imports kubevirt.image, or the release's)",
        );
    }
    if net == PodNetwork::Pod && http_url.is_none() {
        d.error(
            "kubevirt.http_url",
            "missing: on the pod network the VMs cannot reach the lab gateway; give the URL at which they reach `shiftlab serve`'s HTTP server (docs/kubevirt.md)",
        );
    }
    match method {
        Method::Upi => {}
        Method::Ipi if net == PodNetwork::Multus => {}
        Method::Ipi => d.error(
            "kubevirt.network",
            "method ipi needs the cluster's own L2 network for its VIPs: use network: multus",
        ),
        // Both boot a live ISO shiftlab builds on the host (coreos-installer
        // embeds the Ignition) and attaches as a CD-ROM; on KubeVirt the ISO
        // would have to be uploaded into a PVC through CDI's upload proxy,
        // which shiftlab does not do yet.
        other => d.error(
            "method",
            format!(
                "method {other} is not supported on backend kubevirt yet: it boots a live ISO built on this host, and shiftlab cannot upload an ISO into the cluster (CDI upload) yet; use upi or ipi, or backend libvirt"
            ),
        ),
    }
    (
        backend,
        Some(KubevirtSpec {
            kubeconfig,
            context,
            namespace,
            storage_class,
            network: net,
            bridge,
            vlan,
            service_type,
            image,
            http_url,
            haproxy_image,
            cluster_dns_domain,
        }),
    )
}

/// The kubeconfig must be a readable YAML file with the context asked for (or a
/// current context): a wrong one is said now, not after half the objects.
fn check_kubeconfig(path: &Path, field: &str, context: Option<&Src<String>>, d: &mut Diagnostics) {
    let text = match crate::spec::read_input(path) {
        Ok(t) => t,
        Err(e) => {
            d.error(
                field,
                format!("cannot read the kubeconfig {}: {e}", path.display()),
            );
            return;
        }
    };
    let value: yaml_serde::Value = match yaml_serde::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            d.error(
                field,
                format!("{} is not a kubeconfig (not YAML: {e})", path.display()),
            );
            return;
        }
    };
    let names: Vec<String> = value
        .get("contexts")
        .and_then(|c| c.as_sequence())
        .map(|s| {
            s.iter()
                .filter_map(|c| c.get("name").and_then(|n| n.as_str()).map(String::from))
                .collect()
        })
        .unwrap_or_default();
    match context {
        Some(c) if !names.contains(&c.v) => d.error(
            &c.field,
            format!(
                "{:?} is not a context of {} (it has: {})",
                c.v,
                path.display(),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        ),
        Some(_) => {}
        None => {
            let current = value.get("current-context").and_then(|c| c.as_str());
            if !current.is_some_and(|c| names.iter().any(|n| n == c)) {
                d.error(
                    field,
                    format!(
                        "{} has no usable current-context; set kubevirt.context",
                        path.display()
                    ),
                );
            }
        }
    }
}
