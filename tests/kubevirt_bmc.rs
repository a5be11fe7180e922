//! The Redfish BMC's KubeVirt machine against the loopback fake API server:
//! Ironic's virtual-media sequence on a KubeVirt VM (power through
//! runStrategy, the medium as a CD-ROM DataVolume, the boot override as boot
//! order at start), as the libvirt machine does on a domain.

mod common;
#[path = "support/fake_kube.rs"]
mod fake_kube;
#[path = "support/kubevirt_schema.rs"]
mod schema;

use std::collections::BTreeMap;

use fake_kube::{core_types, kubevirt_types, multus_types, FakeKube};
use serde_json::Value;
use shiftlab::kubevirt::apply::{self, Ledger};
use shiftlab::kubevirt::render::{self, Inputs};
use shiftlab::plan;
use shiftlab::redfish::machine::{Machine, MachineError};
use shiftlab::redfish::machine_kubevirt::{KubevirtConfig, KubevirtMachine};
use shiftlab::redfish::model::{
    BootEnabled, BootMode, BootPatch, BootTarget, InsertRequest, MediaSlot, PowerState, ResetType,
};
use shiftlab::redfish::source::{ImageSources, UNREACHABLE};
use shiftlab::spec::{self, Env};

/// The IPI fixture applied to a fake API; returns the fake, the machine and the plan.
fn setup() -> (FakeKube, KubevirtMachine, plan::Plan, tempfile::TempDir) {
    let (fake, cfg, plan, home) = setup_cfg();
    // as serve builds it: images from the cluster's machine network
    let sources = ImageSources::within(vec![plan.network.host_cidr()], vec![]);
    let m = KubevirtMachine::open(&cfg, sources).unwrap();
    (fake, m, plan, home)
}

/// [`setup`] without opening the machine: its configuration.
fn setup_cfg() -> (FakeKube, KubevirtConfig, plan::Plan, tempfile::TempDir) {
    let mut t = core_types();
    t.extend(kubevirt_types());
    t.extend(multus_types());
    let fake = FakeKube::start(t);
    let home = tempfile::tempdir().unwrap();
    let kc = home.path().join("kubeconfig");
    fake.write_kubeconfig(&kc);
    let text = std::fs::read_to_string(common::repo().join("tests/fixtures/kubevirt/ipi.yaml"))
        .unwrap()
        .replace(
            "kubeconfig: kubeconfig",
            &format!("kubeconfig: {}", kc.display()),
        );
    let spec = spec::from_str(&text, "ipi.yaml", &Env::default())
        .unwrap()
        .spec;
    let plan = plan::derive(&spec);
    let kp = plan.kubevirt.clone().unwrap();
    let objs = render::render(
        &plan,
        &Inputs {
            image: kp.image.as_deref().unwrap(),
            userdata: &BTreeMap::new(),
        },
    )
    .unwrap();
    let rt = shiftlab::runtime::current_thread().unwrap();
    rt.block_on(async {
        let client = apply::client(&kc, None).await.unwrap();
        apply::apply(
            &client,
            "kv3",
            &objs,
            &mut Ledger::of(&kp),
            &|_l: &Ledger| Ok(()),
        )
        .await
        .unwrap();
    });
    let cfg = KubevirtConfig {
        kubeconfig: kc,
        context: None,
        namespace: kp.namespace.clone(),
        cluster: "kv3".into(),
    };
    (fake, cfg, plan, home)
}

fn vm(fake: &FakeKube, name: &str) -> Value {
    fake.objects()[&format!("VirtualMachine/kv3/{name}")].clone()
}

fn boot_orders(v: &Value) -> BTreeMap<String, u64> {
    v["spec"]["template"]["spec"]["domain"]["devices"]["disks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| Some((d["name"].as_str()?.to_string(), d["bootOrder"].as_u64()?)))
        .collect()
}

#[test]
fn ironics_virtual_media_sequence_on_a_kubevirt_vm() {
    let (fake, m, plan, _home) = setup();
    // Systems are the plan's nodes under their planned UUIDs.
    let systems = m.list().unwrap();
    assert_eq!(systems.len(), 3);
    let node = &plan.nodes[0];
    assert_eq!(m.resolve(&node.name).unwrap().uuid, node.uuid);
    let u = node.uuid.as_str();
    let info = m.system(u).unwrap();
    assert_eq!(info.power, PowerState::Off);
    assert_eq!(info.cpus.logical(), node.vcpus);
    assert_eq!(info.memory_mib, node.memory_mib);
    assert_eq!(info.nics[0].mac, node.mac);
    assert_eq!(
        info.disks[0].capacity_bytes,
        Some(node.disks[0].size_gb * 1_000_000_000)
    );

    // Ironic: power off, eject, insert, boot once from CD, power on.
    m.reset(u, ResetType::ForceOff).unwrap();
    m.eject_media(u, MediaSlot::Cd).unwrap();
    let req = InsertRequest {
        image: "http://192.168.141.3:6180/redfish/boot-abc.iso".into(),
        inserted: true,
        write_protected: true,
    };
    m.insert_media(u, MediaSlot::Cd, &req).unwrap();
    assert!(matches!(
        m.insert_media(u, MediaSlot::Cd, &req),
        Err(MachineError::Conflict(_))
    ));
    let v = vm(&fake, &node.name);
    let dv = v["spec"]["dataVolumeTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["metadata"]["name"] == format!("{}-cdrom", node.name))
        .expect("a CD-ROM DataVolume");
    assert_eq!(dv["spec"]["source"]["http"]["url"], req.image.as_str());
    m.set_boot(
        u,
        BootPatch {
            mode: Some(BootMode::UEFI),
            ..Default::default()
        },
    )
    .unwrap();
    m.set_boot(
        u,
        BootPatch {
            target: Some(BootTarget::Cd),
            enabled: Some(BootEnabled::Once),
            mode: None,
        },
    )
    .unwrap();
    m.reset(u, ResetType::On).unwrap();
    let v = vm(&fake, &node.name);
    assert_eq!(v["spec"]["runStrategy"], "Always");
    assert_eq!(
        boot_orders(&v),
        BTreeMap::from([("cdrom".to_string(), 1), ("root".to_string(), 2)])
    );
    assert!(v["spec"]["template"]["spec"]["domain"]["firmware"]["bootloader"]["efi"].is_object());
    // The plan's UUID is kept through the merge patches.
    assert_eq!(
        v["spec"]["template"]["spec"]["domain"]["firmware"]["uuid"],
        node.uuid.as_str()
    );
    // The VM as the BMC left it (CD-ROM, its DataVolume, UEFI, boot order)
    // is still a VirtualMachine KubeVirt's schema accepts.
    let doc = schema::extract(&common::repo());
    let bad = schema::violations(
        &schema::validator(&doc, "$defs", "v1.VirtualMachine"),
        &schema::as_written(&v),
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let info = m.system(u).unwrap();
    assert_eq!(info.power, PowerState::On);
    assert_eq!(
        (info.boot.target, info.boot.enabled, info.boot.mode),
        (BootTarget::Hdd, BootEnabled::Continuous, BootMode::UEFI)
    );
    assert_eq!(info.media[0].image.as_deref(), Some(req.image.as_str()));

    // The next restart boots the disk (the Once was consumed) via the restart subresource.
    m.reset(u, ResetType::ForceRestart).unwrap();
    assert_eq!(fake.restarts("kv3", &node.name), 1);
    assert_eq!(
        boot_orders(&vm(&fake, &node.name)),
        BTreeMap::from([("cdrom".to_string(), 2), ("root".to_string(), 1)])
    );
    // Eject: the CD-ROM is gone from disks, volumes and templates.
    m.eject_media(u, MediaSlot::Cd).unwrap();
    let v = vm(&fake, &node.name);
    assert!(!v.to_string().contains("cdrom"), "{v}");
    assert!(!m.system(u).unwrap().media[0].inserted);

    m.reset(u, ResetType::ForceOff).unwrap();
    assert_eq!(vm(&fake, &node.name)["spec"]["runStrategy"], "Halted");
    assert!(matches!(
        m.reset(u, ResetType::Nmi),
        Err(MachineError::Conflict(_))
    ));
    assert!(matches!(
        m.system("00000000-0000-0000-0000-000000000000"),
        Err(MachineError::NotFound)
    ));
    // Another cluster's VM in the namespace is not exposed.
    fake.insert(serde_json::json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "other", "namespace": "kv3", "labels": {"shiftlab.io/cluster": "kv9", "app.kubernetes.io/managed-by": "shiftlab"}}, "spec": {"template": {"spec": {"domain": {"firmware": {"uuid": "11111111-2222-8333-8444-555555555555"}}}}}}));
    assert_eq!(m.list().unwrap().len(), 3);
    assert!(matches!(m.resolve("other"), Err(MachineError::NotFound)));
}

#[test]
fn a_medium_that_is_not_an_http_url_is_refused() {
    let (fake, m, plan, _home) = setup();
    let before = fake.writes();
    let e = m.insert_media(
        &plan.nodes[1].uuid,
        MediaSlot::Cd,
        &InsertRequest {
            image: "file:///etc/shadow".into(),
            inserted: true,
            write_protected: true,
        },
    );
    assert!(matches!(e, Err(MachineError::BadRequest(_))));
    assert_eq!(fake.writes(), before);
}

#[test]
fn a_medium_from_where_a_bmc_should_not_fetch_is_refused_before_cdi_sees_it() {
    let (fake, m, plan, _home) = setup();
    let before = fake.writes();
    for image in [
        "http://127.0.0.1:6180/x.iso",
        "http://127.1:6180/x.iso",
        "http://2130706433:6180/x.iso",
        "http://[::1]:6180/x.iso",
        "http://169.254.169.254/latest/meta-data",
        "http://localhost:6180/x.iso",
        // outside the cluster's machine network
        "http://10.99.0.5:6180/x.iso",
    ] {
        let e = m.insert_media(
            &plan.nodes[1].uuid,
            MediaSlot::Cd,
            &InsertRequest {
                image: image.into(),
                inserted: true,
                write_protected: true,
            },
        );
        match e {
            Err(MachineError::BadRequest(msg)) => assert_eq!(msg, UNREACHABLE, "{image}"),
            other => panic!("{image}: {other:?}"),
        }
    }
    assert_eq!(fake.writes(), before);
}

/// The same, as Ironic speaks it: Redfish over HTTP to the BMC `shiftlab
/// serve` builds for a `backend: kubevirt` cluster (bmc::Systems::Kubevirt).
#[test]
fn redfish_over_http_drives_the_kubevirt_vm() {
    use shiftlab::redfish::bmc::{self, Config, Systems};
    let (fake, cfg, plan, home) = setup_cfg();
    let bmc = bmc::build(Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        dir: home.path().join("bmc"),
        systems: Systems::Kubevirt(cfg),
        credentials: None,
        tls: None,
        session_timeout: bmc::DEFAULT_SESSION_TIMEOUT,
        identity: "bmc/kv3".into(),
        image_sources: bmc::ImageSources::within(vec![plan.network.host_cidr()], vec![]),
        media_ca: None,
    })
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(bmc.start()).unwrap();
    let base = format!("http://{}/redfish/v1", server.local_addr());
    let node = &plan.nodes[2];
    let sys = format!("{base}/Systems/{}", node.uuid);
    let agent: ureq::Agent = ureq::Agent::config_builder().proxy(None).build().into();
    let get = |url: &str| -> Value {
        let mut resp = agent.get(url).call().unwrap();
        serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap()
    };
    let systems = get(&format!("{base}/Systems"));
    assert_eq!(systems["Members@odata.count"], 3);
    let send = |method: &str, url: &str, body: Value| {
        let r = agent.run(
            ureq::http::Request::builder()
                .method(method)
                .uri(url)
                .header("Content-Type", "application/json")
                .body(body.to_string())
                .unwrap(),
        );
        assert!(r.is_ok(), "{method} {url}: {r:?}");
    };
    send(
        "POST",
        &format!("{sys}/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"),
        serde_json::json!({"Image": "http://192.168.141.3:6180/boot.iso", "Inserted": true, "WriteProtected": true}),
    );
    send(
        "PATCH",
        &sys,
        serde_json::json!({"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}),
    );
    send(
        "POST",
        &format!("{sys}/Actions/ComputerSystem.Reset"),
        serde_json::json!({"ResetType": "On"}),
    );
    let v = vm(&fake, &node.name);
    assert_eq!(v["spec"]["runStrategy"], "Always");
    assert_eq!(boot_orders(&v)["cdrom"], 1);
    let info = get(&sys);
    assert_eq!(info["PowerState"], "On");
    assert_eq!(
        info["UUID"].as_str().map(str::to_lowercase),
        Some(node.uuid.clone())
    );
    rt.block_on(server.shutdown());
}
