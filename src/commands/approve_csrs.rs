use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::cli::approve_csrs::ApproveCsrsArgs;
use crate::cli::OutputFormat;
use crate::kube::approve::{self, Entry, Report, Until, WatchOptions, WatchReport};
use crate::kube::csr::NodeIdentity;
use crate::plan::render_table_rows;
use crate::state::StateDir;

pub fn run(args: &ApproveCsrsArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let dir = state.cluster(&args.name);
    let plan_path = dir.join("plan.json");
    let text = std::fs::read_to_string(&plan_path).with_context(|| {
        format!(
            "reading {} (was the cluster's infrastructure created with shiftlab create infra?)",
            plan_path.display()
        )
    })?;
    let nodes = NodeIdentity::from_plan_json(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("reading {}", plan_path.display()))?;
    let kubeconfig = args
        .kubeconfig
        .clone()
        .unwrap_or_else(|| default_kubeconfig(state, &args.name));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let client = approve::client_from_kubeconfig(&kubeconfig).await?;
        if !args.watch {
            let report = approve::approve_pending_for(&client, &nodes).await?;
            return print_report(out, args.output, &report);
        }
        let opts = WatchOptions {
            until: if args.forever {
                Until::Interrupted
            } else {
                Until::AllApproved
            },
            interval: Duration::from_secs(args.interval),
            nodes: args.nodes.clone(),
            deadline: None,
        };
        let table = args.output == OutputFormat::Table;
        let mut failed = None;
        let report = approve::watch(&client, &nodes, &opts, |pass| {
            if table {
                if let Err(e) = print_events(out, pass) {
                    failed.get_or_insert(e);
                }
            }
        })
        .await?;
        if let Some(e) = failed {
            return Err(e);
        }
        print_watch(out, args.output, &report)
    })
}

/// `<state>/clusters/<name>/assets/auth/kubeconfig`, where openshift-install leaves it.
pub fn default_kubeconfig(state: &StateDir, name: &str) -> PathBuf {
    state
        .cluster(name)
        .join("assets")
        .join("auth")
        .join("kubeconfig")
}

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

pub fn render_report(report: &Report) -> String {
    if report.is_empty() {
        return "no certificate signing requests\n".into();
    }
    render_table_rows(&HEADERS, &rows(report))
}

fn print_report(out: &mut dyn Write, format: OutputFormat, report: &Report) -> Result<()> {
    crate::output::emit(out, format, report, || render_report(report))
}

/// During a watch: one line per approval and per refusal, as they happen.
fn print_events(out: &mut dyn Write, pass: &Report) -> Result<()> {
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

fn print_watch(out: &mut dyn Write, format: OutputFormat, report: &WatchReport) -> Result<()> {
    crate::output::emit(out, format, report, || {
        let mut s = String::new();
        if report.missing.is_empty() {
            s.push_str("every awaited node has its client and serving certificates approved\n");
        } else {
            let m: Vec<String> = report
                .missing
                .iter()
                .map(|m| format!("{} {}", m.node, m.kind))
                .collect();
            s.push_str(&format!("not seen approved: {}\n", m.join(", ")));
        }
        s
    })
}
