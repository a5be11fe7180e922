//! The `install-config` target: write install-config.yaml (and agent-config.yaml)
//! with a backup copy, since `openshift-install` consumes the originals.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::files::{random_secret, write_private};
use crate::plan::Plan;
use crate::render::install_config::{self, Secrets, OKD_FAKE_PULL_SECRET};
use crate::spec::{ClusterSpec, Distribution, Method};

use crate::state::StateDir;

/// Read the pull secret as compact JSON (the fake one for OKD without a file).
pub fn read_pull_secret(spec: &ClusterSpec) -> Result<String> {
    match &spec.pull_secret {
        Some(p) => {
            let text = crate::spec::read_input(p)
                .with_context(|| format!("reading pull secret {}", p.display()))?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("parsing pull secret {}", p.display()))?;
            Ok(v.to_string())
        }
        None if spec.distribution == Distribution::Okd => Ok(OKD_FAKE_PULL_SECRET.into()),
        None => anyhow::bail!("no pull secret: OCP needs `pull_secret` in the cluster file"),
    }
}

/// The lab's BMC password: the cluster file's, else the one stored for this cluster,
/// else a new random one; stored 0600 in the cluster's directory, where the lab's
/// BMC in `shiftlab serve` reads it.
pub fn bmc_password(spec: &ClusterSpec, state: &StateDir) -> Result<String> {
    lab_bmc_password(&state.cluster(&spec.cluster), spec.bmc.password.as_deref())
}

/// The one reader and writer of `<cluster dir>/bmc-password`: `create
/// install-config` puts it into install-config.yaml, and the lab's BMC in `shiftlab
/// serve` authenticates with it (`configured` is None there: the plan holds no secret).
pub fn lab_bmc_password(cluster_dir: &Path, configured: Option<&str>) -> Result<String> {
    let path = cluster_dir.join("bmc-password");
    let stored = std::fs::read_to_string(&path)
        .ok()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty());
    let password = match (configured, stored) {
        (Some(p), Some(s)) if p == s => return Ok(s),
        (None, Some(s)) => return Ok(s),
        (Some(p), _) => p.to_string(),
        (None, None) => random_secret(24)?,
    };
    write_private(&path, password.as_bytes())
        .with_context(|| format!("storing the BMC password in {}", path.display()))?;
    Ok(password)
}

/// Write the install configs into `dir`; returns the files written.
pub fn write(
    spec: &ClusterSpec,
    plan: &Plan,
    dir: &Path,
    state: &StateDir,
) -> Result<Vec<PathBuf>> {
    let secrets = Secrets {
        pull_secret: read_pull_secret(spec)?,
        bmc_password: if spec.method == Method::Ipi {
            Some(bmc_password(spec, state)?)
        } else {
            None
        },
    };
    let bundle = match &spec.additional_trust_bundle {
        Some(p) => Some(
            crate::spec::read_input(p)
                .with_context(|| format!("reading trust bundle {}", p.display()))?,
        ),
        None => None,
    };
    let mut files = vec![(
        "install-config",
        install_config::install_config(spec, plan, &secrets, bundle.as_deref()),
    )];
    if spec.method == Method::Agent {
        files.push(("agent-config", install_config::agent_config(spec, plan)));
    }
    let mut written = Vec::new();
    for (name, text) in files {
        // Both hold or sit beside secrets: 0600 for all of them.
        for file in [format!("{name}.yaml"), format!("{name}.backup.yaml")] {
            let path = dir.join(file);
            write_private(&path, text.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            written.push(path);
        }
    }
    Ok(written)
}
