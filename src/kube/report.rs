//! How approval reports print: a table, one line per event during a watch, and
//! the watch's outcome. (`-o json|yaml` print the reports themselves.)

use std::io::Write;

use anyhow::Result;

use super::approve::{Entry, Report, WatchReport};
use crate::plan::render_table_rows;

fn dash(s: &Option<impl ToString>) -> String {
    s.as_ref()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "-".into())
}

fn rows(report: &Report) -> Vec<Vec<String>> {
    let row = |decision: &str, e: &Entry| {
        vec![
            e.csr.clone(),
            decision.to_string(),
            dash(&e.node),
            dash(&e.kind),
            e.reason.clone(),
        ]
    };
    let mut rows: Vec<Vec<String>> = report.approved.iter().map(|e| row("approved", e)).collect();
    rows.extend(report.refused.iter().map(|e| row("refused", e)));
    rows.extend(report.skipped.iter().map(|e| row("skipped", e)));
    rows
}

const HEADERS: [&str; 5] = ["CSR", "DECISION", "NODE", "KIND", "REASON"];

/// One pass's report as a table.
pub fn render_report(report: &Report) -> String {
    if report.is_empty() {
        return "no certificate signing requests\n".into();
    }
    render_table_rows(&HEADERS, &rows(report))
}

/// During a watch: one line per approval and per refusal, as they happen.
pub fn print_events(out: &mut dyn Write, pass: &Report) -> Result<()> {
    for e in &pass.approved {
        writeln!(
            out,
            "approved {} ({} {}): {}",
            e.csr,
            dash(&e.node),
            dash(&e.kind),
            e.reason
        )?;
    }
    for e in &pass.refused {
        writeln!(out, "refused {} ({}): {}", e.csr, dash(&e.node), e.reason)?;
    }
    out.flush()?;
    Ok(())
}

/// What a watch ended with.
pub fn render_watch(report: &WatchReport) -> String {
    if report.missing.is_empty() {
        return "every awaited node has its client and serving certificates approved\n".into();
    }
    let m: Vec<String> = report
        .missing
        .iter()
        .map(|m| format!("{} {}", m.node, m.kind))
        .collect();
    format!("not seen approved: {}\n", m.join(", "))
}
