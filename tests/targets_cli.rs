//! `shiftlab create <target>` through the binary: every target goes through the
//! same reach, records what it did, and a target the cluster file's flow lacks is
//! a clear error that changes nothing. (The targets that need libvirt run in the
//! sandbox e2e tests.)

mod common;

use std::path::Path;

use common::{rehearsal_file, shiftlab, tree};

/// Run shiftlab; its exit code and stderr.
fn run(h: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = shiftlab(args, h);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `create install-config -f FILE --dir <home>/DIR`.
fn install_config_into(h: &Path, file: &Path, dir: &str) -> (Option<i32>, String) {
    let dir = h.join(dir);
    run(
        h,
        &[
            "create",
            "install-config",
            "-f",
            file.to_str().unwrap(),
            "--dir",
            dir.to_str().unwrap(),
        ],
    )
}

fn install_state(h: &Path, cluster: &str) -> serde_json::Value {
    let p = h
        .join("state/clusters")
        .join(cluster)
        .join("install-state.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

#[test]
fn install_config_with_dir_is_reached_and_needs_no_release() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = common::repo().join("examples/upi.yaml");
    let (code, err) = install_config_into(h, &file, "out");
    assert_eq!(code, Some(0), "{err}");
    // Reached as a target of the upi flow: recorded, and its only predecessor-free
    // step ran alone (the release, a download, is not install-config's business).
    let s = install_state(h, "lab1");
    assert_eq!(s["flow"], "upi");
    assert_eq!(s["targets"]["install-config"]["status"], "done");
    assert!(s["targets"].get("release").is_none(), "{s}");
    assert!(err.contains("==> install-config"), "{err}");
    // What DIR got is what the install will use.
    let cluster = h.join("state/clusters/lab1");
    assert_eq!(
        std::fs::read(h.join("out/install-config.yaml")).unwrap(),
        std::fs::read(cluster.join("assets/install-config.yaml")).unwrap()
    );
    assert_eq!(
        std::fs::read(h.join("out/install-config.backup.yaml")).unwrap(),
        std::fs::read(cluster.join("install-config.backup.yaml")).unwrap()
    );
    // Asked again: done, not written again, exported again.
    let (code, err) = install_config_into(h, &file, "again");
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("install-config is done already"), "{err}");
    assert!(!err.contains("==> "), "{err}");
    assert!(h.join("again/install-config.yaml").is_file());
}

#[test]
fn a_target_the_flow_lacks_is_refused_and_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = rehearsal_file(h, "");
    let before = tree(h);
    // A rehearsal without a release is the lab: no installer, so no manifests.
    let (code, err) = run(h, &["create", "manifests", "-f", &file]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("manifests is not a target of lab (the lab without an install); its targets are: release, install-config, infra, workers"),
        "{err}"
    );
    assert_eq!(tree(h), before);
    // IPI has no manifests target of shiftlab's: the installer's `create
    // cluster` makes them. Said before anything is touched.
    let ipi = common::repo().join("examples/ipi.yaml");
    let before = tree(h);
    let (code, err) = run(h, &["create", "manifests", "-f", ipi.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("manifests is not a target of ipi (a bare-metal IPI install through the lab's BMC); its targets are: release, install-config, infra, install-complete"),
        "{err}"
    );
    assert_eq!(tree(h), before);
}

#[test]
fn the_lab_records_its_flow_and_install_config_pins_its_plan() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = rehearsal_file(h, "");
    let (code, err) = run(h, &["create", "install-config", "-f", &file]);
    assert_eq!(code, Some(0), "{err}");
    let s = install_state(h, "lab1");
    assert_eq!(s["flow"], "lab");
    assert_eq!(s["targets"]["install-config"]["status"], "done");
    // The same cluster file made an install (a mirror): refused, the lab's state kept.
    let file = rehearsal_file(h, "mirror: http://127.0.0.1:9/\n");
    let before = tree(h);
    let (code, err) = run(h, &["create", "manifests", "-f", &file]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("lab1 was begun as the lab without an install"),
        "{err}"
    );
    assert_eq!(tree(h), before);
}

/// The installer's state file holds the kubeadmin password and every CA key; the
/// real one writes it 0640 on every run (recorded), failed or not.
#[test]
fn the_installers_state_file_is_private_after_every_run_failed_or_not() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let v = "4.17.0-okd-scos.0";
    let fixture = common::repo().join("tests/fixtures/fake-openshift-install");
    std::fs::write(h.join("stream.json"), "{}").unwrap();
    let baked = h.join("openshift-install-baked");
    let st = std::process::Command::new(fixture.join("generate.sh"))
        .arg(&baked)
        .arg(v)
        .arg(format!("quay.io/okd/scos-release:{v}"))
        .arg(h.join("stream.json"))
        .status()
        .unwrap();
    assert!(st.success());
    // The fake, except that `create ignition-configs` fails after its run, as the
    // real `create cluster` did after writing its state file (recorded).
    let installer = h.join("openshift-install");
    std::fs::write(
        &installer,
        format!(
            "#!/bin/sh\nif [ \"$1 $2\" = 'create ignition-configs' ]; then\n\
             \t'{b}' \"$@\" || exit\n\techo 'level=fatal msg=failed after the state file' >&2\n\texit 1\nfi\n\
             exec '{b}' \"$@\"\n",
            b = baked.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&installer, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(h.join("image.qcow2"), "").unwrap();
    let file = h.join("lab1.yaml");
    std::fs::write(
        &file,
        format!(
            "cluster: lab1\ndomain: lab.test\ndistribution: okd\nversion: {v}\nrehearsal: true\n\
             openshift_install: {}\nimage: {}\n\
             ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k']\n\
             libvirt:\n  uri: test:///default\n",
            installer.display(),
            h.join("image.qcow2").display()
        ),
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let state = h.join("state/clusters/lab1/assets/.openshift_install_state.json");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;

    let (code, err) = run(h, &["create", "manifests", "-f", file]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(mode(&state), 0o600, "after create manifests");

    let (code, err) = run(h, &["create", "ignition", "-f", file]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("openshift-install create ignition-configs failed"),
        "{err}"
    );
    assert_eq!(
        mode(&state),
        0o600,
        "after a failed create ignition-configs"
    );
    let auth = h.join("state/clusters/lab1/assets/auth");
    for f in ["kubeadmin-password", "kubeconfig"] {
        assert_eq!(mode(&auth.join(f)), 0o600, "{f}");
    }
}

/// The release target reads the installer's stream before anything is fetched
/// or made: SCOS 10's `c10s` needs x86-64-v3, so `libvirt.cpu_model: Nehalem`
/// stops `create` there with the field, value, rule and missing features; under
/// TCG without a model the level is recorded for infra, which gives the nodes
/// Haswell-noTSX-IBRS.
#[test]
fn create_refuses_a_c10s_stream_on_a_v2_model_at_the_release_target() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let v = "4.17.0-okd-scos.0";
    let fixture = common::repo().join("tests/fixtures/fake-openshift-install");
    // OKD's SCOS 10 stream, the x86_64 qemu artifact as the installer carries it
    // (openshift/installer data/data/coreos/scos.json).
    std::fs::write(
        h.join("stream.json"),
        r#"{"stream":"c10s","architectures":{"x86_64":{"artifacts":{"qemu":{"release":"10.0.20250628-0","formats":{"qcow2.gz":{"disk":{"location":"https://rhcos.mirror.openshift.com/art/storage/prod/streams/c10s/builds/10.0.20250628-0/x86_64/scos-10.0.20250628-0-qemu.x86_64.qcow2.gz","sha256":"5183854e0496825c129ca07c4134ea2c51d8cff80906e76fb00af8a6d0d71ebc","uncompressed-sha256":"e990c2f2e2d42a84d70664be3815eb4db6a0b561a93e2cc11b8dd29871c49270"}}}}}}}}"#,
    )
    .unwrap();
    let installer = h.join("openshift-install");
    let st = std::process::Command::new(fixture.join("generate.sh"))
        .arg(&installer)
        .arg(v)
        .arg(format!("quay.io/okd/scos-release:{v}"))
        .arg(h.join("stream.json"))
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(h.join("image.qcow2"), "").unwrap();
    let file = |libvirt: &str| {
        let f = h.join("lab1.yaml");
        std::fs::write(
            &f,
            format!(
                "cluster: lab1\ndomain: lab.test\ndistribution: okd\nversion: {v}\nrehearsal: true\n\
                 openshift_install: {}\nimage: {}\n\
                 ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k']\n\
                 libvirt:\n  uri: test:///default\n{libvirt}",
                installer.display(),
                h.join("image.qcow2").display()
            ),
        )
        .unwrap();
        f.display().to_string()
    };
    let state = h.join("state/clusters/lab1/install-state.json");

    let f = file("  cpu_model: Nehalem\n");
    let out = shiftlab(&["create", "manifests", "-f", &f, "--force"], h);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "libvirt.cpu_model: Nehalem lacks avx, avx2, bmi1, bmi2, f16c, fma, abm, movbe, xsave \
             (x86-64-v3): stream c10s (release 10.0.20250628-0, CentOS Stream 10) needs x86-64-v3"
        ),
        "{err}"
    );
    assert!(
        !h.join("state/clusters/lab1/assets").exists(),
        "the installer ran"
    );

    let f = file("  domain_type: qemu\n");
    let out = shiftlab(&["create", "manifests", "-f", &f], h);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains("needs x86-64-v3: QEMU's TCG runs the nodes as Haswell-noTSX-IBRS"),
        "{all}"
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(s["facts"]["cpu_level"]["level"], "x86-64-v3", "{s}");
    assert_eq!(s["facts"]["cpu_level"]["stream"], "c10s", "{s}");
}
