//! InsertMedia calls in flight: one per slot, and a few downloads at once.
//!
//! A slot is marked busy before its image is fetched, so a second insert
//! into it is refused at once (409) instead of fetching the image again.
//! At most [`MAX_DOWNLOADS`] inserts download at once over all systems; the
//! others wait their turn rather than being refused, because Ironic inserts
//! into every host at once and sushy retries no POST: a refusal would fail
//! the deployment of every host past the few. The waiters are bounded by
//! the slots (one each) and by [`MAX_WAIT`], after which the answer is 503
//! with `Retry-After`.

use std::collections::HashSet;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::error::RedfishError;
use super::model::MediaSlot;

/// Most inserts (image downloads) running at once, over all systems.
pub const MAX_DOWNLOADS: usize = 4;
/// Longest an insert waits for a download to finish before it is refused.
pub const MAX_WAIT: Duration = Duration::from_secs(300);
/// Seconds a refused waiter is told to wait before retrying.
pub const RETRY_AFTER_SECS: u64 = 30;

#[derive(Debug, Default)]
struct State {
    busy: HashSet<(String, MediaSlot)>,
    downloading: usize,
    waiting: usize,
}

/// The slots with an insert under way, and the downloads running.
#[derive(Debug)]
pub struct Inserts {
    max: usize,
    max_wait: Duration,
    state: Mutex<State>,
    freed: Condvar,
}

impl Default for Inserts {
    fn default() -> Self {
        Inserts::new(MAX_DOWNLOADS, MAX_WAIT)
    }
}

/// A slot held busy, and a download running, until dropped.
#[derive(Debug)]
pub struct Held<'a> {
    inserts: &'a Inserts,
    key: (String, MediaSlot),
}

impl Inserts {
    pub fn new(max: usize, max_wait: Duration) -> Self {
        Inserts {
            max,
            max_wait,
            state: Mutex::default(),
            freed: Condvar::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `system`'s `slot` busy and waits for a download to be free
    /// (blocking: call it off an event loop), or says why it cannot.
    pub fn begin(&self, system: &str, slot: MediaSlot) -> Result<Held<'_>, RedfishError> {
        let key = (system.to_string(), slot);
        let mut st = self.state();
        if st.busy.contains(&key) {
            return Err(RedfishError::conflict(
                "an insert into this slot is already under way; wait for it, then eject first",
            ));
        }
        st.busy.insert(key.clone());
        st.waiting += 1;
        let (mut st, _) = self
            .freed
            .wait_timeout_while(st, self.max_wait, |s| s.downloading >= self.max)
            .unwrap_or_else(|e| e.into_inner());
        st.waiting -= 1;
        if st.downloading >= self.max {
            st.busy.remove(&key);
            return Err(RedfishError::unavailable(format!(
                "{} image downloads have been under way for {} s; retry later",
                self.max,
                self.max_wait.as_secs()
            ))
            .header("Retry-After", RETRY_AFTER_SECS.to_string()));
        }
        st.downloading += 1;
        Ok(Held { inserts: self, key })
    }

    /// Inserts waiting for a download to be free.
    pub fn waiting(&self) -> usize {
        self.state().waiting
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut st = self.inserts.state();
        st.busy.remove(&self.key);
        st.downloading -= 1;
        drop(st);
        self.inserts.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    fn eventually(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < deadline, "never saw: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn one_insert_per_slot_and_the_rest_wait_for_a_download() {
        let inserts = Arc::new(Inserts::new(2, Duration::from_secs(60)));
        let a = inserts.begin("a", MediaSlot::Cd).unwrap();
        assert_eq!(inserts.begin("a", MediaSlot::Cd).unwrap_err().status, 409);
        let b = inserts.begin("b", MediaSlot::Cd).unwrap();
        // a third waits, holding its slot meanwhile
        let i = inserts.clone();
        let c = std::thread::spawn(move || {
            i.begin("c", MediaSlot::Cd)
                .map(|_| ())
                .map_err(|e| e.status)
        });
        eventually("the third insert waiting", || inserts.waiting() == 1);
        assert_eq!(inserts.begin("c", MediaSlot::Cd).unwrap_err().status, 409);
        drop(a);
        assert_eq!(c.join().unwrap(), Ok(()));
        assert_eq!(inserts.waiting(), 0);
        // a finished insert frees its slot
        drop(inserts.begin("a", MediaSlot::Cd).unwrap());
        drop(b);
        assert!(inserts.state().busy.is_empty());
        assert_eq!(inserts.state().downloading, 0);
    }

    #[test]
    fn a_waiter_is_refused_with_retry_after_once_its_wait_is_over() {
        let inserts = Inserts::new(1, Duration::from_millis(50));
        let _a = inserts.begin("a", MediaSlot::Cd).unwrap();
        let e = inserts.begin("b", MediaSlot::Cd).unwrap_err();
        assert_eq!(e.status, 503);
        assert!(e
            .headers
            .iter()
            .any(|(k, v)| *k == "Retry-After" && v == "30"));
        // its slot is free again: the next try waits anew instead of a 409
        assert_eq!(inserts.begin("b", MediaSlot::Cd).unwrap_err().status, 503);
        assert_eq!(inserts.waiting(), 0);
    }
}
