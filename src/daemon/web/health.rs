//! The health panel's data, kept off the request path: a request takes the
//! last result at once and, when it is older than [`REFRESH`], starts a new
//! read of the API in the background ([`crate::kube::health::fetch`]). A page
//! never waits on a cluster that is down; it shows "checking" first, then the
//! health or why the API is not reachable.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::kube::health::{fetch, Health};

/// How old a result may be before a request starts a new read.
pub const REFRESH: Duration = Duration::from_secs(5);

/// The whole read (every list) gives up after this.
pub const DEADLINE: Duration = Duration::from_secs(8);

/// What the panel shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Panel {
    /// The installer has not written the admin kubeconfig.
    NoKubeconfig,
    /// The first read is under way.
    Checking,
    Unreachable {
        reason: String,
    },
    Ok(Box<Health>),
}

#[derive(Default)]
struct Entry {
    panel: Option<Panel>,
    at: Option<Instant>,
    busy: bool,
}

/// The last panel of each cluster, by kubeconfig path.
#[derive(Default)]
pub struct Cache {
    by_path: Mutex<HashMap<PathBuf, Entry>>,
}

impl Cache {
    /// The panel of the cluster whose admin kubeconfig is `kubeconfig` (a file
    /// or not yet); a read started when due. Needs a Tokio runtime.
    pub fn current(self: &Arc<Self>, kubeconfig: &Path) -> Panel {
        if !kubeconfig.is_file() {
            self.by_path.lock().unwrap().remove(kubeconfig);
            return Panel::NoKubeconfig;
        }
        let mut map = self.by_path.lock().unwrap();
        let e = map.entry(kubeconfig.to_path_buf()).or_default();
        let due = e.at.is_none_or(|at| at.elapsed() >= REFRESH);
        if due && !e.busy {
            e.busy = true;
            let cache = self.clone();
            let path = kubeconfig.to_path_buf();
            tokio::spawn(async move {
                let panel = read(&path).await;
                let mut map = cache.by_path.lock().unwrap();
                let e = map.entry(path).or_default();
                e.panel = Some(panel);
                e.at = Some(Instant::now());
                e.busy = false;
            });
        }
        e.panel.clone().unwrap_or(Panel::Checking)
    }
}

async fn read(kubeconfig: &Path) -> Panel {
    match tokio::time::timeout(DEADLINE, fetch(kubeconfig)).await {
        Ok(Ok(h)) => Panel::Ok(Box::new(h)),
        Ok(Err(e)) => {
            tracing::debug!(kubeconfig = %kubeconfig.display(), error = %format!("{e:#}"), "cluster health");
            Panel::Unreachable {
                reason: format!("{e:#}"),
            }
        }
        Err(_) => Panel::Unreachable {
            reason: format!("no answer within {} s", DEADLINE.as_secs()),
        },
    }
}
