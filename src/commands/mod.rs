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
    let loaded = spec::load(file)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    Ok(loaded)
}

/// The libvirt URI a command talks to: `--connect`, else the one the cluster
/// was created with, else libvirt's default.
fn libvirt_uri(connect: &crate::cli::connect::ConnectArgs, recorded: Option<String>) -> String {
    crate::libvirt::uri(connect.uri.as_deref().or(recorded.as_deref()))
}
