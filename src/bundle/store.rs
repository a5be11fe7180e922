//! Bundles on disk: found by name (`<state>/bundles/<name>`) or path, listed,
//! verified (every file's sha256), deleted (only the files the manifest
//! lists, the manifest and shiftlab's mark; the directory when then empty).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use sha2::Sha256;

use super::manifest::{self, Manifest};
use super::OWNER_MARK;
use crate::state::{ClusterName, StateDir};

/// A bundle named on the command line: a path when it has a `/` (or is `.`),
/// else a name under `<state>/bundles/`, checked as a cluster name.
pub fn locate(state: &StateDir, given: &str) -> Result<PathBuf> {
    if given.contains('/') || given == "." || given == ".." {
        return Ok(PathBuf::from(given));
    }
    let name = ClusterName::parse(given).map_err(|e| {
        anyhow::anyhow!("{e}; give a bundle's name (as bundle list shows it) or its path")
    })?;
    Ok(state.bundle(&name))
}

/// A bundle's manifest, checked, and its text.
pub fn read(dir: &Path) -> Result<(Manifest, String)> {
    let p = dir.join(manifest::MANIFEST);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{} is no bundle: it has no {} (a bundle create that did not finish leaves none; run it again)",
            dir.display(),
            manifest::MANIFEST
        ),
        Err(e) => return Err(e).with_context(|| format!("reading {}", p.display())),
    };
    let m = Manifest::parse(&text).with_context(|| format!("reading {}", p.display()))?;
    Ok((m, text))
}

/// One line of `bundle list`.
#[derive(Debug, Serialize)]
pub struct Listed {
    pub name: String,
    pub path: PathBuf,
    pub cluster: String,
    pub method: String,
    pub nodes: usize,
    pub bytes: u64,
    pub created_at: u64,
    /// Why it is not a usable bundle (unfinished, unreadable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The bundles under `<state>/bundles/`, unfinished ones said as such.
pub fn list(state: &StateDir) -> Result<Vec<Listed>> {
    let dir = state.bundles();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e?;
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !crate::spec::is_cluster_name(&name) || !e.file_type()?.is_dir() {
            continue;
        }
        let path = e.path();
        out.push(match read(&path) {
            Ok((m, _)) => Listed {
                name,
                path,
                cluster: m.cluster.clone(),
                method: m.method.clone(),
                nodes: m.nodes.len(),
                bytes: m.files.iter().map(|f| f.bytes).sum(),
                created_at: m.created_at,
                problem: None,
            },
            Err(err) => Listed {
                name,
                path,
                cluster: String::new(),
                method: String::new(),
                nodes: 0,
                bytes: 0,
                created_at: 0,
                problem: Some(format!("{err:#}")),
            },
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

pub fn list_table(l: &[Listed]) -> String {
    let rows: Vec<Vec<String>> = l
        .iter()
        .map(|b| {
            vec![
                b.name.clone(),
                b.cluster.clone(),
                b.method.clone(),
                b.nodes.to_string(),
                format!("{} MiB", b.bytes.div_ceil(1 << 20)),
                b.problem.clone().unwrap_or_else(|| "ok".into()),
            ]
        })
        .collect();
    crate::plan::render_table_rows(
        &["NAME", "CLUSTER", "METHOD", "NODES", "SIZE", "STATE"],
        &rows,
    )
}

/// `bundle inspect`'s human form.
pub fn inspect_table(m: &Manifest) -> String {
    let ts = |t: i64| {
        k8s_openapi::jiff::Timestamp::from_second(t)
            .map_or_else(|_| t.to_string(), |t| t.to_string())
    };
    let mut s = format!(
        "cluster {} ({}), method {}, release {}{}\ncreated {}; installed {}; certificates expire {}\n",
        m.cluster,
        m.domain,
        m.method,
        m.release_version.as_deref().unwrap_or("-"),
        if m.rehearsal { ", rehearsal" } else { "" },
        ts(m.created_at as i64),
        m.installed_at.map_or("-".into(), |t| ts(t as i64)),
        m.certificates_expire.map_or("-".into(), ts),
    );
    let rows: Vec<Vec<String>> = m
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.name.clone(),
                n.role.as_str().to_string(),
                n.mac.clone(),
                n.ip.to_string(),
                n.disk.clone(),
            ]
        })
        .collect();
    s.push_str(&crate::plan::render_table_rows(
        &["NODE", "ROLE", "MAC", "IP", "DISK"],
        &rows,
    ));
    s
}

/// What `bundle verify` found.
#[derive(Debug, Serialize)]
pub struct Verified {
    pub path: PathBuf,
    pub files: usize,
    /// Files missing or with another sha256 or size, each with why.
    pub bad: Vec<String>,
}

impl Verified {
    pub fn table(&self) -> String {
        format!(
            "{}: {} files, {} bad\n",
            self.path.display(),
            self.files,
            self.bad.len()
        )
    }
}

/// What `bundle delete` did.
#[derive(Debug, Serialize)]
pub struct Deleted {
    pub path: PathBuf,
    /// What was in the directory and not the bundle's: left there.
    pub left: Vec<PathBuf>,
}

impl Deleted {
    pub fn table(&self) -> String {
        if self.left.is_empty() {
            return format!("removed the bundle {}\n", self.path.display());
        }
        let names: Vec<String> = self.left.iter().map(|p| p.display().to_string()).collect();
        format!(
            "removed the bundle {}; left what is not the bundle's: {}\n",
            self.path.display(),
            names.join(", ")
        )
    }
}

/// Every file of the manifest hashed and compared.
pub fn verify(dir: &Path) -> Result<Verified> {
    let (m, _) = read(dir)?;
    let mut bad = Vec::new();
    for f in &m.files {
        let p = dir.join(&f.path);
        match crate::files::hash_file::<Sha256>(&p) {
            Ok(d) if d.eq_ignore_ascii_case(&f.sha256) => {}
            Ok(d) => bad.push(format!(
                "{}: sha256 {d}, the manifest says {}",
                f.path, f.sha256
            )),
            Err(e) => bad.push(format!("{}: {e:#}", f.path)),
        }
    }
    Ok(Verified {
        path: dir.to_path_buf(),
        files: m.files.len(),
        bad,
    })
}

/// The first directory between `dir` and its file `rel` that is a symbolic
/// link (or not a directory), if any.
fn linked_dir(dir: &Path, rel: &str) -> Option<std::path::PathBuf> {
    let mut at = dir.to_path_buf();
    let parents: Vec<_> = Path::new(rel).components().collect();
    for c in &parents[..parents.len().saturating_sub(1)] {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            _ => return Some(at),
        }
    }
    None
}

/// Remove a bundle: the manifest first (it stops being a bundle), then the
/// files it lists and shiftlab's mark, then the directories left empty.
/// Anything else in the directory stays, and is named.
pub fn delete(dir: &Path) -> Result<Deleted> {
    let (m, _) = read(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        bail!("{} is not a directory; left it alone", dir.display());
    }
    std::fs::remove_file(dir.join(manifest::MANIFEST)).context("removing the manifest")?;
    let mut left = Vec::new();
    for f in &m.files {
        let p = dir.join(&f.path);
        // A directory of the bundle that is a link would take the removal
        // elsewhere (a bundle can come from another host): left alone.
        if let Some(link) = linked_dir(dir, &f.path) {
            left.push(link);
            continue;
        }
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", p.display())),
        }
        // Parents up to the bundle's directory, while empty.
        let mut d = p.parent();
        while let Some(parent) = d.filter(|d| *d != dir) {
            if std::fs::remove_dir(parent).is_err() {
                break;
            }
            d = parent.parent();
        }
    }
    let _ = std::fs::remove_file(dir.join(OWNER_MARK));
    if std::fs::remove_dir(dir).is_err() {
        for e in std::fs::read_dir(dir)?.flatten() {
            left.push(e.path());
        }
    }
    left.sort();
    left.dedup();
    Ok(Deleted {
        path: dir.to_path_buf(),
        left,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(dir: &Path) -> Manifest {
        let files = [
            ("disks/lab1-ctlplane-0.qcow2", "disk"),
            ("state/plan.json", "{}"),
        ];
        for (p, body) in files {
            let path = dir.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
        std::fs::write(dir.join(OWNER_MARK), "lab1\n").unwrap();
        let m = Manifest {
            format: manifest::FORMAT,
            cluster: "lab1".into(),
            domain: "example.com".into(),
            method: "upi".into(),
            release_version: None,
            rehearsal: true,
            created_at: 0,
            installed_at: None,
            certificates_expire: None,
            nodes: vec![manifest::NodeIdentity {
                name: "lab1-ctlplane-0".into(),
                role: crate::spec::Role::Ctlplane,
                mac: "52:54:00:00:00:02".into(),
                ip: "10.0.0.2".parse().unwrap(),
                disk: "disks/lab1-ctlplane-0.qcow2".into(),
            }],
            files: super::super::create::hash_tree(dir).unwrap(),
        };
        crate::files::write_json(&dir.join(manifest::MANIFEST), &m).unwrap();
        m
    }

    #[test]
    fn verify_finds_a_changed_file_and_delete_keeps_what_is_not_the_bundles() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("lab1");
        let m = bundle(&dir);
        assert_eq!(m.files.len(), 2, "the manifest and the mark are not listed");
        let v = verify(&dir).unwrap();
        assert_eq!((v.files, v.bad.len()), (2, 0));
        std::fs::write(dir.join("disks/lab1-ctlplane-0.qcow2"), "disc").unwrap();
        let v = verify(&dir).unwrap();
        assert_eq!(v.bad.len(), 1, "{:?}", v.bad);
        assert!(
            v.bad[0].starts_with("disks/lab1-ctlplane-0.qcow2: sha256"),
            "{:?}",
            v.bad
        );

        std::fs::write(dir.join("mine.txt"), "the user's").unwrap();
        let d = delete(&dir).unwrap();
        assert_eq!(d.left, vec![dir.join("mine.txt")]);
        assert!(
            d.table().contains("left what is not the bundle's"),
            "{}",
            d.table()
        );
        assert!(!dir.join("disks").exists() && !dir.join("state").exists());
        assert_eq!(
            std::fs::read_to_string(dir.join("mine.txt")).unwrap(),
            "the user's"
        );
        let e = delete(&dir).unwrap_err().to_string();
        assert!(e.contains("is no bundle"), "{e}");
    }

    #[test]
    fn delete_does_not_follow_a_linked_directory_out_of_the_bundle() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("lab1");
        bundle(&dir);
        // The bundle's disks directory swapped for a link to someone else's.
        let elsewhere = t.path().join("elsewhere");
        std::fs::rename(dir.join("disks"), &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("disks")).unwrap();
        let d = delete(&dir).unwrap();
        assert!(
            elsewhere.join("lab1-ctlplane-0.qcow2").is_file(),
            "removed through the link"
        );
        assert_eq!(d.left, vec![dir.join("disks")]);
    }

    #[test]
    fn a_directory_without_manifest_is_no_bundle() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join(OWNER_MARK), "lab1\n").unwrap();
        let e = read(t.path()).unwrap_err().to_string();
        assert!(e.contains("has no bundle.json"), "{e}");
    }

    #[test]
    fn names_are_checked_before_they_become_paths() {
        let state = StateDir { root: "/s".into() };
        assert_eq!(
            locate(&state, "lab1").unwrap(),
            PathBuf::from("/s/bundles/lab1")
        );
        assert_eq!(locate(&state, "./x").unwrap(), PathBuf::from("./x"));
        assert!(locate(&state, "Lab_1").is_err());
    }
}
