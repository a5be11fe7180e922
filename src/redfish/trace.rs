//! A hidden, off-by-default trace of what clients send the BMC: with
//! `SHIFTLAB_BMC_TRACE=FILE`, one JSON line per request (method, target, the
//! headers that tell how a client talks, its JSON body, the answer's status)
//! is appended to FILE (created 0600). It exists to record the exact Redfish
//! sequence a real client (Ironic's sushy) sends (tests/fixtures/ironic-39/).
//!
//! Never a credential: of `Authorization` only its scheme, of `X-Auth-Token`
//! only that it was sent, and bodies pass the one [`Redactor`] (a session's
//! `Password` goes by its key, the BMC's password by its value).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::redact::{Redactor, REDACTED};

/// The variable naming the trace file.
pub const ENV: &str = "SHIFTLAB_BMC_TRACE";

/// Request headers kept as sent (lowercase names).
const KEPT: &[&str] = &[
    "accept",
    "content-type",
    "if-match",
    "if-none-match",
    "odata-version",
    "odata-maxversion",
];

/// Response headers kept: where a client goes next (a session, a task) and
/// what it would send back as `If-Match`.
const KEPT_RESPONSE: &[&str] = &["location", "etag"];

/// The headers of a request as the trace keeps them (lowercase names).
/// Pure.
pub fn kept_headers<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        let kept = match name.as_str() {
            // The scheme says how the client authenticates; the rest is the secret.
            "authorization" => value.split_whitespace().next().unwrap_or("").to_string(),
            "x-auth-token" => REDACTED.to_string(),
            "user-agent" => user_agent_family(value),
            n if KEPT.contains(&n) => value.to_string(),
            _ => continue,
        };
        out.insert(name, kept);
    }
    out
}

/// `python-requests/2.32.3 sushy/5.5.0 (x)` → `python-requests sushy`: the
/// products without their versions or comments, which differ by install.
pub fn user_agent_family(ua: &str) -> String {
    let mut depth = 0usize;
    let mut products = Vec::new();
    for word in ua.split_whitespace() {
        let opens = word.starts_with('(');
        if opens || depth > 0 {
            depth += word.matches('(').count();
            depth = depth.saturating_sub(word.matches(')').count());
            continue;
        }
        products.push(word.split('/').next().unwrap_or(word));
    }
    products.join(" ")
}

/// The answer as the trace keeps it.
pub struct Answer<'a> {
    pub status: u16,
    pub headers: &'a [(&'static str, String)],
}

/// One trace line's value. Pure.
pub fn entry(
    seq: u64,
    method: &str,
    target: &str,
    headers: &BTreeMap<String, String>,
    body: &[u8],
    answer: &Answer<'_>,
    redactor: &Redactor,
) -> Value {
    let mut e = json!({
        "seq": seq,
        "method": method,
        "target": redactor.redact(target),
        "headers": headers,
        "status": answer.status,
    });
    if !body.is_empty() {
        match serde_json::from_slice::<Value>(body) {
            Ok(mut v) => {
                redactor.redact_json(&mut v);
                e["body"] = v;
            }
            // Not JSON: its size only, the bytes could be anything.
            Err(_) => e["body_bytes"] = json!(body.len()),
        }
    }
    let kept: BTreeMap<String, String> = answer
        .headers
        .iter()
        .filter(|(k, _)| KEPT_RESPONSE.contains(&k.to_ascii_lowercase().as_str()))
        .map(|(k, v)| (k.to_ascii_lowercase(), redactor.redact(v)))
        .collect();
    if !kept.is_empty() {
        e["response_headers"] = json!(kept);
    }
    e
}

/// An open trace file.
pub struct Trace {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    redactor: Redactor,
    seq: AtomicU64,
}

impl Trace {
    /// The trace `SHIFTLAB_BMC_TRACE` names, if set and not empty.
    pub fn from_env(redactor: Redactor) -> Result<Option<Trace>> {
        match std::env::var_os(ENV) {
            Some(p) if !p.is_empty() => Trace::open(Path::new(&p), redactor).map(Some),
            _ => Ok(None),
        }
    }

    /// Appends to `path`, created 0600 (an existing file is made 0600 too:
    /// what it holds is what this BMC was sent).
    pub fn open(path: &Path, redactor: Redactor) -> Result<Trace> {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("opening the bmc trace {} ({ENV})", path.display()))?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("making {} 0600", path.display()))?;
        tracing::warn!(path = %path.display(), "bmc request trace on");
        Ok(Trace {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            redactor,
            seq: AtomicU64::new(1),
        })
    }

    /// Appends one request and its answer.
    pub fn record(
        &self,
        method: &str,
        target: &str,
        headers: &BTreeMap<String, String>,
        body: &[u8],
        answer: &Answer<'_>,
    ) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let e = entry(seq, method, target, headers, body, answer, &self.redactor);
        let mut line = e.to_string();
        line.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = f.write_all(line.as_bytes()) {
            tracing::warn!(path = %self.path.display(), error = %e, "bmc trace not written");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_keeps_its_scheme_only() {
        let h = kept_headers([
            ("Authorization", "Basic YWRtaW46aHVudGVyMg=="),
            ("X-Auth-Token", "abcdef0123456789"),
            ("Content-Type", "application/json"),
            ("OData-Version", "4.0"),
            ("If-Match", "W/\"123\""),
            ("Cookie", "x=y"),
            ("Host", "127.0.0.1:8000"),
        ]);
        assert_eq!(h["authorization"], "Basic");
        assert_eq!(h["x-auth-token"], REDACTED);
        assert_eq!(h["content-type"], "application/json");
        assert_eq!(h["odata-version"], "4.0");
        assert_eq!(h["if-match"], "W/\"123\"");
        assert!(
            !h.contains_key("cookie") && !h.contains_key("host"),
            "{h:?}"
        );
        let all = format!("{h:?}");
        assert!(
            !all.contains("YWRtaW46") && !all.contains("abcdef"),
            "{all}"
        );
    }

    #[test]
    fn user_agent_family_drops_versions_and_comments() {
        assert_eq!(
            user_agent_family("python-requests/2.32.3 sushy/5.5.0 (Linux; x86_64) ironic/39.0.0"),
            "python-requests sushy ironic"
        );
        assert_eq!(user_agent_family("curl/8.5.0"), "curl");
        assert_eq!(user_agent_family(""), "");
    }

    #[test]
    fn bodies_lose_passwords_by_key_and_by_value() {
        let mut r = Redactor::default();
        r.add("s3cret-bmc-pw");
        let answer = Answer {
            status: 201,
            headers: &[
                ("Location", "/redfish/v1/SessionService/Sessions/1".into()),
                ("X-Auth-Token", "tok-0123456789".into()),
            ],
        };
        let body = br#"{"UserName":"admin","Password":"whatever-it-is","Note":"s3cret-bmc-pw"}"#;
        let e = entry(
            7,
            "POST",
            "/redfish/v1/SessionService/Sessions",
            &BTreeMap::new(),
            body,
            &answer,
            &r,
        );
        assert_eq!(e["seq"], 7);
        assert_eq!(e["status"], 201);
        assert_eq!(e["body"]["UserName"], "admin");
        assert_eq!(e["body"]["Password"], REDACTED);
        assert_eq!(e["body"]["Note"], REDACTED);
        assert_eq!(
            e["response_headers"]["location"],
            "/redfish/v1/SessionService/Sessions/1"
        );
        let text = e.to_string();
        assert!(
            !text.contains("whatever-it-is") && !text.contains("tok-0123"),
            "{text}"
        );
    }

    #[test]
    fn a_body_that_is_not_json_is_counted_not_kept() {
        let answer = Answer {
            status: 400,
            headers: &[],
        };
        let e = entry(
            1,
            "POST",
            "/x",
            &BTreeMap::new(),
            b"ResetType=On",
            &answer,
            &Redactor::default(),
        );
        assert_eq!(e["body_bytes"], 12);
        assert!(e.get("body").is_none() && e.get("response_headers").is_none());
    }

    #[test]
    fn the_file_is_0600_and_gets_one_line_per_request() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trace.jsonl");
        std::fs::write(&p, "").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let t = Trace::open(&p, Redactor::default()).unwrap();
        let answer = Answer {
            status: 200,
            headers: &[],
        };
        t.record("GET", "/redfish/v1/", &BTreeMap::new(), b"", &answer);
        t.record("GET", "/redfish/v1/Systems", &BTreeMap::new(), b"", &answer);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let lines: Vec<Value> = std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["seq"], 2);
        assert_eq!(lines[1]["target"], "/redfish/v1/Systems");
    }
}
