//! The cluster file: types, defaults, validation, kcli aliases.

mod diag;
pub mod kcli;
pub mod params;
mod parse;
mod resolve;
pub mod source;
mod types;
pub mod uri;

use std::path::Path;

pub use diag::{Diagnostic, Diagnostics, InvalidSpec};
pub use resolve::{
    capability_enabled, documented_minimum, is_cluster_name, is_dns_label, is_dns_subdomain,
    parse_version, version_minor, Env, CLUSTER_NAME_RULE,
};
pub use resolve::{
    check_user_name, is_user_name, read_password_file, MAX_PASSWORD_BYTES, USER_NAME_RULE,
};
pub use source::Source;
pub use types::*;

/// A cluster file that passed validation, with the warnings it produced.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub spec: ClusterSpec,
    pub warnings: Vec<Diagnostic>,
    /// What it was loaded from, as the install records it.
    pub source: Source,
}

/// What the command line changes in validation.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--force`: refusals that say "--force goes on anyway" become warnings.
    pub force: bool,
    /// `-P KEY=VALUE` arguments, as given, applied in order over the file ([`params`]).
    pub params: Vec<String>,
}

/// Parse and validate cluster-file text. Reads (never writes) the files it names.
pub fn from_str(text: &str, file: &str, env: &Env) -> Result<Loaded, InvalidSpec> {
    from_str_with(text, file, env, Overrides::default())
}

/// [`from_str`] with the command line's [`Overrides`].
pub fn from_str_with(
    text: &str,
    file: &str,
    env: &Env,
    overrides: Overrides,
) -> Result<Loaded, InvalidSpec> {
    let mut d = Diagnostics {
        force: overrides.force,
        ..Diagnostics::default()
    };
    let params: Vec<params::Param> = overrides
        .params
        .iter()
        .filter_map(|a| params::parse(a).map_err(|e| d.errors.push(e)).ok())
        .collect();
    let source = Source::new(text, file, env, &overrides.params);
    let mut from_p = Vec::new();
    let spec = parse::parse_with(text, &mut d, |root, d| {
        from_p = params::apply(root, &params, d);
    })
    .map(|raw| resolve::resolve(raw, env, &mut d));
    params::mark(&mut d.errors, &from_p);
    params::mark(&mut d.warnings, &from_p);
    let Some(spec) = spec.filter(|_| !d.has_errors()) else {
        return Err(InvalidSpec {
            file: file.to_string(),
            errors: d.errors,
        });
    };
    Ok(Loaded {
        spec,
        warnings: d.warnings,
        source,
    })
}

/// Largest file a cluster file (or a file it names: pull secret, keys, trust
/// bundle) may be: far above any real one.
pub const MAX_INPUT_BYTES: u64 = 16 << 20;

/// Read a text file the user named: a regular file of at most [`MAX_INPUT_BYTES`]
/// (`/dev/zero` or a FIFO would otherwise hang or exhaust memory).
pub fn read_input(path: &Path) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    let f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    if meta.len() > MAX_INPUT_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{} bytes is larger than the {MAX_INPUT_BYTES} bytes allowed",
                meta.len()
            ),
        ));
    }
    let mut text = String::new();
    f.take(MAX_INPUT_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

/// Load a cluster file from disk.
pub fn load(path: &Path) -> Result<Loaded, InvalidSpec> {
    load_with(path, Overrides::default())
}

/// [`load`] with the command line's [`Overrides`].
pub fn load_with(path: &Path, overrides: Overrides) -> Result<Loaded, InvalidSpec> {
    let file = path.display().to_string();
    let text = read_input(path).map_err(|e| InvalidSpec {
        file: file.clone(),
        errors: vec![Diagnostic {
            field: "(file)".into(),
            message: format!("cannot read the cluster file: {e}"),
        }],
    })?;
    from_str_with(&text, &file, &Env::from_process(path), overrides)
}
