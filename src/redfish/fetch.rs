//! Fetching a virtual media image: an HTTP(S) GET under the image-source
//! rule ([`super::source`]), with redirects followed here, one hop at a time,
//! so each `Location` is checked as written before it is fetched; the
//! resolver checks every address right before a connection is made.
//!
//! Server certificates are not verified unless a CA is given: the ISO
//! servers of a real IPI install (Ironic on the bootstrap, metal3's httpd)
//! use certificates the installer makes, and hardware BMCs and sushy-tools
//! do not verify them either. With a CA (`--media-ca`), only servers with a
//! certificate from it and for their name are fetched from. Either way the
//! handshake's signatures are checked, so a TLS session is really with the
//! holder of the certificate shown. A rehearsal's lab BMC verifies a
//! loopback server against the cluster's stand-in Ironic CA instead, read
//! at each connection (see [`super::source`]).

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, TcpConnector,
    Transport, TransportAdapter,
};

use super::machine::MachineError;
use super::source::{self, ImageSources, UNREACHABLE};

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;

/// Fetches images for one BMC.
pub struct Fetcher {
    agent: ureq::Agent,
}

/// A fetched image's response.
pub type Response = ureq::http::Response<ureq::Body>;

impl Fetcher {
    /// A fetcher under `sources`; `media_ca` (a PEM file) turns certificate
    /// verification on against the CAs in it.
    pub fn new(sources: ImageSources, media_ca: Option<&Path>) -> Result<Fetcher> {
        let config = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_per_read(Some(Duration::from_secs(60)))
            .max_redirects(0)
            .http_status_as_error(false)
            // no proxy from the environment: the resolver would check the
            // proxy's address, not the image server's
            .proxy(None)
            .build();
        let tls = MediaTls {
            config: client_tls(media_ca)?,
            sources: sources.clone(),
        };
        let connector = ().chain(TcpConnector::default()).chain(tls);
        let agent = ureq::Agent::with_parts(config, connector, source::Resolver::new(sources));
        Ok(Fetcher { agent })
    }

    /// GETs `url` with `headers`, following up to [`MAX_REDIRECTS`]
    /// redirects. A failure is a [`MachineError::BadRequest`] naming the URL
    /// (without user-info or query) and its [`Cause`].
    pub fn get(&self, url: &str, headers: &[(&str, &str)]) -> Result<Response, MachineError> {
        let shown = crate::redact::url(url);
        let failed = |cause: Cause| {
            MachineError::BadRequest(format!(
                "fetching the image {shown} failed: {}",
                cause.describe()
            ))
        };
        let mut next = source::check_url(url)
            .map_err(|r| failed(refused(source::written_host(url).unwrap_or(""), &r)))?;
        for hop in 0..=MAX_REDIRECTS {
            let host = next.host_str().unwrap_or("").to_string();
            let uri = source::as_sent(&next).map_err(|r| failed(refused(&host, &r)))?;
            let mut req = self.agent.get(uri);
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            match req.call() {
                Ok(resp) if is_redirect(resp.status().as_u16()) => {
                    let Some(location) =
                        resp.headers().get("Location").and_then(|v| v.to_str().ok())
                    else {
                        return Err(failed(Cause::Other(format!(
                            "the server answered HTTP {} without a Location",
                            resp.status().as_u16()
                        ))));
                    };
                    next = source::check_redirect(&next, location)
                        .map_err(|r| failed(refused(&host, &format!("redirect: {r}"))))?;
                }
                Ok(resp) if resp.status().as_u16() >= 400 => {
                    return Err(failed(Cause::Other(format!(
                        "the server answered HTTP {}",
                        resp.status().as_u16()
                    ))))
                }
                Ok(resp) => return Ok(resp),
                Err(e) => {
                    let cause = Cause::classify(&e);
                    if let Cause::Rule(reason) = &cause {
                        refused(&host, reason);
                    }
                    let cause = match hop {
                        0 => cause,
                        n => Cause::Other(format!("after {n} redirect(s): {}", cause.describe())),
                    };
                    return Err(failed(cause));
                }
            }
        }
        Err(failed(Cause::Other(format!(
            "the server redirected more than {MAX_REDIRECTS} times"
        ))))
    }
}

/// Why a fetch failed, read from the transport error's chain: what the
/// client's message says (the log line repeats it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The image-source rule refused the address; no connection was made.
    /// The reason (which rule) goes to the log only.
    Rule(String),
    /// The name does not resolve.
    Dns(String),
    /// Nothing listens there.
    ConnectionRefused,
    /// Connecting or reading took too long.
    Timeout,
    /// TLS: the certificate is not from a CA the BMC trusts (`--media-ca`).
    UnknownCa,
    /// TLS: the certificate is from a trusted CA but unusable (expired, for
    /// another name, …).
    BadCertificate(String),
    /// TLS: a loopback server in a rehearsal without a certificate from the
    /// cluster's stand-in Ironic CA, or that CA missing.
    StandinCa(String),
    /// TLS: anything else in the handshake.
    Tls(String),
    Other(String),
}

impl Cause {
    /// The cause of a failed request, read from the error and what it
    /// carries (its sources, and what each I/O error wraps).
    pub fn classify(err: &ureq::Error) -> Cause {
        let chain = chain(err);
        for e in &chain {
            if let Some(r) = e.downcast_ref::<source::Refused>() {
                return Cause::Rule(r.0.clone());
            }
            if let Some(l) = e.downcast_ref::<source::Lookup>() {
                return Cause::Dns(l.0.to_string());
            }
            if let Some(s) = e.downcast_ref::<source::StandinCa>() {
                return Cause::StandinCa(s.0.clone());
            }
            if let Some(t) = e.downcast_ref::<rustls::Error>() {
                return match t {
                    rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
                        Cause::UnknownCa
                    }
                    rustls::Error::InvalidCertificate(c) => Cause::BadCertificate(certificate(c)),
                    other => Cause::Tls(other.to_string()),
                };
            }
        }
        let io = chain
            .iter()
            .find_map(|e| e.downcast_ref::<std::io::Error>());
        match io.map(std::io::Error::kind) {
            Some(std::io::ErrorKind::ConnectionRefused) => return Cause::ConnectionRefused,
            Some(std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
                return Cause::Timeout
            }
            _ => {}
        }
        match err {
            ureq::Error::Timeout(_) => Cause::Timeout,
            ureq::Error::HostNotFound => Cause::Dns(err.to_string()),
            _ => Cause::Other(err.to_string()),
        }
    }

    /// The cause as the client reads it.
    pub fn describe(&self) -> String {
        match self {
            Cause::Rule(_) => UNREACHABLE.to_string(),
            Cause::Dns(d) => format!("DNS: the server's name does not resolve ({d})"),
            Cause::ConnectionRefused => "connection refused: nothing listens at that address and port".into(),
            Cause::Timeout => "timed out connecting to or reading from the server".into(),
            Cause::UnknownCa => "TLS: unknown CA: the server's certificate is not signed by a CA this BMC trusts for image servers (--media-ca)".into(),
            Cause::BadCertificate(d) => format!("TLS: bad certificate: {d}"),
            Cause::StandinCa(d) => format!("TLS: {d}"),
            Cause::Tls(d) => format!("TLS handshake failed: {d}"),
            Cause::Other(d) => d.clone(),
        }
    }
}

/// A certificate's fault in words.
fn certificate(c: &rustls::CertificateError) -> String {
    use rustls::CertificateError as C;
    match c {
        C::Expired | C::ExpiredContext { .. } => "the certificate has expired".into(),
        C::NotValidYet | C::NotValidYetContext { .. } => "the certificate is not valid yet".into(),
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "the certificate is not valid for the server's name or address".into()
        }
        C::Revoked => "the certificate is revoked".into(),
        C::BadSignature => "the certificate's signature is bad".into(),
        other => format!("{other:?}"),
    }
}

/// What the error carries and its sources, and for each I/O error the
/// error it wraps (an `io::Error`'s own `source` skips it; ureq's error has
/// no `source`).
fn chain(err: &ureq::Error) -> Vec<&(dyn std::error::Error + 'static)> {
    let mut out = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = match err {
        ureq::Error::Io(e) => Some(e),
        ureq::Error::Rustls(e) => Some(e),
        ureq::Error::Other(e) => Some(e.as_ref()),
        _ => None,
    };
    while let Some(e) = next {
        out.push(e);
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            out.push(inner);
        }
        next = e.source();
    }
    out
}

/// Checks a `--media-ca` file at start: readable, with a certificate.
pub fn check_media_ca(path: &Path) -> Result<()> {
    client_tls(Some(path)).map(|_| ())
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Logs which rule refused a source (the client's message says only that
/// the rule did): the cause, for [`Cause::Rule`].
fn refused(host: &str, reason: &str) -> Cause {
    tracing::warn!(%host, reason, "image source refused by the image-source rule");
    Cause::Rule(reason.to_string())
}

fn client_tls(media_ca: Option<&Path>) -> Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("tls protocol versions")?;
    let config = match media_ca {
        Some(path) => builder
            .with_root_certificates(ca_roots(path, "--media-ca")?)
            .with_no_client_auth(),
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The CAs in the PEM file `path` (`what` names it in errors).
fn ca_roots(path: &Path, what: &str) -> Result<rustls::RootCertStore> {
    let pem = std::fs::read(path).with_context(|| format!("reading {what} {}", path.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.with_context(|| format!("{what} {}: a bad PEM block", path.display()))?;
        roots
            .add(cert)
            .with_context(|| format!("{what} {}: a bad certificate", path.display()))?;
    }
    if roots.is_empty() {
        bail!(
            "{what} {}: no PEM certificate in it; give the CA that signed the image servers' certificates",
            path.display()
        );
    }
    Ok(roots)
}

/// A config verifying against the stand-in Ironic CA `ca`, read now: the
/// stand-in makes it after the BMC starts, and again for a new lab.
fn standin_tls(ca: &Path) -> Result<Arc<rustls::ClientConfig>, ureq::Error> {
    let unusable = |e: anyhow::Error| {
        ureq::Error::Other(Box::new(source::StandinCa(format!(
            "the cluster's stand-in Ironic CA is unusable: {e:#}"
        ))))
    };
    let roots = ca_roots(ca, "the stand-in Ironic CA").map_err(unusable)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| unusable(e.into()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The TLS step of the fetch's connector chain, with [`client_tls`]'s
/// config, or [`standin_tls`]'s for an address only the rehearsal's
/// loopback exception admits: ureq's own connector, with verification off,
/// checks no handshake signature.
#[derive(Debug)]
struct MediaTls {
    config: Arc<rustls::ClientConfig>,
    sources: ImageSources,
}

impl<In: Transport> Connector<In> for MediaTls {
    type Out = Either<In, MediaTlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Err(ureq::Error::ConnectionFailed);
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let host = details.uri.host().unwrap_or("");
        // an IPv6 literal comes in brackets
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(bare.to_string())
            .map_err(|_| ureq::Error::Tls("the server's name is not a DNS name or an address"))?;
        // Any address under the exception puts the whole name under it.
        let standin = details
            .addrs
            .iter()
            .find_map(|a| self.sources.standin_ca_for(a.ip()));
        let config = match standin {
            Some(ca) => standin_tls(ca)?,
            None => self.config.clone(),
        };
        let mut conn = rustls::ClientConnection::new(config, name)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        if let Err(e) = conn.complete_io(&mut sock) {
            let rejected = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
            return Err(match (standin, rejected) {
                (
                    Some(ca),
                    Some(rustls::Error::InvalidCertificate(
                        rustls::CertificateError::UnknownIssuer,
                    )),
                ) => ureq::Error::Other(Box::new(source::StandinCa(format!(
                    "unknown CA: the image server on loopback has a certificate not from this rehearsal's stand-in Ironic CA ({})",
                    ca.display()
                )))),
                _ => e.into(),
            });
        }
        Ok(Some(Either::B(MediaTlsTransport {
            buffers: LazyBuffers::new(
                details.config.input_buffer_size(),
                details.config.output_buffer_size(),
            ),
            stream: rustls::StreamOwned { conn, sock },
        })))
    }
}

/// A TLS session over the chained transport.
struct MediaTlsTransport {
    buffers: LazyBuffers,
    stream: rustls::StreamOwned<rustls::ClientConnection, TransportAdapter>,
}

impl std::fmt::Debug for MediaTlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaTlsTransport").finish_non_exhaustive()
    }
}

impl Transport for MediaTlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}

/// Accepts any server certificate, as BMCs do for virtual media, but checks
/// the handshake's signatures against it.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{SocketAddr, TcpListener};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Instant;

    use crate::redfish::tls;

    /// A loopback HTTP(S) server counting the connections it accepts;
    /// `answer` maps a request path to the response it sends.
    struct Loopback {
        addr: SocketAddr,
        hits: Arc<AtomicUsize>,
        stop: Arc<AtomicBool>,
    }

    impl Drop for Loopback {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
        }
    }

    fn loopback(
        bind: &str,
        tls: Option<Arc<rustls::ServerConfig>>,
        answer: impl Fn(&str) -> String + Send + 'static,
    ) -> Option<Loopback> {
        let listener = TcpListener::bind(bind).ok()?;
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (hits.clone(), stop.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !s.load(Ordering::SeqCst) && Instant::now() < deadline {
                let Ok((tcp, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                h.fetch_add(1, Ordering::SeqCst);
                tcp.set_nonblocking(false).unwrap();
                tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let _ = match &tls {
                    Some(cfg) => {
                        let conn = rustls::ServerConnection::new(cfg.clone()).unwrap();
                        respond(rustls::StreamOwned::new(conn, tcp), &answer)
                    }
                    None => respond(tcp, &answer),
                };
            }
        });
        Some(Loopback { addr, hits, stop })
    }

    fn respond(
        mut stream: impl std::io::Read + std::io::Write,
        answer: &dyn Fn(&str) -> String,
    ) -> std::io::Result<()> {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
            if stream.read(&mut byte)? == 0 {
                break;
            }
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        let path = head.split(' ').nth(1).unwrap_or("/");
        stream.write_all(answer(path).as_bytes())?;
        stream.flush()
    }

    fn ok(_: &str) -> String {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".into()
    }

    fn body(resp: Response) -> String {
        let mut s = String::new();
        resp.into_body()
            .into_reader()
            .read_to_string(&mut s)
            .unwrap();
        s
    }

    fn refused(r: Result<Response, MachineError>) -> String {
        match r {
            Err(MachineError::BadRequest(msg)) => msg,
            Err(e) => panic!("{e:?}"),
            Ok(resp) => panic!("fetched: HTTP {}", resp.status()),
        }
    }

    #[test]
    fn refused_sources_and_redirects_get_one_message_and_are_not_fetched() {
        // The victims: loopback services the BMC must not read.
        let v4 = loopback("127.0.0.2:0", None, ok).unwrap();
        let v6 = loopback("[::1]:0", None, ok);
        let vport = v4.addr.port();
        // The allowed image server (127.0.0.1 only), redirecting where asked.
        let mirror = loopback("127.0.0.1:0", None, move |path| {
            let location = match path {
                "/to-loopback" => format!("http://127.0.0.2:{vport}/x.iso"),
                "/to-number" => format!("http://2130706434:{vport}/x.iso"),
                "/to-short" => format!("//127.2:{vport}/x.iso"),
                _ => return ok(path),
            };
            format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        })
        .unwrap();
        let port = mirror.addr.port();
        let closed = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let f = Fetcher::new(
            ImageSources::anywhere(vec!["127.0.0.1/32".parse().unwrap()]),
            None,
        )
        .unwrap();

        let mut urls = vec![
            format!("http://127.0.0.2:{vport}/x.iso"),
            format!("http://127.1:{port}/x.iso"),
            format!("http://2130706433:{port}/x.iso"),
            format!("http://0x7f000001:{port}/x.iso"),
            format!("http://user:pw@2130706434:{vport}/x.iso"),
            format!("http://127.0.0.1:{port}/to-loopback"),
            format!("http://127.0.0.1:{port}/to-number"),
            format!("http://127.0.0.1:{port}/to-short"),
        ];
        if let Some(v6) = &v6 {
            urls.push(format!("http://[::1]:{}/x.iso", v6.addr.port()));
        }
        for url in &urls {
            let msg = refused(f.get(url, &[]));
            assert!(msg.ends_with(UNREACHABLE), "{url}: {msg}");
            assert!(!msg.contains("pw"), "{msg}");
        }
        // an allowed source that cannot be fetched says why
        let msg = refused(f.get(
            &format!("http://127.0.0.1:{closed}/x.iso?token=s3cret"),
            &[],
        ));
        assert_eq!(
            msg,
            format!("fetching the image http://127.0.0.1:{closed}/x.iso?<redacted> failed: connection refused: nothing listens at that address and port")
        );
        assert_eq!(
            v4.hits.load(Ordering::SeqCst),
            0,
            "a refused source was fetched"
        );
        if let Some(v6) = &v6 {
            assert_eq!(v6.hits.load(Ordering::SeqCst), 0);
        }
        // the three redirects reached the mirror, nothing else did
        assert_eq!(mirror.hits.load(Ordering::SeqCst), 3);
        let resp = f
            .get(&format!("http://127.0.0.1:{port}/x.iso"), &[])
            .unwrap();
        assert_eq!(body(resp), "hello");
    }

    #[test]
    fn https_with_the_installers_own_certificate_is_fetched_and_media_ca_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let ips = ["127.0.0.1".parse().unwrap()];
        let ours = tls::ensure(&dir.path().join("ours"), &ips, &[]).unwrap();
        let other = tls::ensure(&dir.path().join("other"), &ips, &[]).unwrap();
        let server = loopback("127.0.0.1:0", Some(tls::server_config(&ours).unwrap()), ok).unwrap();
        let url = format!("https://127.0.0.1:{}/x.iso", server.addr.port());
        let sources = ImageSources::anywhere(vec!["127.0.0.1/32".parse().unwrap()]);

        // by default, as BMCs do: not verified
        let f = Fetcher::new(sources.clone(), None).unwrap();
        assert_eq!(body(f.get(&url, &[]).unwrap()), "hello");
        // with the CA that signed it
        let f = Fetcher::new(sources.clone(), Some(&ours.ca_path)).unwrap();
        assert_eq!(body(f.get(&url, &[]).unwrap()), "hello");
        // with a private CA the BMC does not trust: the client hears why
        let f = Fetcher::new(sources.clone(), Some(&other.ca_path)).unwrap();
        let msg = refused(f.get(&url, &[]));
        assert!(
            msg.contains(&format!("fetching the image {url} failed: TLS: unknown CA")),
            "{msg}"
        );
        // a certificate from a trusted CA, but for another address
        let elsewhere = tls::ensure(
            &dir.path().join("elsewhere"),
            &["127.0.0.9".parse().unwrap()],
            &[],
        )
        .unwrap();
        let server2 = loopback(
            "127.0.0.1:0",
            Some(tls::server_config(&elsewhere).unwrap()),
            ok,
        )
        .unwrap();
        let f = Fetcher::new(sources.clone(), Some(&elsewhere.ca_path)).unwrap();
        let msg = refused(f.get(
            &format!("https://127.0.0.1:{}/x.iso", server2.addr.port()),
            &[],
        ));
        assert!(
            msg.contains("TLS: bad certificate: the certificate is not valid for the server's name or address"),
            "{msg}"
        );

        // a CA file with no certificate is refused at start
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = Fetcher::new(sources, Some(&empty)).err().unwrap();
        assert!(format!("{e:#}").contains("no PEM certificate"), "{e:#}");
    }

    /// Presents `cert` but signs the handshake with `key`: a server that
    /// shows a certificate it does not hold.
    #[derive(Debug)]
    struct Borrowed(Arc<rustls::sign::CertifiedKey>);

    impl rustls::server::ResolvesServerCert for Borrowed {
        fn resolve(
            &self,
            _: rustls::server::ClientHello<'_>,
        ) -> Option<Arc<rustls::sign::CertifiedKey>> {
            Some(self.0.clone())
        }
    }

    #[test]
    fn unverified_https_still_checks_the_handshake_signature() {
        let dir = tempfile::tempdir().unwrap();
        let ips = ["127.0.0.1".parse().unwrap()];
        let shown = tls::ensure(&dir.path().join("shown"), &ips, &[]).unwrap();
        let held = tls::ensure(&dir.path().join("held"), &ips, &[]).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key =
            rustls::pki_types::PrivateKeyDer::from_pem_slice(held.key_pem.as_bytes()).unwrap();
        let key = provider.key_provider.load_private_key(key).unwrap();
        let chain = CertificateDer::pem_slice_iter(shown.cert_pem.as_bytes())
            .map(|c| c.unwrap())
            .collect();
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Borrowed(Arc::new(
                rustls::sign::CertifiedKey::new(chain, key),
            ))));
        let server = loopback("127.0.0.1:0", Some(Arc::new(cfg)), ok).unwrap();
        let url = format!("https://127.0.0.1:{}/x.iso", server.addr.port());
        let f = Fetcher::new(
            ImageSources::anywhere(vec!["127.0.0.1/32".parse().unwrap()]),
            None,
        )
        .unwrap();
        let msg = refused(f.get(&url, &[]));
        assert!(
            msg.starts_with(&format!("fetching the image {url} failed: TLS")),
            "{msg}"
        );
        assert_eq!(server.hits.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn causes_are_read_from_the_error_chain() {
        use std::io::{Error as Io, ErrorKind as K};
        use ureq::Error as E;
        let classify = |e: E| Cause::classify(&e);
        assert_eq!(
            classify(E::Io(Io::from(K::ConnectionRefused))),
            Cause::ConnectionRefused
        );
        assert_eq!(classify(E::Io(Io::from(K::TimedOut))), Cause::Timeout);
        assert_eq!(classify(E::Io(Io::from(K::WouldBlock))), Cause::Timeout);
        assert_eq!(classify(E::Timeout(ureq::Timeout::Connect)), Cause::Timeout);
        // a failed lookup comes through the resolver as such
        let lookup = Io::other("failed to lookup address information: Name or service not known");
        assert!(
            matches!(classify(E::Other(Box::new(source::Lookup(lookup)))), Cause::Dns(d) if d.contains("Name or service not known"))
        );
        assert!(matches!(classify(E::HostNotFound), Cause::Dns(_)));
        // the rule's refusal comes through the resolver
        let rule = source::Refused("127.0.0.2 is a loopback address".into());
        assert_eq!(
            classify(E::Other(Box::new(rule))),
            Cause::Rule("127.0.0.2 is a loopback address".into())
        );
        // TLS, wrapped in an I/O error as the TLS stream reports it
        let unknown = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        assert_eq!(
            classify(E::Io(Io::new(K::InvalidData, unknown.clone()))),
            Cause::UnknownCa
        );
        assert_eq!(classify(E::Rustls(unknown)), Cause::UnknownCa);
        let expired = rustls::Error::InvalidCertificate(rustls::CertificateError::Expired);
        assert_eq!(
            classify(E::Io(Io::new(K::InvalidData, expired))),
            Cause::BadCertificate("the certificate has expired".into())
        );
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure);
        assert!(matches!(classify(E::Rustls(alert)), Cause::Tls(_)));
        assert_eq!(
            classify(E::ConnectionFailed),
            Cause::Other("connection failed".into())
        );
        // what the client reads names the cause
        assert!(Cause::UnknownCa.describe().starts_with("TLS: unknown CA"));
        assert_eq!(Cause::Rule("secret detail".into()).describe(), UNREACHABLE);
    }
}
