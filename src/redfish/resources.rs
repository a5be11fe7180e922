//! JSON bodies of every resource. Pure functions of typed values.

use serde_json::{json, Value};

use super::model::{
    BootEnabled, BootMode, BootTarget, MediaSlot, MediaState, ResetType, SystemInfo, SystemRef,
};
use super::request::MediaOwner;

pub const ROOT: &str = "/redfish/v1";
pub const REDFISH_VERSION: &str = "1.11.0";

/// Schemas referenced by `@odata.type`, for `$metadata`.
const SCHEMAS: &[(&str, &str)] = &[
    ("ServiceRoot_v1.xml", "ServiceRoot"),
    ("ServiceRoot_v1.xml", "ServiceRoot.v1_11_0"),
    (
        "ComputerSystemCollection_v1.xml",
        "ComputerSystemCollection",
    ),
    ("ComputerSystem_v1.xml", "ComputerSystem"),
    ("ComputerSystem_v1.xml", "ComputerSystem.v1_13_0"),
    (
        "EthernetInterfaceCollection_v1.xml",
        "EthernetInterfaceCollection",
    ),
    ("EthernetInterface_v1.xml", "EthernetInterface"),
    ("EthernetInterface_v1.xml", "EthernetInterface.v1_6_0"),
    ("SimpleStorageCollection_v1.xml", "SimpleStorageCollection"),
    ("SimpleStorage_v1.xml", "SimpleStorage"),
    ("SimpleStorage_v1.xml", "SimpleStorage.v1_3_0"),
    ("ProcessorCollection_v1.xml", "ProcessorCollection"),
    ("Processor_v1.xml", "Processor"),
    ("Processor_v1.xml", "Processor.v1_0_0"),
    ("StorageCollection_v1.xml", "StorageCollection"),
    ("Storage_v1.xml", "Storage"),
    ("Storage_v1.xml", "Storage.v1_0_0"),
    ("Drive_v1.xml", "Drive"),
    ("Drive_v1.xml", "Drive.v1_0_0"),
    ("Bios_v1.xml", "Bios"),
    ("Bios_v1.xml", "Bios.v1_0_0"),
    ("SecureBoot_v1.xml", "SecureBoot"),
    ("SecureBoot_v1.xml", "SecureBoot.v1_0_0"),
    ("ChassisCollection_v1.xml", "ChassisCollection"),
    ("Chassis_v1.xml", "Chassis"),
    ("Chassis_v1.xml", "Chassis.v1_10_0"),
    ("ManagerCollection_v1.xml", "ManagerCollection"),
    ("Manager_v1.xml", "Manager"),
    ("Manager_v1.xml", "Manager.v1_10_0"),
    ("VirtualMediaCollection_v1.xml", "VirtualMediaCollection"),
    ("VirtualMedia_v1.xml", "VirtualMedia"),
    ("VirtualMedia_v1.xml", "VirtualMedia.v1_3_0"),
    ("SessionService_v1.xml", "SessionService"),
    ("SessionService_v1.xml", "SessionService.v1_1_8"),
    ("SessionCollection_v1.xml", "SessionCollection"),
    ("Session_v1.xml", "Session"),
    ("Session_v1.xml", "Session.v1_3_0"),
    ("Message_v1.xml", "Message"),
    ("Message_v1.xml", "Message.v1_1_1"),
];

fn link(path: String) -> Value {
    json!({ "@odata.id": path })
}

fn ok_status() -> Value {
    json!({ "State": "Enabled", "Health": "OK" })
}

pub fn system_path(uuid: &str) -> String {
    format!("{ROOT}/Systems/{uuid}")
}

pub fn chassis_path(uuid: &str) -> String {
    format!("{ROOT}/Chassis/{uuid}")
}

pub fn manager_path(uuid: &str) -> String {
    format!("{ROOT}/Managers/{uuid}")
}

fn media_base(owner: MediaOwner, uuid: &str) -> String {
    match owner {
        MediaOwner::System => format!("{}/VirtualMedia", system_path(uuid)),
        MediaOwner::Manager => format!("{}/VirtualMedia", manager_path(uuid)),
    }
}

pub fn session_path(id: &str) -> String {
    format!("{ROOT}/SessionService/Sessions/{id}")
}

fn collection(kind: &str, path: &str, name: &str, members: Vec<String>) -> Value {
    json!({
        "@odata.type": format!("#{kind}.{kind}"),
        "@odata.id": path,
        "Name": name,
        "Members@odata.count": members.len(),
        "Members": members.into_iter().map(link).collect::<Vec<_>>(),
    })
}

/// `/redfish`: the protocol versions this service speaks.
pub fn redfish() -> Value {
    json!({ "v1": format!("{ROOT}/") })
}

pub fn service_root(uuid: &str, version: &str) -> Value {
    json!({
        "@odata.type": "#ServiceRoot.v1_11_0.ServiceRoot",
        "@odata.id": format!("{ROOT}/"),
        "Id": "RootService",
        "Name": "shiftlab Redfish service",
        "RedfishVersion": REDFISH_VERSION,
        "UUID": uuid,
        "Vendor": "shiftlab",
        "Product": format!("shiftlab BMC {version}"),
        "ProtocolFeaturesSupported": {
            "ExcerptQuery": false,
            "ExpandQuery": { "ExpandAll": false, "Levels": false, "Links": false, "NoLinks": false },
            "FilterQuery": false,
            "OnlyMemberQuery": false,
            "SelectQuery": false,
        },
        "Systems": link(format!("{ROOT}/Systems")),
        "Chassis": link(format!("{ROOT}/Chassis")),
        "Managers": link(format!("{ROOT}/Managers")),
        "SessionService": link(format!("{ROOT}/SessionService")),
        "Links": { "Sessions": link(format!("{ROOT}/SessionService/Sessions")) },
    })
}

/// `$metadata`: the CSDL document naming every schema in use.
pub fn metadata() -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<edmx:Edmx xmlns:edmx=\"http://docs.oasis-open.org/odata/ns/edmx\" Version=\"4.0\">\n",
    );
    let mut files: Vec<&str> = SCHEMAS.iter().map(|(f, _)| *f).collect();
    files.dedup();
    for file in files {
        out.push_str(&format!(
            "  <edmx:Reference Uri=\"http://redfish.dmtf.org/schemas/v1/{file}\">\n"
        ));
        for (_, ns) in SCHEMAS.iter().filter(|(f, _)| *f == file) {
            out.push_str(&format!("    <edmx:Include Namespace=\"{ns}\"/>\n"));
        }
        out.push_str("  </edmx:Reference>\n");
    }
    out.push_str(
        "  <edmx:Reference Uri=\"http://redfish.dmtf.org/schemas/v1/RedfishExtensions_v1.xml\">\n    <edmx:Include Namespace=\"RedfishExtensions.v1_0_0\" Alias=\"Redfish\"/>\n  </edmx:Reference>\n",
    );
    out.push_str(
        "  <edmx:DataServices>\n    <Schema xmlns=\"http://docs.oasis-open.org/odata/ns/edm\" Namespace=\"Service\">\n      <EntityContainer Name=\"Service\" Extends=\"ServiceRoot.v1_11_0.ServiceContainer\"/>\n    </Schema>\n  </edmx:DataServices>\n</edmx:Edmx>\n",
    );
    out
}

/// `/redfish/v1/odata`: the OData service document.
pub fn odata() -> Value {
    let entry = |name: &str, url: String| json!({ "name": name, "kind": "Singleton", "url": url });
    json!({
        "@odata.context": format!("{ROOT}/$metadata"),
        "value": [
            entry("Service", format!("{ROOT}/")),
            entry("Systems", format!("{ROOT}/Systems")),
            entry("Chassis", format!("{ROOT}/Chassis")),
            entry("Managers", format!("{ROOT}/Managers")),
            entry("SessionService", format!("{ROOT}/SessionService")),
        ],
    })
}

pub fn systems(list: &[SystemRef]) -> Value {
    collection(
        "ComputerSystemCollection",
        &format!("{ROOT}/Systems"),
        "Computer System Collection",
        list.iter().map(|s| system_path(&s.uuid)).collect(),
    )
}

pub fn system(s: &SystemInfo) -> Value {
    let path = system_path(&s.uuid);
    json!({
        "@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem",
        "@odata.id": path,
        "Id": s.uuid,
        "Name": s.name,
        "UUID": s.uuid,
        "SystemType": "Virtual",
        "Manufacturer": "shiftlab",
        "Model": "libvirt virtual machine",
        "Status": ok_status(),
        "PowerState": s.power.as_str(),
        "Boot": {
            "BootSourceOverrideTarget": s.boot.target.as_str(),
            "BootSourceOverrideTarget@Redfish.AllowableValues": BootTarget::allowable(),
            "BootSourceOverrideEnabled": s.boot.enabled.as_str(),
            "BootSourceOverrideEnabled@Redfish.AllowableValues": BootEnabled::allowable(),
            "BootSourceOverrideMode": s.boot.mode.as_str(),
            "BootSourceOverrideMode@Redfish.AllowableValues": BootMode::allowable(),
        },
        "ProcessorSummary": {
            "Count": s.cpus.logical(),
            "Model": s.cpus.model,
            "Status": ok_status(),
        },
        "MemorySummary": {
            "TotalSystemMemoryGiB": s.memory_mib as f64 / 1024.0,
            "Status": ok_status(),
        },
        "Processors": link(format!("{path}/Processors")),
        "EthernetInterfaces": link(format!("{path}/EthernetInterfaces")),
        "SimpleStorage": link(format!("{path}/SimpleStorage")),
        "Storage": link(format!("{path}/Storage")),
        "Bios": link(format!("{path}/Bios")),
        "SecureBoot": link(format!("{path}/SecureBoot")),
        "VirtualMedia": link(format!("{path}/VirtualMedia")),
        "Links": {
            "Chassis": [link(chassis_path(&s.uuid))],
            "ManagedBy": [link(manager_path(&s.uuid))],
        },
        "Actions": {
            "#ComputerSystem.Reset": {
                "target": format!("{path}/Actions/ComputerSystem.Reset"),
                "ResetType@Redfish.AllowableValues": ResetType::allowable(),
            }
        },
    })
}

pub fn ethernet_interfaces(s: &SystemInfo) -> Value {
    let base = format!("{}/EthernetInterfaces", system_path(&s.uuid));
    collection(
        "EthernetInterfaceCollection",
        &base,
        "Ethernet Interface Collection",
        s.nics.iter().map(|n| format!("{base}/{}", n.id)).collect(),
    )
}

/// One interface; `None` when the system has no interface with that id.
pub fn ethernet_interface(s: &SystemInfo, id: &str) -> Option<Value> {
    let nic = s.nics.iter().find(|n| n.id == id)?;
    Some(json!({
        "@odata.type": "#EthernetInterface.v1_6_0.EthernetInterface",
        "@odata.id": format!("{}/EthernetInterfaces/{}", system_path(&s.uuid), nic.id),
        "Id": nic.id,
        "Name": "VM network interface",
        "Status": ok_status(),
        "MACAddress": nic.mac,
        "PermanentMACAddress": nic.mac,
    }))
}

pub fn simple_storages(s: &SystemInfo) -> Value {
    let base = format!("{}/SimpleStorage", system_path(&s.uuid));
    collection(
        "SimpleStorageCollection",
        &base,
        "Simple Storage Collection",
        vec![format!("{base}/1")],
    )
}

pub fn simple_storage(s: &SystemInfo, id: &str) -> Option<Value> {
    if id != "1" {
        return None;
    }
    let devices: Vec<Value> = s
        .disks
        .iter()
        .map(|d| {
            let mut v = json!({ "Name": d.name, "Status": ok_status() });
            if let Some(c) = d.capacity_bytes {
                v["CapacityBytes"] = json!(c);
            }
            v
        })
        .collect();
    Some(json!({
        "@odata.type": "#SimpleStorage.v1_3_0.SimpleStorage",
        "@odata.id": format!("{}/SimpleStorage/1", system_path(&s.uuid)),
        "Id": "1",
        "Name": "Virtual disks",
        "Status": ok_status(),
        "Devices": devices,
    }))
}

/// One processor per socket, `CPU0`…: what Ironic's out-of-band inspection
/// reads (`cpus` sums `TotalThreads`, `cpu_arch` maps `InstructionSet`).
pub fn processors(s: &SystemInfo) -> Value {
    let base = format!("{}/Processors", system_path(&s.uuid));
    collection(
        "ProcessorCollection",
        &base,
        "Processor Collection",
        (0..s.cpus.sockets)
            .map(|i| format!("{base}/CPU{i}"))
            .collect(),
    )
}

/// Redfish's names of a libvirt architecture: (ProcessorArchitecture,
/// InstructionSet); `None` for one Redfish has no name for.
fn architecture(arch: &str) -> Option<(&'static str, &'static str)> {
    match arch {
        "x86_64" => Some(("x86", "x86-64")),
        "i686" => Some(("x86", "x86")),
        "aarch64" => Some(("ARM", "ARM-A64")),
        "ppc64" | "ppc64le" => Some(("Power", "PowerISA")),
        _ => None,
    }
}

pub fn processor(s: &SystemInfo, id: &str) -> Option<Value> {
    let n: u32 = id.strip_prefix("CPU")?.parse().ok()?;
    if n >= s.cpus.sockets || id != format!("CPU{n}") {
        return None;
    }
    let mut v = json!({
        "@odata.type": "#Processor.v1_0_0.Processor",
        "@odata.id": format!("{}/Processors/{id}", system_path(&s.uuid)),
        "Id": id,
        "Name": format!("Processor {n}"),
        "Socket": format!("CPU {n}"),
        "ProcessorType": "CPU",
        "Model": s.cpus.model,
        "TotalCores": s.cpus.cores,
        "TotalThreads": s.cpus.cores * s.cpus.threads,
        "Status": ok_status(),
    });
    if let Some((arch, set)) = architecture(&s.cpus.arch) {
        v["ProcessorArchitecture"] = json!(arch);
        v["InstructionSet"] = json!(set);
    }
    Some(v)
}

pub fn storages(s: &SystemInfo) -> Value {
    let base = format!("{}/Storage", system_path(&s.uuid));
    collection(
        "StorageCollection",
        &base,
        "Storage Collection",
        vec![format!("{base}/1")],
    )
}

/// The domain's disks as one storage subsystem; its drives are the disks.
pub fn storage(s: &SystemInfo, id: &str) -> Option<Value> {
    if id != "1" {
        return None;
    }
    let base = format!("{}/Storage/1", system_path(&s.uuid));
    let drives: Vec<Value> = s
        .disks
        .iter()
        .map(|d| link(format!("{base}/Drives/{}", d.name)))
        .collect();
    Some(json!({
        "@odata.type": "#Storage.v1_0_0.Storage",
        "@odata.id": base,
        "Id": "1",
        "Name": "Virtual disks",
        "Status": ok_status(),
        "Drives@odata.count": drives.len(),
        "Drives": drives,
    }))
}

pub fn drive(s: &SystemInfo, storage: &str, id: &str) -> Option<Value> {
    let d = s.disks.iter().find(|d| d.name == id)?;
    if storage != "1" {
        return None;
    }
    let mut v = json!({
        "@odata.type": "#Drive.v1_0_0.Drive",
        "@odata.id": format!("{}/Storage/1/Drives/{id}", system_path(&s.uuid)),
        "Id": id,
        "Name": format!("Virtual disk {id}"),
        "Status": ok_status(),
    });
    if let Some(c) = d.capacity_bytes {
        v["CapacityBytes"] = json!(c);
    }
    Some(v)
}

/// BIOS attributes, read-only: what the domain's firmware is. No
/// `@Redfish.Settings` is advertised, so clients know nothing can be set.
pub fn bios(s: &SystemInfo) -> Value {
    let mode = match s.boot.mode {
        BootMode::UEFI => "Uefi",
        BootMode::Legacy => "Bios",
    };
    json!({
        "@odata.type": "#Bios.v1_0_0.Bios",
        "@odata.id": format!("{}/Bios", system_path(&s.uuid)),
        "Id": "Bios",
        "Name": "BIOS settings (read-only)",
        "Description": "The domain's firmware as its definition sets it; read-only.",
        "Attributes": {
            "BootMode": mode,
            "SecureBoot": if s.secure_boot { "Enabled" } else { "Disabled" },
        },
    })
}

pub fn secure_boot(s: &SystemInfo) -> Value {
    let state = if s.secure_boot { "Enabled" } else { "Disabled" };
    json!({
        "@odata.type": "#SecureBoot.v1_0_0.SecureBoot",
        "@odata.id": format!("{}/SecureBoot", system_path(&s.uuid)),
        "Id": "SecureBoot",
        "Name": "UEFI Secure Boot",
        "SecureBootEnable": s.secure_boot,
        "SecureBootCurrentBoot": state,
    })
}

pub fn chassis_collection(list: &[SystemRef]) -> Value {
    collection(
        "ChassisCollection",
        &format!("{ROOT}/Chassis"),
        "Chassis Collection",
        list.iter().map(|s| chassis_path(&s.uuid)).collect(),
    )
}

/// A system's enclosure: one per system, with its system's UUID.
pub fn chassis(s: &SystemInfo) -> Value {
    json!({
        "@odata.type": "#Chassis.v1_10_0.Chassis",
        "@odata.id": chassis_path(&s.uuid),
        "Id": s.uuid,
        "Name": format!("Chassis of {}", s.name),
        "ChassisType": "Other",
        "Manufacturer": "shiftlab",
        "Model": "libvirt virtual machine",
        "PowerState": s.power.as_str(),
        "Status": ok_status(),
        "Links": {
            "ComputerSystems": [link(system_path(&s.uuid))],
            "ManagedBy": [link(manager_path(&s.uuid))],
        },
    })
}

pub fn virtual_media_collection(owner: MediaOwner, s: &SystemInfo) -> Value {
    let base = media_base(owner, &s.uuid);
    collection(
        "VirtualMediaCollection",
        &base,
        "Virtual Media Collection",
        s.media
            .iter()
            .map(|m| format!("{base}/{}", m.slot))
            .collect(),
    )
}

pub fn virtual_media(owner: MediaOwner, s: &SystemInfo, m: &MediaState) -> Value {
    let path = format!("{}/{}", media_base(owner, &s.uuid), m.slot);
    let image_name = m
        .image
        .as_deref()
        .map(|i| i.rsplit('/').next().unwrap_or(i).to_string());
    let protocol = m.image.as_deref().map(|i| {
        if i.to_ascii_lowercase().starts_with("https:") {
            "HTTPS"
        } else {
            "HTTP"
        }
    });
    let (id, name) = match m.slot {
        MediaSlot::Cd => ("Cd", "Virtual CD"),
    };
    json!({
        "@odata.type": "#VirtualMedia.v1_3_0.VirtualMedia",
        "@odata.id": path,
        "Id": id,
        "Name": name,
        "MediaTypes": ["CD", "DVD"],
        "ConnectedVia": if m.inserted { "URI" } else { "NotConnected" },
        "Inserted": m.inserted,
        "Image": m.image,
        "ImageName": image_name,
        "WriteProtected": m.write_protected,
        "TransferProtocolType": protocol,
        "TransferMethod": "Stream",
        "Actions": {
            "#VirtualMedia.InsertMedia": { "target": format!("{path}/Actions/VirtualMedia.InsertMedia") },
            "#VirtualMedia.EjectMedia": { "target": format!("{path}/Actions/VirtualMedia.EjectMedia") },
        },
    })
}

pub fn managers(list: &[SystemRef]) -> Value {
    collection(
        "ManagerCollection",
        &format!("{ROOT}/Managers"),
        "Manager Collection",
        list.iter().map(|s| manager_path(&s.uuid)).collect(),
    )
}

pub fn manager(s: &SystemInfo, version: &str) -> Value {
    let path = manager_path(&s.uuid);
    json!({
        "@odata.type": "#Manager.v1_10_0.Manager",
        "@odata.id": path,
        "Id": s.uuid,
        "Name": format!("BMC of {}", s.name),
        "ManagerType": "BMC",
        "UUID": s.uuid,
        "Model": "shiftlab BMC",
        "FirmwareVersion": version,
        "PowerState": "On",
        "Status": ok_status(),
        "VirtualMedia": link(format!("{path}/VirtualMedia")),
        "Links": {
            "ManagerForServers": [link(system_path(&s.uuid))],
            "ManagerForChassis": [link(chassis_path(&s.uuid))],
        },
    })
}

pub fn session_service(timeout_secs: u64) -> Value {
    json!({
        "@odata.type": "#SessionService.v1_1_8.SessionService",
        "@odata.id": format!("{ROOT}/SessionService"),
        "Id": "SessionService",
        "Name": "Session Service",
        "Status": ok_status(),
        "ServiceEnabled": true,
        "SessionTimeout": timeout_secs,
        "Sessions": link(format!("{ROOT}/SessionService/Sessions")),
    })
}

pub fn sessions(ids: &[String]) -> Value {
    collection(
        "SessionCollection",
        &format!("{ROOT}/SessionService/Sessions"),
        "Session Collection",
        ids.iter().map(|i| session_path(i)).collect(),
    )
}

pub fn session(id: &str, user: &str) -> Value {
    json!({
        "@odata.type": "#Session.v1_3_0.Session",
        "@odata.id": session_path(id),
        "Id": id,
        "Name": "User Session",
        "UserName": user,
        "Password": null,
        "SessionType": "Redfish",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redfish::model::*;

    fn info() -> SystemInfo {
        SystemInfo {
            uuid: "u1".into(),
            name: "lab1-master-0".into(),
            power: PowerState::Off,
            boot: BootOverride {
                target: BootTarget::Cd,
                enabled: BootEnabled::Once,
                mode: BootMode::UEFI,
            },
            cpus: Cpus {
                sockets: 2,
                cores: 2,
                threads: 2,
                model: "QEMU Virtual CPU (qemu64)".into(),
                arch: "x86_64".into(),
            },
            memory_mib: 16384,
            nics: vec![Nic {
                id: "52:54:00:aa:bb:cc".into(),
                mac: "52:54:00:aa:bb:cc".into(),
            }],
            disks: vec![Disk {
                name: "vda".into(),
                capacity_bytes: Some(1 << 30),
            }],
            media: vec![MediaState {
                slot: MediaSlot::Cd,
                inserted: true,
                image: Some("http://h/x/boot.iso".into()),
                write_protected: true,
            }],
            secure_boot: false,
        }
    }

    #[test]
    fn system_carries_what_sushy_reads() {
        let v = system(&info());
        assert_eq!(v["@odata.id"], "/redfish/v1/Systems/u1");
        assert_eq!(v["PowerState"], "Off");
        assert_eq!(v["Boot"]["BootSourceOverrideTarget"], "Cd");
        assert_eq!(v["Boot"]["BootSourceOverrideEnabled"], "Once");
        assert_eq!(
            v["Boot"]["BootSourceOverrideMode@Redfish.AllowableValues"],
            json!(["UEFI", "Legacy"])
        );
        assert_eq!(
            v["Actions"]["#ComputerSystem.Reset"]["target"],
            "/redfish/v1/Systems/u1/Actions/ComputerSystem.Reset"
        );
        assert_eq!(
            v["Actions"]["#ComputerSystem.Reset"]["ResetType@Redfish.AllowableValues"]
                .as_array()
                .unwrap()
                .len(),
            7
        );
        assert_eq!(
            v["Links"]["ManagedBy"][0]["@odata.id"],
            "/redfish/v1/Managers/u1"
        );
        assert_eq!(v["MemorySummary"]["TotalSystemMemoryGiB"], 16.0);
    }

    #[test]
    fn media_is_listed_under_system_and_manager() {
        let i = info();
        let m = virtual_media(MediaOwner::Manager, &i, &i.media[0]);
        assert_eq!(m["@odata.id"], "/redfish/v1/Managers/u1/VirtualMedia/Cd");
        assert_eq!(m["ImageName"], "boot.iso");
        assert_eq!(m["Inserted"], true);
        let c = virtual_media_collection(MediaOwner::System, &i);
        assert_eq!(
            c["Members"][0]["@odata.id"],
            "/redfish/v1/Systems/u1/VirtualMedia/Cd"
        );
        assert!(ethernet_interface(&i, "nope").is_none());
        assert_eq!(
            ethernet_interface(&i, "52:54:00:aa:bb:cc").unwrap()["MACAddress"],
            "52:54:00:aa:bb:cc"
        );
    }

    #[test]
    fn processors_one_per_socket_as_ironic_inspects_them() {
        let i = info();
        let v = system(&i);
        // eight logical CPUs: 2 sockets x 2 cores x 2 threads
        assert_eq!(v["ProcessorSummary"]["Count"], 8);
        assert_eq!(
            v["Processors"]["@odata.id"],
            "/redfish/v1/Systems/u1/Processors"
        );
        let c = processors(&i);
        assert_eq!(c["Members@odata.count"], 2);
        assert_eq!(
            c["Members"][1]["@odata.id"],
            "/redfish/v1/Systems/u1/Processors/CPU1"
        );
        let p = processor(&i, "CPU1").unwrap();
        assert_eq!(p["ProcessorType"], "CPU");
        assert_eq!(p["ProcessorArchitecture"], "x86");
        assert_eq!(p["InstructionSet"], "x86-64");
        assert_eq!(p["TotalCores"], 2);
        assert_eq!(p["TotalThreads"], 4);
        assert_eq!(p["Model"], "QEMU Virtual CPU (qemu64)");
        // sushy sums TotalThreads over the members: the logical count
        let threads: u64 = (0..2)
            .map(|n| {
                processor(&i, &format!("CPU{n}")).unwrap()["TotalThreads"]
                    .as_u64()
                    .unwrap()
            })
            .sum();
        assert_eq!(threads, 8);
        for bad in ["CPU2", "CPU01", "cpu0", "CPU", "CPU-1"] {
            assert!(processor(&i, bad).is_none(), "{bad}");
        }
        let mut arm = info();
        arm.cpus.arch = "aarch64".into();
        assert_eq!(
            processor(&arm, "CPU0").unwrap()["InstructionSet"],
            "ARM-A64"
        );
        arm.cpus.arch = "riscv64".into();
        assert!(processor(&arm, "CPU0")
            .unwrap()
            .get("InstructionSet")
            .is_none());
    }

    #[test]
    fn chassis_storage_bios_and_secure_boot_link_back() {
        let i = info();
        let v = system(&i);
        assert_eq!(
            v["Links"]["Chassis"][0]["@odata.id"],
            "/redfish/v1/Chassis/u1"
        );
        for (key, want) in [
            ("Storage", "/redfish/v1/Systems/u1/Storage"),
            ("Bios", "/redfish/v1/Systems/u1/Bios"),
            ("SecureBoot", "/redfish/v1/Systems/u1/SecureBoot"),
        ] {
            assert_eq!(v[key]["@odata.id"], want);
        }
        let c = chassis(&i);
        assert_eq!(
            c["Links"]["ComputerSystems"][0]["@odata.id"],
            "/redfish/v1/Systems/u1"
        );
        assert_eq!(
            c["Links"]["ManagedBy"][0]["@odata.id"],
            "/redfish/v1/Managers/u1"
        );
        assert_eq!(
            manager(&i, "x")["Links"]["ManagerForChassis"][0]["@odata.id"],
            "/redfish/v1/Chassis/u1"
        );
        assert_eq!(
            service_root("s", "x")["Chassis"]["@odata.id"],
            "/redfish/v1/Chassis"
        );
        let st = storage(&i, "1").unwrap();
        assert_eq!(
            st["Drives"][0]["@odata.id"],
            "/redfish/v1/Systems/u1/Storage/1/Drives/vda"
        );
        assert_eq!(drive(&i, "1", "vda").unwrap()["CapacityBytes"], 1u64 << 30);
        assert!(drive(&i, "1", "vdb").is_none());
        assert!(storage(&i, "2").is_none());
        let b = bios(&i);
        assert_eq!(b["Attributes"]["BootMode"], "Uefi");
        assert_eq!(b["Attributes"]["SecureBoot"], "Disabled");
        assert!(b.get("@Redfish.Settings").is_none(), "nothing can be set");
        assert_eq!(secure_boot(&i)["SecureBootEnable"], false);
        let mut sb = info();
        sb.secure_boot = true;
        assert_eq!(secure_boot(&sb)["SecureBootEnable"], true);
        assert_eq!(secure_boot(&sb)["SecureBootCurrentBoot"], "Enabled");
    }

    #[test]
    fn metadata_references_every_schema_once() {
        let m = metadata();
        assert_eq!(m.matches("ComputerSystem_v1.xml").count(), 1);
        assert!(m.contains("Namespace=\"VirtualMedia.v1_3_0\""));
    }
}
