//! Settings that reach the cluster only as shiftlab's own manifests
//! (render::manifests::lab_manifests). Only UPI's flow has a manifests target
//! today: SNO (`create single-node-ignition-config`), the agent image and IPI's
//! `create cluster` are run without one, so these settings would be dropped
//! without a word there. Refused instead, naming the field (`users:` has its own
//! check in users.rs); `storage` is a warning, as its host half still holds.

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
    // The host's export still serves the subnet (a provisioner of the user's own
    // can use it), so half of `storage: nfs` holds: said, not refused.
    if let Some(s) = raw.storage.as_ref().filter(|s| s.v != "none") {
        d.warn(
            &s.field,
            why(&format!(
                "the provisioner, default StorageClass and claims of storage {:?}; only the host's export is made (docs/storage.md)",
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

#[cfg(test)]
mod tests {
    use crate::spec::{self, Env};

    fn problems(extra: &str) -> (bool, String) {
        let text = format!(
            "cluster: lab1\ndomain: lab.test\ndistribution: okd\nrehearsal: true\nmethod: sno\nctlplanes: 1\n{extra}"
        );
        match spec::from_str(&text, "t.yaml", &Env::default()) {
            Ok(r) => (true, format!("{:?}", r.warnings)),
            Err(e) => (false, format!("{e:#}")),
        }
    }

    #[test]
    fn storage_on_sno_is_a_warning_naming_what_is_left_out() {
        let (ok, text) = problems("storage: nfs\n");
        assert!(ok, "{text}");
        assert!(text.contains("only the host's export is made"), "{text}");
        let (ok, text) = problems("ntp_servers: [ntp.lab.test]\n");
        assert!(
            !ok && text.contains("method sno adds no manifests"),
            "{text}"
        );
    }
}
