//! `shiftlab doctor`: the host looked at before a 45-minute install fails on it.
//!
//! Two halves, so that every verdict is testable without the host it is about:
//! [`facts`] reads the host once into [`HostFacts`] (plain data, serialisable: a
//! test loads a recorded host from JSON), and [`checks`] turns facts and an
//! optional plan into [`Check`]s, each with a verdict and a fix, by pure
//! functions. `create` decides by the same checks before its long work
//! ([`preflight::decide`], run by `install::preflight`), and `create infra`
//! again over libvirt's answers before it makes anything ([`preflight::check`]).

pub mod checks;
pub mod facts;
pub mod preflight;

use serde::Serialize;

pub use checks::{checks, Check};
pub use facts::HostFacts;

/// How bad a finding is. Ordered: the report's worst decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Fine.
    Ok,
    /// Worth knowing, nothing to do.
    Info,
    /// The install may fail or be slow; it can still go ahead.
    Warn,
    /// The install cannot work until this is fixed.
    Fail,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Fail => "FAIL",
        }
    }

    /// The colour of its word (a note has none).
    pub fn tone(self) -> Option<crate::color::Tone> {
        use crate::color::Tone;
        match self {
            Severity::Ok => Some(Tone::Ok),
            Severity::Info => None,
            Severity::Warn => Some(Tone::Warn),
            Severity::Fail => Some(Tone::Fail),
        }
    }
}

/// `shiftlab doctor`'s exit code for the worst finding: 0 nothing worse than a
/// note, 3 warnings, 4 a failing check (1 and 2 keep their meaning: the command
/// itself failed, bad usage).
pub fn exit_code(checks: &[Check]) -> u8 {
    match checks.iter().map(|c| c.severity).max() {
        Some(Severity::Fail) => 4,
        Some(Severity::Warn) => 3,
        _ => 0,
    }
}

/// What `doctor` prints: the checks, and what they were run for.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The cluster whose plan the capacity and name checks used, if any.
    pub cluster: Option<String>,
    pub checks: Vec<Check>,
    /// The worst severity found.
    pub worst: Severity,
}

impl Report {
    pub fn new(cluster: Option<String>, checks: Vec<Check>) -> Self {
        let worst = checks
            .iter()
            .map(|c| c.severity)
            .max()
            .unwrap_or(Severity::Ok);
        Report {
            cluster,
            checks,
            worst,
        }
    }

    /// The human form: one row per check, the fixes of the others below; the
    /// verdict words coloured when `color` ([`crate::color`]).
    pub fn table(&self, color: bool) -> String {
        let rows: Vec<Vec<String>> = self
            .checks
            .iter()
            .map(|c| {
                vec![
                    c.severity.as_str().to_string(),
                    c.id.to_string(),
                    c.verdict.clone(),
                ]
            })
            .collect();
        let plain = crate::plan::render_table_rows(&["", "CHECK", "VERDICT"], &rows);
        // Coloured after the padding, which counts the word's letters only.
        let mut s = String::with_capacity(plain.len());
        for (i, line) in plain.lines().enumerate() {
            let check = i.checked_sub(1).and_then(|i| self.checks.get(i));
            match check.and_then(|c| Some((c.severity.tone()?, c.severity.as_str()))) {
                Some((tone, word)) if line.starts_with(word) => {
                    s.push_str(&crate::color::paint(word, tone, color));
                    s.push_str(&line[word.len()..]);
                }
                _ => s.push_str(line),
            }
            s.push('\n');
        }
        let fixes: Vec<&Check> = self
            .checks
            .iter()
            .filter(|c| c.severity >= Severity::Warn && c.fix.is_some())
            .collect();
        if !fixes.is_empty() {
            s.push_str("\nto fix:\n");
            for c in fixes {
                s.push_str(&format!("  {}: {}\n", c.id, c.fix.as_deref().unwrap_or("")));
            }
        }
        s
    }
}
