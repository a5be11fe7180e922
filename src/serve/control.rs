//! The control socket `<state>/serve.sock` (mode 0600): its protocol, one JSON
//! request per line and one JSON response per line ([`Request`], [`Response`]),
//! and the client ([`request`]). The CLI pokes serve through it after create
//! and destroy; serve also rescans the state on its own, so a missed poke only
//! delays. The server side is the daemon's (`crate::daemon`'s `control.rs`).

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::state::{ClusterName, StateDir};

/// How long a client waits for serve's answer (a reload waits for HAProxy).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    Ping,
    /// Look at the state now: one cluster, or all.
    Reconcile {
        cluster: Option<ClusterName>,
    },
    /// Stop serving a cluster and remove its host DNS entries.
    Forget {
        cluster: ClusterName,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Clusters served after the request.
    #[serde(default)]
    pub clusters: Vec<String>,
}

impl Response {
    pub fn ok(clusters: Vec<String>) -> Self {
        Response {
            ok: true,
            error: None,
            clusters,
        }
    }
    pub fn error(e: &anyhow::Error, clusters: Vec<String>) -> Self {
        Response {
            ok: false,
            error: Some(format!("{e:#}")),
            clusters,
        }
    }
}

/// Send one request to a running serve. `Ok(None)` when none is listening.
pub fn request(state: &StateDir, req: &Request) -> Result<Option<Response>> {
    let path = state.serve_socket();
    let mut s = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e).with_context(|| format!("connecting to {}", path.display())),
    };
    s.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    s.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut line = serde_json::to_string(req)?;
    line.push('\n');
    s.write_all(line.as_bytes())
        .context("writing to the serve control socket")?;
    let mut answer = String::new();
    BufReader::new(s)
        .read_line(&mut answer)
        .context("reading the serve control socket")?;
    let r = serde_json::from_str(&answer)
        .with_context(|| format!("parsing serve's answer {answer:?}"))?;
    Ok(Some(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format() {
        let r = Request::Reconcile {
            cluster: Some(ClusterName::parse("lab1").unwrap()),
        };
        let t = serde_json::to_string(&r).unwrap();
        assert_eq!(t, r#"{"op":"reconcile","cluster":"lab1"}"#);
        assert_eq!(serde_json::from_str::<Request>(&t).unwrap(), r);
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"op":"ping"}"#).unwrap(),
            Request::Ping
        );
        assert!(serde_json::from_str::<Request>(r#"{"op":"rm -rf"}"#).is_err());
        // Names are checked before anything reaches the state directory.
        for bad in ["", ".", "..", "/tmp/x", "a/../b", "a/b", "é"] {
            for req in [
                format!(r#"{{"op":"forget","cluster":{bad:?}}}"#),
                format!(r#"{{"op":"reconcile","cluster":{bad:?}}}"#),
            ] {
                let e = serde_json::from_str::<Request>(&req).unwrap_err();
                assert!(
                    e.to_string().contains("not a valid cluster name"),
                    "{req}: {e}"
                );
            }
        }
    }

    #[test]
    fn no_serve_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: dir.path().into(),
        };
        assert_eq!(request(&state, &Request::Ping).unwrap(), None);
    }
}
