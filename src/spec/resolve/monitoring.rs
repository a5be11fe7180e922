//! `monitoring:`: the platform monitoring stack's settings (docs/storage.md).

use super::super::diag::Diagnostics;
use super::super::parse::RawSpec;
use super::super::types::MonitoringSpec;

pub fn resolve(raw: &RawSpec, d: &mut Diagnostics) -> MonitoringSpec {
    let mut m = MonitoringSpec::default();
    if let Some(r) = &raw.monitoring.retention {
        if is_prometheus_duration(&r.v) {
            m.retention = r.v.clone();
        } else {
            d.error(
                &r.field,
                format!(
                    "{:?} is not a Prometheus duration: a number and a unit (ms, s, m, h, \
                     d, w, y), units from the largest down, each once, not zero \
                     (e.g. 24h, 7d, 1d12h)",
                    r.v
                ),
            );
        }
    }
    m
}

/// Prometheus' duration syntax (prometheus/common model.ParseDuration; the
/// Prometheus CRD's `Duration` pattern is the same):
/// `(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?`, not empty. Zero is
/// refused too: Prometheus would keep nothing.
pub fn is_prometheus_duration(s: &str) -> bool {
    const UNITS: [&str; 7] = ["y", "w", "d", "h", "m", "s", "ms"];
    let mut rest = s;
    let mut next_unit = 0;
    let mut nonzero = false;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return false;
        }
        let (n, tail) = rest.split_at(digits);
        // "ms" before "m": the longer unit first.
        let Some(u) = (next_unit..UNITS.len())
            .filter(|&i| tail.starts_with(UNITS[i]))
            .max_by_key(|&i| UNITS[i].len())
        else {
            return false;
        };
        nonzero |= n.bytes().any(|b| b != b'0');
        rest = &tail[UNITS[u].len()..];
        next_unit = u + 1;
    }
    nonzero
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{self, Env};

    #[test]
    fn prometheus_durations() {
        for ok in [
            "24h", "15d", "1w", "1y", "90m", "1d12h", "1h30m", "500ms", "1m30s",
        ] {
            assert!(is_prometheus_duration(ok), "{ok}");
        }
        for bad in [
            "",
            "24",
            "h",
            "0h",
            "0d0h",
            "24 h",
            "24H",
            "1.5h",
            "-1h",
            "1h1d",
            "1h1h",
            "1day",
            "P1D",
            "10000000000h",
        ] {
            assert!(!is_prometheus_duration(bad), "{bad:?}");
        }
    }

    #[test]
    fn retention_defaults_to_a_day_and_a_bad_one_is_named() {
        let base = "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n";
        let s = spec::from_str(base, "t.yaml", &Env::default())
            .unwrap()
            .spec;
        assert_eq!(s.monitoring.retention, "24h");
        let text = format!("{base}monitoring:\n  retention: 7d\n");
        let s = spec::from_str(&text, "t.yaml", &Env::default())
            .unwrap()
            .spec;
        assert_eq!(s.monitoring.retention, "7d");
        let text = format!("{base}monitoring:\n  retention: 2 days\n");
        let e = spec::from_str(&text, "t.yaml", &Env::default()).unwrap_err();
        assert!(
            e.errors.iter().any(|d| d.field == "monitoring.retention"
                && d.message.contains("\"2 days\"")
                && d.message.contains("24h, 7d")),
            "{e:?}"
        );
        let text = format!("{base}monitoring:\n  retain: 7d\n");
        assert!(spec::from_str(&text, "t.yaml", &Env::default()).is_err());
    }
}
