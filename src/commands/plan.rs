use std::io::Write;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::cli::plan::PlanArgs;
use crate::output::emit;
use crate::plan;

pub fn run(args: &PlanArgs, out: &mut dyn Write) -> Result<()> {
    let loaded = super::load_spec_with(&args.file, args.force, &args.params)?;
    if args.resolved {
        let text = serde_json::to_string_pretty(&loaded.spec)? + "\n";
        return out.write_all(text.as_bytes()).context("writing the plan");
    }
    // A local installer tells its CoreOS stream now: a CPU without the level
    // it needs is refused before anything runs (src/install/cpu.rs).
    // One it cannot run is create's to refuse (the release target).
    if let Some(installer) = &loaded.spec.openshift_install {
        match crate::release::coreos_stream_json(installer)
            .and_then(|json| crate::release::cpu_level::stream_level(&json))
        {
            Ok(level) => {
                let cpu = crate::install::cpu::node_cpu_here(&loaded.spec);
                let note = crate::install::cpu::check(&level, &cpu)?;
                eprintln!("note: {note}");
            }
            Err(e) => eprintln!("warning: the CPU level the stream needs was not checked: {e:#}"),
        }
    }
    let plan = plan::derive(&loaded.spec);
    if args.params.params.is_empty() {
        return emit(out, args.output, &plan, || plan::render_table(&plan));
    }
    // What -P changed, as typed, a secret among them (bmc.password=…) redacted.
    let redactor = crate::redact::Redactor::default();
    let overrides: Vec<String> = args
        .params
        .params
        .iter()
        .map(|p| redactor.redact(p))
        .collect();
    let shown = Shown {
        plan: &plan,
        overrides: &overrides,
    };
    emit(out, args.output, &shown, || {
        format!(
            "overrides: {}\n{}",
            overrides.join(", "),
            plan::render_table(&plan)
        )
    })
}

/// The plan with the `-P` overrides that shaped it.
#[derive(Serialize)]
struct Shown<'a> {
    #[serde(flatten)]
    plan: &'a plan::Plan,
    overrides: &'a [String],
}
