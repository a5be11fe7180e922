//! `create cluster`'s preflight through the binary, over recorded host facts
//! (`create --facts`, the form `doctor -o json` prints): a host with a network
//! overlap, without KVM for a real cluster, with too little memory, or without
//! `shiftlab serve` is refused with exit 4 and every problem named, before the
//! release is asked of the mirror (a loopback HTTP server that counts its
//! connections) and before any target starts. A good host goes on to the mirror.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A loopback "mirror" answering 404 to everything; returns its URL and the
/// count of connections it accepted.
fn mirror() -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = hits.clone();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let _ = s.read(&mut [0u8; 4096]);
            let _ = s.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (url, hits)
}

/// A real (not rehearsal) OKD UPI cluster in 192.168.150.0/24 from `mirror`.
fn cluster_file(h: &Path, mirror: &str) -> String {
    let f = h.join("lab1.yaml");
    std::fs::write(
        &f,
        format!(
            "cluster: lab1\ndomain: lab.test\ndistribution: okd\nversion: 4.17.0-okd-scos.1\nworkers: 2\n\
             ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k']\n\
             mirror: {mirror}\nnetwork:\n  cidr: 192.168.150.0/24\n"
        ),
    )
    .unwrap();
    f.display().to_string()
}

/// The good host of tests/fixtures/doctor, with libvirt's networks read (none)
/// and serve running, changed by `edit`; written to `<h>/<name>.json`.
fn facts(h: &Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> String {
    let p = common::repo().join("tests/fixtures/doctor/good-host.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    v["networks"] = serde_json::json!([]);
    v["serve_running"] = true.into();
    // Recorded for another cluster; create's preflight looks no name up.
    v["resolved"] = serde_json::json!([]);
    edit(&mut v);
    let out = h.join(format!("{name}.json"));
    std::fs::write(&out, v.to_string()).unwrap();
    out.display().to_string()
}

fn overlap(v: &mut serde_json::Value) {
    v["routes"] = serde_json::json!([{"iface": "eth1", "dest": "192.168.150.0/25"}]);
}
fn no_kvm(v: &mut serde_json::Value) {
    v["kvm_usable"] = false.into();
    v["kvm_reason"] = "/dev/kvm does not exist".into();
}
fn little_memory(v: &mut serde_json::Value) {
    v["memory_total_mib"] = 32768.into();
    v["memory_available_mib"] = 30000.into();
}
fn no_serve(v: &mut serde_json::Value) {
    v["serve_running"] = false.into();
}

/// What each problem says: its check and what was found.
const OVERLAP: &str =
    "network: network.cidr 192.168.150.0/24: overlaps the host route 192.168.150.0/25 via eth1";
const KVM: &str = "kvm: /dev/kvm does not exist (fix: ";
const MEMORY: &str =
    "memory: the nodes want 80.0 GiB together and the host has 32.0 GiB in all (fix: ";
const SERVE: &str = "serve: shiftlab serve is not running: the install waits through its load balancer (api, api-int:22623) or BMC, and would fail at bootstrap (fix: start it with `sudo shiftlab serve --install-unit`";

#[test]
fn a_host_that_cannot_take_the_cluster_is_refused_before_the_download() {
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, &[Edit], &[&str]); 5] = [
        ("overlap", &[overlap], &[OVERLAP]),
        ("no-kvm", &[no_kvm], &[KVM]),
        ("memory", &[little_memory], &[MEMORY]),
        ("no-serve", &[no_serve], &[SERVE]),
        (
            "all",
            &[overlap, no_kvm, little_memory, no_serve],
            &[OVERLAP, KVM, MEMORY, SERVE],
        ),
    ];
    for (name, edits, want) in cases {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let (url, hits) = mirror();
        let file = cluster_file(h, &url);
        let f = facts(h, name, |v| edits.iter().for_each(|e| e(v)));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_shiftlab"))
            .args(["create", "cluster", "-f", &file, "--facts", &f])
            .current_dir(h)
            .env("HOME", h)
            .env("SHIFTLAB_HOME", h.join("state"))
            .env("SHIFTLAB_CACHE", h.join("cache"))
            .env_remove("LIBVIRT_DEFAULT_URI")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{name}: {err}");
        assert!(
            err.contains(
                "preflight: the host cannot take lab1 (nothing was downloaded, run or created"
            ),
            "{name}: {err}"
        );
        for w in want {
            assert!(err.contains(w), "{name}: no {w:?} in {err}");
        }
        // Exactly the problems of the case, one line each.
        assert_eq!(err.matches("\n  - ").count(), want.len(), "{name}: {err}");
        assert_eq!(
            hits.load(Ordering::SeqCst),
            0,
            "{name}: the mirror was asked"
        );
        assert!(!h.join("cache").exists(), "{name}: something was cached");
        assert!(!err.contains("==> "), "{name}: a target started: {err}");
        let state = h.join("state/clusters/lab1/install-state.json");
        assert!(!state.exists(), "{name}: the install state was written");
    }
}

#[test]
fn warnings_go_on_to_the_release() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (url, hits) = mirror();
    let file = cluster_file(h, &url);
    // A rotational pool disk and an /etc/hosts problem: warned, not refused.
    let f = facts(h, "warned", |v| {
        v["pool_rotational"] = true.into();
        v["etc_hosts"] = "::1 localhost\n".into();
    });
    let out = common::shiftlab(&["create", "cluster", "-f", &file, "--facts", &f], h);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("preflight: warning: etcd-disk: "), "{err}");
    assert!(err.contains("preflight: warning: etc-hosts: "), "{err}");
    assert!(err.contains("==> release"), "{err}");
    // The mirror's 404 stops the release target: the download was tried.
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(hits.load(Ordering::SeqCst) > 0, "{err}");
}

/// `doctor -f` shows the checks create's preflight decides by, judged as
/// `create cluster` judges them: the same failures.
#[test]
fn doctor_with_the_file_fails_what_create_refuses() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = cluster_file(h, "http://127.0.0.1:9/");
    let f = facts(h, "all", |v| {
        [overlap, no_kvm, little_memory, no_serve]
            .iter()
            .for_each(|e| e(v))
    });
    let out = common::shiftlab(&["doctor", "-f", &file, "--facts", &f, "-o", "json"], h);
    assert_eq!(out.status.code(), Some(4));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut failing: Vec<String> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["severity"] == "fail")
        .map(|c| {
            format!(
                "{}: {}",
                c["id"].as_str().unwrap(),
                c["verdict"].as_str().unwrap()
            )
        })
        .collect();
    failing.sort();
    let mut want = vec![OVERLAP, KVM, MEMORY, SERVE];
    want.sort();
    assert_eq!(failing.len(), want.len(), "{failing:?}");
    for (got, w) in failing.iter().zip(&want) {
        let w = w.split(" (fix: ").next().unwrap();
        assert!(got.starts_with(w), "{got} is not {w}");
    }
}

/// A rehearsal without a release runs the shipped stand-in installer: a tool it
/// runs missing from the host is named with its Debian package, before anything
/// is built, materialized or recorded.
#[test]
fn a_rehearsal_names_the_stand_in_installers_missing_tools() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = h.join("sno1.yaml");
    std::fs::write(
        &file,
        "cluster: sno1\ndomain: lab.test\ndistribution: okd\nmethod: sno\nrehearsal: true\n\
         ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k']\n\
         network:\n  cidr: 192.168.150.0/24\n",
    )
    .unwrap();
    let file = file.display().to_string();
    let f = facts(h, "no-tools", |v| {
        v["commands"] = serde_json::json!(["bash", "jq", "curl", "virsh"]);
    });
    let out = common::shiftlab(&["create", "cluster", "-f", &file, "--facts", &f], h);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("rehearsal-tools: the sno rehearsal's stand-in installer runs commands not on PATH: dig (Debian package bind9-dnsutils), coreos-installer (Debian package coreos-installer), genisoimage (Debian package genisoimage) (fix: sudo apt-get install bind9-dnsutils coreos-installer genisoimage)"),
        "{err}"
    );
    assert_eq!(err.matches("\n  - ").count(), 1, "{err}");
    assert!(!err.contains("==> "), "a target started: {err}");
    assert!(!h.join("state/clusters/sno1/install-state.json").exists());
    // doctor -f judges the file as create cluster does.
    let out = common::shiftlab(&["doctor", "-f", &file, "--facts", &f, "-o", "json"], h);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c: Vec<&serde_json::Value> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"] == "rehearsal-tools")
        .collect();
    assert_eq!(c.len(), 1, "{v}");
    assert_eq!(c[0]["severity"], "fail", "{v}");
}

/// `storage: nfs` is served by NFS-Ganesha (src/host/nfs.rs): a host without
/// it fails doctor's nfs-server check, named with its Debian packages; with it
/// the check is ok; without NFS storage there is no such check.
#[test]
fn storage_nfs_needs_the_nfs_server_installed() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = cluster_file(h, "http://127.0.0.1:9/");
    let plain = std::fs::read_to_string(&file).unwrap();
    let nfs_file = h.join("nfs.yaml");
    std::fs::write(&nfs_file, format!("{plain}storage: nfs\n")).unwrap();
    let nfs_file = nfs_file.display().to_string();
    let check = |file: &str, commands: serde_json::Value| {
        let f = facts(h, "nfs", |v| v["commands"] = commands.clone());
        let out = common::shiftlab(&["doctor", "-f", file, "--facts", &f, "-o", "json"], h);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["id"] == "nfs-server")
            .cloned()
            .collect::<Vec<_>>()
    };
    let c = check(&nfs_file, serde_json::json!(["bash"]));
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0]["severity"], "fail", "{c:?}");
    assert!(
        c[0]["verdict"]
            .as_str()
            .unwrap()
            .contains("ganesha.nfsd (Debian packages nfs-ganesha nfs-ganesha-vfs)"),
        "{c:?}"
    );
    assert_eq!(
        c[0]["fix"], "sudo apt-get install nfs-ganesha nfs-ganesha-vfs",
        "{c:?}"
    );
    let c = check(&nfs_file, serde_json::json!(["bash", "ganesha.nfsd"]));
    assert_eq!(c[0]["severity"], "ok", "{c:?}");
    assert!(check(&file, serde_json::json!(["bash"])).is_empty());
}
