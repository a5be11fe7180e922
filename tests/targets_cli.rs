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
fn install_config_with_dir_is_a_render_that_the_target_writes_alike() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = common::repo().join("examples/upi.yaml");
    let (code, err) = install_config_into(h, &file, "out");
    assert_eq!(code, Some(0), "{err}");
    // A render: no target reached, nothing recorded, so the cluster file may
    // still change (issue 28: the plan was pinned by a look at the config).
    assert!(!err.contains("==> "), "{err}");
    assert!(!h.join("state").exists(), "{:?}", tree(h));
    // The target, later, writes what DIR got (no release needed either).
    let (code, err) = run(
        h,
        &["create", "install-config", "-f", file.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{err}");
    let s = install_state(h, "lab1");
    assert_eq!(s["flow"], "upi");
    assert_eq!(s["targets"]["install-config"]["status"], "done");
    assert!(s["targets"].get("release").is_none(), "{s}");
    let cluster = h.join("state/clusters/lab1");
    assert_eq!(
        std::fs::read(h.join("out/install-config.yaml")).unwrap(),
        std::fs::read(cluster.join("assets/install-config.yaml")).unwrap()
    );
    assert_eq!(
        std::fs::read(h.join("out/install-config.backup.yaml")).unwrap(),
        std::fs::read(cluster.join("install-config.backup.yaml")).unwrap()
    );
}

#[test]
fn a_target_the_flow_lacks_is_refused_and_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = rehearsal_file(h, "");
    let before = tree(h);
    // A rehearsal without a release rehearses its method (upi): no live ISO.
    let (code, err) = run(h, &["create", "eject-iso", "-f", &file]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("eject-iso is not a target of upi (a upi install); its targets are: release, install-config, manifests, ignition, infra, bootstrap-complete, bootstrap-removal, workers, csr-approval, install-complete"),
        "{err}"
    );
    assert_eq!(tree(h), before);
    // IPI has no ignition target of shiftlab's: the installer's `create
    // cluster` makes the configs. Said before anything is touched.
    let ipi = common::repo().join("examples/ipi.yaml");
    let before = tree(h);
    let (code, err) = run(h, &["create", "ignition", "-f", ipi.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("ignition is not a target of ipi (a bare-metal IPI install through the lab's BMC); its targets are: release, install-config, manifests, infra, install-complete"),
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
    // Begun as the lab, create cluster keeps it, and says how to rehearse the method.
    let (_, err) = run(h, &["create", "cluster", "-f", &file]);
    assert!(
        err.contains("note: lab1 was begun as the lab without an install, which it stays; to rehearse a upi install instead, `shiftlab destroy cluster lab1` first"),
        "{err}"
    );
    assert_eq!(install_state(h, "lab1")["flow"], "lab");
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
    // The lab's users (docs/users.md): one with a password file, one generated.
    std::fs::write(h.join("alice.pw"), "alice-lab-password\n").unwrap();
    let file = h.join("lab1.yaml");
    std::fs::write(
        &file,
        format!(
            "cluster: lab1\ndomain: lab.test\ndistribution: okd\nversion: {v}\nrehearsal: true\n\
             openshift_install: {}\nimage: {}\n\
             ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k']\n\
             libvirt:\n  uri: test:///default\n\
             users:\n  - name: alice\n    password_file: alice.pw\n  - name: bob\n    admin: true\n\
             storage: nfs\n",
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
    // The users' manifests are in the asset directory, private: they hold hashes.
    let assets = h.join("state/clusters/lab1/assets");
    let users_manifests = [
        "openshift/99-shiftlab-users-htpasswd-secret.yaml",
        "openshift/99-shiftlab-users-oauth.yaml",
        "openshift/99-shiftlab-user-bob-cluster-admin.yaml",
    ];
    for f in users_manifests {
        assert_eq!(mode(&assets.join(f)), 0o600, "{f}");
    }
    assert!(!assets
        .join("openshift/99-shiftlab-user-alice-cluster-admin.yaml")
        .exists());
    // bob's password is generated once, beside kubeadmin's, 0600; alice has hers.
    let bob = assets.join("auth/bob-password");
    assert_eq!(mode(&bob), 0o600);
    let bob_pw = std::fs::read_to_string(&bob).unwrap();
    assert!(!assets.join("auth/alice-password").exists());
    assert!(
        !err.contains(&bob_pw) && !err.contains("alice-lab-password"),
        "{err}"
    );

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
    // The installer took the users' manifests into bootstrap.ign, private too;
    // bob's password stayed as it was.
    let ign = std::fs::read_to_string(assets.join("bootstrap.ign")).unwrap();
    for f in users_manifests {
        assert!(ign.contains(&format!("/opt/openshift/{f}")), "{f}");
    }
    assert_eq!(mode(&assets.join("bootstrap.ign")), 0o600);
    assert_eq!(std::fs::read_to_string(&bob).unwrap(), bob_pw);
    // `env` shows how to log in as the first admin: the password's file, not the password.
    let out = shiftlab(&["env", "lab1"], h);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "# oc login -u bob -p \"$(cat {})\" https://api.lab1.lab.test:6443\n",
            bob.display()
        )),
        "{text}"
    );
    assert!(!text.contains(&bob_pw), "{text}");
    let out = shiftlab(&["env", "lab1", "-o", "json"], h);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["login"]["user"], "bob");
    assert_eq!(v["login"]["password_file"], bob.display().to_string());
    // `status` lists the users, admins marked, without a password.
    let out = shiftlab(&["status", "lab1"], h);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\nusers: alice, bob (cluster-admin)\n"),
        "{text}"
    );
    assert!(!text.contains(&bob_pw) && !text.contains("alice-lab-password"));
    let out = shiftlab(&["status", "lab1", "-o", "json"], h);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["users"][1]["name"], "bob");
    assert_eq!(v["users"][1]["admin"], true);
    // And the storage: the plan's StorageClass, the export (no server runs here,
    // serve makes its directory), nothing of a password.
    assert!(
        text.contains("\nstorage: nfs\n  StorageClass shiftlab-nfs (default): provisioner k8s-sigs.io/nfs-subdir-external-provisioner\n"),
        "{text}"
    );
    assert!(text.contains(":/shiftlab/lab1 to "), "{text}");
    assert!(text.contains("server down"), "{text}");
    assert_eq!(v["storage"]["kind"], "nfs");
    assert_eq!(v["storage"]["storage_classes"][0]["default"], true);
    assert_eq!(v["storage"]["export"]["path"], "/shiftlab/lab1");
    assert_eq!(v["storage"]["export"]["server_running"], false);
}

/// A release mirror laid out as OKD publishes (`<dir>/<version>/`): the fake
/// installer baked with stream metadata whose live ISO is `iso`, and the stand-in
/// `oc` as the client. Returns the mirror directory and the baked installer.
fn agent_mirror(h: &Path, v: &str, iso: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let fixture = common::repo().join("tests/fixtures/fake-openshift-install");
    let sum = shiftlab::release::sha256_file(iso).unwrap();
    let stream = serde_json::json!({"architectures": {"x86_64": {"artifacts": {"metal": {"formats": {"iso": {"disk": {
        "location": format!("file://{}", iso.display()), "sha256": sum}}}}}}}});
    std::fs::write(h.join("stream.json"), stream.to_string()).unwrap();
    let (tools, mirror) = (h.join("tools"), h.join("mirror"));
    let d = mirror.join(v);
    for sub in ["i", "c"] {
        std::fs::create_dir_all(tools.join(sub)).unwrap();
    }
    std::fs::create_dir_all(&d).unwrap();
    let baked = tools.join("i/openshift-install");
    let st = std::process::Command::new(fixture.join("generate.sh"))
        .arg(&baked)
        .arg(v)
        .arg(format!("quay.io/okd/scos-release:{v}"))
        .arg(h.join("stream.json"))
        .status()
        .unwrap();
    assert!(st.success());
    let oc = std::fs::read_to_string(common::repo().join("assets/rehearsal/oc"))
        .unwrap()
        .replace(
            "FAKE_OC_VERSION=0.0.0-fake",
            &format!("FAKE_OC_VERSION={v}"),
        );
    std::fs::write(tools.join("c/oc"), oc).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tools.join("c/oc"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut sums = String::new();
    for (sub, tarball, bin) in [
        (
            "i",
            format!("openshift-install-linux-{v}.tar.gz"),
            "openshift-install",
        ),
        ("c", format!("openshift-client-linux-{v}.tar.gz"), "oc"),
    ] {
        let st = std::process::Command::new("tar")
            .arg("-C")
            .arg(tools.join(sub))
            .arg("-czf")
            .arg(d.join(&tarball))
            .arg(bin)
            .status()
            .unwrap();
        assert!(st.success());
        let sha = shiftlab::release::sha256_file(&d.join(&tarball)).unwrap();
        sums.push_str(&format!("{sha}  {tarball}\n"));
    }
    std::fs::write(d.join("sha256sum.txt"), sums).unwrap();
    std::fs::write(
        d.join("release.txt"),
        format!("Name:      {v}\n\nPull From: quay.io/okd/scos-release:{v}\n\nRelease Metadata:\n  Version:  {v}\n"),
    )
    .unwrap();
    (mirror, baked)
}

/// An agent cluster file `<name>.yaml` (3 control planes, 1 worker, rehearsal
/// sizes) on the test driver, with `extra` lines.
fn agent_file(h: &Path, name: &str, cidr: &str, extra: &str) -> String {
    let f = h.join(format!("{name}.yaml"));
    std::fs::write(
        &f,
        format!(
            "cluster: {name}\ndomain: lab.test\ndistribution: okd\nrehearsal: true\nmethod: agent\n\
             ctlplanes: 3\nworkers: 1\nnetwork:\n  cidr: {cidr}\n\
             ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k']\n\
             libvirt:\n  uri: test:///default\n{extra}"
        ),
    )
    .unwrap();
    f.display().to_string()
}

/// `shiftlab ARGS` with `path` as its PATH and its own download cache.
fn run_with_path(h: &Path, path: &std::ffi::OsStr, args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shiftlab"))
        .args(args)
        .current_dir(h)
        .env("HOME", h)
        .env("SHIFTLAB_HOME", h.join("state"))
        .env("SHIFTLAB_CACHE", h.join("cache"))
        .env("XDG_CACHE_HOME", h.join("xdg"))
        .env("PATH", path)
        .env_remove("LIBVIRT_DEFAULT_URI")
        .env_remove("XDG_DATA_HOME")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `agent create image` runs `oc` (the real installer's `oc adm release info` and
/// `oc image extract`; without it: `exec: "oc": executable file not found in
/// $PATH`, recorded). The iso target gives the installer the release's verified
/// `oc` first on its PATH — before a stale one on the user's — and the live ISO
/// the release target verified, through OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE and
/// the installer's image cache: nothing is downloaded again. With
/// `openshift_install:` naming the installer, `oc` comes from the mirror's
/// client tarball all the same.
#[test]
fn the_agent_image_runs_the_releases_oc_on_the_verified_iso() {
    if std::process::Command::new("coreos-installer")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: coreos-installer is not installed (scripts/setup installs it)");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let v = "4.17.0-okd-scos.0";
    let iso = h.join("live.iso");
    let out = shiftlab(
        &["image", "standin", "--iso", "--out", iso.to_str().unwrap()],
        h,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mirror, baked) = agent_mirror(h, v, &iso);
    // An `oc` that is not the release's, first on the user's PATH.
    let stale = h.join("stale");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(
        stale.join("oc"),
        "#!/bin/sh\necho \"stale oc: $*\" >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(stale.join("oc"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let system = std::env::var_os("PATH").unwrap_or_default();
    let mut with_stale = stale.clone().into_os_string();
    with_stale.push(":");
    with_stale.push(&system);

    let m = mirror.display();
    for (name, cidr, path, extra) in [
        (
            "ag1",
            "192.168.150.0/24",
            &system,
            format!("version: {v}\nmirror: {m}\n"),
        ),
        (
            "ag2",
            "192.168.151.0/24",
            &with_stale,
            format!("version: {v}\nmirror: {m}\n"),
        ),
        (
            "ag3",
            "192.168.152.0/24",
            &with_stale,
            format!(
                "version: {v}\nmirror: {m}\nopenshift_install: {}\n",
                baked.display()
            ),
        ),
    ] {
        let file = agent_file(h, name, cidr, &extra);
        let (code, err) = run_with_path(h, path, &["create", "iso", "-f", &file]);
        let cluster = h.join("state/clusters").join(name);
        let log =
            std::fs::read_to_string(cluster.join("openshift-install.log")).unwrap_or_default();
        assert_eq!(code, Some(0), "{name}: {err}\n{log}");
        assert!(cluster.join("assets/agent.x86_64.iso").is_file(), "{name}");
        // The ISO shiftlab verified, taken from the installer's cache as it is.
        assert!(log.contains("Found override for OS Image"), "{name}: {log}");
        assert!(!log.contains("Downloading base ISO"), "{name}: {log}");
    }
    // The release's oc extracted agent-tui and libnmstate into the installer's
    // cache home, which is shiftlab's; the user's cache got nothing.
    let installer_home = h.join("cache/openshift-install/agent");
    for f in ["files_cache/agent-tui", "files_cache/libnmstate.so.2"] {
        assert!(installer_home.join(f).is_file(), "{f}");
    }
    let link = installer_home.join("image_cache/live.iso");
    let sum = shiftlab::release::sha256_file(&iso).unwrap();
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        h.join("cache/blobs/sha256").join(&sum)
    );
    assert!(
        !h.join("xdg/agent").exists(),
        "the user's cache was written"
    );
}

/// `openshift_install:` names the installer and the mirror has no client for its
/// release: the agent install stops at the release target, before the installer
/// runs, saying that `oc` is needed and how to provide it.
#[test]
fn an_agent_install_without_a_client_for_its_installer_stops_before_it() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let v = "4.17.0-okd-scos.0";
    std::fs::write(h.join("live.iso"), "not an iso").unwrap();
    let (_, baked) = agent_mirror(h, v, &h.join("live.iso"));
    let empty = h.join("empty-mirror");
    std::fs::create_dir_all(&empty).unwrap();
    let file = agent_file(
        h,
        "ag1",
        "192.168.150.0/24",
        &format!(
            "version: {v}\nmirror: {}\nopenshift_install: {}\n",
            empty.display(),
            baked.display()
        ),
    );
    let path = std::env::var_os("PATH").unwrap_or_default();
    let (code, err) = run_with_path(h, &path, &["create", "iso", "-f", &file]);
    assert_eq!(code, Some(1), "{err}");
    for part in [
        "method agent needs `oc`",
        "`openshift_install:` names a local installer",
        &format!("Set `mirror:` to a mirror that holds openshift-client-linux-{v}.tar.gz"),
        &format!("<dir>/{v}"),
        "or leave `openshift_install:` out",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    let s = install_state(h, "ag1");
    assert_ne!(s["targets"]["release"]["status"], "done", "{s}");
    let log = std::fs::read_to_string(h.join("state/clusters/ag1/openshift-install.log"))
        .unwrap_or_default();
    assert!(!log.contains("agent create image"), "{log}");
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

/// The fake installer baked for `v` into `h`, and a rehearsal cluster file using
/// it with `extra` lines; returns the file.
fn baked_installer_file(h: &Path, v: &str, extra: &str) -> String {
    let fixture = common::repo().join("tests/fixtures/fake-openshift-install");
    std::fs::write(h.join("stream.json"), "{}").unwrap();
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
    let file = h.join("lab1.yaml");
    std::fs::write(
        &file,
        format!(
            "cluster: lab1\ndomain: lab.test\ndistribution: okd\nversion: {v}\nrehearsal: true\n\
             openshift_install: {}\nimage: {}\n\
             ssh_keys: ['ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYfake k']\n\
             libvirt:\n  uri: test:///default\n{extra}",
            installer.display(),
            h.join("image.qcow2").display()
        ),
    )
    .unwrap();
    file.display().to_string()
}

/// Exit codes by phase, as openshift-install's (src/exit_status.rs): the
/// installer refusing the install-config passes its 3 through; a cluster file
/// that cannot be used is 2 before anything runs.
#[test]
fn the_installers_install_config_refusal_exits_3_and_a_bad_cluster_file_2() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // fips: true from a host the installer does not take for a FIPS one (the fake
    // is never the FIPS binary): shiftlab's rehearsal only warns, the installer
    // refuses the install-config with its exit 3 (recorded with the real 4.18).
    let file = baked_installer_file(h, "4.17.0-okd-scos.0", "fips: true\n");
    let (code, err) = run(h, &["create", "manifests", "-f", &file]);
    assert_eq!(code, Some(3), "{err}");
    let log = std::fs::read_to_string(h.join("state/clusters/lab1/openshift-install.log")).unwrap();
    assert!(
        log.contains("fips: Forbidden: target cluster is in FIPS mode"),
        "{log}"
    );
    assert!(
        err.contains(
            "target manifests: openshift-install create manifests failed (exit status: 3): "
        ),
        "{err}"
    );
    // Why, in the installer's own words (its error lines), without opening the log.
    assert!(
        err.contains("fips: Forbidden: target cluster is in FIPS mode"),
        "{err}"
    );
    assert!(err.contains("/ To obtain a suitable binary"), "{err}");
    let s = install_state(h, "lab1");
    assert_ne!(s["targets"]["manifests"]["status"], "done", "{s}");
    // A cluster file shiftlab cannot use: 2, and nothing is touched.
    let bad = baked_installer_file(h, "4.17.0-okd-scos.0", "workers: many\n");
    let before = tree(h);
    let (code, err) = run(h, &["create", "manifests", "-f", &bad]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("workers"), "{err}");
    assert_eq!(tree(h), before);
}

/// The infra target failing is openshift-install's infrastructure code, 4, and
/// leaves infra not done.
#[test]
fn a_failed_infra_target_exits_4() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // Not a qcow2: the libvirt test driver takes the pool, the upload fails.
    std::fs::write(h.join("img.qcow2"), "not an image\n").unwrap();
    let file = rehearsal_file(h, &format!("image: {}\n", h.join("img.qcow2").display()));
    let (code, err) = run(h, &["create", "infra", "-f", &file]);
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("error: target infra: "), "{err}");
    let s = install_state(h, "lab1");
    assert_ne!(s["targets"]["infra"]["status"], "done", "{s}");
}

/// `wait-for bootstrap-complete NAME` waits as the target does, after the
/// targets before it (here: infra recorded done as its run records it, with
/// the plan it writes), reaching none of them again; its failure is
/// openshift-install's bootstrap code, 5.
#[test]
fn wait_for_bootstrap_complete_by_name_exits_5_and_redoes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let file = baked_installer_file(h, "4.17.0-okd-scos.0", "");
    let (code, err) = run(h, &["create", "ignition", "-f", &file]);
    assert_eq!(code, Some(0), "{err}");
    let cluster = h.join("state/clusters/lab1");
    let mut s = install_state(h, "lab1");
    s["targets"]["infra"] = serde_json::json!({"status": "done", "at": 1, "started": 1});
    std::fs::write(cluster.join("install-state.json"), s.to_string()).unwrap();
    let plan = shiftlab::plan::derive(&shiftlab::spec::load(Path::new(&file)).unwrap().spec);
    shiftlab::state::StateDir::resolve(Some(&h.join("state")))
        .cluster("lab1")
        .write_plan(&plan)
        .unwrap();
    let log = std::fs::read_to_string(cluster.join("openshift-install.log")).unwrap();
    let (code, err) = run(h, &["wait-for", "bootstrap-complete", "lab1"]);
    assert_eq!(code, Some(5), "{err}");
    assert!(
        err.contains("target bootstrap-complete: shiftlab serve is not running"),
        "{err}"
    );
    assert_eq!(err.matches("==> ").count(), 1, "{err}");
    let s = install_state(h, "lab1");
    assert_eq!(
        s["targets"]["bootstrap-complete"]["status"], "started",
        "{s}"
    );
    assert_eq!(s["targets"]["ignition"]["status"], "done", "{s}");
    assert_eq!(
        std::fs::read_to_string(cluster.join("openshift-install.log")).unwrap(),
        log,
        "the installer ran again"
    );
}
