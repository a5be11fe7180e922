//! `shiftlab create install-config` through the binary: files, modes, backups.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

fn mode(p: &std::path::Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn writes_configs_with_backups_and_private_modes() {
    let home = tempfile::tempdir().unwrap();
    for (example, files) in [
        (
            "upi.yaml",
            vec!["install-config.yaml", "install-config.backup.yaml"],
        ),
        (
            "agent.yaml",
            vec![
                "install-config.yaml",
                "install-config.backup.yaml",
                "agent-config.yaml",
                "agent-config.backup.yaml",
            ],
        ),
        (
            "ipi.yaml",
            vec!["install-config.yaml", "install-config.backup.yaml"],
        ),
    ] {
        let path = common::repo().join("examples").join(example);
        let dir = home.path().join(example);
        let out = common::shiftlab(
            &[
                "create",
                "install-config",
                "-f",
                path.to_str().unwrap(),
                "--dir",
                dir.to_str().unwrap(),
            ],
            home.path(),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for f in &files {
            let p = dir.join(f);
            assert_eq!(mode(&p), 0o600, "{}", p.display());
        }
        assert_eq!(
            fs::read(dir.join("install-config.yaml")).unwrap(),
            fs::read(dir.join("install-config.backup.yaml")).unwrap()
        );
        let text = fs::read_to_string(dir.join("install-config.yaml")).unwrap();
        assert!(text.contains("cmVwbGFjZS13aXRoOnlvdXItcHVsbC1zZWNyZXQ="));
        // The secret is in the file, never on the terminal.
        assert!(!String::from_utf8_lossy(&out.stdout).contains("cmVwbGFj"));
        assert!(!String::from_utf8_lossy(&out.stderr).contains("cmVwbGFj"));
    }
    // A render writes no state: the BMC password is the file's, or a new one
    // (said, never printed), and none is stored.
    assert!(!home.path().join("state").exists());
    let ic = fs::read_to_string(home.path().join("ipi.yaml/install-config.yaml")).unwrap();
    assert!(ic.contains("password: "), "{ic}");
    // Once the target made the cluster's password, the render uses it.
    let path = common::repo().join("examples/ipi.yaml");
    let out = common::shiftlab(
        &["create", "install-config", "-f", path.to_str().unwrap()],
        home.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pw = home.path().join("state/clusters/ipi/bmc-password");
    assert_eq!(mode(&pw), 0o600);
    let first = fs::read_to_string(&pw).unwrap();
    let again = home.path().join("again");
    let out = common::shiftlab(
        &[
            "create",
            "install-config",
            "-f",
            path.to_str().unwrap(),
            "--dir",
            again.to_str().unwrap(),
        ],
        home.path(),
    );
    assert!(out.status.success());
    assert_eq!(fs::read_to_string(&pw).unwrap(), first);
    let ic = fs::read_to_string(again.join("install-config.yaml")).unwrap();
    assert!(ic.contains(&format!("password: {first}")), "{ic}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&first));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&first));
}

/// `create` records the plan with `-P`'s values; the same target without them
/// is a changed cluster file, refused by the recorded-plan rules.
#[test]
fn params_shape_the_recorded_plan() {
    let home = tempfile::tempdir().unwrap();
    let file = common::rehearsal_file(home.path(), "workers: 2\n");
    let create = |extra: &[&str]| {
        let mut args = vec!["create", "install-config", "-f", file.as_str()];
        args.extend(extra);
        common::shiftlab(&args, home.path())
    };
    let out = create(&["-P", "workers=3", "-P", "worker.memory=10240"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cluster = home.path().join("state/clusters/lab1");
    let plan: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(cluster.join("install-plan.json")).unwrap())
            .unwrap();
    let workers: Vec<&serde_json::Value> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["role"] == "worker")
        .collect();
    assert_eq!(workers.len(), 3, "{plan}");
    assert!(workers.iter().all(|n| n["memory_mib"] == 10240), "{plan}");
    let config = fs::read_to_string(cluster.join("assets/install-config.yaml")).unwrap();
    assert!(config.contains("replicas: 3"), "{config}");
    let out = create(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("the cluster file of lab1 changed")
            && stderr.contains("nodes[lab1-worker-2]: removed"),
        "{stderr}"
    );
    // The same -P again is the same plan.
    let out = create(&["-P", "workers=3", "-P", "worker.memory=10240"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A kcli parameter file's proxy, inline `ca`, `disconnected_url`,
/// `imagecontentsources` and `machine_cidr` reach install-config as kcli's own
/// install-config template puts them.
#[test]
fn kcli_keys_reach_install_config() {
    let home = tempfile::tempdir().unwrap();
    let fixtures = common::repo().join("tests/fixtures");
    let pem = fs::read_to_string(fixtures.join("trust-bundle.pem")).unwrap();
    let indented: String = pem.lines().map(|l| format!("  {l}\n")).collect();
    let file = home.path().join("kcli.yml");
    fs::write(
        &file,
        format!(
            "cluster: kcli\ndomain: karmalabs.corp\nversion: stable\ntag: '4.18'\n\
             pull_secret: {}\nmachine_cidr: 192.168.140.0/24\n\
             api_ip: 192.168.140.253\ningress_ip: 192.168.140.252\n\
             http_proxy: proxy.lab.test:3128\nno_proxy: .lab.test,10.0.0.0/8\n\
             disconnected_url: https://registry.lab.test:5000\n\
             imagecontentsources:\n- source: quay.io/acme/app\n  mirror: registry.lab.test:5000/acme/app\n\
             ca: |\n{indented}ntp_server:\nautostart: false\nextra_networks: []\n",
            fixtures.join("pull-secret.json").display()
        ),
    )
    .unwrap();
    let dir = home.path().join("out");
    let out = common::shiftlab(
        &[
            "create",
            "install-config",
            "-f",
            file.to_str().unwrap(),
            "--dir",
            dir.to_str().unwrap(),
        ],
        home.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("unknown key"), "{stderr}");
    let text = fs::read_to_string(dir.join("install-config.yaml")).unwrap();
    let v: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
    assert_eq!(v["proxy"]["httpProxy"], "http://proxy.lab.test:3128");
    assert_eq!(v["proxy"]["httpsProxy"], "http://proxy.lab.test:3128");
    assert_eq!(v["proxy"]["noProxy"], ".lab.test,10.0.0.0/8");
    assert_eq!(
        v["additionalTrustBundle"].as_str().map(str::trim),
        Some(pem.trim())
    );
    assert_eq!(
        v["networking"]["machineNetwork"][0]["cidr"],
        "192.168.140.0/24"
    );
    let sources: Vec<(String, Vec<String>)> = v["imageDigestSources"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["source"].as_str().unwrap().to_string(),
                s["mirrors"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect();
    let r = "registry.lab.test:5000";
    let s = |src: &str, m: &[String]| (src.to_string(), m.to_vec());
    assert_eq!(
        sources,
        [
            s(
                "quay.io/openshift-release-dev/ocp-v4.0-art-dev",
                &[
                    format!("{r}/openshift-release-dev/ocp-v4.0-art-dev"),
                    format!("{r}/openshift/release")
                ]
            ),
            s(
                "quay.io/openshift-release-dev",
                &[format!("{r}/openshift-release-dev")]
            ),
            s(
                "registry.ci.openshift.org/ocp/release",
                &[format!("{r}/openshift-release-dev")]
            ),
            s("quay.io/acme/app", &[format!("{r}/acme/app")]),
        ]
    );
}
