//! `cluster`, `domain`, `distribution`, `version` (with kcli's `tag`).

use super::pick;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;
use crate::spec::types::*;

pub const DEFAULT_DOMAIN: &str = "lab.test";

/// Who the cluster is: its name, zone, distribution and the release asked for.
pub struct Identity {
    pub cluster: String,
    pub domain: String,
    pub distribution: Distribution,
    pub version: Version,
}

pub fn resolve(raw: &RawSpec, d: &mut Diagnostics) -> Identity {
    let cluster = match &raw.cluster {
        Some(c) => {
            if !is_cluster_name(&c.v) {
                d.error(
                    &c.field,
                    format!(
                        "{:?} is not a valid cluster name: {CLUSTER_NAME_RULE} (it becomes a DNS label and part of every node name)",
                        c.v
                    ),
                );
            }
            c.v.clone()
        }
        None => {
            d.error(
                "cluster",
                "missing: name the cluster, e.g. `cluster: lab1` (a DNS label)",
            );
            "cluster".into()
        }
    };
    let domain = match &raw.domain {
        Some(s) => {
            let v = s.v.trim_end_matches('.').to_string();
            if !is_domain(&v) {
                d.error(
                    &s.field,
                    format!(
                        "{:?} is not a valid DNS domain: use lowercase labels of letters, digits and '-' separated by dots, e.g. lab.example.com",
                        s.v
                    ),
                );
            }
            v
        }
        None => DEFAULT_DOMAIN.to_string(),
    };
    let distribution = pick(
        &[("ocp", Distribution::Ocp), ("okd", Distribution::Okd)],
        &raw.distribution,
        Distribution::Ocp,
        d,
    );
    let version_text = match (&raw.version, &raw.tag) {
        (None, None) => Some(("stable".to_string(), "version".to_string())),
        (Some(v), None) => Some((v.v.clone(), v.field.clone())),
        (None, Some(t)) => Some((tag_version("stable", &t.v), t.field.clone())),
        (Some(v), Some(t)) => {
            if ["stable", "fast", "candidate", "latest"].contains(&v.v.as_str()) {
                Some((tag_version(&v.v, &t.v), t.field.clone()))
            } else {
                d.error(
                    &t.field,
                    format!(
                        "`tag` {:?} and `version` {:?} conflict: with a tag, version must be a channel (stable, fast, candidate, latest)",
                        t.v, v.v
                    ),
                );
                None
            }
        }
    };
    let version = match version_text.map(|(s, f)| (parse_version(&s), f)) {
        Some((Ok(v), _)) => v,
        Some((Err(e), field)) => {
            d.error(field, e);
            Version::Channel {
                channel: Channel::Stable,
                minor: None,
            }
        }
        None => Version::Channel {
            channel: Channel::Stable,
            minor: None,
        },
    };
    Identity {
        cluster,
        domain,
        distribution,
        version,
    }
}

/// What a cluster name may be, for messages.
pub const CLUSTER_NAME_RULE: &str =
    "use 1 to 32 lowercase letters, digits and '-', starting with a letter";

/// The one rule for cluster names: a DNS label of at most 32 characters that starts
/// with a letter. Everything that takes a cluster name (the cluster file, the CLI,
/// serve's control socket) checks it here; the name also becomes a path component.
pub fn is_cluster_name(s: &str) -> bool {
    is_dns_label(s) && s.len() <= 32 && s.as_bytes()[0].is_ascii_lowercase()
}

pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_domain(s: &str) -> bool {
    s.len() <= 253 && !s.is_empty() && s.split('.').all(is_dns_label)
}

/// Parse a `version:` value (with kcli's `tag` already folded in).
pub fn parse_version(s: &str) -> Result<Version, String> {
    let valid = "use e.g. 4.18.7, 4.18, stable-4.18, candidate-4.19 or latest";
    let minor_of = |m: &str| -> Result<u32, String> {
        let (maj, min) = m
            .split_once('.')
            .ok_or_else(|| format!("{s:?} is not a version; {valid}"))?;
        let maj: u32 = maj
            .parse()
            .map_err(|_| format!("{s:?} is not a version; {valid}"))?;
        let min: u32 = min
            .parse()
            .map_err(|_| format!("{s:?} is not a version; {valid}"))?;
        if maj != 4 {
            return Err(format!(
                "{s:?}: only OpenShift/OKD 4 is supported (4.14 and later)"
            ));
        }
        if min < 14 {
            return Err(format!(
                "{s:?} is older than 4.14, the oldest release shiftlab supports"
            ));
        }
        Ok(min)
    };
    let channels = [
        ("stable", Channel::Stable),
        ("fast", Channel::Fast),
        ("candidate", Channel::Candidate),
        ("latest", Channel::Latest),
    ];
    for (name, ch) in channels {
        if s == name {
            return Ok(Version::Channel {
                channel: ch,
                minor: None,
            });
        }
        if let Some(rest) = s.strip_prefix(name).and_then(|r| r.strip_prefix('-')) {
            return Ok(Version::Channel {
                channel: ch,
                minor: Some(minor_of(rest)?),
            });
        }
    }
    let (core, suffix) = match s.split_once('-') {
        Some((c, sfx)) => (c, Some(sfx)),
        None => (s, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    match (parts.len(), numeric, suffix) {
        (2, true, None) => Ok(Version::Minor {
            minor: minor_of(core)?,
        }),
        (3, true, sfx)
            if sfx.is_none_or(|x| {
                !x.is_empty()
                    && x.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
            }) =>
        {
            minor_of(&format!("{}.{}", parts[0], parts[1]))?;
            Ok(Version::Exact {
                version: s.to_string(),
            })
        }
        _ => Err(format!("{s:?} is not a version; {valid}")),
    }
}

fn tag_version(channel: &str, tag: &str) -> String {
    // kcli: `tag: 4.17` picks a minor on a channel; a full `4.17.3` is exact.
    if tag.split('.').count() >= 3 {
        tag.to_string()
    } else {
        format!("{channel}-{tag}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("4.18.7").unwrap(),
            Version::Exact {
                version: "4.18.7".into()
            }
        );
        assert_eq!(parse_version("4.18").unwrap(), Version::Minor { minor: 18 });
        assert_eq!(
            parse_version("candidate-4.19").unwrap(),
            Version::Channel {
                channel: Channel::Candidate,
                minor: Some(19)
            }
        );
        assert!(parse_version("4.17.0-okd-scos.0").is_ok());
        assert!(parse_version("4.12")
            .unwrap_err()
            .contains("older than 4.14"));
        assert!(parse_version("banana").is_err());
        assert!(parse_version("stable-5.1").is_err());
        assert!(parse_version("4.18.x").is_err());
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns_label("lab1"));
        assert!(!is_dns_label("Lab1"));
        assert!(!is_dns_label("-lab"));
        assert!(is_domain("lab.example.com"));
        assert!(!is_domain("lab..com"));
    }
}
