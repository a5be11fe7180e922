//! A cluster file as a command read it: its text, its name, the `-P` overrides
//! and the environment its paths were resolved in. The install records it in
//! the cluster's state (`cluster-file.json`, 0600: the text may hold the BMC
//! password) so that a command given the cluster's name alone loads the very
//! spec the cluster was made from, whatever became of the file since.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{from_str_with, Env, InvalidSpec, Loaded, Overrides};
use crate::state::ClusterDir;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// The file's path as given, for messages.
    pub file: String,
    pub text: String,
    /// `-P KEY=VALUE`, in order.
    pub params: Vec<String>,
    pub home: Option<PathBuf>,
    /// Relative paths in the file are relative to it: relative itself for a
    /// file named without a directory, to `cwd`.
    pub base_dir: PathBuf,
    /// The directory the command that read it ran in.
    pub cwd: Option<PathBuf>,
    pub libvirt_default_uri: Option<String>,
}

impl Source {
    pub fn new(text: &str, file: &str, env: &Env, params: &[String]) -> Self {
        Source {
            file: file.to_string(),
            text: text.to_string(),
            params: params.to_vec(),
            home: env.home.clone(),
            base_dir: env.base_dir.clone(),
            cwd: std::env::current_dir().ok(),
            libvirt_default_uri: env.libvirt_default_uri.clone(),
        }
    }

    /// Parse and validate it again, as it was, by a command running in
    /// `here`: its paths as they were spelled when `here` is where it was read
    /// (so the plan is the same), else made from that directory.
    pub fn load(&self, force: bool, here: Option<&Path>) -> Result<Loaded, InvalidSpec> {
        let base_dir = match &self.cwd {
            Some(cwd) if self.base_dir.is_relative() && here != Some(cwd.as_path()) => {
                cwd.join(&self.base_dir)
            }
            _ => self.base_dir.clone(),
        };
        let env = Env {
            home: self.home.clone(),
            base_dir,
            libvirt_default_uri: self.libvirt_default_uri.clone(),
        };
        let params = self.params.clone();
        from_str_with(&self.text, &self.file, &env, Overrides { force, params })
    }

    /// The same file with the worker count `scale` set: a `-P workers=N`
    /// replacing any earlier one.
    pub fn with_workers(&self, workers: u32) -> Self {
        let mut s = self.clone();
        s.params.retain(|p| !p.trim_start().starts_with("workers="));
        s.params.push(format!("workers={workers}"));
        s
    }

    /// Record it as the cluster's (0600).
    pub fn record(&self, cluster: &ClusterDir) -> Result<()> {
        let path = cluster.cluster_file();
        if recorded(cluster).ok().flatten().as_ref() == Some(self) {
            return Ok(());
        }
        let text = serde_json::to_vec_pretty(self)?;
        crate::files::write_private(&path, &text)
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// The cluster file recorded for `cluster`: `None` when none was (a cluster
/// made by an older shiftlab).
pub fn recorded(cluster: &ClusterDir) -> Result<Option<Source>> {
    let path = cluster.cluster_file();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    serde_json::from_str(&text)
        .map(Some)
        .with_context(|| format!("reading {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "cluster: lab1\ndomain: lab.test\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: 1\n";

    #[test]
    fn a_recorded_file_loads_as_it_was_read_with_scales_count_last() {
        let tmp = tempfile::tempdir().unwrap();
        let state = crate::state::StateDir::resolve(Some(tmp.path()));
        let cluster = state.cluster("lab1");
        std::fs::create_dir_all(cluster.path()).unwrap();
        assert_eq!(recorded(&cluster).unwrap(), None);
        let env = Env {
            base_dir: "/somewhere".into(),
            ..Env::default()
        };
        let src = Source::new(FILE, "lab1.yaml", &env, &["workers=2".into()]);
        src.with_workers(3).record(&cluster).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(cluster.cluster_file())
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        let back = recorded(&cluster).unwrap().unwrap();
        assert_eq!(back.params, ["workers=3"]);
        assert_eq!(back.base_dir, PathBuf::from("/somewhere"));
        assert_eq!(back.load(false, None).unwrap().spec.workers, 3);
        // A file named without a directory: its paths as spelled from where it
        // was read, made from there anywhere else.
        let text = format!("{FILE}image: img.qcow2\n");
        let mut rel = Source::new(&text, "lab1.yaml", &Env::default(), &[]);
        rel.cwd = Some(tmp.path().into());
        std::fs::write(tmp.path().join("img.qcow2"), "").unwrap();
        let image = |here: &Path| rel.load(false, Some(here)).map(|l| l.spec.image);
        assert_eq!(
            image(&tmp.path().join("elsewhere")).unwrap(),
            Some(tmp.path().join("img.qcow2"))
        );
        assert!(
            image(tmp.path()).is_err(),
            "img.qcow2 read from the test's own directory"
        );
    }
}
