//! The secrets a cluster's files hold, so that no response of the web page ever
//! carries one: every JSON body is scrubbed of them before it leaves serve.
//! None of the values the page shows is meant to hold a secret (the plan holds
//! none, status names files, not contents); this is the second line, for what
//! a console log or a note might echo.

use crate::state::ClusterDir;

/// What replaces a secret in a response.
pub const REDACTED: &str = "[redacted]";

/// Shorter strings are not treated as secrets (they would match ordinary text).
const MIN_SECRET_LEN: usize = 8;

/// The secret strings of one cluster.
#[derive(Debug, Default, Clone)]
pub struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    /// Read them from the cluster's files: the kubeadmin password, the lab BMC's
    /// password, the HTTP token, and the pull secret as install-config carries it
    /// (the whole JSON and each registry's `auth`). Unreadable files add nothing.
    pub fn of(cluster: &ClusterDir) -> Secrets {
        let mut s = Secrets::default();
        let read = |p: std::path::PathBuf| std::fs::read_to_string(p).ok();
        if let Some(p) = read(cluster.assets().kubeadmin_password()) {
            s.add(p.trim());
        }
        if let Some(p) = read(cluster.bmc_password()) {
            s.add(p.trim());
        }
        if let Some(p) = read(cluster.http_token()) {
            s.add(p.trim());
        }
        for f in [
            cluster.install_config_backup(),
            cluster.assets().install_config(),
        ] {
            if let Some(text) = read(f) {
                s.add_pull_secret_of(&text);
            }
        }
        s
    }

    /// Add one secret (ignored when too short to be one).
    pub fn add(&mut self, secret: &str) {
        let secret = secret.trim();
        if secret.len() >= MIN_SECRET_LEN && !self.values.iter().any(|v| v == secret) {
            self.values.push(secret.to_string());
        }
    }

    /// The `pullSecret` of an install-config.yaml: the string as written, its
    /// compact JSON form, and every `auth` (and `password`) in it.
    fn add_pull_secret_of(&mut self, install_config: &str) {
        let Ok(doc) = yaml_serde::from_str::<yaml_serde::Value>(install_config) else {
            return;
        };
        let Some(ps) = doc.get("pullSecret").and_then(|v| v.as_str()) else {
            return;
        };
        self.add(ps);
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(ps) {
            if let Ok(compact) = serde_json::to_string(&json) {
                self.add(&compact);
            }
            if let Some(auths) = json.get("auths").and_then(|a| a.as_object()) {
                for entry in auths.values() {
                    for key in ["auth", "password", "identitytoken"] {
                        if let Some(v) = entry.get(key).and_then(|v| v.as_str()) {
                            self.add(v);
                        }
                    }
                }
            }
        }
    }

    /// `text` with every secret replaced, longest first (a secret inside another
    /// goes with it); JSON text is also scrubbed of each secret's escaped form.
    pub fn scrub(&self, text: &str) -> String {
        let mut values: Vec<&String> = self.values.iter().collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        let mut out = text.to_string();
        for v in values {
            out = out.replace(v.as_str(), REDACTED);
            if let Ok(quoted) = serde_json::to_string(v) {
                let escaped = &quoted[1..quoted.len() - 1];
                if escaped != v.as_str() {
                    out = out.replace(escaped, REDACTED);
                }
            }
        }
        out
    }

    /// Add another cluster's.
    pub fn extend(&mut self, other: &Secrets) {
        for v in &other.values {
            self.add(v);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateDir;

    #[test]
    fn every_planted_secret_is_found_and_scrubbed() {
        let d = tempfile::tempdir().unwrap();
        let c = StateDir {
            root: d.path().into(),
        }
        .cluster("lab1");
        std::fs::create_dir_all(c.path().join("assets/auth")).unwrap();
        std::fs::write(c.assets().kubeadmin_password(), "Kube-Admin-Pass-1234\n").unwrap();
        std::fs::write(c.bmc_password(), "bmc-secret-pw-5678").unwrap();
        let ps = r#"{"auths":{"quay.io":{"auth":"cXVheTpzZWNyZXRwdWxs","email":"a@b"}}}"#;
        std::fs::write(
            c.install_config_backup(),
            format!("apiVersion: v1\npullSecret: '{ps}'\n"),
        )
        .unwrap();
        let s = Secrets::of(&c);
        let body = serde_json::json!({
            "a": "login Kube-Admin-Pass-1234 here",
            "b": ["bmc-secret-pw-5678"],
            "c": ps,
            "d": "auth cXVheTpzZWNyZXRwdWxs",
            "e": "short ok",
        })
        .to_string();
        let out = s.scrub(&body);
        for planted in [
            "Kube-Admin-Pass-1234",
            "bmc-secret-pw-5678",
            "cXVheTpzZWNyZXRwdWxs",
            "quay.io",
        ] {
            assert!(!out.contains(planted), "{planted} left in {out}");
        }
        assert!(out.contains("short ok"), "{out}");
        // Still JSON.
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["a"], "login [redacted] here");
    }

    #[test]
    fn short_strings_are_not_secrets() {
        let mut s = Secrets::default();
        s.add("abc");
        assert!(s.is_empty());
        assert_eq!(s.scrub("abc"), "abc");
    }
}
