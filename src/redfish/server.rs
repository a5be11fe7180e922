//! HTTP/1.1 over TCP or TLS for a [`Service`] (the listener is
//! [`crate::httpd`]'s). A request is admitted from its headers first
//! ([`Service::admit`]: route and credentials), and only then is its body
//! read, up to a cap and within [`BODY_TIMEOUT`]. A request the service can
//! answer from memory (a GET of a cached system) is answered on the event
//! loop; every other one runs on the blocking pool, so a slow machine call
//! (an image download) never holds up other requests.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Result;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request as HttpRequest, Response as HttpResponse, StatusCode};

use super::error::RedfishError;
use super::machine::Machine;
use super::request::MAX_BODY;
use super::service::{Request, Response, Service};
use super::trace::Trace;

/// Oversized bodies up to this size are read and discarded before the 413.
const DRAIN_LIMIT: usize = 1024 * 1024;
/// The whole body must arrive within this time of its headers: a client
/// that trickles it holds a connection no longer.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A running BMC listener.
pub struct Server {
    listener: crate::httpd::Listener,
}

impl Server {
    /// Binds `addr` and serves `service` until [`Server::shutdown`].
    /// With `tls`, only TLS connections are accepted.
    pub async fn start<M: Machine + ?Sized>(
        addr: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
        service: Arc<Service<M>>,
    ) -> Result<Server> {
        Server::start_traced(addr, tls, service, None).await
    }

    /// [`Server::start`], each request and its answer recorded in `trace`.
    pub async fn start_traced<M: Machine + ?Sized>(
        addr: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
        service: Arc<Service<M>>,
        trace: Option<Arc<Trace>>,
    ) -> Result<Server> {
        let listener = crate::httpd::Listener::start(addr, tls, move |req| {
            handle(req, service.clone(), trace.clone())
        })
        .await?;
        tracing::info!(local_addr = %listener.local_addr(), "redfish bmc listening");
        Ok(Server { listener })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// Stops accepting connections and waits for the accept loop to end.
    pub async fn shutdown(self) {
        self.listener.stop().await
    }
}

fn header(req: &HttpRequest<Incoming>, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn handle<M: Machine + ?Sized>(
    req: HttpRequest<Incoming>,
    service: Arc<Service<M>>,
    trace: Option<Arc<Trace>>,
) -> HttpResponse<Full<Bytes>> {
    let Some(trace) = trace else {
        let (resp, close, _) = serve(req, service).await;
        return to_http(resp, close);
    };
    let method = req.method().as_str().to_string();
    let target = target(&req);
    let headers = super::trace::kept_headers(
        req.headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
    );
    let (resp, close, body) = serve(req, service).await;
    let answer = super::trace::Answer {
        status: resp.status,
        headers: &resp.headers,
    };
    trace.record(&method, &target, &headers, &body, &answer);
    to_http(resp, close)
}

fn target(req: &HttpRequest<Incoming>) -> String {
    req.uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into())
}

/// The answer to `req`, whether its connection ends with it, and the body
/// read (empty when it was answered from its headers).
async fn serve<M: Machine + ?Sized>(
    req: HttpRequest<Incoming>,
    service: Arc<Service<M>>,
) -> (Response, bool, Bytes) {
    let mut r = Request {
        method: req.method().as_str().to_string(),
        target: target(&req),
        content_type: header(&req, "content-type"),
        authorization: header(&req, "authorization"),
        auth_token: header(&req, "x-auth-token"),
        body: Vec::new(),
    };
    // Credentials come from the headers: whoever has none is answered before
    // a byte of the body is read, and the connection ends with that answer.
    let cap = match service.admit(&r) {
        Ok(cap) => cap,
        Err(resp) => return (resp, true, Bytes::new()),
    };
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| *n > cap as u64) {
        // Drain a moderately oversized body of an authenticated client so it
        // reads the 413 instead of a broken pipe; refuse larger ones outright.
        if cap == MAX_BODY && n <= DRAIN_LIMIT as u64 {
            let drain = Limited::new(req.into_body(), DRAIN_LIMIT).collect();
            let _ = tokio::time::timeout(BODY_TIMEOUT, drain).await;
        }
        let resp = error_response(&RedfishError::payload_too_large(cap));
        return (resp, true, Bytes::new());
    }
    let read = tokio::time::timeout(BODY_TIMEOUT, Limited::new(req.into_body(), cap).collect());
    let body = match read.await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) => {
            let err = if e
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                RedfishError::payload_too_large(cap)
            } else {
                RedfishError::malformed_json("the request body could not be read")
            };
            return (error_response(&err), true, Bytes::new());
        }
        Err(_) => {
            let err = RedfishError::request_timeout(BODY_TIMEOUT.as_secs());
            return (error_response(&err), true, Bytes::new());
        }
    };
    r.body = body.to_vec();
    let started = std::time::Instant::now();
    if let Some(resp) = service.handle_in_memory(&r) {
        tracing::debug!(method = %r.method, target = %r.target, status = resp.status, elapsed_us = started.elapsed().as_micros() as u64, "request from memory");
        return (resp, false, body);
    }
    let method = r.method.clone();
    let target = r.target.clone();
    let resp = match tokio::task::spawn_blocking(move || service.handle(&r)).await {
        Ok(resp) => resp,
        Err(e) => {
            tracing::error!(error = %e, "request handler panicked");
            error_response(&RedfishError::internal())
        }
    };
    tracing::debug!(%method, %target, status = resp.status, elapsed_us = started.elapsed().as_micros() as u64, "request");
    (resp, false, body)
}

fn error_response(e: &RedfishError) -> Response {
    let mut headers = vec![(
        "Content-Type",
        "application/json; charset=utf-8".to_string(),
    )];
    headers.extend(e.headers.iter().cloned());
    Response {
        status: e.status,
        headers,
        body: serde_json::to_vec(&e.body()).unwrap_or_default().into(),
    }
}

fn to_http(resp: Response, close: bool) -> HttpResponse<Full<Bytes>> {
    let mut out = HttpResponse::new(Full::new(resp.body));
    *out.status_mut() =
        StatusCode::from_u16(resp.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = out.headers_mut();
    for (k, v) in resp.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            h.append(name, value);
        }
    }
    if close {
        h.insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    }
    out
}
