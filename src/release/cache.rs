//! The download cache: blobs by sha256, small metadata by URL, extracted tools.
//!
//! Layout under the root:
//! - `blobs/sha256/<hex>`: verified files, named by their digest. A blob only ever
//!   appears by `rename` after its digest matched, so a blob is trusted by name.
//! - `tmp/`: `<hex>.partial` downloads (kept across runs so they can resume),
//!   `<hex>.lock` (one writer per digest), and temporary files.
//! - `meta/<sha256 of the URL>`: the last copy of `release.txt`/`sha256sum.txt`
//!   fetched from that URL, for working offline.
//! - `bin/<tarball hex>/<name>`: binaries extracted from a verified tarball.
//! - `openshift-install/`: the agent installer's own cache home (its
//!   `XDG_CACHE_HOME`: `agent/image_cache` links to verified ISOs, and what it
//!   extracts with `oc`).

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// Where shiftlab keeps downloads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    root: PathBuf,
}

/// The environment variable that overrides the cache directory.
pub const CACHE_ENV: &str = "SHIFTLAB_CACHE";

/// The cache root: `$SHIFTLAB_CACHE`, else `/var/cache/shiftlab` for root, else
/// `$XDG_CACHE_HOME/shiftlab`, else `~/.cache/shiftlab`.
pub fn default_cache_root(
    env: impl Fn(&str) -> Option<OsString>,
    is_root: bool,
) -> Result<PathBuf> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = set(CACHE_ENV) {
        return Ok(p);
    }
    if is_root {
        return Ok(PathBuf::from("/var/cache/shiftlab"));
    }
    if let Some(p) = set("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return Ok(p.join("shiftlab"));
    }
    if let Some(home) = set("HOME") {
        return Ok(home.join(".cache/shiftlab"));
    }
    bail!("no cache directory: set {CACHE_ENV} (or HOME / XDG_CACHE_HOME)")
}

impl Cache {
    /// A cache at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Cache {
        Cache { root: root.into() }
    }

    /// The cache for this user, from the environment (see [`default_cache_root`]).
    pub fn from_env() -> Result<Cache> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let is_root = unsafe { libc::geteuid() } == 0;
        Ok(Cache::new(default_cache_root(
            |k| std::env::var_os(k),
            is_root,
        )?))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The cache home shiftlab gives the agent installer (its `XDG_CACHE_HOME`).
    pub fn installer_home(&self) -> PathBuf {
        self.root.join("openshift-install")
    }

    /// Where the blob with this digest lives (whether or not it is there).
    pub fn blob_path(&self, sha256: &str) -> PathBuf {
        self.root.join("blobs/sha256").join(sha256)
    }

    /// The verified blob with this digest, if cached.
    pub fn blob(&self, sha256: &str) -> Option<PathBuf> {
        let p = self.blob_path(sha256);
        p.is_file().then_some(p)
    }

    /// The directory for in-progress files.
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// The resumable partial download of the blob with this digest.
    pub fn partial_path(&self, sha256: &str) -> PathBuf {
        self.tmp_dir().join(format!("{sha256}.partial"))
    }

    /// Where the last copy of a metadata file fetched from `url` is kept.
    pub fn meta_path(&self, url: &str) -> PathBuf {
        self.root
            .join("meta")
            .join(hex::encode(Sha256::digest(url.as_bytes())))
    }

    /// Where binaries extracted from the tarball with this digest go.
    pub fn bin_dir(&self, tarball_sha256: &str) -> PathBuf {
        self.root.join("bin").join(tarball_sha256)
    }

    /// Verified blobs currently in the cache (digests).
    pub fn blobs(&self) -> Result<Vec<String>> {
        let dir = self.root.join("blobs/sha256");
        let mut out = Vec::new();
        match fs::read_dir(&dir) {
            Ok(rd) => {
                for e in rd {
                    out.push(e?.file_name().to_string_lossy().into_owned());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
        }
        out.sort();
        Ok(out)
    }

    pub(crate) fn ensure_dirs(&self) -> Result<()> {
        for d in [self.root.join("blobs/sha256"), self.tmp_dir()] {
            fs::create_dir_all(&d)
                .with_context(|| format!("creating cache directory {}", d.display()))?;
        }
        Ok(())
    }

    /// Hold an exclusive lock for writing the blob with this digest (released on drop),
    /// so two shiftlab runs never write the same partial file.
    pub(crate) fn lock(&self, sha256: &str) -> Result<crate::files::FileLock> {
        self.ensure_dirs()?;
        crate::files::lock_blocking(&self.tmp_dir().join(format!("{sha256}.lock")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn cache_root_order() {
        let all = [
            ("SHIFTLAB_CACHE", "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(
            default_cache_root(env(&all), false).unwrap(),
            PathBuf::from("/c")
        );
        assert_eq!(
            default_cache_root(env(&all), true).unwrap(),
            PathBuf::from("/c")
        );
        assert_eq!(
            default_cache_root(env(&all[1..]), true).unwrap(),
            PathBuf::from("/var/cache/shiftlab")
        );
        assert_eq!(
            default_cache_root(env(&all[1..]), false).unwrap(),
            PathBuf::from("/x/shiftlab")
        );
        assert_eq!(
            default_cache_root(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")]), false).unwrap(),
            PathBuf::from("/h/.cache/shiftlab")
        );
        assert!(default_cache_root(env(&[]), false).is_err());
    }

    #[test]
    fn layout() {
        let c = Cache::new("/r");
        let d = "a".repeat(64);
        assert_eq!(
            c.blob_path(&d),
            PathBuf::from(format!("/r/blobs/sha256/{d}"))
        );
        assert_eq!(
            c.partial_path(&d),
            PathBuf::from(format!("/r/tmp/{d}.partial"))
        );
        assert_ne!(c.meta_path("http://a/x"), c.meta_path("http://b/x"));
        assert!(c.meta_path("http://a/x").starts_with("/r/meta"));
    }
}
