use super::*;

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

/// A PEM CSR as a kubelet would make it, generated here (no recorded cluster needed).
fn request(cn: &str, org: Option<&str>, sans: &[&str]) -> Vec<u8> {
    let mut p =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    if let Some(o) = org {
        p.distinguished_name.push(DnType::OrganizationName, o);
    }
    let key = KeyPair::generate().unwrap();
    p.serialize_request(&key)
        .unwrap()
        .pem()
        .unwrap()
        .into_bytes()
}

fn nodes() -> Vec<NodeIdentity> {
    let n = |name: &str, ip: [u8; 4], role| NodeIdentity {
        name: name.into(),
        fqdn: format!("{name}.lab1.example.com"),
        ip: std::net::Ipv4Addr::from(ip).into(),
        ipv6: None,
        role,
    };
    vec![
        n("lab1-bootstrap", [192, 168, 126, 9], Role::Bootstrap),
        n("lab1-ctlplane-0", [192, 168, 126, 10], Role::Ctlplane),
        n("lab1-worker-0", [192, 168, 126, 20], Role::Worker),
        n("lab1-worker-1", [192, 168, 126, 21], Role::Worker),
    ]
}

fn client(cn: &str) -> CsrFacts {
    CsrFacts {
        name: "csr-client".into(),
        signer: CLIENT_SIGNER.into(),
        username: NODE_BOOTSTRAPPER.into(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:serviceaccounts:openshift-machine-config-operator".into(),
            "system:authenticated".into(),
        ],
        usages: vec![
            "digital signature".into(),
            "key encipherment".into(),
            "client auth".into(),
        ],
        state: CsrState::Pending,
        request: parse_request(&request(cn, Some(NODES_GROUP), &[])),
    }
}

fn serving(node: &str, sans: &[&str]) -> CsrFacts {
    let cn = format!("system:node:{node}");
    CsrFacts {
        name: "csr-serving".into(),
        signer: SERVING_SIGNER.into(),
        username: cn.clone(),
        groups: vec!["system:nodes".into(), "system:authenticated".into()],
        usages: vec![
            "digital signature".into(),
            "key encipherment".into(),
            "server auth".into(),
        ],
        state: CsrState::Pending,
        request: parse_request(&request(&cn, Some(NODES_GROUP), sans)),
    }
}

/// The plan's nodes registered as a kubelet registers them.
fn registered() -> ClusterFacts {
    ClusterFacts {
        nodes: nodes()
            .into_iter()
            .filter(|n| n.role != Role::Bootstrap)
            .map(|n| ApiNode {
                ready: true,
                name: n.name.clone(),
                addresses: vec![
                    ("InternalIP".into(), n.ip.to_string()),
                    ("Hostname".into(), n.name.clone()),
                    ("InternalDNS".into(), n.fqdn.clone()),
                ],
            })
            .collect(),
        ..ClusterFacts::default()
    }
}

/// Each kind in its natural situation: a client CSR before its Node exists, a
/// serving CSR once it does.
fn decide(f: &CsrFacts, n: &[NodeIdentity]) -> Decision {
    if f.signer == SERVING_SIGNER {
        super::decide(f, n, &registered())
    } else {
        super::decide(f, n, &ClusterFacts::default())
    }
}

fn refused(d: &Decision, needle: &str) {
    match d {
        Decision::Refuse { reason, .. } => {
            assert!(
                reason.contains(needle),
                "reason {reason:?} lacks {needle:?}"
            )
        }
        other => panic!("expected a refusal ({needle}), got {other:?}"),
    }
}

fn approved(d: &Decision, node: &str, kind: CsrKind) {
    match d {
        Decision::Approve {
            node: n, kind: k, ..
        } => {
            assert_eq!((n.as_str(), *k), (node, kind))
        }
        other => panic!("expected approval of {node} {kind}, got {other:?}"),
    }
}

#[test]
fn parses_subject_and_sans() {
    let r = parse_request(&request(
        "system:node:lab1-worker-0",
        Some("system:nodes"),
        &["lab1-worker-0", "192.168.126.20"],
    ))
    .unwrap();
    assert_eq!(r.common_names, ["system:node:lab1-worker-0"]);
    assert_eq!(r.organizations, ["system:nodes"]);
    assert_eq!(r.dns_names, ["lab1-worker-0"]);
    assert_eq!(r.ips, [IpAddr::from([192, 168, 126, 20])]);
    assert!(r.other_sans.is_empty() && r.other_attributes.is_empty());
}

#[test]
fn garbage_requests_do_not_parse() {
    assert!(parse_request(b"not pem").is_err());
    let cert = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
    let err = parse_request(cert.cert.pem().as_bytes()).unwrap_err();
    assert!(err.contains("not a CERTIFICATE REQUEST"), "{err}");
}

#[test]
fn good_client_csr_by_short_name_and_fqdn() {
    approved(
        &decide(&client("system:node:lab1-worker-0"), &nodes()),
        "lab1-worker-0",
        CsrKind::Client,
    );
    approved(
        &decide(
            &client("system:node:lab1-worker-1.lab1.example.com"),
            &nodes(),
        ),
        "lab1-worker-1",
        CsrKind::Client,
    );
    approved(
        &decide(&client("system:node:lab1-ctlplane-0"), &nodes()),
        "lab1-ctlplane-0",
        CsrKind::Client,
    );
}

#[test]
fn good_serving_csr() {
    let sans = [
        "lab1-worker-0",
        "lab1-worker-0.lab1.example.com",
        "192.168.126.20",
    ];
    approved(
        &decide(&serving("lab1-worker-0", &sans), &nodes()),
        "lab1-worker-0",
        CsrKind::Serving,
    );
    // kubelets often list only the address
    approved(
        &decide(&serving("lab1-worker-0", &["192.168.126.20"]), &nodes()),
        "lab1-worker-0",
        CsrKind::Serving,
    );
}

#[test]
fn client_csr_refusals() {
    let n = nodes();
    refused(
        &decide(&client("system:node:intruder"), &n),
        "not a node of the plan",
    );
    refused(
        &decide(&client("system:node:lab1-bootstrap"), &n),
        "bootstrap",
    );
    refused(
        &decide(&client("system:node:"), &n),
        "not system:node:<name>",
    );
    refused(&decide(&client("admin"), &n), "not system:node:<name>");

    let mut f = client("system:node:lab1-worker-0");
    f.username = "system:serviceaccount:default:default".into();
    refused(&decide(&f, &n), "not the node bootstrapper");

    let mut f = client("system:node:lab1-worker-0");
    f.username = "system:node:lab1-worker-0".into();
    refused(&decide(&f, &n), "not the node bootstrapper");

    let mut f = client("system:node:lab1-worker-0");
    f.usages.push("server auth".into());
    refused(&decide(&f, &n), "usage \"server auth\" is not allowed");

    let mut f = client("system:node:lab1-worker-0");
    f.usages.retain(|u| u != "client auth");
    refused(&decide(&f, &n), "lack");

    let mut f = client("system:node:lab1-worker-0");
    f.request = parse_request(&request(
        "system:node:lab1-worker-0",
        Some("system:masters"),
        &[],
    ));
    refused(&decide(&f, &n), "subject O");

    let mut f = client("system:node:lab1-worker-0");
    f.request = parse_request(&request("system:node:lab1-worker-0", None, &[]));
    refused(&decide(&f, &n), "subject O");

    let mut f = client("system:node:lab1-worker-0");
    f.request = parse_request(&request(
        "system:node:lab1-worker-0",
        Some(NODES_GROUP),
        &["lab1-worker-0"],
    ));
    refused(&decide(&f, &n), "carries SANs");

    let mut f = client("system:node:lab1-worker-0");
    f.request = Err("request is not PEM".into());
    refused(&decide(&f, &n), "unreadable request");
}

/// A dual-stack node's kubelet asks for a serving certificate naming both its
/// InternalIPs: the plan's IPv6 address is its own too; any other is not.
#[test]
fn a_dual_stack_node_s_serving_csr_names_both_families() {
    let mut n = nodes();
    n[2].ipv6 = Some("fd00:126::14".parse().unwrap());
    let sans = ["lab1-worker-0", "192.168.126.20", "fd00:126::14"];
    approved(
        &decide_by_plan(&serving("lab1-worker-0", &sans), &n),
        "lab1-worker-0",
        CsrKind::Serving,
    );
    refused(
        &decide_by_plan(&serving("lab1-worker-0", &["lab1-worker-0", "fd00:126::15"]), &n),
        "IP SAN fd00:126::15 is not lab1-worker-0's planned addresses 192.168.126.20 and fd00:126::14",
    );
    // A node without an IPv6 plan has no IPv6 address to name.
    refused(
        &decide_by_plan(
            &serving("lab1-worker-1", &["lab1-worker-1", "fd00:126::15"]),
            &n,
        ),
        "IP SAN fd00:126::15 is not lab1-worker-1's planned address 192.168.126.21",
    );
}

#[test]
fn serving_csr_refusals() {
    let n = nodes();
    refused(
        &decide(&serving("lab1-worker-0", &["evil.example.com"]), &n),
        "DNS SAN \"evil.example.com\"",
    );
    refused(
        &decide(&serving("lab1-worker-0", &["lab1-worker-1"]), &n),
        "DNS SAN \"lab1-worker-1\"",
    );
    refused(
        &decide(&serving("lab1-worker-0", &["192.168.126.21"]), &n),
        "IP SAN 192.168.126.21",
    );
    refused(
        &decide(&serving("lab1-worker-0", &["::1"]), &n),
        "IP SAN ::1",
    );
    refused(&decide(&serving("lab1-worker-0", &[]), &n), "no SANs");
    refused(
        &decide(&serving("intruder", &["intruder"]), &n),
        "not a node of the plan",
    );
    refused(
        &decide(&serving("lab1-bootstrap", &["192.168.126.9"]), &n),
        "bootstrap",
    );

    // the CN names another node than the requestor
    let mut f = serving("lab1-worker-1", &["lab1-worker-1"]);
    f.username = "system:node:lab1-worker-0".into();
    refused(&decide(&f, &n), "requestor and CN differ");

    // the node bootstrapper may not ask for serving certificates
    let mut f = serving("lab1-worker-0", &["lab1-worker-0"]);
    f.username = NODE_BOOTSTRAPPER.into();
    refused(&decide(&f, &n), "requestor and CN differ");

    let mut f = serving("lab1-worker-0", &["lab1-worker-0"]);
    f.groups = vec!["system:authenticated".into()];
    refused(&decide(&f, &n), "not in group system:nodes");

    let mut f = serving("lab1-worker-0", &["lab1-worker-0"]);
    f.usages.push("client auth".into());
    refused(&decide(&f, &n), "usage \"client auth\" is not allowed");

    let mut f = serving("lab1-worker-0", &["lab1-worker-0"]);
    f.usages.push("cert sign".into());
    refused(&decide(&f, &n), "usage \"cert sign\"");
}

#[test]
fn wrong_signer_on_a_node_csr_is_refused() {
    let mut f = client("system:node:lab1-worker-0");
    f.signer = "kubernetes.io/kube-apiserver-client".into();
    let d = decide(&f, &nodes());
    refused(&d, "signer kubernetes.io/kube-apiserver-client");
    assert!(matches!(d, Decision::Refuse { node: Some(ref n), .. } if n == "lab1-worker-0"));

    // a serving CSR swapped to the client signer fails the client rules
    let mut f = serving("lab1-worker-0", &["lab1-worker-0"]);
    f.signer = CLIENT_SIGNER.into();
    refused(
        &decide(&f, &nodes()),
        "usage \"server auth\" is not allowed",
    );
}

#[test]
fn other_signers_and_decided_csrs_are_skipped() {
    let n = nodes();
    let mut f = client("system:serviceaccount:openshift-monitoring:prometheus-k8s");
    f.signer = "kubernetes.io/kube-apiserver-client".into();
    f.username = "system:serviceaccount:openshift-monitoring:cluster-monitoring-operator".into();
    f.request = parse_request(&request("system:serviceaccount:x:y", None, &[]));
    assert!(matches!(decide(&f, &n), Decision::Skip { .. }));

    for (state, why) in [
        (CsrState::Approved, "already approved"),
        (CsrState::Denied, "denied"),
        (CsrState::Failed, "failed"),
    ] {
        let mut f = client("system:node:intruder");
        f.state = state;
        assert_eq!(decide(&f, &n), Decision::Skip { reason: why.into() });
    }
}

#[test]
fn identities_come_from_the_plan() {
    let plan = crate::plan::from_yaml(
        "cluster: lab1\ndomain: example.com\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAAtest t@t']\nworkers: 2\n",
    );
    let ids = NodeIdentity::from_plan(&plan);
    // The persisted plan (typed, state::plan_from_json) gives the same identities.
    let json = serde_json::to_string(&plan).unwrap();
    assert_eq!(
        NodeIdentity::from_plan(&crate::state::plan_from_json(&json).unwrap()),
        ids
    );
    assert!(format!(
        "{:#}",
        crate::state::plan_from_json("{\"format\": 999, \"nodes\": []}").unwrap_err()
    )
    .contains("plan format 999"));
    assert_eq!(ids.len(), plan.nodes.len());
    let w = plan.nodes_with_role(Role::Worker).next().unwrap();
    let cn = format!("system:node:{}", w.fqdn);
    approved(&decide(&client(&cn), &ids), &w.name, CsrKind::Client);
}

#[test]
fn other_san_kinds_and_subject_attributes_are_refused() {
    let cn = "system:node:lab1-worker-0";
    let mut p = CertificateParams::new(vec!["lab1-worker-0".to_string()]).unwrap();
    p.subject_alt_names.push(rcgen::SanType::Rfc822Name(
        "root@lab1-worker-0".try_into().unwrap(),
    ));
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.distinguished_name
        .push(DnType::OrganizationName, NODES_GROUP);
    let pem = p
        .serialize_request(&KeyPair::generate().unwrap())
        .unwrap()
        .pem()
        .unwrap();
    let mut f = serving("lab1-worker-0", &[]);
    f.request = parse_request(pem.as_bytes());
    refused(
        &decide(&f, &nodes()),
        "SAN email:root@lab1-worker-0 is neither DNS nor IP",
    );

    let mut p = CertificateParams::new(vec!["lab1-worker-0".to_string()]).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.distinguished_name
        .push(DnType::OrganizationName, NODES_GROUP);
    p.distinguished_name
        .push(DnType::OrganizationalUnitName, "extra");
    let pem = p
        .serialize_request(&KeyPair::generate().unwrap())
        .unwrap()
        .pem()
        .unwrap();
    let mut f = serving("lab1-worker-0", &[]);
    f.request = parse_request(pem.as_bytes());
    refused(&decide(&f, &nodes()), "attributes besides CN and O");
}

#[test]
fn a_client_csr_for_an_existing_node_is_refused() {
    let d = super::decide(
        &client("system:node:lab1-worker-0"),
        &nodes(),
        &registered(),
    );
    refused(&d, "Node lab1-worker-0 already exists");
}

#[test]
fn a_node_brought_back_may_rebootstrap_once_while_not_ready() {
    let f = client("system:node:lab1-worker-0");
    let mut cluster = registered();
    cluster.rejoining = ["lab1-worker-0".to_string()].into();
    // Its Node still Ready: the kubelet's certificate works, nothing to re-bootstrap.
    refused(
        &super::decide(&f, &nodes(), &cluster),
        "Node lab1-worker-0 already exists",
    );
    for n in &mut cluster.nodes {
        n.ready = false;
    }
    // An earlier approval (the install's CSR, before the stop) does not count.
    cluster.clients_approved = ["lab1-worker-0".to_string()].into();
    approved(
        &super::decide(&f, &nodes(), &cluster),
        "lab1-worker-0",
        CsrKind::Client,
    );
    // A node start did not bring back stays refused, NotReady or not.
    refused(
        &super::decide(&client("system:node:lab1-worker-1"), &nodes(), &cluster),
        "Node lab1-worker-1 already exists",
    );
    // Once per bring-back.
    cluster.rejoined = ["lab1-worker-0".to_string()].into();
    refused(
        &super::decide(&f, &nodes(), &cluster),
        "approved already in this start",
    );
}

#[test]
fn a_second_client_csr_for_a_node_is_refused() {
    let cluster = ClusterFacts {
        clients_approved: ["lab1-worker-0".to_string()].into(),
        ..ClusterFacts::default()
    };
    let d = super::decide(&client("system:node:lab1-worker-0"), &nodes(), &cluster);
    refused(&d, "client CSR for lab1-worker-0 is approved already");
    // Another node is not affected.
    approved(
        &super::decide(&client("system:node:lab1-worker-1"), &nodes(), &cluster),
        "lab1-worker-1",
        CsrKind::Client,
    );
}

#[test]
fn a_serving_csr_needs_its_node_with_matching_addresses() {
    let f = serving("lab1-worker-0", &["lab1-worker-0", "192.168.126.20"]);
    refused(
        &super::decide(&f, &nodes(), &ClusterFacts::default()),
        "no Node lab1-worker-0 is registered",
    );
    // The Node reports another address than the plan's: its word counts too.
    let mut moved = registered();
    moved
        .nodes
        .iter_mut()
        .find(|n| n.name == "lab1-worker-0")
        .unwrap()
        .addresses = vec![
        ("InternalIP".into(), "192.168.126.99".into()),
        ("Hostname".into(), "lab1-worker-0".into()),
    ];
    refused(
        &super::decide(&f, &nodes(), &moved),
        "IP SAN 192.168.126.20 is not among Node lab1-worker-0's addresses",
    );
    let mut renamed = registered();
    renamed
        .nodes
        .iter_mut()
        .find(|n| n.name == "lab1-worker-0")
        .unwrap()
        .addresses = vec![
        ("InternalIP".into(), "192.168.126.20".into()),
        ("Hostname".into(), "localhost".into()),
    ];
    refused(
        &super::decide(&f, &nodes(), &renamed),
        "DNS SAN \"lab1-worker-0\" is not among Node lab1-worker-0's host names",
    );
    approved(
        &super::decide(&f, &nodes(), &registered()),
        "lab1-worker-0",
        CsrKind::Serving,
    );
}
