//! IPI scale's Kubernetes side (src/kube/baremetal.rs) through kube-rs against
//! the loopback fake API (tests/support/fake_kube.rs) serving metal3's
//! BareMetalHost and the machine API's MachineSet and Machine: the rendered BMC
//! Secret and BareMetalHost against golden files, up (objects applied, the
//! worker MachineSet scaled) and down (the host's Machine annotated for
//! deletion, the MachineSet scaled, and once the machine controller removed
//! the Machine, the host and its Secret deleted). `UPDATE_GOLDEN=1` rewrites
//! the golden file. Nothing leaves 127.0.0.1.

mod common;
#[path = "support/fake_kube.rs"]
mod fake_kube;

use std::time::Duration;

use fake_kube::{core_types, FakeKube, Served};
use serde_json::{json, Value};
use shiftlab::kube::baremetal::{self, HostInputs, DELETE_MACHINE, NAMESPACE};

fn types() -> Vec<Served> {
    let mut t = core_types();
    for (group, kind, plural) in [
        ("metal3.io", "BareMetalHost", "baremetalhosts"),
        ("machine.openshift.io", "MachineSet", "machinesets"),
        ("machine.openshift.io", "Machine", "machines"),
    ] {
        t.push(Served {
            group,
            version: if group == "metal3.io" {
                "v1alpha1"
            } else {
                "v1beta1"
            },
            kind,
            plural,
            namespaced: true,
        });
    }
    t
}

fn plan(workers: u32) -> shiftlab::plan::Plan {
    let text = format!(
        "cluster: ipi1\ndomain: lab.test\ndistribution: okd\nrehearsal: true\nmethod: ipi\nctlplanes: 3\nworkers: {workers}\n\
         ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k']\n"
    );
    common::plan_from_yaml(&text, "ipi1.yaml", None)
}

const PASSWORD: &str = "PLANTED-bmc-pass-7781";

fn inputs() -> HostInputs<'static> {
    HostInputs {
        cluster: "ipi1",
        username: "admin",
        password: PASSWORD,
        verify_certificate: false,
        boot_mode: "UEFI",
        device_name: "/dev/vda",
    }
}

/// The installer's objects: its namespace, the worker MachineSet with two
/// Machines, each consuming its BareMetalHost.
fn installed(fake: &FakeKube) {
    fake.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}));
    fake.insert(
        json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": "ipi1-x7k2p-worker-0", "namespace": NAMESPACE},
        "spec": {"replicas": 2, "template": {"metadata": {"labels": {
            "machine.openshift.io/cluster-api-machine-role": "worker"}}}}}),
    );
    fake.insert(
        json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": "ipi1-x7k2p-infra", "namespace": NAMESPACE},
        "spec": {"replicas": 0, "template": {"metadata": {"labels": {
            "machine.openshift.io/cluster-api-machine-role": "infra"}}}}}),
    );
    for (i, m) in ["ipi1-x7k2p-worker-0-a1b2c", "ipi1-x7k2p-worker-0-d3e4f"]
        .iter()
        .enumerate()
    {
        fake.insert(
            json!({"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
            "metadata": {"name": m, "namespace": NAMESPACE}}),
        );
        fake.insert(
            json!({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": format!("ipi1-worker-{i}"), "namespace": NAMESPACE},
            "spec": {"online": true, "consumerRef": {"apiVersion": "machine.openshift.io/v1beta1",
                "kind": "Machine", "name": m, "namespace": NAMESPACE}}}),
        );
        fake.insert(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("ipi1-worker-{i}-bmc-secret"), "namespace": NAMESPACE}}));
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn client(fake: &FakeKube, dir: &std::path::Path) -> kube::Client {
    let kc = dir.join("kubeconfig");
    fake.write_kubeconfig(&kc);
    shiftlab::kube::approve::client_from_kubeconfig(&kc)
        .await
        .unwrap()
}

#[test]
fn a_new_worker_renders_as_the_golden_secret_and_host() {
    let p = plan(3);
    let node = p.node("ipi1-worker-2").unwrap();
    let [secret, host] = baremetal::render(node, &inputs()).unwrap();
    let text = serde_json::to_string_pretty(&json!([secret, host])).unwrap() + "\n";
    let path = common::repo().join("tests/golden/ipi.scale-worker-2.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    assert_eq!(text, std::fs::read_to_string(&path).unwrap());
    // The address is the plan's lab BMC system; the password only base64 in the Secret.
    assert_eq!(
        host["spec"]["bmc"]["address"],
        node.bmc.as_ref().unwrap().address.as_str()
    );
    assert!(!text.contains(PASSWORD));
    // A node without a BMC (not IPI) is refused.
    let upi = common::plan_from_yaml(
        "cluster: u1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\n",
        "u.yaml",
        None,
    );
    let e = baremetal::render(upi.node("u1-worker-0").unwrap(), &inputs())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no BMC address"), "{e}");
}

#[test]
fn up_applies_the_hosts_then_scales_the_worker_machineset() {
    let fake = FakeKube::start(types());
    installed(&fake);
    let dir = tempfile::tempdir().unwrap();
    let p = plan(4);
    let objects: Vec<[Value; 2]> = ["ipi1-worker-2", "ipi1-worker-3"]
        .iter()
        .map(|n| baremetal::render(p.node(n).unwrap(), &inputs()).unwrap())
        .collect();
    let done = rt().block_on(async {
        let c = client(&fake, dir.path()).await;
        baremetal::scale_up(&c, &objects, 4).await.unwrap()
    });
    assert_eq!(
        done,
        [
            "Secret/ipi1-worker-2-bmc-secret",
            "BareMetalHost/ipi1-worker-2",
            "Secret/ipi1-worker-3-bmc-secret",
            "BareMetalHost/ipi1-worker-3",
            "MachineSet/ipi1-x7k2p-worker-0 replicas=4",
        ]
    );
    let o = fake.objects();
    let host = &o[&format!("BareMetalHost/{NAMESPACE}/ipi1-worker-3")];
    assert_eq!(host["spec"], objects[1][1]["spec"]);
    assert_eq!(
        o[&format!("Secret/{NAMESPACE}/ipi1-worker-3-bmc-secret")]["data"],
        objects[1][0]["data"]
    );
    assert_eq!(
        o[&format!("MachineSet/{NAMESPACE}/ipi1-x7k2p-worker-0")]["spec"]["replicas"],
        4
    );
    // The infra MachineSet is not the workers'.
    assert_eq!(
        o[&format!("MachineSet/{NAMESPACE}/ipi1-x7k2p-infra")]["spec"]["replicas"],
        0
    );
    // Again: converges to the same objects (only their resourceVersions move).
    rt().block_on(async {
        let c = client(&fake, dir.path()).await;
        baremetal::scale_up(&c, &objects, 4).await.unwrap()
    });
    let unversioned = |m: std::collections::BTreeMap<String, Value>| {
        m.into_iter()
            .map(|(k, mut v)| {
                v["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("resourceVersion");
                (k, v)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(unversioned(fake.objects()), unversioned(o));
}

#[test]
fn down_marks_the_machine_scales_and_deletes_the_host_once_the_machine_is_gone() {
    let fake = FakeKube::start(types());
    installed(&fake);
    let dir = tempfile::tempdir().unwrap();
    let machines = rt().block_on(async {
        let c = client(&fake, dir.path()).await;
        baremetal::scale_down_begin(&c, &["ipi1-worker-1"], 1)
            .await
            .unwrap()
    });
    assert_eq!(
        machines["ipi1-worker-1"].as_deref(),
        Some("ipi1-x7k2p-worker-0-d3e4f")
    );
    let o = fake.objects();
    assert_eq!(
        o[&format!("Machine/{NAMESPACE}/ipi1-x7k2p-worker-0-d3e4f")]["metadata"]["annotations"]
            [DELETE_MACHINE],
        "true"
    );
    assert!(
        o[&format!("Machine/{NAMESPACE}/ipi1-x7k2p-worker-0-a1b2c")]["metadata"]
            .get("annotations")
            .is_none()
    );
    assert_eq!(
        o[&format!("MachineSet/{NAMESPACE}/ipi1-x7k2p-worker-0")]["spec"]["replicas"],
        1
    );
    // The Machine is still there (its drain runs): the host stays, and the wait says why.
    let e = rt().block_on(async {
        let c = client(&fake, dir.path()).await;
        baremetal::scale_down_finish(
            &c,
            &machines,
            Duration::from_millis(300),
            Duration::from_millis(100),
        )
        .await
        .unwrap_err()
        .to_string()
    });
    assert!(
        e.contains("Machine ipi1-x7k2p-worker-0-d3e4f still exists"),
        "{e}"
    );
    assert!(fake
        .objects()
        .contains_key(&format!("BareMetalHost/{NAMESPACE}/ipi1-worker-1")));
    // The machine controller deletes the Machine once drained: the host and its Secret go.
    let deleted = rt().block_on(async {
        let c = client(&fake, dir.path()).await;
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::namespaced_with(c.clone(), NAMESPACE, &baremetal::machine_resource());
        api.delete("ipi1-x7k2p-worker-0-d3e4f", &Default::default())
            .await
            .unwrap();
        baremetal::scale_down_finish(
            &c,
            &machines,
            Duration::from_secs(5),
            Duration::from_millis(100),
        )
        .await
        .unwrap()
    });
    assert_eq!(
        deleted,
        [
            "BareMetalHost/ipi1-worker-1",
            "Secret/ipi1-worker-1-bmc-secret"
        ]
    );
    let o = fake.objects();
    assert!(!o.contains_key(&format!("BareMetalHost/{NAMESPACE}/ipi1-worker-1")));
    assert!(o.contains_key(&format!("BareMetalHost/{NAMESPACE}/ipi1-worker-0")));
}

#[test]
fn an_ipi_cluster_without_its_kubeconfig_is_refused_before_anything_changes() {
    let home = tempfile::tempdir().unwrap();
    let f = common::rehearsal_file(home.path(), "method: ipi\nctlplanes: 3\nworkers: 2\n");
    let out = common::shiftlab(&["plan", "-f", &f, "-o", "json"], home.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = home.path().join("state/clusters/lab1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plan.json"), &out.stdout).unwrap();
    let before = common::tree(home.path());
    let out = common::shiftlab(&["scale", "lab1", "--workers", "3", "-f", &f], home.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("lab1 is an IPI cluster") && err.contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(common::tree(home.path()), before);
}
