//! The stand-in's image server: the hosts' ISOs over HTTPS with a certificate
//! from its own CA, as metal3's Ironic on the bootstrap serves the images it
//! publishes (`<http_root>/redfish/boot-<node uuid>.iso`, ironic
//! drivers/modules/image_utils.py). The CA and the server's certificate live
//! in `<state>/tls` (shiftlab's BMC TLS material, `crate::redfish::tls`:
//! `ca.crt`, keys 0600); the BMC that fetches the media must trust `ca.crt`.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};

/// Where the image server listens: the loopback, as ironic.sh served them.
pub const LISTEN: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The image server's CA certificate of a stand-in whose state is `state`,
/// created (with the server's certificate) on first use.
pub fn ensure_ca(state: &Path) -> Result<PathBuf> {
    Ok(crate::redfish::tls::ensure(&state.join("tls"), &[LISTEN], &[])?.ca_path)
}

/// The URL path an ISO is published under for a node (Ironic's name for it).
/// Pure.
pub fn published_path(node_uuid: &str) -> String {
    format!("/redfish/boot-{node_uuid}.iso")
}

/// A running image server.
pub struct Images {
    pub base: String,
    listener: crate::httpd::Listener,
}

type Body = http_body_util::Full<Bytes>;

impl Images {
    /// Serves `files` (URL path → file) over HTTPS on the loopback. The
    /// files are read once, here: the stand-in's ISOs are small (docs/standin.md).
    pub async fn start(state: &Path, files: BTreeMap<String, PathBuf>) -> Result<Images> {
        let material = crate::redfish::tls::ensure(&state.join("tls"), &[LISTEN], &[])
            .context("the image server's certificate")?;
        let tls = crate::redfish::tls::server_config(&material)?;
        let mut read: BTreeMap<PathBuf, Bytes> = BTreeMap::new();
        let mut served = BTreeMap::new();
        for (url, path) in files {
            let bytes = match read.get(&path) {
                Some(b) => b.clone(),
                None => {
                    let b = Bytes::from(
                        tokio::fs::read(&path)
                            .await
                            .with_context(|| format!("reading {}", path.display()))?,
                    );
                    read.insert(path, b.clone());
                    b
                }
            };
            served.insert(url, bytes);
        }
        let served = Arc::new(served);
        let listener = crate::httpd::Listener::start(
            SocketAddr::new(LISTEN, 0),
            Some(tls),
            move |req: Request<hyper::body::Incoming>| {
                let r = answer(&served, &req);
                async move { r }
            },
        )
        .await?;
        Ok(Images {
            base: format!("https://{}", listener.local_addr()),
            listener,
        })
    }

    pub async fn stop(self) {
        self.listener.stop().await;
    }
}

/// GET or HEAD of a published ISO; anything else 404 or 405. Pure.
fn answer<B>(files: &BTreeMap<String, Bytes>, req: &Request<B>) -> Response<Body> {
    let head = req.method() == Method::HEAD;
    let (status, body) = match files.get(req.uri().path()) {
        _ if !head && req.method() != Method::GET => (StatusCode::METHOD_NOT_ALLOWED, None),
        Some(b) => (StatusCode::OK, Some(b.clone())),
        None => (StatusCode::NOT_FOUND, None),
    };
    let len = body.as_ref().map_or(0, |b| b.len());
    let mut r = Response::new(Body::new(match body {
        Some(b) if !head => b,
        _ => Bytes::new(),
    }));
    *r.status_mut() = status;
    if status == StatusCode::OK {
        let h = r.headers_mut();
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-iso9660-image"),
        );
        h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_isos_only_get_and_head() {
        let files = BTreeMap::from([(published_path("u1"), Bytes::from_static(b"iso!"))]);
        let req = |m: Method, p: &str| Request::builder().method(m).uri(p).body(()).unwrap();
        let r = answer(&files, &req(Method::GET, "/redfish/boot-u1.iso"));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[CONTENT_LENGTH], "4");
        let r = answer(&files, &req(Method::HEAD, "/redfish/boot-u1.iso"));
        assert_eq!(
            (r.status(), &r.headers()[CONTENT_LENGTH]),
            (StatusCode::OK, &HeaderValue::from(4))
        );
        let r = answer(&files, &req(Method::GET, "/redfish/../boot-u1.iso"));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = answer(&files, &req(Method::POST, "/redfish/boot-u1.iso"));
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
