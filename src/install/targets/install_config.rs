//! The install-config target: install-config.yaml (and agent-config.yaml for
//! method agent) written into the asset directory, where `openshift-install`
//! consumes it, with a backup beside it in the cluster's directory that keeps
//! what was asked for. All 0600: they hold or sit beside secrets.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::Note;
use crate::files::write_private;
use crate::install::state::Locked;
use crate::install::Ctx;
use crate::render::install_config::{self, Secrets, OKD_FAKE_PULL_SECRET};
use crate::spec::{ClusterSpec, Distribution, Method};
use crate::state::ClusterDir;

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

/// One config file the installer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Config {
    Install,
    Agent,
}

impl Config {
    /// The configs of `method`.
    fn of(method: Method) -> &'static [Config] {
        match method {
            Method::Agent => &[Config::Install, Config::Agent],
            _ => &[Config::Install],
        }
    }

    fn name(self) -> &'static str {
        match self {
            Config::Install => "install-config",
            Config::Agent => "agent-config",
        }
    }

    fn asset(self, cluster: &ClusterDir) -> PathBuf {
        match self {
            Config::Install => cluster.assets().install_config(),
            Config::Agent => cluster.assets().agent_config(),
        }
    }

    fn backup(self, cluster: &ClusterDir) -> PathBuf {
        match self {
            Config::Install => cluster.install_config_backup(),
            Config::Agent => cluster.agent_config_backup(),
        }
    }
}

pub fn run(ctx: &Ctx, _locked: &mut Locked) -> Result<Note> {
    let spec = ctx.spec;
    // The installer's host FIPS check, before it runs (src/host/fips.rs).
    match crate::host::fips::decide(
        spec.fips,
        &crate::host::fips::host_state(),
        spec.rehearsal,
        std::env::var_os(crate::host::fips::SKIP_ENV).is_some_and(|v| !v.is_empty()),
    ) {
        crate::host::fips::Decision::Fine => {}
        crate::host::fips::Decision::Warn(w) => ctx.progress.aside(format_args!("warning: {w}")),
        crate::host::fips::Decision::Refuse(e) => anyhow::bail!("{e}"),
    }
    let secrets = Secrets {
        pull_secret: read_pull_secret(spec)?,
        bmc_password: if spec.method == Method::Ipi {
            Some(ctx.cluster.lab_bmc_password(spec.bmc.password.as_deref())?)
        } else {
            None
        },
        // The lab BMC's CA, made now if serve has not started the BMC yet (it
        // serves a certificate issued by this CA: src/redfish/tls.rs).
        bmc_ca: if spec.method == Method::Ipi && spec.bmc.verify_certificate {
            Some(crate::redfish::tls::ca_pem(&ctx.cluster.bmc_tls())?)
        } else {
            None
        },
    };
    for (config, text) in render(ctx, &secrets)? {
        for path in [config.asset(&ctx.cluster), config.backup(&ctx.cluster)] {
            write_private(&path, text.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(Some(
        ctx.cluster.assets().install_config().display().to_string(),
    ))
}

/// The configs of the cluster's method, with `secrets`.
fn render(ctx: &Ctx, secrets: &Secrets) -> Result<Vec<(Config, String)>> {
    let spec = ctx.spec;
    let bundle = match &spec.additional_trust_bundle {
        None if spec.trust_bundle_pem.is_some() => spec.trust_bundle_pem.clone(),
        Some(p) => Some(
            crate::spec::read_input(p)
                .with_context(|| format!("reading trust bundle {}", p.display()))?,
        ),
        None => None,
    };
    Ok(Config::of(spec.method)
        .iter()
        .map(|config| {
            let text = match config {
                Config::Install => {
                    install_config::install_config(spec, ctx.plan, secrets, bundle.as_deref())
                }
                Config::Agent => install_config::agent_config(spec, ctx.plan),
            };
            (*config, text)
        })
        .collect())
}

/// `create install-config --dir DIR`: the configs rendered into `dir`, each
/// with a backup copy, and nothing written into the state directory (no plan
/// pinned: the cluster file may change afterwards). The lab BMC's secrets
/// (IPI) are the cluster's when it has them, else the file's password or a
/// new one, said on stderr; a CA to verify is refused until one is made.
pub fn render_into(ctx: &Ctx, dir: &Path) -> Result<Vec<PathBuf>> {
    let spec = ctx.spec;
    let ipi = spec.method == Method::Ipi;
    let stored = std::fs::read_to_string(ctx.cluster.bmc_password())
        .ok()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty());
    let bmc_password = match (ipi, spec.bmc.password.clone(), stored) {
        (false, _, _) => None,
        (true, Some(p), _) | (true, None, Some(p)) => Some(p),
        (true, None, None) => {
            ctx.progress.aside(format_args!(
                "note: a new lab BMC password, not stored: the install makes its own unless bmc.password is set"
            ));
            Some(crate::files::random_secret(crate::files::PASSWORD_LEN)?)
        }
    };
    let bmc_ca = if ipi && spec.bmc.verify_certificate {
        let ca = ctx.cluster.bmc_tls().join("ca.crt");
        Some(std::fs::read_to_string(&ca).with_context(|| {
            format!(
                "bmc.verify_certificate names the lab BMC's CA, which {} has not made yet ({}); run `shiftlab create install-config` without --dir first",
                spec.cluster,
                ca.display()
            )
        })?)
    } else {
        None
    };
    let secrets = Secrets {
        pull_secret: read_pull_secret(spec)?,
        bmc_password,
        bmc_ca,
    };
    let mut written = Vec::new();
    for (config, text) in render(ctx, &secrets)? {
        for file in [
            format!("{}.yaml", config.name()),
            format!("{}.backup.yaml", config.name()),
        ] {
            let path = dir.join(file);
            write_private(&path, text.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            written.push(path);
        }
    }
    Ok(written)
}

/// Make sure the installer has its input again after an interrupted run consumed
/// it (openshift-install deletes install-config.yaml once it has read it).
pub fn restore(cluster: &ClusterDir) -> Result<()> {
    let assets = cluster.assets();
    if !assets.install_config().exists() && !assets.installer_state().exists() {
        let backup = cluster.install_config_backup();
        let text =
            std::fs::read(&backup).with_context(|| format!("reading {}", backup.display()))?;
        write_private(&assets.install_config(), &text)?;
    }
    Ok(())
}
