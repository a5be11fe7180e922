//! The corpus of bad cluster files: each must exit 2 with a message naming its field
//! and saying what is wrong, never panic, and write nothing.

mod common;

use std::fs;

#[test]
fn every_bad_input_is_rejected_with_its_field() {
    let dir = common::repo().join("tests/bad");
    let mut cases: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 40, "the corpus shrank to {}", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let text = fs::read_to_string(case).unwrap();
        let header = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
                .unwrap_or_else(|| panic!("{}: no `# {key}:` line", case.display()))
                .to_string()
        };
        let (field, fragment) = (header("expect-field"), header("expect"));
        let home = tempfile::tempdir().unwrap();
        for args in [
            vec!["plan", "-f", case.to_str().unwrap()],
            vec!["plan", "-f", case.to_str().unwrap(), "-o", "json"],
            vec![
                "create",
                "install-config",
                "-f",
                case.to_str().unwrap(),
                "--dir",
                "out",
            ],
        ] {
            let out = common::shiftlab(&args, home.path());
            let stderr = String::from_utf8_lossy(&out.stderr);
            let name = case.file_name().unwrap().to_string_lossy();
            let wanted_line = format!("- {field}: ");
            if out.status.code() != Some(2) {
                failures.push(format!(
                    "{name} {args:?}: exit {:?}, stderr: {stderr}",
                    out.status.code()
                ));
            } else if !stderr
                .lines()
                .any(|l| l.contains(&wanted_line) && l.contains(&fragment))
            {
                failures.push(format!(
                    "{name}: no line naming `{field}` with {fragment:?} in:\n{stderr}"
                ));
            }
            if stderr.contains("panicked") {
                failures.push(format!("{name}: panicked: {stderr}"));
            }
            if !out.stdout.is_empty() {
                failures.push(format!("{name}: printed a plan for an invalid file"));
            }
        }
        let left = common::tree(home.path());
        if !left.is_empty() {
            failures.push(format!("{}: wrote {left:?}", case.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn all_errors_are_reported_at_once() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("many.yaml");
    fs::write(
        &file,
        "cluster: Bad_Name\nmethod: nope\nctlplanes: 2\nnetwork:\n  cidr: 100.64.0.0/24\nwrokers: 1\n",
    )
    .unwrap();
    let out = common::shiftlab(&["plan", "-f", file.to_str().unwrap()], home.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for field in [
        "cluster:",
        "method:",
        "ctlplanes:",
        "network.cidr:",
        "wrokers:",
        "pull_secret:",
    ] {
        assert!(
            stderr.contains(&format!("- {field}")),
            "{field} missing from:\n{stderr}"
        );
    }
    assert!(stderr.contains("has 6 errors"), "{stderr}");
}

/// A mistyped `backend:` hides nothing of the `kubevirt:` section: its own
/// errors are reported with the backend's, and no "backend is not kubevirt".
#[test]
fn a_mistyped_backend_hides_no_kubevirt_error() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("typo.yaml");
    let fixtures = common::repo().join("tests/fixtures");
    fs::write(
        &file,
        format!(
            "cluster: lab1\npull_secret: {}\nbackend: kubevrit\nkubevirt:\n  kubeconfig: {}\n  http_url: http://192.0.2.10:8080\n  namespace: Bad_NS\n  vlan: 5000\n",
            fixtures.join("pull-secret.json").display(),
            fixtures.join("kubevirt/kubeconfig").display(),
        ),
    )
    .unwrap();
    let out = common::shiftlab(&["plan", "-f", file.to_str().unwrap()], home.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in [
        "- backend: \"kubevrit\" is not one of libvirt, kubevirt",
        "- kubevirt.namespace: \"Bad_NS\" is not a namespace name",
        "- kubevirt.vlan: 5000 is not a VLAN id (1-4094)",
    ] {
        assert!(stderr.contains(line), "{line:?} missing from:\n{stderr}");
    }
    assert!(!stderr.contains("backend is not kubevirt"), "{stderr}");
    assert!(stderr.contains("has 3 errors"), "{stderr}");
}

/// `--force` lets a control plane under 8 GiB through with a warning, on plan and
/// create; never assisted-service's gate (that agent install would not finish).
#[test]
fn force_overrides_the_memory_floor_but_not_the_agent_gate() {
    let bad = common::repo().join("tests/bad");
    let small = bad.join("ctlplane-memory-below-8gib.yaml");
    let home = tempfile::tempdir().unwrap();
    let out = common::shiftlab(
        &["plan", "-f", small.to_str().unwrap(), "--force"],
        home.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: ctlplane.memory: 6144 MiB is below the 8192 MiB")
            && stderr.contains("(going on: --force)"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("lab1-ctlplane-0"));
    let out = common::shiftlab(
        &[
            "create",
            "install-config",
            "-f",
            small.to_str().unwrap(),
            "--force",
            "--dir",
            "out",
        ],
        home.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let agent = bad.join("agent-below-assisted-gate.yaml");
    let out = common::shiftlab(
        &["plan", "-f", agent.to_str().unwrap(), "--force"],
        home.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("master gate of 16384 MiB"));
}

#[test]
fn a_missing_cluster_file_is_bad_usage() {
    let home = tempfile::tempdir().unwrap();
    let out = common::shiftlab(&["plan", "-f", "nope.yaml"], home.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the cluster file"));
}

#[test]
fn bad_flags_exit_2() {
    let home = tempfile::tempdir().unwrap();
    let out = common::shiftlab(&["plan", "--nope"], home.path());
    assert_eq!(out.status.code(), Some(2));
}

/// A malformed or misplaced `-P` is bad usage on every command that reads a
/// cluster file: exit 2, the argument named with what is valid, its value (which
/// may be a password) never repeated, nothing written.
#[test]
fn bad_params_exit_2_on_every_command_naming_the_argument() {
    let home = tempfile::tempdir().unwrap();
    let kcli = common::repo().join("examples/kcli-params.yml");
    let kcli = kcli.to_str().unwrap();
    let bad: [(&str, &str); 4] = [
        ("workers", "- -P workers: no `=`: write -P KEY=VALUE"),
        ("=s3cr3tpw", "- -P =VALUE: the KEY before `=` is empty"),
        ("ctlplane..memory=s3cr3tpw", "- -P ctlplane..memory: `ctlplane..memory` is not a KEY: a KEY is a dotted path of names"),
        // kcli's `network: NAME` is a string: nothing goes under it.
        ("network.cidr=192.168.7.0/24", "- -P network.cidr: `network` is a string in the cluster file, not a mapping"),
    ];
    let commands: Vec<Vec<&str>> = vec![
        vec!["plan"],
        vec!["plan", "-o", "json"],
        vec!["create", "install-config"],
        vec!["create", "infra"],
        vec!["create", "cluster"],
        vec!["create", "manifests"],
        vec!["scale", "kcli", "--workers", "1"],
        vec!["doctor"],
        vec!["render", "--backend", "kubevirt", "--dir", "out"],
        vec!["destroy", "cluster"],
    ];
    for command in &commands {
        for (param, wanted) in bad {
            let mut args = command.clone();
            args.extend(["-f", kcli, "-P", "workers=1", "-P", param]);
            let out = common::shiftlab(&args, home.path());
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains(wanted),
                "{args:?}: {wanted:?} not in:\n{stderr}"
            );
            assert!(stderr.contains("has 1 error:"), "{args:?}: {stderr}");
            assert!(!stderr.contains("s3cr3tpw"), "{args:?}: {stderr}");
            assert!(out.stdout.is_empty(), "{args:?} printed something");
        }
    }
    // An unknown key from -P gets the file's diagnostic, saying where it came from.
    let out = common::shiftlab(&["plan", "-f", kcli, "-P", "wrokers=3"], home.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("- wrokers (from -P): unknown key; did you mean `workers`?"),
        "{stderr}"
    );
    // -P overrides a file: without one it is bad usage.
    let out = common::shiftlab(&["doctor", "-P", "workers=3"], home.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--file <FILE>"));
    let left = common::tree(home.path());
    assert!(left.is_empty(), "wrote {left:?}");
}

/// A log filter tracing cannot read is bad usage, not ignored: exit 2, naming
/// the variable, its value and the syntax; the command does not run.
#[test]
fn an_invalid_shiftlab_log_is_an_error_naming_it() {
    let home = tempfile::tempdir().unwrap();
    let file = common::rehearsal_file(home.path(), "");
    let run = |value: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_shiftlab"))
            .args(["plan", "-f", &file])
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("SHIFTLAB_HOME", home.path().join("state"))
            .env("SHIFTLAB_LOG", value)
            .output()
            .unwrap()
    };
    for bad in ["shiftlab=loud", "info,[unclosed"] {
        let out = run(bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(
            err.contains(&format!("SHIFTLAB_LOG={bad:?}")) && err.contains("TARGET=LEVEL"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "the plan was printed: {bad}");
    }
    for good in ["debug", "warn,shiftlab=trace", ""] {
        let out = run(good);
        assert_eq!(out.status.code(), Some(0), "{good}: {out:?}");
    }
}

/// `-v` adds info lines about the command's main steps, on stderr only;
/// SHIFTLAB_LOG decides over it.
#[test]
fn v_adds_the_commands_steps_and_shiftlab_log_decides_over_it() {
    let home = tempfile::tempdir().unwrap();
    let file = common::rehearsal_file(home.path(), "");
    let run = |args: &[&str], log: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_shiftlab"));
        c.args(args)
            .args(["plan", "-f", &file])
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("SHIFTLAB_HOME", home.path().join("state"))
            .env_remove("SHIFTLAB_LOG");
        if let Some(l) = log {
            c.env("SHIFTLAB_LOG", l);
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        (out.stdout, String::from_utf8(out.stderr).unwrap())
    };
    let (quiet_out, quiet) = run(&[], None);
    assert!(!quiet.contains("INFO"), "{quiet}");
    let (v_out, v) = run(&["-v"], None);
    assert_eq!(v_out, quiet_out, "the log never reaches stdout");
    for step in ["state directory", "cluster file", "cluster lab1"] {
        assert!(v.contains("INFO") && v.contains(step), "{step}: {v}");
    }
    assert!(run(&[], Some("info")).1.contains("cluster file"));
    assert!(!run(&["-v"], Some("error")).1.contains("INFO"));
}
