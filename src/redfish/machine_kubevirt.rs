//! The [`Machine`] over KubeVirt VirtualMachines: the Redfish BMC for a
//! `backend: kubevirt` cluster, so that `platform: baremetal` (IPI) drives
//! KubeVirt VMs as it drives libvirt domains.
//!
//! - power is `spec.runStrategy` (`Always` on, `Halted` off); a restart is
//!   the VM's `restart` subresource, what `virtctl restart` calls
//!   (kubevirt/kubevirt `pkg/virt-api/rest/subresource.go`,
//!   `RestartVMRequestHandler`: refused with 409 for a VM that is not running);
//! - virtual media is a CD-ROM disk (`cdrom: {bus: sata}`) backed by a
//!   DataVolume CDI imports from the image URL Ironic gives;
//! - the boot override lives in the VM's annotations and becomes the disks'
//!   `bootOrder` at each start (a VM's spec reaches its VMI when it starts);
//!   the boot mode is `firmware.bootloader` (`efi` or `bios`).
//!
//! Only VMs with the cluster's owner label are exposed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

use super::machine::{BootState, Machine, MachineError};
use super::model::{
    BootEnabled, BootMode, BootOverride, BootPatch, BootTarget, Cpus, Disk, InsertRequest,
    MediaSlot, MediaState, Nic, PowerState, ResetType, SystemInfo, SystemRef,
};
use super::source::{ImageSources, UNREACHABLE};
use crate::kubevirt::apply::resource;
use crate::kubevirt::render::{owner_selector, Kind};

const BOOT_ANNOTATION: &str = "shiftlab.io/bmc-boot";
const MODE_ANNOTATION: &str = "shiftlab.io/bmc-boot-mode";
const MEDIA_ANNOTATION: &str = "shiftlab.io/bmc-media";
/// The CD-ROM's disk and volume name.
const CDROM: &str = "cdrom";
/// The size of the DataVolume a medium is imported into: above any live ISO.
const CDROM_SIZE: &str = "4Gi";

/// Where the VMs are.
#[derive(Debug, Clone)]
pub struct KubevirtConfig {
    pub kubeconfig: std::path::PathBuf,
    pub context: Option<String>,
    pub namespace: String,
    pub cluster: String,
}

pub struct KubevirtMachine {
    rt: tokio::runtime::Runtime,
    client: Client,
    ns: String,
    cluster: String,
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// CDI fetches the image, not the BMC: its URL is vetted against the
    /// same rule before the DataVolume is made.
    sources: ImageSources,
}

fn backend(e: impl Into<anyhow::Error>) -> MachineError {
    MachineError::Backend(e.into())
}

fn annotation(vm: &DynamicObject, key: &str) -> Option<String> {
    vm.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key).cloned())
}

fn uuid_of(vm: &DynamicObject) -> Option<String> {
    vm.data
        .pointer("/spec/template/spec/domain/firmware/uuid")
        .and_then(Value::as_str)
        .map(str::to_lowercase)
}

/// The VM's array at `pointer` (its disks, volumes or DataVolume templates)
/// without the CD-ROM entry and the medium's DataVolume template `dv`.
fn without_cdrom(vm: &DynamicObject, pointer: &str, dv: &str) -> Vec<Value> {
    vm.data
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| {
            v["name"] != CDROM && v.pointer("/metadata/name").and_then(Value::as_str) != Some(dv)
        })
        .cloned()
        .collect()
}

/// `Cd/Once/Hdd/Continuous`: target, enabled, then what a `Once` returns to.
fn boot_text(b: &BootState) -> String {
    let mut s = format!("{}/{}", b.target, b.enabled);
    if let Some((t, e)) = b.previous {
        s.push_str(&format!("/{t}/{e}"));
    }
    s
}

fn boot_state(vm: &DynamicObject) -> BootState {
    let Some(text) = annotation(vm, BOOT_ANNOTATION) else {
        return BootState::default();
    };
    let p: Vec<&str> = text.split('/').collect();
    let pair = |t: Option<&&str>, e: Option<&&str>| -> Option<(BootTarget, BootEnabled)> {
        Some((BootTarget::parse(t?)?, BootEnabled::parse(e?)?))
    };
    match pair(p.first(), p.get(1)) {
        Some((target, enabled)) => BootState {
            target,
            enabled,
            previous: pair(p.get(2), p.get(3)),
        },
        None => BootState::default(),
    }
}

fn is_on(vm: &DynamicObject) -> bool {
    matches!(
        vm.data.pointer("/spec/runStrategy").and_then(Value::as_str),
        Some("Always" | "RerunOnFailure")
    )
}

/// `512Mi`, `4Gi`, `20G`: a Kubernetes quantity in bytes (the suffixes
/// shiftlab writes and common ones).
fn quantity_bytes(q: &str) -> Option<u64> {
    let split = q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len());
    let (n, unit) = q.split_at(split);
    let n: u64 = n.parse().ok()?;
    let mult: u64 = match unit {
        "" => 1,
        "K" | "k" => 1000,
        "M" => 1000u64.pow(2),
        "G" => 1000u64.pow(3),
        "T" => 1000u64.pow(4),
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mult)
}

impl KubevirtMachine {
    pub fn open(cfg: &KubevirtConfig, sources: ImageSources) -> anyhow::Result<Self> {
        let rt = crate::runtime::multi_thread(1)?;
        let client = rt.block_on(crate::kubevirt::apply::client(
            &cfg.kubeconfig,
            cfg.context.as_deref(),
        ))?;
        Ok(KubevirtMachine {
            rt,
            client,
            ns: cfg.namespace.clone(),
            cluster: cfg.cluster.clone(),
            locks: Mutex::default(),
            sources,
        })
    }

    fn api(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            &self.ns,
            &resource(Kind::VirtualMachine),
        )
    }

    fn lock(&self, uuid: &str) -> Arc<Mutex<()>> {
        let mut all = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        all.entry(uuid.to_string()).or_default().clone()
    }

    fn vms(&self) -> Result<Vec<DynamicObject>, MachineError> {
        let lp = ListParams::default().labels(&owner_selector(&self.cluster));
        let list = self
            .rt
            .block_on(self.api().list(&lp))
            .context("listing VirtualMachines")
            .map_err(backend)?;
        Ok(list.items)
    }

    fn vm(&self, uuid: &str) -> Result<DynamicObject, MachineError> {
        let uuid = uuid.to_lowercase();
        self.vms()?
            .into_iter()
            .find(|v| uuid_of(v).as_deref() == Some(uuid.as_str()))
            .ok_or(MachineError::NotFound)
    }

    fn patch(&self, vm: &DynamicObject, patch: Value) -> Result<(), MachineError> {
        let name = vm.metadata.name.clone().unwrap_or_default();
        self.rt
            .block_on(
                self.api()
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
            )
            .with_context(|| format!("updating VirtualMachine/{name}"))
            .map_err(backend)?;
        Ok(())
    }

    /// The disks with the boot order of `first`, as a start uses it.
    fn ordered_disks(vm: &DynamicObject, first: BootTarget) -> Value {
        let mut disks = vm
            .data
            .pointer("/spec/template/spec/domain/devices/disks")
            .cloned()
            .unwrap_or(json!([]));
        if let Some(list) = disks.as_array_mut() {
            let has_cd = list.iter().any(|d| d["name"] == CDROM);
            for d in list.iter_mut() {
                let Some(obj) = d.as_object_mut() else {
                    continue;
                };
                obj.remove("bootOrder");
                let order = match (obj.get("name").and_then(Value::as_str), first) {
                    (Some(CDROM), BootTarget::Cd) => Some(1),
                    (Some(CDROM), _) => Some(2),
                    (Some("root"), BootTarget::Cd) if has_cd => Some(2),
                    (Some("root"), _) => Some(1),
                    _ => None,
                };
                if let Some(o) = order {
                    obj.insert("bootOrder".into(), json!(o));
                }
            }
        }
        disks
    }

    /// Start (or restart) with the boot override applied, and a `Once` consumed.
    fn start(&self, vm: &DynamicObject, restart: bool) -> Result<(), MachineError> {
        let boot = boot_state(vm);
        let next = boot.consume_once().unwrap_or(boot);
        self.patch(
            vm,
            json!({
                "metadata": {"annotations": {BOOT_ANNOTATION: boot_text(&next)}},
                "spec": {
                    "runStrategy": "Always",
                    "template": {"spec": {"domain": {"devices": {
                        "disks": Self::ordered_disks(vm, boot.first_device()),
                    }}}},
                },
            }),
        )?;
        if restart {
            let name = vm.metadata.name.clone().unwrap_or_default();
            let path = format!(
                "/apis/subresources.kubevirt.io/v1/namespaces/{}/virtualmachines/{name}/restart",
                self.ns
            );
            let req = hyper::Request::put(path)
                .header("content-type", "application/json")
                .body(b"{}".to_vec())
                .map_err(backend)?;
            self.rt
                .block_on(self.client.request_text(req))
                .with_context(|| format!("restarting VirtualMachine/{name}"))
                .map_err(backend)?;
        }
        Ok(())
    }
}

impl Machine for KubevirtMachine {
    fn list(&self) -> Result<Vec<SystemRef>, MachineError> {
        let mut out: Vec<SystemRef> = self
            .vms()?
            .iter()
            .filter_map(|v| {
                Some(SystemRef {
                    uuid: uuid_of(v)?,
                    name: v.metadata.name.clone()?,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn resolve(&self, id: &str) -> Result<SystemRef, MachineError> {
        self.list()?
            .into_iter()
            .find(|s| s.uuid.eq_ignore_ascii_case(id) || s.name == id)
            .ok_or(MachineError::NotFound)
    }

    fn system(&self, uuid: &str) -> Result<SystemInfo, MachineError> {
        let vm = self.vm(uuid)?;
        let d = &vm.data;
        let dom = d
            .pointer("/spec/template/spec/domain")
            .cloned()
            .unwrap_or_default();
        let media = annotation(&vm, MEDIA_ANNOTATION);
        let mode = match annotation(&vm, MODE_ANNOTATION).as_deref() {
            Some("UEFI") => BootMode::UEFI,
            Some(_) => BootMode::Legacy,
            None if dom.pointer("/firmware/bootloader/efi").is_some() => BootMode::UEFI,
            None => BootMode::Legacy,
        };
        let boot = boot_state(&vm);
        let sizes: HashMap<String, u64> = d
            .pointer("/spec/dataVolumeTemplates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let name = t.pointer("/metadata/name")?.as_str()?.to_string();
                let q = t
                    .pointer("/spec/storage/resources/requests/storage")?
                    .as_str()?;
                Some((name, quantity_bytes(q)?))
            })
            .collect();
        let volumes = d
            .pointer("/spec/template/spec/volumes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let disks = dom
            .pointer("/devices/disks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|disk| disk.get("disk").is_some())
            .filter_map(|disk| {
                let name = disk["name"].as_str()?;
                let dv = volumes
                    .iter()
                    .find(|v| v["name"] == name)
                    .and_then(|v| v.pointer("/dataVolume/name"))
                    .and_then(Value::as_str);
                dv.map(|dv| Disk {
                    name: name.to_string(),
                    capacity_bytes: sizes.get(dv).copied(),
                })
            })
            .collect();
        let nics = dom
            .pointer("/devices/interfaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|i| {
                let mac = i["macAddress"].as_str()?.to_string();
                Some(Nic {
                    id: mac.clone(),
                    mac,
                })
            })
            .collect();
        Ok(SystemInfo {
            uuid: uuid_of(&vm).unwrap_or_default(),
            name: vm.metadata.name.clone().unwrap_or_default(),
            power: if is_on(&vm) {
                PowerState::On
            } else {
                PowerState::Off
            },
            boot: BootOverride {
                target: boot.target,
                enabled: boot.enabled,
                mode,
            },
            cpus: {
                let n = |k: &str| {
                    dom.pointer(&format!("/cpu/{k}"))
                        .and_then(Value::as_u64)
                        .map_or(1, |v| v.max(1) as u32)
                };
                let model = match dom.pointer("/cpu/model").and_then(Value::as_str) {
                    Some(m @ ("host-passthrough" | "host-model")) => format!("host CPU ({m})"),
                    Some(m) => format!("QEMU Virtual CPU ({m})"),
                    // KubeVirt's default is host-model
                    None => "host CPU (host-model)".to_string(),
                };
                Cpus {
                    sockets: n("sockets"),
                    cores: n("cores"),
                    threads: n("threads"),
                    model,
                    // shiftlab's KubeVirt VMs are amd64
                    arch: "x86_64".to_string(),
                }
            },
            memory_mib: dom
                .pointer("/memory/guest")
                .and_then(Value::as_str)
                .and_then(quantity_bytes)
                .map_or(0, |b| b >> 20),
            nics,
            disks,
            media: vec![MediaState {
                slot: MediaSlot::Cd,
                inserted: media.is_some(),
                image: media,
                write_protected: true,
            }],
            // KubeVirt turns secure boot on for EFI unless told not to
            secure_boot: dom
                .pointer("/firmware/bootloader/efi")
                .is_some_and(|efi| efi["secureBoot"].as_bool().unwrap_or(true)),
        })
    }

    fn reset(&self, uuid: &str, reset: ResetType) -> Result<(), MachineError> {
        let lock = self.lock(uuid);
        let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
        let vm = self.vm(uuid)?;
        let on = is_on(&vm);
        let name = vm.metadata.name.clone().unwrap_or_default();
        match reset {
            ResetType::On | ResetType::ForceOn if !on => self.start(&vm, false),
            ResetType::On | ResetType::ForceOn => Ok(()),
            ResetType::ForceOff | ResetType::GracefulShutdown if on => {
                self.patch(&vm, json!({"spec": {"runStrategy": "Halted"}}))
            }
            ResetType::ForceOff => Ok(()),
            ResetType::ForceRestart | ResetType::GracefulRestart if on => self.start(&vm, true),
            ResetType::ForceRestart => self.start(&vm, false),
            ResetType::Nmi if on => Ok(()),
            _ => Err(MachineError::Conflict(format!("{name} is powered off"))),
        }
    }

    fn set_boot(&self, uuid: &str, patch: BootPatch) -> Result<(), MachineError> {
        let lock = self.lock(uuid);
        let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
        let vm = self.vm(uuid)?;
        let next = boot_state(&vm).apply(&patch);
        let mut p = json!({"metadata": {"annotations": {BOOT_ANNOTATION: boot_text(&next)}}});
        if let Some(mode) = patch.mode {
            p["metadata"]["annotations"][MODE_ANNOTATION] = json!(mode.as_str());
            p["spec"] = json!({"template": {"spec": {"domain": {"firmware": {"bootloader":
                match mode {
                    BootMode::UEFI => json!({"efi": {"secureBoot": false}, "bios": null}),
                    BootMode::Legacy => json!({"bios": {}, "efi": null}),
                }
            }}}}});
        }
        self.patch(&vm, p)
    }

    fn insert_media(
        &self,
        uuid: &str,
        _slot: MediaSlot,
        request: &InsertRequest,
    ) -> Result<(), MachineError> {
        let lock = self.lock(uuid);
        let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
        let vm = self.vm(uuid)?;
        if annotation(&vm, MEDIA_ANNOTATION).is_some() {
            return Err(MachineError::medium_inserted());
        }
        let url = request.image.as_str();
        if !(url.starts_with("http://") || url.starts_with("https://"))
            || url.chars().any(char::is_whitespace)
        {
            return Err(MachineError::BadRequest(
                "the image must be an http(s) URL (CDI imports it)".into(),
            ));
        }
        if let Err(reason) = self.sources.vet(url) {
            tracing::warn!(%reason, "image source refused");
            return Err(MachineError::BadRequest(UNREACHABLE.into()));
        }
        let name = vm.metadata.name.clone().unwrap_or_default();
        let dv = format!("{name}-{CDROM}");
        let mut templates = without_cdrom(&vm, "/spec/dataVolumeTemplates", &dv);
        templates.push(json!({
            "metadata": {"name": dv, "labels": crate::kubevirt::render::owner_labels(&self.cluster)},
            "spec": {
                "source": {"http": {"url": url}},
                "storage": {"resources": {"requests": {"storage": CDROM_SIZE}}},
            },
        }));
        let mut disks = without_cdrom(&vm, "/spec/template/spec/domain/devices/disks", &dv);
        disks.push(json!({"name": CDROM, "cdrom": {"bus": "sata", "readonly": true}}));
        let mut volumes = without_cdrom(&vm, "/spec/template/spec/volumes", &dv);
        volumes.push(json!({"name": CDROM, "dataVolume": {"name": dv}}));
        self.patch(
            &vm,
            json!({
                "metadata": {"annotations": {MEDIA_ANNOTATION: url}},
                "spec": {
                    "dataVolumeTemplates": templates,
                    "template": {"spec": {
                        "domain": {"devices": {"disks": disks}},
                        "volumes": volumes,
                    }},
                },
            }),
        )
    }

    fn eject_media(&self, uuid: &str, _slot: MediaSlot) -> Result<(), MachineError> {
        let lock = self.lock(uuid);
        let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
        let vm = self.vm(uuid)?;
        let name = vm.metadata.name.clone().unwrap_or_default();
        let dv = format!("{name}-{CDROM}");
        self.patch(
            &vm,
            json!({
                "metadata": {"annotations": {MEDIA_ANNOTATION: null}},
                "spec": {
                    "dataVolumeTemplates": without_cdrom(&vm, "/spec/dataVolumeTemplates", &dv),
                    "template": {"spec": {
                        "domain": {"devices": {"disks": without_cdrom(&vm, "/spec/template/spec/domain/devices/disks", &dv)}},
                        "volumes": without_cdrom(&vm, "/spec/template/spec/volumes", &dv),
                    }},
                },
            }),
        )?;
        // The imported medium is not removed with its template: delete it.
        let dvs: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.ns,
            &kube::core::ApiResource {
                group: "cdi.kubevirt.io".into(),
                version: "v1beta1".into(),
                api_version: "cdi.kubevirt.io/v1beta1".into(),
                kind: "DataVolume".into(),
                plural: "datavolumes".into(),
            },
        );
        match self.rt.block_on(dvs.delete(&dv, &DeleteParams::default())) {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(backend(
                anyhow::Error::new(e).context(format!("deleting DataVolume/{dv}")),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(quantity_bytes("20G"), Some(20_000_000_000));
        assert_eq!(quantity_bytes("512Mi"), Some(512 << 20));
        assert_eq!(quantity_bytes("4Gi"), Some(4 << 30));
        assert_eq!(quantity_bytes("7"), Some(7));
        assert_eq!(quantity_bytes("1.5Gi"), None);
        assert_eq!(quantity_bytes("G"), None);
    }

    #[test]
    fn boot_state_round_trips_through_its_annotation() {
        let b = BootState {
            target: BootTarget::Cd,
            enabled: BootEnabled::Once,
            previous: Some((BootTarget::Hdd, BootEnabled::Continuous)),
        };
        let mut vm = DynamicObject::new("x", &resource(Kind::VirtualMachine));
        vm.metadata.annotations = Some([(BOOT_ANNOTATION.to_string(), boot_text(&b))].into());
        assert_eq!(boot_state(&vm), b);
    }
}
