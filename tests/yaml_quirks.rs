//! YAML 1.1 against 1.2 in cluster files, one test per quirk. kcli writes and reads
//! its parameter files with PyYAML (YAML 1.1); shiftlab's parser is YAML 1.2. The
//! table at the top of src/spec/parse.rs says what shiftlab does with each.

use shiftlab::spec::{self, Channel, ClusterSpec, Env, Firmware, InvalidSpec, Version};

const BASE: &str = "cluster: lab1\ndistribution: okd\nssh_keys: ['ecdsa-sha2-nistp521 AAAA k']\n";

fn load(extra: &str) -> Result<ClusterSpec, InvalidSpec> {
    spec::from_str(&format!("{BASE}{extra}"), "t.yaml", &Env::default()).map(|l| l.spec)
}

fn ok(extra: &str) -> ClusterSpec {
    load(extra).unwrap_or_else(|e| panic!("{extra:?}: {e}"))
}

/// The message for `field`, which must be the only error.
fn error(extra: &str, field: &str) -> String {
    let e = load(extra).expect_err(extra);
    assert_eq!(e.errors.len(), 1, "{extra:?}: {e}");
    assert_eq!(e.errors[0].field, field, "{extra:?}: {e}");
    e.errors[0].message.clone()
}

#[test]
fn yes_no_on_off_are_booleans_in_boolean_fields() {
    // PyYAML's bool resolver: yes/no/on/off in three spellings each.
    for (text, want) in [("yes", true), ("YES", true), ("On", true), ("off", false)] {
        assert_eq!(ok(&format!("fips: {text}\n")).fips, want, "fips: {text}");
    }
    assert!(ok("rehearsal: yes\n").rehearsal);
    assert_eq!(ok("uefi: on\n").libvirt.firmware, Firmware::Uefi);
    assert_eq!(ok("uefi: no\n").libvirt.firmware, Firmware::Bios);
    // YAML 1.2's own spellings, as before.
    assert!(ok("fips: True\n").fips);
}

#[test]
fn y_and_n_are_not_booleans() {
    // PyYAML does not resolve y/n either (YAML 1.1's type page lists them).
    let m = error("fips: y\n", "fips");
    assert!(m.contains("is not true or false"), "{m}");
}

#[test]
fn yes_no_on_off_stay_text_in_text_fields() {
    let s = spec::from_str(
        "cluster: no\ndistribution: okd\nssh_keys: ['ecdsa-sha2-nistp521 AAAA k']\nnetwork: {name: off}\n",
        "t.yaml",
        &Env::default(),
    )
    .unwrap()
    .spec;
    assert_eq!(s.cluster, "no");
    assert_eq!(s.network.name, "off");
}

#[test]
fn underscores_separate_digits() {
    assert_eq!(ok("workers: 1_0\n").workers, 10);
    assert_eq!(ok("memory: 16_384\n").worker.memory, 16384);
}

#[test]
fn a_leading_zero_is_ambiguous() {
    let m = error("workers: 010\n", "workers");
    assert!(
        m.contains("leading zero") && m.contains("octal number 8") && m.contains("as 10"),
        "{m}"
    );
    let m = error("workers: 09\n", "workers");
    assert!(m.contains("reads it as text") && m.contains("as 9"), "{m}");
    let m = error("worker: {extra_disks: [010]}\n", "worker.extra_disks[0]");
    assert!(m.contains("leading zero"), "{m}");
    assert_eq!(ok("workers: 0\n").workers, 0);
}

#[test]
fn hex_and_yaml12_octal_are_numbers() {
    assert_eq!(ok("workers: 0x2\n").workers, 2);
    assert_eq!(ok("workers: 0o3\n").workers, 3);
}

#[test]
fn a_float_version_or_tag_means_the_minor_kcli_means() {
    // kcli appends the 0 that the float lost: tag 4.20 → 4.2 → "4.20".
    assert_eq!(ok("version: 4.20\n").version, Version::Minor { minor: 20 });
    assert_eq!(ok("version: 4.18\n").version, Version::Minor { minor: 18 });
    assert_eq!(
        ok("version: candidate\ntag: 4.20\n").version,
        Version::Channel {
            channel: Channel::Candidate,
            minor: Some(20)
        }
    );
    // Quoted or tagged text is taken as written.
    assert_eq!(
        ok("version: '4.20'\n").version,
        Version::Minor { minor: 20 }
    );
    assert_eq!(
        ok("version: !!str 4.19\n").version,
        Version::Minor { minor: 19 }
    );
    // 4.1 is 4.10 for kcli, and too old either way.
    let m = error("version: 4.1\n", "version");
    assert!(m.contains("\"4.10\" is older than 4.14"), "{m}");
}

#[test]
fn merge_keys_merge() {
    let s =
        ok("ctlplane: &size {memory: 20480, numcpus: 6}\nworker:\n  <<: *size\n  memory: 10240\n");
    assert_eq!((s.worker.numcpus, s.worker.memory), (6, 10240));
    assert_eq!((s.ctlplane.numcpus, s.ctlplane.memory), (6, 20480));
}

#[test]
fn anchors_and_aliases_repeat_a_value() {
    let s = ok("ctlplane: {memory: &m 20480}\nworker: {memory: *m}\n");
    assert_eq!(s.worker.memory, 20480);
}

#[test]
fn base_60_looking_text_stays_text() {
    // PyYAML reads 52:54:00 as the base-60 integer 190440; YAML 1.2 as text.
    assert_eq!(
        ok("network: {mac_prefix: 52:54:00}\n").network.mac_prefix,
        [0x52, 0x54, 0]
    );
}

#[test]
fn a_key_twice_is_an_error() {
    // PyYAML keeps the last silently; a lab file with two `workers` is a mistake.
    let m = error("workers: 1\nworkers: 2\n", "(file)");
    assert!(
        m.contains("not valid YAML") && m.contains("duplicate"),
        "{m}"
    );
}

#[test]
fn null_means_the_default() {
    for text in ["workers:\n", "workers: ~\n", "workers: null\n"] {
        assert_eq!(ok(text).workers, 2, "{text:?}");
    }
}

#[test]
fn more_than_one_document_is_an_error() {
    let m = error("---\nworkers: 1\n", "(file)");
    assert!(
        m.contains("not valid YAML") && m.contains("more than one document"),
        "{m}"
    );
}

#[test]
fn syntax_errors_name_line_and_column() {
    let m = error("network: [\n", "(file)");
    assert!(m.contains("not valid YAML at line"), "{m}");
}
