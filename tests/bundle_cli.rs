//! `shiftlab bundle`'s refusals through the binary: each before anything is
//! stopped or written (docs/bundles.md). Creating and restoring real bundles
//! needs real disks: tests/e2e/day2.sh.

mod common;

use std::path::Path;

fn recorded_lab(home: &Path, targets: &str) -> std::path::PathBuf {
    let f = common::rehearsal_file(home, "");
    let out = common::shiftlab(&["plan", "-f", &f, "-o", "json"], home);
    assert!(out.status.success());
    let dir = home.join("state/clusters/lab1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plan.json"), &out.stdout).unwrap();
    std::fs::write(
        dir.join("install-state.json"),
        format!("{{\"format\": 1, \"cluster\": \"lab1\", \"targets\": {{{targets}}}}}"),
    )
    .unwrap();
    dir
}

fn done(target: &str, at: u64) -> String {
    format!("\"{target}\": {{\"status\": \"done\", \"at\": {at}}}")
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn create_is_refused_within_the_first_rotation_with_stops_words() {
    let home = tempfile::tempdir().unwrap();
    let now = shiftlab::cluster::power::now();
    let dir = recorded_lab(
        home.path(),
        &format!(
            "{}, {}",
            done("ignition", now - 3 * 3600),
            done("install-complete", now - 2 * 3600)
        ),
    );
    let out = common::shiftlab(&["bundle", "create", "lab1"], home.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("stopping lab1 to bundle it")
            && err.contains("not stopping lab1")
            && err.contains("first rotation")
            && err.contains("--force"),
        "{err}"
    );
    assert!(!dir.join("power.json").exists(), "stopped anyway");
    assert!(
        !home.path().join("state/bundles").exists(),
        "wrote a bundle"
    );
}

#[test]
fn create_is_refused_on_an_install_under_way_before_anything_stops() {
    let home = tempfile::tempdir().unwrap();
    let now = shiftlab::cluster::power::now();
    let dir = recorded_lab(home.path(), &done("ignition", now - 30 * 3600));
    let out = common::shiftlab(&["bundle", "create", "lab1", "--force"], home.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not bundling lab1: its install has not finished"),
        "{err}"
    );
    assert!(!dir.join("power.json").exists(), "stopped anyway");
}

#[test]
fn names_are_checked_and_a_directory_without_manifest_is_not_restored() {
    let home = tempfile::tempdir().unwrap();
    let out = common::shiftlab(&["bundle", "create", "Lab_1"], home.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = common::shiftlab(&["bundle", "inspect", "Lab_1"], home.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Lab_1"), "{}", stderr(&out));

    let half = home.path().join("half");
    std::fs::create_dir_all(half.join("disks")).unwrap();
    std::fs::write(half.join(".shiftlab-bundle"), "lab1\n").unwrap();
    let out = common::shiftlab(&["bundle", "restore", half.to_str().unwrap()], home.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is no bundle: it has no bundle.json"), "{err}");
    assert!(!home.path().join("state/clusters").exists());
}

#[test]
fn a_manifest_reaching_outside_its_bundle_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let b = home.path().join("b");
    std::fs::create_dir_all(&b).unwrap();
    let m = serde_json::json!({
        "format": 1, "cluster": "lab1", "domain": "lab.test", "method": "upi",
        "release_version": null, "rehearsal": true, "created_at": 0, "installed_at": null,
        "certificates_expire": null,
        "nodes": [{"name": "lab1-ctlplane-0", "role": "ctlplane", "mac": "52:54:00:00:00:01",
                   "ip": "192.168.150.10", "disk": "../../etc/shadow"}],
        "files": [{"path": "../../etc/shadow", "sha256": "0".repeat(64), "bytes": 1}]
    });
    std::fs::write(b.join("bundle.json"), m.to_string()).unwrap();
    for cmd in ["restore", "verify"] {
        let out = common::shiftlab(&["bundle", cmd, b.to_str().unwrap()], home.path());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {err}");
        assert!(err.contains("not a plain relative path"), "{cmd}: {err}");
    }
    assert!(!home.path().join("state/clusters").exists());
}

#[test]
fn create_from_a_bundle_is_refused_when_the_file_plans_another_topology() {
    use sha2::{Digest, Sha256};
    let home = tempfile::tempdir().unwrap();
    let f = common::rehearsal_file(home.path(), "workers: 1\n");
    let out = common::shiftlab(&["plan", "-f", &f, "-o", "json"], home.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let b = home.path().join("b");
    std::fs::create_dir_all(b.join("state")).unwrap();
    std::fs::create_dir_all(b.join("disks")).unwrap();
    let mut files = Vec::new();
    let mut nodes = Vec::new();
    for n in plan["nodes"].as_array().unwrap() {
        let name = n["name"].as_str().unwrap();
        let disk = format!("disks/{name}.qcow2");
        std::fs::write(b.join(&disk), name).unwrap();
        nodes.push(
            serde_json::json!({"name": name, "role": n["role"], "mac": n["mac"],
                                      "ip": n["ip"], "disk": disk}),
        );
        files.push((disk, name.as_bytes().to_vec()));
    }
    std::fs::write(b.join("state/plan.json"), &out.stdout).unwrap();
    files.push(("state/plan.json".into(), out.stdout.clone()));
    let files: Vec<_> = files
        .iter()
        .map(|(p, bytes)| {
            serde_json::json!({"path": p, "sha256": hex::encode(Sha256::digest(bytes)),
                               "bytes": bytes.len()})
        })
        .collect();
    let m = serde_json::json!({
        "format": 1, "cluster": "lab1", "domain": "lab.test", "method": plan["method"],
        "release_version": null, "rehearsal": true, "created_at": 0, "installed_at": null,
        "certificates_expire": null, "nodes": nodes, "files": files
    });
    std::fs::write(b.join("bundle.json"), m.to_string()).unwrap();
    let before = common::tree(home.path());

    let f = common::rehearsal_file(home.path(), "workers: 2\n");
    let args = [
        "create",
        "cluster",
        "-f",
        &f,
        "--from-bundle",
        b.to_str().unwrap(),
    ];
    let out = common::shiftlab(&args, home.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the cluster file does not plan the bundle's cluster")
            && err.contains("node lab1-worker-1: the file's worker, the bundle's no such node"),
        "{err}"
    );
    assert_eq!(
        common::tree(home.path()),
        before,
        "the refusal changed something"
    );

    // --from-bundle restores what a cluster file plans: without one, refused by clap.
    let out = common::shiftlab(
        &[
            "create",
            "cluster",
            "lab1",
            "--from-bundle",
            b.to_str().unwrap(),
        ],
        home.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
