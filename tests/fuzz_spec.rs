//! A bad cluster file never panics: seeded, deterministic mutations of the example
//! and bad-input cluster files (random keys, wrong types, unicode, huge and negative
//! numbers, deep nesting, anchors, tags, broken bytes) go through loading,
//! validation, planning and every pure renderer. Each must end in `Ok` or in an
//! invalid-spec error with a message; a panic fails the test with the input that
//! caused it (and the seed, to replay it with `FUZZ_SEED`).
//!
//! `FUZZ_CASES` raises the number of cases (default 12,000).

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use shiftlab::libvirt::xml::write as libvirt;
use shiftlab::plan;
use shiftlab::render::{haproxy, install_config};
use shiftlab::spec::{self, Env};
use yaml_serde::{Mapping, Value};

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// Field names shiftlab knows (and kcli's), so mutations reach deep validation.
const KEYS: &[&str] = &[
    "cluster",
    "domain",
    "distribution",
    "version",
    "method",
    "rehearsal",
    "ctlplanes",
    "workers",
    "network",
    "cidr",
    "mode",
    "bridge",
    "dhcp",
    "api_ip",
    "ingress_ip",
    "memory",
    "numcpus",
    "disk_size",
    "extra_disks",
    "bootstrap",
    "ctlplane",
    "worker",
    "libvirt",
    "uri",
    "pool",
    "pool_path",
    "domain_type",
    "firmware",
    "mac_prefix",
    "bmc",
    "port",
    "password",
    "host_prefix",
    "cluster_network",
    "service_network",
    "ssh_keys",
    "pull_secret",
    "image",
    "mirror",
    "capabilities",
    "manifests",
    "image_digest_sources",
    "fips",
    "ntp_servers",
    "ntp_server",
    "host_ntp",
    "proxy",
    "ctlplane_memory",
    "worker_memory",
    "masters",
    "numcpus",
    "disks",
    "pub_key",
    "nodes",
    "vips",
];

fn nasty(rng: &mut Rng) -> Value {
    if rng.chance(2) {
        return plausible(rng);
    }
    let deep = |rng: &mut Rng| {
        let mut v = Value::Null;
        for _ in 0..rng.below(80) {
            v = if rng.chance(2) {
                Value::Sequence(vec![v])
            } else {
                let mut m = Mapping::new();
                m.insert(Value::String("a".into()), v);
                Value::Mapping(m)
            };
        }
        v
    };
    match rng.below(30) {
        0 => Value::Number(u64::MAX.into()),
        1 => Value::Number(i64::MIN.into()),
        2 => Value::Number((1u64 << 63).into()),
        3 => Value::Number((-1i64).into()),
        4 => Value::Number(0.into()),
        5 => Value::Number(yaml_serde::Number::from(1e308)),
        6 => Value::Number(yaml_serde::Number::from(f64::NAN)),
        7 => Value::String(String::new()),
        8 => Value::String("é".into()),
        9 => Value::String("aaaaaé-bbbbbbbbbb".into()),
        10 => Value::String("😀".repeat(rng.below(40) + 1)),
        11 => Value::String("x".repeat(rng.below(5000))),
        12 => Value::String("../../etc".into()),
        13 => Value::Null,
        14 => Value::Bool(rng.chance(2)),
        15 => deep(rng),
        16 => Value::Sequence(
            (0..rng.below(200))
                .map(|i| Value::Number(i.into()))
                .collect(),
        ),
        17 => Value::String("192.168.1.0/33".into()),
        18 => Value::String("0.0.0.0/0".into()),
        19 => Value::String("255.255.255.255/32".into()),
        20 => Value::String("10.0.0.0/31".into()),
        21 => Value::Number((u32::MAX as u64 + 1).into()),
        22 => Value::Number(65536.into()),
        23 => Value::String("ff:ff:ff".into()),
        24 => Value::String("-".into()),
        25 => Value::Number(((rng.next() % 100_000) as i64 - 50_000).into()),
        26 => Value::String(format!("{}", rng.next())),
        27 => Value::String("\u{0}\u{202e}\n\t".into()),
        28 => Value::Mapping(Mapping::new()),
        _ => Value::Sequence(vec![]),
    }
}

/// A value that often passes validation, so mutations also reach the planner
/// and the renderers with unusual but accepted input.
fn plausible(rng: &mut Rng) -> Value {
    match rng.below(9) {
        0 => Value::Number((rng.below(8) as u64).into()),
        1 => Value::Number([128u64, 256, 2048, 4096, 16384, 65536, 1 << 20][rng.below(7)].into()),
        2 => Value::Number([1u64, 20, 100, 120, 500, 2000][rng.below(6)].into()),
        3 => Value::String(format!(
            "10.{}.{}.0/{}",
            rng.below(256),
            rng.below(256),
            16 + rng.below(13)
        )),
        4 => Value::String(format!("192.168.{}.0/24", rng.below(256))),
        5 => Value::Bool(rng.chance(2)),
        6 => Value::String(
            ["lab1", "a", "x-1", "okd", "upi", "sno", "agent", "ipi"][rng.below(8)].into(),
        ),
        7 => Value::Sequence(
            (0..rng.below(30))
                .map(|_| Value::Number(((rng.below(500) + 1) as u64).into()))
                .collect(),
        ),
        _ => Value::String(
            [
                "4.16",
                "4.18",
                "stable-4.17",
                "uefi",
                "bios",
                "nat",
                "bridge",
            ][rng.below(7)]
            .into(),
        ),
    }
}

/// One structural mutation somewhere in the tree.
fn mutate(v: &mut Value, rng: &mut Rng, depth: usize) {
    match v {
        Value::Mapping(m) if !m.is_empty() && depth < 6 && rng.chance(2) => {
            let i = rng.below(m.len());
            let key = m.keys().nth(i).cloned().unwrap();
            match rng.below(6) {
                0 => {
                    m.remove(&key);
                }
                1 => {
                    let k = KEYS[rng.below(KEYS.len())];
                    m.insert(Value::String(k.into()), nasty(rng));
                }
                2 => {
                    let k = format!("{}{}", KEYS[rng.below(KEYS.len())], rng.below(3));
                    m.insert(Value::String(k), Value::String("unknown".into()));
                }
                _ => mutate(m.get_mut(&key).unwrap(), rng, depth + 1),
            }
        }
        Value::Sequence(s) if !s.is_empty() && depth < 6 && rng.chance(2) => {
            let i = rng.below(s.len());
            match rng.below(4) {
                0 => {
                    s.remove(i);
                }
                1 => s.push(nasty(rng)),
                _ => mutate(&mut s[i], rng, depth + 1),
            }
        }
        Value::Mapping(m) if rng.chance(2) => {
            let k = KEYS[rng.below(KEYS.len())];
            m.insert(Value::String(k.into()), nasty(rng));
        }
        _ => *v = nasty(rng),
    }
}

/// Text-level damage the tree cannot express: duplicate keys, anchors and aliases,
/// tags, broken bytes, truncation.
fn damage(text: &str, rng: &mut Rng) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    match rng.below(8) {
        0 if !lines.is_empty() => {
            let i = rng.below(lines.len());
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        1 => lines.insert(0, "base: &a {memory: 99999999999999999999, x: *a}".into()),
        2 => lines.push("workers: !!binary aGVsbG8=".into()),
        3 => lines.push("ctlplanes: !custom 3".into()),
        4 => {
            let mut cut = text.len() * rng.below(100) / 100;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            return text[..cut].to_string();
        }
        5 => {
            let mut b = text.as_bytes().to_vec();
            if !b.is_empty() {
                let i = rng.below(b.len());
                b[i] = (rng.next() & 0xff) as u8;
            }
            return String::from_utf8_lossy(&b).into_owned();
        }
        6 => lines.push("---\ncluster: second".into()),
        _ => lines.push(format!("{}: *undefined", KEYS[rng.below(KEYS.len())])),
    }
    lines.join("\n")
}

/// Everything pure that a cluster file feeds: the plan, its table and JSON,
/// install-config and agent-config, libvirt XML, the HAProxy config.
fn exercise(text: &str, env: &Env) -> Result<bool, String> {
    match spec::from_str(text, "fuzz.yaml", env) {
        Ok(loaded) => {
            let s = &loaded.spec;
            let p = plan::derive(s);
            let _ = plan::render_table(&p);
            let _ = serde_json::to_string(&p).unwrap();
            let secrets = install_config::Secrets {
                pull_secret: install_config::OKD_FAKE_PULL_SECRET.into(),
                bmc_password: Some("pw".into()),
                bmc_ca: Some("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----".into()),
            };
            let _ = install_config::install_config(s, &p, &secrets, None);
            let _ = install_config::agent_config(s, &p);
            let _ = libvirt::network_xml(&p);
            for n in &p.nodes {
                let log = libvirt::console_log_path(&n.name);
                let paths = libvirt::NodePaths {
                    ignition: Some("/p/n.ign"),
                    console_log: &log,
                    cdrom: None,
                };
                let _ = libvirt::domain_xml(&p, n, libvirt::Accel::Tcg, &paths);
            }
            let _ = haproxy::render(
                &p,
                &haproxy::Options {
                    stats_socket: std::path::Path::new("/s/haproxy.sock"),
                    bootstrap_removed: false,
                },
            );
            Ok(true)
        }
        Err(e) => {
            if e.errors.is_empty() || e.errors.iter().any(|d| d.message.trim().is_empty()) {
                return Err(format!("an invalid spec without a message: {e:?}"));
            }
            Ok(false)
        }
    }
}

fn seeds() -> Vec<(String, String, std::path::PathBuf)> {
    let repo = common::repo();
    let mut out = Vec::new();
    for dir in ["examples", "tests/bad"] {
        let mut files: Vec<_> = std::fs::read_dir(repo.join(dir))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        for f in files {
            out.push((
                f.display().to_string(),
                std::fs::read_to_string(&f).unwrap(),
                f.parent().unwrap().to_path_buf(),
            ));
        }
    }
    out
}

#[test]
fn mutated_cluster_files_never_panic() {
    let cases: usize = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12_000);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x005e_ed0f_5ab5_1ab5);
    let seeds = seeds();
    assert!(seeds.len() > 40, "the seed corpus shrank");
    let mut rng = Rng(seed);
    let mut failures = Vec::new();
    let (mut ok, mut invalid) = (0usize, 0usize);
    for case in 0..cases {
        // Mostly the valid examples (so the planner runs), sometimes a bad file.
        let examples = seeds.iter().filter(|s| s.0.contains("/examples/")).count();
        let pick = if rng.below(10) < 7 {
            rng.below(examples)
        } else {
            examples + rng.below(seeds.len() - examples)
        };
        let (name, text, dir) = &seeds[pick];
        let env = Env {
            base_dir: dir.clone(),
            ..Env::default()
        };
        let mut tree: Value = yaml_serde::from_str(text).unwrap_or(Value::Null);
        for _ in 0..=rng.below(3) {
            mutate(&mut tree, &mut rng, 0);
        }
        let mut text = yaml_serde::to_string(&tree).unwrap_or_default();
        if rng.chance(4) {
            text = damage(&text, &mut rng);
        }
        // A panic is caught and reported below with its input: keep the default
        // hook's copy of it off the output meanwhile.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let result = catch_unwind(AssertUnwindSafe(|| exercise(&text, &env)));
        std::panic::set_hook(hook);
        match result {
            Ok(Ok(true)) => ok += 1,
            Ok(Ok(false)) => invalid += 1,
            Ok(Err(e)) => failures.push(format!("case {case} (from {name}): {e}\n{text}")),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!(
                    "case {case} (from {name}) panicked: {msg}\n--- input\n{text}"
                ));
            }
        }
        if failures.len() >= 5 {
            break;
        }
    }
    eprintln!(
        "{cases} cases: {ok} valid, {invalid} invalid, {} failures",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "seed {seed}: {} failures:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(
        ok > cases / 50,
        "too few valid cases ({ok}) to reach the planner"
    );
}
