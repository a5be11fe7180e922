//! Releases and artifacts: from `distribution` + `version` to verified, cached
//! installer and client tarballs, the release image, and CoreOS images.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use shiftlab::release::{self, Cache, CoreosKind, Progress, Source};
//! use shiftlab::spec::{Distribution, Version};
//! let cache = Cache::from_env()?;
//! let progress = Progress::stderr();
//! let dist = Distribution::Ocp;
//! let rel = release::resolve(dist, &Version::Minor { minor: 18 }, &Source::default_for(dist), &cache, &progress)?;
//! let tools = rel.tools(&cache)?;
//! let qcow2 = release::coreos_image(&tools.openshift_install, CoreosKind::Qemu, &cache, &progress)?;
//! # Ok(()) }
//! ```

mod cache;
mod coreos;
pub mod cpu_level;
mod extract;
mod fetch;
mod parse;
pub mod pin;
mod signature;

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::spec::{Distribution, Version};

pub use cache::{default_cache_root, Cache, CACHE_ENV};
pub use coreos::{coreos_image, coreos_image_from_stream, coreos_stream_json};
pub use cpu_level::{CpuLevel, StreamLevel};
pub use extract::extract_binary;
pub use fetch::{
    fetch, fetch_limited, fetch_optional, fetch_text, sha256_file, DigestMismatch, Freshness,
    Progress, TooLarge, MAX_DOWNLOAD_BYTES, MAX_TEXT_BYTES,
};
pub use parse::{
    check_sha256, choose_qemu_format, parse_release_txt, parse_sha256sum, parse_stream,
    version_dir, Compression, CoreosKind, ReleaseTxt, StreamArtifact, QEMU_FORMATS, STREAM_ARCH,
};
pub use signature::verify_detached;

/// The default OCP client mirror.
pub const OCP_MIRROR: &str = "https://mirror.openshift.com";
/// The default OKD release downloads.
pub const OKD_RELEASES: &str = "https://github.com/okd-project/okd/releases/download";

/// A mirror base: an `http(s)://` URL, or a local directory laid out the same way
/// (OCP: `<base>/pub/openshift-v4/x86_64/clients/ocp/<dir>/`, OKD: `<base>/<version>/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Url(String),
    Dir(PathBuf),
}

impl Source {
    /// `http://…`/`https://…` is a URL; `file://…` or anything else a local directory.
    pub fn parse(s: &str) -> Source {
        if s.starts_with("http://") || s.starts_with("https://") {
            Source::Url(s.trim_end_matches('/').to_string())
        } else {
            Source::Dir(PathBuf::from(s.strip_prefix("file://").unwrap_or(s)))
        }
    }

    /// The public mirror of a distribution.
    pub fn default_for(dist: Distribution) -> Source {
        match dist {
            Distribution::Ocp => Source::Url(OCP_MIRROR.into()),
            Distribution::Okd => Source::Url(OKD_RELEASES.into()),
        }
    }

    /// The directory (URL or path, as a string for [`fetch`]) holding a release's files.
    pub fn release_dir(&self, dist: Distribution, dir: &str) -> String {
        let rel = match dist {
            Distribution::Ocp => format!("pub/openshift-v4/{STREAM_ARCH}/clients/ocp/{dir}"),
            Distribution::Okd => dir.to_string(),
        };
        match self {
            Source::Url(u) => format!("{}/{rel}", u.trim_end_matches('/')),
            Source::Dir(d) => d.join(rel).to_string_lossy().into_owned(),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Url(u) => f.write_str(u),
            Source::Dir(d) => write!(f, "{}", d.display()),
        }
    }
}

/// A concrete release with its verified, cached tarballs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub distribution: Distribution,
    /// The concrete version (`Version:` of `release.txt`), e.g. `4.18.7`.
    pub version: String,
    /// The release image (`Pull From:`).
    pub release_image: String,
    pub installer_tarball: PathBuf,
    pub installer_sha256: String,
    pub client_tarball: PathBuf,
    pub client_sha256: String,
}

/// The binaries of a release, extracted into the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools {
    pub openshift_install: PathBuf,
    pub oc: PathBuf,
}

impl Release {
    /// `openshift-install` and `oc`, extracted once per tarball into `bin/<digest>/`.
    pub fn tools(&self, cache: &Cache) -> Result<Tools> {
        Ok(Tools {
            openshift_install: extracted(
                cache,
                &self.installer_tarball,
                &self.installer_sha256,
                "openshift-install",
            )?,
            oc: extracted(cache, &self.client_tarball, &self.client_sha256, "oc")?,
        })
    }
}

/// A release's verified client tarball alone: what an agent install needs when
/// the cluster file names its own installer (`agent create image` runs `oc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// The concrete version (`Version:` of `release.txt`).
    pub version: String,
    pub tarball: PathBuf,
    pub sha256: String,
}

impl Client {
    /// `oc`, extracted once per tarball into `bin/<digest>/`.
    pub fn oc(&self, cache: &Cache) -> Result<PathBuf> {
        extracted(cache, &self.tarball, &self.sha256, "oc")
    }
}

/// `name` from a verified tarball, extracted once into `bin/<digest>/`.
fn extracted(cache: &Cache, tarball: &Path, sha: &str, name: &str) -> Result<PathBuf> {
    let dir = cache.bin_dir(sha);
    let p = dir.join(name);
    if p.is_file() {
        return Ok(p);
    }
    extract_binary(tarball, name, &dir)
}

fn join(dir: &str, file: &str) -> String {
    if dir.starts_with("http://") || dir.starts_with("https://") {
        format!("{dir}/{file}")
    } else {
        Path::new(dir).join(file).to_string_lossy().into_owned()
    }
}

/// The tarball names for a concrete version.
pub fn tarball_names(version: &str) -> (String, String) {
    (
        format!("openshift-install-linux-{version}.tar.gz"),
        format!("openshift-client-linux-{version}.tar.gz"),
    )
}

/// Resolve `dist` + `version` on `source` to a concrete release, and fetch (or find
/// in the cache) its verified installer and client tarballs.
pub fn resolve(
    dist: Distribution,
    version: &Version,
    source: &Source,
    cache: &Cache,
    progress: &Progress,
) -> Result<Release> {
    resolve_verified(dist, version, source, cache, progress, None)
}

/// [`resolve`], and when `release_key` is given, `sha256sum.txt` must carry a good
/// detached signature by that key (`sha256sum.txt.gpg` or `.sig` beside it) before
/// any digest in it is trusted.
pub fn resolve_verified(
    dist: Distribution,
    version: &Version,
    source: &Source,
    cache: &Cache,
    progress: &Progress,
    release_key: Option<&Path>,
) -> Result<Release> {
    let index = Index::fetch(dist, version, source, cache, progress, release_key)?;
    let (installer, client) = tarball_names(&index.release.version);
    let (installer_tarball, installer_sha256) = index.get(&installer, cache, progress)?;
    let (client_tarball, client_sha256) = index.get(&client, cache, progress)?;
    Ok(Release {
        distribution: dist,
        version: index.release.version,
        release_image: index.release.pull_from,
        installer_tarball,
        installer_sha256,
        client_tarball,
        client_sha256,
    })
}

/// The client tarball of `dist` + `version` on `source`, verified as
/// [`resolve_verified`] verifies it, without the installer's.
pub fn resolve_client(
    dist: Distribution,
    version: &Version,
    source: &Source,
    cache: &Cache,
    progress: &Progress,
    release_key: Option<&Path>,
) -> Result<Client> {
    let index = Index::fetch(dist, version, source, cache, progress, release_key)?;
    let (_, client) = tarball_names(&index.release.version);
    let (tarball, sha256) = index.get(&client, cache, progress)?;
    Ok(Client {
        version: index.release.version,
        tarball,
        sha256,
    })
}

/// A release's `release.txt` and its (checked) `sha256sum.txt`.
struct Index {
    base: String,
    sums_at: String,
    release: ReleaseTxt,
    sums: std::collections::BTreeMap<String, String>,
}

impl Index {
    fn fetch(
        dist: Distribution,
        version: &Version,
        source: &Source,
        cache: &Cache,
        progress: &Progress,
        release_key: Option<&Path>,
    ) -> Result<Index> {
        let dir = version_dir(dist, version)?;
        let base = source.release_dir(dist, &dir);
        let freshness = match version {
            Version::Exact { .. } => Freshness::Immutable,
            _ => Freshness::Mutable,
        };
        let release_txt_at = join(&base, "release.txt");
        let text = fetch_text(&release_txt_at, freshness, cache, progress)
            .with_context(|| format!("{dist} {version}: no release.txt on {source}"))?;
        let rt = parse_release_txt(&text).with_context(|| format!("parsing {release_txt_at}"))?;
        if let Version::Exact { version: want } = version {
            if &rt.version != want {
                bail!("{release_txt_at} is for version {}, not {want}", rt.version);
            }
        } else {
            progress.note(format!("{dist} {version} is {}", rt.version));
        }
        let sums_at = join(&base, "sha256sum.txt");
        let sums = fetch_text(&sums_at, freshness, cache, progress)?;
        if let Some(key) = release_key {
            let mut found = None;
            for name in signature::SIGNATURE_NAMES {
                if let Some(sig) = fetch_optional(&join(&base, name))? {
                    found = Some((name, sig));
                    break;
                }
            }
            let Some((name, sig)) = found else {
                bail!(
                    "release_key is set, but {base} publishes no signature of sha256sum.txt ({}); nothing from it is trusted",
                    signature::SIGNATURE_NAMES.join(" or ")
                );
            };
            verify_detached(key, sums.as_bytes(), &sig, &sums_at)?;
            progress.note(format!(
                "{sums_at}: good signature ({name}) by {}",
                key.display()
            ));
        }
        let sums = parse_sha256sum(&sums).with_context(|| format!("parsing {sums_at}"))?;
        Ok(Index {
            base,
            sums_at,
            release: rt,
            sums,
        })
    }

    /// A file `sha256sum.txt` lists, fetched and checked: its path and digest.
    fn get(&self, name: &str, cache: &Cache, progress: &Progress) -> Result<(PathBuf, String)> {
        let sha = self
            .sums
            .get(name)
            .with_context(|| format!("{} has no digest for {name}", self.sums_at))?
            .clone();
        let path = fetch(&join(&self.base, name), &sha, cache, progress)?;
        Ok((path, sha))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources() {
        assert_eq!(
            Source::parse("https://m.example/"),
            Source::Url("https://m.example".into())
        );
        assert_eq!(Source::parse("file:///srv/m"), Source::Dir("/srv/m".into()));
        assert_eq!(Source::parse("./m"), Source::Dir("./m".into()));
        assert_eq!(
            Source::default_for(Distribution::Ocp).release_dir(Distribution::Ocp, "stable-4.18"),
            "https://mirror.openshift.com/pub/openshift-v4/x86_64/clients/ocp/stable-4.18"
        );
        assert_eq!(
            Source::default_for(Distribution::Okd)
                .release_dir(Distribution::Okd, "4.17.0-okd-scos.0"),
            "https://github.com/okd-project/okd/releases/download/4.17.0-okd-scos.0"
        );
        assert_eq!(
            Source::Dir("/srv/m".into()).release_dir(Distribution::Ocp, "4.18.7"),
            "/srv/m/pub/openshift-v4/x86_64/clients/ocp/4.18.7"
        );
        assert_eq!(join("/a/b", "c"), "/a/b/c");
        assert_eq!(join("http://h/a", "c"), "http://h/a/c");
    }
}
