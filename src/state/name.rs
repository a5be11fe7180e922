//! Cluster names as they arrive from users and sockets: checked against the
//! cluster file's rule before they become a path component.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::spec::{is_cluster_name, CLUSTER_NAME_RULE};

/// A valid cluster name (the cluster file's rule): safe as one path component,
/// never `""`, `.`, `..`, or anything with a `/`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClusterName(String);

/// A name that is not a valid cluster name; callers show it to the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a valid cluster name: {CLUSTER_NAME_RULE}")]
pub struct InvalidClusterName(pub String);

impl ClusterName {
    pub fn parse(s: &str) -> Result<Self, InvalidClusterName> {
        if is_cluster_name(s) {
            Ok(ClusterName(s.to_string()))
        } else {
            Err(InvalidClusterName(s.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ClusterName {
    type Err = InvalidClusterName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ClusterName::parse(s)
    }
}

impl TryFrom<String> for ClusterName {
    type Error = InvalidClusterName;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        ClusterName::parse(&s)
    }
}

impl From<ClusterName> for String {
    fn from(n: ClusterName) -> String {
        n.0
    }
}

// A checked name reads like any other string (paths, messages, lookups).
impl std::ops::Deref for ClusterName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ClusterName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_cluster_file_rule_passes() {
        for ok in ["lab1", "a", "demo-2", "a2345678901234567890123456789012"] {
            assert_eq!(ClusterName::parse(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            ".",
            "..",
            "/tmp/x",
            "a/../b",
            "a/b",
            "lab1/",
            "é",
            "labé",
            "Lab1",
            "1lab",
            "-lab",
            "lab-",
            "lab 1",
            "lab\n1",
            "a23456789012345678901234567890123",
        ] {
            let e = ClusterName::parse(bad).unwrap_err();
            assert!(e.to_string().contains("not a valid cluster name"), "{e}");
        }
    }

    #[test]
    fn deserializing_checks_too() {
        assert!(serde_json::from_str::<ClusterName>("\"lab1\"").is_ok());
        let e = serde_json::from_str::<ClusterName>("\"../x\"").unwrap_err();
        assert!(e.to_string().contains("not a valid cluster name"), "{e}");
        assert_eq!(
            serde_json::to_string(&ClusterName::parse("lab1").unwrap()).unwrap(),
            "\"lab1\""
        );
    }
}
