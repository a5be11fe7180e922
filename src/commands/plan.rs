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
    let plan = plan::derive(&loaded.spec);
    emit(out, args.output, &plan, || plan::render_table(&plan))
}
