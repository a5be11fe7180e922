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
//! holder of the certificate shown.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::machine::MachineError;
use super::source::{self, ImageSources, UNREACHABLE};

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;

/// Fetches images for one BMC.
pub struct Fetcher {
    agent: ureq::Agent,
}

impl Fetcher {
    /// A fetcher under `sources`; `media_ca` (a PEM file) turns certificate
    /// verification on against the CAs in it.
    pub fn new(sources: ImageSources, media_ca: Option<&Path>) -> Result<Fetcher> {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(10))
            .timeout_read(Duration::from_secs(60))
            .redirects(0)
            .resolver(source::Resolver(Arc::new(sources)))
            .tls_config(client_tls(media_ca)?)
            .build();
        Ok(Fetcher { agent })
    }

    /// GETs `url` with `headers`, following up to [`MAX_REDIRECTS`]
    /// redirects. A source refused or unreachable at any hop is
    /// [`UNREACHABLE`] to the client, the reason in the log.
    pub fn get(&self, url: &str, headers: &[(&str, &str)]) -> Result<ureq::Response, MachineError> {
        let mut next = source::check_url(url)
            .map_err(|r| unreachable(source::written_host(url).unwrap_or(""), &r))?;
        for hop in 0..=MAX_REDIRECTS {
            let host = next.host_str().unwrap_or("").to_string();
            let mut req = self.agent.request_url("GET", &next);
            for (k, v) in headers {
                req = req.set(k, v);
            }
            match req.call() {
                Ok(resp) if is_redirect(resp.status()) => {
                    let Some(location) = resp.header("Location") else {
                        return Err(MachineError::BadRequest(format!(
                            "the image server answered HTTP {} without a Location",
                            resp.status()
                        )));
                    };
                    next = source::check_redirect(&next, location)
                        .map_err(|r| unreachable(&host, &format!("redirect: {r}")))?;
                }
                Ok(resp) => return Ok(resp),
                Err(ureq::Error::Status(code, _)) => {
                    return Err(MachineError::BadRequest(format!(
                        "fetching the image failed: HTTP {code}"
                    )))
                }
                Err(ureq::Error::Transport(t)) => {
                    let reason = match hop {
                        0 => cause(&t),
                        n => format!("after {n} redirect(s): {}", cause(&t)),
                    };
                    return Err(unreachable(&host, &reason));
                }
            }
        }
        Err(MachineError::BadRequest(format!(
            "the image server redirected more than {MAX_REDIRECTS} times"
        )))
    }
}

/// Checks a `--media-ca` file at start: readable, with a certificate.
pub fn check_media_ca(path: &Path) -> Result<()> {
    client_tls(Some(path)).map(|_| ())
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Logs why a source cannot be fetched from; the client's error says only
/// that it cannot.
fn unreachable(host: &str, reason: &str) -> MachineError {
    tracing::warn!(%host, reason, "image source refused or unreachable");
    MachineError::BadRequest(UNREACHABLE.into())
}

/// A transport error's kind, message and causes, without its URL (which
/// may carry a password).
fn cause(t: &ureq::Transport) -> String {
    let mut s = t.kind().to_string();
    if let Some(m) = t.message() {
        s.push_str(": ");
        s.push_str(m);
    }
    let mut source = std::error::Error::source(t);
    while let Some(e) = source {
        s.push_str(": ");
        s.push_str(&e.to_string());
        source = e.source();
    }
    s
}

fn client_tls(media_ca: Option<&Path>) -> Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("tls protocol versions")?;
    let config = match media_ca {
        Some(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("reading --media-ca {}", path.display()))?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert
                    .with_context(|| format!("--media-ca {}: a bad PEM block", path.display()))?;
                roots
                    .add(cert)
                    .with_context(|| format!("--media-ca {}: a bad certificate", path.display()))?;
            }
            if roots.is_empty() {
                bail!(
                    "--media-ca {}: no PEM certificate in it; give the CA that signed the image servers' certificates",
                    path.display()
                );
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
    };
    Ok(Arc::new(config))
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
    use std::io::Read as _;
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

    fn body(resp: ureq::Response) -> String {
        let mut s = String::new();
        resp.into_reader().read_to_string(&mut s).unwrap();
        s
    }

    fn refused(r: Result<ureq::Response, MachineError>) -> String {
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
            // unreachable looks the same as refused
            format!("http://127.0.0.1:{closed}/x.iso"),
        ];
        if let Some(v6) = &v6 {
            urls.push(format!("http://[::1]:{}/x.iso", v6.addr.port()));
        }
        for url in &urls {
            assert_eq!(refused(f.get(url, &[])), UNREACHABLE, "{url}");
        }
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
        // with another CA: refused, and the client hears only that
        let f = Fetcher::new(sources.clone(), Some(&other.ca_path)).unwrap();
        assert_eq!(refused(f.get(&url, &[])), UNREACHABLE);

        // a CA file with no certificate is refused at start
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = Fetcher::new(sources, Some(&empty)).err().unwrap();
        assert!(format!("{e:#}").contains("no PEM certificate"), "{e:#}");
    }
}
