//! KubeVirt renders: golden YAML per network mode and method, the rules every
//! object follows (owner labels, namespace, pointer Ignition in the Secret,
//! anti-affinity on control planes, power per start), and the cluster file's
//! `kubevirt:` checks. `UPDATE_GOLDEN=1` rewrites the golden files.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use serde_json::Value;
use shiftlab::kubevirt::render::{self, Inputs, Kind, Object};
use shiftlab::kubevirt::{MANAGED_BY, OWNER_LABEL};
use shiftlab::plan::{self, Plan};
use shiftlab::spec::{self, Env};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn fixtures() -> std::path::PathBuf {
    common::repo().join("tests/fixtures/kubevirt")
}

fn env() -> Env {
    Env {
        home: None,
        base_dir: fixtures(),
        libvirt_default_uri: None,
    }
}

fn load(name: &str) -> Plan {
    let text = std::fs::read_to_string(fixtures().join(name)).unwrap();
    let spec = spec::from_str(&text, name, &env())
        .unwrap_or_else(|e| panic!("{e}"))
        .spec;
    plan::derive(&spec)
}

fn objects(plan: &Plan) -> Vec<Object> {
    let kp = plan.kubevirt.as_ref().unwrap();
    let base = kp.http_url.clone().unwrap();
    let userdata: BTreeMap<String, String> = plan
        .nodes
        .iter()
        .map(|n| {
            let url = format!("{base}/{TOKEN}/{}.ign", n.name);
            (
                n.name.clone(),
                shiftlab::ignition::pointer_config(&url).unwrap(),
            )
        })
        .collect();
    render::render(
        plan,
        &Inputs {
            image: kp.image.as_deref().unwrap(),
            userdata: &userdata,
        },
    )
    .unwrap()
}

#[test]
fn golden_renders() {
    for (file, golden) in [
        ("pod.yaml", "kubevirt-pod.yaml"),
        ("multus.yaml", "kubevirt-multus.yaml"),
        ("ipi.yaml", "kubevirt-ipi.yaml"),
    ] {
        let plan = load(file);
        let text = render::to_yaml(&objects(&plan)).unwrap();
        common::golden(&common::repo().join("tests/golden").join(golden), &text);
    }
}

/// The pull secret's credentials for the image's registry: the Secret CDI
/// reads (`accessKeyId`, `secretKey`), owned and labelled like the rest, before
/// the VMs, and every registry DataVolume naming it.
#[test]
fn golden_registry_secret_for_a_registry_image() {
    use shiftlab::kubevirt::registry;
    let plan = load("pod.yaml");
    let auth = base64::engine::general_purpose::STANDARD.encode("robot:PLANTED-registry-pw");
    let pull_secret = format!(r#"{{"auths": {{"quay.io": {{"auth": "{auth}"}}}}}}"#);
    let image = plan.kubevirt.as_ref().unwrap().image.clone().unwrap();
    let auth = registry::auth_for(&pull_secret, &image).unwrap().unwrap();
    let mut objs = objects(&plan);
    let ns = plan.kubevirt.as_ref().unwrap().namespace.clone();
    registry::use_secret(&mut objs, registry::secret(&plan, &ns, &auth));
    let secret = objs
        .iter()
        .position(|o| o.reference() == "Secret/kv1-registry")
        .expect("the registry Secret");
    let first_vm = objs
        .iter()
        .position(|o| o.kind == Kind::VirtualMachine)
        .unwrap();
    assert_eq!(
        secret + 1,
        first_vm,
        "the Secret comes right before the VMs"
    );
    let s = &objs[secret].body;
    assert_eq!(s["metadata"]["labels"][OWNER_LABEL], "kv1");
    assert_eq!(s["metadata"]["namespace"], ns.as_str());
    let key = |k: &str| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(s["data"][k].as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(key("accessKeyId"), "robot");
    assert_eq!(key("secretKey"), "PLANTED-registry-pw");
    for vm in objs.iter().filter(|o| o.kind == Kind::VirtualMachine) {
        for dv in vm.body["spec"]["dataVolumeTemplates"].as_array().unwrap() {
            if let Some(reg) = dv["spec"]["source"].get("registry") {
                assert_eq!(reg["secretRef"], "kv1-registry", "{}", vm.reference());
            }
        }
    }
    let text = render::to_yaml(&objs[secret..=first_vm]).unwrap();
    common::golden(
        &common::repo().join("tests/golden/kubevirt-registry.yaml"),
        &text,
    );
}

#[test]
fn every_object_is_owned_and_in_the_namespace() {
    for file in ["pod.yaml", "multus.yaml", "ipi.yaml"] {
        let plan = load(file);
        let kp = plan.kubevirt.clone().unwrap();
        let objs = objects(&plan);
        // What `plan` lists is what is rendered, in order.
        let refs: Vec<String> = objs.iter().map(Object::reference).collect();
        assert_eq!(refs, kp.objects, "{file}");
        for o in &objs {
            let md = &o.body["metadata"];
            assert_eq!(
                md["labels"][OWNER_LABEL],
                plan.cluster.as_str(),
                "{file} {}",
                o.reference()
            );
            assert_eq!(md["labels"][MANAGED_BY], "shiftlab");
            assert_eq!(md["name"], o.name.as_str());
            assert_eq!(o.body["kind"], o.kind.as_str());
            assert_eq!(o.body["apiVersion"], o.kind.api_version().as_str());
            if o.kind.namespaced() {
                assert_eq!(md["namespace"], kp.namespace.as_str());
            } else {
                assert!(md.get("namespace").is_none());
            }
        }
    }
}

#[test]
fn secrets_hold_a_pointer_to_the_tokened_config_only() {
    let plan = load("pod.yaml");
    let objs = objects(&plan);
    let secrets: Vec<&Object> = objs.iter().filter(|o| o.kind == Kind::Secret).collect();
    assert_eq!(secrets.len(), plan.nodes.len());
    for s in secrets {
        let b64 = s.body["data"]["userdata"].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        // A valid Ignition config (the crate Ignition itself is modelled on).
        let (cfg, warnings) = ignition_config::Config::parse_slice(&bytes).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let ignition_config::Config::V3_2(c) = cfg else {
            panic!("not spec 3.2")
        };
        let merge = c.ignition.config.unwrap().merge.unwrap();
        let node = s.name.trim_end_matches("-ignition");
        assert_eq!(
            merge[0].source.as_deref(),
            Some(format!("http://lab-host.example.test:8080/{TOKEN}/{node}.ign").as_str())
        );
        assert!(
            c.storage.is_none() && c.passwd.is_none(),
            "nothing of its own"
        );
        // The VM reads it through the config drive.
        let vm = objs
            .iter()
            .find(|o| o.kind == Kind::VirtualMachine && o.name == node)
            .unwrap();
        let vols = vm.body["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap();
        assert!(vols
            .iter()
            .any(|v| v["cloudInitConfigDrive"]["secretRef"]["name"] == s.name.as_str()));
    }
}

fn vm<'a>(objs: &'a [Object], name: &str) -> &'a Value {
    &objs
        .iter()
        .find(|o| o.kind == Kind::VirtualMachine && o.name == name)
        .unwrap_or_else(|| panic!("no VM {name}"))
        .body
}

#[test]
fn control_planes_spread_and_power_follows_the_plan() {
    let plan = load("pod.yaml");
    let objs = objects(&plan);
    for n in &plan.nodes {
        let v = vm(&objs, &n.name);
        let aff = &v["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"];
        assert_eq!(
            !aff.is_null(),
            n.role == spec::Role::Ctlplane,
            "{}: anti-affinity on control planes only",
            n.name
        );
        let rs = v["spec"]["runStrategy"].as_str().unwrap();
        match n.start {
            plan::Start::Infra => assert_eq!(rs, "Always"),
            _ => assert_eq!(rs, "Halted", "{} starts later", n.name),
        }
        assert_eq!(
            v["spec"]["template"]["spec"]["domain"]["firmware"]["uuid"],
            n.uuid.as_str()
        );
        assert_eq!(
            v["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["macAddress"],
            n.mac.as_str()
        );
    }
    // The Services are the load balancer: the host runs none for this plan.
    assert!(plan.load_balancer.is_none());
    assert!(load("multus.yaml").load_balancer.is_some());
}

fn labels_match(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
}

/// The `server` lines of one HAProxy backend: (name, address:port).
fn servers<'a>(cfg: &'a str, backend: &str) -> Vec<(&'a str, &'a str)> {
    cfg.split(&format!("\nbackend {backend}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no backend {backend}"))
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.trim().strip_prefix("server "))
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap(), w.next().unwrap())
        })
        .collect()
}

#[test]
fn pod_mode_balances_through_an_in_cluster_haproxy() {
    let plan = load("pod.yaml");
    let objs = objects(&plan);
    let find = |kind: Kind, name: &str| {
        &objs
            .iter()
            .find(|o| o.kind == kind && o.name == name)
            .unwrap_or_else(|| panic!("no {kind:?} {name}"))
            .body
    };
    // The API and ingress Services select the HAProxy pods, and only them.
    let dep = find(Kind::Deployment, "kv1-haproxy");
    let pod_labels = &dep["spec"]["template"]["metadata"]["labels"];
    assert!(labels_match(
        &dep["spec"]["selector"]["matchLabels"],
        pod_labels
    ));
    for (svc, ports) in [
        ("kv1-api", [(6443, 6443), (22623, 22623)]),
        ("kv1-ingress", [(80, 8080), (443, 8443)]),
    ] {
        let s = find(Kind::Service, svc);
        assert_eq!(s["spec"]["type"], "LoadBalancer");
        assert!(labels_match(&s["spec"]["selector"], pod_labels), "{svc}");
        let got: Vec<(u64, u64)> = s["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["port"].as_u64().unwrap(),
                    p["targetPort"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, ports, "{svc}");
        let container_ports: Vec<u64> = dep["spec"]["template"]["spec"]["containers"][0]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["containerPort"].as_u64().unwrap())
            .collect();
        for (_, target) in ports {
            assert!(
                container_ports.contains(&target),
                "{svc}: HAProxy listens on {target}"
            );
        }
        for n in &plan.nodes {
            let vm_labels = &vm(&objs, &n.name)["spec"]["template"]["metadata"]["labels"];
            assert!(
                !labels_match(&s["spec"]["selector"], vm_labels),
                "{svc} skips {}",
                n.name
            );
        }
    }
    // Every VM is named in DNS through the headless Service.
    let nodes = find(Kind::Service, "kv1-nodes");
    assert_eq!(nodes["spec"]["clusterIP"], "None");
    assert!(
        !labels_match(&nodes["spec"]["selector"], pod_labels),
        "not the HAProxy pods"
    );
    for n in &plan.nodes {
        let spec = &vm(&objs, &n.name)["spec"]["template"]["spec"];
        assert_eq!(spec["subdomain"], "kv1-nodes");
        assert_eq!(spec["hostname"], n.name.as_str());
    }
    // HAProxy sends API and machine-config to bootstrap and control planes,
    // ingress to the workers, each by its DNS name.
    let cm = find(Kind::ConfigMap, "kv1-haproxy");
    let cfg = cm["data"]["haproxy.cfg"].as_str().unwrap();
    let fqdn = |n: &str, port: u16| format!("{n}.kv1-nodes.kv1-lab.svc.cluster.local:{port}");
    for (backend, port, roles) in [
        (
            "api",
            6443,
            &[spec::Role::Bootstrap, spec::Role::Ctlplane][..],
        ),
        (
            "machine-config",
            22623,
            &[spec::Role::Bootstrap, spec::Role::Ctlplane][..],
        ),
        ("ingress-https", 443, &[spec::Role::Worker][..]),
        ("ingress-http", 80, &[spec::Role::Worker][..]),
    ] {
        let want: Vec<(String, String)> = plan
            .nodes
            .iter()
            .filter(|n| roles.contains(&n.role))
            .map(|n| (n.name.clone(), fqdn(&n.name, port)))
            .collect();
        let got: Vec<(String, String)> = servers(cfg, backend)
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want, "{backend}");
    }
    // A changed config rolls the pods: its hash is on the pod template.
    use sha2::Digest;
    assert_eq!(
        dep["spec"]["template"]["metadata"]["annotations"]["shiftlab.io/config-sha256"],
        hex::encode(sha2::Sha256::digest(cfg.as_bytes()))
    );
    // HAProxy itself accepts the configuration (nodes not resolving yet is
    // allowed: `init-addr none`).
    common::assert_haproxy_accepts(cfg);

    // A compact cluster's routers are its control planes.
    let text = std::fs::read_to_string(fixtures().join("pod.yaml"))
        .unwrap()
        .replace("workers: 2", "workers: 0");
    let compact = plan::derive(&spec::from_str(&text, "pod.yaml", &env()).unwrap().spec);
    let cfg = shiftlab::kubevirt::haproxy::config(&compact, compact.kubevirt.as_ref().unwrap());
    let routers: Vec<&str> = servers(&cfg, "ingress-https").iter().map(|s| s.0).collect();
    assert_eq!(
        routers,
        ["kv1-ctlplane-0", "kv1-ctlplane-1", "kv1-ctlplane-2"]
    );
    // A real (not rehearsal) cluster's API is checked over TLS.
    let real = text.replace("rehearsal: true\n", "");
    let real = plan::derive(&spec::from_str(&real, "pod.yaml", &env()).unwrap().spec);
    let cfg = shiftlab::kubevirt::haproxy::config(&real, real.kubevirt.as_ref().unwrap());
    assert!(cfg.contains(":6443 check check-ssl verify none"), "{cfg}");
    assert!(!cfg.contains(":22623 check check-ssl"), "{cfg}");
    // The image and the cluster's DNS domain are the cluster file's when set.
    let custom = format!(
        "{}\n  haproxy_image: registry.example.test/haproxy:2.8\n  cluster_dns_domain: k8s.example\n",
        text.trim_end()
    );
    let custom = plan::derive(&spec::from_str(&custom, "pod.yaml", &env()).unwrap().spec);
    let objs = objects(&custom);
    let dep = &objs
        .iter()
        .find(|o| o.kind == Kind::Deployment)
        .unwrap()
        .body;
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.test/haproxy:2.8"
    );
    let cfg = shiftlab::kubevirt::haproxy::config(&custom, custom.kubevirt.as_ref().unwrap());
    assert!(
        cfg.contains("kv1-ctlplane-0.kv1-nodes.kv1-lab.svc.k8s.example:6443"),
        "{cfg}"
    );
}

#[test]
fn ipi_nodes_start_blank_and_halted_without_a_secret() {
    let plan = load("ipi.yaml");
    let objs = objects(&plan);
    assert!(objs.iter().all(|o| o.kind != Kind::Secret));
    for n in &plan.nodes {
        let v = vm(&objs, &n.name);
        assert_eq!(v["spec"]["runStrategy"], "Halted");
        assert_eq!(
            v["spec"]["dataVolumeTemplates"][0]["spec"]["source"],
            serde_json::json!({"blank": {}})
        );
        assert_eq!(
            v["spec"]["template"]["spec"]["networks"][0]["multus"]["networkName"],
            "kv3-net"
        );
    }
}

#[test]
fn multus_attachment_is_a_bridge_without_ipam() {
    let plan = load("multus.yaml");
    let objs = objects(&plan);
    let nad = objs
        .iter()
        .find(|o| o.kind == Kind::NetworkAttachmentDefinition)
        .unwrap();
    let cfg: Value = serde_json::from_str(nad.body["spec"]["config"].as_str().unwrap()).unwrap();
    assert_eq!(cfg["type"], "bridge");
    assert_eq!(cfg["bridge"], "br-lab");
    assert_eq!(cfg["vlan"], 140);
    assert_eq!(cfg["ipam"], serde_json::json!({}));
    // shiftlab's HTTP server on the lab network serves the Ignition.
    let kp = plan.kubevirt.as_ref().unwrap();
    assert_eq!(kp.http_url.as_deref(), Some("http://192.168.140.1:8080"));
    // The worker's extra disk is a blank DataVolume.
    let w = vm(&objs, "kv2-worker-0");
    let dvs = w["spec"]["dataVolumeTemplates"].as_array().unwrap();
    assert_eq!(dvs.len(), 2);
    assert_eq!(dvs[1]["spec"]["source"], serde_json::json!({"blank": {}}));
    assert_eq!(
        dvs[1]["spec"]["storage"]["resources"]["requests"]["storage"],
        "20G"
    );
}

fn errors(text: &str, base: &Path) -> String {
    let env = Env {
        home: None,
        base_dir: base.to_path_buf(),
        libvirt_default_uri: None,
    };
    match spec::from_str(text, "c.yaml", &env) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

const BASE: &str = "cluster: kv1\ndomain: lab.test\ndistribution: okd\nrehearsal: true\n";

#[test]
fn bad_kubevirt_input_is_refused_with_the_field_named() {
    let dir = fixtures();
    let with = |k: &str| format!("{BASE}backend: kubevirt\nkubevirt:\n{k}");
    let cases: &[(String, &str)] = &[
        (
            with("  kubeconfig: kubeconfig\n  http_url: http://h:8080\n  storage_class: Fast_SSD\n"),
            "kubevirt.storage_class: \"Fast_SSD\" is not a StorageClass name",
        ),
        (
            with("  kubeconfig: missing-kubeconfig\n  http_url: http://h:8080\n"),
            "cannot read the kubeconfig",
        ),
        (
            with("  kubeconfig: kubeconfig\n  context: other\n  http_url: http://h:8080\n"),
            "\"other\" is not a context of",
        ),
        (
            with("  kubeconfig: kubeconfig\n  namespace: Lab_1\n  http_url: http://h:8080\n"),
            "is not a namespace name",
        ),
        (
            with("  kubeconfig: kubeconfig\n  network: calico\n  http_url: http://h:8080\n"),
            "\"calico\" is not one of pod, multus",
        ),
        (
            with("  kubeconfig: kubeconfig\n"),
            "kubevirt.http_url: missing",
        ),
        (
            with("  kubeconfig: kubeconfig\n  http_url: http://h:8080\n  image: /tmp/x.qcow2\n"),
            "kubevirt.image",
        ),
        (
            with("  kubeconfig: kubeconfig\n  network: multus\n  vlan: 5000\n"),
            "5000 is not a VLAN id",
        ),
        (
            format!("{BASE}kubevirt:\n  kubeconfig: kubeconfig\n"),
            "add `backend: kubevirt`",
        ),
        (format!("{BASE}backend: kubevirt\n"), "kubevirt: missing"),
        (format!("{BASE}backend: vsphere\n"), "\"vsphere\" is not one of libvirt, kubevirt"),
        (
            with("  kubeconfig: kubeconfig\n  http_url: http://h:8080\n  storage: x\n"),
            "kubevirt.storage",
        ),
        (
            format!("{BASE}method: sno\nctlplanes: 1\nworkers: 0\nbackend: kubevirt\nkubevirt:\n  kubeconfig: kubeconfig\n  http_url: http://h:8080\n"),
            "not supported on backend kubevirt",
        ),
        (
            format!("{BASE}method: agent\nbackend: kubevirt\nkubevirt:\n  kubeconfig: kubeconfig\n  http_url: http://h:8080\n"),
            "method agent is not supported on backend kubevirt yet: it boots a live ISO built on this host",
        ),
        (
            with("  kubeconfig: kubeconfig\n  http_url: http://h:8080\n  haproxy_image: https://hub/haproxy\n"),
            "kubevirt.haproxy_image: \"https://hub/haproxy\" is not a container image reference",
        ),
        (
            with("  kubeconfig: kubeconfig\n  http_url: http://h:8080\n  cluster_dns_domain: Cluster_Local\n"),
            "kubevirt.cluster_dns_domain: \"Cluster_Local\" is not a DNS domain",
        ),
    ];
    for (text, want) in cases {
        let e = errors(text, &dir);
        assert!(e.contains(want), "want {want:?} in:\n{e}");
    }
}

#[test]
fn render_command_writes_yaml_and_keeps_secrets_private() {
    let home = tempfile::tempdir().unwrap();
    let file = fixtures().join("pod.yaml");
    let out_dir = home.path().join("out");
    let o = common::shiftlab(
        &[
            "render",
            "--backend",
            "kubevirt",
            "-f",
            file.to_str().unwrap(),
            "--dir",
            out_dir.to_str().unwrap(),
        ],
        home.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let files = common::tree(&out_dir);
    assert_eq!(files.len(), 18, "{files:?}");
    use std::os::unix::fs::PermissionsExt;
    for f in &files {
        let p = out_dir.join(f);
        let text = std::fs::read_to_string(&p).unwrap();
        let v: yaml_serde::Value = yaml_serde::from_str(text.trim_start_matches("---\n")).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        if v["kind"] == "Secret" {
            assert_eq!(mode, 0o600, "{f}");
        }
        assert!(
            !text.contains("not-a-real-token"),
            "kubeconfig credentials never rendered"
        );
    }
    // A libvirt cluster file is refused with what to change.
    let lib = home.path().join("lib.yaml");
    std::fs::write(&lib, BASE).unwrap();
    let o = common::shiftlab(
        &[
            "render",
            "--backend",
            "kubevirt",
            "-f",
            lib.to_str().unwrap(),
            "--dir",
            "x",
        ],
        home.path(),
    );
    // A cluster-file error: exit 2, as for any invalid cluster file.
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "backend: libvirt: render writes a KubeVirt cluster's objects; set `backend: kubevirt`"
        ),
        "{err}"
    );
    assert!(!home.path().join("x").exists());
    // So is a file that does not load at all.
    std::fs::write(&lib, format!("{BASE}workers: many\n")).unwrap();
    let o = common::shiftlab(
        &[
            "render",
            "--backend",
            "kubevirt",
            "-f",
            lib.to_str().unwrap(),
            "--dir",
            "x",
        ],
        home.path(),
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!home.path().join("x").exists());
}

#[test]
fn plan_shows_the_objects_in_every_output() {
    let home = tempfile::tempdir().unwrap();
    let file = fixtures().join("multus.yaml");
    let f = file.to_str().unwrap();
    let o = common::shiftlab(&["plan", "-f", f, "-o", "json"], home.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let objects: Vec<&str> = v["kubevirt"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert_eq!(
        objects[..2],
        ["Namespace/kv2", "NetworkAttachmentDefinition/kv2-net"]
    );
    assert_eq!(objects.len(), 2 + 5 + 5);
    let o = common::shiftlab(&["plan", "-f", f], home.path());
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("KubeVirt namespace kv2 (multus network on bridge br-lab)"),
        "{table}"
    );
    assert!(
        table.contains("VirtualMachine               kv2-worker-0"),
        "{table}"
    );
    // A libvirt file's plan has no kubevirt part at all.
    let lib = home.path().join("lib.yaml");
    std::fs::write(&lib, BASE).unwrap();
    let o = common::shiftlab(
        &["plan", "-f", lib.to_str().unwrap(), "-o", "json"],
        home.path(),
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.get("kubevirt").is_none());
    assert!(
        common::tree(home.path()) == vec!["lib.yaml".to_string()],
        "plan writes nothing"
    );
}
