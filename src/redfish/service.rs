//! The Redfish service: routes, authenticates and executes a request over a
//! [`Machine`]. Independent of the HTTP library; `server` adapts it.
//!
//! A request is served one of two ways. [`Service::handle_in_memory`] answers
//! whatever needs no backend call (the fixed resources, and GETs of a system
//! the machine holds in memory, see [`Machine::peek`]) without blocking, so the
//! HTTP layer can answer it on its event loop; a System body is rendered once
//! per state of the system and then served as shared bytes. Everything else
//! goes to [`Service::handle`], which may block on the machine.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::Value;

use super::auth::{Auth, Principal};
use super::error::RedfishError;
use super::inserts::Inserts;
use super::machine::{Machine, MachineError};
use super::model::SystemInfo;
use super::request::{self, Action, Resource, MAX_ANONYMOUS_BODY, MAX_BODY};
use super::resources as res;

/// A request as the service sees it.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub method: String,
    /// Path and optional query string.
    pub target: String,
    pub content_type: Option<String>,
    pub authorization: Option<String>,
    pub auth_token: Option<String>,
    pub body: Vec<u8>,
}

/// A response: status, headers, body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl Response {
    fn json(status: u16, v: &Value) -> Response {
        Response::json_bytes(status, serde_json::to_vec(v).unwrap_or_default().into())
    }

    fn json_bytes(status: u16, body: Bytes) -> Response {
        Response {
            status,
            headers: vec![("Content-Type", "application/json; charset=utf-8".into())],
            body,
        }
    }

    fn empty(status: u16) -> Response {
        Response {
            status,
            headers: vec![],
            body: Bytes::new(),
        }
    }

    fn error(e: &RedfishError) -> Response {
        let mut r = Response::json(e.status, &e.body());
        r.headers.extend(e.headers.iter().cloned());
        r
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How a request may reach the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Any call, blocking included.
    Backend,
    /// Memory only ([`Machine::peek`]): anything else is [`Stop::Blocks`].
    Memory,
}

/// Why a request got no answer.
enum Stop {
    /// The answer is this error.
    Error(RedfishError),
    /// Only a blocking machine call can answer ([`Reach::Memory`]).
    Blocks,
}

impl From<RedfishError> for Stop {
    fn from(e: RedfishError) -> Self {
        Stop::Error(e)
    }
}

/// The service: a machine, credentials and a few constants.
pub struct Service<M: Machine + ?Sized> {
    machine: Arc<M>,
    auth: Auth,
    uuid: String,
    version: String,
    /// System bodies rendered from what [`Machine::peek`] handed out, by
    /// UUID; served while the machine hands out the same `Arc`.
    rendered: Mutex<HashMap<String, (Arc<SystemInfo>, Bytes)>>,
    inserts: Inserts,
}

impl<M: Machine + ?Sized> Service<M> {
    /// `uuid` is the service's own UUID (ServiceRoot `UUID`).
    pub fn new(machine: Arc<M>, auth: Auth, uuid: &str) -> Self {
        Service {
            machine,
            auth,
            uuid: uuid.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            rendered: Mutex::default(),
            inserts: Inserts::default(),
        }
    }

    pub fn machine(&self) -> &Arc<M> {
        &self.machine
    }

    /// InsertMedia calls waiting for a download to be free.
    pub fn inserts_waiting(&self) -> usize {
        self.inserts.waiting()
    }

    /// Admits a request from its method, target and credentials alone,
    /// before its body is read: the body cap for it ([`MAX_BODY`] once
    /// authenticated, [`MAX_ANONYMOUS_BODY`] on the routes that need no
    /// credentials), or the answer to send at once (401 for missing or wrong
    /// credentials, 404/405 for what no route takes). Never blocks.
    pub fn admit(&self, req: &Request) -> Result<usize, Response> {
        let path = req.target.split(['?', '#']).next().unwrap_or("");
        let refuse = |e: RedfishError| {
            self.finish(req, Err(Stop::Error(e)))
                .unwrap_or_else(|| Response::error(&RedfishError::internal()))
        };
        let resource = request::route(&req.method, path).map_err(refuse)?;
        if !resource.requires_auth(&req.method) {
            return Ok(MAX_ANONYMOUS_BODY);
        }
        self.auth
            .authenticate(req.authorization.as_deref(), req.auth_token.as_deref())
            .map_err(refuse)?;
        Ok(MAX_BODY)
    }

    /// Serves one request. Never panics on client input. May block on the
    /// machine: call it off an async event loop.
    pub fn handle(&self, req: &Request) -> Response {
        self.finish(req, self.try_handle(req, Reach::Backend))
            .unwrap_or_else(|| {
                // Reach::Backend never stops for Blocks
                Response::error(&RedfishError::internal())
            })
    }

    /// Serves the request if that takes no blocking machine call (the same
    /// answer [`Service::handle`] would give); `None` otherwise, then call
    /// `handle`. Never blocks: safe on an async event loop.
    pub fn handle_in_memory(&self, req: &Request) -> Option<Response> {
        if req.method != "GET" && req.method != "HEAD" {
            return None;
        }
        self.finish(req, self.try_handle(req, Reach::Memory))
    }

    fn finish(&self, req: &Request, outcome: Result<Response, Stop>) -> Option<Response> {
        let mut resp = match outcome {
            Ok(r) => r,
            Err(Stop::Error(e)) => Response::error(&e),
            Err(Stop::Blocks) => return None,
        };
        resp.headers.push(("OData-Version", "4.0".into()));
        resp.headers.push(("Cache-Control", "no-store".into()));
        if req.method == "HEAD" {
            resp.body.clear();
        }
        Some(resp)
    }

    fn try_handle(&self, req: &Request, reach: Reach) -> Result<Response, Stop> {
        let path = req.target.split(['?', '#']).next().unwrap_or("");
        let resource = request::route(&req.method, path)?;
        let principal = if resource.requires_auth(&req.method) {
            Some(
                self.auth
                    .authenticate(req.authorization.as_deref(), req.auth_token.as_deref())?,
            )
        } else {
            None
        };
        let action = request::action(
            &req.method,
            resource,
            req.content_type.as_deref(),
            &req.body,
        )?;
        // A system named rather than addressed by UUID: redirect to its UUID URL.
        if let Some(id) = action_system(&action) {
            if reach == Reach::Memory {
                // peek answers for the canonical UUID only: no redirect.
                if self.machine.peek(id).is_none() {
                    return Err(Stop::Blocks);
                }
            } else {
                let sys = self
                    .machine
                    .resolve(id)
                    .map_err(|e| machine_error(e, path))?;
                if sys.uuid != id {
                    let location = redirect_target(&req.target, id, &sys.uuid);
                    let mut r = Response::empty(307);
                    r.headers.push(("Location", location));
                    return Ok(r);
                }
            }
        }
        self.execute(action, path, principal, reach)
    }

    fn execute(
        &self,
        action: Action,
        path: &str,
        principal: Option<Principal>,
        reach: Reach,
    ) -> Result<Response, Stop> {
        // Who asked, for the log lines of the actions that change a machine (a
        // BMC's audit trail): the Basic user or the session's.
        let user = match &principal {
            Some(Principal::Basic { user }) | Some(Principal::Session { user, .. }) => user.clone(),
            None => "-".to_string(),
        };
        let m = |e| Stop::Error(machine_error(e, path));
        let ok = |v: Value| Ok(Response::json(200, &v));
        let not_found = || Err(Stop::Error(RedfishError::not_found(path)));
        let backend = || {
            if reach == Reach::Memory {
                Err(Stop::Blocks)
            } else {
                Ok(())
            }
        };
        match action {
            Action::Get(resource) => match resource {
                Resource::Redfish => ok(res::redfish()),
                Resource::ServiceRoot => ok(res::service_root(&self.uuid, &self.version)),
                Resource::Metadata => Ok(Response {
                    status: 200,
                    headers: vec![("Content-Type", "application/xml".into())],
                    body: res::metadata().into(),
                }),
                Resource::OData => ok(res::odata()),
                Resource::Systems => {
                    backend()?;
                    ok(res::systems(&self.machine.list().map_err(m)?))
                }
                Resource::Managers => {
                    backend()?;
                    ok(res::managers(&self.machine.list().map_err(m)?))
                }
                Resource::SessionService => {
                    ok(res::session_service(self.auth.idle_timeout().as_secs()))
                }
                Resource::Sessions => {
                    let ids: Vec<String> = self.auth.list().into_iter().map(|(i, _)| i).collect();
                    ok(res::sessions(&ids))
                }
                Resource::Session(id) => match self.auth.session_user(&id) {
                    Some(user) => ok(res::session(&id, &user)),
                    None => not_found(),
                },
                Resource::System(id) => self.system_body(&id, path, reach),
                Resource::Manager(id) => {
                    ok(res::manager(&*self.info(&id, path, reach)?, &self.version))
                }
                Resource::EthernetInterfaces(id) => {
                    ok(res::ethernet_interfaces(&*self.info(&id, path, reach)?))
                }
                Resource::EthernetInterface(id, nic) => {
                    res::ethernet_interface(&*self.info(&id, path, reach)?, &nic)
                        .map_or_else(not_found, ok)
                }
                Resource::SimpleStorages(id) => {
                    ok(res::simple_storages(&*self.info(&id, path, reach)?))
                }
                Resource::SimpleStorage(id, n) => {
                    res::simple_storage(&*self.info(&id, path, reach)?, &n)
                        .map_or_else(not_found, ok)
                }
                Resource::Processors(id) => ok(res::processors(&*self.info(&id, path, reach)?)),
                Resource::Processor(id, n) => {
                    res::processor(&*self.info(&id, path, reach)?, &n).map_or_else(not_found, ok)
                }
                Resource::Storages(id) => ok(res::storages(&*self.info(&id, path, reach)?)),
                Resource::Storage(id, n) => {
                    res::storage(&*self.info(&id, path, reach)?, &n).map_or_else(not_found, ok)
                }
                Resource::Drive(id, n, d) => {
                    res::drive(&*self.info(&id, path, reach)?, &n, &d).map_or_else(not_found, ok)
                }
                Resource::Bios(id) => ok(res::bios(&*self.info(&id, path, reach)?)),
                Resource::SecureBoot(id) => ok(res::secure_boot(&*self.info(&id, path, reach)?)),
                Resource::ChassisCollection => {
                    backend()?;
                    ok(res::chassis_collection(&self.machine.list().map_err(m)?))
                }
                Resource::Chassis(id) => ok(res::chassis(&*self.info(&id, path, reach)?)),
                Resource::VirtualMediaCollection(owner, id) => ok(res::virtual_media_collection(
                    owner,
                    &*self.info(&id, path, reach)?,
                )),
                Resource::VirtualMedia(owner, id, slot) => {
                    let info = self.info(&id, path, reach)?;
                    let media = info.media.iter().find(|x| x.slot.as_str() == slot);
                    media.map_or_else(not_found, |x| ok(res::virtual_media(owner, &info, x)))
                }
                Resource::Reset(_) | Resource::InsertMedia(..) | Resource::EjectMedia(..) => {
                    not_found()
                }
            },
            // Writes always reach the backend.
            _ if reach == Reach::Memory => Err(Stop::Blocks),
            Action::PatchBoot { system, patch } => {
                self.machine.set_boot(&system, patch).map_err(m)?;
                tracing::info!(system = %system, %user, "boot patched");
                ok(res::system(&*self.info(&system, path, reach)?))
            }
            Action::PatchSecureBoot { system, enable } => {
                // The firmware is the domain's definition's: a PATCH that
                // matches it is accepted, any other says why not.
                let info = self.info(&system, path, reach)?;
                if enable != info.secure_boot {
                    let why = if enable {
                        "the domain's firmware is not a secure-boot OVMF (define it with <os firmware='efi'> and <firmware><feature enabled='yes' name='secure-boot'/></firmware>, or a secure-boot loader)"
                    } else {
                        "the domain boots a secure-boot OVMF, which this BMC does not change (its libvirt definition sets the firmware)"
                    };
                    return Err(Stop::Error(RedfishError::secure_boot_fixed(enable, why)));
                }
                ok(res::secure_boot(&info))
            }
            Action::Reset { system, reset } => {
                self.machine.reset(&system, reset).map_err(m)?;
                tracing::info!(system = %system, reset = %reset, %user, "reset");
                Ok(Response::empty(204))
            }
            Action::InsertMedia {
                system,
                slot,
                request,
                ..
            } => {
                // held busy through the download, freed however it ends
                let _held = self.inserts.begin(&system, slot)?;
                if let Err(e) = self.machine.insert_media(&system, slot, &request) {
                    // The client's message names the cause (and the URL
                    // without user-info or query): the BMC's log says it too.
                    if let MachineError::BadRequest(why) | MachineError::Conflict(why) = &e {
                        tracing::warn!(system = %system, slot = %slot, %user, error = %why, "media insert failed");
                    }
                    return Err(m(e));
                }
                tracing::info!(system = %system, slot = %slot, %user, "media inserted");
                Ok(Response::empty(204))
            }
            Action::EjectMedia { system, slot, .. } => {
                self.machine.eject_media(&system, slot).map_err(m)?;
                tracing::info!(system = %system, slot = %slot, %user, "media ejected");
                Ok(Response::empty(204))
            }
            Action::CreateSession { user, password } => {
                let s = self.auth.login(&user, &password)?;
                let mut r = Response::json(201, &res::session(&s.id, &user));
                r.headers.push(("Location", res::session_path(&s.id)));
                r.headers.push(("X-Auth-Token", s.token));
                tracing::info!(session = %s.id, "session created");
                Ok(r)
            }
            Action::DeleteSession(id) => {
                if self.auth.logout(&id) {
                    tracing::info!(session = %id, by = ?principal.map(|p| matches!(p, Principal::Session { .. })), "session deleted");
                    Ok(Response::empty(204))
                } else {
                    not_found()
                }
            }
        }
    }

    fn info(&self, uuid: &str, path: &str, reach: Reach) -> Result<Arc<SystemInfo>, Stop> {
        match reach {
            Reach::Memory => self.machine.peek(uuid).ok_or(Stop::Blocks),
            Reach::Backend => self
                .machine
                .system(uuid)
                .map(Arc::new)
                .map_err(|e| Stop::Error(machine_error(e, path))),
        }
    }

    /// A System's body: from memory, rendered once per state of the system;
    /// else read and rendered.
    fn system_body(&self, uuid: &str, path: &str, reach: Reach) -> Result<Response, Stop> {
        let info = self.info(uuid, path, reach)?;
        if reach == Reach::Backend {
            return Ok(Response::json(200, &res::system(&info)));
        }
        let mut rendered = self.rendered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, body)) = rendered.get(uuid) {
            if Arc::ptr_eq(seen, &info) {
                return Ok(Response::json_bytes(200, body.clone()));
            }
        }
        let body = Bytes::from(serde_json::to_vec(&res::system(&info)).unwrap_or_default());
        // Forget bodies of states the machine no longer hands out (it holds
        // its current ones), so this map stays as small as the machine's.
        rendered.retain(|_, (seen, _)| Arc::strong_count(seen) > 1);
        rendered.insert(uuid.to_string(), (info, body.clone()));
        Ok(Response::json_bytes(200, body))
    }
}

fn action_system(a: &Action) -> Option<&str> {
    match a {
        Action::Get(r) => r.system(),
        Action::PatchBoot { system, .. }
        | Action::PatchSecureBoot { system, .. }
        | Action::Reset { system, .. }
        | Action::InsertMedia { system, .. }
        | Action::EjectMedia { system, .. } => Some(system),
        Action::CreateSession { .. } | Action::DeleteSession(_) => None,
    }
}

/// Replaces the system segment (`Systems/<name>` or `Managers/<name>`) by the UUID.
fn redirect_target(target: &str, name: &str, uuid: &str) -> String {
    for collection in ["/Systems/", "/Managers/", "/Chassis/"] {
        let needle = format!("{collection}{name}");
        if let Some(pos) = target.find(&needle) {
            let end = pos + needle.len();
            let rest = &target[end..];
            if rest.is_empty() || rest.starts_with(['/', '?']) {
                return format!("{}{collection}{uuid}{rest}", &target[..pos]);
            }
        }
    }
    target.to_string()
}

fn machine_error(e: MachineError, path: &str) -> RedfishError {
    match e {
        MachineError::NotFound => RedfishError::not_found(path),
        MachineError::Conflict(msg) => RedfishError::conflict(msg),
        MachineError::BadRequest(msg) => RedfishError::bad_request(msg),
        MachineError::Backend(err) => {
            tracing::error!(path, error = format!("{err:#}"), "machine operation failed");
            RedfishError::internal()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redfish::machine::{MemoryMachine, MemorySystem};
    use crate::redfish::model::*;
    use base64::Engine as _;
    use std::time::Duration;

    const UUID: &str = "7c4e1d9e-0c4b-4d0e-9a57-1b2c3d4e5f60";

    fn service() -> Service<MemoryMachine> {
        let m = MemoryMachine::new([MemorySystem::new(UUID, "lab1-master-0")]);
        Service::new(
            Arc::new(m),
            Auth::new("admin", "pw", Duration::from_secs(60)),
            "svc-uuid",
        )
    }

    fn basic() -> Option<String> {
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("admin:pw")
        ))
    }

    fn req(method: &str, target: &str, body: &str) -> Request {
        Request {
            method: method.into(),
            target: target.into(),
            content_type: Some("application/json".into()),
            authorization: basic(),
            auth_token: None,
            body: body.as_bytes().to_vec(),
        }
    }

    fn json(r: &Response) -> Value {
        serde_json::from_slice(&r.body).unwrap()
    }

    #[test]
    fn service_root_needs_no_auth_but_systems_do() {
        let s = service();
        let mut r = req("GET", "/redfish/v1/", "");
        r.authorization = None;
        let resp = s.handle(&r);
        assert_eq!(resp.status, 200);
        assert_eq!(json(&resp)["Systems"]["@odata.id"], "/redfish/v1/Systems");
        assert_eq!(resp.header("OData-Version"), Some("4.0"));
        r.target = "/redfish/v1/Systems".into();
        let resp = s.handle(&r);
        assert_eq!(resp.status, 401);
        assert!(resp.header("WWW-Authenticate").is_some());
        assert_eq!(json(&resp)["error"]["code"], "Base.1.8.NoValidSession");
    }

    #[test]
    fn name_redirects_to_uuid_with_307() {
        let s = service();
        let resp = s.handle(&req(
            "GET",
            "/redfish/v1/Systems/lab1-master-0/VirtualMedia?x=1",
            "",
        ));
        assert_eq!(resp.status, 307);
        assert_eq!(
            resp.header("Location"),
            Some(format!("/redfish/v1/Systems/{UUID}/VirtualMedia?x=1").as_str())
        );
        let resp = s.handle(&req("GET", "/redfish/v1/Systems/nope", ""));
        assert_eq!(resp.status, 404);
        assert_eq!(
            json(&resp)["error"]["code"],
            "Base.1.8.ResourceMissingAtURI"
        );
    }

    #[test]
    fn ironic_virtual_media_sequence() {
        let s = service();
        let sys = format!("/redfish/v1/Systems/{UUID}");
        let reset = format!("{sys}/Actions/ComputerSystem.Reset");
        let vm = format!("/redfish/v1/Managers/{UUID}/VirtualMedia/Cd");
        assert_eq!(
            s.handle(&req("POST", &reset, r#"{"ResetType":"ForceOff"}"#))
                .status,
            204
        );
        assert_eq!(
            s.handle(&req(
                "POST",
                &format!("{vm}/Actions/VirtualMedia.EjectMedia"),
                ""
            ))
            .status,
            204
        );
        let insert = format!("{vm}/Actions/VirtualMedia.InsertMedia");
        assert_eq!(
            s.handle(&req(
                "POST",
                &insert,
                r#"{"Image":"http://127.0.0.1/x.iso"}"#
            ))
            .status,
            204
        );
        assert_eq!(
            s.handle(&req(
                "POST",
                &insert,
                r#"{"Image":"http://127.0.0.1/x.iso"}"#
            ))
            .status,
            409
        );
        let resp = s.handle(&req(
            "PATCH",
            &sys,
            r#"{"Boot":{"BootSourceOverrideMode":"UEFI"}}"#,
        ));
        assert_eq!(resp.status, 200);
        let resp = s.handle(&req(
            "PATCH",
            &sys,
            r#"{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}"#,
        ));
        assert_eq!(json(&resp)["Boot"]["BootSourceOverrideEnabled"], "Once");
        assert_eq!(
            s.handle(&req("POST", &reset, r#"{"ResetType":"On"}"#))
                .status,
            204
        );
        let v = json(&s.handle(&req("GET", &sys, "")));
        assert_eq!(v["PowerState"], "On");
        assert_eq!(v["Boot"]["BootSourceOverrideTarget"], "Hdd");
        let media = json(&s.handle(&req("GET", &format!("{sys}/VirtualMedia/Cd"), "")));
        assert_eq!(media["Inserted"], true);
        assert_eq!(media["Image"], "http://127.0.0.1/x.iso");
        assert_eq!(s.machine().get(UUID).unwrap().boots, vec![BootTarget::Cd]);
    }

    #[test]
    fn inspection_resources_and_secure_boot_follow_the_system() {
        let s = service();
        let sys = format!("/redfish/v1/Systems/{UUID}");
        let get = |t: &str| s.handle(&req("GET", t, ""));
        for t in [
            format!("{sys}/Processors/CPU1"),
            format!("{sys}/Storage/1/Drives/vda"),
            format!("{sys}/Bios"),
            format!("/redfish/v1/Chassis/{UUID}"),
        ] {
            assert_eq!(get(&t).status, 200, "{t}");
        }
        assert_eq!(get(&format!("{sys}/Processors/CPU2")).status, 404);
        assert_eq!(
            json(&get("/redfish/v1/Chassis"))["Members"][0]["@odata.id"],
            format!("/redfish/v1/Chassis/{UUID}")
        );
        // a name redirects under Chassis too
        let r = get("/redfish/v1/Chassis/lab1-master-0");
        assert_eq!(r.status, 307);
        assert_eq!(
            r.header("Location"),
            Some(format!("/redfish/v1/Chassis/{UUID}").as_str())
        );
        // the memory machine's firmware is no secure-boot OVMF: enabling is refused
        let sb = format!("{sys}/SecureBoot");
        let r = s.handle(&req("PATCH", &sb, r#"{"SecureBootEnable":true}"#));
        assert_eq!(r.status, 400);
        let v = json(&r);
        let msg = v["error"]["@Message.ExtendedInfo"][0]["Message"]
            .as_str()
            .unwrap();
        assert!(msg.contains("not a secure-boot OVMF"), "{msg}");
        assert_eq!(json(&get(&sb))["SecureBootEnable"], false);
        // asking for what it is already is fine
        let r = s.handle(&req("PATCH", &sb, r#"{"SecureBootEnable":false}"#));
        assert_eq!(r.status, 200);
    }

    #[test]
    fn bad_requests_get_redfish_errors() {
        let s = service();
        let reset = format!("/redfish/v1/Systems/{UUID}/Actions/ComputerSystem.Reset");
        let cases: Vec<(Request, u16)> = vec![
            (req("POST", &reset, r#"{"ResetType":"Bogus"}"#), 400),
            (req("POST", &reset, r#"{"ResetType":"#), 400),
            (Request { content_type: Some("text/plain".into()), ..req("POST", &reset, r#"{"ResetType":"On"}"#) }, 415),
            (Request { authorization: None, ..req("POST", &reset, r#"{"ResetType":"On"}"#) }, 401),
            (req("POST", "/redfish/v1/Systems/nope/Actions/ComputerSystem.Reset", r#"{"ResetType":"On"}"#), 404),
            (req("POST", &reset, &" ".repeat(request::MAX_BODY + 1)), 413),
            (req("PUT", &reset, "{}"), 405),
            (req("POST", &format!("/redfish/v1/Systems/{UUID}/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"), r#"{"Image":"file:///etc/shadow"}"#), 400),
            (req("POST", &reset, r#"{"ResetType":"Nmi"}"#), 409),
            (req("PATCH", &format!("/redfish/v1/Systems/{UUID}"), r#"{"Boot":{"BootSourceOverrideTarget":"UefiHttp"}}"#), 400),
        ];
        for (r, want) in cases {
            let resp = s.handle(&r);
            assert_eq!(resp.status, want, "{} {}", r.method, r.target);
            let v = json(&resp);
            assert!(v["error"]["@Message.ExtendedInfo"].is_array(), "{v}");
        }
    }

    #[test]
    fn sessions_round_trip() {
        let s = service();
        let mut login = req(
            "POST",
            "/redfish/v1/SessionService/Sessions",
            r#"{"UserName":"admin","Password":"pw"}"#,
        );
        login.authorization = None;
        let resp = s.handle(&login);
        assert_eq!(resp.status, 201);
        let token = resp.header("X-Auth-Token").unwrap().to_string();
        let location = resp.header("Location").unwrap().to_string();
        let with_token = |m: &str, t: &str| Request {
            authorization: None,
            auth_token: Some(token.clone()),
            ..req(m, t, "")
        };
        assert_eq!(
            s.handle(&with_token("GET", "/redfish/v1/Systems")).status,
            200
        );
        assert_eq!(
            json(&s.handle(&with_token("GET", &location)))["UserName"],
            "admin"
        );
        assert_eq!(s.handle(&with_token("DELETE", &location)).status, 204);
        assert_eq!(
            s.handle(&with_token("GET", "/redfish/v1/Systems")).status,
            401
        );
        login.body = br#"{"UserName":"admin","Password":"no"}"#.to_vec();
        assert_eq!(s.handle(&login).status, 401);
    }

    #[test]
    fn head_has_no_body() {
        let s = service();
        let resp = s.handle(&req("HEAD", "/redfish/v1/Systems", ""));
        assert_eq!(resp.status, 200);
        assert!(resp.body.is_empty());
    }

    #[test]
    fn gets_of_a_system_in_memory_are_answered_without_the_backend() {
        let s = service();
        let sys = format!("/redfish/v1/Systems/{UUID}");
        let first = s.handle_in_memory(&req("GET", &sys, "")).unwrap();
        assert_eq!(first.status, 200);
        assert_eq!(first.header("OData-Version"), Some("4.0"));
        assert_eq!(first.body, s.handle(&req("GET", &sys, "")).body);
        assert_eq!(json(&first)["PowerState"], "Off");
        // rendered once while the system is unchanged: the same bytes
        let again = s.handle_in_memory(&req("GET", &sys, "")).unwrap();
        assert_eq!(again.body.as_ptr(), first.body.as_ptr());
        // a change shows in the next answer from memory
        let reset = format!("{sys}/Actions/ComputerSystem.Reset");
        assert!(s
            .handle_in_memory(&req("POST", &reset, r#"{"ResetType":"On"}"#))
            .is_none());
        assert_eq!(
            s.handle(&req("POST", &reset, r#"{"ResetType":"On"}"#))
                .status,
            204
        );
        let on = s.handle_in_memory(&req("GET", &sys, "")).unwrap();
        assert_eq!(json(&on)["PowerState"], "On");
        assert_eq!(
            s.rendered.lock().unwrap().len(),
            1,
            "old bodies are dropped"
        );
        // sub-resources, HEAD and refusals from memory too
        let media = s
            .handle_in_memory(&req("GET", &format!("{sys}/VirtualMedia/Cd"), ""))
            .unwrap();
        assert_eq!(json(&media)["Inserted"], false);
        let head = s.handle_in_memory(&req("HEAD", &sys, "")).unwrap();
        assert_eq!((head.status, head.body.len()), (200, 0));
        let mut anonymous = req("GET", &sys, "");
        anonymous.authorization = None;
        assert_eq!(s.handle_in_memory(&anonymous).unwrap().status, 401);
        assert_eq!(
            s.handle_in_memory(&req("GET", "/redfish/v1/nope", ""))
                .unwrap()
                .status,
            404
        );
    }

    #[test]
    fn what_needs_the_backend_is_left_to_handle() {
        let s = service();
        // a collection lists the backend; a name resolves through it (307)
        for target in ["/redfish/v1/Systems", "/redfish/v1/Systems/lab1-master-0"] {
            assert!(s.handle_in_memory(&req("GET", target, "")).is_none());
        }
        assert!(s
            .handle_in_memory(&req("GET", "/redfish/v1/Systems/nope", ""))
            .is_none());
        // a machine that keeps nothing in memory
        struct NoMemory(MemoryMachine);
        impl Machine for NoMemory {
            fn list(&self) -> Result<Vec<SystemRef>, MachineError> {
                self.0.list()
            }
            fn resolve(&self, id: &str) -> Result<SystemRef, MachineError> {
                self.0.resolve(id)
            }
            fn system(&self, uuid: &str) -> Result<SystemInfo, MachineError> {
                self.0.system(uuid)
            }
            fn reset(&self, uuid: &str, r: ResetType) -> Result<(), MachineError> {
                self.0.reset(uuid, r)
            }
            fn set_boot(&self, uuid: &str, p: BootPatch) -> Result<(), MachineError> {
                self.0.set_boot(uuid, p)
            }
            fn insert_media(
                &self,
                uuid: &str,
                slot: MediaSlot,
                r: &InsertRequest,
            ) -> Result<(), MachineError> {
                self.0.insert_media(uuid, slot, r)
            }
            fn eject_media(&self, uuid: &str, slot: MediaSlot) -> Result<(), MachineError> {
                self.0.eject_media(uuid, slot)
            }
        }
        let s = Service::new(
            Arc::new(NoMemory(MemoryMachine::new([MemorySystem::new(UUID, "n")]))),
            Auth::new("admin", "pw", Duration::from_secs(60)),
            "svc-uuid",
        );
        let sys = format!("/redfish/v1/Systems/{UUID}");
        assert!(s.handle_in_memory(&req("GET", &sys, "")).is_none());
        assert_eq!(s.handle(&req("GET", &sys, "")).status, 200);
        // the fixed resources need no machine at all
        assert_eq!(
            s.handle_in_memory(&req("GET", "/redfish/v1/", ""))
                .unwrap()
                .status,
            200
        );
    }
}
