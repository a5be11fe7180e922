//! Getting a file into the cache: from the cache itself, a local path, or HTTP(S)
//! with progress, resume and sha256 verification.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sha2::Sha256;

use super::cache::Cache;
use super::parse::check_sha256;

/// How long to wait for a mirror to accept a connection / send the next bytes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Attempts per download when the connection drops mid-transfer (each resumes).
const ATTEMPTS: u32 = 4;

/// Largest artifact shiftlab downloads (installer and client tarballs are a few
/// hundred MB, CoreOS images and ISOs one to two GB): a mirror that sends more is
/// refused rather than allowed to fill the disk.
pub const MAX_DOWNLOAD_BYTES: u64 = 8 << 30;
/// Largest metadata file (`release.txt`, `sha256sum.txt`, a signature).
pub const MAX_TEXT_BYTES: u64 = 1 << 20;

/// A mirror's answer larger than the cap for its kind.
#[derive(Debug, thiserror::Error)]
#[error("{url} is larger than the {limit} bytes shiftlab accepts for it ({what}); refusing it")]
pub struct TooLarge {
    pub url: String,
    pub limit: u64,
    pub what: String,
}

/// A downloaded or copied file whose digest is not the expected one.
#[derive(Debug, thiserror::Error)]
#[error(
    "sha256 mismatch for {source_name}: expected {expected}, got {actual} ({size} bytes); \
     the file was discarded and nothing was cached"
)]
pub struct DigestMismatch {
    pub source_name: String,
    pub expected: String,
    pub actual: String,
    pub size: u64,
}

/// Progress bars and user-facing notes (e.g. "offline: using cached …").
pub struct Progress {
    draw: bool,
    echo: bool,
    notes: Mutex<Vec<String>>,
}

impl Progress {
    /// Bars on stderr when it is a terminal; notes printed to stderr.
    pub fn stderr() -> Progress {
        Progress {
            draw: true,
            echo: true,
            notes: Mutex::new(Vec::new()),
        }
    }

    /// No bars and nothing printed; notes are only recorded (tests, `--quiet`).
    pub fn quiet() -> Progress {
        Progress {
            draw: false,
            echo: false,
            notes: Mutex::new(Vec::new()),
        }
    }

    /// Tell the user something (also recorded, see [`Progress::notes`]).
    pub fn note(&self, msg: impl Into<String>) {
        let msg = msg.into();
        if self.echo {
            eprintln!("{msg}");
        }
        tracing::debug!("{msg}");
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(msg);
    }

    /// Every note so far.
    pub fn notes(&self) -> Vec<String> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn bar(&self, len: Option<u64>, label: &str) -> ProgressBar {
        if !self.draw {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr());
        let template = if len.is_some() {
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
        } else {
            "{msg} {bytes} {bytes_per_sec}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(label.to_string());
        bar
    }
}

/// Where an artifact comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    Http(String),
    Path(PathBuf),
}

pub(crate) fn origin(src: &str) -> Origin {
    if src.starts_with("http://") || src.starts_with("https://") {
        Origin::Http(src.to_string())
    } else if let Some(p) = src.strip_prefix("file://") {
        Origin::Path(PathBuf::from(p))
    } else {
        Origin::Path(PathBuf::from(src))
    }
}

/// The last path segment, for progress labels.
fn short_name(src: &str) -> &str {
    src.trim_end_matches('/').rsplit('/').next().unwrap_or(src)
}

pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .timeout_per_read(Some(READ_TIMEOUT))
        .max_redirects(5)
        .http_status_as_error(false)
        .proxy(None)
        .user_agent(concat!("shiftlab/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

type Response = ureq::http::Response<ureq::Body>;

/// Why a request got no usable answer: the mirror answered 4xx/5xx (its
/// code and reason), or it could not be reached or read.
enum Fail {
    Status(u16, &'static str),
    Transport(ureq::Error),
}

/// Sends `req`, an answer of 400 or more being a [`Fail::Status`].
fn call(req: ureq::RequestBuilder<ureq::typestate::WithoutBody>) -> Result<Response, Fail> {
    let resp = req.call().map_err(Fail::Transport)?;
    let status = resp.status();
    if status.as_u16() >= 400 {
        return Err(Fail::Status(
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
        ));
    }
    Ok(resp)
}

/// The sha256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    crate::files::hash_file::<Sha256>(path)
}

/// Make `src` (an `http(s)://` URL, a `file://` URL or a local path) available in the
/// cache as the blob `sha256`, and return the blob's path.
///
/// A cached blob is returned without touching the network. Otherwise the file is
/// copied or downloaded to a temporary file in the cache, its digest checked, and
/// only then renamed into place: a bad file never lands in the cache. Downloads
/// resume from `tmp/<sha256>.partial` with a `Range` request (after a dropped
/// connection within this call, or left by an earlier run).
pub fn fetch(src: &str, sha256: &str, cache: &Cache, progress: &Progress) -> Result<PathBuf> {
    fetch_limited(src, sha256, cache, progress, MAX_DOWNLOAD_BYTES)
}

/// [`fetch`] refusing more than `limit` bytes.
pub fn fetch_limited(
    src: &str,
    sha256: &str,
    cache: &Cache,
    progress: &Progress,
    limit: u64,
) -> Result<PathBuf> {
    let sha256 = check_sha256(sha256).with_context(|| format!("expected digest for {src}"))?;
    if let Some(p) = cache.blob(&sha256) {
        return Ok(p);
    }
    let _lock = cache.lock(&sha256)?;
    if let Some(p) = cache.blob(&sha256) {
        return Ok(p);
    }
    match origin(src) {
        Origin::Path(p) => copy_in(&p, src, &sha256, cache, progress),
        Origin::Http(url) => download(&url, &sha256, cache, progress, limit),
    }
}

fn land(tmp: &Path, sha256: &str, cache: &Cache) -> Result<PathBuf> {
    let dest = cache.blob_path(sha256);
    crate::files::rename_durably(tmp, &dest)
        .with_context(|| format!("moving {} into the cache", tmp.display()))?;
    if let Ok(dir) = File::open(dest.parent().unwrap_or(Path::new("."))) {
        let _ = dir.sync_all();
    }
    Ok(dest)
}

fn verify(path: &Path, src: &str, sha256: &str) -> Result<()> {
    let actual = sha256_file(path)?;
    if actual != sha256 {
        let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let _ = fs::remove_file(path);
        return Err(DigestMismatch {
            source_name: src.to_string(),
            expected: sha256.to_string(),
            actual,
            size,
        }
        .into());
    }
    Ok(())
}

fn copy_in(
    path: &Path,
    src: &str,
    sha256: &str,
    cache: &Cache,
    progress: &Progress,
) -> Result<PathBuf> {
    let mut from = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = from.metadata().ok().map(|m| m.len());
    let (to, tmp) = crate::files::create_temp(&cache.tmp_dir(), &format!("{sha256}.copy"), 0o644)?;
    let result = (|| -> Result<PathBuf> {
        let mut to = to;
        let bar = progress.bar(len, short_name(src));
        io::copy(&mut bar.wrap_read(&mut from), &mut to)
            .with_context(|| format!("copying {} into the cache", path.display()))?;
        to.sync_all()?;
        bar.finish_and_clear();
        verify(&tmp, src, sha256)?;
        land(&tmp, sha256, cache)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

enum Failure {
    /// The transfer stopped part way; what was written is kept for resuming.
    Interrupted(String),
    Fatal(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Fatal(e)
    }
}

fn download(
    url: &str,
    sha256: &str,
    cache: &Cache,
    progress: &Progress,
    limit: u64,
) -> Result<PathBuf> {
    let partial = cache.partial_path(sha256);
    let mut stale = partial.exists();
    if stale {
        progress.note(format!("resuming the interrupted download of {url}"));
    }
    let mut attempt = 0;
    loop {
        attempt += 1;
        match download_attempt(url, &partial, progress, limit) {
            Ok(()) => {}
            Err(Failure::Fatal(e)) => return Err(e),
            Err(Failure::Interrupted(why)) if attempt < ATTEMPTS => {
                progress.note(format!("download of {url} interrupted ({why}); resuming"));
                std::thread::sleep(Duration::from_millis(200 * u64::from(attempt)));
                continue;
            }
            Err(Failure::Interrupted(why)) => {
                let have = fs::metadata(&partial).map(|m| m.len()).unwrap_or(0);
                bail!(
                    "download of {url} failed: {why}; {have} bytes are kept in {} and the next run resumes from there",
                    partial.display()
                );
            }
        }
        match verify(&partial, url, sha256) {
            Ok(()) => return land(&partial, sha256, cache),
            // A partial file left by an earlier run may not be a prefix of this file
            // (a mirror re-published it): start over once before giving up.
            Err(e) if stale && e.is::<DigestMismatch>() => {
                progress.note(format!(
                    "the resumed download of {url} did not verify; downloading it again from the start"
                ));
                stale = false;
                attempt = 0;
            }
            Err(e) => return Err(e),
        }
    }
}

fn download_attempt(
    url: &str,
    partial: &Path,
    progress: &Progress,
    limit: u64,
) -> Result<(), Failure> {
    let offset = fs::metadata(partial).map(|m| m.len()).unwrap_or(0);
    let mut req = agent().get(url);
    if offset > 0 {
        req = req.header("Range", &format!("bytes={offset}-"));
    }
    let resp = match call(req) {
        Ok(r) => r,
        Err(Fail::Status(416, _)) if offset > 0 => {
            let _ = fs::remove_file(partial);
            return Err(Failure::Interrupted(
                "the mirror refused to resume; starting over".into(),
            ));
        }
        Err(Fail::Status(code, reason)) => {
            return Err(Failure::Fatal(anyhow!("GET {url}: HTTP {code} {reason}")))
        }
        Err(Fail::Transport(t)) if offset > 0 => {
            return Err(Failure::Interrupted(format!(
                "cannot reach the mirror: {t}"
            )))
        }
        Err(Fail::Transport(t)) => {
            return Err(Failure::Fatal(anyhow!("cannot download {url}: {t}")))
        }
    };
    let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok());
    let resumed = resp.status() == 206 && offset > 0 && {
        let want = format!("bytes {offset}-");
        header("Content-Range").is_some_and(|r| r.trim().starts_with(&want))
    };
    if offset > 0 && !resumed {
        progress.note(format!(
            "{url}: the mirror does not support resuming; downloading from the start"
        ));
    }
    let start = if resumed { offset } else { 0 };
    let body_len = header("Content-Length").and_then(|l| l.trim().parse::<u64>().ok());
    let total = body_len.map(|l| l + start);
    let too_large = |what: String| {
        let _ = fs::remove_file(partial);
        Failure::Fatal(anyhow::Error::new(TooLarge {
            url: url.to_string(),
            limit,
            what,
        }))
    };
    if let Some(t) = total.filter(|t| *t > limit) {
        return Err(too_large(format!("it announces {t} bytes")));
    }
    let mut file = if resumed {
        OpenOptions::new().append(true).open(partial)
    } else {
        File::create(partial)
    }
    .with_context(|| format!("opening {}", partial.display()))?;

    let bar = progress.bar(total, short_name(url));
    bar.set_position(start);
    let mut reader = resp.into_body().into_reader();
    let mut buf = vec![0u8; 1 << 18];
    let mut got: u64 = 0;
    let outcome = loop {
        match reader.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                if start + got + n as u64 > limit {
                    bar.finish_and_clear();
                    return Err(too_large(format!("more than {limit} bytes arrived")));
                }
                file.write_all(&buf[..n])
                    .with_context(|| format!("writing {}", partial.display()))?;
                got += n as u64;
                bar.inc(n as u64);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(format!("{e} after {} bytes", start + got)),
        }
    };
    file.sync_all()
        .with_context(|| format!("syncing {}", partial.display()))?;
    bar.finish_and_clear();
    outcome.map_err(Failure::Interrupted)?;
    if let Some(len) = body_len {
        if got < len {
            return Err(Failure::Interrupted(format!(
                "connection closed after {} of {} bytes",
                start + got,
                start + len
            )));
        }
    }
    Ok(())
}

/// A response body of at most `limit` bytes.
fn read_bounded(resp: Response, url: &str, limit: u64) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    resp.into_body()
        .into_reader()
        .take(limit + 1)
        .read_to_end(&mut out)
        .with_context(|| format!("reading {url}"))?;
    if out.len() as u64 > limit {
        return Err(TooLarge {
            url: url.to_string(),
            limit,
            what: "a metadata file".into(),
        }
        .into());
    }
    Ok(out)
}

/// A small file that may be absent (a signature beside `sha256sum.txt`): its
/// bytes, or `None` when the mirror has no such file. Never cached: it is checked
/// against the text it signs every time.
pub fn fetch_optional(src: &str) -> Result<Option<Vec<u8>>> {
    match origin(src) {
        Origin::Path(p) => match fs::metadata(&p) {
            Ok(m) if m.len() > MAX_TEXT_BYTES => Err(TooLarge {
                url: p.display().to_string(),
                limit: MAX_TEXT_BYTES,
                what: "a metadata file".into(),
            }
            .into()),
            Ok(_) => Ok(Some(
                fs::read(&p).with_context(|| format!("reading {}", p.display()))?,
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
        },
        Origin::Http(url) => match call(agent().get(&url)) {
            Ok(resp) => Ok(Some(read_bounded(resp, &url, MAX_TEXT_BYTES)?)),
            Err(Fail::Status(404, _)) => Ok(None),
            Err(Fail::Status(code, reason)) => bail!("GET {url}: HTTP {code} {reason}"),
            Err(Fail::Transport(t)) => bail!("cannot reach {url}: {t}"),
        },
    }
}

/// Whether a metadata file may change behind the same URL (channel directories do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// The content under this URL never changes (an exact version): a cached copy is
    /// used without asking the mirror.
    Immutable,
    /// Ask the mirror; fall back to the cached copy only when it cannot be reached.
    Mutable,
}

/// Read a small text file (`release.txt`, `sha256sum.txt`) from a URL or path.
/// Copies fetched over HTTP are kept in the cache, so with a warm cache this works
/// offline and says so.
pub fn fetch_text(
    src: &str,
    freshness: Freshness,
    cache: &Cache,
    progress: &Progress,
) -> Result<String> {
    let url = match origin(src) {
        Origin::Path(p) => {
            return fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
        }
        Origin::Http(url) => url,
    };
    let meta = cache.meta_path(&url);
    let cached = || fs::read_to_string(&meta).ok();
    if freshness == Freshness::Immutable {
        if let Some(text) = cached() {
            tracing::debug!(%url, "using the cached copy");
            return Ok(text);
        }
    }
    match call(agent().get(&url)) {
        Ok(resp) => {
            let text = read_bounded(resp, &url, MAX_TEXT_BYTES)?;
            let text = String::from_utf8(text).with_context(|| format!("{url} is not text"))?;
            crate::files::write_atomic(&meta, text.as_bytes())?;
            Ok(text)
        }
        Err(Fail::Status(code, reason)) => bail!("GET {url}: HTTP {code} {reason}"),
        Err(Fail::Transport(t)) => match cached() {
            Some(text) => {
                progress.note(format!("offline: using cached {url} ({t})"));
                Ok(text)
            }
            None => bail!("cannot reach {url}: {t}; no cached copy (shiftlab works offline only once it has fetched this release)"),
        },
    }
}
