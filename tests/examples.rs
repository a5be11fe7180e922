//! Every shipped example plans, deterministically, and the plan holds no secret.

mod common;

use std::fs;

#[test]
fn every_example_plans_to_the_same_bytes_twice() {
    let dir = common::repo().join("examples");
    let mut examples: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    examples.sort();
    let names: Vec<String> = examples
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    for wanted in [
        "upi.yaml",
        "compact.yaml",
        "sno.yaml",
        "ipi.yaml",
        "agent.yaml",
        "okd.yaml",
        "kcli-params.yml",
    ] {
        assert!(
            names.iter().any(|n| n == wanted),
            "examples/{wanted} is missing"
        );
    }
    let pull_secret = fs::read_to_string(dir.join("pull-secret.example.json")).unwrap();
    let auth = "cmVwbGFjZS13aXRoOnlvdXItcHVsbC1zZWNyZXQ=";
    assert!(pull_secret.contains(auth));
    for ex in &examples {
        let home = tempfile::tempdir().unwrap();
        let path = ex.to_str().unwrap();
        let mut outputs = Vec::new();
        for _ in 0..2 {
            let out = common::shiftlab(&["plan", "-f", path, "-o", "json"], home.path());
            assert!(
                out.status.success(),
                "{path}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            outputs.push(out.stdout);
        }
        assert_eq!(outputs[0], outputs[1], "{path}: plan differs between runs");
        let text = String::from_utf8(outputs.remove(0)).unwrap();
        let plan: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(plan["nodes"].as_array().is_some_and(|n| !n.is_empty()));
        assert!(
            !text.contains(auth),
            "{path}: the plan holds the pull secret"
        );
        for fmt in ["table", "yaml"] {
            let out = common::shiftlab(&["plan", "-f", path, "-o", fmt], home.path());
            assert!(out.status.success());
            assert!(!String::from_utf8_lossy(&out.stdout).contains(auth));
        }
        assert!(
            common::tree(home.path()).is_empty(),
            "{path}: plan wrote files"
        );
    }
}

/// `-P` as kcli users type it: over kcli's own spellings in the file
/// (`ctlplane_memory: 20480`), shown by plan, in the table and in JSON.
#[test]
fn params_override_the_example_and_plan_shows_them() {
    let home = tempfile::tempdir().unwrap();
    let file = common::repo().join("examples/kcli-params.yml");
    let args = |extra: &[&'static str]| {
        let mut a = vec!["plan", "-f", file.to_str().unwrap()];
        a.extend(["-P", "workers=3", "-P", "ctlplane.memory=24576"]);
        a.extend(extra);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = common::shiftlab(&a, home.path());
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run(args(&[]));
    assert!(
        table.starts_with("overrides: workers=3, ctlplane.memory=24576\n"),
        "{table}"
    );
    let node = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not in:\n{table}"))
            .to_string()
    };
    assert!(node("kcli-worker-2").contains("12288 MiB"));
    assert!(!table.contains("kcli-worker-3"));
    for n in 0..3 {
        assert!(node(&format!("kcli-ctlplane-{n}")).contains("24576 MiB"));
    }
    let json: serde_json::Value = serde_json::from_str(&run(args(&["-o", "json"]))).unwrap();
    assert_eq!(
        json["overrides"],
        serde_json::json!(["workers=3", "ctlplane.memory=24576"])
    );
    let nodes = json["nodes"].as_array().unwrap();
    let workers = nodes.iter().filter(|n| n["role"] == "worker").count();
    assert_eq!(workers, 3);
    for n in nodes.iter().filter(|n| n["role"] == "ctlplane") {
        assert_eq!(n["memory_mib"], 24576, "{n}");
    }
    // A secret given with -P is not shown.
    let shown = run(args(&["-P", "bmc.password=s3cr3tpw"]));
    assert!(
        shown.starts_with("overrides: workers=3, ctlplane.memory=24576, bmc.password=<redacted>\n"),
        "{shown}"
    );
    // Without -P, the plan is the file's, and says nothing of overrides.
    let plain = run(vec![
        "plan".into(),
        "-f".into(),
        file.display().to_string(),
        "-o".into(),
        "json".into(),
    ]);
    assert!(!plain.contains("overrides"));
    assert!(!plain.contains("kcli-worker-2"));
}
