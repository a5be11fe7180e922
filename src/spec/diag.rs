//! Problems found in a cluster file, collected so that all of them are reported at once.

use std::fmt;

/// One problem with one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The field's path as the user wrote it, e.g. `network.cidr` or `ctlplane.memory`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

#[derive(Debug, Default, Clone)]
pub struct Diagnostics {
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// The command's `--force`: what [`Diagnostics::forcible`] reports is a warning.
    pub force: bool,
}

impl Diagnostics {
    pub fn error(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(Diagnostic {
            field: field.into(),
            message: message.into(),
        });
    }

    pub fn warn(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(Diagnostic {
            field: field.into(),
            message: message.into(),
        });
    }

    /// A refusal `--force` overrides: an error that says so, or with `--force` a
    /// warning.
    pub fn forcible(&mut self, field: impl Into<String>, message: impl Into<String>) {
        let message = message.into();
        if self.force {
            self.warn(field, format!("{message} (going on: --force)"));
        } else {
            self.error(field, format!("{message}; --force goes on anyway"));
        }
    }

    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }
}

/// The cluster file cannot be used. Callers branch on it: the CLI exits with 2.
#[derive(Debug, thiserror::Error)]
pub struct InvalidSpec {
    pub file: String,
    pub errors: Vec<Diagnostic>,
}

impl fmt::Display for InvalidSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "{} has {} error{}:",
            self.file,
            n,
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

/// The closest known name to `got`, if it is close enough to be a likely typo.
pub fn suggest<'a>(got: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(got, k), k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let known = ["ctlplanes", "workers", "network"];
        assert_eq!(suggest("ctlplane", known), Some("ctlplanes"));
        assert_eq!(suggest("wrokers", known), Some("workers"));
        assert_eq!(suggest("zzz", known), None);
    }
}
