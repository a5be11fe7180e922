//! Work by name (issue 28, items 2 and 3): a command on an existing cluster
//! takes its name alone and loads the cluster file its install recorded; an
//! unknown name says where shiftlab looked and where the cluster is instead;
//! `list` shows the state directory's clusters with or without libvirt;
//! `create install-config --dir` and `render` write nothing into the state.

mod common;

use std::path::Path;

use common::{rehearsal_file, shiftlab, tree};

fn run(h: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = shiftlab(args, h);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn create_by_name_loads_the_recorded_file_as_it_was_read() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = rehearsal_file(h, "workers: 1\n");
    let (code, _, err) = run(
        h,
        &["create", "install-config", "-f", &file, "-P", "workers=2"],
    );
    assert_eq!(code, Some(0), "{err}");
    let recorded = h.join("state/clusters/lab1/cluster-file.json");
    let mode = std::fs::metadata(&recorded).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // The file gone, and a new one of another cluster in its place: the name
    // alone is the file as read then, with its -P (another worker count would
    // be refused as a changed cluster file).
    std::fs::remove_file(&file).unwrap();
    let (code, _, err) = run(h, &["create", "install-config", "lab1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("install-config is done already"), "{err}");
    // A file with a name: it must be that cluster's.
    let other = h.join("other.yaml");
    std::fs::write(&other, "cluster: lab2\ndomain: lab.test\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\n").unwrap();
    let before = tree(h);
    let (code, _, err) = run(
        h,
        &["create", "infra", "lab1", "-f", other.to_str().unwrap()],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("other.yaml is the file of cluster lab2, not lab1"),
        "{err}"
    );
    // Neither: clap's usage error names NAME.
    let (code, _, err) = run(h, &["create", "manifests"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("<NAME>"), "{err}");
    // scale takes the name alone too: the recorded file is loaded (and the
    // scale refused further on, this lab having no VMs yet).
    let (code, _, err) = run(h, &["scale", "lab1", "--workers", "3"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("create infra?"), "{err}");
    assert_eq!(tree(h), before, "nothing changed by the refusals");
}

#[test]
fn wait_for_only_waits() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // A UPI rehearsal with a mirror: bootstrap-complete comes after release,
    // manifests, ignition and infra.
    let file = rehearsal_file(h, "mirror: http://127.0.0.1:9/\n");
    let (code, _, err) = run(h, &["create", "install-config", "-f", &file]);
    assert_eq!(code, Some(0), "{err}");
    let before = tree(h);
    // Where `create bootstrap-complete` would fetch the release first, the
    // wait reaches nothing and says what is not done.
    let (code, _, err) = run(h, &["wait-for", "bootstrap-complete", "lab1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("wait-for bootstrap-complete only waits, and release is not done"),
        "{err}"
    );
    assert!(!err.contains("==> "), "{err}");
    assert_eq!(tree(h), before);
    // A lab has no install to wait for.
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = rehearsal_file(h, "");
    run(h, &["create", "install-config", "-f", &file]);
    let (code, _, err) = run(h, &["wait-for", "install-complete", "lab1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("target install-complete is not a target of flow lab"),
        "{err}"
    );
}

#[test]
fn an_unknown_name_says_where_it_was_looked_for_and_where_it_is() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // The user's default state directory has lab1; the command is given another.
    std::fs::create_dir_all(h.join(".local/share/shiftlab/clusters/lab1")).unwrap();
    let other = h.join("elsewhere");
    for args in [
        vec!["env", "lab1"],
        vec!["scale", "lab1", "--workers", "2"],
        vec!["create", "infra", "lab1"],
        vec!["wait-for", "install-complete", "lab1"],
    ] {
        let mut a = vec!["--state-dir", other.to_str().unwrap()];
        a.extend(&args);
        let (code, _, err) = run(h, &a);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "no cluster lab1 in {}/elsewhere/clusters",
                h.display()
            )),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(&format!(
                "; {}/.local/share/shiftlab has lab1 (--state-dir?)",
                h.display()
            )),
            "{args:?}: {err}"
        );
        assert!(!other.exists(), "{args:?} made {}", other.display());
    }
}

#[test]
fn list_shows_the_state_with_or_without_libvirt() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = rehearsal_file(h, "");
    run(h, &["create", "install-config", "-f", &file]);
    // A plan recorded (as infra records it) and no VMs on the host.
    let plan = shiftlab::plan::derive(&shiftlab::spec::load(Path::new(&file)).unwrap().spec);
    shiftlab::state::StateDir::resolve(Some(&h.join("state")))
        .cluster("lab1")
        .write_plan(&plan)
        .unwrap();
    let (code, out, err) = run(h, &["list", "-c", "test:///default"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("lab1 ") && l.contains("no VMs or network on test:///default")),
        "{out}"
    );
    // libvirt out of reach: the state's clusters still, and why on stderr.
    let (code, out, err) = run(
        h,
        &[
            "list",
            "-c",
            "test:///nonexistent/shiftlab-list.xml",
            "-o",
            "json",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("was not reached"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["cluster"], "lab1", "{v}");
    assert_eq!(v[0]["state"], true, "{v}");
    assert!(v[0]["nodes"].is_null(), "{v}");
}

#[test]
fn install_config_dir_and_render_write_no_state() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for example in ["upi.yaml", "ipi.yaml", "agent.yaml"] {
        let file = common::repo().join("examples").join(example);
        let out = h.join(example);
        let (code, _, err) = run(
            h,
            &[
                "create",
                "install-config",
                "-f",
                file.to_str().unwrap(),
                "--dir",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(code, Some(0), "{example}: {err}");
        assert!(out.join("install-config.yaml").is_file());
        assert!(!h.join("state").exists(), "{example}: {:?}", tree(h));
    }
    // Edited after the render: the next render takes it, nothing pinned.
    let file = rehearsal_file(h, "workers: 1\n");
    let dir = h.join("ic");
    let render = || {
        run(
            h,
            &[
                "create",
                "install-config",
                "-f",
                &file,
                "--dir",
                dir.to_str().unwrap(),
            ],
        )
    };
    assert_eq!(render().0, Some(0));
    rehearsal_file(h, "workers: 2\nnetwork:\n  cidr: 192.168.150.0/24\n");
    let (code, _, err) = render();
    assert_eq!(code, Some(0), "{err}");
    let text = std::fs::read_to_string(dir.join("install-config.yaml")).unwrap();
    assert!(text.contains("192.168.150.0/24"), "{text}");
    assert!(!h.join("state").exists(), "{:?}", tree(h));
    // render: the objects, and nothing in the state directory either.
    let kv = common::repo().join("tests/fixtures/kubevirt/pod.yaml");
    let (code, _, err) = run(
        h,
        &[
            "render",
            "--backend",
            "kubevirt",
            "-f",
            kv.to_str().unwrap(),
            "--dir",
            h.join("objects").to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(!tree(&h.join("objects")).is_empty());
    assert!(!h.join("state").exists(), "{:?}", tree(h));
}
