//! Bounded parallelism for libvirt calls on one connection.
//!
//! libvirtd serves at most `max_client_requests` calls of one client
//! connection at a time (default 5; `src/remote/libvirtd.conf.in` in libvirt:
//! "Limit on concurrent requests from a single client connection"); further
//! calls wait in the daemon, and a wait behind a slow `virDomainCreate` makes
//! every other call of the connection stall with it. shiftlab therefore runs
//! at most [`WORKERS`] calls at once: one slot stays free for keepalive
//! and the connection's other users.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Calls in flight on one connection: below libvirtd's default
/// `max_client_requests` (5).
pub const WORKERS: usize = 4;

/// `f` over every item, at most `workers` at a time, results in the items'
/// order. A panicking call becomes `on_panic()`'s value.
pub fn map_bounded<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&T) -> R + Sync,
    on_panic: impl Fn() -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let workers = workers.clamp(1, items.len().max(1));
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(item) = items.get(i) else {
                            return mine;
                        };
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(item)))
                            .unwrap_or_else(|_| on_panic());
                        mine.push((i, r));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn never_more_than_the_bound_in_flight_and_results_in_order() {
        let items: Vec<usize> = (0..40).collect();
        let (now, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let out = map_bounded(
            &items,
            WORKERS,
            |i| {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                std::thread::yield_now();
                now.fetch_sub(1, Ordering::SeqCst);
                if *i == 7 {
                    panic!("boom");
                }
                Some(i * 2)
            },
            || None,
        );
        assert!(peak.load(Ordering::SeqCst) <= WORKERS);
        assert_eq!(out.len(), 40);
        assert_eq!(out[7], None, "a panic is the on_panic value");
        assert_eq!(out[39], Some(78));
        assert!(map_bounded(&[] as &[u8], 4, |_| 1, || 0).is_empty());
    }
}
