//! The tokio runtimes, built one way: a current-thread runtime for the blocking
//! callers (commands and install targets are synchronous and wait on one
//! future at a time) and a multi-thread one for what serves while it works
//! (the daemons, a machine that answers Redfish while it waits on the API).

use std::future::Future;

use anyhow::{Context, Result};

/// A current-thread runtime, for a caller that blocks on several futures.
pub fn current_thread() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Run `fut` to its end on a current-thread runtime of its own.
pub fn block_on<T>(fut: impl Future<Output = Result<T>>) -> Result<T> {
    current_thread()?.block_on(fut)
}

/// A multi-thread runtime with `workers` worker threads.
pub fn multi_thread(workers: usize) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// The runtime a daemon (serve, bmc) runs on: two workers, so that a slow
/// request (a libvirt call) does not hold up the rest.
pub fn daemon() -> Result<tokio::runtime::Runtime> {
    multi_thread(2)
}
