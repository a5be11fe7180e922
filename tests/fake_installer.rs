//! The stand-in `openshift-install` shiftlab ships (assets/rehearsal) keeps the
//! real installer's rules it claims to model, on the install-configs shiftlab
//! renders (tests/golden): a double that drifted would make the e2e prove nothing.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fake() -> PathBuf {
    common::repo().join("assets/rehearsal/openshift-install")
}

/// The golden UPI cluster asks for FIPS, which the installer refuses unless it is
/// the FIPS binary on a FIPS host (recorded with the real 4.18, case v-fips); a
/// user on another host sets this to go on with a warning, as the tests do.
const SKIP_FIPS: &str = "OPENSHIFT_INSTALL_SKIP_HOSTCRYPT_VALIDATION";

fn run(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(fake())
        .env(SKIP_FIPS, "1")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The fake run as [`run`] does, for a run that is meant to fail.
fn fails(dir: &Path, args: &[&str]) -> Output {
    Command::new(fake())
        .env(SKIP_FIPS, "1")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap()
}

/// An asset directory holding the golden install-config of `name`.
fn assets(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        common::repo().join(format!("tests/golden/{name}.install-config.yaml")),
        dir.path().join("install-config.yaml"),
    )
    .unwrap();
    dir
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn merge_source(dir: &Path, role: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(&read(dir, &format!("{role}.ign"))).unwrap();
    v["ignition"]["config"]["merge"][0]["source"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn manifests_consume_the_install_config_and_follow_the_scheduler_rule() {
    // compact: compute replicas 0 → schedulable control planes, with the warning.
    let d = assets("compact");
    let out = run(d.path(), &["create", "manifests"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!d.path().join("install-config.yaml").exists());
    // The real installer's form (its recorded runs): the message unquoted.
    assert!(
        log.contains("level=info msg=Consuming Install Config from target directory\n"),
        "{log}"
    );
    assert!(!log.contains("msg=\""), "{log}");
    assert!(
        log.contains("level=warning msg=Making control-plane schedulable by setting MastersSchedulable to true for Scheduler cluster settings\n"),
        "{log}"
    );
    let scheduler = read(d.path(), "manifests/cluster-scheduler-02-config.yml");
    assert!(
        scheduler.contains("mastersSchedulable: true"),
        "{scheduler}"
    );
    // platform none: no Machine API objects (the user-data secrets are there).
    let machines: Vec<String> = std::fs::read_dir(d.path().join("openshift"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("master-machines") || n.contains("machineset"))
        .collect();
    assert!(machines.is_empty(), "{machines:?}");

    // ipi (baremetal, 2 workers): not schedulable; Machines and a MachineSet.
    let d = assets("ipi");
    run(d.path(), &["create", "manifests"]);
    let scheduler = read(d.path(), "manifests/cluster-scheduler-02-config.yml");
    assert!(
        scheduler.contains("mastersSchedulable: false"),
        "{scheduler}"
    );
    for f in [
        "99_openshift-cluster-api_master-machines-0.yaml",
        "99_openshift-cluster-api_master-machines-2.yaml",
        "99_openshift-cluster-api_worker-machineset-0.yaml",
    ] {
        assert!(d.path().join("openshift").join(f).exists(), "{f}");
    }
}

#[test]
fn ignition_configs_are_the_installer_files_with_its_modes() {
    let d = assets("upi");
    run(d.path(), &["create", "manifests"]);
    // The install-config lives on in the state file once consumed.
    let out = run(d.path(), &["create", "ignition-configs"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("Consuming Common Manifests"), "{log}");
    assert!(!d.path().join("manifests").exists());
    assert_eq!(
        merge_source(d.path(), "master"),
        "https://api-int.lab1.lab.test:22623/config/master"
    );
    assert_eq!(
        merge_source(d.path(), "worker"),
        "https://api-int.lab1.lab.test:22623/config/worker"
    );
    let pw = read(d.path(), "auth/kubeadmin-password");
    let groups: Vec<&str> = pw.split('-').collect();
    assert_eq!(
        (pw.len(), groups.len()),
        (23, 4),
        "5char-5char-5char-5char: {pw}"
    );
    let meta: serde_json::Value = serde_json::from_str(&read(d.path(), "metadata.json")).unwrap();
    assert_eq!(meta["clusterName"], "lab1");
    assert!(meta["infraID"].as_str().unwrap().starts_with("lab1-"));
    assert!(read(d.path(), "auth/kubeconfig").contains("server: https://api.lab1.lab.test:6443"));
    for f in [
        "bootstrap.ign",
        "auth/kubeadmin-password",
        ".openshift_install_state.json",
    ] {
        let mode = std::fs::metadata(d.path().join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640, "{f}");
    }

    // Baremetal: the pointer configs name the API VIP.
    let d = assets("ipi");
    run(d.path(), &["create", "ignition-configs"]);
    assert_eq!(
        merge_source(d.path(), "master"),
        "https://192.168.129.2:22623/config/master"
    );
    // The first API VIP, an IPv6 one in brackets (net.JoinHostPort:
    // pkg/asset/ignition/machine/node.go).
    let d = assets("ipv6/ipi");
    run(d.path(), &["create", "ignition-configs"]);
    assert_eq!(
        merge_source(d.path(), "worker"),
        "https://[fd00:5:143::5]:22623/config/worker"
    );
}

/// The real 4.18 installer's capability rules, as recorded: a set without Ingress
/// (and marketplace without OperatorLifecycleManager) fails every verb that loads
/// the install config with exit 3, consuming nothing; v4.16 passes.
#[test]
fn capability_sets_the_installer_refuses_fail_with_its_messages() {
    let golden =
        std::fs::read_to_string(common::repo().join("tests/golden/upi.install-config.yaml"))
            .unwrap();
    let caps = |base: &str, add: &[&str]| {
        let start = golden.find("capabilities:\n").unwrap();
        let end = start + golden[start..].find("\npullSecret:").unwrap();
        let list: String = add.iter().map(|c| format!("  - {c}\n")).collect();
        let section = if add.is_empty() {
            format!("capabilities:\n  baselineCapabilitySet: {base}")
        } else {
            format!("capabilities:\n  baselineCapabilitySet: {base}\n  additionalEnabledCapabilities:\n{}", list.trim_end())
        };
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("install-config.yaml"),
            format!("{}{section}{}", &golden[..start], &golden[end..]),
        )
        .unwrap();
        d
    };
    let fails = |d: &Path, verb: &str| {
        let out = Command::new(fake())
            .env(SKIP_FIPS, "1")
            .args(["create", verb, "--dir"])
            .arg(d)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{verb}");
        assert!(d.join("install-config.yaml").exists(), "consumed by {verb}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let d = caps("v4.14", &["marketplace", "Console"]);
    let log = fails(d.path(), "manifests");
    assert!(
        log.contains(r#"failed to fetch Master Machines: failed to load asset "Install Config": failed to create install config: invalid "install-config.yaml" file: [additionalEnabledCapabilities: Invalid value: []v1.ClusterVersionCapability{"marketplace", "Console"}: the marketplace capability requires the OperatorLifecycleManager capability, capabilities: Invalid value: types.Capabilities{BaselineCapabilitySet:"v4.14", AdditionalEnabledCapabilities:[]v1.ClusterVersionCapability{"marketplace", "Console"}}: the Ingress capability is required]"#),
        "{log}"
    );
    assert!(fails(d.path(), "ignition-configs").contains("failed to fetch Kubeconfig Admin Client"));
    // None alone: only Ingress (the recorded v-cap-None case).
    let log = fails(caps("None", &[]).path(), "manifests");
    assert!(log.contains("AdditionalEnabledCapabilities:[]v1.ClusterVersionCapability{}}: the Ingress capability is required"), "{log}");
    assert!(!log.contains("marketplace"), "{log}");
    // v4.15 holds OLM: only Ingress.
    let log = fails(
        caps("v4.15", &["marketplace", "Console"]).path(),
        "manifests",
    );
    assert!(
        !log.contains("OperatorLifecycleManager capability") && log.contains("Ingress"),
        "{log}"
    );
    // v4.16, None with Ingress, and the golden (fixed) pass.
    run(
        caps("v4.16", &["marketplace", "Console"]).path(),
        &["create", "manifests"],
    );
    run(caps("None", &["Ingress"]).path(), &["create", "manifests"]);
    run(assets("upi").path(), &["create", "manifests"]);
}

#[test]
fn no_install_config_is_the_installers_error_and_unmodeled_verbs_say_so() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(fake())
        .args(["create", "manifests", "--dir"])
        .arg(d.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("install-config.yaml not found"));
    let out = Command::new(fake())
        .args(["destroy", "cluster"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not modeled"));
}

#[test]
fn version_names_the_binary_as_invoked() {
    let out = Command::new(fake()).arg("version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("{} 4.18.0-fake\n", fake().display())),
        "{text}"
    );
    assert!(
        text.contains("\nrelease image quay.io/openshift-release-dev/ocp-release:4.18.0-fake\n")
    );
}

/// The files of `role.ign`'s storage, decoded (`data:,` percent-encoded).
fn node_facts(dir: &Path, role: &str) -> std::collections::BTreeMap<String, String> {
    shiftlab_facts(&serde_json::from_str(&read(dir, &format!("{role}.ign"))).unwrap())
}

/// The files under /etc/shiftlab/ of an Ignition config's storage, decoded (the
/// fake writes them as `data:,` percent-encoded).
fn shiftlab_facts(ign: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    ign["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["path"].as_str().unwrap().starts_with("/etc/shiftlab/"))
        .map(|f| {
            let src = f["contents"]["source"].as_str().unwrap();
            let data = src.strip_prefix("data:,").unwrap();
            (
                f["path"].as_str().unwrap().to_string(),
                percent_decode(data),
            )
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// Where routers may run, as the fake tells the stand-ins: UPI's compute replicas 0
/// make masters schedulable (with the worker role) unless a manifest says
/// otherwise; the IngressController's selector comes from the manifests, else the
/// ingress operator's default (the worker role).
#[test]
fn ignition_configs_say_where_routers_may_run_from_the_manifests() {
    // As the installer leaves it: masters schedulable, carrying the worker role.
    let d = assets("upi");
    run(d.path(), &["create", "manifests"]);
    run(d.path(), &["create", "ignition-configs"]);
    let m = node_facts(d.path(), "master");
    assert_eq!(m["/etc/shiftlab/schedulable"], "true");
    assert!(m["/etc/shiftlab/node-labels"].contains("node-role.kubernetes.io/worker"));
    assert_eq!(
        m["/etc/shiftlab/router-node-selector"],
        "node-role.kubernetes.io/worker"
    );
    let w = node_facts(d.path(), "worker");
    assert_eq!(w["/etc/shiftlab/schedulable"], "true");
    assert_eq!(
        w["/etc/shiftlab/node-labels"],
        "node-role.kubernetes.io/worker"
    );

    // With shiftlab's manifests for a cluster with workers: masters unschedulable,
    // without the worker role; the selector is the IngressController's.
    let d = assets("upi");
    run(d.path(), &["create", "manifests"]);
    let spec = {
        let dir = common::repo().join("tests/golden");
        let text = std::fs::read_to_string(dir.join("upi.cluster.yaml")).unwrap();
        let env = shiftlab::spec::Env {
            home: None,
            base_dir: dir,
            libvirt_default_uri: None,
        };
        shiftlab::spec::from_str(&text, "upi.cluster.yaml", &env)
            .unwrap()
            .spec
    };
    for (rel, text) in
        shiftlab::render::manifests::lab_manifests(&spec, &shiftlab::plan::derive(&spec))
    {
        std::fs::write(d.path().join(rel), text).unwrap();
    }
    run(d.path(), &["create", "ignition-configs"]);
    let m = node_facts(d.path(), "master");
    assert_eq!(m["/etc/shiftlab/schedulable"], "false");
    assert!(!m["/etc/shiftlab/node-labels"].contains("worker"));
    assert_eq!(
        m["/etc/shiftlab/router-node-selector"],
        "node-role.kubernetes.io/worker"
    );

    // A user's IngressController on the masters: its selector, as given.
    let d = assets("upi");
    run(d.path(), &["create", "manifests"]);
    std::fs::write(
        d.path().join("openshift/99-ingress.yaml"),
        "apiVersion: operator.openshift.io/v1\nkind: IngressController\nmetadata:\n  name: default\n  namespace: openshift-ingress-operator\nspec:\n  nodePlacement:\n    nodeSelector:\n      matchLabels:\n        node-role.kubernetes.io/master: \"\"\n        topology.kubernetes.io/zone: a\n",
    )
    .unwrap();
    run(d.path(), &["create", "ignition-configs"]);
    assert_eq!(
        node_facts(d.path(), "worker")["/etc/shiftlab/router-node-selector"],
        "node-role.kubernetes.io/master,topology.kubernetes.io/zone=a"
    );
}

/// `openshift_install:` pins a release: shiftlab reads the installer's `version`
/// (the fake prints the real layout) and refuses a `version:` it does not install.
#[test]
fn a_pinned_installer_is_compared_with_the_version_asked_for() {
    use shiftlab::release::pin;
    use shiftlab::spec::{parse_version, Distribution};
    let iv = pin::installer_version(&fake()).unwrap();
    assert_eq!(iv.version, "4.18.0-fake");
    assert_eq!(
        iv.release_image.as_deref(),
        Some("quay.io/openshift-release-dev/ocp-release:4.18.0-fake")
    );
    let v = |s: &str| parse_version(s).unwrap();
    assert!(pin::check(Distribution::Ocp, &v("4.18"), &fake(), &iv, None).is_ok());
    let e = pin::check(Distribution::Ocp, &v("4.17.3"), &fake(), &iv, None).unwrap_err();
    assert!(e.contains("set `version: 4.18.0-fake`"), "{e}");
    let e = pin::check(Distribution::Okd, &v("4.18"), &fake(), &iv, None).unwrap_err();
    assert!(e.contains("distribution: okd"), "{e}");
}

#[test]
fn single_node_ignition_config_needs_one_control_plane_and_writes_the_live_config() {
    let d = assets("sno");
    let out = run(d.path(), &["create", "single-node-ignition-config"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!d.path().join("install-config.yaml").exists(), "consumed");
    assert!(
        log.contains("Single-Node-Ignition-Config created in"),
        "{log}"
    );
    let ign: serde_json::Value =
        serde_json::from_str(&read(d.path(), "bootstrap-in-place-for-live-iso.ign")).unwrap();
    let paths: Vec<&str> = ign["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&"/usr/local/bin/install-to-disk.sh"),
        "{paths:?}"
    );
    assert!(read(d.path(), "auth/kubeconfig").contains("server: https://api."));
    // A compact install-config is refused, as the installer refuses it.
    let d = assets("compact");
    let out = Command::new(fake())
        .args(["create", "single-node-ignition-config", "--dir"])
        .arg(d.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("requires a single ControlPlane replica"));
    assert!(
        d.path().join("install-config.yaml").exists(),
        "not consumed"
    );
}

/// What `agent create image` made of the golden agent configs.
struct AgentImage {
    /// The asset directory.
    dir: tempfile::TempDir,
    /// The base ISO it was made from.
    base: PathBuf,
    /// The installer's log.
    log: String,
    /// The Ignition embedded in agent.x86_64.iso.
    ign: serde_json::Value,
    /// The installer's HOME (its cache).
    home: tempfile::TempDir,
}

/// How `agent create image` is run.
#[derive(Clone, Copy)]
struct AgentRun {
    /// `compute` replicas, else the golden's (1).
    workers: Option<u32>,
    /// The stand-in `oc` on PATH.
    oc: bool,
    /// OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE set to a URL nothing serves, its file
    /// in the installer's image cache.
    os_image_override: bool,
    /// Files written into the asset directory first, by path in it.
    extra: &'static [(&'static str, &'static str)],
}

const WITH_OC: AgentRun = AgentRun {
    workers: None,
    oc: true,
    os_image_override: false,
    extra: &[],
};

/// The stand-in live ISO, built once per run of these tests (read only: the
/// fake embeds into a copy).
fn standin_iso() -> &'static Path {
    static ISO: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ISO.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake_installer");
        std::fs::create_dir_all(&dir).unwrap();
        let (iso, tmp) = (
            dir.join("standin-live.iso"),
            dir.join(format!("standin-live.iso.{}", std::process::id())),
        );
        let out = common::shiftlab(
            &["image", "standin", "--iso", "--out", tmp.to_str().unwrap()],
            &dir,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(&tmp, &iso).unwrap();
        iso
    })
}

/// `agent create image` on the golden agent configs; None without coreos-installer.
fn agent_create_image(workers: Option<u32>) -> Option<AgentImage> {
    let (out, image) = agent_image_run(AgentRun { workers, ..WITH_OC })?;
    assert!(out.status.success(), "{}", image.log);
    Some(image)
}

/// [`agent_create_image`] as `how` says, successful or not; `ign` is null
/// without an ISO.
fn agent_image_run(how: AgentRun) -> Option<(Output, AgentImage)> {
    if Command::new("coreos-installer")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: coreos-installer is not installed (scripts/setup installs it)");
        return None;
    }
    let home = tempfile::tempdir().unwrap();
    let iso = standin_iso().to_path_buf();
    let sum = shiftlab::release::sha256_file(&iso).unwrap();
    let stream = home.path().join("stream.json");
    std::fs::write(
        &stream,
        serde_json::json!({"architectures": {"x86_64": {"artifacts": {"metal": {"formats": {"iso": {"disk": {
            "location": format!("file://{}", iso.display()), "sha256": sum}}}}}}}})
        .to_string(),
    )
    .unwrap();
    let d = assets("agent");
    if let Some(w) = how.workers {
        let ic = d.path().join("install-config.yaml");
        let text = read(d.path(), "install-config.yaml");
        let edited = text.replacen(
            "- name: worker\n  replicas: 1\n",
            &format!("- name: worker\n  replicas: {w}\n"),
            1,
        );
        assert_ne!(text, edited, "the golden's compute replicas moved");
        std::fs::write(ic, edited).unwrap();
    }
    std::fs::copy(
        common::repo().join("tests/golden/agent.agent-config.yaml"),
        d.path().join("agent-config.yaml"),
    )
    .unwrap();
    for (rel, text) in how.extra {
        let path = d.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    // PATH: the stand-in oc's directory, or none with an oc; the tools the fake uses.
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    if how.oc {
        std::fs::copy(common::repo().join("assets/rehearsal/oc"), bin.join("oc")).unwrap();
    }
    let system = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(bin.clone())
        .chain(std::env::split_paths(&system).filter(|p| !p.join("oc").exists()));
    let mut cmd = Command::new(fake());
    cmd.args(["agent", "create", "image", "--dir"])
        .arg(d.path())
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .env("SHIFTLAB_FAKE_STREAM_JSON", &stream)
        .env("XDG_CACHE_HOME", home.path().join("cache"));
    if how.os_image_override {
        let cache = home.path().join("cache/agent/image_cache");
        std::fs::create_dir_all(&cache).unwrap();
        std::os::unix::fs::symlink(&iso, cache.join("verified-live.iso")).unwrap();
        // Port 9 on loopback: a download would fail.
        cmd.env(
            "OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE",
            format!("http://127.0.0.1:9/verified-live.iso?sha256={sum}"),
        );
    }
    let out = cmd.output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let made = d.path().join("agent.x86_64.iso");
    let ign = if made.exists() {
        let shown = shiftlab::image::live_iso::embedded(&made)
            .unwrap()
            .expect("an embedded config");
        serde_json::from_slice(&shown).unwrap()
    } else {
        serde_json::Value::Null
    };
    Some((
        out,
        AgentImage {
            ign,
            dir: d,
            base: iso,
            log,
            home,
        },
    ))
}

#[test]
fn agent_create_image_embeds_the_hosts_and_the_rendezvous_ip() {
    let Some(image) = agent_create_image(None) else {
        return;
    };
    let (d, iso, log, ign) = (&image.dir, &image.base, &image.log, &image.ign);
    assert!(
        log.contains("Consuming Agent Config from target directory"),
        "{log}"
    );
    assert!(!d.path().join("agent-config.yaml").exists());
    let files = ign["storage"]["files"].as_array().unwrap();
    let path = |p: &str| files.iter().any(|f| f["path"] == p);
    assert!(path("/etc/assisted/rendezvous-host.env"));
    // Hosts of both roles on one ISO: the router facts per role. One worker:
    // assisted-service leaves the control planes schedulable, carrying the
    // worker role the default router selects.
    let facts = shiftlab_facts(ign);
    assert_eq!(facts["/etc/shiftlab/master/schedulable"], "true");
    assert_eq!(
        facts["/etc/shiftlab/master/node-labels"],
        "node-role.kubernetes.io/control-plane,node-role.kubernetes.io/master,node-role.kubernetes.io/worker"
    );
    assert_eq!(facts["/etc/shiftlab/worker/schedulable"], "true");
    assert_eq!(
        facts["/etc/shiftlab/worker/node-labels"],
        "node-role.kubernetes.io/worker"
    );
    assert_eq!(
        facts["/etc/shiftlab/router-node-selector"],
        "node-role.kubernetes.io/worker"
    );
    assert!(
        !facts.contains_key("/etc/shiftlab/node-labels"),
        "{facts:?}"
    );
    // The real installer's layout, per hostname (tests/installer_contract.rs holds
    // the contents to the recorded config image).
    let golden = read(&common::repo(), "tests/golden/agent.agent-config.yaml");
    let hosts: Vec<&str> = golden
        .lines()
        .filter_map(|l| l.strip_prefix("- hostname: "))
        .collect();
    assert!(!hosts.is_empty());
    for h in hosts {
        for f in ["mac_addresses", "role", "root-device-hints.yaml"] {
            assert!(
                path(&format!("/etc/assisted/hostconfig/{h}/{f}")),
                "{h}/{f}"
            );
        }
    }
    // The base ISO itself is left as it was: the embed went into a copy.
    assert!(shiftlab::image::live_iso::embedded(iso).unwrap().is_none());
}

/// A compact agent cluster: every host a schedulable control plane carrying the
/// worker role, so the routers may run on each (the stand-ins read these facts).
#[test]
fn a_compact_agent_image_says_every_host_may_run_routers() {
    let Some(image) = agent_create_image(Some(0)) else {
        return;
    };
    let facts = shiftlab_facts(&image.ign);
    assert_eq!(facts["/etc/shiftlab/master/schedulable"], "true");
    assert_eq!(
        facts["/etc/shiftlab/master/node-labels"],
        "node-role.kubernetes.io/control-plane,node-role.kubernetes.io/master,node-role.kubernetes.io/worker"
    );
    assert_eq!(
        facts["/etc/shiftlab/router-node-selector"],
        "node-role.kubernetes.io/worker"
    );
}

/// Two workers: assisted-service makes the control planes unschedulable
/// (`ShouldMastersBeSchedulable`), so the routers run on the workers alone.
#[test]
fn two_agent_workers_keep_the_routers_off_the_control_planes() {
    let Some(image) = agent_create_image(Some(2)) else {
        return;
    };
    let facts = shiftlab_facts(&image.ign);
    assert_eq!(facts["/etc/shiftlab/master/schedulable"], "false");
    assert_eq!(
        facts["/etc/shiftlab/master/node-labels"],
        "node-role.kubernetes.io/control-plane,node-role.kubernetes.io/master"
    );
    assert_eq!(facts["/etc/shiftlab/worker/schedulable"], "true");
}

/// Without `oc` on PATH the real `agent create image` fails (recorded: `exec:
/// "oc": executable file not found in $PATH`), its configs left in place.
#[test]
fn agent_create_image_without_oc_fails_as_the_real_one() {
    let Some((out, image)) = agent_image_run(AgentRun {
        oc: false,
        ..WITH_OC
    }) else {
        return;
    };
    assert_eq!(out.status.code(), Some(1), "{}", image.log);
    assert!(
        image
            .log
            .contains(r#"exec: "oc": executable file not found in $PATH"#),
        "{}",
        image.log
    );
    let d = image.dir.path();
    for f in ["install-config.yaml", "agent-config.yaml"] {
        assert!(d.join(f).exists(), "{f} was consumed");
    }
    assert!(!d.join("agent.x86_64.iso").exists());
}

/// OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE: the installer takes the URL's file from
/// its image cache as it is (nothing downloaded, the stream's ISO not fetched),
/// and warns as the real one does.
#[test]
fn agent_create_image_takes_the_os_image_override_from_its_cache() {
    let Some((out, image)) = agent_image_run(AgentRun {
        os_image_override: true,
        ..WITH_OC
    }) else {
        return;
    };
    assert!(out.status.success(), "{}", image.log);
    assert!(
        image.log.contains(
            "level=warning msg=Found override for OS Image. Please be warned, this is not advised"
        ),
        "{}",
        image.log
    );
    assert!(!image.log.contains("Downloading"), "{}", image.log);
    assert!(!image
        .home
        .path()
        .join("cache/agent/image_cache/coreos-x86_64.iso")
        .exists());
    // oc extracted the agent's tools into the installer's cache.
    let files = image.home.path().join("cache/agent/files_cache");
    assert!(files.join("agent-tui").is_file());
    assert!(files.join("libnmstate.so.2").is_file());
}

/// `create cluster` on baremetal validates the install-config as the installer
/// does (pkg/types/baremetal/validation) and refuses before it writes or creates
/// anything: the install-config stays, no metadata.json, no libvirt call past
/// the checks. (externalBridge is a provisioning check, made later: below.)
#[test]
fn baremetal_create_cluster_refuses_a_bad_install_config_before_anything() {
    let d = assets("ipi");
    let path = d.path().join("install-config.yaml");
    let text = read(d.path(), "install-config.yaml")
        .replace("    - 192.168.129.2\n", "    - 10.0.0.2\n")
        .replacen("      role: master\n", "      role: worker\n", 1)
        .replacen(
            "bootMACAddress: 52:54:00:50:71:e8",
            "bootMACAddress: nope",
            1,
        );
    std::fs::write(&path, text).unwrap();
    let out = Command::new(fake())
        .args(["create", "cluster", "--dir"])
        .arg(d.path())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{log}");
    for want in [
        "platform.baremetal.apiVIPs: Invalid value: \\\"10.0.0.2\\\": IP expected to be in one of the machine networks: 192.168.129.0/24",
        "platform.baremetal.hosts[0].bootMACAddress: Invalid value: \\\"nope\\\"",
        "not enough hosts found (2) to support all the configured ControlPlane replicas (3)",
    ] {
        assert!(log.contains(want), "missing {want:?} in {log}");
    }
    assert!(!log.contains("golden-bmc-password"), "{log}");
    assert!(path.exists(), "the install-config was consumed");
    assert!(!d.path().join("metadata.json").exists());
    assert!(!d.path().join(".openshift_install_state.json").exists());
}

/// The VIP rules of the installer's validateAPIAndIngressVIPs for baremetal
/// (pkg/types/validation/installconfig.go), on the golden IPv6-primary
/// dual-stack IPI install-config: it passes them as shiftlab renders it; each
/// broken rule is refused with the installer's field path and wording, before
/// anything is written.
#[test]
fn dual_stack_vips_follow_the_installers_rules() {
    let golden =
        std::fs::read_to_string(common::repo().join("tests/golden/ipv6/ipi.install-config.yaml"))
            .unwrap();
    let create = |text: &str| {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("install-config.yaml"), text).unwrap();
        let out = fails(d.path(), &["create", "cluster"]);
        let log = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.success(), log, d)
    };
    // As rendered: no VIP error (it goes on to the provisioning checks).
    let (_, log, _) = create(&golden);
    assert!(!log.contains("VIPs:"), "{log}");
    let vips = "    apiVIPs:\n    - fd00:5:143::5\n    - 192.168.143.5\n    ingressVIPs:\n    - fd00:5:143::6\n    - 192.168.143.6\n";
    assert!(golden.contains(vips));
    for (what, with, want) in [
        (
            "two API VIPs of one family",
            "    apiVIPs:\n    - fd00:5:143::5\n    - fd00:5:143::7\n    ingressVIPs:\n    - fd00:5:143::6\n    - 192.168.143.6\n",
            "platform.baremetal.apiVIPs: Invalid value: []string{\\\"fd00:5:143::5\\\", \\\"fd00:5:143::7\\\"}: If two API VIPs are given, one must be an IPv4 address, the other an IPv6",
        ),
        (
            "an ingress VIP in no machine network",
            "    apiVIPs:\n    - fd00:5:143::5\n    - 192.168.143.5\n    ingressVIPs:\n    - fd00:5:143::6\n    - 10.0.0.6\n",
            "platform.baremetal.ingressVIPs: Invalid value: \\\"10.0.0.6\\\": IP expected to be in one of the machine networks: fd00:5:143::/64,192.168.143.0/24",
        ),
        (
            "one API VIP of the second family",
            "    apiVIPs:\n    - 192.168.143.5\n    ingressVIPs:\n    - fd00:5:143::6\n    - 192.168.143.6\n",
            "platform.baremetal.apiVIPs: Invalid value: \\\"192.168.143.5\\\": VIP for the API must be of the same IP family with machine network's primary IP Family for dual-stack IPv4/IPv6",
        ),
        (
            "an API VIP that is an ingress VIP",
            "    apiVIPs:\n    - fd00:5:143::5\n    - 192.168.143.5\n    ingressVIPs:\n    - fd00:5:143::5\n    - 192.168.143.6\n",
            "platform.baremetal.apiVIPs: Invalid value: \\\"fd00:5:143::5\\\": VIP for API must not be one of the Ingress VIPs",
        ),
        (
            "three API VIPs",
            "    apiVIPs:\n    - fd00:5:143::5\n    - 192.168.143.5\n    - 192.168.143.7\n    ingressVIPs:\n    - fd00:5:143::6\n    - 192.168.143.6\n",
            "platform.baremetal.apiVIPs: Too many: 3: must have at most 2 items",
        ),
        (
            "no ingress VIP",
            "    apiVIPs:\n    - fd00:5:143::5\n    - 192.168.143.5\n",
            "platform.baremetal.ingressVIPs: Required value: must specify at least one VIP for the Ingress",
        ),
    ] {
        let (ok, log, d) = create(&golden.replace(vips, with));
        assert!(!ok, "{what}: {log}");
        assert!(log.contains(want), "{what}: missing {want:?} in {log}");
        assert!(!d.path().join("metadata.json").exists(), "{what}");
    }
}

/// pkg/asset/manifests/infrastructure.go: the Infrastructure manifest's
/// baremetal status has the first VIP of each list in the single fields and
/// every VIP, in the install-config's order, in the lists; from it the
/// bootstrap's keepalived holds the API VIPs (docs/standin.md, "VIPs").
#[test]
fn the_infrastructure_manifest_carries_every_vip() {
    let d = assets("ipv6/ipi");
    run(d.path(), &["create", "manifests"]);
    let infra = read(d.path(), "manifests/cluster-infrastructure-02-config.yml");
    let v: yaml_serde::Value = yaml_serde::from_str(&infra).expect(&infra);
    let bm = &v["status"]["platformStatus"]["baremetal"];
    let list = |k: &str| -> Vec<String> {
        bm[k]
            .as_sequence()
            .unwrap_or_else(|| panic!("no {k} in {infra}"))
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        bm["apiServerInternalIP"].as_str(),
        Some("fd00:5:143::5"),
        "{infra}"
    );
    assert_eq!(
        list("apiServerInternalIPs"),
        ["fd00:5:143::5", "192.168.143.5"]
    );
    assert_eq!(bm["ingressIP"].as_str(), Some("fd00:5:143::6"), "{infra}");
    assert_eq!(list("ingressIPs"), ["fd00:5:143::6", "192.168.143.6"]);
    // The pointer configs name the primary API VIP as net.JoinHostPort writes it.
    run(d.path(), &["create", "ignition-configs"]);
    assert_eq!(
        merge_source(d.path(), "master"),
        "https://[fd00:5:143::5]:22623/config/master"
    );
}

/// The real `create cluster` writes metadata.json (and its state) before its
/// provisioning checks (libvirtURI reachable, externalBridge up), and no
/// terraform.tfvars.json; its `destroy bootstrap` then fails on that directory,
/// on every rerun (as recorded with the real 4.18 installer).
#[test]
fn a_failed_provisioning_check_leaves_metadata_json_and_destroy_bootstrap_refuses() {
    let d = assets("ipi");
    let path = d.path().join("install-config.yaml");
    let text = read(d.path(), "install-config.yaml").replace(
        "externalBridge: sl-ipi",
        "externalBridge: shiftlab-no-such-bridge",
    );
    std::fs::write(&path, text).unwrap();
    let out = fails(d.path(), &["create", "cluster"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{log}");
    // Without libvirt here the connection fails first; with it, the bridge.
    assert!(
        log.contains("platform.baremetal.libvirtURI: Internal error: failed to connect to libvirt")
            || log.contains(
                "platform.baremetal.externalBridge: Invalid value: \\\"shiftlab-no-such-bridge\\\""
            ),
        "{log}"
    );
    let meta: serde_json::Value = serde_json::from_str(&read(d.path(), "metadata.json")).unwrap();
    assert!(
        meta["infraID"].as_str().unwrap().starts_with("ipi-"),
        "{meta}"
    );
    assert!(d.path().join(".openshift_install_state.json").exists());
    assert!(!d.path().join("terraform.tfvars.json").exists());
    for _ in 0..2 {
        let out = fails(d.path(), &["destroy", "bootstrap"]);
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{log}");
        let want = format!(
            "failed to load cluster terraform variables: open {}/terraform.tfvars.json: no such file or directory",
            d.path().display()
        );
        assert!(log.contains(&want), "missing {want:?} in {log}");
    }
}

/// The x86_64 qemu and metal artifacts of OKD's SCOS 10 stream as the installer
/// carries it (openshift/installer data/data/coreos/scos.json, other platforms
/// and architectures left out).
const SCOS10_STREAM: &str = r#"{
  "stream": "c10s",
  "metadata": {"last-modified": "2025-07-01T21:24:39Z", "generator": "plume cosa2stream 574b0e2"},
  "architectures": {"x86_64": {"artifacts": {
    "metal": {"release": "10.0.20250628-0", "formats": {"iso": {"disk": {
      "location": "https://rhcos.mirror.openshift.com/art/storage/prod/streams/c10s/builds/10.0.20250628-0/x86_64/scos-10.0.20250628-0-live-iso.x86_64.iso",
      "sha256": "ec8cd7952a88ea72455bf0c464e44518c2005c69d4b5380c88af0d7488a9c8a1"}}}},
    "qemu": {"release": "10.0.20250628-0", "formats": {"qcow2.gz": {"disk": {
      "location": "https://rhcos.mirror.openshift.com/art/storage/prod/streams/c10s/builds/10.0.20250628-0/x86_64/scos-10.0.20250628-0-qemu.x86_64.qcow2.gz",
      "sha256": "5183854e0496825c129ca07c4134ea2c51d8cff80906e76fb00af8a6d0d71ebc",
      "uncompressed-sha256": "e990c2f2e2d42a84d70664be3815eb4db6a0b561a93e2cc11b8dd29871c49270"}}}}
  }}}
}"#;

/// `plan` with `openshift_install:` reads the installer's stream: SCOS 10
/// (`c10s`) needs x86-64-v3, and a CPU model without it is refused with the
/// field, the value, the rule and the missing features, `--force` or not; a
/// model with it, or TCG's own choice, passes.
#[test]
fn plan_refuses_a_c10s_stream_on_a_v2_cpu_model() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let stream = h.join("stream.json");
    std::fs::write(&stream, SCOS10_STREAM).unwrap();
    let plan = |libvirt: &str, force: bool| {
        let f = common::rehearsal_file(
            h,
            &format!("{libvirt}openshift_install: {}\n", fake().display()),
        );
        let mut args = vec!["plan", "-f", f.as_str()];
        if force {
            args.push("--force");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_shiftlab"))
            .args(&args)
            .current_dir(h)
            .env("HOME", h)
            .env("SHIFTLAB_HOME", h.join("state"))
            .env("SHIFTLAB_FAKE_STREAM_JSON", &stream)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for force in [false, true] {
        let (code, stdout, stderr) = plan("  cpu_model: Nehalem\n", force);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.contains(
                "libvirt.cpu_model: Nehalem lacks avx, avx2, bmi1, bmi2, f16c, fma, abm, movbe, xsave \
                 (x86-64-v3): stream c10s (release 10.0.20250628-0, CentOS Stream 10) needs x86-64-v3"
            ),
            "{stderr}"
        );
        assert_eq!(stdout, "", "no plan printed");
    }
    let (code, stdout, stderr) = plan("  cpu_model: IvyBridge\n", false);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "libvirt.cpu_model: IvyBridge lacks avx2, bmi1, bmi2, fma, abm, movbe (x86-64-v3)"
        ),
        "{stderr}"
    );
    assert!(stdout.is_empty());

    let (code, stdout, stderr) = plan("  cpu_model: Haswell-noTSX-IBRS\n", false);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("lab1-ctlplane-0"), "{stdout}");
    assert!(stderr.contains("stream c10s (release 10.0.20250628-0, CentOS Stream 10) needs x86-64-v3: the nodes' CPU has it"), "{stderr}");
    let (code, _, stderr) = plan("  domain_type: qemu\n", false);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("needs x86-64-v3: QEMU's TCG runs the nodes as Haswell-noTSX-IBRS"),
        "{stderr}"
    );
    // An unknown model is a spec error naming what is valid.
    let (code, _, stderr) = plan("  cpu_model: Nehalem-v9\n", false);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("libvirt.cpu_model: \"Nehalem-v9\" is not a QEMU x86 CPU model")
            && stderr.contains("Haswell-noTSX-IBRS"),
        "{stderr}"
    );

    // RHEL 9's stream (4.18) needs x86-64-v2 only: Nehalem has it.
    std::fs::write(
        &stream,
        SCOS10_STREAM
            .replace("\"c10s\"", "\"rhcos-4.18\"")
            .replace("\"10.0.20250628-0\"", "\"418.94.202503121207-0\""),
    )
    .unwrap();
    let (code, _, stderr) = plan("  cpu_model: Nehalem\n", false);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("stream rhcos-4.18 (release 418.94.202503121207-0, RHEL 9) needs x86-64-v2: the nodes' CPU has it"), "{stderr}");
}

/// With `storage: nfs`: every manifest the lab adds (the provisioner, its default
/// StorageClass, the registry on a claim, the monitoring config) reaches
/// bootstrap.ign under /opt/openshift/ as written, as the real installer carries
/// `openshift/` files (recorded: tests/fixtures/installer-4.18).
#[test]
fn the_storage_manifests_reach_bootstrap_ign() {
    use base64::Engine as _;
    let spec = {
        let dir = common::repo().join("tests/golden");
        let text = std::fs::read_to_string(dir.join("nfs.cluster.yaml")).unwrap();
        let env = shiftlab::spec::Env {
            home: None,
            base_dir: dir,
            libvirt_default_uri: None,
        };
        shiftlab::spec::from_str(&text, "nfs.cluster.yaml", &env)
            .unwrap()
            .spec
    };
    let lab = shiftlab::render::manifests::lab_manifests(&spec, &shiftlab::plan::derive(&spec));
    assert!(lab
        .iter()
        .any(|(p, _)| *p == "openshift/99-shiftlab-storage-storageclass.yaml"));
    let d = assets("upi");
    run(d.path(), &["create", "manifests"]);
    for (rel, text) in &lab {
        std::fs::write(d.path().join(rel), text).unwrap();
    }
    run(d.path(), &["create", "ignition-configs"]);
    let ign: serde_json::Value = serde_json::from_str(&read(d.path(), "bootstrap.ign")).unwrap();
    let files = ign["storage"]["files"].as_array().unwrap();
    for (rel, text) in &lab {
        let path = format!("/opt/openshift/{rel}");
        let f = files
            .iter()
            .find(|f| f["path"] == path.as_str())
            .unwrap_or_else(|| panic!("{path} is not in bootstrap.ign"));
        let src = f["contents"]["source"].as_str().unwrap();
        let b64 = src.split_once(";base64,").unwrap().1;
        let got = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert_eq!(String::from_utf8(got).unwrap(), *text, "{path}");
    }
}

/// The golden `storage: nfs` cluster file's spec (its lab manifests and users
/// are what the tests below carry through each verb).
fn nfs_spec() -> shiftlab::spec::ClusterSpec {
    let dir = common::repo().join("tests/golden");
    let text = std::fs::read_to_string(dir.join("nfs.cluster.yaml")).unwrap();
    let env = shiftlab::spec::Env {
        home: None,
        base_dir: dir,
        libvirt_default_uri: None,
    };
    shiftlab::spec::from_str(&text, "nfs.cluster.yaml", &env)
        .unwrap()
        .spec
}

/// The contents of the file at `path` in an Ignition config, None without one.
fn ign_file(ign: &serde_json::Value, path: &str) -> Option<String> {
    use base64::Engine as _;
    let f = ign["storage"]["files"]
        .as_array()?
        .iter()
        .find(|f| f["path"] == path)?;
    let src = f["contents"]["source"].as_str()?;
    let b64 = src.split_once(";base64,")?.1;
    let got = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    Some(String::from_utf8(got).unwrap())
}

/// SNO: `create manifests`, the lab's added, then `create
/// single-node-ignition-config` takes them into the live config under
/// /opt/openshift/ and consumes them, as the real one builds the
/// bootstrap-in-place config from the manifests on disk
/// (pkg/asset/ignition/bootstrap/bootstrapinplace.go); a rerun after they were
/// consumed takes them from the state file.
#[test]
fn single_node_ignition_config_carries_the_manifests_on_disk() {
    let spec = nfs_spec();
    let lab = shiftlab::render::manifests::lab_manifests(&spec, &shiftlab::plan::derive(&spec));
    assert!(lab
        .iter()
        .any(|(p, _)| *p == "openshift/99-shiftlab-storage-storageclass.yaml"));
    let d = assets("sno");
    run(d.path(), &["create", "manifests"]);
    for (rel, text) in &lab {
        std::fs::write(d.path().join(rel), text).unwrap();
    }
    let out = run(d.path(), &["create", "single-node-ignition-config"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("Consuming Openshift Manifests from target directory"),
        "{log}"
    );
    assert!(!d.path().join("openshift").exists() && !d.path().join("manifests").exists());
    for round in 0..2 {
        let ign: serde_json::Value =
            serde_json::from_str(&read(d.path(), "bootstrap-in-place-for-live-iso.ign")).unwrap();
        for (rel, text) in &lab {
            let path = format!("/opt/openshift/{rel}");
            assert_eq!(
                ign_file(&ign, &path).as_deref(),
                Some(text.as_str()),
                "round {round}: {path}"
            );
        }
        std::fs::remove_file(d.path().join("bootstrap-in-place-for-live-iso.ign")).unwrap();
        run(d.path(), &["create", "single-node-ignition-config"]);
    }
}

/// Agent: the extra manifests of `openshift/*.yaml|yml` go into the ISO's
/// Ignition, one file per YAML document under /etc/assisted/extra-manifests/,
/// and are consumed; a `.json` there is not read (the real one globs YAML
/// only); a document that is no object fails the verb, consuming nothing
/// (pkg/asset/agent/manifests/extramanifests.go, pkg/asset/agent/image/ignition.go).
#[test]
fn agent_create_image_embeds_the_extra_manifests_and_refuses_what_is_no_object() {
    const TWO: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n# the second\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n";
    let Some((out, image)) = agent_image_run(AgentRun {
        extra: &[
            ("openshift/99-two.yaml", TWO),
            (
                "openshift/98-one.yml",
                "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\"}\n",
            ),
            ("openshift/97-skipped.json", "{\"apiVersion\": \"v1\"}\n"),
        ],
        ..WITH_OC
    }) else {
        return;
    };
    assert!(out.status.success(), "{}", image.log);
    let d = image.dir.path();
    let ign = &image.ign;
    assert_eq!(
        ign_file(ign, "/etc/assisted/extra-manifests/99-two-0.yaml").as_deref(),
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
    );
    assert!(ign_file(ign, "/etc/assisted/extra-manifests/99-two-1.yaml")
        .unwrap()
        .contains("name: b"));
    assert!(ign_file(ign, "/etc/assisted/extra-manifests/98-one-0.yml").is_some());
    let files = ign["storage"]["files"].as_array().unwrap();
    assert!(
        !files
            .iter()
            .any(|f| f["path"].as_str().unwrap().contains("97-skipped")),
        "a .json is not an extra manifest"
    );
    assert!(
        image
            .log
            .contains("Consuming Extra Manifests from target directory"),
        "{}",
        image.log
    );
    assert!(!d.join("openshift/99-two.yaml").exists());
    assert!(d.join("openshift/97-skipped.json").exists());

    let Some((out, image)) = agent_image_run(AgentRun {
        extra: &[
            ("openshift/99-ok.yaml", TWO),
            ("openshift/99-list.yaml", "- a\n- b\n"),
        ],
        ..WITH_OC
    }) else {
        return;
    };
    assert_eq!(out.status.code(), Some(1), "{}", image.log);
    assert!(
        image.log.contains(
            "could not decode YAML for openshift/99-list.yaml: Error reading multiple YAMLs: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type image.unstructured"
        ),
        "{}",
        image.log
    );
    let d = image.dir.path();
    for f in [
        "install-config.yaml",
        "agent-config.yaml",
        "openshift/99-ok.yaml",
    ] {
        assert!(d.join(f).exists(), "{f} was consumed");
    }
    assert!(!d.join("agent.x86_64.iso").exists());
}
