//! The limit row of `bench/bmc`: the least an HTTP server built like shiftlab's
//! BMC (tokio with 2 worker threads, the accept loop on a worker, hyper's
//! HTTP/1 connection, TCP_NODELAY) can do per request: answer every request
//! with a fixed JSON body of the given size, with no routing, no auth, no
//! resource rendering.
//!
//!     cargo run --release --example bmc_limit -- 127.0.0.1:8301 2200

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(size)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: bmc_limit ADDR BODY-BYTES");
    };
    let size: usize = size.parse()?;
    // a JSON string of exactly `size` bytes: {"x":"aaa…"}
    let body = Bytes::from(format!(
        "{{\"x\":\"{}\"}}",
        "a".repeat(size.saturating_sub(8))
    ));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(async move {
            let listener = tokio::net::TcpListener::bind(&addr).await?;
            eprintln!("limit server on http://{addr}/ ({} bytes)", body.len());
            // The accept loop runs on a worker, as shiftlab's does (src/httpd.rs):
            // a connection's task then starts on the worker that accepted it.
            // Accepting in `block_on` itself hands every connection to the
            // workers from outside, which costs a cross-thread wake-up each.
            tokio::spawn(accept_loop(listener, body)).await?
        })
}

async fn accept_loop(listener: tokio::net::TcpListener, body: Bytes) -> anyhow::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let body = body.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |_req: Request<hyper::body::Incoming>| {
                let body = body.clone();
                async move {
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("Content-Type", "application/json")
                            .body(Full::new(body))
                            .expect("static response"),
                    )
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
