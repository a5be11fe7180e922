//! The HTTP/1.1 listener under shiftlab's two servers, the artifact server
//! (`serve::http`) and the Redfish BMC (`redfish::server`): binds one address,
//! accepts until stopped, speaks TLS when given a configuration (with a handshake
//! timeout), bounds the time to read a request's headers, and serves each
//! connection on its own task.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type HttpBody = UnsyncBoxBody<Bytes, BoxError>;
type Reply = Pin<Box<dyn Future<Output = Response<HttpBody>> + Send>>;
/// The servers' handlers, made one type.
type Handler = Arc<dyn Fn(Request<Incoming>) -> Reply + Send + Sync>;

/// A running listener.
pub struct Listener {
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Binds `addr` and answers every request with `handler` until
    /// [`Listener::stop`]. With `tls`, only TLS connections are accepted.
    pub async fn start<H, F, B>(
        addr: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
        handler: H,
    ) -> Result<Listener>
    where
        H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
        F: Future<Output = Response<B>> + Send + 'static,
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let handler: Handler = Arc::new(move |req| {
            let response = handler(req);
            Box::pin(async move { response.await.map(|b| b.map_err(Into::into).boxed_unsync()) })
        });
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let local_addr = listener.local_addr().context("reading the bound address")?;
        let (tx, rx) = watch::channel(false);
        let acceptor = tls.map(TlsAcceptor::from);
        let task = tokio::spawn(accept_loop(listener, acceptor, handler, rx));
        Ok(Listener {
            local_addr,
            shutdown: tx,
            task,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting connections and waits for the accept loop to end.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<TlsAcceptor>,
    handler: Handler,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor {
                Some(acceptor) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => serve_connection(TokioIo::new(tls), handler).await,
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "tls handshake failed"),
                        Err(_) => tracing::debug!(%peer, "tls handshake timed out"),
                    }
                }
                None => serve_connection(TokioIo::new(stream), handler).await,
            }
        });
    }
}

async fn serve_connection<I>(io: I, handler: Handler)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req| {
        let response = handler(req);
        async move { Ok::<_, Infallible>(response.await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(true);
    if let Err(e) = builder.serve_connection(io, svc).await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}
