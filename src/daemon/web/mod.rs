//! The lab's web page in `shiftlab serve` (`--web ADDR`, default
//! `127.0.0.1:8090`): an overview of every cluster and a live page per cluster,
//! plain HTML, CSS and one small script embedded in the binary, fed by a small
//! JSON API (docs/serve.md, "Web page"):
//!
//! - `GET /api/clusters` — one row per cluster ([`view::Overview`]);
//! - `GET /api/clusters/NAME` — `shiftlab status -o json`'s value with the lab's
//!   plan facts and console tails ([`view::ClusterView`]);
//! - `GET /api/clusters/NAME/events` — server-sent events: that value again each
//!   time it changes (checked every second).
//!
//! A cluster's view carries its health as its API reports it ([`health`]), read
//! in the background so that no request waits on a cluster that is down.
//!
//! Bound to loopback it answers without a token, but only to requests naming it
//! by address or `localhost` (a DNS name pointing at loopback is how a web page
//! elsewhere would reach it); loopback is every local user, so console logs are
//! shown only by a page with a token. Bound elsewhere it requires a token
//! (`--web-token-file`), given as `Authorization: Bearer`, or once as `?token=`
//! which sets an HttpOnly cookie. Every JSON body passes the one redactor
//! ([`crate::redact`], gather's too) before it is sent.

pub mod health;
pub mod view;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt as _, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use hyper::{Method, Request, Response, StatusCode};
use serde::Serialize;
use tokio::sync::mpsc;

use crate::redact::Redactor;
use crate::state::{ClusterName, StateDir};

/// The default address of the page.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8090";

/// Shortest token accepted from `--web-token-file`.
pub const MIN_TOKEN_LEN: usize = 16;

/// How often the events stream looks for a change.
pub const EVENT_INTERVAL: Duration = Duration::from_secs(1);

/// How long one gathering of a cluster's view is reused by concurrent readers.
const SNAPSHOT_TTL: Duration = Duration::from_millis(900);

/// A comment line that keeps idle event streams open through proxies.
const KEEPALIVE: Duration = Duration::from_secs(15);

const COOKIE: &str = "shiftlab_web_token";

const INDEX_HTML: &str = include_str!("../../../assets/web/index.html");
const APP_CSS: &str = include_str!("../../../assets/web/app.css");
const APP_JS: &str = include_str!("../../../assets/web/app.js");

/// Where and how the page is served.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    pub addr: SocketAddr,
    /// Required from every request when set.
    pub token: Option<String>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl Config {
    /// `--web ADDR|off` and `--web-token-file`: `None` for `off`. A non-loopback
    /// address without a token, an unreadable or short token, or a token file
    /// others can read is refused before serve starts anything.
    pub fn parse(web: &str, token_file: Option<&Path>) -> Result<Option<Config>> {
        if web == "off" {
            if token_file.is_some() {
                bail!("--web-token-file needs the web page on (--web ADDR)");
            }
            return Ok(None);
        }
        let addr: SocketAddr = web
            .parse()
            .with_context(|| format!("--web {web}: expected IP:PORT or off"))?;
        let token = token_file.map(read_token).transpose()?;
        if token.is_none() && !addr.ip().is_loopback() {
            bail!(
                "--web {addr} is not a loopback address: give a token with --web-token-file \
                 (anyone who can reach {addr} would see the lab)"
            );
        }
        Ok(Some(Config { addr, token }))
    }
}

fn read_token(path: &Path) -> Result<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        bail!(
            "{} is readable by others: chmod 600 it (it holds the web token)",
            path.display()
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let token = text.trim().to_string();
    // Safe as it is in a URL's query and in a cookie.
    let safe = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
    if token.len() < MIN_TOKEN_LEN || !token.chars().all(safe) {
        bail!(
            "{}: the web token must be at least {MIN_TOKEN_LEN} letters, digits, '-', '.', '_' or '~' \
             (openssl rand -hex 32)",
            path.display()
        );
    }
    Ok(token)
}

type WebBody = BoxBody<Bytes, Infallible>;

/// Gathered views, shared by the requests of one second.
#[derive(Default)]
struct Snapshots {
    by_key: Mutex<HashMap<String, (Instant, Arc<Snapshot>)>>,
}

/// One gathering: the scrubbed JSON, or what went wrong (scrubbed as well).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Snapshot {
    Json(String),
    NotFound(String),
    Failed(String),
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
}

fn error_json(msg: &str) -> String {
    serde_json::to_string(&ErrorBody { error: msg }).unwrap_or_default()
}

struct App {
    state: StateDir,
    token: Option<String>,
    snapshots: Snapshots,
    health: Arc<health::Cache>,
}

impl App {
    /// `None` key: the overview; else one cluster.
    async fn snapshot(self: &Arc<Self>, cluster: Option<&ClusterName>) -> Arc<Snapshot> {
        let key = cluster.map(|c| c.to_string()).unwrap_or_default();
        if let Some((at, s)) = self.snapshots.by_key.lock().unwrap().get(&key) {
            if at.elapsed() < SNAPSHOT_TTL {
                return s.clone();
            }
        }
        let state = self.state.clone();
        let name = cluster.map(|c| c.to_string());
        // Every request to a page with a token has shown it.
        let consoles = self.token.is_some();
        // The last health read, never awaited here (the API may be down).
        let panel = cluster.map(|c| {
            self.health
                .current(&self.state.cluster(c.as_ref()).assets().kubeconfig())
        });
        let gathered =
            tokio::task::spawn_blocking(move || gather(&state, name.as_deref(), consoles, panel))
                .await
                .unwrap_or_else(|e| Snapshot::Failed(format!("gathering the view: {e}")));
        let s = Arc::new(gathered);
        let mut by_key = self.snapshots.by_key.lock().unwrap();
        // Names asked for once do not pile up.
        by_key.retain(|_, (at, _)| at.elapsed() < SNAPSHOT_TTL * 10);
        by_key.insert(key, (Instant::now(), s.clone()));
        s
    }
}

/// Gather and redact, blocking; console tails only when `consoles`; a
/// cluster's health panel as given.
fn gather(
    state: &StateDir,
    cluster: Option<&str>,
    consoles: bool,
    health: Option<health::Panel>,
) -> Snapshot {
    match cluster {
        None => {
            let o = view::overview(state);
            let mut r = Redactor::default();
            for c in &o.clusters {
                r.extend(&Redactor::of_cluster(&state.cluster(&c.cluster)));
            }
            redacted_json(&o, &r, "the overview")
        }
        Some(name) => {
            let r = Redactor::of_cluster(&state.cluster(name));
            let health = health.unwrap_or(health::Panel::NoKubeconfig);
            match view::cluster(state, name, consoles.then_some(&r), health) {
                Ok(Some(v)) => redacted_json(&v, &r, "the view"),
                Ok(None) => Snapshot::NotFound(format!("no cluster named {name} in this state")),
                Err(e) => Snapshot::Failed(r.redact(&format!("{e:#}"))),
            }
        }
    }
}

/// `value` as JSON, every string and secret key through the redactor.
fn redacted_json<T: Serialize>(value: &T, r: &Redactor, what: &str) -> Snapshot {
    match serde_json::to_value(value) {
        Ok(mut v) => {
            r.redact_json(&mut v);
            Snapshot::Json(v.to_string())
        }
        Err(e) => Snapshot::Failed(format!("encoding {what}: {e}")),
    }
}

/// The running page.
pub struct Server {
    listener: crate::httpd::Listener,
}

impl Server {
    pub async fn start(state: StateDir, config: &Config) -> Result<Server> {
        let app = Arc::new(App {
            state,
            token: config.token.clone(),
            snapshots: Snapshots::default(),
            health: Arc::default(),
        });
        let listener =
            crate::httpd::Listener::start(config.addr, None, move |req: Request<Incoming>| {
                let app = app.clone();
                async move {
                    let resp = respond(&app, &req).await;
                    tracing::debug!(method = %req.method(), path = %req.uri().path(), status = resp.status().as_u16(), "web");
                    resp
                }
            })
            .await
            .context("starting the web page")?;
        tracing::info!(addr = %listener.local_addr(), token = config.token.is_some(), "web page listening");
        Ok(Server { listener })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    pub async fn stop(self) {
        self.listener.stop().await;
    }
}

fn with_headers(mut r: Response<WebBody>, content_type: &'static str) -> Response<WebBody> {
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        HeaderName::from_static("x-content-type-options"),
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        HeaderName::from_static("referrer-policy"),
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        HeaderName::from_static("content-security-policy"),
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn body(
    status: StatusCode,
    text: impl Into<Bytes>,
    content_type: &'static str,
) -> Response<WebBody> {
    let mut r = Response::new(Full::new(text.into()).boxed());
    *r.status_mut() = status;
    with_headers(r, content_type)
}

fn json(status: StatusCode, text: String) -> Response<WebBody> {
    body(status, text, "application/json")
}

fn json_error(status: StatusCode, msg: &str) -> Response<WebBody> {
    json(status, error_json(msg))
}

/// The token compared in constant time (`serve::http`'s comparison).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    super::http::same_secret(a, b)
}

/// The token a request carries: `Authorization: Bearer`, else the cookie.
fn presented_token<B>(req: &Request<B>) -> Option<String> {
    let h = req.headers();
    if let Some(t) = h
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(t.trim().to_string());
    }
    h.get_all(hyper::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

fn query_param(query: Option<&str>, key: &str) -> Option<String> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
}

/// Without a token the page answers only requests naming it by an address or
/// `localhost`: a page on another site reaching loopback through a DNS name it
/// controls (DNS rebinding) is refused.
fn host_allowed<B>(req: &Request<B>) -> bool {
    let Some(host) = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok()
}

async fn respond<B>(app: &Arc<App>, req: &Request<B>) -> Response<WebBody> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = json_error(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD");
        r.headers_mut()
            .insert(hyper::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let path = req.uri().path();
    match &app.token {
        None => {
            if !host_allowed(req) {
                return json_error(
                    StatusCode::MISDIRECTED_REQUEST,
                    "name this page by address or localhost",
                );
            }
        }
        Some(token) => {
            let ok =
                presented_token(req).is_some_and(|t| same_secret(t.as_bytes(), token.as_bytes()));
            if !ok {
                // `?token=` once on a page: set the cookie, drop it from the URL.
                if let Some(t) = query_param(req.uri().query(), "token") {
                    if !path.starts_with("/api/") && same_secret(t.as_bytes(), token.as_bytes()) {
                        let mut r = body(StatusCode::SEE_OTHER, "", "text/plain; charset=utf-8");
                        let safe_path = if path.starts_with('/') && !path.starts_with("//") {
                            path
                        } else {
                            "/"
                        };
                        if let (Ok(loc), Ok(cookie)) = (
                            HeaderValue::from_str(safe_path),
                            HeaderValue::from_str(&format!(
                                "{COOKIE}={t}; Path=/; HttpOnly; SameSite=Strict"
                            )),
                        ) {
                            r.headers_mut().insert(LOCATION, loc);
                            r.headers_mut().insert(hyper::header::SET_COOKIE, cookie);
                            return r;
                        }
                    }
                }
                let mut r = json_error(
                    StatusCode::UNAUTHORIZED,
                    "this page needs its token: open it with ?token=… or send Authorization: Bearer",
                );
                r.headers_mut().insert(
                    hyper::header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"shiftlab\""),
                );
                return r;
            }
        }
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        [""] | ["index.html"] | ["clusters", _] => {
            body(StatusCode::OK, INDEX_HTML, "text/html; charset=utf-8")
        }
        ["assets", "app.css"] => body(StatusCode::OK, APP_CSS, "text/css; charset=utf-8"),
        ["assets", "app.js"] => body(StatusCode::OK, APP_JS, "text/javascript; charset=utf-8"),
        ["api", "clusters"] => snapshot_response(&*app.snapshot(None).await),
        ["api", "clusters", name] => match ClusterName::parse(name) {
            Ok(n) => snapshot_response(&*app.snapshot(Some(&n)).await),
            Err(e) => json_error(StatusCode::NOT_FOUND, &e.to_string()),
        },
        ["api", "clusters", name, "events"] => match ClusterName::parse(name) {
            Ok(n) => events(app.clone(), n),
            Err(e) => json_error(StatusCode::NOT_FOUND, &e.to_string()),
        },
        _ => json_error(StatusCode::NOT_FOUND, "no such page"),
    }
}

fn snapshot_response(s: &Snapshot) -> Response<WebBody> {
    match s {
        Snapshot::Json(j) => json(StatusCode::OK, j.clone()),
        Snapshot::NotFound(m) => json_error(StatusCode::NOT_FOUND, m),
        Snapshot::Failed(m) => json_error(StatusCode::SERVICE_UNAVAILABLE, m),
    }
}

/// One server-sent event.
fn event(name: &str, data: &str) -> Bytes {
    let mut s = format!("event: {name}\n");
    for line in data.lines() {
        s.push_str("data: ");
        s.push_str(line);
        s.push('\n');
    }
    s.push('\n');
    Bytes::from(s)
}

/// An event stream's body: what its task sends, until the client goes.
struct EventBody {
    rx: mpsc::Receiver<Bytes>,
}

impl Body for EventBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.get_mut()
            .rx
            .poll_recv(cx)
            .map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

/// `text/event-stream`: `cluster` with the view whenever it changes, `problem`
/// while it cannot be gathered, a comment now and then. The task ends when the
/// client goes (its body, the receiver, is dropped).
fn events(app: Arc<App>, name: ClusterName) -> Response<WebBody> {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        if tx
            .send(Bytes::from_static(b"retry: 2000\n\n"))
            .await
            .is_err()
        {
            return;
        }
        let mut last: Option<Arc<Snapshot>> = None;
        let mut quiet_since = Instant::now();
        loop {
            let s = app.snapshot(Some(&name)).await;
            if last.as_deref() != Some(&*s) {
                let msg = match &*s {
                    Snapshot::Json(j) => event("cluster", j),
                    Snapshot::NotFound(m) | Snapshot::Failed(m) => event("problem", &error_json(m)),
                };
                if tx.send(msg).await.is_err() {
                    return;
                }
                last = Some(s);
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() >= KEEPALIVE {
                if tx
                    .send(Bytes::from_static(b": keepalive\n\n"))
                    .await
                    .is_err()
                {
                    return;
                }
                quiet_since = Instant::now();
            }
            tokio::select! {
                _ = tokio::time::sleep(EVENT_INTERVAL) => {}
                _ = tx.closed() => return,
            }
        }
    });
    with_headers(Response::new(EventBody { rx }.boxed()), "text/event-stream")
}

#[cfg(test)]
mod tests;
