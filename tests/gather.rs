//! `shiftlab gather`: the tarball holds what it promises, and none of the
//! secrets planted in the cluster's state (pull secret, BMC password, HTTP
//! token, kubeconfig key and token, kubeadmin password, proxy credentials) nor
//! those a log leaked that no file names (private keys of every PEM kind, a
//! kubeconfig's token and key, a bearer token, a URL's password) — searched for
//! in every byte of every member. `--out` in a shared directory cannot be
//! turned against a file of the user running gather.

mod common;

use std::io::Read;
use std::path::Path;

const PULL_AUTH: &str = "cGxhbnRlZDpwdWxsLXNlY3JldC0xMjM0NQ==";
const BMC_PASSWORD: &str = "planted-bmc-password-6789";
const HTTP_TOKEN: &str = "plantedhttptoken0123456789abcdef";
const CLIENT_KEY: &str = "UExBTlRFRC1DTElFTlQtS0VZLURBVEE=";
const KUBEADMIN: &str = "Planted-Kubeadmin-Pass";
const SSH_KEY_BODY: &str = "b3BlbnNzaC1wbGFudGVkLXByaXZhdGUta2V5";
const PROXY_PASSWORD: &str = "s3cret";
const HTTPS_PROXY_PASSWORD: &str = "planted-https-proxy-pw";
const KUBE_TOKEN: &str = "sha256~PlantedKubeconfigToken";
/// Leaked in a log, known to no file of the cluster: caught by their shape.
const RSA_KEY_BODY: &str = "MIIEplantedRSAkeyBody";
const EC_KEY_BODY: &str = "MHcCAQEEIplantedECkeyBody";
const ENCRYPTED_KEY_BODY: &str = "MIIFHzBJBgkqplantedEncrypted";
const UNKNOWN_TOKEN: &str = "sha256~LeakedUnknownToken";
const UNKNOWN_CLIENT_KEY: &str = "TEVBS0VELUNMSUVOVC1LRVk=";
const BEARER: &str = "eyJhbGciOiJSUzI1NiJ9.planted.bearer";
const URL_PASSWORD: &str = "registry-pw-in-url";

fn plant(home: &Path) -> std::path::PathBuf {
    let f = common::rehearsal_file(home, "workers: 1\n");
    let out = common::shiftlab(&["plan", "-f", &f, "-o", "json"], home);
    assert!(out.status.success());
    let c = home.join("state/clusters/lab1");
    std::fs::create_dir_all(c.join("assets/auth")).unwrap();
    std::fs::write(c.join("plan.json"), &out.stdout).unwrap();
    let pull = format!(
        "{{\"auths\":{{\"quay.io\":{{\"auth\":\"{PULL_AUTH}\",\"email\":\"me@example.com\"}}}}}}"
    );
    std::fs::write(
        c.join("install-config.backup.yaml"),
        format!(
            "apiVersion: v1\nbaseDomain: lab.test\nproxy:\n  httpProxy: http://user:{PROXY_PASSWORD}@proxy:3128\n  \
             httpsProxy: https://user:{HTTPS_PROXY_PASSWORD}@proxy:3129\n  noProxy: .lab.test\n\
             pullSecret: '{pull}'\nsshKey: ssh-ed25519 AAAA k\n"
        ),
    )
    .unwrap();
    std::fs::write(c.join("bmc-password"), BMC_PASSWORD).unwrap();
    std::fs::write(c.join("http-token"), HTTP_TOKEN).unwrap();
    std::fs::write(c.join("assets/auth/kubeadmin-password"), KUBEADMIN).unwrap();
    std::fs::write(
        c.join("assets/auth/kubeconfig"),
        format!("apiVersion: v1\nusers:\n- name: admin\n  user:\n    client-certificate-data: Q0VSVA==\n    client-key-data: {CLIENT_KEY}\n- name: robot\n  user:\n    token: {KUBE_TOKEN}\n"),
    )
    .unwrap();
    std::fs::write(
        c.join("assets/bootstrap.ign"),
        format!("{{\"pull\":\"{PULL_AUTH}\"}}"),
    )
    .unwrap();
    // A log that leaked all of them (it should not, but gather must not pass them on).
    std::fs::write(
        c.join("openshift-install.log"),
        format!(
            "level=info msg=\"Waiting up to 20m0s for bootstrapping to complete...\"\n\
             level=debug msg=\"fetching https://192.168.126.1:8080/{HTTP_TOKEN}/lab1-worker-0.ign\"\n\
             level=debug msg=\"bmc password={BMC_PASSWORD} kubeadmin {KUBEADMIN}\"\n\
             level=debug msg=\"pull secret {pull}\"\n\
             -----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\n\
             level=debug msg=\"using proxy {PROXY_PASSWORD} and {KUBE_TOKEN}\"\n\
             key: -----BEGIN RSA PRIVATE KEY-----\n{RSA_KEY_BODY}\n-----END RSA PRIVATE KEY-----\n\
             {{\"tls.key\":\"-----BEGIN EC PRIVATE KEY-----\\n{EC_KEY_BODY}\\n-----END EC PRIVATE KEY-----\\n\"}}\n\
             -----BEGIN ENCRYPTED PRIVATE KEY-----\n{ENCRYPTED_KEY_BODY}\n-----END ENCRYPTED PRIVATE KEY-----\n\
             users:\n- user:\n    token: {UNKNOWN_TOKEN}\n    client-key-data: {UNKNOWN_CLIENT_KEY}\n\
             > GET /api HTTP/1.1\n> Authorization: Bearer {BEARER}\n\
             level=debug msg=\"pulling from https://robot:{URL_PASSWORD}@registry.lab.test:5000/v2/\"\n\
             level=error msg=\"Bootstrap failed to complete: timed out waiting for the condition\"\n"
        ),
    )
    .unwrap();
    std::fs::write(c.join("install-state.json"), "{\"format\": 1}\n").unwrap();
    c
}

fn members(tarball: &Path) -> Vec<(String, Vec<u8>)> {
    let f = std::fs::File::open(tarball).unwrap();
    let mut a = tar::Archive::new(flate2::read::GzDecoder::new(f));
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().display().to_string();
            let mut b = Vec::new();
            e.read_to_end(&mut b).unwrap();
            (name, b)
        })
        .collect()
}

#[test]
fn the_tarball_has_the_logs_and_state_and_no_planted_secret() {
    let home = tempfile::tempdir().unwrap();
    plant(home.path());
    let out_path = home.path().join("g.tar.gz");
    let out = common::shiftlab(
        &[
            "gather",
            "lab1",
            "-c",
            "test:///default",
            "--out",
            &out_path.display().to_string(),
            "-o",
            "json",
        ],
        home.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hints: Vec<&str> = summary["hints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    assert!(hints.contains(&"bootstrap-stuck"), "{hints:?}");

    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&out_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let m = members(&out_path);
    let names: Vec<&str> = m.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "gather-lab1/state/plan.json",
        "gather-lab1/state/install-state.json",
        "gather-lab1/state/install-config.backup.yaml",
        "gather-lab1/install/openshift-install.log",
        "gather-lab1/doctor.json",
        "gather-lab1/SUMMARY.txt",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for (name, bytes) in &m {
        assert!(
            !name.contains("auth/") && !name.ends_with(".ign") && !name.contains("bmc-password"),
            "{name}"
        );
        let text = String::from_utf8_lossy(bytes);
        for secret in [
            PULL_AUTH,
            BMC_PASSWORD,
            HTTP_TOKEN,
            CLIENT_KEY,
            KUBEADMIN,
            SSH_KEY_BODY,
            PROXY_PASSWORD,
            HTTPS_PROXY_PASSWORD,
            KUBE_TOKEN,
            RSA_KEY_BODY,
            EC_KEY_BODY,
            ENCRYPTED_KEY_BODY,
            UNKNOWN_TOKEN,
            UNKNOWN_CLIENT_KEY,
            BEARER,
            URL_PASSWORD,
        ] {
            assert!(
                !text.contains(secret),
                "{name} holds a planted secret {secret}"
            );
        }
    }
    // What was redacted is still readable around it.
    let log = &m
        .iter()
        .find(|(n, _)| n.ends_with("openshift-install.log"))
        .unwrap()
        .1;
    let log = String::from_utf8_lossy(log);
    assert!(log.contains("/<redacted>/lab1-worker-0.ign"), "{log}");
    assert!(log.contains("Bootstrap failed to complete"));
    let ic = &m
        .iter()
        .find(|(n, _)| n.ends_with("install-config.backup.yaml"))
        .unwrap()
        .1;
    let ic = String::from_utf8_lossy(ic);
    assert!(ic.contains("sshKey: ssh-ed25519 AAAA k"), "{ic}");
    // The proxy is still there to read, without its password.
    assert!(
        ic.contains("httpProxy: http://user:<redacted>@proxy:3128"),
        "{ic}"
    );
    assert!(
        log.contains("https://robot:<redacted>@registry.lab.test:5000/v2/"),
        "{log}"
    );
    assert!(log.contains("Authorization: Bearer <redacted>"), "{log}");
}

/// Every `.g.tar.gz.tmp-PID` the next processes could get: what the temp
/// name was, so that a planted link there redirected gather's write.
fn plant_pid_names(dir: &Path, name: &str, victim: &Path) {
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for pid in last + 1..last + 3000 {
        std::os::unix::fs::symlink(victim, dir.join(format!(".{name}.tmp-{pid}"))).unwrap();
    }
}

#[test]
fn gather_out_in_a_shared_directory_cannot_overwrite_a_links_target() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    plant(home.path());
    // A shared directory (as /tmp: sticky, everyone writes) and a file of the
    // user running gather that someone there would like overwritten.
    let shared = home.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = home.path().join("victim");
    std::fs::write(&victim, "the victim's content").unwrap();
    let gather_to = |out: &Path| {
        common::shiftlab(
            &[
                "gather",
                "lab1",
                "-c",
                "test:///default",
                "--out",
                &out.display().to_string(),
            ],
            home.path(),
        )
    };

    // A link planted at the output name: refused, nothing written.
    let link = shared.join("g.tar.gz");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let out = gather_to(&link);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("g.tar.gz: a symbolic link is there"), "{err}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"the victim's content");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());

    // Links planted at every temp name the next pids would have had.
    let target = shared.join("h.tar.gz");
    plant_pid_names(&shared, "h.tar.gz", &victim);
    let out = gather_to(&target);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"the victim's content");
    let m = std::fs::symlink_metadata(&target).unwrap();
    assert!(m.is_file());
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    assert!(members(&target)
        .iter()
        .any(|(n, _)| n == "gather-lab1/SUMMARY.txt"));
}

#[test]
fn an_unknown_cluster_is_refused_and_nothing_written() {
    let home = tempfile::tempdir().unwrap();
    let out = common::shiftlab(&["gather", "lab9", "--out", "x.tar.gz"], home.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no cluster lab9"));
    assert!(!home.path().join("x.tar.gz").exists());
    let out = common::shiftlab(&["gather", "../lab9"], home.path());
    assert_eq!(out.status.code(), Some(2));
}
