//! Request parsing: a pure function from (method, path, content type, body)
//! to a typed [`Action`]. No I/O, no machine: everything that can be refused
//! by looking at the request alone is refused here.

use serde_json::{Map, Value};

use super::error::RedfishError;
use super::model::{
    BootEnabled, BootMode, BootPatch, BootTarget, InsertRequest, MediaSlot, ResetType,
};

/// Largest request body accepted (bytes).
pub const MAX_BODY: usize = 64 * 1024;

/// Largest body of a request that needs no credentials (the login's
/// `{"UserName":..,"Password":..}`): whoever has no password sends little.
pub const MAX_ANONYMOUS_BODY: usize = 4 * 1024;

/// Largest accepted image URL.
const MAX_URL: usize = 2048;

/// Who a virtual media slot is listed under: the System itself or its Manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaOwner {
    System,
    Manager,
}

/// A resource, identified by its path alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Redfish,
    ServiceRoot,
    Metadata,
    OData,
    Systems,
    System(String),
    Reset(String),
    EthernetInterfaces(String),
    EthernetInterface(String, String),
    SimpleStorages(String),
    SimpleStorage(String, String),
    Processors(String),
    Processor(String, String),
    Storages(String),
    Storage(String, String),
    Drive(String, String, String),
    Bios(String),
    SecureBoot(String),
    ChassisCollection,
    Chassis(String),
    VirtualMediaCollection(MediaOwner, String),
    VirtualMedia(MediaOwner, String, String),
    InsertMedia(MediaOwner, String, String),
    EjectMedia(MediaOwner, String, String),
    Managers,
    Manager(String),
    SessionService,
    Sessions,
    Session(String),
}

/// What a request asks the service to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// GET (or HEAD) of a resource.
    Get(Resource),
    PatchBoot {
        system: String,
        patch: BootPatch,
    },
    Reset {
        system: String,
        reset: ResetType,
    },
    /// PATCH of `SecureBoot`: `SecureBootEnable` as asked.
    PatchSecureBoot {
        system: String,
        enable: bool,
    },
    InsertMedia {
        owner: MediaOwner,
        system: String,
        slot: MediaSlot,
        request: InsertRequest,
    },
    EjectMedia {
        owner: MediaOwner,
        system: String,
        slot: MediaSlot,
    },
    CreateSession {
        user: String,
        password: String,
    },
    DeleteSession(String),
}

impl Resource {
    /// Maps a path (query string already removed) to a resource.
    pub fn from_path(path: &str) -> Option<Resource> {
        let trimmed = path.trim_end_matches('/');
        if trimmed == "/redfish" {
            return Some(Resource::Redfish);
        }
        let rest = trimmed.strip_prefix("/redfish/v1")?;
        let segs: Vec<&str> = if rest.is_empty() {
            vec![]
        } else {
            rest.strip_prefix('/')?.split('/').collect()
        };
        if segs.iter().any(|s| s.is_empty()) {
            return None;
        }
        let own = |s: &str| s.to_string();
        use MediaOwner::{Manager as M, System as S};
        let r = match segs.as_slice() {
            [] => Resource::ServiceRoot,
            ["$metadata"] => Resource::Metadata,
            ["odata"] => Resource::OData,
            ["Systems"] => Resource::Systems,
            ["Systems", id] => Resource::System(own(id)),
            ["Systems", id, "Actions", "ComputerSystem.Reset"] => Resource::Reset(own(id)),
            ["Systems", id, "EthernetInterfaces"] => Resource::EthernetInterfaces(own(id)),
            ["Systems", id, "EthernetInterfaces", n] => {
                Resource::EthernetInterface(own(id), own(n))
            }
            ["Systems", id, "SimpleStorage"] => Resource::SimpleStorages(own(id)),
            ["Systems", id, "SimpleStorage", n] => Resource::SimpleStorage(own(id), own(n)),
            ["Systems", id, "Processors"] => Resource::Processors(own(id)),
            ["Systems", id, "Processors", n] => Resource::Processor(own(id), own(n)),
            ["Systems", id, "Storage"] => Resource::Storages(own(id)),
            ["Systems", id, "Storage", n] => Resource::Storage(own(id), own(n)),
            ["Systems", id, "Storage", n, "Drives", d] => Resource::Drive(own(id), own(n), own(d)),
            ["Systems", id, "Bios"] => Resource::Bios(own(id)),
            ["Systems", id, "SecureBoot"] => Resource::SecureBoot(own(id)),
            ["Chassis"] => Resource::ChassisCollection,
            ["Chassis", id] => Resource::Chassis(own(id)),
            ["Systems", id, "VirtualMedia"] => Resource::VirtualMediaCollection(S, own(id)),
            ["Systems", id, "VirtualMedia", m] => Resource::VirtualMedia(S, own(id), own(m)),
            ["Systems", id, "VirtualMedia", m, "Actions", "VirtualMedia.InsertMedia"] => {
                Resource::InsertMedia(S, own(id), own(m))
            }
            ["Systems", id, "VirtualMedia", m, "Actions", "VirtualMedia.EjectMedia"] => {
                Resource::EjectMedia(S, own(id), own(m))
            }
            ["Managers"] => Resource::Managers,
            ["Managers", id] => Resource::Manager(own(id)),
            ["Managers", id, "VirtualMedia"] => Resource::VirtualMediaCollection(M, own(id)),
            ["Managers", id, "VirtualMedia", m] => Resource::VirtualMedia(M, own(id), own(m)),
            ["Managers", id, "VirtualMedia", m, "Actions", "VirtualMedia.InsertMedia"] => {
                Resource::InsertMedia(M, own(id), own(m))
            }
            ["Managers", id, "VirtualMedia", m, "Actions", "VirtualMedia.EjectMedia"] => {
                Resource::EjectMedia(M, own(id), own(m))
            }
            ["SessionService"] => Resource::SessionService,
            ["SessionService", "Sessions"] => Resource::Sessions,
            ["SessionService", "Sessions", id] => Resource::Session(own(id)),
            _ => return None,
        };
        Some(r)
    }

    /// Methods the resource answers, for 405 and the `Allow` header.
    pub fn allowed_methods(&self) -> &'static [&'static str] {
        match self {
            Resource::System(_) | Resource::SecureBoot(_) => &["GET", "HEAD", "PATCH"],
            Resource::Reset(_) | Resource::InsertMedia(..) | Resource::EjectMedia(..) => &["POST"],
            Resource::Sessions => &["GET", "HEAD", "POST"],
            Resource::Session(_) => &["GET", "HEAD", "DELETE"],
            _ => &["GET", "HEAD"],
        }
    }

    /// The system (by UUID or name) the resource belongs to, if any.
    pub fn system(&self) -> Option<&str> {
        match self {
            Resource::System(id)
            | Resource::Reset(id)
            | Resource::EthernetInterfaces(id)
            | Resource::EthernetInterface(id, _)
            | Resource::SimpleStorages(id)
            | Resource::SimpleStorage(id, _)
            | Resource::Processors(id)
            | Resource::Processor(id, _)
            | Resource::Storages(id)
            | Resource::Storage(id, _)
            | Resource::Drive(id, _, _)
            | Resource::Bios(id)
            | Resource::SecureBoot(id)
            | Resource::Chassis(id)
            | Resource::VirtualMediaCollection(_, id)
            | Resource::VirtualMedia(_, id, _)
            | Resource::InsertMedia(_, id, _)
            | Resource::EjectMedia(_, id, _)
            | Resource::Manager(id) => Some(id),
            _ => None,
        }
    }

    /// Whether a request for this resource needs credentials. The service
    /// root (and its OData documents) and the login itself do not.
    pub fn requires_auth(&self, method: &str) -> bool {
        !matches!(
            (self, method),
            (
                Resource::Redfish | Resource::ServiceRoot | Resource::Metadata | Resource::OData,
                _
            ) | (Resource::Sessions, "POST")
        )
    }
}

/// Routes a request path and method; refuses unknown paths (404) and methods (405).
pub fn route(method: &str, path: &str) -> Result<Resource, RedfishError> {
    let resource = Resource::from_path(path).ok_or_else(|| RedfishError::not_found(path))?;
    if !resource.allowed_methods().contains(&method) {
        return Err(RedfishError::method_not_allowed(
            method,
            path,
            resource.allowed_methods(),
        ));
    }
    Ok(resource)
}

/// Parses the whole request into an action.
pub fn parse(
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Action, RedfishError> {
    let resource = route(method, path)?;
    action(method, resource, content_type, body)
}

/// Turns a routed request and its body into an action.
pub fn action(
    method: &str,
    resource: Resource,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Action, RedfishError> {
    match method {
        "GET" | "HEAD" => return Ok(Action::Get(resource)),
        "DELETE" => {
            return match resource {
                Resource::Session(id) => Ok(Action::DeleteSession(id)),
                _ => Err(RedfishError::internal()),
            }
        }
        _ => {}
    }
    let body = json_body(content_type, body)?;
    match resource {
        Resource::System(system) => {
            let obj = require_object(body)?;
            Ok(Action::PatchBoot {
                system,
                patch: boot_patch(&obj)?,
            })
        }
        Resource::SecureBoot(system) => {
            let obj = require_object(body)?;
            Ok(Action::PatchSecureBoot {
                system,
                enable: secure_boot_patch(&obj)?,
            })
        }
        Resource::Reset(system) => {
            let obj = require_object(body)?;
            Ok(Action::Reset {
                system,
                reset: reset_type(&obj)?,
            })
        }
        Resource::InsertMedia(owner, system, slot) => {
            let slot = media_slot(&slot)?;
            let obj = require_object(body)?;
            Ok(Action::InsertMedia {
                owner,
                system,
                slot,
                request: insert_request(&obj)?,
            })
        }
        Resource::EjectMedia(owner, system, slot) => {
            let slot = media_slot(&slot)?;
            if let Some(Value::Object(obj)) = &body {
                if let Some(k) = obj.keys().find(|k| !k.starts_with('@')) {
                    return Err(RedfishError::action_parameter_unknown(
                        "VirtualMedia.EjectMedia",
                        k,
                    ));
                }
            } else if body.is_some() {
                return Err(RedfishError::malformed_json("expected a JSON object"));
            }
            Ok(Action::EjectMedia {
                owner,
                system,
                slot,
            })
        }
        Resource::Sessions => {
            let obj = require_object(body)?;
            let user = string_prop(&obj, "UserName")?;
            let password = string_prop(&obj, "Password")?;
            Ok(Action::CreateSession { user, password })
        }
        _ => Err(RedfishError::internal()),
    }
}

/// Checks the content type and parses the body; `None` for an empty body.
fn json_body(content_type: Option<&str>, body: &[u8]) -> Result<Option<Value>, RedfishError> {
    if body.len() > MAX_BODY {
        return Err(RedfishError::payload_too_large(MAX_BODY));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let ct = content_type.unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if !mime.eq_ignore_ascii_case("application/json") {
        return Err(RedfishError::unsupported_media_type(if ct.is_empty() {
            "(none)"
        } else {
            ct
        }));
    }
    serde_json::from_slice(body).map(Some).map_err(|e| {
        RedfishError::malformed_json(&format!("line {} column {}", e.line(), e.column()))
    })
}

fn require_object(body: Option<Value>) -> Result<Map<String, Value>, RedfishError> {
    match body {
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(RedfishError::malformed_json("expected a JSON object")),
        None => Err(RedfishError::malformed_json("the request body is empty")),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 64 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(60).map(|(i, _)| i).unwrap_or(s.len())]
        )
    } else {
        s
    }
}

fn string_prop(obj: &Map<String, Value>, name: &str) -> Result<String, RedfishError> {
    match obj.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(RedfishError::property_type(name, &short(v))),
        None => Err(RedfishError::property_missing(name)),
    }
}

fn enum_prop<T>(
    obj: &Map<String, Value>,
    name: &str,
    parse: fn(&str) -> Option<T>,
) -> Result<Option<T>, RedfishError> {
    match obj.get(name) {
        None => Ok(None),
        Some(Value::String(s)) => parse(s)
            .map(Some)
            .ok_or_else(|| RedfishError::value_not_in_list(name, s)),
        Some(v) => Err(RedfishError::property_type(name, &short(v))),
    }
}

fn boot_patch(obj: &Map<String, Value>) -> Result<BootPatch, RedfishError> {
    for k in obj.keys() {
        if k != "Boot" && !k.starts_with('@') {
            return Err(RedfishError::property_not_writable(k));
        }
    }
    let boot = match obj.get("Boot") {
        Some(Value::Object(b)) => b,
        Some(v) => return Err(RedfishError::property_type("Boot", &short(v))),
        None => return Err(RedfishError::property_missing("Boot")),
    };
    // UEFI HTTP boot is refused with its reason rather than as an unknown value.
    if boot.get("BootSourceOverrideTarget").and_then(Value::as_str) == Some("UefiHttp") {
        return Err(RedfishError::uefi_http_unsupported(
            "Boot/BootSourceOverrideTarget",
            "UefiHttp",
        ));
    }
    if let Some(uri) = boot.get("HttpBootUri").filter(|v| !v.is_null()) {
        return Err(RedfishError::uefi_http_unsupported(
            "Boot/HttpBootUri",
            &short(uri),
        ));
    }
    const WRITABLE: [&str; 3] = [
        "BootSourceOverrideTarget",
        "BootSourceOverrideEnabled",
        "BootSourceOverrideMode",
    ];
    for k in boot.keys() {
        // a null HttpBootUri clears what was never set
        if k == "HttpBootUri" {
            continue;
        }
        if !WRITABLE.contains(&k.as_str()) && !k.starts_with('@') {
            return Err(RedfishError::property_not_writable(&format!("Boot/{k}")));
        }
    }
    let patch = BootPatch {
        target: enum_prop(boot, "BootSourceOverrideTarget", BootTarget::parse)?,
        enabled: enum_prop(boot, "BootSourceOverrideEnabled", BootEnabled::parse)?,
        mode: enum_prop(boot, "BootSourceOverrideMode", BootMode::parse)?,
    };
    if patch.is_empty() {
        return Err(RedfishError::property_missing(
            "Boot/BootSourceOverrideTarget",
        ));
    }
    Ok(patch)
}

/// `{"SecureBootEnable": bool}`, the only writable property of SecureBoot.
fn secure_boot_patch(obj: &Map<String, Value>) -> Result<bool, RedfishError> {
    for k in obj.keys() {
        if k != "SecureBootEnable" && !k.starts_with('@') {
            return Err(RedfishError::property_not_writable(k));
        }
    }
    match obj.get("SecureBootEnable") {
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(RedfishError::property_type("SecureBootEnable", &short(v))),
        None => Err(RedfishError::property_missing("SecureBootEnable")),
    }
}

fn reset_type(obj: &Map<String, Value>) -> Result<ResetType, RedfishError> {
    const ACTION: &str = "ComputerSystem.Reset";
    for k in obj.keys() {
        if k != "ResetType" && !k.starts_with('@') {
            return Err(RedfishError::action_parameter_unknown(ACTION, k));
        }
    }
    match obj.get("ResetType") {
        Some(Value::String(s)) => ResetType::parse(s)
            .ok_or_else(|| RedfishError::action_parameter_not_supported(ACTION, "ResetType", s)),
        Some(v) => Err(RedfishError::property_type("ResetType", &short(v))),
        None => Err(RedfishError::action_parameter_missing(ACTION, "ResetType")),
    }
}

fn media_slot(slot: &str) -> Result<MediaSlot, RedfishError> {
    MediaSlot::parse(slot).ok_or_else(|| RedfishError::not_found(slot))
}

/// Validates an image URL: http or https, a host, no credentials, no spaces.
pub fn validate_image_url(url: &str) -> Result<(), String> {
    if url.len() > MAX_URL {
        return Err(format!("longer than {MAX_URL} characters"));
    }
    let (scheme, rest) = url.split_once("://").ok_or("not an absolute URL")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!("scheme '{scheme}' is not http or https"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("contains whitespace".to_string());
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err("credentials in the URL are not supported".to_string());
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Err("no host".to_string());
    }
    Ok(())
}

fn insert_request(obj: &Map<String, Value>) -> Result<InsertRequest, RedfishError> {
    const ACTION: &str = "VirtualMedia.InsertMedia";
    const KNOWN: [&str; 5] = [
        "Image",
        "Inserted",
        "WriteProtected",
        "TransferProtocolType",
        "TransferMethod",
    ];
    for k in obj.keys() {
        if k == "UserName" || k == "Password" {
            return Err(RedfishError::action_parameter_not_supported(
                ACTION,
                k,
                "(credentials)",
            ));
        }
        if !KNOWN.contains(&k.as_str()) && !k.starts_with('@') {
            return Err(RedfishError::action_parameter_unknown(ACTION, k));
        }
    }
    let image = match obj.get("Image") {
        Some(Value::String(s)) => s.clone(),
        Some(v) => return Err(RedfishError::property_type("Image", &short(v))),
        None => return Err(RedfishError::action_parameter_missing(ACTION, "Image")),
    };
    validate_image_url(&image)
        .map_err(|why| RedfishError::action_parameter_format(ACTION, "Image", &image, &why))?;
    let flag = |name: &str| match obj.get(name) {
        None => Ok(true),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(RedfishError::property_type(name, &short(v))),
    };
    let inserted = flag("Inserted")?;
    let write_protected = flag("WriteProtected")?;
    if !inserted {
        return Err(RedfishError::action_parameter_not_supported(
            ACTION, "Inserted", "false",
        ));
    }
    if !write_protected {
        return Err(RedfishError::action_parameter_not_supported(
            ACTION,
            "WriteProtected",
            "false",
        ));
    }
    if let Some(v) = obj.get("TransferProtocolType") {
        let scheme = image.split("://").next().unwrap_or("").to_ascii_uppercase();
        match v {
            Value::String(s) if s.eq_ignore_ascii_case(&scheme) => {}
            _ => {
                return Err(RedfishError::action_parameter_not_supported(
                    ACTION,
                    "TransferProtocolType",
                    &short(v),
                ))
            }
        }
    }
    match obj.get("TransferMethod") {
        None => {}
        Some(Value::String(s)) if s == "Stream" || s == "Upload" => {}
        Some(v) => {
            return Err(RedfishError::action_parameter_not_supported(
                ACTION,
                "TransferMethod",
                &short(v),
            ))
        }
    }
    Ok(InsertRequest {
        image,
        inserted,
        write_protected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: Option<&str> = Some("application/json");
    const SYS: &str = "/redfish/v1/Systems/8a1b";

    fn status(r: Result<Action, RedfishError>) -> (u16, &'static str) {
        let e = r.unwrap_err();
        (e.status, e.message_id)
    }

    #[test]
    fn routes_every_resource() {
        let cases = [
            ("/redfish", Resource::Redfish),
            ("/redfish/v1", Resource::ServiceRoot),
            ("/redfish/v1/", Resource::ServiceRoot),
            ("/redfish/v1/$metadata", Resource::Metadata),
            ("/redfish/v1/odata", Resource::OData),
            ("/redfish/v1/Systems", Resource::Systems),
            (SYS, Resource::System("8a1b".into())),
            ("/redfish/v1/Systems/8a1b/", Resource::System("8a1b".into())),
            (
                "/redfish/v1/Systems/8a1b/Actions/ComputerSystem.Reset",
                Resource::Reset("8a1b".into()),
            ),
            (
                "/redfish/v1/Systems/8a1b/EthernetInterfaces/1",
                Resource::EthernetInterface("8a1b".into(), "1".into()),
            ),
            (
                "/redfish/v1/Systems/8a1b/SimpleStorage/1",
                Resource::SimpleStorage("8a1b".into(), "1".into()),
            ),
            (
                "/redfish/v1/Managers/8a1b/VirtualMedia/Cd",
                Resource::VirtualMedia(MediaOwner::Manager, "8a1b".into(), "Cd".into()),
            ),
            (
                "/redfish/v1/Systems/8a1b/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia",
                Resource::EjectMedia(MediaOwner::System, "8a1b".into(), "Cd".into()),
            ),
            (
                "/redfish/v1/SessionService/Sessions/abc",
                Resource::Session("abc".into()),
            ),
        ];
        for (path, want) in cases {
            assert_eq!(Resource::from_path(path), Some(want), "{path}");
        }
        for bad in [
            "/",
            "/redfish/v2",
            "/redfish/v1/Systems//x",
            "/redfish/v1/Nope",
            "/redfish/v1x",
        ] {
            assert_eq!(Resource::from_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn auth_is_needed_except_for_root_and_login() {
        assert!(!Resource::ServiceRoot.requires_auth("GET"));
        assert!(!Resource::Sessions.requires_auth("POST"));
        assert!(Resource::Sessions.requires_auth("GET"));
        assert!(Resource::Systems.requires_auth("GET"));
        assert!(Resource::SessionService.requires_auth("GET"));
    }

    #[test]
    fn unknown_path_is_404_and_wrong_method_is_405() {
        assert_eq!(
            status(parse("GET", "/redfish/v1/Chassis/x/y/z", None, b"")),
            (404, "ResourceMissingAtURI")
        );
        let e = parse("DELETE", SYS, None, b"").unwrap_err();
        assert_eq!(e.status, 405);
        assert!(e
            .headers
            .iter()
            .any(|(k, v)| *k == "Allow" && v.contains("PATCH")));
        assert_eq!(
            status(parse(
                "GET",
                "/redfish/v1/Systems/x/Actions/ComputerSystem.Reset",
                None,
                b""
            ))
            .0,
            405
        );
    }

    #[test]
    fn get_and_head_are_plain_reads() {
        assert_eq!(
            parse("GET", SYS, None, b"").unwrap(),
            Action::Get(Resource::System("8a1b".into()))
        );
        assert_eq!(
            parse("HEAD", "/redfish/v1/Systems", None, b"").unwrap(),
            Action::Get(Resource::Systems)
        );
    }

    #[test]
    fn routes_the_inspection_resources() {
        let cases = [
            (
                "/redfish/v1/Systems/8a1b/Processors",
                Resource::Processors("8a1b".into()),
            ),
            (
                "/redfish/v1/Systems/8a1b/Processors/CPU0",
                Resource::Processor("8a1b".into(), "CPU0".into()),
            ),
            (
                "/redfish/v1/Systems/8a1b/Storage",
                Resource::Storages("8a1b".into()),
            ),
            (
                "/redfish/v1/Systems/8a1b/Storage/1/Drives/vda",
                Resource::Drive("8a1b".into(), "1".into(), "vda".into()),
            ),
            (
                "/redfish/v1/Systems/8a1b/Bios",
                Resource::Bios("8a1b".into()),
            ),
            (
                "/redfish/v1/Systems/8a1b/SecureBoot",
                Resource::SecureBoot("8a1b".into()),
            ),
            ("/redfish/v1/Chassis", Resource::ChassisCollection),
            ("/redfish/v1/Chassis/8a1b", Resource::Chassis("8a1b".into())),
        ];
        for (path, want) in cases {
            assert_eq!(Resource::from_path(path).as_ref(), Some(&want), "{path}");
            assert!(want.requires_auth("GET"), "{path}");
        }
        assert_eq!(Resource::Chassis("c".into()).system(), Some("c"));
        // BIOS attributes are read-only: no PATCH
        let e = parse("PATCH", "/redfish/v1/Systems/8a1b/Bios", JSON, b"{}").unwrap_err();
        assert_eq!(e.status, 405);
        assert_eq!(
            status(parse(
                "PATCH",
                "/redfish/v1/Systems/8a1b/Bios/Settings",
                JSON,
                b"{}"
            ))
            .0,
            404
        );
    }

    #[test]
    fn secure_boot_patch_takes_secure_boot_enable_only() {
        let path = "/redfish/v1/Systems/8a1b/SecureBoot";
        assert_eq!(
            parse("PATCH", path, JSON, br#"{"SecureBootEnable":true}"#).unwrap(),
            Action::PatchSecureBoot {
                system: "8a1b".into(),
                enable: true
            }
        );
        assert_eq!(
            status(parse("PATCH", path, JSON, br#"{"SecureBootEnable":"yes"}"#)),
            (400, "PropertyValueTypeError")
        );
        assert_eq!(
            status(parse(
                "PATCH",
                path,
                JSON,
                br#"{"SecureBootMode":"SetupMode"}"#
            )),
            (400, "PropertyNotWritable")
        );
        assert_eq!(
            status(parse("PATCH", path, JSON, b"{}")),
            (400, "PropertyMissing")
        );
    }

    #[test]
    fn uefi_http_boot_is_refused_saying_why() {
        for body in [
            r#"{"Boot":{"BootSourceOverrideTarget":"UefiHttp","BootSourceOverrideEnabled":"Once"}}"#,
            r#"{"Boot":{"BootSourceOverrideTarget":"UefiHttp","HttpBootUri":"https://h/a.iso"}}"#,
            r#"{"Boot":{"HttpBootUri":"https://h/a.iso"}}"#,
        ] {
            let e = parse("PATCH", SYS, JSON, body.as_bytes()).unwrap_err();
            assert_eq!(e.status, 400, "{body}");
            assert!(
                e.message.contains("boots images only as virtual media"),
                "{}",
                e.message
            );
            assert!(e.message.contains("InsertMedia"), "{}", e.message);
        }
        // clearing a URI that was never set is a no-op beside the rest
        assert!(parse(
            "PATCH",
            SYS,
            JSON,
            br#"{"Boot":{"BootSourceOverrideTarget":"Cd","HttpBootUri":null}}"#
        )
        .is_ok());
        assert!(!BootTarget::allowable().contains(&"UefiHttp"));
    }

    #[test]
    fn reset_parses_every_type_and_refuses_others() {
        let path = "/redfish/v1/Systems/8a1b/Actions/ComputerSystem.Reset";
        for r in ResetType::ALL {
            let body = format!("{{\"ResetType\":\"{r}\"}}");
            assert_eq!(
                parse("POST", path, JSON, body.as_bytes()).unwrap(),
                Action::Reset {
                    system: "8a1b".into(),
                    reset: *r
                }
            );
        }
        assert_eq!(
            status(parse("POST", path, JSON, br#"{"ResetType":"PowerCycle"}"#)),
            (400, "ActionParameterNotSupported")
        );
        assert_eq!(
            status(parse("POST", path, JSON, br#"{"ResetType":3}"#)),
            (400, "PropertyValueTypeError")
        );
        assert_eq!(
            status(parse("POST", path, JSON, br#"{}"#)),
            (400, "ActionParameterMissing")
        );
        assert_eq!(
            status(parse("POST", path, JSON, br#"{"ResetType":"On","X":1}"#)),
            (400, "ActionParameterUnknown")
        );
        assert_eq!(
            status(parse("POST", path, JSON, br#"{"ResetType":"#)),
            (400, "MalformedJSON")
        );
        assert_eq!(
            status(parse("POST", path, JSON, b"")),
            (400, "MalformedJSON")
        );
        assert_eq!(
            status(parse("POST", path, JSON, b"[1]")),
            (400, "MalformedJSON")
        );
        assert_eq!(
            status(parse(
                "POST",
                path,
                Some("text/plain"),
                br#"{"ResetType":"On"}"#
            ))
            .0,
            415
        );
        assert_eq!(
            status(parse("POST", path, None, br#"{"ResetType":"On"}"#)).0,
            415
        );
        assert!(parse(
            "POST",
            path,
            Some("application/json; charset=utf-8"),
            br#"{"ResetType":"On"}"#
        )
        .is_ok());
        let big = vec![b' '; MAX_BODY + 1];
        assert_eq!(status(parse("POST", path, JSON, &big)).0, 413);
    }

    #[test]
    fn boot_patch_takes_any_subset_and_validates_values() {
        let ok = |b: &str| match parse("PATCH", SYS, JSON, b.as_bytes()).unwrap() {
            Action::PatchBoot { patch, .. } => patch,
            a => panic!("{a:?}"),
        };
        assert_eq!(
            ok(r#"{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}"#),
            BootPatch {
                target: Some(BootTarget::Cd),
                enabled: Some(BootEnabled::Once),
                mode: None
            }
        );
        assert_eq!(
            ok(r#"{"Boot":{"BootSourceOverrideMode":"UEFI"}}"#),
            BootPatch {
                mode: Some(BootMode::UEFI),
                ..Default::default()
            }
        );
        assert_eq!(
            status(parse(
                "PATCH",
                SYS,
                JSON,
                br#"{"Boot":{"BootSourceOverrideTarget":"Floppy"}}"#
            )),
            (400, "PropertyValueNotInList")
        );
        assert_eq!(
            status(parse(
                "PATCH",
                SYS,
                JSON,
                br#"{"Boot":{"BootSourceOverrideMode":"uefi"}}"#
            )),
            (400, "PropertyValueNotInList")
        );
        assert_eq!(
            status(parse("PATCH", SYS, JSON, br#"{"Boot":{}}"#)),
            (400, "PropertyMissing")
        );
        assert_eq!(
            status(parse("PATCH", SYS, JSON, br#"{"AssetTag":"x"}"#)),
            (400, "PropertyNotWritable")
        );
        assert_eq!(
            status(parse("PATCH", SYS, JSON, br#"{"Boot":{"BootOrder":[]}}"#)),
            (400, "PropertyNotWritable")
        );
        assert_eq!(
            status(parse("PATCH", SYS, JSON, br#"{"Boot":"Cd"}"#)),
            (400, "PropertyValueTypeError")
        );
    }

    #[test]
    fn insert_media_validates_the_image() {
        let path = "/redfish/v1/Managers/8a1b/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia";
        let a = parse(
            "POST",
            path,
            JSON,
            br#"{"Image":"http://127.0.0.1:8080/a.iso","Inserted":true,"WriteProtected":true}"#,
        )
        .unwrap();
        assert_eq!(
            a,
            Action::InsertMedia {
                owner: MediaOwner::Manager,
                system: "8a1b".into(),
                slot: MediaSlot::Cd,
                request: InsertRequest {
                    image: "http://127.0.0.1:8080/a.iso".into(),
                    inserted: true,
                    write_protected: true
                },
            }
        );
        for bad in [
            r#"{"Image":"ftp://h/a.iso"}"#,
            r#"{"Image":"file:///etc/passwd"}"#,
            r#"{"Image":"/tmp/a.iso"}"#,
            r#"{"Image":"http:///a.iso"}"#,
            r#"{"Image":"http://u:p@h/a.iso"}"#,
            r#"{"Image":"http://h/a b.iso"}"#,
        ] {
            assert_eq!(
                status(parse("POST", path, JSON, bad.as_bytes())),
                (400, "ActionParameterValueFormatError"),
                "{bad}"
            );
        }
        assert_eq!(
            status(parse("POST", path, JSON, br#"{}"#)),
            (400, "ActionParameterMissing")
        );
        assert_eq!(
            status(parse(
                "POST",
                path,
                JSON,
                br#"{"Image":"http://h/a","WriteProtected":false}"#
            ))
            .0,
            400
        );
        assert_eq!(
            status(parse(
                "POST",
                path,
                JSON,
                br#"{"Image":"http://h/a","TransferProtocolType":"HTTPS"}"#
            ))
            .0,
            400
        );
        assert!(parse(
            "POST",
            path,
            JSON,
            br#"{"Image":"https://h/a","TransferProtocolType":"HTTPS"}"#
        )
        .is_ok());
        assert_eq!(
            status(parse(
                "POST",
                path,
                JSON,
                br#"{"Image":"http://h/a","UserName":"x"}"#
            ))
            .0,
            400
        );
        let floppy =
            "/redfish/v1/Managers/8a1b/VirtualMedia/Floppy/Actions/VirtualMedia.InsertMedia";
        assert_eq!(
            status(parse("POST", floppy, JSON, br#"{"Image":"http://h/a"}"#)).0,
            404
        );
    }

    #[test]
    fn eject_accepts_no_body_or_an_empty_object() {
        let path = "/redfish/v1/Systems/8a1b/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia";
        let want = Action::EjectMedia {
            owner: MediaOwner::System,
            system: "8a1b".into(),
            slot: MediaSlot::Cd,
        };
        assert_eq!(parse("POST", path, None, b"").unwrap(), want);
        assert_eq!(parse("POST", path, JSON, b"{}").unwrap(), want);
        assert_eq!(
            status(parse("POST", path, JSON, br#"{"Image":"x"}"#)).0,
            400
        );
    }

    #[test]
    fn sessions_need_user_and_password() {
        let path = "/redfish/v1/SessionService/Sessions";
        assert_eq!(
            parse(
                "POST",
                path,
                JSON,
                br#"{"UserName":"admin","Password":"pw"}"#
            )
            .unwrap(),
            Action::CreateSession {
                user: "admin".into(),
                password: "pw".into()
            }
        );
        assert_eq!(
            status(parse("POST", path, JSON, br#"{"UserName":"admin"}"#)),
            (400, "PropertyMissing")
        );
        assert_eq!(
            parse("DELETE", "/redfish/v1/SessionService/Sessions/7", None, b"").unwrap(),
            Action::DeleteSession("7".into())
        );
    }
}
