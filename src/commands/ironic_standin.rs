use std::io::Read as _;

use anyhow::{Context, Result};

use crate::rehearse::ironic;

/// `shiftlab ironic-standin`: the input on stdin; a failure is the protocol's
/// `level=error` line and exit 1, as the installer reads it.
pub fn run() -> Result<()> {
    let outcome = (|| -> Result<()> {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the input")?;
        let input: ironic::Input = serde_json::from_str(&text).context("the input")?;
        ironic::run(&input)
    })();
    if let Err(e) = outcome {
        eprintln!("{}", ironic::log_line("error", &format!("{e:#}")));
        std::process::exit(1);
    }
    Ok(())
}
