//! Taking one binary out of a release tarball.

use std::fs::{self, OpenOptions};
use std::io::{self, BufReader};
use std::os::unix::fs::OpenOptionsExt;
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
        fs::create_dir_all(dest_dir).with_context(|| format!("creating {}", dest_dir.display()))?;
        let dest = dest_dir.join(name);
        let tmp = dest_dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let result = (|| -> Result<()> {
            let mut out = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o755)
                .open(&tmp)
                .with_context(|| format!("creating {}", tmp.display()))?;
            io::copy(&mut entry, &mut out)
                .with_context(|| format!("extracting {name} from {}", tarball.display()))?;
            out.sync_all()?;
            crate::files::rename_durably(&tmp, &dest)
                .with_context(|| format!("renaming into {}", dest.display()))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result?;
        return Ok(dest);
    }
    bail!("{} has no file `{name}`", tarball.display())
}
