//! Which node certificate signing requests shiftlab approves: a pure decision over
//! what the API says about a CSR (signer, requestor, usages, state) and what its
//! PKCS#10 request says (subject, SANs), against the nodes of the plan.
//!
//! Nothing here touches a cluster; [`super::approve`] feeds it from the API.
//!
//! The rules (docs/csr.md says the same for users):
//!
//! - a **client** CSR is approved when its signer is
//!   `kubernetes.io/kube-apiserver-client-kubelet`, it was requested by the
//!   machine-config-operator's `node-bootstrapper` service account, its subject is
//!   exactly CN `system:node:<name>` O `system:nodes` with `<name>` the name or FQDN of a
//!   plan node (not the bootstrap), it carries no SANs, and its usages include
//!   `client auth` and stay within digital signature, key encipherment, client auth;
//! - a **serving** CSR is approved when its signer is `kubernetes.io/kubelet-serving`,
//!   the requestor is the node itself (`system:node:<name>`, in group `system:nodes`)
//!   and equal to the subject's CN, O is `system:nodes`, the node passes the client
//!   rule's node check, it has at least one SAN, every DNS SAN is that node's name or
//!   FQDN, every IP SAN is that node's planned address, there are no other SAN kinds,
//!   and its usages include `server auth` and stay within digital signature, key
//!   encipherment, server auth.
//!
//! Beside the plan, the cluster itself is asked, as openshift/cluster-machine-approver
//! does (`pkg/controller/csr_check.go`: `authorizeNodeClientCSR`,
//! `authorizeServingCertWithMachine`), with the Node objects standing in for the
//! Machines that UPI does not have:
//!
//! - a client CSR is refused when a Node of that name already exists (a kubelet
//!   that joined renews with its own credentials, never the bootstrapper's), and
//!   when a client CSR for that node was already approved (one identity per node);
//!   except while `shiftlab start` brings nodes back ([`ClusterFacts::rejoining`]):
//!   a kubelet whose client certificate expired while the cluster was off falls
//!   back to its bootstrap kubeconfig and asks again through the node-bootstrapper
//!   for the Node it already is. OpenShift's "Restarting the cluster gracefully"
//!   (openshift/openshift-docs, modules/graceful-restart.adoc) has the admin approve
//!   exactly those pending node-bootstrapper CSRs; the machine approver leaves them
//!   alone. Such a CSR is approved only for a node that start powered on, whose
//!   Node is not `Ready` (its kubelet cannot post status), and at most once per
//!   bring-back;
//! - a serving CSR is approved only for an existing Node, and only when every DNS
//!   SAN is one of its `Hostname`/`InternalDNS`/`ExternalDNS` addresses and every IP
//!   SAN one of its `InternalIP`/`ExternalIP` addresses.
//!
//! A CSR that looks like a node's (a kubelet signer, a node or node-bootstrapper
//! requestor, or a `system:node:` CN) and fails a rule is **refused**: logged and
//! reported, never denied in the API. Anything else is **skipped**: CSRs already
//! approved or denied, and other signers' CSRs, which belong to the operators that
//! raised them.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use serde::Serialize;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509CertificationRequest};

use crate::plan::Plan;
use crate::spec::Role;

pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
pub const NODE_BOOTSTRAPPER: &str =
    "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
pub const NODE_USER_PREFIX: &str = "system:node:";
pub const NODES_GROUP: &str = "system:nodes";

const CLIENT_USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];
const SERVING_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];

/// Which of a node's two certificates a CSR asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CsrKind {
    /// The kubelet's client certificate, requested through the node bootstrapper.
    Client,
    /// The kubelet's serving certificate, requested by the node itself.
    Serving,
}

impl CsrKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CsrKind::Client => "client",
            CsrKind::Serving => "serving",
        }
    }
}

impl fmt::Display for CsrKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a CSR stands in the API, from its status conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CsrState {
    Pending,
    Approved,
    Denied,
    Failed,
}

/// What the PKCS#10 request itself says, as far as the rules care.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RequestSubject {
    pub common_names: Vec<String>,
    pub organizations: Vec<String>,
    /// Subject attributes other than CN and O, as `OID=value`.
    pub other_attributes: Vec<String>,
    pub dns_names: Vec<String>,
    pub ips: Vec<IpAddr>,
    /// SANs of other kinds (e-mail, URI, …), described.
    pub other_sans: Vec<String>,
}

impl RequestSubject {
    fn has_sans(&self) -> bool {
        !(self.dns_names.is_empty() && self.ips.is_empty() && self.other_sans.is_empty())
    }
}

/// Everything the decision needs about one CSR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrFacts {
    pub name: String,
    pub signer: String,
    /// `spec.username`: who created the CSR, set by the API server.
    pub username: String,
    pub groups: Vec<String>,
    pub usages: Vec<String>,
    pub state: CsrState,
    /// The decoded request, or why it could not be decoded.
    pub request: Result<RequestSubject, String>,
}

/// A Node as the API shows it: its name and `status.addresses` as (type, address).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiNode {
    pub name: String,
    pub addresses: Vec<(String, String)>,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
}

/// What the cluster says besides the CSR itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// The Nodes that exist.
    pub nodes: Vec<ApiNode>,
    /// Plan nodes whose client CSR is approved already (seen approved in the API,
    /// or approved earlier in this pass or watch).
    pub clients_approved: std::collections::BTreeSet<String>,
    /// Plan nodes being brought back by `shiftlab start`: their existing, not
    /// Ready Node may be re-bootstrapped by one client CSR.
    pub rejoining: std::collections::BTreeSet<String>,
    /// Of those, the ones whose client CSR this bring-back approved already.
    pub rejoined: std::collections::BTreeSet<String>,
}

impl ClusterFacts {
    fn node(&self, name: &str) -> Option<&ApiNode> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// A plan node as CSRs may name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub name: String,
    pub fqdn: String,
    /// [`crate::plan::Node::ip`]: IPv4, or IPv6 in an IPv6 single-stack lab.
    pub ip: IpAddr,
    /// A dual-stack lab's planned IPv6 address: its kubelet serves on both
    /// families, so its serving CSR carries both InternalIPs.
    pub ipv6: Option<Ipv6Addr>,
    pub role: Role,
}

impl NodeIdentity {
    pub fn from_plan(plan: &Plan) -> Vec<NodeIdentity> {
        plan.nodes
            .iter()
            .map(|n| NodeIdentity {
                name: n.name.clone(),
                fqdn: n.fqdn.clone(),
                ip: n.ip,
                ipv6: n.ipv6,
                role: n.role,
            })
            .collect()
    }

    /// One of the node's planned addresses (either family).
    fn planned(&self, ip: &IpAddr) -> bool {
        *ip == self.ip || self.ipv6.is_some_and(|v6| *ip == IpAddr::V6(v6))
    }

    fn answers_to(&self, name: &str) -> bool {
        name == self.name || name == self.fqdn
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    /// A plan node's CSR that passes every check of its kind.
    Approve {
        node: String,
        kind: CsrKind,
        /// The rule that approved it, for the approval condition's message.
        rule: String,
    },
    /// A node-looking CSR that fails a check: logged and reported, not denied.
    Refuse {
        node: Option<String>,
        kind: Option<CsrKind>,
        reason: String,
    },
    /// Not ours to judge: already decided, or not a node CSR.
    Skip { reason: String },
}

impl Decision {
    pub fn label(&self) -> &'static str {
        match self {
            Decision::Approve { .. } => "approve",
            Decision::Refuse { .. } => "refuse",
            Decision::Skip { .. } => "skip",
        }
    }
}

/// Decode a PEM `CERTIFICATE REQUEST` into the parts the rules look at.
pub fn parse_request(pem: &[u8]) -> Result<RequestSubject, String> {
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(pem).map_err(|e| format!("request is not PEM: {e}"))?;
    if pem.label != "CERTIFICATE REQUEST" && pem.label != "NEW CERTIFICATE REQUEST" {
        return Err(format!(
            "request is a PEM {:?}, not a CERTIFICATE REQUEST",
            pem.label
        ));
    }
    let (rest, csr) = X509CertificationRequest::from_der(&pem.contents)
        .map_err(|e| format!("request is not a PKCS#10 certification request: {e}"))?;
    if !rest.is_empty() {
        return Err("request has trailing bytes after the PKCS#10 structure".into());
    }
    let info = &csr.certification_request_info;
    let mut subject = RequestSubject::default();
    for rdn in info.subject.iter() {
        for atv in rdn.iter() {
            let value = atv.as_str().map(str::to_string).map_err(|e| {
                format!("subject attribute {} is not a string: {e}", atv.attr_type())
            })?;
            let oid = atv.attr_type();
            if *oid == x509_parser::oid_registry::OID_X509_COMMON_NAME {
                subject.common_names.push(value);
            } else if *oid == x509_parser::oid_registry::OID_X509_ORGANIZATION_NAME {
                subject.organizations.push(value);
            } else {
                subject.other_attributes.push(format!("{oid}={value}"));
            }
        }
    }
    // Every extension request counts, not only the first: a second one must not hide SANs.
    for attr in info.iter_attributes() {
        let x509_parser::cri_attributes::ParsedCriAttribute::ExtensionRequest(req) =
            attr.parsed_attribute()
        else {
            continue;
        };
        for ext in &req.extensions {
            match ext.parsed_extension() {
                ParsedExtension::SubjectAlternativeName(san) => {
                    for gn in &san.general_names {
                        add_san(&mut subject, gn)?;
                    }
                }
                ParsedExtension::ParseError { error } => {
                    return Err(format!(
                        "request extension {} is malformed: {error}",
                        ext.oid
                    ));
                }
                _ if ext.oid == x509_parser::oid_registry::OID_X509_EXT_SUBJECT_ALT_NAME => {
                    return Err("request's subjectAltName extension could not be read".into());
                }
                _ => {}
            }
        }
    }
    Ok(subject)
}

fn add_san(subject: &mut RequestSubject, gn: &GeneralName<'_>) -> Result<(), String> {
    match gn {
        GeneralName::DNSName(d) => subject.dns_names.push(d.to_string()),
        GeneralName::IPAddress(raw) => {
            let ip = match raw.len() {
                4 => IpAddr::from(<[u8; 4]>::try_from(*raw).expect("4 bytes")),
                16 => IpAddr::from(<[u8; 16]>::try_from(*raw).expect("16 bytes")),
                n => return Err(format!("IP SAN of {n} bytes")),
            };
            subject.ips.push(ip);
        }
        GeneralName::RFC822Name(e) => subject.other_sans.push(format!("email:{e}")),
        GeneralName::URI(u) => subject.other_sans.push(format!("URI:{u}")),
        other => subject.other_sans.push(format!("{other:?}")),
    }
    Ok(())
}

/// Does this CSR look like a node's? Only those can be refused; the rest are skipped.
fn node_looking(facts: &CsrFacts) -> bool {
    facts.signer == CLIENT_SIGNER
        || facts.signer == SERVING_SIGNER
        || facts.username == NODE_BOOTSTRAPPER
        || facts.username.starts_with(NODE_USER_PREFIX)
        || facts.request.as_ref().is_ok_and(|r| {
            r.common_names
                .iter()
                .any(|cn| cn.starts_with(NODE_USER_PREFIX))
        })
}

/// Decide what to do with one CSR, given the plan's nodes and what the cluster says.
pub fn decide(facts: &CsrFacts, nodes: &[NodeIdentity], cluster: &ClusterFacts) -> Decision {
    decide_inner(facts, nodes, Some(cluster))
}

/// Which plan node and kind a CSR is for, by the plan's rules alone: how an
/// already approved CSR is recognised as a node's certificate being done.
pub fn decide_by_plan(facts: &CsrFacts, nodes: &[NodeIdentity]) -> Decision {
    decide_inner(facts, nodes, None)
}

fn decide_inner(
    facts: &CsrFacts,
    nodes: &[NodeIdentity],
    cluster: Option<&ClusterFacts>,
) -> Decision {
    match facts.state {
        CsrState::Pending => {}
        CsrState::Approved => {
            return Decision::Skip {
                reason: "already approved".into(),
            }
        }
        CsrState::Denied => {
            return Decision::Skip {
                reason: "denied".into(),
            }
        }
        CsrState::Failed => {
            return Decision::Skip {
                reason: "failed".into(),
            }
        }
    }
    if !node_looking(facts) {
        return Decision::Skip {
            reason: format!("not a node CSR (signer {})", facts.signer),
        };
    }
    let kind = match facts.signer.as_str() {
        CLIENT_SIGNER => CsrKind::Client,
        SERVING_SIGNER => CsrKind::Serving,
        other => {
            return refuse(
                facts.request.as_ref().ok().and_then(cn_node_name),
                None,
                format!(
                    "node-looking CSR with signer {other}, neither {CLIENT_SIGNER} nor {SERVING_SIGNER}"
                ),
            )
        }
    };
    let checked = check(facts, kind, nodes).and_then(|node| match cluster {
        Some(c) => check_cluster(facts, kind, node, c),
        None => Ok(node),
    });
    match checked {
        Ok(node) => Decision::Approve {
            node: node.name.clone(),
            kind,
            rule: match kind {
                CsrKind::Client => format!(
                    "client CSR from the node bootstrapper for plan node {}",
                    node.name
                ),
                CsrKind::Serving => format!(
                    "serving CSR from plan node {} with SANs among its names and address",
                    node.name
                ),
            },
        },
        Err((node, reason)) => refuse(node, Some(kind), reason),
    }
}

fn refuse(node: Option<String>, kind: Option<CsrKind>, reason: String) -> Decision {
    Decision::Refuse { node, kind, reason }
}

fn cn_node_name(r: &RequestSubject) -> Option<String> {
    match r.common_names.as_slice() {
        [cn] => cn.strip_prefix(NODE_USER_PREFIX).map(str::to_string),
        _ => None,
    }
}

type Refusal = (Option<String>, String);

/// The checks of one kind; on success the plan node the CSR is for.
fn check<'n>(
    facts: &CsrFacts,
    kind: CsrKind,
    nodes: &'n [NodeIdentity],
) -> Result<&'n NodeIdentity, Refusal> {
    let request = facts
        .request
        .as_ref()
        .map_err(|e| (None, format!("unreadable request: {e}")))?;
    // The subject: exactly one CN system:node:<name>, exactly O system:nodes, nothing else.
    let name = match request.common_names.as_slice() {
        [cn] => cn
            .strip_prefix(NODE_USER_PREFIX)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| (None, format!("subject CN {cn:?} is not system:node:<name>")))?,
        [] => return Err((None, "subject has no CN".into())),
        many => return Err((None, format!("subject has {} CNs", many.len()))),
    };
    let named = Some(name.to_string());
    let node = resolve_node(name, nodes).map_err(|r| (named.clone(), r))?;
    let named = Some(node.name.clone());
    if request.organizations != [NODES_GROUP] {
        return Err((
            named,
            format!(
                "subject O is {:?}, not exactly [\"{NODES_GROUP}\"]",
                request.organizations
            ),
        ));
    }
    if !request.other_attributes.is_empty() {
        return Err((
            named,
            format!(
                "subject has attributes besides CN and O: {}",
                request.other_attributes.join(", ")
            ),
        ));
    }
    let (allowed, needed) = match kind {
        CsrKind::Client => (CLIENT_USAGES, "client auth"),
        CsrKind::Serving => (SERVING_USAGES, "server auth"),
    };
    if let Some(extra) = facts.usages.iter().find(|u| !allowed.contains(&u.as_str())) {
        return Err((
            named,
            format!(
                "usage {extra:?} is not allowed for a {kind} CSR (allowed: {})",
                allowed.join(", ")
            ),
        ));
    }
    if !facts.usages.iter().any(|u| u == needed) {
        return Err((named, format!("usages lack {needed:?}")));
    }
    match kind {
        CsrKind::Client => {
            if facts.username != NODE_BOOTSTRAPPER {
                return Err((
                    named,
                    format!(
                        "client CSR requested by {:?}, not the node bootstrapper {NODE_BOOTSTRAPPER}",
                        facts.username
                    ),
                ));
            }
            if request.has_sans() {
                return Err((named, "client CSR carries SANs".into()));
            }
        }
        CsrKind::Serving => {
            let cn = format!("{NODE_USER_PREFIX}{name}");
            if facts.username != cn {
                return Err((
                    named,
                    format!(
                        "serving CSR for {cn:?} requested by {:?}: requestor and CN differ",
                        facts.username
                    ),
                ));
            }
            if !facts.groups.iter().any(|g| g == NODES_GROUP) {
                return Err((
                    named,
                    format!(
                        "requestor {:?} is not in group {NODES_GROUP}",
                        facts.username
                    ),
                ));
            }
            if !request.has_sans() {
                return Err((named, "serving CSR has no SANs".into()));
            }
            if let Some(other) = request.other_sans.first() {
                return Err((named, format!("SAN {other} is neither DNS nor IP")));
            }
            if let Some(d) = request.dns_names.iter().find(|d| !node.answers_to(d)) {
                return Err((
                    named,
                    format!("DNS SAN {d:?} is not {} or {}", node.name, node.fqdn),
                ));
            }
            if let Some(ip) = request.ips.iter().find(|ip| !node.planned(ip)) {
                let planned = match node.ipv6 {
                    Some(v6) => format!("addresses {} and {v6}", node.ip),
                    None => format!("address {}", node.ip),
                };
                return Err((
                    named,
                    format!("IP SAN {ip} is not {}'s planned {planned}", node.name),
                ));
            }
        }
    }
    Ok(node)
}

/// The checks against the cluster's own objects, after the plan's.
fn check_cluster<'n>(
    facts: &CsrFacts,
    kind: CsrKind,
    node: &'n NodeIdentity,
    cluster: &ClusterFacts,
) -> Result<&'n NodeIdentity, Refusal> {
    let named = Some(node.name.clone());
    // The name the kubelet registers (and requests for) is the CN's.
    let asked = facts
        .request
        .as_ref()
        .ok()
        .and_then(cn_node_name)
        .unwrap_or_else(|| node.name.clone());
    match kind {
        CsrKind::Client => {
            let existing = cluster
                .nodes
                .iter()
                .find(|n| node.answers_to(&n.name) || n.name == asked);
            if cluster.rejoining.contains(&node.name) {
                if let Some(n) = existing.filter(|n| !n.ready) {
                    if cluster.rejoined.contains(&node.name) {
                        return Err((
                            named,
                            format!(
                                "a client CSR for {} was approved already in this start: a second one would give the node a second identity",
                                node.name
                            ),
                        ));
                    }
                    tracing::debug!(node = %n.name, "rejoining: its Node is not Ready");
                    return Ok(node);
                }
            }
            if let Some(n) = existing {
                return Err((
                    named,
                    format!(
                        "Node {} already exists: a joined kubelet renews its client certificate with its own credentials, not the node bootstrapper's (after a stop, `shiftlab start` approves one such CSR for a node it powered on whose Node is not Ready)",
                        n.name
                    ),
                ));
            }
            if cluster.clients_approved.contains(&node.name) {
                return Err((
                    named,
                    format!(
                        "a client CSR for {} is approved already: a second one would give the node a second identity",
                        node.name
                    ),
                ));
            }
        }
        CsrKind::Serving => {
            let Some(api) = cluster.node(&asked) else {
                return Err((
                    named,
                    format!(
                        "no Node {asked} is registered (yet): its serving CSR waits until it is"
                    ),
                ));
            };
            let has = |types: &[&str], value: &str| {
                api.addresses.iter().any(|(t, a)| {
                    types.contains(&t.as_str())
                        && a.trim_end_matches('.')
                            .eq_ignore_ascii_case(value.trim_end_matches('.'))
                })
            };
            let request = facts
                .request
                .as_ref()
                .map_err(|e| (named.clone(), e.clone()))?;
            if let Some(d) = request
                .dns_names
                .iter()
                .find(|d| !has(&["Hostname", "InternalDNS", "ExternalDNS"], d))
            {
                return Err((
                    named,
                    format!("DNS SAN {d:?} is not among Node {asked}'s host names"),
                ));
            }
            if let Some(ip) = request
                .ips
                .iter()
                .find(|ip| !has(&["InternalIP", "ExternalIP"], &ip.to_string()))
            {
                return Err((
                    named,
                    format!("IP SAN {ip} is not among Node {asked}'s addresses"),
                ));
            }
        }
    }
    Ok(node)
}

fn resolve_node<'n>(name: &str, nodes: &'n [NodeIdentity]) -> Result<&'n NodeIdentity, String> {
    let node = nodes
        .iter()
        .find(|n| n.answers_to(name))
        .ok_or_else(|| format!("{name} is not a node of the plan"))?;
    if node.role == Role::Bootstrap {
        return Err(format!(
            "{name} is the bootstrap node, which never joins the cluster"
        ));
    }
    Ok(node)
}

#[cfg(test)]
mod tests;
