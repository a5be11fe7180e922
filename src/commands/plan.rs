use std::io::Write;

use anyhow::{Context, Result};

use crate::cli::plan::PlanArgs;
use crate::output::emit;
use crate::plan;

pub fn run(args: &PlanArgs, out: &mut dyn Write) -> Result<()> {
    let loaded = super::load_spec_with(&args.file, args.force)?;
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
    emit(out, args.output, &plan, || plan::render_table(&plan))
}
