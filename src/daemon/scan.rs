//! What one scan of the state directory says about each cluster, and which
//! served clusters it proves gone. Only a positive fact retires a cluster: its
//! directory or its `plan.json` is absent. A scan that could not look (out of
//! descriptors, a permission, an I/O error) proves nothing: the cluster goes
//! on being served as it is and the next scan looks again. A cluster with a
//! plan is still not served once `forget` retired that very plan
//! ([`is_retired`]).

use std::collections::BTreeMap;

use anyhow::{Context, Result};

use crate::serve::plan_identity;
use crate::state::{ClusterDir, StateDir};

/// One cluster directory as the scan found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// It has a plan to serve.
    Planned,
    /// Its `plan.json` is absent.
    Absent,
    /// Looking failed; the error, for the log.
    Unknown(String),
}

/// Every cluster directory under `<state>/clusters`, by name. `Err` when the
/// directory itself could not be listed.
pub fn clusters(state: &StateDir) -> Result<BTreeMap<String, Presence>> {
    Ok(state
        .cluster_dirs()?
        .into_iter()
        .map(|c| {
            let p = match c.has_plan() {
                Ok(true) => Presence::Planned,
                Ok(false) => Presence::Absent,
                Err(e) => Presence::Unknown(format!("{e:#}")),
            };
            (c.name().to_string(), p)
        })
        .collect())
}

/// The served clusters a scan proves gone: listed without a plan, or not
/// listed at all. A failed scan proves nothing gone.
pub fn gone<E>(served: &[String], scan: &Result<BTreeMap<String, Presence>, E>) -> Vec<String> {
    let Ok(found) = scan else {
        return Vec::new();
    };
    served
        .iter()
        .filter(|n| matches!(found.get(n.as_str()), None | Some(Presence::Absent)))
        .cloned()
        .collect()
}

/// Whether there is nothing to serve: no `plan.json`, or `crate::serve::forget_cluster`
/// retired this very one (a plan written again, by create after a failed
/// destroy, is served again). A failure to look is an error, never "retired".
pub fn is_retired(cluster: &ClusterDir) -> Result<bool> {
    let Some(id) = plan_identity(cluster)? else {
        return Ok(true);
    };
    match std::fs::read_to_string(cluster.serve_stopped()) {
        Ok(m) => Ok(m.trim() == id),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("reading {}", cluster.serve_stopped().display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_error_is_never_gone() {
        let served = names(&["lab1", "lab2"]);
        let failed: Result<BTreeMap<String, Presence>, String> =
            Err("reading clusters: Too many open files (os error 24)".into());
        assert!(gone(&served, &failed).is_empty());
        let found: Result<_, String> = Ok(BTreeMap::from([
            ("lab1".to_string(), Presence::Unknown("EMFILE".into())),
            ("lab2".to_string(), Presence::Planned),
        ]));
        assert!(gone(&served, &found).is_empty());
    }

    #[test]
    fn only_an_absent_plan_or_directory_is_gone() {
        let served = names(&["lab1", "lab2", "lab3"]);
        let found: Result<_, String> = Ok(BTreeMap::from([
            ("lab1".to_string(), Presence::Planned),
            ("lab2".to_string(), Presence::Absent),
            ("new".to_string(), Presence::Planned),
        ]));
        assert_eq!(gone(&served, &found), names(&["lab2", "lab3"]));
        assert!(gone(&[], &found).is_empty());
    }

    #[test]
    fn the_scan_reads_plans_and_absences() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: d.path().into(),
        };
        assert!(clusters(&state).unwrap().is_empty(), "no clusters/ yet");
        std::fs::create_dir_all(state.cluster("lab1").path()).unwrap();
        std::fs::write(state.cluster("lab1").plan(), "{}").unwrap();
        std::fs::create_dir_all(state.cluster("lab2").path()).unwrap();
        // A plan.json that cannot be looked at (its place a file's child).
        std::fs::write(state.cluster("lab3").path(), "x").unwrap();
        let found = clusters(&state).unwrap();
        assert_eq!(found["lab1"], Presence::Planned);
        assert_eq!(found["lab2"], Presence::Absent);
        assert!(matches!(&found["lab3"], Presence::Unknown(e) if e.contains("plan.json")));
        let served = names(&["lab1", "lab2", "lab3"]);
        assert_eq!(gone(&served, &Ok::<_, String>(found)), names(&["lab2"]));
    }
}
