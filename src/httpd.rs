//! The HTTP/1.1 listener under shiftlab's three servers, the artifact server
//! (`daemon::http`), the web page (`daemon::web`) and the Redfish BMC
//! (`redfish::server`): binds one address, accepts until stopped, speaks TLS
//! when given a configuration (with a handshake timeout), and serves each
//! connection on its own task.
//!
//! Peers cannot take it down by holding connections ([`Limits`]): each address
//! may hold a few dozen, the listener and the whole process a bounded number
//! (the process's share of its descriptors, [`crate::fdlimit`]), and a
//! connection over a cap is accepted and closed at once, so descriptors stay
//! bounded while the backlog drains; refusals are logged at most every
//! [`REFUSAL_LOG_EVERY`]. Headers must arrive within a deadline (it bounds an
//! idle keep-alive connection too), and a read or a write that makes no
//! progress for a while ends the connection: a body that never comes, a
//! response nobody reads.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often, at most, refused connections are reported.
pub const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// What a listener lets its peers hold, and how long it waits on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections one peer (an IPv4 address, an IPv6 /64) holds open at once.
    pub per_peer: usize,
    /// Connections the listener holds open at once (the process's budget,
    /// shared by every listener, may be lower).
    pub total: usize,
    /// From the end of the previous response (or the accept) to a request's
    /// complete headers: slow headers, and idle keep-alive connections.
    pub header_timeout: Duration,
    /// A read that gets no byte for this long (a body that never comes).
    pub read_stall: Duration,
    /// A write that sends no byte for this long (a peer that does not read).
    pub write_stall: Duration,
}

impl Limits {
    /// Sized for a lab: 5–50 nodes fetching Ignition at once each from its own
    /// address; Ironic driving every node's BMC from one address, a connection
    /// per request (sushy); a browser opening six.
    pub const DEFAULT: Limits = Limits {
        per_peer: 64,
        total: 1024,
        header_timeout: Duration::from_secs(15),
        read_stall: Duration::from_secs(30),
        write_stall: Duration::from_secs(30),
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// A peer holding fewer connections than this may still use the last eighth
/// of a cap, so that a few busy addresses cannot lock out the others.
const SMALL_PEER: usize = 4;

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Peer,
    Listener,
    Process,
}

impl Refused {
    fn as_str(self) -> &'static str {
        match self {
            Refused::Peer => "per-peer cap",
            Refused::Listener => "listener cap",
            Refused::Process => "process descriptor budget",
        }
    }
}

/// Whether a new connection may be served, given what its peer, the listener
/// and the process already hold.
pub fn admit(
    peer_open: usize,
    listener_open: usize,
    process_open: usize,
    limits: &Limits,
    budget: usize,
) -> Result<(), Refused> {
    let full =
        |open: usize, cap: usize| open >= cap || (open >= cap - cap / 8 && peer_open >= SMALL_PEER);
    if peer_open >= limits.per_peer {
        Err(Refused::Peer)
    } else if full(listener_open, limits.total) {
        Err(Refused::Listener)
    } else if full(process_open, budget) {
        Err(Refused::Process)
    } else {
        Ok(())
    }
}

/// The key a peer is counted under: its IPv4 address (an IPv4-mapped IPv6
/// one too), or its IPv6 /64, which one host usually holds whole.
pub fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
        v4 => v4,
    }
}

/// Counts refusals and says when to report them: the first at once, then at
/// most one line per `every`, carrying the count since the previous line.
#[derive(Debug, Default)]
pub struct RefusalLog {
    last: Option<Instant>,
    unreported: u64,
}

impl RefusalLog {
    /// One more refusal at `now`: `Some(count)` when a line is due.
    pub fn note(&mut self, now: Instant, every: Duration) -> Option<u64> {
        self.unreported += 1;
        if self.last.is_some_and(|t| now.duration_since(t) < every) {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unreported))
    }
}

/// Connections open in the whole process, over every listener.
static PROCESS_OPEN: AtomicUsize = AtomicUsize::new(0);
static BUDGET: OnceLock<usize> = OnceLock::new();

/// The process's connection budget, from the soft descriptor limit when the
/// first listener starts (the daemons raise it before).
fn budget() -> usize {
    *BUDGET.get_or_init(|| {
        crate::fdlimit::connection_budget(crate::fdlimit::current().map_or(1024, |(s, _)| s))
    })
}

/// The connections one listener holds, by peer.
#[derive(Debug)]
struct Tracker {
    limits: Limits,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
    refusals: Mutex<RefusalLog>,
}

/// One admitted connection; dropping it frees its place.
struct Slot {
    tracker: Arc<Tracker>,
    key: IpAddr,
}

impl Tracker {
    fn try_admit(self: &Arc<Self>, peer: IpAddr) -> Result<Slot, Refused> {
        let key = peer_key(peer);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let peer_open = open.1.get(&key).copied().unwrap_or(0);
        admit(
            peer_open,
            open.0,
            PROCESS_OPEN.load(Ordering::Relaxed),
            &self.limits,
            budget(),
        )?;
        open.0 += 1;
        *open.1.entry(key).or_default() += 1;
        PROCESS_OPEN.fetch_add(1, Ordering::Relaxed);
        Ok(Slot {
            tracker: self.clone(),
            key,
        })
    }

    fn refused(&self, local: SocketAddr, peer: SocketAddr, why: Refused) {
        let due = self
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .note(Instant::now(), REFUSAL_LOG_EVERY);
        if let Some(count) = due {
            tracing::warn!(listener = %local, last_peer = %peer.ip(), refused = count, cap = why.as_str(),
                per_peer = self.limits.per_peer, total = self.limits.total, budget = budget(),
                "connections refused over the limits");
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.tracker.open.lock().unwrap_or_else(|e| e.into_inner());
        open.0 = open.0.saturating_sub(1);
        if let Some(n) = open.1.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.1.remove(&self.key);
            }
        }
        PROCESS_OPEN.fetch_sub(1, Ordering::Relaxed);
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type HttpBody = UnsyncBoxBody<Bytes, BoxError>;
type Reply = Pin<Box<dyn Future<Output = Response<HttpBody>> + Send>>;
/// The servers' handlers, made one type.
type Handler = Arc<dyn Fn(Request<Incoming>) -> Reply + Send + Sync>;

/// Binds `addr` for listening. An IPv6 address is bound even while it is
/// tentative (`IPV6_FREEBIND`): a lab bridge without a running node has no
/// carrier, so duplicate address detection cannot finish and its IPv6
/// addresses stay tentative, which a plain bind refuses (EADDRNOTAVAIL); the
/// socket answers once the first node brings the link up and DAD completes.
fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => {
            let s = tokio::net::TcpSocket::new_v6()?;
            if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
                freebind6(&s)?;
            }
            s
        }
    };
    // As TcpListener::bind does on Unix: a restarted server takes its port
    // back at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

fn freebind6(s: &tokio::net::TcpSocket) -> io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let on: libc::c_int = 1;
    // SAFETY: a valid socket descriptor and a c_int option of its size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_FREEBIND,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A running listener.
pub struct Listener {
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// [`Listener::start_with`] the [`Limits::DEFAULT`].
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
        Listener::start_with(addr, tls, Limits::DEFAULT, handler).await
    }

    /// Binds `addr` and answers every request with `handler` until
    /// [`Listener::stop`], within `limits`. With `tls`, only TLS connections
    /// are accepted.
    pub async fn start_with<H, F, B>(
        addr: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
        limits: Limits,
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
        let listener = bind(addr).with_context(|| format!("binding {addr}"))?;
        let local_addr = listener.local_addr().context("reading the bound address")?;
        let (tx, rx) = watch::channel(false);
        let acceptor = tls.map(TlsAcceptor::from);
        let tracker = Arc::new(Tracker {
            limits,
            open: Mutex::default(),
            refusals: Mutex::default(),
        });
        let task = tokio::spawn(accept_loop(listener, acceptor, handler, tracker, rx));
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
    tracker: Arc<Tracker>,
    mut shutdown: watch::Receiver<bool>,
) {
    let local = listener.local_addr().ok();
    let mut accept_errors = RefusalLog::default();
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors (EMFILE) most likely: the backlog waits.
                    if let Some(n) = accept_errors.note(Instant::now(), REFUSAL_LOG_EVERY) {
                        tracing::warn!(listener = ?local, error = %e, errors = n, "accepting a connection");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let slot = match tracker.try_admit(peer.ip()) {
            Ok(s) => s,
            Err(why) => {
                drop(stream);
                if let Some(local) = local {
                    tracker.refused(local, peer, why);
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let limits = tracker.limits;
        let stream = Guarded::new(stream, &limits, slot);
        let handler = handler.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor {
                Some(acceptor) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => serve_connection(TokioIo::new(tls), handler, &limits).await,
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "tls handshake failed"),
                        Err(_) => tracing::debug!(%peer, "tls handshake timed out"),
                    }
                }
                None => serve_connection(TokioIo::new(stream), handler, &limits).await,
            }
        });
    }
}

async fn serve_connection<I>(io: I, handler: Handler, limits: &Limits)
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
        .header_read_timeout(limits.header_timeout)
        // hyper then reads only when it wants a head or a body byte, never
        // while a handler works (to notice a hang-up): a read waiting longer
        // than the stall limit is a peer holding back what it announced.
        .half_close(true)
        .keep_alive(true);
    if let Err(e) = builder.serve_connection(io, svc).await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// A connection's stream with its place in the caps and its stall deadlines.
struct Guarded<T> {
    io: T,
    read: Stall,
    write: Stall,
    _slot: Slot,
}

/// A deadline armed when an operation first waits, disarmed by progress.
struct Stall {
    after: Duration,
    armed: bool,
    sleep: Pin<Box<Sleep>>,
}

impl Stall {
    fn new(after: Duration) -> Self {
        Stall {
            after,
            armed: false,
            sleep: Box::pin(tokio::time::sleep(after)),
        }
    }

    /// The operation made progress (or failed): it starts afresh.
    fn progressed<T>(&mut self, r: Poll<T>) -> Poll<T> {
        self.armed = false;
        r
    }

    /// The operation waits: an error once it has waited `after` in a row.
    fn waiting<T>(&mut self, cx: &mut TaskContext<'_>, what: &str) -> Poll<io::Result<T>> {
        if !self.armed {
            self.armed = true;
            let deadline = tokio::time::Instant::now() + self.after;
            self.sleep.as_mut().reset(deadline);
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.armed = false;
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the peer stalled {what} for {:?}", self.after),
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Guarded<T> {
    fn new(io: T, limits: &Limits, slot: Slot) -> Self {
        Guarded {
            io,
            read: Stall::new(limits.read_stall),
            write: Stall::new(limits.write_stall),
            _slot: slot,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Pending => this.read.waiting(cx, "sending"),
            ready => this.read.progressed(ready),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write(cx, buf) {
            Poll::Pending => this.write.waiting(cx, "reading"),
            ready => this.write.progressed(ready),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write_vectored(cx, bufs) {
            Poll::Pending => this.write.waiting(cx, "reading"),
            ready => this.write.progressed(ready),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_flush(cx) {
            Poll::Pending => this.write.waiting(cx, "reading"),
            ready => this.write.progressed(ready),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_shutdown(cx) {
            Poll::Pending => this.write.waiting(cx, "reading"),
            ready => this.write.progressed(ready),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::{TcpSocket, TcpStream};

    #[test]
    fn a_peer_over_its_cap_or_a_full_listener_is_refused() {
        let l = Limits {
            per_peer: 4,
            total: 16,
            ..Limits::DEFAULT
        };
        assert_eq!(admit(0, 0, 0, &l, 100), Ok(()));
        assert_eq!(admit(4, 4, 4, &l, 100), Err(Refused::Peer));
        assert_eq!(admit(0, 16, 16, &l, 100), Err(Refused::Listener));
        assert_eq!(admit(0, 3, 100, &l, 100), Err(Refused::Process));
        // The last eighth is kept for peers holding little.
        assert_eq!(admit(3, 14, 14, &l, 100), Ok(()));
        assert_eq!(
            admit(SMALL_PEER, 14, 14, &l, 100),
            Err(Refused::Peer),
            "over its own cap first"
        );
        let wide = Limits {
            per_peer: 64,
            total: 16,
            ..Limits::DEFAULT
        };
        assert_eq!(
            admit(SMALL_PEER, 14, 14, &wide, 100),
            Err(Refused::Listener)
        );
        assert_eq!(admit(0, 14, 14, &wide, 100), Ok(()));
        assert_eq!(admit(SMALL_PEER, 1, 90, &wide, 100), Err(Refused::Process));
        assert_eq!(admit(0, 1, 90, &wide, 100), Ok(()));
    }

    #[test]
    fn peers_are_addresses_and_ipv6_prefixes() {
        let k = |s: &str| peer_key(s.parse().unwrap()).to_string();
        assert_eq!(k("192.168.126.10"), "192.168.126.10");
        assert_eq!(k("::ffff:192.168.126.10"), "192.168.126.10");
        assert_eq!(k("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::");
        assert_eq!(k("2001:db8:1:2:bbbb::9"), "2001:db8:1:2::");
        assert_eq!(k("::1"), "::");
    }

    #[test]
    fn refusals_are_reported_once_per_period_with_their_count() {
        let mut log = RefusalLog::default();
        let t0 = Instant::now();
        let every = Duration::from_secs(10);
        assert_eq!(log.note(t0, every), Some(1));
        for i in 1..1000 {
            assert_eq!(log.note(t0 + Duration::from_millis(i), every), None);
        }
        assert_eq!(log.note(t0 + every, every), Some(1000));
        assert_eq!(log.note(t0 + every * 2, every), Some(1));
    }

    /// A listener on 127.0.0.1 answering `/big` with 32 MiB, `POST /len` with
    /// the length of the body it reads, anything else with "ok".
    async fn server(limits: Limits) -> Listener {
        Listener::start_with(
            "127.0.0.1:0".parse().unwrap(),
            None,
            limits,
            |req: Request<Incoming>| async move {
                let body = match req.uri().path() {
                    "/big" => Bytes::from(vec![b'x'; 32 << 20]),
                    "/len" => match req.into_body().collect().await {
                        Ok(b) => Bytes::from(b.to_bytes().len().to_string()),
                        Err(_) => Bytes::from_static(b"body failed"),
                    },
                    _ => Bytes::from_static(b"ok"),
                };
                Response::new(Full::new(body))
            },
        )
        .await
        .unwrap()
    }

    async fn connect(from: &str, to: SocketAddr) -> TcpStream {
        let s = TcpSocket::new_v4().unwrap();
        s.bind(format!("{from}:0").parse().unwrap()).unwrap();
        s.connect(to).await.unwrap()
    }

    /// One GET on its own connection: the body, or `None` when the server
    /// closed the connection without answering.
    async fn get(from: &str, to: SocketAddr, path: &str) -> Option<String> {
        let mut s = connect(from, to).await;
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        if s.write_all(req.as_bytes()).await.is_err() {
            return None;
        }
        let mut out = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
        let text = String::from_utf8_lossy(&out).to_string();
        match read {
            Ok(_) if text.starts_with("HTTP/1.1 200") => {
                Some(text.split("\r\n\r\n").nth(1).unwrap_or("").to_string())
            }
            _ => None,
        }
    }

    /// Until `f` holds, polling for at most ten seconds.
    async fn eventually<F: Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
        for _ in 0..100 {
            if f().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("never: {what}");
    }

    #[tokio::test]
    async fn held_connections_are_capped_per_peer_and_others_are_served() {
        let l = server(Limits {
            per_peer: 3,
            total: 64,
            ..Limits::DEFAULT
        })
        .await;
        let addr = l.local_addr();
        // Half-open requests from one address: a partial request line each.
        let mut held = Vec::new();
        for _ in 0..3 {
            let mut s = connect("127.0.0.2", addr).await;
            s.write_all(b"GET /").await.unwrap();
            held.push(s);
        }
        // Its fourth is closed at once, unanswered...
        assert_eq!(get("127.0.0.2", addr, "/").await, None);
        // ...while another address is answered.
        assert_eq!(get("127.0.0.3", addr, "/").await.as_deref(), Some("ok"));
        // A place freed is a place again.
        drop(held.pop());
        eventually("a freed place is taken", || async {
            get("127.0.0.2", addr, "/").await.is_some()
        })
        .await;
        l.stop().await;
    }

    #[tokio::test]
    async fn a_response_nobody_reads_ends_the_connection() {
        let l = server(Limits {
            per_peer: 1,
            write_stall: Duration::from_millis(300),
            ..Limits::DEFAULT
        })
        .await;
        let addr = l.local_addr();
        let mut s = connect("127.0.0.4", addr).await;
        s.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        // The peer's one place is taken by the stalled download...
        eventually("the download holds the place", || async {
            get("127.0.0.4", addr, "/").await.is_none()
        })
        .await;
        // ...until the stalled write gives it up.
        eventually("the stalled download is dropped", || async {
            get("127.0.0.4", addr, "/").await.as_deref() == Some("ok")
        })
        .await;
        // What had not been read is all there is: the connection was ended.
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest)).await;
        assert!(rest.len() < 32 << 20, "the whole body went out");
        l.stop().await;
    }

    #[tokio::test]
    async fn trickled_headers_and_idle_keep_alive_are_bounded() {
        let l = server(Limits {
            header_timeout: Duration::from_millis(500),
            ..Limits::DEFAULT
        })
        .await;
        let addr = l.local_addr();
        // Headers a byte at a time: progress does not extend the deadline.
        let mut slow = connect("127.0.0.7", addr).await;
        slow.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut closed = false;
        for _ in 0..200 {
            if slow.write_all(b"X").await.is_err() {
                closed = true;
                break;
            }
            let mut b = [0u8; 256];
            match tokio::time::timeout(Duration::from_millis(50), slow.read(&mut b)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    closed = true;
                    break;
                }
                Ok(Ok(_)) => {} // hyper's 408, then the close
                Err(_) => {}
            }
        }
        assert!(closed, "trickled headers held the connection for 10 s");
        // A keep-alive connection answered once, then idle: closed.
        let mut idle = connect("127.0.0.8", addr).await;
        idle.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(10), idle.read_to_end(&mut got)).await;
        assert!(ended.is_ok(), "an idle keep-alive connection was held");
        assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
        l.stop().await;
    }

    #[tokio::test]
    async fn a_body_that_never_comes_ends_the_connection() {
        let l = server(Limits {
            per_peer: 1,
            read_stall: Duration::from_secs(1),
            ..Limits::DEFAULT
        })
        .await;
        let addr = l.local_addr();
        let mut s = connect("127.0.0.5", addr).await;
        s.write_all(b"POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
            .await
            .unwrap();
        // The server ends the connection (the handler saw its body fail)...
        let mut out = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out)).await;
        assert!(ended.is_ok(), "the stalled request is still held");
        assert!(!String::from_utf8_lossy(&out).ends_with("\r\n\r\n100"));
        // ...and the peer's one place is free again.
        eventually("the stalled body's place is freed", || async {
            get("127.0.0.5", addr, "/").await.as_deref() == Some("ok")
        })
        .await;
        // A body that comes is read whole (the stall limit is per read).
        let mut s2 = connect("127.0.0.6", addr).await;
        s2.write_all(
            b"POST /len HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 6\r\n\r\nabc",
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        s2.write_all(b"def").await.unwrap();
        let mut out = String::new();
        s2.read_to_string(&mut out).await.unwrap();
        assert!(out.ends_with("\r\n\r\n6"), "{out}");
        l.stop().await;
    }
}
