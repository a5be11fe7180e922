//! `shiftlab approve-csrs` end to end against a stand-in API server on loopback that
//! answers with the recorded list (`tests/fixtures/csr/list.json`) and records the
//! approvals. Nothing leaves 127.0.0.1.

mod common;
#[path = "support/fake_kube.rs"]
mod fake_kube;

use serde_json::Value;
use std::path::Path;

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const GOOD: [&str; 3] = [
    "csr-good-client-worker-0",
    "csr-good-serving-worker-0",
    "csr-good-client-worker-1-fqdn",
];

use fake_kube::FakeKube;

/// A state dir with lab1's plan.json and an admin kubeconfig for `server`.
fn state(home: &Path, server: &str) {
    let out = common::shiftlab(
        &[
            "plan",
            "-f",
            common::repo()
                .join("tests/fixtures/csr/cluster.yaml")
                .to_str()
                .unwrap(),
            "-o",
            "json",
        ],
        home,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = home.join("state/clusters/lab1");
    std::fs::create_dir_all(dir.join("assets/auth")).unwrap();
    std::fs::write(dir.join("plan.json"), &out.stdout).unwrap();
    std::fs::write(
        dir.join("assets/auth/kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: lab1\n  cluster:\n    server: {server}\n\
             contexts:\n- name: admin\n  context:\n    cluster: lab1\n    user: admin\n\
             current-context: admin\nusers:\n- name: admin\n  user:\n    token: test-token\n"
        ),
    )
    .unwrap();
}

/// The approvals asked, in order: the paths of the PUTs.
fn put_paths(fake: &FakeKube) -> Vec<String> {
    fake.seen()
        .into_iter()
        .filter(|s| s.method == "PUT")
        .map(|s| s.path)
        .collect()
}

/// The first pass approves the client CSRs; worker-0's serving CSR waits for its Node.
fn expected_puts() -> Vec<String> {
    [GOOD[0], GOOD[2]]
        .iter()
        .map(|n| format!("{CSRS}/{n}/approval"))
        .collect()
}

#[test]
fn approves_the_good_csrs_and_reports_as_json() {
    let home = tempfile::tempdir().unwrap();
    let fake = FakeKube::cluster_api(Vec::new(), Vec::new(), 0);
    state(home.path(), &fake.url());
    let out = common::shiftlab(&["approve-csrs", "lab1", "-o", "json"], home.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = |k: &str| -> Vec<String> {
        report[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["csr"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("approved"), [GOOD[0], GOOD[2]]);
    assert_eq!(names("refused").len(), 10, "{report:#}");
    assert!(names("refused")
        .iter()
        .all(|n| n.starts_with("csr-hostile-") || n == GOOD[1]));
    assert_eq!(put_paths(&fake), expected_puts());
    // refusals are logged as warnings with their reason
    assert!(
        stderr.contains("refused: intruder is not a node of the plan"),
        "{stderr}"
    );
}

#[test]
fn prints_a_table_and_watches_one_node() {
    let home = tempfile::tempdir().unwrap();
    let fake = FakeKube::cluster_api(Vec::new(), Vec::new(), 0);
    state(home.path(), &fake.url());
    let out = common::shiftlab(&["approve-csrs", "lab1"], home.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let first = table.lines().next().unwrap();
    for h in ["CSR", "DECISION", "NODE", "KIND", "REASON"] {
        assert!(first.contains(h), "{table}");
    }
    assert!(table.contains("csr-hostile-wrong-san"), "{table}");
    assert_eq!(
        table.lines().filter(|l| l.contains(" approved ")).count(),
        2,
        "{table}"
    );

    let out = common::shiftlab(
        &["approve-csrs", "lab1", "--watch", "--node", "lab1-worker-0"],
        home.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("approved csr-good-serving-worker-0 (lab1-worker-0 serving)"),
        "{text}"
    );
    assert!(text.contains("every awaited node has its client and serving certificates approved"));
    assert_eq!(put_paths(&fake).len(), 3);
}

#[test]
fn a_stale_approval_refused_409_is_read_again_and_approved() {
    let home = tempfile::tempdir().unwrap();
    let fake = FakeKube::cluster_api(Vec::new(), Vec::new(), 0);
    state(home.path(), &fake.url());
    // Someone else writes worker-0's client CSR between shiftlab's read and
    // its approval: the API refuses the stale approval with 409.
    fake.stale_approval(GOOD[0]);
    let out = common::shiftlab(
        &["approve-csrs", "lab1", "--watch", "--node", "lab1-worker-0"],
        home.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let approval = format!("{CSRS}/{}/approval", GOOD[0]);
    let codes: Vec<u16> = fake
        .seen()
        .into_iter()
        .filter(|s| s.method == "PUT" && s.path == approval)
        .map(|s| s.code)
        .collect();
    assert_eq!(codes, [409, 200]);
    let csr = &fake.objects()[&format!("CertificateSigningRequest//{}", GOOD[0])];
    assert_eq!(csr["status"]["conditions"][0]["type"], "Approved", "{csr}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("approved csr-good-serving-worker-0 (lab1-worker-0 serving)"),
        "{text}"
    );
}

#[test]
fn without_a_plan_it_says_where_it_looked() {
    let home = tempfile::tempdir().unwrap();
    let out = common::shiftlab(&["approve-csrs", "nosuch"], home.path());
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("clusters/nosuch/plan.json"), "{stderr}");
}
