//! `shiftlab serve` end to end on loopback: a cluster's plan appears in the
//! state, serve starts its HAProxy on the LB address, checks find a failing
//! control plane, remove-bootstrap reloads without it, a killed HAProxy is
//! restarted, host DNS goes into a hosts file, and forget (destroy's hook)
//! stops everything and gives the hosts file back byte for byte.

mod common;
#[path = "common/services.rs"]
mod services;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use services::*;
use shiftlab::serve;
use shiftlab::state::StateDir;

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: signalling the serve child this test started.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn start_serve(state: &Path, hosts: &Path, http_port: u16) -> Serve {
    start_serve_with(state, hosts, http_port, |_| {})
}

fn start_serve_with(
    state: &Path,
    hosts: &Path,
    http_port: u16,
    more: impl FnOnce(&mut Command),
) -> Serve {
    let log = std::fs::File::create(state.with_extension("log")).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shiftlab"));
    more(&mut cmd);
    let child = cmd
        .args(["--state-dir"])
        .arg(state)
        .args([
            "serve",
            "--host-dns",
            "hosts",
            // Never the machine's firewall from a test.
            "--host-firewall",
            "off",
            "--scan-interval",
            "1",
            "--http-port",
        ])
        .arg(http_port.to_string())
        .env("SHIFTLAB_HOSTS_FILE", hosts)
        .env("SHIFTLAB_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Serve(child)
}

fn served_by(addr: SocketAddr, path: &str, n: usize) -> BTreeSet<String> {
    (0..n).filter_map(|_| get_body(addr, path)).collect()
}

fn backend_status(state: &StateDir, cluster: &str, frontend: &str, node: &str) -> String {
    let s = serve::services_status(state, cluster).unwrap();
    let lb = s.load_balancer.unwrap();
    let f = lb.frontends.iter().find(|f| f.name == frontend).unwrap();
    f.backends
        .iter()
        .find(|b| b.node == node)
        .unwrap()
        .status
        .clone()
}

#[test]
fn serve_runs_checks_reloads_restarts_and_forgets_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let state = StateDir { root: root.clone() };
    let hosts = dir.path().join("hosts");
    let original = b"127.0.0.1 localhost\n::1 localhost ip6-localhost\n# no newline at the end";
    std::fs::write(&hosts, original).unwrap();

    let plan = loopback_plan("svc1", 10, 21000, true);
    let _backends = start_backends(&plan);
    let ctl0 = _backends
        .iter()
        .find(|b| b.node == "lab1-ctlplane-0" && b.addr.port() == 21011)
        .unwrap();
    let api: SocketAddr = "127.77.10.2:21001".parse().unwrap();
    let mcs: SocketAddr = "127.77.10.2:21002".parse().unwrap();
    let https: SocketAddr = "127.77.10.2:21003".parse().unwrap();
    let http: SocketAddr = "127.77.10.2:21004".parse().unwrap();

    let _serve = start_serve(&root, &hosts, 21080);
    wait_until("the control socket", Duration::from_secs(10), || {
        root.join("serve.sock").exists()
    });
    write_plan(&root, &plan);
    assert!(serve::notify(&state, Some("svc1")).unwrap());
    let files = state.cluster("svc1");
    let cfg = std::fs::read_to_string(files.haproxy_cfg()).unwrap();
    assert!(cfg.contains("bind 127.77.10.2:21001"));

    // The API through the LB reaches the bootstrap and the control planes.
    let seen = served_by(api, "/readyz", 24);
    assert!(seen.contains("lab1-bootstrap"), "{seen:?}");
    assert!(seen.len() >= 3, "several backends: {seen:?}");
    assert!(seen.iter().all(|n| !n.contains("worker")));
    assert_eq!(
        get_body(mcs, "/config/master").map(|b| b.starts_with("lab1-")),
        Some(true)
    );
    let ingress = served_by(https, "/", 8);
    assert_eq!(
        ingress,
        ["lab1-worker-0", "lab1-worker-1"].map(String::from).into()
    );
    assert_eq!(served_by(http, "/", 8), ingress);

    // Host DNS: a marked block in the injected hosts file.
    let text = std::fs::read_to_string(&hosts).unwrap();
    assert!(text.contains("127.77.10.2 api.svc1.lab.test\n"));
    assert!(text.contains("127.77.10.2 console-openshift-console.apps.svc1.lab.test\n"));
    assert!(text.starts_with(std::str::from_utf8(original).unwrap()));

    // Once checked healthy, a failing /readyz takes it out within 30 s.
    wait_until("ctlplane-0 checked up", Duration::from_secs(20), || {
        backend_status(&state, "svc1", "api", "lab1-ctlplane-0") == "UP"
    });
    ctl0.failing.store(true, Ordering::SeqCst);
    let took = wait_until("ctlplane-0 down", Duration::from_secs(30), || {
        backend_status(&state, "svc1", "api", "lab1-ctlplane-0") == "DOWN"
    });
    eprintln!("ctlplane-0 marked down after {took:?}");
    let seen = served_by(api, "/", 24);
    assert!(!seen.contains("lab1-ctlplane-0"), "{seen:?}");
    ctl0.failing.store(false, Ordering::SeqCst);

    // Removing the bootstrap: no new traffic to it, persisted, reported.
    let pid_before = std::fs::read_to_string(files.haproxy_pid()).unwrap();
    serve::remove_bootstrap(&state, "svc1").unwrap();
    assert!(serve::read_lb_state(&files).bootstrap_removed);
    let cfg = std::fs::read_to_string(files.haproxy_cfg()).unwrap();
    assert!(!cfg.contains("server lab1-bootstrap"));
    for _ in 0..24 {
        assert_ne!(get_body(api, "/").as_deref(), Some("lab1-bootstrap"));
        assert_ne!(get_body(mcs, "/").as_deref(), Some("lab1-bootstrap"));
    }
    // A graceful reload keeps the master.
    assert_eq!(
        std::fs::read_to_string(files.haproxy_pid()).unwrap(),
        pid_before
    );
    assert_eq!(
        backend_status(&state, "svc1", "api", "lab1-bootstrap"),
        "removed"
    );

    // A killed HAProxy is restarted by serve.
    let pid: i32 = pid_before.trim().parse().unwrap();
    // SAFETY: killing the HAProxy this test's serve started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    wait_until("haproxy restarted", Duration::from_secs(20), || {
        std::fs::read_to_string(files.haproxy_pid())
            .map(|p| p != pid_before)
            .unwrap_or(false)
            && get_body(api, "/readyz").is_some()
    });
    // The restart keeps the bootstrap out.
    assert!(!served_by(api, "/", 12).contains("lab1-bootstrap"));

    let status = serve::services_status(&state, "svc1").unwrap();
    assert!(status.serve_running);
    assert!(status.host_dns.configured);
    assert_eq!(
        status.http.url.as_deref(),
        Some("http://127.77.10.1:21080/")
    );

    // Destroy's hook: HAProxy stopped, DNS block gone, hosts file as it was.
    let pid: i32 = std::fs::read_to_string(files.haproxy_pid())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    serve::forget_cluster(&state, "svc1").unwrap();
    assert_eq!(std::fs::read(&hosts).unwrap(), original);
    assert!(!Path::new(&format!("/proc/{pid}")).exists() || !is_haproxy(pid));
    assert!(get_body(api, "/readyz").is_none());
    // serve does not bring it back while the directory still exists...
    std::thread::sleep(Duration::from_secs(3));
    assert!(get_body(api, "/readyz").is_none());
    assert!(!files.haproxy_pid().exists());
    // ...and destroy then removes the directory.
    std::fs::remove_dir_all(files.path()).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(std::fs::read(&hosts).unwrap(), original);
}

fn is_haproxy(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim() == "haproxy")
        .unwrap_or(false)
}

#[test]
fn a_destroyed_directory_stops_its_haproxy_and_dns() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let state = StateDir { root: root.clone() };
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, "127.0.0.1 localhost\n").unwrap();
    let a = loopback_plan("svc2", 20, 22000, true);
    let b = loopback_plan("svc3", 30, 23000, false);
    let _ba = start_backends(&a);
    let _serve = start_serve(&root, &hosts, 22080);
    write_plan(&root, &a);
    write_plan(&root, &b);
    let api_a: SocketAddr = "127.77.20.2:22001".parse().unwrap();
    let api_b: SocketAddr = "127.77.30.2:23001".parse().unwrap();
    wait_until("both clusters served", Duration::from_secs(20), || {
        let text = std::fs::read_to_string(&hosts).unwrap();
        get_body(api_a, "/readyz").is_some()
            && std::net::TcpStream::connect(api_b).is_ok()
            && text.contains("api.svc2.lab.test")
            && text.contains("api.svc3.lab.test")
    });
    // svc3 checks /readyz over HTTPS: the plain-HTTP stand-ins are not started
    // for it, so its frontend is open but has no backend up.
    let cfg_b = std::fs::read_to_string(state.cluster("svc3").haproxy_cfg()).unwrap();
    assert!(cfg_b.contains("check check-ssl verify none"));

    // Destroy without the hook: the directory disappears; serve notices.
    std::fs::remove_dir_all(root.join("clusters/svc2")).unwrap();
    wait_until("svc2 stopped", Duration::from_secs(10), || {
        get_body(api_a, "/readyz").is_none()
            && !std::fs::read_to_string(&hosts).unwrap().contains("svc2")
    });
    assert!(std::fs::read_to_string(&hosts)
        .unwrap()
        .contains("api.svc3.lab.test"));
    serve::forget_cluster(&state, "svc3").unwrap();
    assert_eq!(
        std::fs::read_to_string(&hosts).unwrap(),
        "127.0.0.1 localhost\n"
    );
}

/// Set the soft open-file limit of `pid` (the hard one kept); the old soft one.
fn set_soft_nofile(pid: u32, soft: u64) -> u64 {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reading the limits of the serve child this test started.
    assert_eq!(
        unsafe { libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) },
        0
    );
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: old.rlim_max,
    };
    // SAFETY: as above, lowering or restoring its soft limit.
    assert_eq!(
        unsafe { libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()) },
        0
    );
    old.rlim_cur
}

#[test]
fn out_of_descriptors_is_no_cluster_gone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let state = StateDir { root: root.clone() };
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, "127.0.0.1 localhost\n").unwrap();
    let plan = loopback_plan("svc4", 40, 24000, true);
    let _backends = start_backends(&plan);
    let serve = start_serve(&root, &hosts, 24080);
    let pid = serve.0.id();
    let log = root.with_extension("log");
    write_plan(&root, &plan);
    let api: SocketAddr = "127.77.40.2:24001".parse().unwrap();
    wait_until("svc4 served", Duration::from_secs(20), || {
        get_body(api, "/readyz").is_some()
            && std::fs::read_to_string(&hosts)
                .unwrap()
                .contains("api.svc4.lab.test")
    });
    let files = state.cluster("svc4");
    let haproxy = std::fs::read_to_string(files.haproxy_pid()).unwrap();

    // serve raised its soft limit when it started.
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f[3], f[4], "soft limit not at the hard one: {line}");

    // Every descriptor number below the soft limit in use: the next scan
    // cannot open the state directory (set again while serve closes one).
    let lowest_free = || {
        let used: BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        (0..).find(|n| !used.contains(n)).unwrap()
    };
    let before = set_soft_nofile(pid, lowest_free());
    let mut failed = false;
    for _ in 0..100 {
        let text = std::fs::read_to_string(&log).unwrap();
        if text.contains("scan failed") {
            failed = true;
            break;
        }
        set_soft_nofile(pid, lowest_free());
        std::thread::sleep(Duration::from_millis(100));
    }
    set_soft_nofile(pid, before);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("cluster gone"), "{text}");
    assert!(failed, "no failed scan logged:\n{text}");
    assert!(
        text.contains("Too many open files"),
        "the scan's error names the cause:\n{text}"
    );
    wait_until("the scans recover", Duration::from_secs(20), || {
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("scan succeeded again")
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("cluster gone"), "{text}");
    // The same HAProxy serves on; host DNS is as it was.
    assert_eq!(
        std::fs::read_to_string(files.haproxy_pid()).unwrap(),
        haproxy
    );
    assert!(is_haproxy(haproxy.trim().parse().unwrap()));
    assert!(get_body(api, "/readyz").is_some());
    assert!(std::fs::read_to_string(&hosts)
        .unwrap()
        .contains("api.svc4.lab.test"));
    assert!(files.host_dns().is_file());
    serve::forget_cluster(&state, "svc4").unwrap();
}

#[test]
fn a_failed_haproxy_start_is_retried_without_a_new_plan() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let state = StateDir { root: root.clone() };
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, "127.0.0.1 localhost\n").unwrap();
    // The real HAProxy, its configuration check failing while `refuse` exists
    // (as it does when serve is out of descriptors).
    let refuse = dir.path().join("refuse");
    let wrapper = dir.path().join("haproxy");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ -e {r} ] && [ \"$1\" = -c ] && {{ echo injected failure >&2; exit 1; }}\nexec {h} \"$@\"\n",
            r = refuse.display(),
            h = serve::haproxy::binary().unwrap().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(&refuse, "").unwrap();
    let plan = loopback_plan("svc5", 50, 25000, true);
    let _backends = start_backends(&plan);
    let _serve = start_serve_with(&root, &hosts, 25080, |c| {
        c.env("SHIFTLAB_HAPROXY", &wrapper);
    });
    write_plan(&root, &plan);
    let log = root.with_extension("log");
    wait_until("the failed start logged", Duration::from_secs(20), || {
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("injected failure")
    });
    // The plan stays as it is; the next retry starts it.
    std::fs::remove_file(&refuse).unwrap();
    let api: SocketAddr = "127.77.50.2:25001".parse().unwrap();
    wait_until(
        "haproxy started on a retry",
        Duration::from_secs(30),
        || get_body(api, "/readyz").is_some(),
    );
    assert!(is_haproxy(
        std::fs::read_to_string(state.cluster("svc5").haproxy_pid())
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    ));
    serve::forget_cluster(&state, "svc5").unwrap();
}

#[test]
fn a_failed_dns_removal_keeps_its_record_for_destroy() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let state = StateDir { root: root.clone() };
    let hosts = dir.path().join("hosts");
    let original = "127.0.0.1 localhost\n";
    std::fs::write(&hosts, original).unwrap();
    let plan = loopback_plan("svc6", 60, 26000, true);
    let _serve = start_serve(&root, &hosts, 26080);
    write_plan(&root, &plan);
    let files = state.cluster("svc6");
    wait_until("svc6's host dns", Duration::from_secs(20), || {
        files.host_dns().is_file()
    });
    // The hosts file cannot be read (a directory in its place): removal fails.
    let aside = dir.path().join("hosts.aside");
    std::fs::rename(&hosts, &aside).unwrap();
    std::fs::create_dir(&hosts).unwrap();
    let e = serve::forget_cluster(&state, "svc6").unwrap_err();
    assert!(
        format!("{e:#}").contains("removing host dns of svc6"),
        "{e:#}"
    );
    assert!(
        files.host_dns().is_file(),
        "the record went without its entries"
    );
    // Once the file is back, destroy's hook removes the entries after all.
    std::fs::remove_dir(&hosts).unwrap();
    std::fs::rename(&aside, &hosts).unwrap();
    assert!(std::fs::read_to_string(&hosts)
        .unwrap()
        .contains("api.svc6.lab.test"));
    serve::forget_cluster(&state, "svc6").unwrap();
    assert_eq!(std::fs::read_to_string(&hosts).unwrap(), original);
    assert!(!files.host_dns().exists());
}

#[test]
fn the_control_socket_caps_its_connections() {
    use serve::control::{request, Request};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state");
    let state = StateDir { root: root.clone() };
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, "").unwrap();
    let _serve = start_serve(&root, &hosts, 27080);
    wait_until("the control socket", Duration::from_secs(10), || {
        request(&state, &Request::Ping).is_ok_and(|r| r.is_some())
    });
    // 32 connections that never send their line hold every place...
    let held: Vec<_> = (0..32)
        .map(|_| std::os::unix::net::UnixStream::connect(state.serve_socket()).unwrap())
        .collect();
    wait_until("a 33rd closed unanswered", Duration::from_secs(10), || {
        request(&state, &Request::Ping).is_err()
    });
    // ...until they go.
    drop(held);
    wait_until("answered again", Duration::from_secs(10), || {
        request(&state, &Request::Ping).is_ok_and(|r| r.is_some_and(|r| r.ok))
    });
    let log = std::fs::read_to_string(root.with_extension("log")).unwrap();
    assert!(
        log.contains("control connections refused over the cap"),
        "{log}"
    );
}
