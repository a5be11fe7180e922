//! Taking one binary out of a release tarball.

use std::fs;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Extract the top-level file `name` of the `.tar.gz` `tarball` into `dest_dir` as an
/// executable (0755), atomically; returns its path.
pub fn extract_binary(tarball: &Path, name: &str, dest_dir: &Path) -> Result<PathBuf> {
    let f = fs::File::open(tarball).with_context(|| format!("opening {}", tarball.display()))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(BufReader::new(f)));
    let entries = archive
        .entries()
        .with_context(|| format!("reading {}", tarball.display()))?;
    for entry in entries {
        let mut entry = entry.with_context(|| format!("reading {}", tarball.display()))?;
        let path = entry.path()?.into_owned();
        let path = path.strip_prefix("./").unwrap_or(&path);
        if path != Path::new(name) || !entry.header().entry_type().is_file() {
            continue;
        }
        let dest = dest_dir.join(name);
        crate::files::write_atomic_with(&dest, 0o755, |out| {
            io::copy(&mut entry, out)
                .with_context(|| format!("extracting {name} from {}", tarball.display()))?;
            Ok(())
        })?;
        return Ok(dest);
    }
    bail!("{} has no file `{name}`", tarball.display())
}
