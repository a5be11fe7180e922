//! `capabilities:` checked against the rules of the OpenShift version it installs,
//! so that a set the installer refuses (`create manifests` exits 3) is refused here
//! before anything runs.
//!
//! The model, from the real sources:
//! - which capabilities exist and which baseline set holds which: openshift/api
//!   config/v1/types_cluster_version.go (`KnownClusterVersionCapabilities`,
//!   `ClusterVersionCapabilitySets`, up to `v4.18`);
//! - the rules: openshift/installer pkg/types/validation/installconfig.go
//!   (`ValidateInstallConfig`, its `c.Capabilities` block, release-4.18): an
//!   unknown name is an unsupported value; marketplace needs
//!   OperatorLifecycleManager; platform baremetal needs baremetal; the Ingress
//!   capability is required. The CloudCredential and CloudControllerManager rules
//!   concern cloud platforms only (shiftlab's are none and baremetal), and 4.18 has
//!   no rule on Console.
//!
//! A version knows a capability from the release that introduced it, and each rule
//! exists from the release whose capability it names: before 4.15 OLM was no
//! capability (always on), before 4.16 neither was Ingress.

use crate::spec::types::Capabilities;

/// The newest release the tables below describe (the `v4.18` set). A newer version
/// is held to its rules; capability names it may have added are not refused.
pub const NEWEST_MINOR: u32 = 18;
/// The first release with capabilities (and the `v4.11` set).
const FIRST_MINOR: u32 = 11;

/// (name, the release that introduced it, the first baseline set that holds it).
/// MachineAPI came in 4.14 but was added to every set from `v4.11` on, since it had
/// always been installed.
const KNOWN: &[(&str, u32, u32)] = &[
    ("baremetal", 11, 11),
    ("marketplace", 11, 11),
    ("openshift-samples", 11, 11),
    ("Console", 12, 12),
    ("Insights", 12, 12),
    ("Storage", 12, 12),
    ("CSISnapshot", 12, 12),
    ("NodeTuning", 13, 13),
    ("MachineAPI", 14, 11),
    ("Build", 14, 14),
    ("DeploymentConfig", 14, 14),
    ("ImageRegistry", 14, 14),
    ("OperatorLifecycleManager", 15, 15),
    ("CloudCredential", 15, 15),
    ("Ingress", 16, 16),
    ("CloudControllerManager", 16, 16),
    ("OperatorLifecycleManagerV1", 18, 18),
];

/// One broken rule: the cluster-file field it concerns and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub field: &'static str,
    pub message: String,
}

const BASELINE: &str = "capabilities.baseline_capability_set";
const ADDITIONAL: &str = "capabilities.additional_enabled_capabilities";

/// Capabilities release `4.minor` knows, in openshift/api's order.
pub fn known(minor: u32) -> Vec<&'static str> {
    KNOWN
        .iter()
        .filter(|(_, from, _)| *from <= minor)
        .map(|(n, _, _)| *n)
        .collect()
}

/// The baseline sets release `4.minor` accepts.
pub fn baseline_sets(minor: u32) -> Vec<String> {
    let mut sets = vec!["None".to_string()];
    sets.extend((FIRST_MINOR..=minor).map(|m| format!("v4.{m}")));
    sets.push("vCurrent".into());
    sets
}

/// What a baseline set holds on release `4.minor` (None when the set is unknown
/// to it): `vCurrent` is every capability the release knows.
pub fn set_members(set: &str, minor: u32) -> Option<Vec<&'static str>> {
    let holds_from = match set {
        "None" => return Some(vec![]),
        "vCurrent" => minor,
        _ => {
            let n: u32 = set.strip_prefix("v4.")?.parse().ok()?;
            if !(FIRST_MINOR..=minor).contains(&n) {
                return None;
            }
            n
        }
    };
    Some(
        KNOWN
            .iter()
            .filter(|(_, from, in_set)| *from <= minor && *in_set <= holds_from)
            .map(|(n, _, _)| *n)
            .collect(),
    )
}

/// Is capability `name` enabled on release `4.minor` with `caps`? Without a
/// `capabilities` section the baseline is `vCurrent`. A component that is not
/// a capability yet on that release (ImageRegistry before 4.14) is always
/// installed, hence enabled; a name no release knows is not.
pub fn enabled(caps: Option<&Capabilities>, name: &str, minor: u32) -> bool {
    let Some(&(_, from, _)) = KNOWN.iter().find(|(n, _, _)| *n == name) else {
        return false;
    };
    if minor < FIRST_MINOR.max(from) {
        return true;
    }
    let Some(caps) = caps else {
        return true;
    };
    if caps
        .additional_enabled_capabilities
        .iter()
        .any(|c| c == name)
    {
        return true;
    }
    let set = caps
        .baseline_capability_set
        .as_deref()
        .unwrap_or("vCurrent");
    set_members(set, minor).is_some_and(|m| m.contains(&name))
}

/// Every rule `caps` breaks on release `4.minor` (`platform_baremetal`: the
/// install-config's platform is baremetal, i.e. method ipi). Pure.
pub fn check(caps: &Capabilities, minor: u32, platform_baremetal: bool) -> Vec<Problem> {
    let mut out = Vec::new();
    if minor < FIRST_MINOR {
        return out;
    }
    let baseline = caps
        .baseline_capability_set
        .as_deref()
        .unwrap_or("vCurrent");
    let additional = &caps.additional_enabled_capabilities;
    let listed = format!("[{}]", additional.join(", "));
    let known_here = known(minor);
    for name in additional {
        // A release newer than the tables may know names they do not.
        if minor <= NEWEST_MINOR && !known_here.contains(&name.as_str()) {
            let hint = match KNOWN.iter().find(|(n, _, _)| n == name) {
                Some((_, from, _)) => format!("{name} exists from 4.{from} on"),
                None => format!("{name:?} is no capability"),
            };
            out.push(Problem {
                field: ADDITIONAL,
                message: format!(
                    "{hint}; OpenShift 4.{minor} knows {}",
                    known_here.join(", ")
                ),
            });
        }
    }
    // A release newer than the tables: its own newer sets are judged as the newest.
    let set = match baseline
        .strip_prefix("v4.")
        .and_then(|m| m.parse::<u32>().ok())
    {
        Some(n) if n > NEWEST_MINOR && n <= minor => format!("v4.{NEWEST_MINOR}"),
        _ => baseline.to_string(),
    };
    let Some(members) = set_members(&set, minor.min(NEWEST_MINOR)) else {
        out.push(Problem {
            field: BASELINE,
            message: format!(
                "{baseline:?} is not a baseline set of OpenShift 4.{minor}; use one of {}",
                baseline_sets(minor).join(", ")
            ),
        });
        return out;
    };
    let enabled = |c: &str| members.contains(&c) || additional.iter().any(|a| a == c);
    let with = format!("baseline {baseline} with {listed}");
    if minor >= 15 && enabled("marketplace") && !enabled("OperatorLifecycleManager") {
        out.push(Problem {
            field: ADDITIONAL,
            message: format!(
                "{with} enables marketplace without OperatorLifecycleManager; from 4.15 on the marketplace capability requires the OperatorLifecycleManager capability (add OperatorLifecycleManager)"
            ),
        });
    }
    if platform_baremetal && !enabled("baremetal") {
        out.push(Problem {
            field: ADDITIONAL,
            message: format!(
                "{with} leaves out baremetal; method ipi (platform baremetal) requires the baremetal capability (add baremetal)"
            ),
        });
    }
    if minor >= 16 && !enabled("Ingress") {
        out.push(Problem {
            field: ADDITIONAL,
            message: format!(
                "{with} leaves out Ingress; from 4.16 on the Ingress capability is required (add Ingress, or use baseline v4.16 or later)"
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(baseline: Option<&str>, add: &[&str]) -> Capabilities {
        Capabilities {
            baseline_capability_set: baseline.map(str::to_string),
            additional_enabled_capabilities: add.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn messages(c: &Capabilities, minor: u32, bm: bool) -> String {
        check(c, minor, bm)
            .iter()
            .map(|p| format!("{}: {}", p.field, p.message))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn sets_hold_what_openshift_api_lists() {
        assert_eq!(
            set_members("v4.11", 18).unwrap(),
            [
                "baremetal",
                "marketplace",
                "openshift-samples",
                "MachineAPI"
            ]
        );
        // On 4.13 MachineAPI is no capability yet: v4.11 holds three.
        assert_eq!(set_members("v4.11", 13).unwrap().len(), 3);
        let v14 = set_members("v4.14", 18).unwrap();
        assert!(v14.contains(&"ImageRegistry") && !v14.contains(&"OperatorLifecycleManager"));
        let v15 = set_members("v4.15", 18).unwrap();
        assert!(v15.contains(&"OperatorLifecycleManager") && !v15.contains(&"Ingress"));
        let v16 = set_members("v4.16", 18).unwrap();
        assert!(v16.contains(&"Ingress") && v16.contains(&"CloudControllerManager"));
        assert_eq!(set_members("v4.17", 18), set_members("v4.16", 18));
        assert_eq!(set_members("vCurrent", 18).unwrap().len(), KNOWN.len());
        assert_eq!(set_members("vCurrent", 15).unwrap(), known(15));
        assert_eq!(set_members("None", 18).unwrap(), Vec::<&str>::new());
        // A set from a later release is unknown to an earlier one.
        assert_eq!(set_members("v4.16", 15), None);
        assert_eq!(set_members("v4.10", 18), None);
        assert_eq!(set_members("v5.1", 18), None);
    }

    #[test]
    fn ingress_is_required_from_4_16() {
        // The recorded cases (4.18): None, v4.14 and v4.15 with [marketplace,
        // Console] fail with "the Ingress capability is required"; v4.16 passes.
        for b in ["None", "v4.14", "v4.15"] {
            let m = messages(&caps(Some(b), &["marketplace", "Console"]), 18, false);
            assert!(m.contains("the Ingress capability is required"), "{b}: {m}");
            assert!(m.contains(&format!("baseline {b} with [marketplace, Console]")));
        }
        assert_eq!(
            messages(&caps(Some("v4.16"), &["marketplace", "Console"]), 18, false),
            ""
        );
        assert_eq!(messages(&caps(Some("None"), &["Ingress"]), 18, false), "");
        // 4.15 has no Ingress capability, so no such rule.
        assert!(!messages(&caps(Some("None"), &[]), 15, false).contains("Ingress"));
        assert!(messages(&caps(Some("None"), &[]), 16, false).contains("Ingress"));
    }

    #[test]
    fn marketplace_requires_olm_from_4_15() {
        let m = messages(&caps(Some("v4.14"), &["marketplace", "Console"]), 18, false);
        assert!(
            m.contains("the marketplace capability requires the OperatorLifecycleManager"),
            "{m}"
        );
        // v4.15 holds OperatorLifecycleManager: only Ingress is missing.
        let m = messages(&caps(Some("v4.15"), &["marketplace", "Console"]), 18, false);
        assert!(!m.contains("OperatorLifecycleManager"), "{m}");
        let ok = caps(
            Some("None"),
            &["marketplace", "OperatorLifecycleManager", "Ingress"],
        );
        assert_eq!(messages(&ok, 18, false), "");
        // On 4.14 OLM is always on: marketplace alone is fine.
        assert_eq!(
            messages(&caps(Some("None"), &["marketplace"]), 14, false),
            ""
        );
    }

    #[test]
    fn baremetal_platform_requires_the_baremetal_capability() {
        let c = caps(Some("None"), &["Ingress"]);
        assert!(messages(&c, 18, true).contains("requires the baremetal capability"));
        assert_eq!(messages(&c, 18, false), "");
        assert_eq!(
            messages(&caps(Some("None"), &["Ingress", "baremetal"]), 18, true),
            ""
        );
    }

    #[test]
    fn names_and_sets_must_be_known_to_the_version() {
        let m = messages(&caps(Some("vCurrent"), &["Consol"]), 18, false);
        assert!(
            m.contains("\"Consol\" is no capability; OpenShift 4.18 knows baremetal"),
            "{m}"
        );
        let m = messages(&caps(Some("vCurrent"), &["Ingress"]), 15, false);
        assert!(m.contains("Ingress exists from 4.16 on"), "{m}");
        let m = messages(&caps(Some("v4.16"), &[]), 15, false);
        assert!(
            m.contains(
                "\"v4.16\" is not a baseline set of OpenShift 4.15; use one of None, v4.11,"
            ),
            "{m}"
        );
        // Newer than the tables: their names are not refused, their sets judged as
        // the newest known.
        assert_eq!(
            messages(&caps(Some("v4.20"), &["SomethingNew"]), 20, false),
            ""
        );
        assert!(messages(&caps(Some("None"), &["SomethingNew"]), 20, false).contains("Ingress"));
        // No section: vCurrent, always fine.
        assert_eq!(messages(&caps(None, &[]), 18, true), "");
    }

    #[test]
    fn image_registry_is_enabled_as_each_release_says() {
        let caps = |set: &str, extra: &[&str]| Capabilities {
            baseline_capability_set: Some(set.into()),
            additional_enabled_capabilities: extra.iter().map(|s| s.to_string()).collect(),
        };
        // No section, vCurrent, a set from 4.14 on: enabled.
        assert!(enabled(None, "ImageRegistry", 16));
        assert!(enabled(Some(&caps("vCurrent", &[])), "ImageRegistry", 16));
        assert!(enabled(Some(&caps("v4.14", &[])), "ImageRegistry", 16));
        // None and the older sets: only when added.
        assert!(!enabled(Some(&caps("None", &[])), "ImageRegistry", 16));
        assert!(!enabled(Some(&caps("v4.13", &[])), "ImageRegistry", 16));
        assert!(enabled(
            Some(&caps("None", &["ImageRegistry"])),
            "ImageRegistry",
            16
        ));
        // Before 4.14 the registry is no capability: always installed.
        assert!(enabled(Some(&caps("None", &[])), "ImageRegistry", 13));
        assert!(!enabled(None, "NoSuchThing", 16));
    }
}
