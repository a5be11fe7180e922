//! InsertMedia calls in flight: one per slot, and a few in all. A slot is
//! marked busy before its image is fetched, so a second insert into it is
//! refused at once (409) instead of fetching the image again; past
//! [`MAX_IN_FLIGHT`] downloads over all slots the BMC is busy (503 with
//! Retry-After): the request is valid and the slot free, it only has to
//! come back later.

use std::collections::HashSet;
use std::sync::Mutex;

use super::error::RedfishError;
use super::model::MediaSlot;

/// Most inserts (image downloads) in flight at once, over all systems.
pub const MAX_IN_FLIGHT: usize = 4;
/// Seconds a client is told to wait when [`MAX_IN_FLIGHT`] is reached.
pub const RETRY_AFTER_SECS: u64 = 30;

/// The slots with an insert under way.
#[derive(Debug, Default)]
pub struct Inserts {
    busy: Mutex<HashSet<(String, MediaSlot)>>,
}

/// A slot held busy until dropped.
#[derive(Debug)]
pub struct Held<'a> {
    inserts: &'a Inserts,
    key: (String, MediaSlot),
}

impl Inserts {
    fn busy(&self) -> std::sync::MutexGuard<'_, HashSet<(String, MediaSlot)>> {
        self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `system`'s `slot` busy, or says why it cannot be.
    pub fn begin(&self, system: &str, slot: MediaSlot) -> Result<Held<'_>, RedfishError> {
        let key = (system.to_string(), slot);
        let mut busy = self.busy();
        if busy.contains(&key) {
            return Err(RedfishError::conflict(
                "an insert into this slot is already under way; wait for it, then eject first",
            ));
        }
        if busy.len() >= MAX_IN_FLIGHT {
            return Err(RedfishError::unavailable(format!(
                "{MAX_IN_FLIGHT} image downloads are under way; retry later"
            ))
            .header("Retry-After", RETRY_AFTER_SECS.to_string()));
        }
        busy.insert(key.clone());
        Ok(Held { inserts: self, key })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.inserts.busy().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_insert_per_slot_and_a_few_in_all() {
        let inserts = Inserts::default();
        let first = inserts.begin("a", MediaSlot::Cd).unwrap();
        assert_eq!(inserts.begin("a", MediaSlot::Cd).unwrap_err().status, 409);
        let others: Vec<_> = (1..MAX_IN_FLIGHT)
            .map(|i| inserts.begin(&format!("s{i}"), MediaSlot::Cd).unwrap())
            .collect();
        let full = inserts.begin("z", MediaSlot::Cd).unwrap_err();
        assert_eq!(full.status, 503);
        assert!(full
            .headers
            .iter()
            .any(|(k, v)| *k == "Retry-After" && v == "30"));
        // a finished insert frees its slot and its share of the total
        drop(first);
        let again = inserts.begin("a", MediaSlot::Cd).unwrap();
        drop(again);
        drop(others);
        assert!(inserts.busy().is_empty());
    }
}
