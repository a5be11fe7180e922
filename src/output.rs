//! How a command prints what it shows: a human table, or the same value as JSON or
//! YAML for scripts. One function, so every `-o` behaves alike.

use std::io::Write;

use anyhow::{Context, Result};
use serde::Serialize;

/// `-o table|json|yaml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum OutputFormat {
    #[default]
    Table,
    Json,
    Yaml,
}

/// Write `value` in `format`; `table` renders the human form (only called for it).
pub fn emit<T: Serialize + ?Sized>(
    out: &mut dyn Write,
    format: OutputFormat,
    value: &T,
    table: impl FnOnce() -> String,
) -> Result<()> {
    let text = match format {
        OutputFormat::Table => table(),
        OutputFormat::Json => serde_json::to_string_pretty(value)? + "\n",
        OutputFormat::Yaml => yaml_serde::to_string(value)?,
    };
    out.write_all(text.as_bytes()).context("writing the output")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_three_forms() {
        let v = serde_json::json!({"a": 1});
        let mut out = Vec::new();
        emit(&mut out, OutputFormat::Json, &v, || unreachable!()).unwrap();
        assert_eq!(out, b"{\n  \"a\": 1\n}\n");
        out.clear();
        emit(&mut out, OutputFormat::Yaml, &v, || unreachable!()).unwrap();
        assert_eq!(out, b"a: 1\n");
        out.clear();
        emit(&mut out, OutputFormat::Table, &v, || "A\n1\n".into()).unwrap();
        assert_eq!(out, b"A\n1\n");
    }
}
