//! Settings that reach the cluster only as shiftlab's own manifests
//! (render::manifests::lab_manifests). Only UPI's flow has a manifests target
//! today: SNO (`create single-node-ignition-config`), the agent image and IPI's
//! `create cluster` are run without one, so these settings would be dropped
//! without a word there. Refused instead, naming the field (`users:` has its own
//! check in users.rs).

use super::super::diag::Diagnostics;
use super::super::parse::RawSpec;
use super::super::types::Method;

pub fn check(raw: &RawSpec, method: Method, d: &mut Diagnostics) {
    if method == Method::Upi {
        return;
    }
    let why = |what: &str| {
        format!(
            "method {method} adds no manifests of shiftlab's yet, so {what} would not reach the cluster; only method upi (and a compact cluster) has them"
        )
    };
    if let Some(s) = raw.storage.as_ref().filter(|s| s.v != "none") {
        d.error(
            &s.field,
            why(&format!(
                "storage {:?} (its provisioner and StorageClass, docs/storage.md)",
                s.v
            )),
        );
    }
    if let Some(r) = &raw.monitoring.retention {
        d.error(&r.field, why("the monitoring retention (docs/storage.md)"));
    }
    if let Some(n) = raw.ntp_servers.as_ref().filter(|n| !n.v.is_empty()) {
        d.error(&n.field, why("the chrony configuration (docs/time.md)"));
    }
    if let Some(h) = raw.host_ntp.as_ref().filter(|h| h.v) {
        d.error(
            &h.field,
            why("the nodes' chrony configuration (docs/time.md)"),
        );
    }
}
