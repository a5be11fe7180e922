use std::io::Write;

use anyhow::{Context, Result};

use crate::cli::plan::PlanArgs;
use crate::cli::OutputFormat;
use crate::plan;

pub fn run(args: &PlanArgs, out: &mut dyn Write) -> Result<()> {
    let loaded = super::load_spec(&args.file)?;
    let text = if args.resolved {
        serde_json::to_string_pretty(&loaded.spec)? + "\n"
    } else {
        let plan = plan::derive(&loaded.spec);
        match args.output {
            OutputFormat::Table => plan::render_table(&plan),
            OutputFormat::Json => serde_json::to_string_pretty(&plan)? + "\n",
            OutputFormat::Yaml => serde_yaml::to_string(&plan)?,
        }
    };
    out.write_all(text.as_bytes()).context("writing the plan")?;
    Ok(())
}
