//! Keeping secrets out of a gather tarball. Two layers: files that only hold
//! secrets are never read into it (see `gather::collect`), and every text that
//! goes in passes [`Redactor::redact`]: the cluster's known secret values are
//! replaced wherever they appear, and so are the values of secret-bearing keys
//! (pull secret, passwords, tokens, kubeconfig keys) and PEM private-key blocks.

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// Keys whose value is a secret, in YAML (`key: value`) or JSON (`"key": "value"`).
const SECRET_KEYS: &[&str] = &[
    "pullSecret",
    "pull_secret",
    "password",
    "bmc_password",
    "auth",
    "token",
    "client-key-data",
    "id_token",
    "refresh-token",
    "access-token",
];

/// Secret values shorter than this are not searched for (a 3-letter password
/// would redact half the logs); they are still caught by their keys.
const MIN_SECRET_LEN: usize = 6;

#[derive(Debug, Default, Clone)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Remember `value` (trimmed) as a secret to remove wherever it appears; a
    /// pull secret's JSON also contributes each registry's `auth`.
    pub fn add(&mut self, value: &str) {
        let v = value.trim();
        if v.len() >= MIN_SECRET_LEN && !self.secrets.iter().any(|s| s == v) {
            self.secrets.push(v.to_string());
        }
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(v) {
            if let Some(auths) = json.get("auths").and_then(|a| a.as_object()) {
                for a in auths.values() {
                    for k in ["auth", "password", "identitytoken"] {
                        if let Some(s) = a.get(k).and_then(|s| s.as_str()) {
                            self.add(s);
                        }
                    }
                }
            }
        }
        // Longest first, so that a secret containing another goes whole.
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// `text` without any secret.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        let mut lines = Vec::new();
        let mut in_key = false;
        for line in out.split_inclusive('\n') {
            if line.contains("-----BEGIN") && line.contains("PRIVATE KEY-----") {
                in_key = true;
                lines.push(format!("{REDACTED} (private key)\n"));
                continue;
            }
            if in_key {
                if line.contains("-----END") {
                    in_key = false;
                }
                continue;
            }
            lines.push(redact_keys(line));
        }
        lines.concat()
    }
}

/// Replace the value after each secret key on a line: `key: v`, `"key": "v"`,
/// `key=v`.
fn redact_keys(line: &str) -> String {
    let mut out = line.to_string();
    for key in SECRET_KEYS {
        let mut from = 0;
        while let Some(i) = out[from..].find(key).map(|i| i + from) {
            let before_ok = i == 0 || {
                let c = out.as_bytes()[i - 1];
                !(c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
            };
            let mut j = i + key.len();
            let bytes = out.as_bytes();
            if j < bytes.len() && bytes[j] == b'"' {
                j += 1;
            }
            let after = &out[j..];
            let sep = after
                .find(|c: char| !c.is_whitespace())
                .filter(|&k| after[k..].starts_with(':') || after[k..].starts_with('='));
            let (Some(k), true) = (sep, before_ok) else {
                from = i + key.len();
                continue;
            };
            let mut v = j + k + 1;
            while v < out.len() && out.as_bytes()[v] == b' ' {
                v += 1;
            }
            let rest = &out[v..];
            let (start, end) = if let Some(q) = rest.strip_prefix('"') {
                // A JSON string, escapes included.
                let mut e = 0;
                let b = q.as_bytes();
                while e < b.len() && b[e] != b'"' {
                    e += if b[e] == b'\\' { 2 } else { 1 };
                }
                (v + 1, v + 1 + e.min(b.len()))
            } else if let Some(q) = rest.strip_prefix('\'') {
                (v + 1, v + 1 + q.find('\'').unwrap_or(q.len()))
            } else {
                let e = rest
                    .find(|c: char| c.is_whitespace() || c == ',' || c == '}')
                    .unwrap_or(rest.len());
                (v, v + e)
            };
            if end > start && &out[start..end] != REDACTED {
                out.replace_range(start..end, REDACTED);
            }
            from = start + REDACTED.len().min(out.len() - start);
        }
    }
    out
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
    }

    #[test]
    fn secret_keys_lose_their_values() {
        let r = Redactor::default();
        let yaml = "pullSecret: '{\"auths\":{}}'\nsshKey: ssh-ed25519 AAAA k\n    password: hunter22\n  client-key-data: LS0tLS1CRUdJTg==\n";
        assert_eq!(
            r.redact(yaml),
            "pullSecret: '<redacted>'\nsshKey: ssh-ed25519 AAAA k\n    password: <redacted>\n  client-key-data: <redacted>\n"
        );
        let json = r#"{"username":"admin","password":"p\"w","token": "abc", "authority": "x"}"#;
        assert_eq!(
            r.redact(json),
            r#"{"username":"admin","password":"<redacted>","token": "<redacted>", "authority": "x"}"#
        );
        assert_eq!(
            r.redact("bmc_password=xyz other=1"),
            "bmc_password=<redacted> other=1"
        );
        // Not a key: a word that merely contains one, or prose.
        assert_eq!(
            r.redact("passwordless login, a token of"),
            "passwordless login, a token of"
        );
    }

    #[test]
    fn private_key_blocks_are_dropped() {
        let r = Redactor::default();
        let t = "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----\nafter\n";
        assert_eq!(r.redact(t), "before\n<redacted> (private key)\nafter\n");
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert_eq!(r.redact(cert), cert);
    }
}
