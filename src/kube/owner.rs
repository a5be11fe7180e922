//! What marks a Kubernetes object as shiftlab's: the owner label with the
//! cluster name, the standard "managed by" label, and the field manager of
//! server-side apply. The KubeVirt backend labels every object it makes with
//! them and destroy removes exactly what carries them; the BareMetalHosts that
//! `scale` adds carry the owner label too.

use serde_json::{json, Map, Value};

/// The owner label: every object shiftlab creates carries it with the cluster
/// name, and destroy removes exactly what carries it.
pub const OWNER_LABEL: &str = "shiftlab.io/cluster";
/// The standard "managed by" label (Kubernetes recommended labels), also set.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The server-side apply field manager.
pub const FIELD_MANAGER: &str = "shiftlab";

/// The labels every object carries.
pub fn owner_labels(cluster: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(MANAGED_BY.into(), json!("shiftlab"));
    m.insert(OWNER_LABEL.into(), json!(cluster));
    m
}

/// The label selector that finds exactly a cluster's objects.
pub fn owner_selector(cluster: &str) -> String {
    format!("{MANAGED_BY}=shiftlab,{OWNER_LABEL}={cluster}")
}
