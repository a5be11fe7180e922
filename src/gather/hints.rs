//! What `gather` recognises in what it collected: a symptom, its usual cause, and
//! the section of docs/troubleshooting.md that says what to do. Pure: the inputs
//! are texts and doctor's checks.

use serde::Serialize;

use crate::doctor::{Check, Severity};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hint {
    /// The troubleshooting section (`docs/troubleshooting.md#<id>`).
    pub id: &'static str,
    pub symptom: String,
    pub hint: &'static str,
}

/// What the hints look at.
#[derive(Debug, Default)]
pub struct Evidence<'a> {
    /// `openshift-install.log` (shiftlab's copy of every run) and the asset
    /// directory's `.openshift_install.log`.
    pub installer_log: &'a str,
    /// QEMU's own log per domain (`/var/log/libvirt/qemu/<domain>.log`) and the
    /// serial console logs, by node.
    pub node_logs: Vec<(String, &'a str)>,
    pub doctor: &'a [Check],
    /// Pending CSRs of the plan's nodes, when the API answered.
    pub pending_csrs: Option<usize>,
}

fn any_line(text: &str, pred: impl Fn(&str) -> bool) -> Option<&str> {
    text.lines().find(|l| pred(l))
}

pub fn hints(e: &Evidence) -> Vec<Hint> {
    let mut out = Vec::new();
    let log = e.installer_log;
    if let Some(l) = any_line(log, |l| {
        let l = l.to_lowercase();
        l.contains("bootstrap")
            && (l.contains("failed to complete")
                || l.contains("timed out waiting for the condition")
                || l.contains("context deadline exceeded"))
    }) {
        out.push(Hint {
            id: "bootstrap-stuck",
            symptom: format!("installer: {}", l.trim()),
            hint: "the bootstrap did not finish (often stuck in cluster-bootstrap): look at bootstrap-gather/ in this tarball and follow the manual recovery",
        });
    }
    for (node, text) in &e.node_logs {
        if let Some(l) = any_line(text, |l| {
            l.contains("Permission denied")
                && (l.contains(".ign") || l.contains(".qcow2") || l.contains(".iso"))
        }) {
            out.push(Hint {
                id: "permission-denied",
                symptom: format!("{node}: {}", l.trim()),
                hint: "QEMU cannot read a node's image or Ignition file: SELinux/AppArmor labelling or the pool directory's permissions",
            });
            break;
        }
    }
    if let Some(l) = any_line(log, |l| {
        l.contains("x509: certificate has expired or is not yet valid")
    }) {
        out.push(Hint {
            id: "certificates",
            symptom: format!("installer: {}", l.trim()),
            hint: "certificates expired or not yet valid: a cluster stopped before its first rotation, or clock skew",
        });
    }
    let warned = |id: &str| {
        e.doctor
            .iter()
            .find(|c| c.id == id && c.severity >= Severity::Warn)
    };
    if let Some(c) = warned("etc-hosts") {
        out.push(Hint {
            id: "ipv6-localhost",
            symptom: c.verdict.clone(),
            hint: "fix /etc/hosts: localhost on 127.0.0.1, ::1 only for the loopback names",
        });
    }
    if let Some(c) = warned("network-manager") {
        out.push(Hint {
            id: "networkmanager",
            symptom: c.verdict.clone(),
            hint: "tell NetworkManager to leave libvirt's interfaces alone (unmanaged-devices)",
        });
    }
    if let Some(n) = e.pending_csrs.filter(|n| *n > 0) {
        out.push(Hint {
            id: "csrs-pending",
            symptom: format!("{n} certificate signing request(s) of the plan's nodes are Pending"),
            hint: "approve them: shiftlab approve-csrs NAME (or start NAME, which does it)",
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_symptom_is_recognised() {
        let doctor = vec![Check {
            id: "etc-hosts",
            severity: Severity::Warn,
            verdict: "/etc/hosts: localhost is only ::1".into(),
            fix: None,
        }];
        let e = Evidence {
            installer_log: "level=info msg=Waiting up to 20m0s\nlevel=error msg=Bootstrap failed to complete: timed out waiting for the condition\n",
            node_logs: vec![(
                "lab1-ctlplane-0".into(),
                "qemu-system-x86_64: -fw_cfg name=opt/com.coreos/config,file=/pool/lab1-ctlplane-0.ign: Could not open '/pool/lab1-ctlplane-0.ign': Permission denied\n",
            )],
            doctor: &doctor,
            pending_csrs: Some(2),
        };
        let ids: Vec<&str> = hints(&e).iter().map(|h| h.id).collect();
        assert_eq!(
            ids,
            [
                "bootstrap-stuck",
                "permission-denied",
                "ipv6-localhost",
                "csrs-pending"
            ]
        );
        assert!(hints(&Evidence::default()).is_empty());
    }
}
