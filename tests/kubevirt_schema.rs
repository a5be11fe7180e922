//! Rendered objects against the API's own types. Core objects (Namespace,
//! Secret, Service, and the VM's affinity and object metadata) round-trip
//! through k8s-openapi's types: a field those types do not know would be
//! dropped and the round trip would differ. The KubeVirt VirtualMachine (and
//! CDI's DataVolume template and Multus' attachment, which have no crate that
//! fits kube 2.0: kube-custom-resources-rs has no kubevirt.io group) goes
//! through the typed structs below, `deny_unknown_fields` and required fields
//! as KubeVirt's OpenAPI definitions have them (kubevirt/kubevirt
//! `api/openapi-spec/swagger.json`: `v1.VirtualMachine`, `v1.VirtualMachineSpec`,
//! `v1.DataVolumeTemplateSpec`, `v1beta1.DataVolumeSpec`, `v1.DomainSpec`,
//! `v1.Disk`, `v1.CDRomTarget`, `v1.Interface`, `v1.Network`, `v1.Volume`,
//! `v1.CloudInitConfigDriveSource`, `v1.Firmware`, `v1.Bootloader`), only the
//! part shiftlab writes: anything else it renders is refused here.

mod common;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Namespace, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shiftlab::kubevirt::render::{self, Inputs, Kind, Object};
use shiftlab::plan;
use shiftlab::spec::{self, Env};

type Labels = BTreeMap<String, String>;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct VirtualMachine {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: VirtualMachineSpec,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct VirtualMachineSpec {
    /// `Always`, `RerunOnFailure`, `Manual`, `Halted`, `Once`, `WaitAsReceiver`
    run_strategy: RunStrategy,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    data_volume_templates: Vec<DataVolumeTemplateSpec>,
    template: VirtualMachineInstanceTemplateSpec,
}

#[derive(Debug, Serialize, Deserialize)]
enum RunStrategy {
    Always,
    RerunOnFailure,
    Manual,
    Halted,
    Once,
    WaitAsReceiver,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DataVolumeTemplateSpec {
    metadata: ObjectMeta,
    spec: DataVolumeSpec,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DataVolumeSpec {
    source: DataVolumeSource,
    storage: StorageSpec,
}

/// One of its fields, exactly.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum DataVolumeSource {
    Http { url: String },
    Registry { url: String },
    Blank {},
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StorageSpec {
    resources: Resources,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    storage_class_name: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Resources {
    requests: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct VirtualMachineInstanceTemplateSpec {
    metadata: TemplateMeta,
    spec: VirtualMachineInstanceSpec,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateMeta {
    labels: Labels,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct VirtualMachineInstanceSpec {
    domain: DomainSpec,
    hostname: String,
    networks: Vec<Network>,
    volumes: Vec<Volume>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    affinity: Option<Affinity>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DomainSpec {
    cpu: Cpu,
    memory: Memory,
    resources: Resources,
    firmware: Firmware,
    devices: Devices,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cpu {
    cores: u32,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Memory {
    guest: k8s_openapi::apimachinery::pkg::api::resource::Quantity,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Firmware {
    uuid: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Devices {
    disks: Vec<Disk>,
    interfaces: Vec<Interface>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Disk {
    name: String,
    disk: DiskTarget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    boot_order: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiskTarget {
    bus: Bus,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Bus {
    Virtio,
    Sata,
    Scsi,
    Usb,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Interface {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bridge: Option<Empty>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    masquerade: Option<Empty>,
    mac_address: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Network {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod: Option<Empty>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    multus: Option<Multus>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Multus {
    network_name: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Volume {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data_volume: Option<NameRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cloud_init_config_drive: Option<ConfigDrive>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NameRef {
    name: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ConfigDrive {
    secret_ref: NameRef,
}

/// Multus' NetworkAttachmentDefinition (k8snetworkplumbingwg
/// network-attachment-definition-client `pkg/apis/k8s.cni.cncf.io/v1/types.go`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NetworkAttachmentDefinition {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: NadSpec,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NadSpec {
    config: String,
}

fn objects(file: &str) -> Vec<Object> {
    let dir = common::repo().join("tests/fixtures/kubevirt");
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    let env = Env {
        home: None,
        base_dir: dir,
        libvirt_default_uri: None,
    };
    let plan = plan::derive(&spec::from_str(&text, file, &env).unwrap().spec);
    let kp = plan.kubevirt.clone().unwrap();
    let userdata = plan
        .nodes
        .iter()
        .map(|n| (n.name.clone(), "{}".to_string()))
        .collect();
    render::render(
        &plan,
        &Inputs {
            image: kp.image.as_deref().unwrap(),
            userdata: &userdata,
        },
    )
    .unwrap()
}

/// Through `T` and back: the same JSON, or a field `T` does not know.
fn round_trip<T: DeserializeOwned + Serialize>(o: &Object) {
    let typed: T =
        serde_json::from_value(o.body.clone()).unwrap_or_else(|e| panic!("{}: {e}", o.reference()));
    let back: Value = serde_json::to_value(&typed).unwrap();
    assert_eq!(back, o.body, "{} changed in the round trip", o.reference());
}

#[test]
fn rendered_objects_round_trip_through_the_api_types() {
    let mut seen = std::collections::BTreeSet::new();
    for file in ["pod.yaml", "multus.yaml", "ipi.yaml"] {
        for o in objects(file) {
            seen.insert(o.kind);
            match o.kind {
                Kind::Namespace => round_trip::<Namespace>(&o),
                Kind::Secret => round_trip::<Secret>(&o),
                Kind::Service => round_trip::<Service>(&o),
                Kind::VirtualMachine => round_trip::<VirtualMachine>(&o),
                Kind::NetworkAttachmentDefinition => {
                    round_trip::<NetworkAttachmentDefinition>(&o);
                    let cfg: Value =
                        serde_json::from_str(o.body["spec"]["config"].as_str().unwrap()).unwrap();
                    assert!(cfg["cniVersion"].is_string() && cfg["type"] == "bridge");
                }
            }
        }
    }
    assert_eq!(seen.len(), Kind::ALL.len(), "every kind is checked");
}

#[test]
fn the_check_catches_a_field_kubevirt_does_not_have() {
    let mut vm = objects("pod.yaml")
        .into_iter()
        .find(|o| o.kind == Kind::VirtualMachine)
        .unwrap();
    vm.body["spec"]["template"]["spec"]["domain"]["devices"]["disks"][0]["bootOrdr"] =
        serde_json::json!(1);
    assert!(serde_json::from_value::<VirtualMachine>(vm.body.clone()).is_err());
    vm.body = serde_json::json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {}, "spec": {"runStrategy": "Sometimes", "template": {}}});
    assert!(serde_json::from_value::<VirtualMachine>(vm.body).is_err());
}
