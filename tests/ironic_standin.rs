//! `shiftlab ironic-standin` against shiftlab's BMC: the Redfish sequence it
//! sends is real Ironic 39's (tests/fixtures/ironic-39/), its media come over
//! HTTPS from its own CA, a BMC's refusal ends it with the BMC's message, a
//! rerun leaves deployed hosts alone, and no password reaches its output.
//! Everything on 127.0.0.1.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

const PASSWORD: &str = "s3cret-bmc-pw";
const HOST: &str = "lab1-master-0";
const FIXTURE: &str = include_str!("fixtures/ironic-39/redfish-sequence.jsonl");

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_shiftlab")
}

/// `shiftlab bmc --fake HOST` with the trace on; its base URL once it listens.
struct Bmc {
    child: Child,
    base: String,
}

impl Drop for Bmc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fake_bmc(dir: &Path, trace: &Path) -> Bmc {
    let mut child = Command::new(bin())
        .args([
            "bmc",
            "--fake",
            HOST,
            "--listen",
            "127.0.0.1:0",
            "--bmc-dir",
        ])
        .arg(dir)
        .env("SHIFTLAB_BMC_PASSWORD", PASSWORD)
        .env("SHIFTLAB_BMC_TRACE", trace)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines.next().expect("the bmc ended").unwrap();
        if let Some(rest) = line.split("redfish bmc on ").nth(1) {
            break rest.trim_end_matches("/redfish/v1/").to_string();
        }
    };
    // Keep draining its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Bmc { child, base }
}

/// A node's report on 127.0.0.1: `"boot":"iso"` the first time it is asked,
/// `"boot":"disk"` after (the stand-in installed itself and rebooted).
fn report_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/report", listener.local_addr().unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    let n = asked.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(100) {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 2048];
            let _ = c.read(&mut buf);
            let boot = if n.fetch_add(1, Ordering::SeqCst) == 0 {
                "iso"
            } else {
                "disk"
            };
            let body = format!(r#"{{"hostname":"{HOST}","boot":"{boot}"}}"#);
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, asked)
}

fn input(state: &Path, isos: &Path, ca: Option<&Path>, bmc: &str, report: &str) -> Value {
    let uuid = shiftlab::redfish::bmc::derived_uuid(HOST);
    let address = format!("redfish-virtualmedia+{bmc}/redfish/v1/Systems/{uuid}");
    json!({"state": state, "iso_dir": isos, "ca": ca, "timeout": 60,
        "hosts": [{"name": HOST, "iso": "master.iso", "address": address,
            "username": "admin", "password": PASSWORD,
            "disableCertificateVerification": false, "bootMode": "UEFI",
            "report": report}]})
}

fn standin(input: &Value) -> Output {
    let mut child = Command::new(bin())
        .arg("ironic-standin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn isos(dir: &Path) -> std::path::PathBuf {
    let d = dir.join("isos");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("master.iso"), vec![7u8; 64 << 10]).unwrap();
    d
}

/// Replaces what changes between runs as normalise.py does: UUIDs by
/// `<uuid-N>` and session ids by `<session-N>` in order of appearance, and an
/// image URL's port by `<port>`. Pure.
fn normalise(text: &str) -> String {
    fn is_uuid(s: &[u8]) -> bool {
        s.len() >= 36
            && s[..36].iter().enumerate().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => *c == b'-',
                _ => c.is_ascii_hexdigit(),
            })
    }
    let mut uuids: Vec<String> = Vec::new();
    let mut sessions: Vec<String> = Vec::new();
    let b = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if is_uuid(&b[i..]) && (i == 0 || !b[i - 1].is_ascii_hexdigit()) {
            let u = text[i..i + 36].to_string();
            let n = uuids.iter().position(|x| *x == u).unwrap_or_else(|| {
                uuids.push(u);
                uuids.len() - 1
            });
            out.push_str(&format!("<uuid-{}>", n + 1));
            i += 36;
            continue;
        }
        const S: &str = "/SessionService/Sessions/";
        if text[i..].starts_with(S) && !text[i + S.len()..].starts_with('<') {
            let end = text[i + S.len()..].find(['"', '/']).unwrap();
            let id = text[i + S.len()..i + S.len() + end].to_string();
            let n = sessions.iter().position(|x| *x == id).unwrap_or_else(|| {
                sessions.push(id);
                sessions.len() - 1
            });
            out.push_str(&format!("{S}<session-{}>", n + 1));
            i += S.len() + end;
            continue;
        }
        const IMG: &str = "https://127.0.0.1:";
        if text[i..].starts_with(IMG) {
            let digits = text[i + IMG.len()..]
                .find(|c: char| !c.is_ascii_digit())
                .unwrap();
            out.push_str("https://127.0.0.1:<port>");
            i += IMG.len() + digits;
            continue;
        }
        let c = text[i..].chars().next().unwrap();
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// What a request is, phase-agnostic: method, target, headers, body and
/// status; a NIC's id made `<nic>` (the fake system has one NIC, the
/// recorded domain two: one GET each).
fn requests(lines: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for l in normalise(lines).lines() {
        let e: Value = serde_json::from_str(l).unwrap();
        let mut target = e["target"].as_str().unwrap().to_string();
        if let Some(i) = target.find("/EthernetInterfaces/") {
            target = format!("{}/EthernetInterfaces/<nic>", &target[..i]);
        }
        let r = json!({"method": e["method"], "target": target, "headers": e["headers"],
            "body": e.get("body"), "status": e["status"],
            "location": e["response_headers"]["location"]});
        out.push(r);
    }
    out
}

/// One GET per NIC made one.
fn one_nic(mut v: Vec<Value>) -> Vec<Value> {
    v.dedup_by(|a, b| a == b && a["target"].as_str().unwrap().ends_with("/<nic>"));
    v
}

#[test]
fn it_sends_the_bmc_real_ironics_sequence_and_a_rerun_leaves_the_host_alone() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let bmc = fake_bmc(&dir.path().join("bmc"), &trace);
    let (report, asked) = report_server();
    let state = dir.path().join("ironic");
    let ca = dir.path().join("bmc/tls/ca.crt");
    let input = input(&state, &isos(dir.path()), Some(&ca), &bmc.base, &report);

    let out = standin(&input);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    assert!(state.join("deployed").join(HOST).is_file(), "{stderr}");
    assert!(
        asked.load(Ordering::SeqCst) >= 2,
        "it waited for the disk boot"
    );
    for l in stderr.lines() {
        assert!(l.starts_with("level=info msg=\""), "{l}");
    }
    assert!(stderr.contains(&format!("{HOST}: active")), "{stderr}");

    // Real Ironic's sequence: manage, inspect, deploy, then the host running
    // from its disk is powered off (the recording's power-off), its media
    // ejected as undeploy ejects them after its own power-off, and powered
    // on (power-on). Undeploy's power-off is the power-off phase again.
    // Slices by the recording's numbers (seq N is [N - 1]).
    let recorded: Vec<Value> = requests(FIXTURE);
    assert_eq!(recorded.len(), 83);
    assert_eq!(recorded[63..67], recorded[55..59]);
    let mut want = recorded[..59].to_vec();
    want.extend_from_slice(&recorded[67..]);
    want.extend_from_slice(&recorded[59..63]);
    let want = one_nic(want);
    let sent = std::fs::read_to_string(&trace).unwrap();
    let got = one_nic(requests(&sent));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "request {} differs", i + 1);
    }
    assert_eq!(got.len(), want.len(), "{sent}");

    // A rerun: the host is deployed; the BMC hears nothing.
    let again = standin(&input);
    let stderr2 = String::from_utf8_lossy(&again.stderr).to_string();
    assert!(again.status.success(), "{stderr2}");
    assert!(stderr2.contains("all 1 hosts active"), "{stderr2}");
    let after = std::fs::read_to_string(&trace).unwrap();
    assert!(
        after == sent,
        "the rerun sent the BMC {} requests",
        after.lines().count() - sent.lines().count()
    );

    for text in [&stderr, &stderr2, &sent] {
        assert!(!text.contains(PASSWORD), "the password in: {text}");
    }
    let key = std::fs::metadata(state.join("tls/ca.key")).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(key.permissions().mode() & 0o777, 0o600);
}

#[test]
fn a_bmc_without_the_ca_is_refused_and_a_wrong_password_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let bmc = fake_bmc(&dir.path().join("bmc"), &trace);
    let (report, _) = report_server();
    let state = dir.path().join("ironic");
    // Its own CA is not the BMC's: the stand-in refuses the BMC's TLS.
    let other = dir.path().join("other");
    let other_ca = shiftlab::rehearse::ironic::ensure_ca(&other).unwrap();
    let out = standin(&input(
        &state,
        &isos(dir.path()),
        Some(&other_ca),
        &bmc.base,
        &report,
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("level=error msg=\"{HOST}: ")),
        "{stderr}"
    );
    assert!(last.to_lowercase().contains("certificate"), "{stderr}");
    assert!(!state.join("deployed").join(HOST).exists());

    // The BMC's CA, a wrong password: the BMC's own message.
    let ca = dir.path().join("bmc/tls/ca.crt");
    let mut bad = input(&state, &isos(dir.path()), Some(&ca), &bmc.base, &report);
    bad["hosts"][0]["password"] = json!("not-the-password");
    let out = standin(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("level=error msg=\"{HOST}: ")),
        "{stderr}"
    );
    assert!(last.contains("401"), "{stderr}");
    assert!(!stderr.contains("not-the-password"), "{stderr}");
    assert!(!state.join("deployed").join(HOST).exists());
}

#[test]
fn bad_input_is_named_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("ironic");
    let mut bad = input(
        &state,
        &isos(dir.path()),
        None,
        "https://127.0.0.1:9",
        "http://127.0.0.1:9/report",
    );
    bad["hosts"][0]["name"] = json!("../etc");
    let out = standin(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("hosts[0].name \\\"../etc\\\"")
            || stderr.contains("hosts[0].name '../etc'"),
        "{stderr}"
    );
    assert!(!state.exists(), "nothing made");
    let mut bad = input(
        &state,
        &isos(dir.path()),
        None,
        "https://127.0.0.1:9",
        "http://127.0.0.1:9/report",
    );
    bad["hosts"][0]["address"] = json!("ipmi://10.0.0.1");
    let out = standin(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("redfish-virtualmedia+https://HOST:PORT/redfish/v1/Systems/ID"),
        "{stderr}"
    );
    assert!(!state.exists(), "nothing made");
}

/// The in-memory machine whose InsertMedia fetches the image as the libvirt
/// BMC does (`redfish::fetch`, with its `--media-ca`) before it takes it.
struct Fetching {
    inner: shiftlab::redfish::MemoryMachine,
    fetcher: shiftlab::redfish::fetch::Fetcher,
    fetched: std::sync::Mutex<Vec<u8>>,
}

mod fetching {
    use super::Fetching;
    use shiftlab::redfish::machine::{Machine, MachineError};
    use shiftlab::redfish::model::*;
    use std::io::Read as _;

    impl Machine for Fetching {
        fn list(&self) -> Result<Vec<SystemRef>, MachineError> {
            self.inner.list()
        }
        fn resolve(&self, id: &str) -> Result<SystemRef, MachineError> {
            self.inner.resolve(id)
        }
        fn system(&self, uuid: &str) -> Result<SystemInfo, MachineError> {
            self.inner.system(uuid)
        }
        fn reset(&self, uuid: &str, reset: ResetType) -> Result<(), MachineError> {
            self.inner.reset(uuid, reset)
        }
        fn set_boot(&self, uuid: &str, patch: BootPatch) -> Result<(), MachineError> {
            self.inner.set_boot(uuid, patch)
        }
        fn insert_media(
            &self,
            uuid: &str,
            slot: MediaSlot,
            r: &InsertRequest,
        ) -> Result<(), MachineError> {
            let mut resp = self.fetcher.get(&r.image, &[])?;
            let mut head = vec![0u8; 16];
            resp.body_mut()
                .as_reader()
                .read_exact(&mut head)
                .map_err(|e| MachineError::BadRequest(e.to_string()))?;
            *self.fetched.lock().unwrap() = head;
            self.inner.insert_media(uuid, slot, r)
        }
        fn eject_media(&self, uuid: &str, slot: MediaSlot) -> Result<(), MachineError> {
            self.inner.eject_media(uuid, slot)
        }
    }
}

/// A BMC over 127.0.0.1 trusting `media_ca` for image servers.
fn fetching_bmc(
    rt: &tokio::runtime::Runtime,
    media_ca: &Path,
) -> (shiftlab::redfish::Server, Arc<Fetching>) {
    let fetcher = shiftlab::redfish::fetch::Fetcher::new(
        shiftlab::redfish::source::ImageSources::anywhere(vec!["127.0.0.0/8".parse().unwrap()]),
        Some(media_ca),
    )
    .unwrap();
    bmc_with(rt, fetcher)
}

/// A BMC over 127.0.0.1 whose InsertMedia fetches with `fetcher`.
fn bmc_with(
    rt: &tokio::runtime::Runtime,
    fetcher: shiftlab::redfish::fetch::Fetcher,
) -> (shiftlab::redfish::Server, Arc<Fetching>) {
    use shiftlab::redfish::{auth::Auth, MemorySystem, Service};
    let uuid = shiftlab::redfish::bmc::derived_uuid(HOST);
    let machine = Arc::new(Fetching {
        inner: shiftlab::redfish::MemoryMachine::new([MemorySystem::new(&uuid, HOST)]),
        fetcher,
        fetched: Default::default(),
    });
    let service = Arc::new(Service::new(
        machine.clone(),
        Auth::new("admin", PASSWORD, Duration::from_secs(600)),
        "svc",
    ));
    let server = rt
        .block_on(shiftlab::redfish::Server::start(
            "127.0.0.1:0".parse().unwrap(),
            None,
            service,
        ))
        .unwrap();
    (server, machine)
}

#[test]
fn the_bmc_fetches_the_media_over_https_from_the_standins_ca_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let isos = isos(dir.path());
    let (report, _) = report_server();

    // The BMC trusts the stand-in's CA (made before, as serve would find it).
    let state = dir.path().join("ironic");
    let ca = shiftlab::rehearse::ironic::ensure_ca(&state).unwrap();
    let (server, machine) = fetching_bmc(&rt, &ca);
    let base = format!("http://{}", server.local_addr());
    let out = standin(&input(&state, &isos, None, &base, &report));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        *machine.fetched.lock().unwrap(),
        vec![7u8; 16],
        "the ISO's bytes"
    );
    rt.block_on(server.shutdown());

    // A BMC trusting another CA refuses the media: the BMC's message.
    let state = dir.path().join("ironic2");
    let other = shiftlab::rehearse::ironic::ensure_ca(&dir.path().join("other")).unwrap();
    let (server, machine) = fetching_bmc(&rt, &other);
    let base = format!("http://{}", server.local_addr());
    let out = standin(&input(&state, &isos, None, &base, &report));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("level=error msg=\"{HOST}: InsertMedia")),
        "{stderr}"
    );
    assert!(last.contains("unknown CA"), "{stderr}");
    assert!(machine.fetched.lock().unwrap().is_empty());
    assert!(!state.join("deployed").join(HOST).exists());
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    rt.block_on(server.shutdown());
}

/// The lab BMC's fetcher for a rehearsal as serve builds it: the machine
/// network only, no flag, the cluster's stand-in CA under `install_dir`.
fn rehearsal_fetcher(install_dir: &Path) -> shiftlab::redfish::fetch::Fetcher {
    use shiftlab::rehearse::ironic::{ca_path, state_dir};
    let sources = shiftlab::redfish::source::ImageSources::within(
        vec!["192.168.126.0/24".parse().unwrap()],
        vec![],
    )
    .with_standin_ca(Some(ca_path(&state_dir(install_dir))));
    shiftlab::redfish::fetch::Fetcher::new(sources, None).unwrap()
}

/// A plain HTTP server on 127.0.0.1 counting the connections it accepts.
fn http_loopback() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/x.iso", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let n = hits.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(10) {
            n.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    (url, hits)
}

fn refusal(
    r: Result<shiftlab::redfish::fetch::Response, shiftlab::redfish::machine::MachineError>,
) -> String {
    match r {
        Err(shiftlab::redfish::machine::MachineError::BadRequest(m)) => m,
        Err(e) => panic!("{e:?}"),
        Ok(resp) => panic!("fetched: HTTP {}", resp.status()),
    }
}

#[test]
fn a_rehearsals_lab_bmc_reads_loopback_media_only_over_https_from_its_clusters_standin_ca() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let isos = isos(dir.path());
    let (report, _) = report_server();
    let install = dir.path().join("assets");
    let state = shiftlab::rehearse::ironic::state_dir(&install);

    // Before the stand-in runs its CA does not exist: named as such, and
    // nothing on loopback is connected to.
    let fetcher = rehearsal_fetcher(&install);
    let (http, hits) = http_loopback();
    let https = http.replacen("http:", "https:", 1);
    let msg = refusal(fetcher.get(&https, &[]));
    assert!(
        msg.contains("TLS: the image server is on loopback")
            && msg.contains(&format!(
                "{} does not exist",
                state.join("tls/ca.crt").display()
            )),
        "{msg}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);

    // The stand-in makes its CA after the BMC started: the BMC reads it then
    // and fetches the ISO with no flag.
    let (server, machine) = bmc_with(&rt, fetcher);
    let base = format!("http://{}", server.local_addr());
    let out = standin(&input(&state, &isos, None, &base, &report));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        *machine.fetched.lock().unwrap(),
        vec![7u8; 16],
        "the ISO's bytes"
    );
    rt.block_on(server.shutdown());

    // Plain http to loopback stays refused, CA or not: no connection.
    let fetcher = rehearsal_fetcher(&install);
    let msg = refusal(fetcher.get(&http, &[]));
    assert!(
        msg.ends_with(shiftlab::redfish::source::UNREACHABLE),
        "{msg}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);

    // Another cluster's stand-in (another CA): refused with the BMC's message.
    let other = dir.path().join("other-assets");
    std::fs::create_dir_all(&other).unwrap();
    shiftlab::rehearse::ironic::ensure_ca(&shiftlab::rehearse::ironic::state_dir(&other)).unwrap();
    let (server, machine) = bmc_with(&rt, rehearsal_fetcher(&other));
    let base = format!("http://{}", server.local_addr());
    let state2 = dir.path().join("ironic2");
    let out = standin(&input(&state2, &isos, None, &base, &report));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("level=error msg=\"{HOST}: InsertMedia"))
            && last.contains("TLS: unknown CA: the image server on loopback has a certificate not from this rehearsal's stand-in Ironic CA"),
        "{stderr}"
    );
    assert!(machine.fetched.lock().unwrap().is_empty());
    assert!(!state2.join("deployed").join(HOST).exists());
    rt.block_on(server.shutdown());

    // Not a rehearsal (no stand-in CA given): loopback refused as before.
    let lab = shiftlab::redfish::fetch::Fetcher::new(
        shiftlab::redfish::source::ImageSources::within(
            vec!["192.168.126.0/24".parse().unwrap()],
            vec![],
        ),
        None,
    )
    .unwrap();
    let msg = refusal(lab.get(&https, &[]));
    assert!(
        msg.ends_with(shiftlab::redfish::source::UNREACHABLE),
        "{msg}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}
