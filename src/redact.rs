//! The one redactor: every text that leaves shiftlab where others may read it
//! (a gather tarball, a response of the web page, the installer's lines in
//! shiftlab's log) passes [`Redactor`]. It removes
//!
//! - the cluster's known secret values wherever they appear (raw and as a JSON
//!   string escapes them): BMC passwords, the HTTP token, the kubeadmin
//!   password, the pull secret whole and each registry's `auth`/`password`,
//!   proxy passwords, the admin kubeconfig's client key, token and password
//!   ([`Redactor::of_cluster`] reads them from the cluster's files);
//! - whatever its shape gives away, known or not: the password of a
//!   `scheme://user:password@host` URL (a user alone without one: all of it), PEM
//!   private-key blocks of any kind, the value of a secret key (`password`,
//!   `token`, `auth`, `pullSecret`, `client-key-data`, … in YAML, JSON, `k=v`),
//!   and the credentials of an `Authorization:` line.
//!
//! It imports only `state` (to find a cluster's files): gather, serve and
//! install all use it.

use crate::state::ClusterDir;

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// What replaces a PEM private-key block.
pub const REDACTED_KEY: &str = "<redacted private key>";

/// Keys (lowercase; matched in any case) whose value is a secret, in YAML
/// (`key: value`), JSON (`"key": "value"`) or `key=value`.
const SECRET_KEYS: &[&str] = &[
    "pullsecret",
    "pull_secret",
    "password",
    "passwd",
    "bmc_password",
    // kcli parameter files' passwords (src/spec/kcli.rs).
    "disconnected_password",
    "baremetal_password",
    "kubeadmin_password",
    "auth",
    "token",
    "client-key-data",
    "client-secret",
    "client_secret",
    "id-token",
    "id_token",
    "refresh-token",
    "refresh_token",
    "access-token",
    "access_token",
    "identitytoken",
    "authorization",
    "proxy-authorization",
];

/// Secret values shorter than this are not searched for (a 3-letter password
/// would redact half the logs); they are still caught by their keys.
const MIN_SECRET_LEN: usize = 6;

/// The secrets to remove, and the rules for those it does not know.
#[derive(Default, Clone)]
pub struct Redactor {
    /// Longest first, so that a secret containing another goes whole.
    secrets: Vec<String>,
}

/// Never the values: a redactor in a log must not be what leaks them.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// The secrets a cluster's files hold: the lab BMC's password, the HTTP
    /// token, the kubeadmin password, what install-config holds (as it was
    /// asked for and as the installer has it) and the admin kubeconfig's
    /// credentials. Unreadable or absent files add nothing.
    pub fn of_cluster(cluster: &ClusterDir) -> Redactor {
        let mut r = Redactor::default();
        let read = |p: std::path::PathBuf| std::fs::read_to_string(p).ok();
        for p in [
            cluster.bmc_password(),
            cluster.http_token(),
            cluster.assets().kubeadmin_password(),
        ] {
            if let Some(s) = read(p) {
                r.add(&s);
            }
        }
        for p in [
            cluster.install_config_backup(),
            cluster.assets().install_config(),
        ] {
            if let Some(text) = read(p) {
                r.add_install_config(&text);
            }
        }
        if let Some(text) = read(cluster.assets().kubeconfig()) {
            r.add_kubeconfig(&text);
        }
        r
    }

    /// Remember `value` (trimmed) as a secret to remove wherever it appears; a
    /// pull secret's JSON also contributes its compact form and each registry's
    /// `auth`, `password` and `identitytoken`.
    pub fn add(&mut self, value: &str) {
        let v = value.trim();
        if v.len() >= MIN_SECRET_LEN && !self.secrets.iter().any(|s| s == v) {
            self.secrets.push(v.to_string());
        }
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(v) {
            if let Some(auths) = json.get("auths").and_then(|a| a.as_object()) {
                if let Ok(compact) = serde_json::to_string(&json) {
                    if compact != v {
                        self.add(&compact);
                    }
                }
                for a in auths.values() {
                    for k in ["auth", "password", "identitytoken"] {
                        if let Some(s) = a.get(k).and_then(|s| s.as_str()) {
                            self.add(s);
                        }
                    }
                }
            }
        }
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// The secrets of an install-config.yaml: the pull secret, each baremetal
    /// host's BMC password, and the proxy URLs' passwords (as written and
    /// percent-decoded).
    pub fn add_install_config(&mut self, text: &str) {
        let Ok(v) = yaml_serde::from_str::<yaml_serde::Value>(text) else {
            return;
        };
        if let Some(ps) = v.get("pullSecret").and_then(|s| s.as_str()) {
            self.add(ps);
        }
        let hosts = v
            .get("platform")
            .and_then(|p| p.get("baremetal"))
            .and_then(|b| b.get("hosts"))
            .and_then(|h| h.as_sequence());
        for h in hosts.into_iter().flatten() {
            if let Some(pw) = h
                .get("bmc")
                .and_then(|b| b.get("password"))
                .and_then(|p| p.as_str())
            {
                self.add(pw);
            }
        }
        for k in ["httpProxy", "httpsProxy"] {
            let url = v
                .get("proxy")
                .and_then(|p| p.get(k))
                .and_then(|u| u.as_str());
            if let Some(pw) = url.and_then(url_password) {
                self.add(pw);
                self.add(&percent_decode(pw));
            }
        }
    }

    /// The credentials of a kubeconfig's users: client key, token, password.
    pub fn add_kubeconfig(&mut self, text: &str) {
        let Ok(v) = yaml_serde::from_str::<yaml_serde::Value>(text) else {
            return;
        };
        let users = v.get("users").and_then(|u| u.as_sequence());
        for u in users.into_iter().flatten() {
            for k in ["client-key-data", "token", "password"] {
                if let Some(s) = u
                    .get("user")
                    .and_then(|u| u.get(k))
                    .and_then(|s| s.as_str())
                {
                    self.add(s);
                }
            }
        }
    }

    /// Add another redactor's secrets.
    pub fn extend(&mut self, other: &Redactor) {
        for s in &other.secrets {
            self.add(s);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` without any secret.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
            // As it appears inside a JSON string.
            if let Ok(quoted) = serde_json::to_string(s) {
                let escaped = &quoted[1..quoted.len() - 1];
                if escaped != s.as_str() && out.contains(escaped) {
                    out = out.replace(escaped, REDACTED);
                }
            }
        }
        let out = redact_private_keys(&out);
        let out = redact_userinfo(&out);
        out.split_inclusive('\n').map(redact_keys).collect()
    }

    /// A JSON value without any secret: the value of a secret key goes whole,
    /// every string is [`Redactor::redact`]ed. The structure stays.
    pub fn redact_json(&self, v: &mut serde_json::Value) {
        use serde_json::Value;
        match v {
            Value::String(s) => {
                let r = self.redact(s);
                if r != *s {
                    *s = r;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(o) => {
                for (k, v) in o.iter_mut() {
                    let secret = SECRET_KEYS.iter().any(|s| k.eq_ignore_ascii_case(s));
                    if secret && matches!(v, Value::String(_) | Value::Number(_)) {
                        *v = Value::String(REDACTED.to_string());
                    } else {
                        self.redact_json(v);
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// The password of `scheme://user:password@host…`, if it has one.
fn url_password(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let (userinfo, _) = authority.rsplit_once('@')?;
    let (_, pw) = userinfo.split_once(':')?;
    (!pw.is_empty()).then_some(pw)
}

/// `%XX` escapes decoded (invalid ones kept as written).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the next PEM marker of `kind` (`BEGIN`, `END`) of a private key is in
/// `s`: `-----KIND <label containing PRIVATE KEY>-----`, as (start, end).
fn private_key_marker(s: &str, kind: &str) -> Option<(usize, usize)> {
    let open = format!("-----{kind} ");
    let mut from = 0;
    while let Some(i) = s[from..].find(&open).map(|i| i + from) {
        let label_at = i + open.len();
        let rest = &s[label_at..];
        let label_len = rest
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == ' '))
            .unwrap_or(rest.len());
        let label = &rest[..label_len];
        if label.contains("PRIVATE KEY") && rest[label_len..].starts_with("-----") {
            return Some((i, label_at + label_len + 5));
        }
        from = label_at;
    }
    None
}

/// Every PEM private-key block (RSA, EC, OPENSSH, ENCRYPTED, PKCS#8, …) replaced
/// by [`REDACTED_KEY`]. A block without its end goes to the end of the text; an
/// end before any beginning (a log's tail that cut the block) takes the text
/// before it.
fn redact_private_keys(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    if let Some((_, end)) = private_key_marker(rest, "END") {
        if private_key_marker(&rest[..end], "BEGIN").is_none() {
            out.push_str(REDACTED_KEY);
            rest = &rest[end..];
        }
    }
    while let Some((begin, after)) = private_key_marker(rest, "BEGIN") {
        out.push_str(&rest[..begin]);
        out.push_str(REDACTED_KEY);
        rest = match private_key_marker(&rest[after..], "END") {
            Some((_, end)) => &rest[after + end..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// One URL as it may be shown (a Redfish error, a log line): its user-info
/// dropped and its query and fragment replaced by `REDACTED` (a signed URL
/// carries its token there); scheme, host, port and path kept.
pub fn url(raw: &str) -> String {
    let (head, cut) = match raw.find(['?', '#']) {
        Some(i) => (&raw[..i], true),
        None => (raw, false),
    };
    let mut out = match head.find("://") {
        Some(i) => {
            let auth_start = i + 3;
            let auth_end = head[auth_start..]
                .find('/')
                .map_or(head.len(), |j| auth_start + j);
            let host = match head[auth_start..auth_end].rfind('@') {
                Some(at) => &head[auth_start + at + 1..auth_end],
                None => &head[auth_start..auth_end],
            };
            format!("{}{}{}", &head[..auth_start], host, &head[auth_end..])
        }
        None => head.to_string(),
    };
    if cut {
        out.push('?');
        out.push_str(REDACTED);
    }
    out
}

/// The userinfo of every `scheme://user:password@host` in `text`: the password
/// replaced (`user:<redacted>@`), or all of it when it has no `:` (a token
/// alone, `https://TOKEN@host`).
fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    let mut from = 0;
    while let Some(i) = text[from..].find("://").map(|i| i + from) {
        from = i + 3;
        let scheme = text[..i]
            .bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || b"+.-".contains(b))
            .count();
        if scheme == 0 || !text.as_bytes()[i - scheme].is_ascii_alphabetic() {
            continue;
        }
        let auth_start = i + 3;
        let authority_len = text[auth_start..]
            .find(|c: char| c.is_whitespace() || "/?#\"'`\\".contains(c))
            .unwrap_or(text.len() - auth_start);
        let authority = &text[auth_start..auth_start + authority_len];
        let Some(at) = authority.rfind('@') else {
            continue;
        };
        let userinfo = &authority[..at];
        let (start, end) = match userinfo.find(':') {
            Some(c) => (auth_start + c + 1, auth_start + at),
            None => (auth_start, auth_start + at),
        };
        if end > start && &text[start..end] != REDACTED {
            out.push_str(&text[done..start]);
            out.push_str(REDACTED);
            done = end;
        }
        from = auth_start + authority_len;
    }
    out.push_str(&text[done..]);
    out
}

/// A byte that makes a key part of a longer word.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Replace the value after each secret key on a line: `key: v`, `"key": "v"`,
/// `key=v`, `\"key\": \"v\"` (JSON inside a logfmt string); for
/// `Authorization` the credentials after the scheme (`Bearer`, `Basic`, …).
fn redact_keys(line: &str) -> String {
    let lower = line.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    for key in SECRET_KEYS {
        let mut from = 0;
        while let Some(i) = lower[from..].find(key).map(|i| i + from) {
            from = i + key.len();
            // `--token=…` is a key; `x-token`, `my_password` are other words.
            let dashes = b[..i].iter().rev().take_while(|&&c| c == b'-').count();
            let standalone = if dashes >= 2 {
                i == dashes || !is_word(b[i - dashes - 1])
            } else {
                i == 0 || !is_word(b[i - 1])
            };
            if !standalone || (from < b.len() && is_word(b[from])) {
                continue;
            }
            if let Some((s, e)) = value_span(line, from, key.ends_with("authorization")) {
                cuts.push((s, e));
                from = e;
            }
        }
    }
    if cuts.is_empty() {
        return line.to_string();
    }
    cuts.sort();
    let mut out = String::with_capacity(line.len());
    let mut done = 0;
    for (s, e) in cuts {
        if s < done {
            continue;
        }
        out.push_str(&line[done..s]);
        out.push_str(REDACTED);
        done = e;
    }
    out.push_str(&line[done..]);
    out
}

/// The value's span after a key that ends at `j`, if a separator follows and
/// the value is not empty or already redacted.
fn value_span(line: &str, mut j: usize, authorization: bool) -> Option<(usize, usize)> {
    let rest = &line[j..];
    // The key's closing quote: `"` or `\"`.
    if rest.starts_with("\\\"") {
        j += 2;
    } else if rest.starts_with('"') || rest.starts_with('\'') {
        j += 1;
    }
    let after = &line[j..];
    let k = after.find(|c: char| c != ' ' && c != '\t')?;
    if !after[k..].starts_with(':') && !after[k..].starts_with('=') {
        return None;
    }
    let mut v = j + k + 1;
    v += line[v..].len() - line[v..].trim_start_matches([' ', '\t']).len();
    let rest = &line[v..];
    let (mut start, end) = if let Some(q) = rest.strip_prefix("\\\"") {
        // Escaped quotes, as logfmt writes JSON inside `msg="…"`.
        (v + 2, v + 2 + q.find("\\\"").unwrap_or(q.len()))
    } else if let Some(q) = rest.strip_prefix('"') {
        // A JSON string, escapes included.
        let qb = q.as_bytes();
        let mut e = 0;
        while e < qb.len() && qb[e] != b'"' {
            e += if qb[e] == b'\\' { 2 } else { 1 };
        }
        (v + 1, v + 1 + e.min(qb.len()))
    } else if let Some(q) = rest.strip_prefix('\'') {
        (v + 1, v + 1 + q.find('\'').unwrap_or(q.len()))
    } else {
        let e = value_end(rest, authorization);
        (v, v + e)
    };
    if authorization {
        // `Bearer TOKEN`: the scheme stays, the credentials go.
        let value = &line[start..end];
        if let Some(sp) = value.find(' ') {
            if value[..sp].bytes().all(|c| c.is_ascii_alphabetic()) && sp + 1 < value.len() {
                start += sp + 1;
            }
        }
    }
    let value = line[start..end].trim_end_matches(['\r', '\n']);
    let end = start + value.len();
    (end > start && value != REDACTED && !value.starts_with(REDACTED)).then_some((start, end))
}

/// Where an unquoted value ends; an `Authorization` value is its scheme and the
/// word after it.
fn value_end(rest: &str, authorization: bool) -> usize {
    let stop = |c: char| c.is_whitespace() || ",;&}]\"'\\".contains(c);
    let first = rest.find(stop).unwrap_or(rest.len());
    if authorization && rest[..first].bytes().all(|c| c.is_ascii_alphabetic()) {
        let after = &rest[first..];
        if let Some(cred) = after.strip_prefix(' ') {
            if !cred.is_empty() && !cred.starts_with(stop) {
                return first + 1 + cred.find(stop).unwrap_or(cred.len());
            }
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_go_wherever_they_are() {
        let mut r = Redactor::default();
        r.add("s3cr3t-bmc-pass\n");
        r.add(r#"{"auths":{"quay.io":{"auth":"dXNlcjpwdWxsLXRva2Vu","email":"a@b"}}}"#);
        r.add("abc"); // too short to search for
        let t = r.redact("url https://1.2.3.4/s3cr3t-bmc-pass/x and dXNlcjpwdWxsLXRva2Vu, abc\n");
        assert_eq!(t, "url https://1.2.3.4/<redacted>/x and <redacted>, abc\n");
        // A pull secret written pretty goes whole also in its compact form.
        let mut r = Redactor::default();
        r.add("{ \"auths\": { \"r.example\": { \"auth\": \"cHVsbC1hdXRo\" } } }");
        assert_eq!(
            r.redact(r#"ps {"auths":{"r.example":{"auth":"cHVsbC1hdXRo"}}} end"#),
            "ps <redacted> end"
        );
        let mut r = Redactor::default();
        r.add("pa\"ss\\word");
        assert_eq!(r.redact(r#"{"x":"pa\"ss\\word"}"#), r#"{"x":"<redacted>"}"#);
        // Never the values in a debug print.
        assert_eq!(format!("{r:?}"), "Redactor(1 secrets)");
    }

    #[test]
    fn secret_keys_lose_their_values() {
        let r = Redactor::default();
        let yaml = "pullSecret: '{\"auths\":{}}'\nsshKey: ssh-ed25519 AAAA k\n    password: hunter22\n  client-key-data: LS0tLS1CRUdJTg==\n  client-certificate-data: Q0VSVA==\n    token: sha256~abcdef\n";
        assert_eq!(
            r.redact(yaml),
            "pullSecret: '<redacted>'\nsshKey: ssh-ed25519 AAAA k\n    password: <redacted>\n  client-key-data: <redacted>\n  client-certificate-data: Q0VSVA==\n    token: <redacted>\n"
        );
        let json = r#"{"username":"admin","password":"p\"w","token": "abc", "authority": "x"}"#;
        assert_eq!(
            r.redact(json),
            r#"{"username":"admin","password":"<redacted>","token": "<redacted>", "authority": "x"}"#
        );
        assert_eq!(
            r.redact("bmc_password=xyz other=1 Password: Secret1 --token=t0k&x"),
            "bmc_password=<redacted> other=1 Password: <redacted> --token=<redacted>&x"
        );
        // Not a key: a word that merely contains one, or prose.
        assert_eq!(
            r.redact("passwordless login, a token of, my_password=1, x-token: 2, tokens: 3"),
            "passwordless login, a token of, my_password=1, x-token: 2, tokens: 3"
        );
    }

    #[test]
    fn the_installers_password_line_is_redacted() {
        let mut r = Redactor::default();
        r.add("AbCdE-fGhIj-KlMnO-pQrSt");
        // The installer's own line, as logrus writes it.
        let line = r#"level=info msg="Login to the console with user: \"kubeadmin\", and password: \"AbCdE-fGhIj-KlMnO-pQrSt\"""#;
        let out = r.redact(line);
        assert!(!out.contains("AbCdE"), "{out}");
        assert!(out.contains(r#"password: \"<redacted>\""#), "{out}");
        assert!(out.contains(r#"user: \"kubeadmin\""#), "{out}");
        // Unknown to the redactor, still caught by the shape of the line.
        let out = Redactor::default().redact(r#"msg="and password: \"zzzzz-yyyyy\"" done"#);
        assert_eq!(out, r#"msg="and password: \"<redacted>\"" done"#);
        let out = Redactor::default().redact(r#"password: "plain""#);
        assert_eq!(out, r#"password: "<redacted>""#);
        assert_eq!(r.redact("x AbCdE-fGhIj-KlMnO-pQrSt y"), "x <redacted> y");
        assert_eq!(r.redact("no secret here"), "no secret here");
    }

    #[test]
    fn authorization_keeps_its_scheme_and_loses_its_credentials() {
        let r = Redactor::default();
        assert_eq!(
            r.redact("> Authorization: Bearer eyJhbGciOi.x-y_z\n> Accept: */*\n"),
            "> Authorization: Bearer <redacted>\n> Accept: */*\n"
        );
        assert_eq!(
            r.redact(r#"{"headers":{"Authorization":"Basic YWRtaW46cGFzcw=="}}"#),
            r#"{"headers":{"Authorization":"Basic <redacted>"}}"#
        );
        assert_eq!(
            r.redact("curl -H 'authorization: Bearer abc.def' https://x"),
            "curl -H 'authorization: Bearer <redacted>' https://x"
        );
        assert_eq!(
            r.redact("Proxy-Authorization: Basic dXNlcjpw"),
            "Proxy-Authorization: Basic <redacted>"
        );
    }

    #[test]
    fn url_credentials_go_the_host_stays() {
        let r = Redactor::default();
        assert_eq!(
            r.redact("  httpProxy: http://user:s3cret@proxy.example:3128\n"),
            "  httpProxy: http://user:<redacted>@proxy.example:3128\n"
        );
        assert_eq!(
            r.redact(
                r#"{"https_proxy":"https://u:p%40ss@10.0.0.1:8443/x","other":"https://h/a@b"}"#
            ),
            r#"{"https_proxy":"https://u:<redacted>@10.0.0.1:8443/x","other":"https://h/a@b"}"#
        );
        assert_eq!(
            r.redact("git clone https://ghp_T0KEN@github.com/o/r and ftp://host/ and x://a:@h"),
            "git clone https://<redacted>@github.com/o/r and ftp://host/ and x://a:@h"
        );
        assert_eq!(
            r.redact("see ://x@y and 1://a:b@c"),
            "see ://x@y and 1://a:b@c"
        );
    }

    #[test]
    fn private_key_blocks_of_every_kind_are_dropped() {
        let r = Redactor::default();
        for kind in [
            "OPENSSH PRIVATE KEY",
            "RSA PRIVATE KEY",
            "EC PRIVATE KEY",
            "PRIVATE KEY",
            "ENCRYPTED PRIVATE KEY",
        ] {
            let t = format!("before\n-----BEGIN {kind}-----\nb3BlbnNzaC1rZXk=\nAAAA\n-----END {kind}-----\nafter\n");
            assert_eq!(
                r.redact(&t),
                "before\n<redacted private key>\nafter\n",
                "{kind}"
            );
        }
        // Inside a JSON string, escaped newlines and all.
        let j = r#"{"key":"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n","x":1}"#;
        assert_eq!(r.redact(j), r#"{"key":"<redacted private key>\n","x":1}"#);
        // Cut at either end (a log tail, a truncated file).
        assert_eq!(
            r.redact("MIIEbody\n-----END EC PRIVATE KEY-----\nnext\n"),
            "<redacted private key>\nnext\n"
        );
        assert_eq!(
            r.redact("a\n-----BEGIN PRIVATE KEY-----\nMIIE\nMIIE\n"),
            "a\n<redacted private key>"
        );
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert_eq!(r.redact(cert), cert);
    }

    #[test]
    fn json_keeps_its_shape() {
        let mut r = Redactor::default();
        r.add("known-secret-1");
        let mut v = serde_json::json!({
            "a": "x known-secret-1 y",
            "password": "short",
            "Token": 1234,
            "nested": [{"auth": "zz"}, "http://u:pw@h:1/"],
            "n": null,
        });
        r.redact_json(&mut v);
        assert_eq!(v["a"], "x <redacted> y");
        assert_eq!(v["password"], REDACTED);
        assert_eq!(v["Token"], REDACTED);
        assert_eq!(v["nested"][0]["auth"], REDACTED);
        assert_eq!(v["nested"][1], "http://u:<redacted>@h:1/");
        assert_eq!(v["n"], serde_json::Value::Null);
    }

    #[test]
    fn a_clusters_files_give_its_secrets() {
        let d = tempfile::tempdir().unwrap();
        let c = crate::state::StateDir {
            root: d.path().into(),
        }
        .cluster("lab1");
        std::fs::create_dir_all(c.path().join("assets/auth")).unwrap();
        std::fs::write(c.assets().kubeadmin_password(), "Kube-Admin-Pass-1234\n").unwrap();
        std::fs::write(c.bmc_password(), "bmc-secret-pw-5678").unwrap();
        std::fs::write(c.http_token(), "httptokenhttptoken").unwrap();
        let ps = r#"{"auths":{"quay.io":{"auth":"cXVheTpzZWNyZXRwdWxs","email":"a@b"}}}"#;
        std::fs::write(
            c.install_config_backup(),
            format!(
                "apiVersion: v1\npullSecret: '{ps}'\nproxy:\n  httpProxy: http://me:pr%2Fxy-pass@proxy:3128\n\
                 platform:\n  baremetal:\n    hosts:\n    - name: a\n      bmc:\n        password: host-bmc-pw-1\n"
            ),
        )
        .unwrap();
        std::fs::write(
            c.assets().kubeconfig(),
            "users:\n- name: admin\n  user:\n    client-key-data: a2V5LWRhdGEtMQ==\n    token: sha256~kubetoken\n",
        )
        .unwrap();
        let r = Redactor::of_cluster(&c);
        let text =
            "Kube-Admin-Pass-1234 bmc-secret-pw-5678 httptokenhttptoken cXVheTpzZWNyZXRwdWxs \
                    pr/xy-pass pr%2Fxy-pass host-bmc-pw-1 a2V5LWRhdGEtMQ== sha256~kubetoken ok";
        assert_eq!(r.redact(text), format!("{} ok", [REDACTED; 9].join(" ")));
    }
    #[test]
    fn a_url_loses_its_user_info_query_and_fragment() {
        assert_eq!(
            url("https://u:pw@h:6183/a/b.iso?temp_url_sig=abc&x=1#f"),
            "https://h:6183/a/b.iso?<redacted>"
        );
        assert_eq!(url("http://TOKEN@h/x.iso"), "http://h/x.iso");
        assert_eq!(url("http://h/x.iso"), "http://h/x.iso");
        assert_eq!(url("http://h?a=b"), "http://h?<redacted>");
        assert_eq!(url("not a url?k=secret"), "not a url?<redacted>");
        assert_eq!(url("http://h/p@x/y.iso"), "http://h/p@x/y.iso");
    }
}

#[cfg(test)]
mod odd_text {
    use super::*;

    /// Text made of the pieces the rules look for, in any order: no panic (a
    /// slice off a character's boundary would be one), and redacting twice
    /// changes nothing more.
    #[test]
    fn any_mix_of_the_rules_pieces_is_redacted_stably() {
        const PIECES: &[&str] = &[
            "password",
            "Token",
            "auth",
            ":",
            "=",
            " ",
            "\"",
            "\\\"",
            "\\",
            "'",
            "é",
            "日本",
            "://",
            "http",
            "@",
            "/",
            "-----BEGIN ",
            "-----END ",
            "RSA PRIVATE KEY",
            "-----",
            "Authorization",
            "Bearer",
            "\n",
            "x",
            "--",
            "known-secret",
            "<redacted>",
        ];
        let mut r = Redactor::default();
        r.add("known-secret");
        let mut seed: u64 = 0x5eed;
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..(seed % 24) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                text.push_str(PIECES[(seed >> 33) as usize % PIECES.len()]);
            }
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let once = r.redact(&text);
            assert!(!once.contains("known-secret"), "{text:?} → {once:?}");
            assert_eq!(r.redact(&once), once, "{text:?}");
        }
    }
}
