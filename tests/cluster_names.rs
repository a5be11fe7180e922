//! Names are not paths: every entry point that takes a cluster name refuses anything
//! but a valid one (exit 2, nothing touched), and destroy removes exactly one direct
//! child of `<state>/clusters/`.

mod common;

use std::path::Path;

use common::{shiftlab, tree};

/// A home with two clusters' state, a precious directory outside the state, and a
/// cluster entry that is a symbolic link to it.
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for c in ["lab1", "keep"] {
        let d = h.join("state/clusters").join(c);
        std::fs::create_dir_all(d.join("assets/auth")).unwrap();
        std::fs::write(d.join("assets/auth/kubeconfig"), "secret").unwrap();
        std::fs::write(d.join("bmc-password"), "secret").unwrap();
    }
    std::fs::create_dir_all(h.join("precious")).unwrap();
    std::fs::write(h.join("precious/data"), "mine").unwrap();
    std::os::unix::fs::symlink(h.join("precious"), h.join("state/clusters/linked")).unwrap();
    home
}

fn bad_names(h: &Path) -> Vec<String> {
    [
        "",
        ".",
        "..",
        "/tmp/x",
        "a/../b",
        "a/b",
        "../precious",
        "é",
        "labé",
        "Lab1",
        "lab1/",
        "a23456789012345678901234567890123",
    ]
    .map(String::from)
    .into_iter()
    .chain([h.join("precious").display().to_string()])
    .collect()
}

#[test]
fn every_entry_point_refuses_a_bad_name_and_touches_nothing() {
    let home = home();
    let h = home.path();
    let before = tree(h);
    let entry_points: &[&[&str]] = &[
        &["destroy", "cluster", "NAME", "-c", "test:///default"],
        &["status", "NAME", "-c", "test:///default"],
        &["approve-csrs", "NAME"],
        &["serve", "forget", "NAME"],
        &["serve", "notify", "NAME"],
        &["serve", "remove-bootstrap", "NAME"],
        &["serve", "status", "NAME"],
        &["bmc", "--cluster", "NAME"],
        &["env", "NAME"],
        &["ssh", "NAME", "worker-0"],
        &["console", "NAME", "worker-0", "-c", "test:///default"],
        &["gather", "NAME", "--out", "g.tar.gz"],
        &["stop", "NAME", "-c", "test:///default"],
        &["start", "NAME", "-c", "test:///default"],
        &["scale", "NAME", "--workers", "2", "-f", "lab1.yaml"],
    ];
    for name in bad_names(h) {
        for args in entry_points {
            let args: Vec<&str> = args
                .iter()
                .map(|a| if *a == "NAME" { name.as_str() } else { a })
                .collect();
            let out = shiftlab(&args, h);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains("not a valid cluster name"), "{args:?}: {err}");
            assert_eq!(tree(h), before, "{args:?} changed the state");
        }
    }
}

#[test]
fn destroy_removes_exactly_its_own_state() {
    let home = home();
    let h = home.path();
    let out = shiftlab(&["destroy", "cluster", "lab1", "-c", "test:///default"], h);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!h.join("state/clusters/lab1").exists());
    assert!(h.join("state/clusters/keep/bmc-password").is_file());
    assert!(h.join("precious/data").is_file());
}

#[test]
fn destroy_of_a_symlinked_cluster_dir_removes_the_link_only() {
    let home = home();
    let h = home.path();
    let out = shiftlab(
        &["destroy", "cluster", "linked", "-c", "test:///default"],
        h,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(h.join("state/clusters/linked").symlink_metadata().is_err());
    assert_eq!(
        std::fs::read_to_string(h.join("precious/data")).unwrap(),
        "mine"
    );
    assert!(h.join("state/clusters/keep/bmc-password").is_file());
}
