//! The BMC over real HTTP and TLS on 127.0.0.1, over the in-memory machine.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
use shiftlab::redfish::auth::Auth;
use shiftlab::redfish::machine::{Machine, MachineError, MemoryMachine, MemorySystem};
use shiftlab::redfish::model::*;
use shiftlab::redfish::{tls, Server, Service};

const UUID: &str = "5b0d7c1e-8f43-4c8e-a1d2-3e4f5a6b7c8d";

/// The in-memory machine, with an insert that takes a while.
struct SlowInsert(MemoryMachine);

impl Machine for SlowInsert {
    fn list(&self) -> Result<Vec<SystemRef>, MachineError> {
        self.0.list()
    }
    fn resolve(&self, id: &str) -> Result<SystemRef, MachineError> {
        self.0.resolve(id)
    }
    fn system(&self, uuid: &str) -> Result<SystemInfo, MachineError> {
        self.0.system(uuid)
    }
    fn reset(&self, uuid: &str, reset: ResetType) -> Result<(), MachineError> {
        self.0.reset(uuid, reset)
    }
    fn set_boot(&self, uuid: &str, patch: BootPatch) -> Result<(), MachineError> {
        self.0.set_boot(uuid, patch)
    }
    fn insert_media(
        &self,
        uuid: &str,
        slot: MediaSlot,
        r: &InsertRequest,
    ) -> Result<(), MachineError> {
        std::thread::sleep(Duration::from_millis(1500));
        self.0.insert_media(uuid, slot, r)
    }
    fn eject_media(&self, uuid: &str, slot: MediaSlot) -> Result<(), MachineError> {
        self.0.eject_media(uuid, slot)
    }
}

fn service() -> Arc<Service<SlowInsert>> {
    let m = SlowInsert(MemoryMachine::new([MemorySystem::new(
        UUID,
        "lab1-worker-0",
    )]));
    Arc::new(Service::new(
        Arc::new(m),
        Auth::new("admin", "hunter2", Duration::from_secs(600)),
        "svc",
    ))
}

fn basic() -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("admin:hunter2")
    )
}

fn call(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    auth: Option<&str>,
    ct: Option<&str>,
    body: &str,
) -> (u16, Response) {
    let mut r = ureq::http::Request::builder().method(method).uri(url);
    if let Some(a) = auth {
        r = r.header("Authorization", a);
    }
    if let Some(c) = ct {
        r = r.header("Content-Type", c);
    }
    let res = if body.is_empty() && method != "POST" {
        agent.run(r.body(()).unwrap())
    } else {
        agent.run(r.body(body.to_string()).unwrap())
    };
    match res {
        Ok(resp) => (resp.status().as_u16(), resp),
        Err(e) => panic!("{method} {url}: {e}"),
    }
}

type Response = ureq::http::Response<ureq::Body>;

/// A client for the BMC on loopback: redirects not followed, statuses
/// returned as answers, no proxy from the environment.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into()
}

fn header<'a>(resp: &'a Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).and_then(|v| v.to_str().ok())
}

fn json(mut resp: Response) -> Value {
    serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn plain_http_end_to_end() {
    let rt = runtime();
    let server = rt
        .block_on(Server::start(
            "127.0.0.1:0".parse().unwrap(),
            None,
            service(),
        ))
        .unwrap();
    let base = format!("http://{}", server.local_addr());
    let agent = agent();
    let a = Some(basic());
    let a = a.as_deref();
    let j = Some("application/json");

    let (s, r) = call(
        &agent,
        "GET",
        &format!("{base}/redfish/v1/"),
        None,
        None,
        "",
    );
    assert_eq!(s, 200);
    assert_eq!(header(&r, "OData-Version"), Some("4.0"));
    assert_eq!(
        json(r)["Links"]["Sessions"]["@odata.id"],
        "/redfish/v1/SessionService/Sessions"
    );

    let (s, r) = call(
        &agent,
        "GET",
        &format!("{base}/redfish/v1/Systems"),
        a,
        None,
        "",
    );
    assert_eq!(s, 200);
    assert_eq!(
        json(r)["Members"][0]["@odata.id"],
        format!("/redfish/v1/Systems/{UUID}")
    );

    let (s, r) = call(
        &agent,
        "GET",
        &format!("{base}/redfish/v1/Systems/lab1-worker-0"),
        a,
        None,
        "",
    );
    assert_eq!(s, 307);
    assert_eq!(
        header(&r, "Location"),
        Some(format!("/redfish/v1/Systems/{UUID}").as_str())
    );

    // bad requests
    let reset = format!("{base}/redfish/v1/Systems/{UUID}/Actions/ComputerSystem.Reset");
    let wrong = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("admin:nope")
    );
    let cases = [
        ("GET", format!("{base}/redfish/v1/Systems/unknown"), a, None, "", 404),
        ("POST", reset.clone(), a, j, r#"{"ResetType":"Explode"}"#, 400),
        ("POST", reset.clone(), a, j, r#"{"ResetType":"#, 400),
        ("POST", reset.clone(), a, Some("application/x-www-form-urlencoded"), "ResetType=On", 415),
        ("POST", reset.clone(), None, j, r#"{"ResetType":"On"}"#, 401),
        ("POST", reset.clone(), Some(wrong.as_str()), j, r#"{"ResetType":"On"}"#, 401),
        ("DELETE", format!("{base}/redfish/v1/Systems"), a, None, "", 405),
        (
            "POST",
            format!("{base}/redfish/v1/Managers/{UUID}/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"),
            a,
            j,
            r#"{"Image":"nfs://h/x.iso"}"#,
            400,
        ),
    ];
    for (m, url, auth, ct, body, want) in cases {
        let (s, r) = call(&agent, m, &url, auth, ct, body);
        assert_eq!(s, want, "{m} {url} {body}");
        let v = json(r);
        assert!(
            v["error"]["@Message.ExtendedInfo"][0]["MessageId"].is_string(),
            "{v}"
        );
    }
    let big = format!(r#"{{"ResetType":"On","pad":"{}"}}"#, "x".repeat(100_000));
    let (s, _) = call(&agent, "POST", &reset, a, j, &big);
    assert_eq!(s, 413);

    // power and state read back
    assert_eq!(
        call(&agent, "POST", &reset, a, j, r#"{"ResetType":"On"}"#).0,
        204
    );
    let (_, r) = call(
        &agent,
        "GET",
        &format!("{base}/redfish/v1/Systems/{UUID}"),
        a,
        None,
        "",
    );
    assert_eq!(json(r)["PowerState"], "On");

    rt.block_on(server.shutdown());
}

#[test]
fn a_slow_insert_does_not_block_other_requests() {
    let rt = runtime();
    let server = rt
        .block_on(Server::start(
            "127.0.0.1:0".parse().unwrap(),
            None,
            service(),
        ))
        .unwrap();
    let base = format!("http://{}", server.local_addr());
    let insert = format!(
        "{base}/redfish/v1/Systems/{UUID}/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"
    );
    let t = std::thread::spawn(move || {
        let agent = agent();
        call(
            &agent,
            "POST",
            &insert,
            Some(&basic()),
            Some("application/json"),
            r#"{"Image":"http://127.0.0.1:1/x.iso"}"#,
        )
        .0
    });
    std::thread::sleep(Duration::from_millis(200));
    let agent = agent();
    let started = Instant::now();
    for _ in 0..20 {
        let (s, _) = call(
            &agent,
            "GET",
            &format!("{base}/redfish/v1/Systems/{UUID}"),
            Some(&basic()),
            None,
            "",
        );
        assert_eq!(s, 200);
    }
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "GETs waited for the insert"
    );
    assert_eq!(t.join().unwrap(), 204);
    rt.block_on(server.shutdown());
}

#[test]
fn tls_with_sessions_and_a_verified_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let material = tls::ensure(dir.path(), &["127.0.0.1".parse().unwrap()], &[]).unwrap();
    let cfg = tls::server_config(&material).unwrap();
    let rt = runtime();
    let server = rt
        .block_on(Server::start(
            "127.0.0.1:0".parse().unwrap(),
            Some(cfg),
            service(),
        ))
        .unwrap();
    let base = format!("https://127.0.0.1:{}", server.local_addr().port());

    // The client trusts only the exported CA and checks the IP SAN.
    let ca = std::fs::read(dir.path().join("ca.crt")).unwrap();
    let roots: Vec<_> = ureq::tls::parse_pem(&ca)
        .map(|item| match item.unwrap() {
            ureq::tls::PemItem::Certificate(c) => c,
            _ => panic!("ca.crt holds something else"),
        })
        .collect();
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
        .build();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();

    let (s, r) = call(
        &agent,
        "POST",
        &format!("{base}/redfish/v1/SessionService/Sessions"),
        None,
        Some("application/json"),
        r#"{"UserName":"admin","Password":"hunter2"}"#,
    );
    assert_eq!(s, 201);
    let token = header(&r, "X-Auth-Token").unwrap().to_string();
    let location = header(&r, "Location").unwrap().to_string();
    let get = |url: &str| match agent.get(url).header("X-Auth-Token", &token).call() {
        Ok(r) => r.status().as_u16(),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(get(&format!("{base}/redfish/v1/Systems/{UUID}")), 200);
    let del = agent
        .delete(&format!("{base}{location}"))
        .header("X-Auth-Token", &token)
        .call()
        .unwrap();
    assert_eq!(del.status().as_u16(), 204);
    assert_eq!(get(&format!("{base}/redfish/v1/Systems/{UUID}")), 401);

    // Plain HTTP to the TLS port gets nothing useful and the server survives it.
    let addr: SocketAddr = server.local_addr();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /redfish/v1/ HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    assert!(!String::from_utf8_lossy(&buf).contains("RedfishVersion"));
    assert_eq!(get(&format!("{base}/redfish/v1/")), 200);

    rt.block_on(server.shutdown());
}

/// Sends a request head whose body never comes and returns the status line
/// of the answer (empty if none arrived within 10 s).
fn head_only(addr: SocketAddr, head: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf).to_string();
    text.lines().next().unwrap_or("").to_string()
}

#[test]
fn credentials_are_checked_before_the_body_is_read() {
    let rt = runtime();
    let server = rt
        .block_on(Server::start(
            "127.0.0.1:0".parse().unwrap(),
            None,
            service(),
        ))
        .unwrap();
    let addr = server.local_addr();
    let reset = format!("/redfish/v1/Systems/{UUID}/Actions/ComputerSystem.Reset");
    let wrong = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("admin:nope")
    );
    // A 10 GB body declared and never sent, and one under the cap that never
    // comes: without (valid) credentials both are answered 401 at once.
    for (auth, length) in [
        (String::new(), 10_000_000_000u64),
        (String::new(), 1000),
        (format!("Authorization: {wrong}\r\n"), 1000),
        ("X-Auth-Token: forged\r\n".to_string(), 10_000_000_000),
    ] {
        let status = head_only(
            addr,
            &format!(
                "POST {reset} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
            ),
        );
        assert!(
            status.starts_with("HTTP/1.1 401"),
            "{auth} {length}: {status:?}"
        );
    }
    // The login needs no credentials, so its body is small: a larger one is refused unread.
    let status = head_only(
        addr,
        "POST /redfish/v1/SessionService/Sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
    );
    assert!(status.starts_with("HTTP/1.1 413"), "{status:?}");
    // A login of ordinary size still works.
    let agent = agent();
    let (s, _) = call(
        &agent,
        "POST",
        &format!("http://{addr}/redfish/v1/SessionService/Sessions"),
        None,
        Some("application/json"),
        r#"{"UserName":"admin","Password":"hunter2"}"#,
    );
    assert_eq!(s, 201);
    rt.block_on(server.shutdown());
}

/// The in-memory machine with an insert that waits until the test opens
/// the gate, counting the inserts that reached it (each would be a download)
/// and the most that ran at once.
struct GatedInsert {
    m: MemoryMachine,
    reached: std::sync::atomic::AtomicUsize,
    running: std::sync::Mutex<(usize, usize)>,
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl GatedInsert {
    fn open_gate(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl Machine for GatedInsert {
    fn list(&self) -> Result<Vec<SystemRef>, MachineError> {
        self.m.list()
    }
    fn resolve(&self, id: &str) -> Result<SystemRef, MachineError> {
        self.m.resolve(id)
    }
    fn system(&self, uuid: &str) -> Result<SystemInfo, MachineError> {
        self.m.system(uuid)
    }
    fn reset(&self, uuid: &str, reset: ResetType) -> Result<(), MachineError> {
        self.m.reset(uuid, reset)
    }
    fn set_boot(&self, uuid: &str, patch: BootPatch) -> Result<(), MachineError> {
        self.m.set_boot(uuid, patch)
    }
    fn insert_media(
        &self,
        uuid: &str,
        slot: MediaSlot,
        r: &InsertRequest,
    ) -> Result<(), MachineError> {
        self.reached
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        {
            let mut running = self.running.lock().unwrap();
            running.0 += 1;
            running.1 = running.1.max(running.0);
        }
        let open = self.open.lock().unwrap();
        let open = self
            .opened
            .wait_timeout_while(open, Duration::from_secs(30), |o| !*o)
            .unwrap();
        drop(open);
        self.running.lock().unwrap().0 -= 1;
        self.m.insert_media(uuid, slot, r)
    }
    fn eject_media(&self, uuid: &str, slot: MediaSlot) -> Result<(), MachineError> {
        self.m.eject_media(uuid, slot)
    }
}

fn uuid(i: usize) -> String {
    format!("5b0d7c1e-8f43-4c8e-a1d2-3e4f5a6b7c{i:02}")
}

#[test]
fn one_insert_per_slot_and_a_few_downloads_at_once() {
    let machine = Arc::new(GatedInsert {
        m: MemoryMachine::new((0..6).map(|i| MemorySystem::new(&uuid(i), &format!("n{i}")))),
        reached: Default::default(),
        running: Default::default(),
        open: Default::default(),
        opened: Default::default(),
    });
    let service = Arc::new(Service::new(
        machine.clone(),
        Auth::new("admin", "hunter2", Duration::from_secs(600)),
        "svc",
    ));
    let rt = runtime();
    let server = rt
        .block_on(Server::start(
            "127.0.0.1:0".parse().unwrap(),
            None,
            service.clone(),
        ))
        .unwrap();
    let base = format!("http://{}", server.local_addr());
    let insert = move |system: String| {
        let url = format!(
            "{base}/redfish/v1/Systems/{system}/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"
        );
        call(
            &agent(),
            "POST",
            &url,
            Some(&basic()),
            Some("application/json"),
            r#"{"Image":"http://192.0.2.1/x.iso"}"#,
        )
        .0
    };
    let reached = || machine.reached.load(std::sync::atomic::Ordering::SeqCst);
    let wait_until = |what: &str, f: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < deadline, "never saw: {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };

    // Six concurrent inserts into one slot: one reaches the machine (one
    // download), five are refused while it runs.
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..6 {
        let (tx, insert) = (tx.clone(), insert.clone());
        std::thread::spawn(move || tx.send(insert(uuid(0))).unwrap());
    }
    let mut refused = Vec::new();
    for _ in 0..5 {
        let status = rx.recv_timeout(Duration::from_secs(20));
        refused.push(status.expect("five answers while the first insert runs"));
    }
    assert_eq!(refused, vec![409; 5]);
    assert_eq!(reached(), 1);

    // Three more systems make four downloads; a fifth waits its turn
    // (Ironic inserts into every host at once and does not retry a POST).
    let mut pending = Vec::new();
    for i in 1..5 {
        if i == 4 {
            wait_until("four inserts running", &|| reached() == 4);
        }
        let insert = insert.clone();
        pending.push(std::thread::spawn(move || insert(uuid(i))));
    }
    wait_until("the fifth insert waiting", &|| {
        service.inserts_waiting() == 1
    });
    assert_eq!(reached(), 4);

    machine.open_gate();
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)).unwrap(), 204);
    for p in pending {
        assert_eq!(p.join().unwrap(), 204);
    }
    assert_eq!(
        machine.running.lock().unwrap().1,
        4,
        "most downloads at once"
    );
    assert_eq!(reached(), 5);
    // done: the slot is free again (the answer is the machine's: a medium is in)
    assert_eq!(insert(uuid(0)), 409);
    assert_eq!(reached(), 6);
    rt.block_on(server.shutdown());
}

/// SHIFTLAB_BMC_TRACE's trace over the wire: every request, the ones refused
/// from their headers too, with its status; the Authorization's scheme and
/// no credential; a session's password gone from its body; the file 0600.
#[test]
fn the_trace_records_requests_without_credentials() {
    use shiftlab::redfish::trace::Trace;
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let mut redactor = shiftlab::redact::Redactor::default();
    redactor.add("hunter2");
    let trace = Arc::new(Trace::open(&path, redactor).unwrap());
    let rt = runtime();
    let server = rt
        .block_on(Server::start_traced(
            "127.0.0.1:0".parse().unwrap(),
            None,
            service(),
            Some(trace),
        ))
        .unwrap();
    let base = format!("http://{}", server.local_addr());
    let agent = agent();
    let j = Some("application/json");
    let b = basic();
    let systems = format!("{base}/redfish/v1/Systems");
    assert_eq!(call(&agent, "GET", &systems, None, None, "").0, 401);
    assert_eq!(call(&agent, "GET", &systems, Some(&b), None, "").0, 200);
    let sessions = format!("{base}/redfish/v1/SessionService/Sessions");
    let login = r#"{"UserName":"admin","Password":"hunter2"}"#;
    let (s, r) = call(&agent, "POST", &sessions, None, j, login);
    assert_eq!(s, 201);
    let token = header(&r, "X-Auth-Token").unwrap().to_string();
    let reset = format!("{base}/redfish/v1/Systems/{UUID}/Actions/ComputerSystem.Reset");
    let req = ureq::http::Request::builder()
        .method("POST")
        .uri(&reset)
        .header("X-Auth-Token", &token)
        .header("Content-Type", "application/json")
        .header("OData-Version", "4.0")
        .body(r#"{"ResetType":"On"}"#.to_string())
        .unwrap();
    assert_eq!(agent.run(req).unwrap().status().as_u16(), 204);
    rt.block_on(server.shutdown());

    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&path).unwrap();
    let basic_credentials = b.split_whitespace().nth(1).unwrap();
    for secret in ["hunter2", basic_credentials, token.as_str()] {
        assert!(!text.contains(secret), "a credential in the trace: {text}");
    }
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(String, String, u64)> = lines
        .iter()
        .map(|l| {
            (
                l["method"].as_str().unwrap().to_string(),
                l["target"].as_str().unwrap().to_string(),
                l["status"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = |m: &str, t: &str, s: u64| (m.to_string(), t.to_string(), s);
    assert_eq!(
        seen,
        [
            want("GET", "/redfish/v1/Systems", 401),
            want("GET", "/redfish/v1/Systems", 200),
            want("POST", "/redfish/v1/SessionService/Sessions", 201),
            want(
                "POST",
                &format!("/redfish/v1/Systems/{UUID}/Actions/ComputerSystem.Reset"),
                204
            ),
        ]
    );
    assert_eq!(lines[1]["headers"]["authorization"], "Basic");
    assert_eq!(lines[2]["body"]["UserName"], "admin");
    assert_eq!(lines[2]["body"]["Password"], "<redacted>");
    assert!(lines[2]["response_headers"]["location"]
        .as_str()
        .unwrap()
        .starts_with("/redfish/v1/SessionService/Sessions/"));
    assert_eq!(lines[3]["headers"]["x-auth-token"], "<redacted>");
    assert_eq!(lines[3]["headers"]["odata-version"], "4.0");
    assert_eq!(lines[3]["body"]["ResetType"], "On");
}
