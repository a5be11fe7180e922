use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory for the pages (shiftlab.1, shiftlab-plan.1, …)
    #[arg(long, value_name = "DIR", default_value = "docs/man")]
    pub out: PathBuf,
}

pub fn completion(args: &CompletionArgs, out: &mut dyn std::io::Write) {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "shiftlab", out);
}

/// Every man page as (file name, roff text), generated from the clap definitions.
pub fn man_pages() -> Result<Vec<(String, Vec<u8>)>> {
    let mut pages = Vec::new();
    let cmd = Cli::command();
    collect(&cmd, "shiftlab", &mut pages)?;
    Ok(pages)
}

fn collect(cmd: &clap::Command, name: &str, pages: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    let cmd = cmd.clone().name(name.to_string());
    let mut buf = Vec::new();
    // clap_mangen would put the top level's after-help under "EXTRA": its two
    // sections get their own headings instead, before VERSION.
    let sections = cmd.get_after_long_help().is_some();
    clap_mangen::Man::new(cmd.clone().after_long_help(None::<&str>))
        .render(&mut buf)
        .context("rendering man page")?;
    if sections {
        buf = with_sections(buf, &crate::exit_status::man_sections());
    }
    pages.push((format!("{name}.1"), buf));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, &format!("{name}-{}", sub.get_name()), pages)?;
    }
    Ok(())
}

/// `page` with `sections` (roff) inserted before its VERSION section, else at its end.
fn with_sections(page: Vec<u8>, sections: &str) -> Vec<u8> {
    let page = String::from_utf8_lossy(&page);
    let at = page.find(".SH VERSION\n").unwrap_or(page.len());
    format!("{}{sections}{}", &page[..at], &page[at..]).into_bytes()
}

pub fn write_man_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (name, text) in man_pages()? {
        let path = dir.join(name);
        crate::files::write_atomic(&path, &text)?;
        written.push(path);
    }
    Ok(written)
}
