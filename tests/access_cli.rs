//! `shiftlab env`, `ssh` and `console` through the binary: the cluster and node
//! names checked before anything runs, the lines they print.

mod common;

use std::path::Path;

fn with_plan(home: &Path) {
    let f = common::rehearsal_file(home, "workers: 1\n");
    let out = common::shiftlab(&["plan", "-f", &f, "-o", "json"], home);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = home.join("state/clusters/lab1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plan.json"), &out.stdout).unwrap();
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn env_prints_the_kubeconfig_once_there_is_one() {
    let home = tempfile::tempdir().unwrap();
    let out = common::shiftlab(&["env", "lab1"], home.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no cluster lab1"),
        "{}",
        text(&out.stderr)
    );

    with_plan(home.path());
    let out = common::shiftlab(&["env", "lab1"], home.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("has no kubeconfig yet"));

    let kc = home
        .path()
        .join("state/clusters/lab1/assets/auth/kubeconfig");
    std::fs::create_dir_all(kc.parent().unwrap()).unwrap();
    std::fs::write(&kc, "apiVersion: v1\n").unwrap();
    let out = common::shiftlab(&["env", "lab1"], home.path());
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout),
        format!("export KUBECONFIG={}\n", kc.display())
    );
    let out = common::shiftlab(&["env", "lab1", "-o", "json"], home.path());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["KUBECONFIG"], kc.display().to_string());
}

#[test]
fn bad_names_are_refused_before_anything_runs() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        &["env", "../etc"][..],
        &["ssh", "Lab_1", "worker-0"],
        &["console", "a/b", "worker-0"],
    ] {
        let out = common::shiftlab(args, home.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!home.path().join("state").exists());
    }
    with_plan(home.path());
    let out = common::shiftlab(&["ssh", "lab1", "worker-5", "--print"], home.path());
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(
        e.contains("no node \"worker-5\"") && e.contains("lab1-worker-0"),
        "{e}"
    );
    let out = common::shiftlab(&["console", "lab1", "../../x"], home.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no node"));
}

#[test]
fn ssh_logs_in_as_core_at_the_planned_address() {
    let home = tempfile::tempdir().unwrap();
    with_plan(home.path());
    let out = common::shiftlab(
        &[
            "ssh",
            "lab1",
            "worker-0",
            "--print",
            "--",
            "sudo",
            "crictl ps",
        ],
        home.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line = text(&out.stdout);
    let kh = home.path().join("state/clusters/lab1/known_hosts");
    assert!(
        line.starts_with("ssh -o StrictHostKeyChecking=accept-new"),
        "{line}"
    );
    assert!(
        line.contains(&format!("UserKnownHostsFile={}", kh.display())),
        "{line}"
    );
    // 192.168.126.0/24 is the default network; workers from .20.
    assert!(
        line.trim_end()
            .ends_with("-l core -- 192.168.126.20 sudo 'crictl ps'"),
        "{line}"
    );
    let out = common::shiftlab(
        &["ssh", "lab1", "worker-0", "-i", "/nonexistent/key"],
        home.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no key file"));
}
