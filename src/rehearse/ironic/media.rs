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
use http_body_util::BodyExt as _;
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

impl Images {
    /// Serves `files` (URL path → file) over HTTPS on the loopback.
    pub async fn start(state: &Path, files: BTreeMap<String, PathBuf>) -> Result<Images> {
        let material = crate::redfish::tls::ensure(&state.join("tls"), &[LISTEN], &[])
            .context("the image server's certificate")?;
        let tls = crate::redfish::tls::server_config(&material)?;
        let files = Arc::new(files);
        let listener = crate::httpd::Listener::start(
            SocketAddr::new(LISTEN, 0),
            Some(tls),
            move |req: Request<hyper::body::Incoming>| {
                let files = files.clone();
                async move { answer(&files, req).await }
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

async fn answer(
    files: &BTreeMap<String, PathBuf>,
    req: Request<hyper::body::Incoming>,
) -> Response<crate::daemon::http::HttpBody> {
    let head = req.method() == Method::HEAD;
    let found = (req.method() == Method::GET || head)
        .then(|| files.get(req.uri().path()))
        .flatten();
    let status = match found {
        Some(path) => match crate::daemon::http::serve_file(path, &req, head).await {
            Ok(r) => return r,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "serving an image");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        },
        None => StatusCode::NOT_FOUND,
    };
    let mut r = Response::new(
        http_body_util::Full::new(bytes::Bytes::new())
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r
}
