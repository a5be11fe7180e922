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

use crate::spec::{self, Loaded};

/// Load and validate a cluster file, printing its warnings to stderr.
pub fn load_spec(file: &Path) -> Result<Loaded> {
    load_spec_with(file, false)
}

/// [`load_spec`] for a command with `--force`: the refusals it overrides warn.
pub fn load_spec_with(file: &Path, force: bool) -> Result<Loaded> {
    let loaded = spec::load_with(file, spec::Overrides { force })?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    Ok(loaded)
}
