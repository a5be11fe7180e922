//! The HTTP artifact server: a cluster's `http/` directory (Ignition files,
//! ISOs) served read-only on the cluster's address, with single byte-range
//! requests, and sha512 digests published beside every file:
//! `GET /<file>.sha512` answers `sha512-<hex>` (what `coreos-installer
//! --ignition-hash` takes) and `GET /SHA512SUMS` lists every file in
//! `sha512sum -c` format. No directory listing, no hidden files, no path
//! leaving the directory (symbolic links included).
//!
//! Artifacts that carry secrets (an Ignition config, an ISO with one embedded)
//! live in a second, private directory, served only under `/<token>/` where the
//! token is the cluster's unguessable `http-token`: never listed, not in
//! `SHA512SUMS`, a wrong or missing token is a plain 404, and the token never
//! reaches a log line. Publishing into those directories, and which names are
//! served at all, is the client's side (`crate::serve::http`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt as _, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderValue, ACCEPT_RANGES, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use sha2::Sha512;
use tokio::io::{AsyncRead, AsyncSeekExt as _, ReadBuf};

use crate::serve::http::{list_files, safe_relative, MIN_TOKEN_LEN};
use crate::state::ClusterDir;

/// Name of the digest list at the root.
pub const SUMS: &str = "SHA512SUMS";
const CHUNK: usize = 64 * 1024;

type HttpBody = BoxBody<Bytes, std::io::Error>;

/// A request path mapped into the served directory, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    File(PathBuf),
    /// `<file>.sha512` for a file that exists without that suffix.
    Digest(PathBuf),
    Sums,
    NotFound,
}

/// What a listener serves: the public directory, and the private one behind the
/// token read from `token_file` (absent file: no private route).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    pub public: PathBuf,
    pub private: Option<Private>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Private {
    pub dir: PathBuf,
    pub token_file: PathBuf,
}

impl From<PathBuf> for Roots {
    fn from(public: PathBuf) -> Self {
        Roots {
            public,
            private: None,
        }
    }
}

impl Roots {
    /// The cluster's artifact directories: `http/` for anyone, `http-private/`
    /// behind the cluster's token.
    pub fn of(cluster: &ClusterDir) -> Roots {
        Roots {
            public: cluster.http_public(),
            private: Some(Private {
                dir: cluster.http_private(),
                token_file: cluster.http_token(),
            }),
        }
    }
}

/// Equal without an early exit, so the time taken says nothing about the token.
pub(crate) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Map a request path onto the public root or, behind the token, the private one.
pub fn resolve_in(roots: &Roots, path: &str) -> Target {
    if let Some(private) = &roots.private {
        let rest = path.strip_prefix('/').unwrap_or_default();
        if let Some((first, tail)) = rest.split_once('/') {
            let token = std::fs::read_to_string(&private.token_file).unwrap_or_default();
            let token = token.trim();
            if token.len() >= MIN_TOKEN_LEN && same_secret(first.as_bytes(), token.as_bytes()) {
                let tail = format!("/{tail}");
                // The private side has no digest list: nothing of it is listed.
                if tail == format!("/{SUMS}") {
                    return Target::NotFound;
                }
                return resolve(&private.dir, &tail);
            }
        }
    }
    resolve(&roots.public, path)
}

/// A request path fit for a log line: a leading segment (possibly the token) is
/// not shown.
pub fn loggable(path: &str) -> String {
    match path.strip_prefix('/').and_then(|r| r.split_once('/')) {
        Some((_, tail)) => format!("/…/{tail}"),
        None => path.to_string(),
    }
}

/// Map a request path onto `root`. Pure but for `stat`/`canonicalize`.
pub fn resolve(root: &Path, path: &str) -> Target {
    if path == format!("/{SUMS}") {
        return Target::Sums;
    }
    let Some(rel) = safe_relative(path) else {
        return Target::NotFound;
    };
    let Ok(root) = root.canonicalize() else {
        return Target::NotFound;
    };
    let inside = |p: &Path| -> Option<PathBuf> {
        let c = p.canonicalize().ok()?;
        (c.starts_with(&root) && c.is_file()).then_some(c)
    };
    if let Some(f) = inside(&root.join(&rel)) {
        return Target::File(f);
    }
    let name = rel.to_string_lossy();
    if let Some(base) = name.strip_suffix(".sha512") {
        if let Some(f) = inside(&root.join(base)) {
            return Target::Digest(f);
        }
    }
    Target::NotFound
}

/// A `Range` header against a file of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    Full,
    /// Inclusive byte positions.
    Part(u64, u64),
    Unsatisfiable,
}

/// Single byte ranges are honoured; several ranges, other units and malformed
/// headers get the whole file (RFC 9110 lets a server ignore `Range`).
pub fn parse_range(header: Option<&str>, len: u64) -> Range {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return Range::Full;
    };
    if spec.contains(',') {
        return Range::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Range::Full;
    };
    let num = |s: &str| s.trim().parse::<u64>().ok();
    match (a.trim().is_empty(), b.trim().is_empty()) {
        (true, true) => Range::Full,
        (true, false) => match num(b) {
            Some(0) => Range::Unsatisfiable,
            Some(_) if len == 0 => Range::Unsatisfiable,
            Some(n) => Range::Part(len - n.min(len), len - 1),
            None => Range::Full,
        },
        (false, open) => {
            let Some(start) = num(a) else {
                return Range::Full;
            };
            let end = if open { Some(u64::MAX) } else { num(b) };
            match end {
                None => Range::Full,
                Some(end) if end < start => Range::Full,
                Some(_) if start >= len => Range::Unsatisfiable,
                Some(end) => Range::Part(start, end.min(len - 1)),
            }
        }
    }
}

/// (device, inode, mtime in ns, size): a version of a file.
type FileVersion = (u64, u64, i64, i64);

/// sha512 digests by file identity, computed once per version of a file.
#[derive(Default)]
pub struct Digests {
    cache: Mutex<HashMap<PathBuf, (FileVersion, String)>>,
}

impl Digests {
    /// Hex sha512 of `path`, blocking; cached by (dev, inode, mtime, size).
    pub fn sha512(&self, path: &Path) -> Result<String> {
        let m = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
        let key = (
            m.dev(),
            m.ino(),
            m.mtime_nsec() + m.mtime() * 1_000_000_000,
            m.size() as i64,
        );
        if let Some((k, v)) = self.cache.lock().ok().and_then(|c| c.get(path).cloned()) {
            if k == key {
                return Ok(v);
            }
        }
        let hex = crate::files::hash_file::<Sha512>(path)?;
        if let Ok(mut c) = self.cache.lock() {
            c.insert(path.to_path_buf(), (key, hex.clone()));
        }
        Ok(hex)
    }
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("ign") => "application/vnd.coreos.ignition+json",
        Some("json") => "application/json",
        Some("iso") => "application/x-iso9660-image",
        Some("txt") | Some("sha512") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// A file region streamed in chunks.
struct FileBody {
    file: tokio::fs::File,
    remaining: u64,
    buf: Vec<u8>,
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        let want = (this.remaining as usize).min(CHUNK);
        let mut rb = ReadBuf::new(&mut this.buf[..want]);
        match Pin::new(&mut this.file).poll_read(cx, &mut rb) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                if n == 0 {
                    return Poll::Ready(Some(Err(std::io::ErrorKind::UnexpectedEof.into())));
                }
                this.remaining -= n as u64;
                Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(rb.filled())))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

fn full(status: StatusCode, body: impl Into<Bytes>) -> Response<HttpBody> {
    let mut r = Response::new(
        Full::new(body.into())
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Answer one request for the directories `roots`.
pub async fn respond(
    roots: &Roots,
    digests: &Arc<Digests>,
    req: &Request<Incoming>,
) -> Response<HttpBody> {
    let head = req.method() == Method::HEAD;
    if req.method() != Method::GET && !head {
        let mut r = full(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(hyper::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let (roots2, path) = (roots.clone(), req.uri().path().to_string());
    let target = tokio::task::spawn_blocking(move || resolve_in(&roots2, &path))
        .await
        .unwrap_or(Target::NotFound);
    let text = |status, body: String| {
        let mut r = full(status, if head { String::new() } else { body.clone() });
        r.headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from(body.len() as u64));
        r
    };
    match target {
        Target::NotFound => text(StatusCode::NOT_FOUND, "not found\n".into()),
        Target::Digest(f) => {
            let d = digests.clone();
            match tokio::task::spawn_blocking(move || d.sha512(&f)).await {
                Ok(Ok(hex)) => text(StatusCode::OK, format!("sha512-{hex}\n")),
                _ => text(StatusCode::INTERNAL_SERVER_ERROR, "digest failed\n".into()),
            }
        }
        Target::Sums => {
            let (d, root) = (digests.clone(), roots.public.clone());
            let sums = tokio::task::spawn_blocking(move || -> Result<String> {
                let mut out = String::new();
                for rel in list_files(&root) {
                    out += &format!("{}  {}\n", d.sha512(&root.join(&rel))?, rel.display());
                }
                Ok(out)
            })
            .await;
            match sums {
                Ok(Ok(s)) => text(StatusCode::OK, s),
                _ => text(StatusCode::INTERNAL_SERVER_ERROR, "digest failed\n".into()),
            }
        }
        Target::File(f) => match serve_file(&f, req, head).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(file = %f.display(), error = %format!("{e:#}"), "serving a file");
                text(StatusCode::INTERNAL_SERVER_ERROR, "read failed\n".into())
            }
        },
    }
}

async fn serve_file(
    path: &Path,
    req: &Request<Incoming>,
    head: bool,
) -> Result<Response<HttpBody>> {
    let mut file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("opening {}", path.display()))?;
    let len = file.metadata().await?.len();
    let range = parse_range(
        req.headers()
            .get(hyper::header::RANGE)
            .and_then(|v| v.to_str().ok()),
        len,
    );
    let (status, start, count) = match range {
        Range::Full => (StatusCode::OK, 0, len),
        Range::Part(a, b) => (StatusCode::PARTIAL_CONTENT, a, b - a + 1),
        Range::Unsatisfiable => {
            let mut r = full(StatusCode::RANGE_NOT_SATISFIABLE, "");
            r.headers_mut().insert(
                CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes */{len}"))?,
            );
            return Ok(r);
        }
    };
    if start > 0 {
        file.seek(std::io::SeekFrom::Start(start)).await?;
    }
    let body = if head {
        Full::new(Bytes::new())
            .map_err(|never: Infallible| match never {})
            .boxed()
    } else {
        FileBody {
            file,
            remaining: count,
            buf: vec![0u8; CHUNK],
        }
        .boxed()
    };
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type(path)));
    h.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(CONTENT_LENGTH, HeaderValue::from(count));
    if status == StatusCode::PARTIAL_CONTENT {
        h.insert(
            CONTENT_RANGE,
            HeaderValue::from_str(&format!("bytes {start}-{}/{len}", start + count - 1))?,
        );
    }
    Ok(r)
}

/// A running artifact listener of one cluster.
pub struct Listener {
    pub addr: SocketAddr,
    pub roots: Roots,
    listener: crate::httpd::Listener,
}

impl Listener {
    pub async fn start(addr: SocketAddr, roots: Roots, digests: Arc<Digests>) -> Result<Listener> {
        let r = roots.clone();
        let listener = crate::httpd::Listener::start(addr, None, move |req: Request<Incoming>| {
            let (roots, digests) = (r.clone(), digests.clone());
            async move {
                let resp = respond(&roots, &digests, &req).await;
                tracing::debug!(method = %req.method(), path = %loggable(req.uri().path()), status = resp.status().as_u16(), "http");
                resp
            }
        })
        .await?;
        let addr = listener.local_addr();
        tracing::info!(%addr, root = %roots.public.display(), "http artifacts listening");
        Ok(Listener {
            addr,
            roots,
            listener,
        })
    }

    pub async fn stop(self) {
        self.listener.stop().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range(None, 10), Range::Full);
        assert_eq!(parse_range(Some("bytes=0-3"), 10), Range::Part(0, 3));
        assert_eq!(parse_range(Some("bytes=5-"), 10), Range::Part(5, 9));
        assert_eq!(parse_range(Some("bytes=5-100"), 10), Range::Part(5, 9));
        assert_eq!(parse_range(Some("bytes=-3"), 10), Range::Part(7, 9));
        assert_eq!(parse_range(Some("bytes=-30"), 10), Range::Part(0, 9));
        assert_eq!(parse_range(Some("bytes=10-"), 10), Range::Unsatisfiable);
        assert_eq!(parse_range(Some("bytes=-0"), 10), Range::Unsatisfiable);
        assert_eq!(parse_range(Some("bytes=0-0"), 0), Range::Unsatisfiable);
        assert_eq!(parse_range(Some("bytes=0-1,4-5"), 10), Range::Full);
        assert_eq!(parse_range(Some("bytes=4-2"), 10), Range::Full);
        assert_eq!(parse_range(Some("items=0-1"), 10), Range::Full);
        assert_eq!(parse_range(Some("bytes=x-1"), 10), Range::Full);
    }

    #[test]
    fn symlinks_out_of_the_root_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("http");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        std::fs::write(root.join("worker.ign"), "{}").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("leak")).unwrap();
        std::os::unix::fs::symlink("worker.ign", root.join("alias.ign")).unwrap();
        assert_eq!(resolve(&root, "/leak"), Target::NotFound);
        assert_eq!(resolve(&root, "/sub"), Target::NotFound);
        assert!(matches!(resolve(&root, "/alias.ign"), Target::File(_)));
        assert!(matches!(
            resolve(&root, "/worker.ign.sha512"),
            Target::Digest(_)
        ));
        assert_eq!(resolve(&root, "/leak.sha512"), Target::NotFound);
        assert_eq!(resolve(&root, "/SHA512SUMS"), Target::Sums);
        assert_eq!(list_files(&root), vec![PathBuf::from("worker.ign")]);
    }
}
