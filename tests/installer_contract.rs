//! The stand-in `openshift-install` shiftlab ships (assets/rehearsal, embedded by src/rehearse/installer.rs) held to the
//! real 4.18's recorded runs (tests/fixtures/installer-4.18, README there), not to
//! what shiftlab expects of it: for every recorded case the fake models, the fake
//! runs on the recorded install-config (and agent-config), verb by verb in one
//! directory, and must agree with the record on each verb's exit code, every log
//! line (the unquoted `level=… msg=…` form; `<dir>` is the directory), the files
//! after each verb, `metadata.json`, the Ignition configs' shape and the agent
//! configuration's layout. What the fake does not follow is in the tables below,
//! each with the reason; a recorded case in neither list fails the test.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use serde_json::Value;

fn records() -> PathBuf {
    common::repo().join("tests/fixtures/installer-4.18")
}

fn fake() -> PathBuf {
    common::repo().join("assets/rehearsal/openshift-install")
}

/// What the binary embeds and materializes for a rehearsal is the file this
/// contract holds: one stand-in for the product and the tests.
#[test]
fn the_shipped_installer_is_the_one_held_to_the_records() {
    let file = std::fs::read_to_string(fake()).unwrap();
    assert_eq!(shiftlab::rehearse::installer::OPENSHIFT_INSTALL, file);
    let oc = std::fs::read_to_string(common::repo().join("assets/rehearsal/oc")).unwrap();
    assert_eq!(shiftlab::rehearse::installer::OC, oc);
}

/// The cases the fake models, by the test that runs them
/// (`o-agent-compact.config-image`: the recorded agent layout, which
/// [`the_agent_layout_rule_is_the_recorded_one`] and
/// [`agent_configuration_has_the_recorded_layout`] hold the fake to).
const UPI: &[&str] = &[
    "ex-upi",
    "ex-compact",
    "ex-okd",
    "o-upi",
    "o-compact",
    "v-upi1w",
    "v-upi4",
    "v-upi5",
];
const EDGES: &[&str] = &[
    "v-extras",
    "v-extras2",
    "v-cap-None",
    "v-cap-NoneIngress",
    "v-fips",
    "v-fips-skip",
];
const SNO: &[&str] = &["ex-sno", "o-sno"];
const IPI: &[&str] = &["ex-ipi", "o-ipi", "v-ipi-compact", "v-ipi1w"];
const AGENT: &[&str] = &[
    "ex-agent",
    "o-agent",
    "o-agent-sno",
    "o-agent-compact",
    "o-agent-compact.config-image",
];

/// Recorded cases with nothing the fake could be held to.
const NOT_MODELLED: &[(&str, &str)] = &[
    ("v-cap-v4", "the record holds its name only, no run"),
    ("o-agent-img", "the record holds no run (`runs` is empty)"),
];

/// Recorded verbs the fake does not model.
const VERBS_NOT_MODELLED: &[(&str, &str)] = &[
    (
        "agent create cluster-manifests",
        "shiftlab never runs it (it runs `agent create image`), and the fake models the verbs shiftlab runs",
    ),
    (
        "agent create config-image",
        "shiftlab never runs it; the layout of the configuration it packs is held against `agent create image`'s Ignition instead",
    ),
    (
        "agent create image",
        "recorded as a fact, not a run: without `oc` on PATH it fails with `exec: \"oc\": executable file not found in $PATH` (tests/fake_installer.rs holds the fake to that line); the verb's Ignition is held to the recorded layout here, with the stand-in `oc` on PATH",
    ),
];

/// Recorded facts the fake does not follow, or that a case does not record; each
/// is checked as far as the reason says.
const FACTS_SKIPPED: &[(&str, &str)] = &[
    (
        "pointer storage",
        "the real master.ign/worker.ign have no storage; the fake's carry /etc/shiftlab/{node-labels,schedulable,router-node-selector}, where the stand-ins learn where routers may run (docs/standin.md, \"Routers\"); nothing else is in their storage, and their merge source, CAs, units and users are the recorded ones",
    ),
    (
        "full config files",
        "the real bootstrap.ign and SNO live config hold ~100 files and ~12 units (TLS assets, the scripts of bootstrap services no stand-in runs); the fake's hold the manifests (the same ones as recorded), the admin kubeconfig, bootkube.sh (and install-to-disk.sh) and their units, each at a recorded path",
    ),
    (
        "config image files",
        "assisted-service's env (HW_VALIDATOR_REQUIREMENTS: shiftlab refuses below it itself, spec::resolve::hardware), its manifests and TLS assets, /root/.docker/config.json, NetworkManager's clientid.conf, /etc/issue and 10-default-env.conf: the stand-ins run no assisted-service, NetworkManager or registry client",
    ),
    (
        "router facts in the agent Ignition",
        "without workers the fake's agent Ignition also carries /etc/shiftlab/* router facts for the stand-ins (as the pointer configs do)",
    ),
    (
        "ids",
        "metadata.json's clusterID and infraID are random in each run, the real one's too: their shape is checked",
    ),
    (
        "create cluster exit code",
        "the record gives the files and the message of ex-ipi's `create cluster`, not its exit code",
    ),
    (
        "derived install configs",
        "not recorded for v-cap-None, v-cap-NoneIngress and v-extras2 (v-extras with the capability set each record names: its error message, its cluster-config manifest; v-extras2 none, so one 4.18 accepts, v4.16, which no compared fact depends on) nor v-fips-skip (v-fips's, which its lines name, with OPENSHIFT_INSTALL_SKIP_HOSTCRYPT_VALIDATION set)",
    ),
];

/// The reason a fact is skipped, said on stderr; the fact must be in the table.
fn skipped(fact: &str) {
    let (_, why) = FACTS_SKIPPED
        .iter()
        .chain(VERBS_NOT_MODELLED)
        .find(|(f, _)| *f == fact)
        .unwrap_or_else(|| panic!("{fact:?} is in no skip table"));
    eprintln!("skipped {fact}: {why}");
}

fn load(name: &str) -> Value {
    let path = records().join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// v-extras' install config with its capabilities section replaced.
fn extras_with(caps: &str) -> String {
    let ic = load("v-extras")["install_config"]
        .as_str()
        .unwrap()
        .to_string();
    let start = ic.find("capabilities:\n").unwrap();
    let end = ic.find("pullSecret:").unwrap();
    format!("{}{caps}{}", &ic[..start], &ic[end..])
}

/// The install config a case ran on: recorded, or derived (FACTS_SKIPPED,
/// "derived install configs"), each derivation checked against what its record says.
fn install_config(name: &str, rec: &Value) -> String {
    if let Some(ic) = rec["install_config"].as_str() {
        return ic.to_string();
    }
    skipped("derived install configs");
    match name {
        "v-cap-None" => {
            let error = rec["runs"][0]["lines"][1].as_str().unwrap();
            assert!(error.contains(r#"BaselineCapabilitySet:"None", AdditionalEnabledCapabilities:[]v1.ClusterVersionCapability{}"#), "{error}");
            extras_with("capabilities:\n  baselineCapabilitySet: None\n")
        }
        "v-cap-NoneIngress" => {
            let config = rec["manifests"]["cluster-config.yaml"].as_str().unwrap();
            assert!(config.contains("    capabilities:\n      additionalEnabledCapabilities:\n      - Ingress\n      baselineCapabilitySet: None\n"), "{config}");
            assert!(config.contains("      name: vextras\n"), "{config}");
            extras_with("capabilities:\n  baselineCapabilitySet: None\n  additionalEnabledCapabilities:\n  - Ingress\n")
        }
        "v-extras2" => extras_with(
            "capabilities:\n  baselineCapabilitySet: v4.16\n  additionalEnabledCapabilities:\n  - marketplace\n  - Console\n",
        ),
        "v-fips-skip" => {
            let line = rec["runs"][0]["lines"][5].as_str().unwrap();
            assert!(line.contains("<work>/real/v-fips/manifests"), "{line}");
            load("v-fips")["install_config"]
                .as_str()
                .unwrap()
                .to_string()
        }
        _ => panic!("{name}: no install_config recorded and no derivation"),
    }
}

/// The release image the recorded run overrode, from its log lines.
fn override_of(rec: &Value) -> Option<String> {
    let lines = rec["runs"].as_array()?;
    lines
        .iter()
        .flat_map(|r| r["lines"].as_array().unwrap())
        .filter_map(|l| l.as_str())
        .find_map(|l| {
            let rest = l.split("Found override for release image (").nth(1)?;
            Some(rest[..rest.find(')')?].to_string())
        })
}

/// The fake run as the real one was: its release image override, no FIPS skip
/// unless the case had it, its own cache.
fn fake_cmd(dir: &Path, verb: &str, rec: &Value, skip_fips: bool) -> Command {
    let mut cmd = Command::new(fake());
    cmd.args(verb.split(' '))
        .arg("--dir")
        .arg(dir)
        .env("XDG_CACHE_HOME", dir.join(".cache-outside"))
        .env_remove("OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE")
        .env_remove("OPENSHIFT_INSTALL_SKIP_HOSTCRYPT_VALIDATION");
    if let Some(o) = override_of(rec) {
        cmd.env("OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE", o);
    }
    if skip_fips {
        cmd.env("OPENSHIFT_INSTALL_SKIP_HOSTCRYPT_VALIDATION", "1");
    }
    cmd
}

/// Each maximal run of "Consuming … from target directory" lines sorted: the real
/// installer logs them in a different order from run to run (the recorded runs do).
fn normalised(lines: Vec<String>) -> Vec<String> {
    let consuming =
        |l: &str| l.contains(" msg=Consuming ") && l.ends_with(" from target directory");
    let mut out = Vec::new();
    let mut block: Vec<String> = Vec::new();
    for l in lines {
        if consuming(&l) {
            block.push(l);
        } else {
            block.sort();
            out.append(&mut block);
            out.push(l);
        }
    }
    block.sort();
    out.append(&mut block);
    out
}

/// Every file below `dir`, relative, sorted (the test's own cache excluded).
fn files(dir: &Path) -> BTreeSet<String> {
    common::tree(dir)
        .into_iter()
        .filter(|f| dir.join(f).is_file() && !f.starts_with(".cache-outside"))
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Run a modelled case's recorded verbs in one directory; check each verb's exit
/// code, lines and files, then the Ignition configs and metadata.json.
fn check_case(name: &str) {
    let rec = load(name);
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    std::fs::write(dir.join("install-config.yaml"), install_config(name, &rec)).unwrap();
    if let Some(ac) = rec["agent_config"].as_str() {
        std::fs::write(dir.join("agent-config.yaml"), ac).unwrap();
    }
    let skip_fips = name == "v-fips-skip";
    let mut ran = 0;
    for run in rec["runs"].as_array().unwrap() {
        let verb = run["verb"].as_str().unwrap();
        if VERBS_NOT_MODELLED.iter().any(|(v, _)| *v == verb) {
            skipped(verb);
            continue;
        }
        ran += 1;
        let out = fake_cmd(dir, verb, &rec, skip_fips).output().unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            run["exit"].as_i64().map(|c| c as i32),
            "{name}: `{verb}` exit code; its log:\n{log}"
        );
        let d = dir.display().to_string();
        let want: Vec<String> = strings(&run["lines"])
            .into_iter()
            .map(|l| l.replace("<dir>", &d).replace("<work>/real/v-fips", &d))
            .collect();
        let got: Vec<String> = log.lines().map(str::to_string).collect();
        assert_eq!(
            normalised(got),
            normalised(want),
            "{name}: `{verb}`'s log lines"
        );
        if let Some(after) = rec["files_after"].get(verb) {
            let want: BTreeSet<String> = strings(after).into_iter().collect();
            assert_eq!(files(dir), want, "{name}: the files after `{verb}`");
        }
    }
    if let Some(fa) = rec["files_after"].as_object() {
        for verb in fa.keys() {
            let in_runs = rec["runs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["verb"] == verb.as_str());
            // ex-ipi's `create cluster`: its own test (no libvirtd reachable).
            if !in_runs && verb != "create cluster" {
                skipped(verb);
            }
        }
    }
    assert!(ran > 0, "{name}: no run the fake models");
    if let Some(ign) = rec["ignition"].as_object() {
        for (file, shape) in ign {
            check_ignition(name, &dir.join(file), shape);
        }
    }
    if let Some(meta) = rec.get("metadata_json") {
        check_metadata(name, &dir.join("metadata.json"), meta);
    }
}

/// A file's contents from an Ignition data URL (`data:,<percent-encoded>` or
/// `data:<type>;base64,<base64>`).
fn data_url(src: &str) -> Vec<u8> {
    let (head, data) = src
        .strip_prefix("data:")
        .and_then(|s| s.split_once(','))
        .unwrap_or_else(|| panic!("not a data URL: {src}"));
    if head.ends_with(";base64") {
        return base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
    }
    let b = data.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&data[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// An Ignition config's files: path → contents.
fn ign_files(ign: &Value) -> BTreeMap<String, Vec<u8>> {
    ign["storage"]["files"]
        .as_array()
        .map(|fs| {
            fs.iter()
                .map(|f| {
                    (
                        f["path"].as_str().unwrap().to_string(),
                        data_url(f["contents"]["source"].as_str().unwrap()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The recorded shape of an Ignition config: spec version, merge sources, number
/// of CAs, users; a pointer config (it merges) no files and no units; a full config
/// the recorded manifests, and only recorded paths and units.
fn check_ignition(name: &str, path: &Path, shape: &Value) {
    let what = format!("{name}: {}", path.file_name().unwrap().to_string_lossy());
    let ign: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(
        ign["ignition"]["version"], shape["ignition_version"],
        "{what}: spec version"
    );
    let merge: Vec<String> = ign["ignition"]["config"]["merge"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|s| s["source"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        merge,
        strings(&shape["merge_sources"]),
        "{what}: merge sources"
    );
    let cas = ign["ignition"]["security"]["tls"]["certificateAuthorities"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(
        cas as u64,
        shape["certificate_authorities"].as_u64().unwrap(),
        "{what}: CAs"
    );
    let users: Vec<String> = ign["passwd"]["users"]
        .as_array()
        .map(|u| {
            u.iter()
                .map(|u| u["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(users, strings(&shape["users"]), "{what}: users");
    let units: BTreeSet<String> = ign["systemd"]["units"]
        .as_array()
        .map(|u| {
            u.iter()
                .map(|u| {
                    let n = u["name"].as_str().unwrap();
                    if u["enabled"] == true {
                        format!("{n} (enabled)")
                    } else {
                        n.to_string()
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let paths: BTreeSet<String> = ign_files(&ign).into_keys().collect();
    let want_units: BTreeSet<String> = strings(&shape["units"]).into_iter().collect();
    let want_paths: BTreeSet<String> = strings(&shape["files"]).into_iter().collect();
    if !merge.is_empty() {
        assert!(
            want_paths.is_empty() && want_units.is_empty(),
            "{what}: a recorded pointer config with storage"
        );
        assert!(units.is_empty(), "{what}: units {units:?}");
        skipped("pointer storage");
        let other: Vec<&String> = paths
            .iter()
            .filter(|p| !p.starts_with("/etc/shiftlab/"))
            .collect();
        assert!(other.is_empty(), "{what}: files {other:?}");
        return;
    }
    skipped("full config files");
    let unrecorded: Vec<&String> = paths.difference(&want_paths).collect();
    assert!(
        unrecorded.is_empty(),
        "{what}: files the real one does not have: {unrecorded:?}"
    );
    let manifests = |s: &BTreeSet<String>| -> BTreeSet<String> {
        s.iter()
            .filter(|p| {
                p.starts_with("/opt/openshift/manifests/")
                    || p.starts_with("/opt/openshift/openshift/")
            })
            .cloned()
            .collect()
    };
    assert_eq!(
        manifests(&paths),
        manifests(&want_paths),
        "{what}: the manifests it carries"
    );
    let unrecorded: Vec<&String> = units.difference(&want_units).collect();
    assert!(
        unrecorded.is_empty(),
        "{what}: units the real one does not have: {unrecorded:?}"
    );
    assert!(units.contains("bootkube.service"), "{what}: {units:?}");
}

/// metadata.json: the recorded keys in the recorded order, the same values but for
/// the random ids, whose shape is the real one's.
fn check_metadata(name: &str, path: &Path, want: &Value) {
    let got: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (g, w) = (got.as_object().unwrap(), want.as_object().unwrap());
    assert_eq!(
        g.keys().collect::<Vec<_>>(),
        w.keys().collect::<Vec<_>>(),
        "{name}: metadata.json's keys"
    );
    skipped("ids");
    for (k, v) in w {
        match k.as_str() {
            "clusterID" => {
                let id = g[k].as_str().unwrap();
                assert_eq!(
                    id.split('-').map(str::len).collect::<Vec<_>>(),
                    [8, 4, 4, 4, 12],
                    "{name}: clusterID {id}"
                );
            }
            "infraID" => {
                let (g, w) = (g[k].as_str().unwrap(), v.as_str().unwrap());
                let cluster = w.rsplit_once('-').unwrap().0;
                let suffix = g
                    .strip_prefix(&format!("{cluster}-"))
                    .unwrap_or_else(|| panic!("{name}: infraID {g}"));
                assert!(
                    suffix.len() == 5
                        && suffix
                            .chars()
                            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
                    "{name}: infraID {g}"
                );
            }
            _ => assert_eq!(&g[k], v, "{name}: metadata.json's {k}"),
        }
    }
}

#[test]
fn the_copy_is_the_shared_record() {
    let shared = common::repo().join("../shared/installer-4.18");
    if !shared.is_dir() {
        eprintln!("skipped: no {} to compare the copy with", shared.display());
        return;
    }
    let names = |d: &Path| -> BTreeSet<String> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(&records()), names(&shared), "the files of the copy");
    for n in names(&shared) {
        let (copy, orig) = (
            std::fs::read(records().join(&n)).unwrap(),
            std::fs::read(shared.join(&n)).unwrap(),
        );
        if n == "README.md" {
            // The copy's README is the original's, then a section about the copy.
            assert!(
                copy.starts_with(&orig),
                "README.md differs from the original's text"
            );
        } else {
            assert!(
                copy == orig,
                "{n} differs from {}",
                shared.join(&n).display()
            );
        }
    }
}

#[test]
fn every_recorded_case_is_modelled_or_listed() {
    let mut cases = BTreeSet::new();
    for e in std::fs::read_dir(records()).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(c) = n.strip_suffix(".json") {
            cases.insert(c.to_string());
        }
    }
    let modelled: Vec<&str> = [UPI, EDGES, SNO, IPI, AGENT].concat();
    for c in &cases {
        let modelled = modelled.contains(&c.as_str());
        let listed = NOT_MODELLED.iter().any(|(n, _)| n == c);
        assert!(
            modelled != listed,
            "{c}: in {} list",
            if modelled { "both" } else { "neither" }
        );
    }
    for c in modelled.iter().chain(NOT_MODELLED.iter().map(|(n, _)| n)) {
        assert!(cases.contains(*c), "{c} is listed but not recorded");
    }
    for (c, why) in NOT_MODELLED {
        let rec = load(c);
        assert!(
            rec["runs"].as_array().is_none_or(Vec::is_empty),
            "{c} has runs now: model it"
        );
        eprintln!("not modelled: {c}: {why}");
    }
}

#[test]
fn upi_cases_agree_with_the_recording() {
    for c in UPI {
        check_case(c);
    }
}

#[test]
fn failures_and_edge_cases_agree_with_the_recording() {
    for c in EDGES {
        check_case(c);
    }
}

#[test]
fn single_node_cases_agree_with_the_recording() {
    for c in SNO {
        check_case(c);
    }
}

#[test]
fn ipi_cases_agree_with_the_recording() {
    for c in IPI {
        check_case(c);
    }
}

/// ex-ipi's `create cluster`, recorded with no libvirtd reachable (here: a socket
/// nobody listens on): metadata.json and the state file written before the failed
/// provisioning check, then `destroy bootstrap` fails on the missing
/// terraform.tfvars.json on every rerun (README.md, "Facts observed").
#[test]
fn ipi_create_cluster_without_libvirt_agrees_with_the_recording() {
    let rec = load("ex-ipi");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let sock = dir.join(".cache-outside/no-libvirtd.sock");
    let ic = install_config("ex-ipi", &rec).replace(
        "libvirtURI: qemu:///system\n",
        &format!(
            "libvirtURI: qemu+unix:///system?socket={}\n",
            sock.display()
        ),
    );
    assert!(ic.contains("?socket="), "ex-ipi's libvirtURI moved");
    std::fs::write(dir.join("install-config.yaml"), ic).unwrap();
    let out = fake_cmd(dir, "create cluster", &rec, false)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{log}");
    skipped("create cluster exit code");
    assert!(
        log.lines().any(|l| l.starts_with("level=")
            && l.ends_with(
                "platform.baremetal.libvirtURI: Internal error: failed to connect to libvirt"
            )),
        "{log}"
    );
    let want: BTreeSet<String> = strings(&rec["files_after"]["create cluster"])
        .into_iter()
        .collect();
    assert_eq!(files(dir), want, "the files after `create cluster`");
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("metadata.json")).unwrap()).unwrap();
    // libvirtURI is the one the install config names (here the unreachable one).
    let mut want_meta = rec["metadata_json"].clone();
    want_meta["baremetal"]["libvirtURI"] = meta["baremetal"]["libvirtURI"].clone();
    assert!(meta["baremetal"]["libvirtURI"]
        .as_str()
        .unwrap()
        .ends_with("no-libvirtd.sock"));
    check_metadata(
        "ex-ipi create cluster",
        &dir.join("metadata.json"),
        &want_meta,
    );
    for _ in 0..2 {
        let out = fake_cmd(dir, "destroy bootstrap", &rec, false)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{log}");
        let want = format!(
            "failed to load cluster terraform variables: open {}/terraform.tfvars.json: no such file or directory",
            dir.display()
        );
        assert!(
            log.lines()
                .any(|l| l.starts_with("level=") && l.contains(&want)),
            "missing {want:?} in {log}"
        );
    }
}

/// The agent configuration of each recorded agent case, laid out as the recorded
/// config image lays it out (o-agent-compact.config-image): path → contents, and
/// rendezvous-host.env's keys with their values (None: a token, any value).
struct AgentLayout {
    files: BTreeMap<String, String>,
    env: Vec<(String, Option<String>)>,
}

fn yaml(text: &str) -> yaml_serde::Value {
    yaml_serde::from_str(text).unwrap()
}

/// The recorded layout's rule applied to a case's configs.
fn agent_layout(install_config: &str, agent_config: &str) -> AgentLayout {
    let ac = yaml(agent_config);
    let ic = yaml(install_config);
    let mut files = BTreeMap::new();
    for h in ac["hosts"].as_sequence().unwrap() {
        let name = h["hostname"].as_str().unwrap();
        let macs: Vec<&str> = h["interfaces"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|i| i["macAddress"].as_str().unwrap())
            .collect();
        let hints = h["rootDeviceHints"].as_mapping().unwrap();
        assert_eq!(hints.len(), 1, "{name}: hints other than deviceName");
        let base = format!("/etc/assisted/hostconfig/{name}");
        files.insert(
            format!("{base}/mac_addresses"),
            macs.iter().map(|m| format!("{m}\n")).collect(),
        );
        files.insert(
            format!("{base}/role"),
            h["role"].as_str().unwrap().to_string(),
        );
        files.insert(
            format!("{base}/root-device-hints.yaml"),
            format!(
                "deviceName: {}\n",
                h["rootDeviceHints"]["deviceName"].as_str().unwrap()
            ),
        );
        for m in macs {
            files.insert(format!("/etc/assisted/hostnames/{m}"), name.to_string());
        }
    }
    files.insert(
        "/usr/local/share/start-cluster/start-cluster.env".into(),
        format!(
            "REQUIRED_MASTER_NODES={}\nREQUIRED_WORKER_NODES={}\n",
            ic["controlPlane"]["replicas"].as_u64().unwrap(),
            ic["compute"][0]["replicas"].as_u64().unwrap()
        ),
    );
    let ip = ac["rendezvousIP"].as_str().unwrap();
    let env = vec![
        ("NODE_ZERO_IP".into(), Some(ip.to_string())),
        (
            "SERVICE_BASE_URL".into(),
            Some(format!("http://{ip}:8090/")),
        ),
        (
            "IMAGE_SERVICE_BASE_URL".into(),
            Some(format!("http://{ip}:8888/")),
        ),
        ("PULL_SECRET_TOKEN".into(), None),
        ("USER_AUTH_TOKEN".into(), None),
        ("WORKFLOW_TYPE".into(), Some("install".into())),
    ];
    AgentLayout { files, env }
}

fn env_pairs(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("not KEY=value: {l}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn check_env(what: &str, text: &str, want: &[(String, Option<String>)]) {
    let got = env_pairs(text);
    assert_eq!(
        got.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        want.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        "{what}: rendezvous-host.env's keys"
    );
    for ((k, v), (_, w)) in got.iter().zip(want) {
        match w {
            Some(w) => assert_eq!(v, w, "{what}: {k}"),
            None => assert!(!v.is_empty(), "{what}: {k} empty"),
        }
    }
}

/// The rule [`agent_layout`] is the recording's: applied to o-agent-compact's
/// configs it gives exactly the recorded config image's files.
#[test]
fn the_agent_layout_rule_is_the_recorded_one() {
    let rec = load("o-agent-compact");
    let image = load("o-agent-compact.config-image");
    let layout = agent_layout(
        rec["install_config"].as_str().unwrap(),
        rec["agent_config"].as_str().unwrap(),
    );
    let contents = image["contents"].as_object().unwrap();
    for (path, want) in &layout.files {
        assert_eq!(contents[path].as_str(), Some(want.as_str()), "{path}");
    }
    let recorded: BTreeSet<String> = strings(&image["files"])
        .into_iter()
        .filter(|p| {
            p.starts_with("/etc/assisted/hostconfig/") || p.starts_with("/etc/assisted/hostnames/")
        })
        .collect();
    let ours: BTreeSet<String> = layout
        .files
        .keys()
        .filter(|p| p.starts_with("/etc/assisted/"))
        .cloned()
        .collect();
    assert_eq!(ours, recorded);
    check_env(
        "the record",
        contents["/etc/assisted/rendezvous-host.env"]
            .as_str()
            .unwrap(),
        &layout.env,
    );
}

/// A small ISO 9660 image with the embed area CoreOS's live ISO has
/// (`images/ignition.img`), made by genisoimage, as the fake's base ISO; None
/// without genisoimage or coreos-installer (scripts/setup installs both).
fn base_iso(dir: &Path) -> Option<PathBuf> {
    for tool in ["genisoimage", "coreos-installer"] {
        if Command::new(tool).arg("--version").output().is_err() {
            eprintln!("skipped: {tool} is not installed (scripts/setup installs it)");
            return None;
        }
    }
    let root = dir.join("iso-root");
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::write(root.join("images/ignition.img"), vec![0u8; 256 * 1024]).unwrap();
    let iso = dir.join("base.iso");
    let out = Command::new("genisoimage")
        .args(["-quiet", "-R", "-J", "-V", "base", "-o"])
        .arg(&iso)
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(iso)
}

/// `agent create image` embeds the agent configuration in the real config image's
/// layout, for every recorded agent case: the same /etc/assisted paths, the same
/// contents (the tokens any), and no file the real one lacks but the router facts.
#[test]
fn agent_configuration_has_the_recorded_layout() {
    let work = tempfile::tempdir().unwrap();
    let Some(iso) = base_iso(work.path()) else {
        return;
    };
    let stream = work.path().join("stream.json");
    std::fs::write(
        &stream,
        serde_json::json!({"architectures": {"x86_64": {"artifacts": {"metal": {"formats": {"iso": {"disk": {
            "location": format!("file://{}", iso.display()),
            "sha256": shiftlab::release::sha256_file(&iso).unwrap()}}}}}}}})
        .to_string(),
    )
    .unwrap();
    // `agent create image` runs `oc` (recorded: without it on PATH it fails):
    // the stand-in client first on PATH.
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(common::repo().join("assets/rehearsal/oc"), bin.join("oc")).unwrap();
    let system = std::env::var_os("PATH").unwrap_or_default();
    let path =
        std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(&system)))
            .unwrap();
    let image = load("o-agent-compact.config-image");
    let recorded_files: BTreeSet<String> = strings(&image["files"]).into_iter().collect();
    skipped("config image files");
    for c in AGENT.iter().filter(|c| !c.ends_with(".config-image")) {
        let rec = load(c);
        let (ic, ac) = (
            rec["install_config"].as_str().unwrap(),
            rec["agent_config"].as_str().unwrap(),
        );
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("install-config.yaml"), ic).unwrap();
        std::fs::write(d.path().join("agent-config.yaml"), ac).unwrap();
        let out = fake_cmd(d.path(), "agent create image", &rec, false)
            .env("SHIFTLAB_FAKE_STREAM_JSON", &stream)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{c}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown = shiftlab::image::live_iso::embedded(&d.path().join("agent.x86_64.iso"))
            .unwrap()
            .expect("an embedded config");
        let ign: Value = serde_json::from_slice(&shown).unwrap();
        let got = ign_files(&ign);
        let want = agent_layout(ic, ac);
        let text = |p: &str| String::from_utf8(got[p].clone()).unwrap();
        for (path, contents) in &want.files {
            assert!(got.contains_key(path), "{c}: no {path}");
            assert_eq!(&text(path), contents, "{c}: {path}");
        }
        check_env(c, &text("/etc/assisted/rendezvous-host.env"), &want.env);
        let ours: BTreeSet<&str> = got
            .keys()
            .map(String::as_str)
            .filter(|p| p.starts_with("/etc/assisted/"))
            .collect();
        let mut expected: BTreeSet<&str> = want
            .files
            .keys()
            .map(String::as_str)
            .filter(|p| p.starts_with("/etc/assisted/"))
            .collect();
        expected.insert("/etc/assisted/rendezvous-host.env");
        assert_eq!(ours, expected, "{c}: the /etc/assisted files");
        let mut router_facts = false;
        for p in got.keys().filter(|p| !ours.contains(p.as_str())) {
            if p.starts_with("/etc/shiftlab/") {
                router_facts = true;
                continue;
            }
            assert!(
                recorded_files.contains(p),
                "{c}: {p} is not in the real config image"
            );
        }
        if router_facts {
            skipped("router facts in the agent Ignition");
        }
    }
}
