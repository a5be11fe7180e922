//! One function per subcommand: glue between the clap arguments and the modules that
//! do the work. Kept thin so that the work itself stays testable without a CLI.

pub mod access;
pub mod approve_csrs;
pub mod bmc;
pub mod create;
pub mod destroy;
pub mod doctor;
pub mod gather;
pub mod list;
pub mod plan;
pub mod power;
pub mod render;
pub mod scale;
pub mod serve;
pub mod status;

use std::path::Path;

use anyhow::Result;

use crate::cli::params::ParamArgs;
use crate::spec::{self, Loaded};

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
