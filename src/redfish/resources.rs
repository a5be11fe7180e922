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
        "ProcessorSummary": { "Count": s.cpus, "Status": ok_status() },
        "MemorySummary": {
            "TotalSystemMemoryGiB": s.memory_mib as f64 / 1024.0,
            "Status": ok_status(),
        },
        "EthernetInterfaces": link(format!("{path}/EthernetInterfaces")),
        "SimpleStorage": link(format!("{path}/SimpleStorage")),
        "VirtualMedia": link(format!("{path}/VirtualMedia")),
        "Links": {
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
            cpus: 4,
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
    fn metadata_references_every_schema_once() {
        let m = metadata();
        assert_eq!(m.matches("ComputerSystem_v1.xml").count(), 1);
        assert!(m.contains("Namespace=\"VirtualMedia.v1_3_0\""));
    }
}
