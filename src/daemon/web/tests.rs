//! The web page's server on loopback, driven by a real HTTP client (ureq).

use std::io::BufRead as _;
use std::os::unix::fs::PermissionsExt as _;

use super::*;

fn state() -> (tempfile::TempDir, StateDir) {
    let d = tempfile::tempdir().unwrap();
    let s = StateDir {
        root: d.path().into(),
    };
    std::fs::create_dir_all(s.clusters()).unwrap();
    (d, s)
}

fn test_plan(name: &str) -> crate::plan::Plan {
    let text = format!("cluster: {name}\ndomain: example.com\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAAtest t@t']\nworkers: 2\n");
    let mut plan = crate::plan::from_yaml(&text);
    plan.libvirt.uri = "test:///default".into();
    plan
}

/// A cluster `lab1` on libvirt's built-in test driver, with secrets planted in
/// its files.
fn plant_cluster(state: &StateDir) {
    let c = state.cluster("lab1");
    c.write_plan(&test_plan("lab1")).unwrap();
    std::fs::create_dir_all(c.path().join("assets/auth")).unwrap();
    std::fs::write(c.assets().kubeadmin_password(), "PLANTED-kubeadmin-pw").unwrap();
    std::fs::write(c.bmc_password(), "PLANTED-bmc-password").unwrap();
    std::fs::write(
        c.install_config_backup(),
        "pullSecret: '{\"auths\":{\"r.example\":{\"auth\":\"UExBTlRFRC1wdWxs\"}}}'\n",
    )
    .unwrap();
}

async fn start(state: &StateDir, token: Option<&str>) -> Server {
    let cfg = Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        token: token.map(str::to_string),
    };
    Server::start(state.clone(), &cfg).await.unwrap()
}

struct Got {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A client for the page on loopback: redirects not followed, statuses
/// returned as answers, no proxy from the environment.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into()
}

/// One request with ureq (redirects not followed), on a blocking thread.
async fn get(url: String, headers: Vec<(&'static str, String)>, method: &'static str) -> Got {
    tokio::task::spawn_blocking(move || {
        let req = ureq::http::Request::builder().method(method).uri(&url);
        let req = headers
            .iter()
            .fold(req, |req, (k, v)| req.header(*k, v.as_str()));
        let mut resp = match agent().run(req.body(()).unwrap()) {
            Ok(r) => r,
            Err(e) => panic!("{url}: {e}"),
        };
        let headers = resp
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect();
        Got {
            status: resp.status().as_u16(),
            headers,
            body: resp.body_mut().read_to_string().unwrap_or_default(),
        }
    })
    .await
    .unwrap()
}

#[test]
fn config_is_checked_before_anything_starts() {
    assert_eq!(Config::parse("off", None).unwrap(), None);
    let c = Config::parse("127.0.0.1:8090", None).unwrap().unwrap();
    assert_eq!(c.addr, "127.0.0.1:8090".parse().unwrap());
    assert!(Config::parse("[::1]:9000", None).unwrap().is_some());
    let e = format!("{:#}", Config::parse("0.0.0.0:8090", None).unwrap_err());
    assert!(e.contains("--web-token-file"), "{e}");
    let e = format!("{:#}", Config::parse("localhost", None).unwrap_err());
    assert!(e.contains("expected IP:PORT or off"), "{e}");
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("token");
    std::fs::write(&f, "0123456789abcdef0123\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = format!("{:#}", Config::parse("0.0.0.0:8090", Some(&f)).unwrap_err());
    assert!(e.contains("chmod 600"), "{e}");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    let c = Config::parse("0.0.0.0:8090", Some(&f)).unwrap().unwrap();
    assert_eq!(c.token.as_deref(), Some("0123456789abcdef0123"));
    // The token never shows in a debug print.
    assert!(!format!("{c:?}").contains("0123456789abcdef0123"));
    std::fs::write(&f, "short").unwrap();
    let e = format!("{:#}", Config::parse("0.0.0.0:8090", Some(&f)).unwrap_err());
    assert!(e.contains("at least 16"), "{e}");
    assert!(!e.contains("short"), "{e}");
    std::fs::write(&f, "0123456789abcdef;Path=/evil").unwrap();
    let e = format!("{:#}", Config::parse("0.0.0.0:8090", Some(&f)).unwrap_err());
    assert!(e.contains("letters, digits"), "{e}");
    assert!(Config::parse("off", Some(&f)).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_assets_and_api_on_loopback() {
    let (_d, st) = state();
    plant_cluster(&st);
    let s = start(&st, None).await;
    let base = format!("http://{}", s.local_addr());

    let page = get(format!("{base}/"), vec![], "GET").await;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(page
        .header("content-security-policy")
        .unwrap()
        .contains("default-src 'none'"));
    assert!(page.body.contains("<main id=\"main\""), "{}", page.body);
    let page = get(format!("{base}/clusters/lab1"), vec![], "GET").await;
    assert_eq!(page.status, 200);
    let js = get(format!("{base}/assets/app.js"), vec![], "GET").await;
    assert_eq!(js.status, 200);
    assert!(js
        .header("content-type")
        .unwrap()
        .starts_with("text/javascript"));
    let css = get(format!("{base}/assets/app.css"), vec![], "GET").await;
    assert!(css.header("content-type").unwrap().starts_with("text/css"));

    let o = get(format!("{base}/api/clusters"), vec![], "GET").await;
    assert_eq!(o.status, 200, "{}", o.body);
    let v: serde_json::Value = serde_json::from_str(&o.body).unwrap();
    assert_eq!(v["clusters"][0]["cluster"], "lab1");
    assert_eq!(v["clusters"][0]["method"], "upi");
    assert_eq!(v["clusters"][0]["nodes_running"], 0);

    // No libvirt objects on the test driver yet: the plan's lab and no node,
    // what status -o json says.
    let c = get(format!("{base}/api/clusters/lab1"), vec![], "GET").await;
    assert_eq!(c.status, 200, "{}", c.body);
    let v: serde_json::Value = serde_json::from_str(&c.body).unwrap();
    assert_eq!(v["cluster"], "lab1");
    assert_eq!(v["nodes"], serde_json::json!([]));
    assert_eq!(v["lab"]["cluster_domain"], "lab1.example.com");
    assert_eq!(v["lab"]["kubeconfig"], serde_json::Value::Null);
    assert!(v["lab"]["dns"].as_array().unwrap().len() > 2, "{v}");
    assert_eq!(v["services"]["cluster"], "lab1");
    let cluster_body = c.body.clone();
    let c = get(format!("{base}/api/clusters/other"), vec![], "GET").await;
    assert_eq!(c.status, 404);
    assert!(c.body.contains("no cluster named other"), "{}", c.body);
    let c = get(format!("{base}/api/clusters/..%2Fetc"), vec![], "GET").await;
    assert_eq!(c.status, 404);
    let c = get(format!("{base}/api/clusters"), vec![], "POST").await;
    assert_eq!(c.status, 405);
    assert_eq!(c.header("allow"), Some("GET, HEAD"));
    let c = get(format!("{base}/nope"), vec![], "GET").await;
    assert_eq!(c.status, 404);

    // A DNS name for loopback is refused (DNS rebinding); localhost is fine.
    let c = get(
        format!("{base}/api/clusters"),
        vec![("Host", "evil.example:8090".into())],
        "GET",
    )
    .await;
    assert_eq!(c.status, 421);
    let c = get(
        format!("{base}/api/clusters"),
        vec![("Host", "localhost:8090".into())],
        "GET",
    )
    .await;
    assert_eq!(c.status, 200);

    for body in [&o.body, &c.body, &cluster_body] {
        for planted in ["PLANTED", "UExBTlRFRC1wdWxs"] {
            assert!(!body.contains(planted), "{planted} in {body}");
        }
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_install_before_infra_is_shown_from_its_recorded_plan() {
    let (_d, st) = state();
    let c = st.cluster("early");
    std::fs::create_dir_all(c.path()).unwrap();
    crate::files::write_json(&c.install_plan(), &test_plan("early")).unwrap();
    let s = start(&st, None).await;
    let base = format!("http://{}", s.local_addr());
    let o = get(format!("{base}/api/clusters"), vec![], "GET").await;
    let v: serde_json::Value = serde_json::from_str(&o.body).unwrap();
    assert_eq!(v["clusters"][0]["cluster"], "early", "{v}");
    let r = get(format!("{base}/api/clusters/early"), vec![], "GET").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["services"], serde_json::Value::Null);
    assert_eq!(v["lab"]["method"], "upi");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_and_set_once_as_a_cookie() {
    let (_d, st) = state();
    let token = "t0ken-t0ken-t0ken-1234";
    let s = start(&st, Some(token)).await;
    let base = format!("http://{}", s.local_addr());

    let r = get(format!("{base}/api/clusters"), vec![], "GET").await;
    assert_eq!(r.status, 401);
    assert!(!r.body.contains(token));
    let r = get(
        format!("{base}/api/clusters"),
        vec![("Authorization", "Bearer wrong-wrong-wrong-wrong".into())],
        "GET",
    )
    .await;
    assert_eq!(r.status, 401);
    let r = get(
        format!("{base}/api/clusters"),
        vec![("Authorization", format!("Bearer {token}"))],
        "GET",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // With a token any Host is fine (it is the guard).
    let r = get(
        format!("{base}/api/clusters"),
        vec![
            ("Authorization", format!("Bearer {token}")),
            ("Host", "lab.example".into()),
        ],
        "GET",
    )
    .await;
    assert_eq!(r.status, 200);
    // ?token= on a page: a cookie, and the token out of the URL.
    let r = get(format!("{base}/clusters/lab1?token={token}"), vec![], "GET").await;
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/clusters/lab1"));
    let cookie = r.header("set-cookie").unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_string();
    let r = get(
        format!("{base}/api/clusters"),
        vec![("Cookie", pair)],
        "GET",
    )
    .await;
    assert_eq!(r.status, 200);
    // Not on the API (a URL with a token ends up in logs and histories).
    let r = get(format!("{base}/api/clusters?token={token}"), vec![], "GET").await;
    assert_eq!(r.status, 401);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_what_the_api_says() {
    let (_d, st) = state();
    plant_cluster(&st);
    let s = start(&st, None).await;
    let url = format!("http://{}/api/clusters/lab1/events", s.local_addr());
    let lines = tokio::task::spawn_blocking(move || {
        let resp = agent().get(&url).call().unwrap();
        assert_eq!(resp.body().mime_type(), Some("text/event-stream"));
        let mut reader = std::io::BufReader::new(resp.into_body().into_reader());
        let mut lines = Vec::new();
        let mut line = String::new();
        while lines.len() < 6 {
            line.clear();
            if reader.read_line(&mut line).unwrap() == 0 {
                break;
            }
            lines.push(line.trim_end().to_string());
            if line.starts_with("data: ") {
                break;
            }
        }
        lines
    })
    .await
    .unwrap();
    assert_eq!(lines[0], "retry: 2000", "{lines:?}");
    let ev = lines
        .iter()
        .position(|l| l == "event: cluster")
        .expect("cluster event");
    let data = lines[ev + 1].strip_prefix("data: ").unwrap();
    let v: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_eq!(v["cluster"], "lab1");
    assert!(!data.contains("PLANTED"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_an_unknown_cluster_say_so() {
    let (_d, st) = state();
    let s = start(&st, None).await;
    let url = format!("http://{}/api/clusters/nope/events", s.local_addr());
    let text = tokio::task::spawn_blocking(move || {
        let resp = agent().get(&url).call().unwrap();
        let mut reader = std::io::BufReader::new(resp.into_body().into_reader());
        let mut text = String::new();
        let mut line = String::new();
        while !text.contains("data: ") {
            line.clear();
            if reader.read_line(&mut line).unwrap() == 0 {
                break;
            }
            text.push_str(&line);
        }
        text
    })
    .await
    .unwrap();
    assert!(
        text.contains("event: problem\ndata: {\"error\":\"no cluster named nope in this state\"}"),
        "{text}"
    );
    s.stop().await;
}

#[test]
fn an_event_spreads_lines_over_data_fields() {
    assert_eq!(
        event("cluster", "{\"a\":1}\n{\"b\":2}"),
        Bytes::from("event: cluster\ndata: {\"a\":1}\ndata: {\"b\":2}\n\n")
    );
}

/// Known to the cluster's files: replaced wherever they appear.
const KNOWN: &[&str] = &[
    "Leak-Kubeadmin-Pw-77",
    "leak-bmc-password-88",
    "UExBTlRFRC1sZWFrLXB1bGw=",
    "leak-proxy-pw",
    "leak-host-bmc-pw",
    "TEVBSy1DTElFTlQtS0VZ",
    "sha256~LeakKubeconfigToken",
];
/// Known to no file: caught by their shape.
const SHAPED: &[&str] = &[
    "url-pw-in-a-note",
    "eyJhbGciOiJSUzI1NiJ9.leak.bearer",
    "MIIEleakedRSAkeyBody",
    "sha256~UnknownLeakedToken",
    "MHcCAQEEIleakedECkeyTail",
];

/// A cluster `webleak` with a node on libvirt's test driver whose console log,
/// like its files and its install notes, holds secrets; the connection that
/// keeps the test driver's state (it goes with the last one).
fn plant_leaky_cluster(state: &StateDir, dir: &std::path::Path) -> crate::libvirt::Host {
    let c = state.cluster("webleak");
    c.write_plan(&test_plan("webleak")).unwrap();
    std::fs::create_dir_all(c.path().join("assets/auth")).unwrap();
    std::fs::write(c.assets().kubeadmin_password(), KNOWN[0]).unwrap();
    std::fs::write(c.bmc_password(), KNOWN[1]).unwrap();
    std::fs::write(
        c.install_config_backup(),
        format!(
            "pullSecret: '{{\"auths\":{{\"r.example\":{{\"auth\":\"{}\"}}}}}}'\n\
             proxy:\n  httpProxy: http://user:{}@proxy.example:3128\n\
             platform:\n  baremetal:\n    hosts:\n    - name: h\n      bmc:\n        password: {}\n",
            KNOWN[2], KNOWN[3], KNOWN[4]
        ),
    )
    .unwrap();
    std::fs::write(
        c.assets().kubeconfig(),
        format!(
            "users:\n- name: admin\n  user:\n    client-key-data: {}\n- name: robot\n  user:\n    token: {}\n",
            KNOWN[5], KNOWN[6]
        ),
    )
    .unwrap();
    // An install note that echoed what it should not have.
    let note = format!(
        "mirror https://robot:{}@registry.example/v2 with Authorization: Bearer {} and \
         -----BEGIN RSA PRIVATE KEY-----\nMIIEleakedRSAkeyBody\n-----END RSA PRIVATE KEY----- \
         token: {}",
        SHAPED[0], SHAPED[1], SHAPED[3]
    );
    std::fs::write(
        c.install_state(),
        serde_json::json!({
            "format": 1, "cluster": "webleak",
            "targets": {"release": {"status": "done", "at": 1, "note": note}},
        })
        .to_string(),
    )
    .unwrap();
    // A node whose console printed all of them, and a key whose start the
    // tail's window cuts off.
    let console = dir.join("webleak-worker-0-console.log");
    let mut text: String = (0..400).map(|i| format!("filler line {i}\n")).collect();
    text.push_str("-----BEGIN EC PRIVATE KEY-----\n");
    text.push_str(&"QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB\n".repeat(200));
    text.push_str(&format!(
        "{}\n-----END EC PRIVATE KEY-----\nvisible-console-line\n",
        SHAPED[4]
    ));
    for s in KNOWN {
        text.push_str(&format!("echoed {s} here\n"));
    }
    text.push_str(&format!("Authorization: Bearer {}\n", SHAPED[1]));
    std::fs::write(&console, text).unwrap();
    let owner = crate::libvirt::xml::Owner {
        cluster: "webleak".into(),
        role: "worker".into(),
        node: Some("webleak-worker-0".into()),
        version: "1".into(),
    };
    let host = crate::libvirt::Host::open("test:///default").unwrap();
    if let Some(d) = host.domain("webleak-worker-0").unwrap() {
        d.undefine().unwrap();
    }
    host.conn
        .define_domain_xml(&format!(
            "<domain type='test'><name>webleak-worker-0</name><memory unit='MiB'>128</memory>\
             <metadata>{}</metadata><os><type arch='x86_64'>hvm</type></os><devices>\
             <serial type='pty'><log file='{}'/></serial></devices></domain>",
            owner.element(),
            console.display()
        ))
        .unwrap();
    host
}

/// Every page, asset and API response (the first event of the stream
/// included), as (what, body).
async fn every_response(base: &str, auth: Vec<(&'static str, String)>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for path in [
        "/",
        "/clusters/webleak",
        "/assets/app.js",
        "/api/clusters",
        "/api/clusters/webleak",
        "/api/clusters/nope",
        "/api/clusters/webleak/nope",
    ] {
        let r = get(format!("{base}{path}"), auth.clone(), "GET").await;
        assert!(r.status != 401 && r.status != 421, "{path}: {}", r.status);
        out.push((path.to_string(), r.body));
    }
    let url = format!("{base}/api/clusters/webleak/events");
    let event = tokio::task::spawn_blocking(move || {
        let mut req = agent().get(&url);
        for (k, v) in &auth {
            req = req.header(*k, v.as_str());
        }
        let mut reader = std::io::BufReader::new(req.call().unwrap().into_body().into_reader());
        let (mut text, mut line) = (String::new(), String::new());
        while !text.contains("\ndata: ") {
            line.clear();
            if reader.read_line(&mut line).unwrap() == 0 {
                break;
            }
            text.push_str(&line);
        }
        text
    })
    .await
    .unwrap();
    assert!(event.contains("event: cluster"), "{event}");
    out.push(("events".into(), event));
    out
}

fn assert_no_planted(responses: &[(String, String)]) {
    for (what, body) in responses {
        for s in KNOWN.iter().chain(SHAPED) {
            assert!(!body.contains(s), "{s} in {what}: {body}");
        }
        assert!(!body.contains("QUFBQUFB"), "a key's body in {what}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_response_carries_a_planted_secret_and_consoles_need_the_token() {
    let (d, st) = state();
    let host = plant_leaky_cluster(&st, d.path());
    let view = |responses: &[(String, String)]| -> serde_json::Value {
        let body = &responses
            .iter()
            .find(|(p, _)| p == "/api/clusters/webleak")
            .unwrap()
            .1;
        serde_json::from_str(body).unwrap()
    };

    // Loopback without a token: every local user; no console logs.
    let s = start(&st, None).await;
    let responses = every_response(&format!("http://{}", s.local_addr()), vec![]).await;
    s.stop().await;
    assert_no_planted(&responses);
    let v = view(&responses);
    assert_eq!(v["nodes"][0]["name"], "webleak-worker-0", "{v}");
    assert_eq!(v["consoles_withheld"], true, "{v}");
    assert_eq!(v["consoles"], serde_json::json!([]));
    assert!(!responses
        .iter()
        .any(|(_, b)| b.contains("visible-console-line")));
    // What was redacted is still there to read around it.
    let note = v["install"]["targets"][0]["note"].as_str().unwrap();
    assert!(
        note.contains("https://robot:<redacted>@registry.example/v2"),
        "{note}"
    );
    assert!(note.contains("Authorization: Bearer <redacted>"), "{note}");
    assert!(note.contains("<redacted private key>"), "{note}");

    // With the token: the console tail, redacted.
    let token = "t0ken-t0ken-t0ken-5678";
    let s = start(&st, Some(token)).await;
    let responses = every_response(
        &format!("http://{}", s.local_addr()),
        vec![("Authorization", format!("Bearer {token}"))],
    )
    .await;
    s.stop().await;
    assert_no_planted(&responses);
    let v = view(&responses);
    assert_eq!(v["consoles_withheld"], false, "{v}");
    let lines: Vec<&str> = v["consoles"][0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(lines.contains(&"visible-console-line"), "{lines:?}");
    assert!(lines.contains(&"<redacted private key>"), "{lines:?}");
    assert!(lines.contains(&"echoed <redacted> here"), "{lines:?}");
    assert!(
        lines.contains(&"Authorization: Bearer <redacted>"),
        "{lines:?}"
    );

    host.domain("webleak-worker-0")
        .unwrap()
        .unwrap()
        .undefine()
        .unwrap();
}

/// A kubeconfig for `lab1` whose server is `server`, with a token.
fn plant_kubeconfig(state: &StateDir, server: &str) {
    let kc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab1\n  cluster:\n    server: {server}\n\
         contexts:\n- name: admin\n  context: {{cluster: lab1, user: admin}}\ncurrent-context: admin\n\
         users:\n- name: admin\n  user: {{token: PLANTED-api-token}}\n"
    );
    let path = state.cluster("lab1").assets().kubeconfig();
    std::fs::write(&path, kc).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// `/api/clusters/lab1` until its health panel satisfies `done` (bounded).
async fn health_until(base: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    for _ in 0..100 {
        let c = get(format!("{base}/api/clusters/lab1"), vec![], "GET").await;
        assert_eq!(c.status, 200, "{}", c.body);
        last = serde_json::from_str(&c.body).unwrap();
        if done(&last["health"]) {
            return last;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("health never as expected: {}", last["health"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_panel_never_waits_on_a_silent_api() {
    let (_d, st) = state();
    plant_cluster(&st);
    let s = start(&st, None).await;
    let base = format!("http://{}", s.local_addr());
    // Before the installer wrote it: no kubeconfig, no oc login line to export.
    let v = health_until(&base, |_| true).await;
    assert_eq!(v["health"], serde_json::json!({"state": "no_kubeconfig"}));
    assert_eq!(v["lab"]["kubeconfig_export"], serde_json::Value::Null);
    assert_eq!(
        v["lab"]["oc_login"],
        "oc login -u kubeadmin https://api.lab1.example.com:6443"
    );
    // An API that takes connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    plant_kubeconfig(&st, &format!("https://{}", silent.local_addr().unwrap()));
    // (A view is reused for up to a second.)
    let v = health_until(&base, |h| h["state"] != "no_kubeconfig").await;
    assert_eq!(v["health"], serde_json::json!({"state": "checking"}));
    let path = st.cluster("lab1").assets().kubeconfig();
    assert_eq!(
        v["lab"]["kubeconfig_export"],
        format!("export KUBECONFIG={}", path.display())
    );
    let v = health_until(&base, |h| h["state"] == "unreachable").await;
    let reason = v["health"]["reason"].as_str().unwrap();
    assert!(!reason.is_empty(), "{v}");
    // The rest of the page is there all along.
    assert_eq!(v["lab"]["cluster_domain"], "lab1.example.com");
    assert!(!v.to_string().contains("PLANTED"), "{v}");
    drop(silent);
    s.stop().await;
}

/// A stand-in for the few reads of the health panel, as the real API answers
/// them: the list kinds, one ClusterVersion `version`, a 404 `Status` for
/// anything else (openshift/api config/v1 CRDs, Kubernetes core/v1 and
/// certificates.k8s.io/v1). One HTTP/1.1 connection per thread, kept alive.
fn fake_api(objects: serde_json::Value) -> std::net::SocketAddr {
    use std::io::{BufReader, Write as _};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming().take(50) {
            let Ok(conn) = conn else { return };
            let objects = objects.clone();
            std::thread::spawn(move || {
                let mut w = conn.try_clone().unwrap();
                let mut r = BufReader::new(conn);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = line.split(' ').nth(1).unwrap_or("").to_string();
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    let path = path.split('?').next().unwrap_or("");
                    let (code, body) = match objects.get(path) {
                        Some(o) => (200, o.to_string()),
                        None => (
                            404,
                            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": "the server could not find the requested resource",
                                "reason": "NotFound", "details": {}, "code": 404})
                            .to_string(),
                        ),
                    };
                    let reason = if code == 200 { "OK" } else { "Not Found" };
                    let head = format!(
                        "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    if w.write_all(head.as_bytes()).is_err()
                        || w.write_all(body.as_bytes()).is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_panel_shows_a_degraded_operator_and_a_pending_csr() {
    let (_d, st) = state();
    plant_cluster(&st);
    let cond = |t: &str, s: &str, m: &str| serde_json::json!({"type": t, "status": s, "lastTransitionTime": "2026-11-25T10:00:00Z", "message": m});
    let api = fake_api(serde_json::json!({
        "/apis/config.openshift.io/v1/clusterversions/version": {
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "metadata": {"name": "version"}, "spec": {"clusterID": "c"},
            "status": {"desired": {"version": "4.18.0"}, "history": [],
                "conditions": [cond("Progressing", "True", "Working towards 4.18.0: 700 of 870 done (80% complete)")]}},
        "/apis/config.openshift.io/v1/clusteroperators": {
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterOperatorList", "metadata": {},
            "items": [
                {"metadata": {"name": "authentication"}, "spec": {}, "status": {"conditions": [
                    cond("Degraded", "True", "OAuthServerRouteEndpointAccessibleControllerDegraded: route not ready"),
                    cond("Progressing", "False", "")]}},
                {"metadata": {"name": "dns"}, "spec": {}, "status": {"conditions": [cond("Degraded", "False", "")]}}]},
        "/api/v1/nodes": {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [
            {"metadata": {"name": "lab1-ctlplane-0", "labels": {"node-role.kubernetes.io/master": ""}},
             "status": {"conditions": [cond("Ready", "True", "kubelet is posting ready status")]}}]},
        "/apis/certificates.k8s.io/v1/certificatesigningrequests": {
            "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequestList", "metadata": {},
            "items": [{"metadata": {"name": "csr-x7", "creationTimestamp": "2026-11-25T10:01:00Z"},
                "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                    "username": "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper",
                    "request": "UExBTlRFRC1jc3ItcmVxdWVzdA==", "usages": ["client auth"]},
                "status": {}}]}
    }));
    plant_kubeconfig(&st, &format!("http://{api}"));
    let s = start(&st, None).await;
    let base = format!("http://{}", s.local_addr());
    let v = health_until(&base, |h| h["state"] == "ok").await;
    let h = &v["health"];
    assert_eq!(h["version"]["desired"], "4.18.0");
    assert_eq!(h["operators_total"], 2);
    assert_eq!(h["operators"].as_array().unwrap().len(), 1, "{h}");
    assert_eq!(h["operators"][0]["name"], "authentication");
    assert_eq!(h["operators"][0]["degraded"]["status"], "True");
    assert_eq!(h["nodes"][0]["ready"]["status"], "True");
    assert_eq!(h["pending_csrs"][0]["name"], "csr-x7");
    // Neither the CSR's request nor the kubeconfig's token.
    assert!(!v.to_string().contains("UExBTlRFRC1jc3It"), "{v}");
    assert!(!v.to_string().contains("PLANTED"), "{v}");
    s.stop().await;
}

/// The page's `oc login` names the lab's first cluster-admin once it has one
/// (kubeadmin may be removed then), else kubeadmin; never a password.
#[test]
fn oc_login_names_the_first_admin_user() {
    let (_d, st) = state();
    plant_cluster(&st);
    let c = st.cluster("lab1");
    let plan = c.read_plan().unwrap();
    let login = |c: &crate::state::ClusterDir| view::Lab::of(&plan, c, None).oc_login;
    assert_eq!(
        login(&c),
        "oc login -u kubeadmin https://api.lab1.example.com:6443"
    );
    let user = |name: &str, admin: bool| crate::install::users::Recorded {
        name: name.into(),
        admin,
        password_file: c.assets().user_password(name),
    };
    crate::install::users::write_record(&c.users(), &[user("bob", false), user("alice", true)])
        .unwrap();
    assert_eq!(
        login(&c),
        "oc login -u alice https://api.lab1.example.com:6443"
    );
}
