//! One function per subcommand: glue between the clap arguments and the modules that
//! do the work. Kept thin so that the work itself stays testable without a CLI.

pub mod access;
pub mod approve_csrs;
pub mod bmc;
pub mod bundle;
pub mod create;
pub mod destroy;
pub mod doctor;
pub mod gather;
pub mod ironic_standin;
pub mod list;
pub mod plan;
pub mod power;
pub mod render;
pub mod report;
pub mod scale;
pub mod serve;
pub mod status;
pub mod users;
pub mod wait_for;

use std::path::Path;

use anyhow::{bail, Result};

use crate::cli::params::ParamArgs;
use crate::spec::{self, Loaded};
use crate::state::{ClusterName, StateDir};

/// Load and validate a cluster file with the command's `-P` overrides applied,
/// printing its warnings to stderr; with `force` (a command's `--force`, or one
/// that makes nothing) the refusals `--force` may override are warnings.
pub fn load_spec_with(file: &Path, force: bool, params: &ParamArgs) -> Result<Loaded> {
    let overrides = spec::Overrides {
        force,
        params: params.params.clone(),
    };
    let loaded = spec::load_with(file, overrides)?;
    tracing::info!(
        "cluster file {}: cluster {}",
        file.display(),
        loaded.spec.cluster
    );
    let word = crate::color::paint("warning", crate::color::Tone::Warn, crate::color::stderr());
    for w in &loaded.warnings {
        eprintln!("{word}: {w}");
    }
    Ok(loaded)
}

/// The cluster a command on one names: its file with `-f` (which must be the
/// file of `name` when both are given), else the cluster file `name`'s install
/// recorded, loaded as it was read then.
pub fn load_named(
    name: Option<&ClusterName>,
    file: Option<&Path>,
    params: &ParamArgs,
    force: bool,
    state: &StateDir,
) -> Result<Loaded> {
    let loaded = match (name, file) {
        (_, Some(f)) => load_spec_with(f, force, params)?,
        (Some(n), None) => crate::cluster::recorded_source(state, n)?
            .load(force, std::env::current_dir().ok().as_deref())?,
        (None, None) => bail!("name the cluster or give its file with -f"),
    };
    if let (Some(n), Some(f)) = (name, file) {
        if loaded.spec.cluster != n.as_str() {
            bail!(
                "{} is the file of cluster {}, not {n}",
                f.display(),
                loaded.spec.cluster
            );
        }
    }
    if file.is_none() {
        for w in &loaded.warnings {
            eprintln!("warning: {w}");
        }
    }
    Ok(loaded)
}
