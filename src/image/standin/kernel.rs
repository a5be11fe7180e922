//! The kernel the stand-in boots: the newest one in the host's /boot.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

/// A kernel found in /boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    pub version: String,
    pub path: PathBuf,
}

pub(super) fn newest_kernel(boot: &Path) -> Result<Kernel> {
    let mut names = Vec::new();
    if let Ok(rd) = fs::read_dir(boot) {
        for e in rd.flatten() {
            names.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    let version = pick_newest_kernel(&names).ok_or_else(|| {
        anyhow!(
            "no kernel found in {} (vmlinuz-*): install the Debian package linux-image-amd64",
            boot.display()
        )
    })?;
    Ok(Kernel {
        path: boot.join(format!("vmlinuz-{version}")),
        version,
    })
}

/// The newest kernel version among `/boot` file names (`vmlinuz-<version>`).
pub fn pick_newest_kernel(names: &[String]) -> Option<String> {
    names
        .iter()
        .filter_map(|n| n.strip_prefix("vmlinuz-"))
        .filter(|v| !v.is_empty() && !v.ends_with(".old") && !v.ends_with(".bak"))
        .max_by(|a, b| version_cmp(a, b))
        .map(str::to_owned)
}

/// Compare version strings piecewise: digit runs numerically, the rest as text.
pub fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn pieces(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (pa, pb) = (pieces(a), pieces(b));
    for (x, y) in pa.iter().zip(pb.iter()) {
        let ord = match (x, y) {
            ((true, x), (true, y)) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if ord.is_ne() {
            return ord;
        }
    }
    pa.len().cmp(&pb.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_kernel_by_version() {
        let names: Vec<String> = [
            "config-6.1.0-9-amd64",
            "vmlinuz-6.1.0-9-amd64",
            "vmlinuz-6.1.0-56-amd64",
            "vmlinuz-6.1.0-10-amd64",
            "vmlinuz-5.10.0-30-amd64",
            "initrd.img-6.1.0-99-amd64",
            "vmlinuz-6.1.0-57-amd64.old",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(pick_newest_kernel(&names).unwrap(), "6.1.0-56-amd64");
        assert_eq!(pick_newest_kernel(&[]), None);
        assert!(version_cmp("6.10.1", "6.9.12").is_gt());
        assert!(version_cmp("6.1.0-56", "6.1.0-56-amd64").is_lt());
    }
}
