//! The cluster file: types, defaults, validation, kcli aliases.

mod diag;
pub mod kcli;
mod parse;
mod resolve;
mod types;

use std::path::Path;

pub use diag::{Diagnostic, Diagnostics, InvalidSpec};
pub use resolve::{is_dns_label, parse_version, Env};
pub use types::*;

/// A cluster file that passed validation, with the warnings it produced.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub spec: ClusterSpec,
    pub warnings: Vec<Diagnostic>,
}

/// Parse and validate cluster-file text. Reads (never writes) the files it names.
pub fn from_str(text: &str, file: &str, env: &Env) -> Result<Loaded, InvalidSpec> {
    let mut d = Diagnostics::default();
    let spec = parse::parse(text, &mut d).map(|raw| resolve::resolve(raw, env, &mut d));
    let Some(spec) = spec.filter(|_| !d.has_errors()) else {
        return Err(InvalidSpec {
            file: file.to_string(),
            errors: d.errors,
        });
    };
    Ok(Loaded {
        spec,
        warnings: d.warnings,
    })
}

/// Load a cluster file from disk.
pub fn load(path: &Path) -> Result<Loaded, InvalidSpec> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| InvalidSpec {
        file: file.clone(),
        errors: vec![Diagnostic {
            field: "(file)".into(),
            message: format!("cannot read the cluster file: {e}"),
        }],
    })?;
    from_str(&text, &file, &Env::from_process(path))
}
