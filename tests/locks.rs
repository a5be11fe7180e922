//! Every command that changes a cluster takes its lock: while another shiftlab holds
//! it, they fail at once, say who holds it, and change nothing.

mod common;

use common::{shiftlab, tree};

#[test]
fn commands_that_change_a_cluster_wait_for_no_one_and_touch_nothing() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = common::rehearsal_file(h, "");
    let dir = h.join("state/clusters/lab1");
    std::fs::create_dir_all(dir.join("assets/auth")).unwrap();
    std::fs::write(dir.join("assets/auth/kubeconfig"), "secret").unwrap();
    // Another shiftlab (this test) is working on lab1.
    let held = shiftlab::state::StateDir {
        root: h.join("state"),
    }
    .cluster("lab1")
    .lock()
    .unwrap();
    let before = tree(h);
    for args in [
        vec!["destroy", "cluster", "lab1", "-c", "test:///default"],
        vec!["destroy", "cluster", "-f", &file],
        vec!["create", "infra", "-f", &file],
        vec!["create", "install-config", "-f", &file],
        vec!["serve", "forget", "lab1"],
        vec!["serve", "remove-bootstrap", "lab1"],
    ] {
        let out = shiftlab(&args, h);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "another shiftlab is working on lab1 (pid {})",
                std::process::id()
            )),
            "{args:?}: {err}"
        );
        assert_eq!(tree(h), before, "{args:?} changed something");
    }
    drop(held);
    // Free again: destroy goes ahead.
    let out = shiftlab(&["destroy", "cluster", "lab1", "-c", "test:///default"], h);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.exists());
}

#[test]
fn a_changed_cluster_file_is_refused_after_the_install_used_it() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let write = |workers: u32| common::rehearsal_file(h, &format!("workers: {workers}\n"));
    let f = write(2);
    let out = shiftlab(&["create", "install-config", "-f", &f], h);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = write(3);
    let before = tree(h);
    for args in [
        vec!["create", "ignition", "-f", &f],
        vec!["create", "infra", "-f", &f],
    ] {
        let out = shiftlab(&args, h);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("changed after install-config was done"),
            "{err}"
        );
        assert!(err.contains("nodes[lab1-worker-2]: added"), "{err}");
        assert_eq!(tree(h), before, "{args:?} changed something");
    }
}

#[test]
fn a_wait_for_the_host_lock_beats_off_a_terminal_with_its_holder() {
    use std::io::BufRead;
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = common::rehearsal_file(h, "");
    // Another shiftlab (this test) holds the host lock: create waits for it.
    let held = shiftlab::files::try_lock(&h.join("state/.host.lock"))
        .unwrap()
        .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_shiftlab"))
        .args(["create", "infra", "-f", &file])
        .current_dir(h)
        .env("HOME", h)
        .env("SHIFTLAB_HOME", h.join("state"))
        .env("SHIFTLAB_HEARTBEAT_SECS", "1")
        .env_remove("LIBVIRT_DEFAULT_URI")
        .env_remove("XDG_DATA_HOME")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    // Bounded: the beat, or give up after 60 s.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    let beat = loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.starts_with("    still waiting for the host lock") => break Some(l),
            Ok(l) => seen.push(l),
            Err(_) => break None,
        }
    };
    // What it would do next is not this test's: stop the child we started.
    let _ = child.kill();
    child.wait().unwrap();
    reader.join().unwrap();
    drop(held);
    let beat = beat.unwrap_or_else(|| panic!("no heartbeat: {seen:?}"));
    assert!(
        beat.ends_with(&format!("): held by pid {}", std::process::id())),
        "{beat}"
    );
}
