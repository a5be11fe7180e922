//! The x86-64 microarchitecture level a CoreOS stream needs, and whether a CPU
//! has it. Pure: the stream metadata, `/proc/cpuinfo` text and model names in,
//! verdicts out.
//!
//! The levels are the x86-64 psABI's (gitlab.com/x86-psABIs/x86-64-ABI,
//! low-level-sys-info.tex, "Micro-architecture levels"). RHEL 9 is built for
//! x86-64-v2 and RHEL 10 for x86-64-v3 (developers.redhat.com, "Building RHEL 9
//! for the x86-64-v2 microarchitecture level", 2021, and "Exploring x86-64-v3
//! for RHEL 10", 2024); CentOS Stream follows its RHEL; Fedora (CoreOS) keeps
//! the baseline. On a CPU without its level such an image does not come up:
//! glibc refuses to start ("CPU ISA level is lower than required") and init dies.

use std::collections::BTreeSet;
use std::fmt;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::parse::STREAM_ARCH;

/// An x86-64 microarchitecture level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CpuLevel {
    #[serde(rename = "x86-64-v1")]
    V1,
    #[serde(rename = "x86-64-v2")]
    V2,
    #[serde(rename = "x86-64-v3")]
    V3,
}

impl fmt::Display for CpuLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CpuLevel::V1 => "x86-64-v1",
            CpuLevel::V2 => "x86-64-v2",
            CpuLevel::V3 => "x86-64-v3",
        })
    }
}

impl CpuLevel {
    pub const ALL: [CpuLevel; 3] = [CpuLevel::V1, CpuLevel::V2, CpuLevel::V3];

    pub fn parse(s: &str) -> Option<CpuLevel> {
        CpuLevel::ALL.into_iter().find(|l| l.to_string() == s)
    }

    /// The features this level adds to the one below, as `/proc/cpuinfo` names
    /// them (psABI name in the comment where it differs). v1's (cmov, cx8, fpu,
    /// fxsr, mmx, syscall, sse, sse2) every x86-64 CPU has.
    pub fn added_flags(self) -> &'static [&'static str] {
        match self {
            CpuLevel::V1 => &[],
            CpuLevel::V2 => &[
                "cx16",    // CMPXCHG16B
                "lahf_lm", // LAHF-SAHF
                "popcnt", "pni", // SSE3
                "sse4_1", "sse4_2", "ssse3",
            ],
            CpuLevel::V3 => &[
                "avx", "avx2", "bmi1", "bmi2", "f16c", "fma",
                "abm", // LZCNT (the kernel names it after AMD's ABM bit)
                "movbe", "xsave", // OSXSAVE: the kernel enables it where xsave is
            ],
        }
    }

    /// Every feature the level needs (its own and the levels' below).
    pub fn flags(self) -> Vec<&'static str> {
        CpuLevel::ALL
            .into_iter()
            .filter(|l| *l <= self)
            .flat_map(|l| l.added_flags().iter().copied())
            .collect()
    }
}

/// What the installer's stream metadata says about the OS and the level it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamLevel {
    /// `.stream` (`rhcos-4.18`, `c10s`, `stable`).
    pub stream: String,
    /// The x86_64 artifacts' `release` (`418.94.202503121207-0`, `10.0.20250628-0`).
    pub release: String,
    /// The OS that release is built on, in words.
    pub os: String,
    pub level: CpuLevel,
}

impl StreamLevel {
    /// The rule, for messages: `stream c10s (release 10.0.20250628-0, CentOS
    /// Stream 10) needs x86-64-v3`.
    pub fn rule(&self) -> String {
        let stream = if self.stream.is_empty() {
            "the stream"
        } else {
            &self.stream
        };
        if self.release.is_empty() {
            format!("stream {stream} ({}) needs {}", self.os, self.level)
        } else {
            format!(
                "stream {stream} (release {}, {}) needs {}",
                self.release, self.os, self.level
            )
        }
    }
}

/// The level the stream in `coreos print-stream-json` output needs.
///
/// The stream's name says it for CentOS Stream (`c9s`, `c10s`: the installer's
/// data/data/coreos/scos.json) and the RHEL streams (`rhel-9.6`, `rhel-10.2`);
/// otherwise the x86_64 artifacts' `release` does: `10.2.20260715-0` is RHEL 10
/// (coreos-rhel-10.json, whose stream is still `rhcos-4.22`), `9.6.…` RHEL 9,
/// the older `<ocp><rhel>` form `418.94.…` RHEL 9.4 and `412.86.…` RHEL 8.6,
/// and Fedora CoreOS's `39.20231101.3.0` (streams `stable`, `testing`, `next`)
/// Fedora 39. A release none of these match is taken as RHEL 9's (what
/// every CoreOS shiftlab knew before needed).
pub fn stream_level(json: &str) -> Result<StreamLevel> {
    let root: Value = serde_json::from_str(json).context("stream metadata is not JSON")?;
    let stream = root
        .get("stream")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let artifacts = root
        .get("architectures")
        .and_then(|a| a.get(STREAM_ARCH))
        .and_then(|a| a.get("artifacts"))
        .and_then(Value::as_object);
    // qemu and metal first: the artifacts shiftlab boots.
    let release = artifacts
        .and_then(|a| {
            ["qemu", "metal"]
                .iter()
                .filter_map(|p| a.get(*p))
                .chain(a.values())
                .find_map(|p| p.get("release").and_then(Value::as_str))
        })
        .unwrap_or("")
        .to_string();
    let (os, level) = classify(&stream, &release);
    Ok(StreamLevel {
        stream,
        release,
        os,
        level,
    })
}

fn classify(stream: &str, release: &str) -> (String, CpuLevel) {
    let by_major = |rhel: u32, centos: bool| {
        let name = if centos {
            format!("CentOS Stream {rhel}")
        } else {
            format!("RHEL {rhel}")
        };
        let level = match rhel {
            0..=8 => CpuLevel::V1,
            9 => CpuLevel::V2,
            _ => CpuLevel::V3,
        };
        (name, level)
    };
    if let Some(n) = stream
        .strip_prefix('c')
        .and_then(|s| s.strip_suffix('s'))
        .and_then(|n| n.parse::<u32>().ok())
    {
        return by_major(n, true);
    }
    if let Some(n) = stream
        .strip_prefix("rhel-")
        .and_then(|s| s.split('.').next())
        .and_then(|n| n.parse::<u32>().ok())
    {
        return by_major(n, false);
    }
    // OKD's SCOS streams before c9s/c10s were named `scos-4.17`.
    let centos = stream.starts_with("scos");
    let mut parts = release.split('.');
    let first = parts.next().and_then(|n| n.parse::<u32>().ok());
    let second = parts.next().unwrap_or("");
    match first {
        // `<ocp minor>.<rhel major><rhel minor>`: 418.94 is RHEL 9.4; SCOS's
        // `417.9.…` CentOS Stream 9 (no minor).
        Some(n) if n >= 400 => {
            let major = if second.len() >= 2 {
                &second[..second.len() - 1]
            } else {
                second
            };
            match major.parse::<u32>() {
                Ok(m) => by_major(m, centos),
                Err(_) => assumed(),
            }
        }
        Some(n) if (8..=20).contains(&n) => by_major(n, centos),
        Some(n) if (30..100).contains(&n) => (format!("Fedora {n}"), CpuLevel::V1),
        _ => assumed(),
    }
}

/// A stream whose OS neither its name nor its release says.
fn assumed() -> (String, CpuLevel) {
    ("taken as RHEL 9".into(), CpuLevel::V2)
}

/// The `flags` of the first CPU in `/proc/cpuinfo` text.
pub fn cpuinfo_flags(cpuinfo: &str) -> BTreeSet<String> {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "flags").then_some(v)
        })
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The level's features `flags` lacks, in the level's order.
pub fn missing(level: CpuLevel, flags: &BTreeSet<String>) -> Vec<&'static str> {
    level
        .flags()
        .into_iter()
        .filter(|f| !flags.contains(*f))
        .collect()
}

/// The highest level `flags` has in full.
pub fn level_of(flags: &BTreeSet<String>) -> CpuLevel {
    CpuLevel::ALL
        .into_iter()
        .rev()
        .find(|l| missing(*l, flags).is_empty())
        .unwrap_or(CpuLevel::V1)
}

/// QEMU's named x86 CPU models with the level features each lacks (cpuinfo
/// names), from QEMU's own definitions (target/i386/cpu.c) as QEMU 7.2 expands
/// them (`query-cpu-model-expansion`, type full, under TCG). libvirt's
/// cpu_map/x86_*.xml is not the source: its Haswell lists neither f16c nor
/// abm, which QEMU's Haswell has.
pub const MODELS: &[(&str, &str)] = &[
    (
        "qemu64",
        "popcnt sse4_1 sse4_2 ssse3 avx avx2 bmi1 bmi2 f16c fma abm movbe xsave",
    ),
    (
        "kvm64",
        "lahf_lm popcnt sse4_1 sse4_2 ssse3 avx avx2 bmi1 bmi2 f16c fma abm movbe xsave",
    ),
    (
        "Conroe",
        "cx16 popcnt sse4_1 sse4_2 avx avx2 bmi1 bmi2 f16c fma abm movbe xsave",
    ),
    (
        "Penryn",
        "popcnt sse4_2 avx avx2 bmi1 bmi2 f16c fma abm movbe xsave",
    ),
    ("Nehalem", "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave"),
    (
        "Nehalem-IBRS",
        "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave",
    ),
    ("Westmere", "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave"),
    (
        "Westmere-IBRS",
        "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave",
    ),
    ("SandyBridge", "avx2 bmi1 bmi2 f16c fma abm movbe"),
    ("SandyBridge-IBRS", "avx2 bmi1 bmi2 f16c fma abm movbe"),
    ("IvyBridge", "avx2 bmi1 bmi2 fma abm movbe"),
    ("IvyBridge-IBRS", "avx2 bmi1 bmi2 fma abm movbe"),
    ("Haswell", ""),
    ("Haswell-noTSX", ""),
    ("Haswell-IBRS", ""),
    ("Haswell-noTSX-IBRS", ""),
    ("Broadwell", ""),
    ("Broadwell-noTSX", ""),
    ("Broadwell-IBRS", ""),
    ("Broadwell-noTSX-IBRS", ""),
    ("Skylake-Client", ""),
    ("Skylake-Client-IBRS", ""),
    ("Skylake-Client-noTSX-IBRS", ""),
    ("Skylake-Server", ""),
    ("Skylake-Server-IBRS", ""),
    ("Skylake-Server-noTSX-IBRS", ""),
    ("Cascadelake-Server", ""),
    ("Cascadelake-Server-noTSX", ""),
    ("Icelake-Server", ""),
    ("Icelake-Server-noTSX", ""),
    ("Cooperlake", ""),
    ("Snowridge", "avx avx2 bmi1 bmi2 f16c fma abm"),
    (
        "Opteron_G3",
        "sse4_1 sse4_2 ssse3 avx avx2 bmi1 bmi2 f16c fma movbe xsave",
    ),
    ("Opteron_G4", "avx2 bmi1 bmi2 f16c fma movbe"),
    ("Opteron_G5", "avx2 bmi1 bmi2 movbe"),
    ("EPYC", ""),
    ("EPYC-IBPB", ""),
    ("EPYC-Rome", ""),
    ("EPYC-Milan", ""),
];

/// The level features model `name` lacks; `None` for a model not in [`MODELS`].
pub fn model_missing(name: &str, level: CpuLevel) -> Option<Vec<&'static str>> {
    let (_, lacks) = MODELS.iter().find(|(n, _)| *n == name)?;
    let lacks: BTreeSet<&str> = lacks.split_whitespace().collect();
    Some(
        level
            .flags()
            .into_iter()
            .filter(|f| lacks.contains(f))
            .collect(),
    )
}

/// The model a TCG guest gets for `level`: the oldest QEMU model with every
/// feature of it. Nehalem has x86-64-v2; Haswell-noTSX-IBRS x86-64-v3, which
/// QEMU's TCG emulates since 7.2 (AVX, AVX2, F16C, FMA: QEMU issue #844); the
/// few Haswell features TCG lacks (x2apic, tsc-deadline, invpcid, spec-ctrl)
/// QEMU drops with a warning, none of them a level's.
pub fn tcg_model(level: CpuLevel) -> &'static str {
    match level {
        CpuLevel::V1 | CpuLevel::V2 => "Nehalem",
        CpuLevel::V3 => "Haswell-noTSX-IBRS",
    }
}

/// The CPU a node gets, as far as it can be known before it boots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestCpu<'a> {
    /// A named model (`field` set it, or shiftlab chose it for TCG).
    Model { field: &'a str, name: &'a str },
    /// The host's CPU passed through (KVM, libvirt host-passthrough): its
    /// `/proc/cpuinfo` flags; `field: value` is the setting that chose KVM.
    Host {
        field: &'a str,
        value: &'a str,
        flags: &'a BTreeSet<String>,
    },
}

/// Refuse a CPU that lacks what the stream needs: the message names the field
/// (or the host), its value, the rule and the missing features.
pub fn check(stream: &StreamLevel, cpu: &GuestCpu<'_>) -> Result<(), String> {
    let (what, lacks) = match cpu {
        GuestCpu::Model { field, name } => (
            format!("{field}: {name}"),
            model_missing(name, stream.level).unwrap_or_default(),
        ),
        GuestCpu::Host {
            field,
            value,
            flags,
        } => (
            format!(
                "{field}: {value} runs the nodes under KVM with the host's CPU (host-passthrough), \
                 which offers {} and",
                level_of(flags)
            ),
            missing(stream.level, flags),
        ),
    };
    if lacks.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{what} lacks {} ({}): {}; an image built for {} does not boot without them",
        lacks.join(", "),
        stream.level,
        stream.rule(),
        stream.level,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/cpuinfo` of the stand-in (Debian's 6.1 kernel) under QEMU 7.2's
    /// TCG with `-cpu Nehalem`: x86-64-v2, no AVX (recorded; lines trimmed).
    const NEHALEM_CPUINFO: &str = "processor\t: 0
model name\t: Intel Core i7 9xx (Nehalem Class Core i7)
flags\t\t: fpu de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 syscall nx lm constant_tsc rep_good nopl xtopology cpuid pni ssse3 cx16 sse4_1 sse4_2 popcnt hypervisor lahf_lm pti
";

    /// This development machine's (itself a KVM guest: `hypervisor`), x86-64-v4.
    const V3_CPUINFO: &str = "processor\t: 0
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch cpuid_fault fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 arat avx512vbmi umip avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid cldemote movdiri movdir64b fsrm serialize tsxldtrk avx512_fp16 arch_capabilities
";

    fn stream(name: &str, release: &str) -> String {
        format!(
            r#"{{"stream":"{name}","architectures":{{"x86_64":{{"artifacts":{{"qemu":{{"release":"{release}","formats":{{}}}}}}}}}}}}"#
        )
    }

    #[test]
    fn levels_and_their_features() {
        assert_eq!(CpuLevel::V1.flags(), Vec::<&str>::new());
        assert_eq!(
            CpuLevel::V2.flags(),
            ["cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"]
        );
        let v3 = CpuLevel::V3.flags();
        assert_eq!(v3.len(), 16);
        for f in [
            "avx2", "fma", "abm", "movbe", "bmi2", "f16c", "xsave", "sse4_2",
        ] {
            assert!(v3.contains(&f), "{f}");
        }
        assert_eq!(CpuLevel::parse("x86-64-v3"), Some(CpuLevel::V3));
        assert_eq!(CpuLevel::parse("v3"), None);
    }

    #[test]
    fn streams_to_levels() {
        let level = |s: &str, r: &str| {
            let l = stream_level(&stream(s, r)).unwrap();
            (l.os, l.level)
        };
        // OKD's SCOS (openshift/installer data/data/coreos/scos.json).
        assert_eq!(
            level("c10s", "10.0.20250628-0"),
            ("CentOS Stream 10".into(), CpuLevel::V3)
        );
        assert_eq!(
            level("c9s", "9.0.20240801-0"),
            ("CentOS Stream 9".into(), CpuLevel::V2)
        );
        // OCP 4.22 on RHEL 10 (coreos-rhel-10.json): the stream says rhcos-4.22.
        assert_eq!(
            level("rhcos-4.22", "10.2.20260715-0"),
            ("RHEL 10".into(), CpuLevel::V3)
        );
        assert_eq!(level("rhcos-4.20", "9.6.20250523-0").1, CpuLevel::V2);
        assert_eq!(level("rhel-10.2", "x").1, CpuLevel::V3);
        // OCP 4.18 (RHEL 9.4) and 4.12 (RHEL 8.6) releases.
        assert_eq!(
            level("rhcos-4.18", "418.94.202503121207-0"),
            ("RHEL 9".into(), CpuLevel::V2)
        );
        assert_eq!(level("rhcos-4.12", "412.86.202306132230-0").1, CpuLevel::V1);
        // OKD 4.17's SCOS (CentOS Stream 9), and a RHEL 10 in the older form.
        assert_eq!(
            level("scos-4.17", "417.9.202409120352-0"),
            ("CentOS Stream 9".into(), CpuLevel::V2)
        );
        assert_eq!(level("rhcos-4.30", "430.100.2030-0").1, CpuLevel::V3);
        // OKD before 4.19: Fedora CoreOS 39.
        assert_eq!(
            level("stable", "39.20231101.3.0"),
            ("Fedora 39".into(), CpuLevel::V1)
        );
        // Unknown: what shiftlab always required.
        assert_eq!(level("", ""), ("taken as RHEL 9".into(), CpuLevel::V2));
        let l = stream_level(&stream("scos-4.17", "")).unwrap();
        assert_eq!(
            l.rule(),
            "stream scos-4.17 (taken as RHEL 9) needs x86-64-v2"
        );
        let l = stream_level(&stream("c10s", "10.0.20250628-0")).unwrap();
        assert_eq!(
            l.rule(),
            "stream c10s (release 10.0.20250628-0, CentOS Stream 10) needs x86-64-v3"
        );
        assert!(stream_level("no").is_err());
    }

    #[test]
    fn cpuinfo_checks() {
        let v2 = cpuinfo_flags(NEHALEM_CPUINFO);
        assert!(v2.contains("sse4_2") && !v2.contains("avx"));
        assert_eq!(level_of(&v2), CpuLevel::V2);
        assert!(missing(CpuLevel::V2, &v2).is_empty());
        assert_eq!(
            missing(CpuLevel::V3, &v2),
            ["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"]
        );
        let v3 = cpuinfo_flags(V3_CPUINFO);
        assert_eq!(level_of(&v3), CpuLevel::V3);
        assert_eq!(level_of(&cpuinfo_flags("")), CpuLevel::V1);
    }

    #[test]
    fn models() {
        assert_eq!(
            model_missing("Nehalem", CpuLevel::V3).unwrap(),
            ["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"]
        );
        assert_eq!(
            model_missing("Nehalem", CpuLevel::V2).unwrap(),
            Vec::<&str>::new()
        );
        assert_eq!(
            model_missing("IvyBridge", CpuLevel::V3).unwrap(),
            ["avx2", "bmi1", "bmi2", "fma", "abm", "movbe"]
        );
        assert_eq!(
            model_missing("Penryn", CpuLevel::V2).unwrap(),
            ["popcnt", "sse4_2"]
        );
        assert_eq!(model_missing("nope", CpuLevel::V1), None);
        // The TCG choice has its level.
        for l in CpuLevel::ALL {
            assert_eq!(
                model_missing(tcg_model(l), l).unwrap(),
                Vec::<&str>::new(),
                "{l}"
            );
        }
        assert_eq!(tcg_model(CpuLevel::V2), "Nehalem");
    }

    #[test]
    fn refusals_name_field_value_rule_and_features() {
        let c10s = stream_level(&stream("c10s", "10.0.20250628-0")).unwrap();
        let e = check(
            &c10s,
            &GuestCpu::Model {
                field: "libvirt.cpu_model",
                name: "Nehalem",
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            "libvirt.cpu_model: Nehalem lacks avx, avx2, bmi1, bmi2, f16c, fma, abm, movbe, xsave (x86-64-v3): \
             stream c10s (release 10.0.20250628-0, CentOS Stream 10) needs x86-64-v3; \
             an image built for x86-64-v3 does not boot without them"
        );
        let v2 = cpuinfo_flags(NEHALEM_CPUINFO);
        let host = |flags| GuestCpu::Host {
            field: "libvirt.domain_type",
            value: "kvm",
            flags,
        };
        let e = check(&c10s, &host(&v2)).unwrap_err();
        assert!(
            e.starts_with(
                "libvirt.domain_type: kvm runs the nodes under KVM with the host's CPU \
                 (host-passthrough), which offers x86-64-v2 and lacks avx, avx2, bmi1"
            ),
            "{e}"
        );
        assert!(
            e.contains("stream c10s (release 10.0.20250628-0, CentOS Stream 10) needs x86-64-v3"),
            "{e}"
        );
        let v3 = cpuinfo_flags(V3_CPUINFO);
        assert_eq!(check(&c10s, &host(&v3)), Ok(()));
        let rhcos = stream_level(&stream("rhcos-4.18", "418.94.2025-0")).unwrap();
        assert_eq!(check(&rhcos, &host(&v2)), Ok(()));
        assert_eq!(
            check(
                &rhcos,
                &GuestCpu::Model {
                    field: "libvirt.cpu_model",
                    name: "Nehalem"
                }
            ),
            Ok(())
        );
    }
}
