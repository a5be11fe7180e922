//! The server side of the control socket `<state>/serve.sock`: bound 0600 by
//! the one serve of a state directory, a bounded number of connections at once,
//! each one request line in and one answer out within a deadline. The protocol
//! (`Request`, `Response`) and the client are `crate::serve::control`.

use std::os::unix::fs::PermissionsExt as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};

use crate::serve::control::{self, Request, Response};
use crate::state::StateDir;

/// Bind the state directory's control socket, mode 0600; refused while another
/// serve answers on it (a socket file nobody answers on is stale and replaced).
pub(super) fn bind(state: &StateDir) -> Result<UnixListener> {
    let sock = state.serve_socket();
    if control::request(state, &Request::Ping)?.is_some() {
        bail!("serve is already running for {}", state.root.display());
    }
    let _ = std::fs::remove_file(&sock);
    let listener =
        UnixListener::bind(&sock).with_context(|| format!("binding {}", sock.display()))?;
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("restricting {}", sock.display()))?;
    Ok(listener)
}

/// Control connections served at once; more are closed at once (the CLI
/// sends one request per connection, a handful at a time).
const CONTROL_MAX: usize = 32;
/// How long a control client has to send its request line, and to take the answer.
const CONTROL_IO_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request line read (a request is a few dozen bytes).
const CONTROL_MAX_LINE: u64 = 64 * 1024;

/// Answer control connections until the task is aborted: one request line
/// each, handed to the daemon's loop through `tx`, its answer written back.
pub(super) async fn accept(
    listener: UnixListener,
    tx: mpsc::Sender<(Request, oneshot::Sender<Response>)>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONTROL_MAX));
    let mut refusals = crate::httpd::RefusalLog::default();
    let mut errors = crate::httpd::RefusalLog::default();
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                if let Some(n) = errors.note(Instant::now(), crate::httpd::REFUSAL_LOG_EVERY) {
                    tracing::warn!(error = %e, errors = n, "accepting on the control socket");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            if let Some(n) = refusals.note(Instant::now(), crate::httpd::REFUSAL_LOG_EVERY) {
                tracing::warn!(
                    refused = n,
                    cap = CONTROL_MAX,
                    "control connections refused over the cap"
                );
            }
            continue;
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let (r, mut w) = stream.into_split();
            let mut line = String::new();
            let mut reader = tokio::io::BufReader::new(r).take(CONTROL_MAX_LINE);
            let read = tokio::time::timeout(CONTROL_IO_TIMEOUT, reader.read_line(&mut line));
            if !matches!(read.await, Ok(Ok(n)) if n > 0) {
                return;
            }
            let resp = match serde_json::from_str::<Request>(&line) {
                Ok(req) => {
                    let (rtx, rrx) = oneshot::channel();
                    if tx.send((req, rtx)).await.is_err() {
                        return;
                    }
                    match rrx.await {
                        Ok(r) => r,
                        Err(_) => return,
                    }
                }
                Err(e) => Response::error(&anyhow!("bad request: {e}"), Vec::new()),
            };
            let mut out = serde_json::to_string(&resp).unwrap_or_default();
            out.push('\n');
            let _ = tokio::time::timeout(CONTROL_IO_TIMEOUT, w.write_all(out.as_bytes())).await;
        });
    }
}
