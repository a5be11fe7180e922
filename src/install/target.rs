//! The install's targets as a typed state machine: which targets a method has, in
//! which order, and what must be done before each. A target is reached only after
//! its predecessors are done; `Locked::start` refuses anything else, so a driver
//! bug shows up as an [`IllegalTransition`] in tests, not as a half-run install.
//!
//! ```text
//! upi: release → install-config → manifests → ignition → infra → bootstrap-complete
//!        → bootstrap-removal → workers → csr-approval → install-complete
//! ```
//!
//! (docs/targets.md shows the same; a test keeps the two in step.) Single node,
//! agent and IPI get their own orders here when they land.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::spec::Method;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    Release,
    InstallConfig,
    Manifests,
    Ignition,
    Infra,
    BootstrapComplete,
    BootstrapRemoval,
    Workers,
    CsrApproval,
    InstallComplete,
}

impl Target {
    pub const ALL: [Target; 10] = [
        Target::Release,
        Target::InstallConfig,
        Target::Manifests,
        Target::Ignition,
        Target::Infra,
        Target::BootstrapComplete,
        Target::BootstrapRemoval,
        Target::Workers,
        Target::CsrApproval,
        Target::InstallComplete,
    ];

    /// The name on the command line and in `install-state.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Release => "release",
            Target::InstallConfig => "install-config",
            Target::Manifests => "manifests",
            Target::Ignition => "ignition",
            Target::Infra => "infra",
            Target::BootstrapComplete => "bootstrap-complete",
            Target::BootstrapRemoval => "bootstrap-removal",
            Target::Workers => "workers",
            Target::CsrApproval => "csr-approval",
            Target::InstallComplete => "install-complete",
        }
    }

    pub fn parse(s: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// UPI runs every target, in declaration order.
const UPI: &[Target] = &Target::ALL;

/// A method whose install the driver does not drive (yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("method {0}: the install driver drives upi so far; `shiftlab create install-config` writes its configs and `create infra` its VMs")]
pub struct Undriven(pub Method);

/// The targets of `method`, in order.
pub fn order(method: Method) -> Result<&'static [Target], Undriven> {
    match method {
        Method::Upi => Ok(UPI),
        other => Err(Undriven(other)),
    }
}

/// What must be done before `target` on `method`: every target before it.
pub fn predecessors(method: Method, target: Target) -> Result<&'static [Target], Undriven> {
    let o = order(method)?;
    Ok(o.iter()
        .position(|t| *t == target)
        .map(|i| &o[..i])
        .unwrap_or(&[]))
}

/// A transition the state machine does not allow: a driver bug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IllegalTransition {
    #[error("target {target} is not a target of method {method}")]
    NotInMethod { target: Target, method: Method },
    #[error("target {target} started before {missing} was done")]
    PredecessorNotDone { target: Target, missing: Target },
    #[error("target {0} recorded done without having started")]
    DoneWithoutStart(Target),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for t in Target::ALL {
            assert_eq!(Target::parse(t.as_str()), Some(t));
            assert_eq!(
                serde_json::to_string(&t).unwrap(),
                format!("\"{}\"", t.as_str())
            );
        }
        assert_eq!(Target::parse("nope"), None);
    }

    #[test]
    fn upi_order_and_predecessors() {
        let o = order(Method::Upi).unwrap();
        assert_eq!(o.first(), Some(&Target::Release));
        assert_eq!(o.last(), Some(&Target::InstallComplete));
        assert_eq!(
            predecessors(Method::Upi, Target::Ignition).unwrap(),
            [Target::Release, Target::InstallConfig, Target::Manifests]
        );
        assert!(predecessors(Method::Upi, Target::Release)
            .unwrap()
            .is_empty());
        assert!(order(Method::Sno).is_err());
    }

    #[test]
    fn the_order_in_the_docs_is_the_code_s() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/targets.md"))
            .unwrap();
        let names: Vec<&str> = order(Method::Upi)
            .unwrap()
            .iter()
            .map(|t| t.as_str())
            .collect();
        let line = names.join(" → ");
        assert!(
            doc.replace("\n  → ", " → ").contains(&line),
            "docs/targets.md does not show the upi order {line}"
        );
    }
}
