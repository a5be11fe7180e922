//! The installer's output, made safe for shiftlab's own log and progress line.
//! `openshift-install wait-for install-complete` logs the kubeadmin password in
//! clear (openshift/installer cmd/openshift-install/command/waitfor.go,
//! `logComplete`: "Login to the console with user: \"kubeadmin\", and password:
//! \"…\""); shiftlab keeps the installer's output in the cluster's
//! `openshift-install.log` and shows its last line while it runs, so both go
//! through [`Redactor`]: the password file's contents, wherever they appear, and
//! the value of that log line even before the file is read. The files themselves
//! (`auth/kubeadmin-password`, `auth/kubeconfig`, the installer's own
//! `.openshift_install.log` that repeats the line) are made 0600 after every run
//! ([`protect_assets`]).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// Removes known secrets from lines of text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor for the secrets found in the asset directory (the kubeadmin
    /// password, when the installer wrote it).
    pub fn for_assets(password_file: &Path) -> Self {
        let mut r = Redactor::default();
        if let Ok(p) = std::fs::read_to_string(password_file) {
            r.add(p.trim());
        }
        r
    }

    pub fn add(&mut self, secret: &str) {
        // Too short to be a secret, and would garble every line.
        if secret.len() >= 8 {
            self.secrets.push(secret.to_string());
        }
    }

    /// The line with every known secret, and the value of any `password: "…"`,
    /// replaced.
    pub fn line(&self, line: &str) -> String {
        let mut out = line.to_string();
        for s in &self.secrets {
            out = out.replace(s.as_str(), REDACTED);
        }
        redact_password_values(&out)
    }
}

/// `password: "…"` (quotes possibly escaped, as logrus writes them inside
/// `msg="…"`) → `password: "<redacted>"`.
fn redact_password_values(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.find("password: ") {
        let (head, tail) = rest.split_at(i + "password: ".len());
        out.push_str(head);
        // The opening quote: `"` or `\"`.
        let quote = if tail.starts_with("\\\"") {
            "\\\""
        } else if tail.starts_with('"') {
            "\""
        } else {
            rest = tail;
            continue;
        };
        let body = &tail[quote.len()..];
        match body.find(quote) {
            Some(end) => {
                out.push_str(quote);
                out.push_str(REDACTED);
                out.push_str(quote);
                rest = &body[end + quote.len()..];
            }
            None => {
                out.push_str(quote);
                out.push_str(REDACTED);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Make the installer's secret-bearing files 0600 (it writes them 0640:
/// pkg/asset/asset.go, `PersistToFile`).
pub fn protect_assets(assets: &Path) -> Result<()> {
    let mut files = vec![assets.join(".openshift_install.log")];
    if let Ok(rd) = std::fs::read_dir(assets.join("auth")) {
        files.extend(rd.flatten().map(|e| e.path()));
    }
    for f in files {
        if f.is_file() {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("making {} private", f.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeadmin_password_never_passes() {
        let mut r = Redactor::default();
        r.add("AbCdE-fGhIj-KlMnO-pQrSt");
        // The installer's own line, as logrus writes it.
        let line = r#"level=info msg="Login to the console with user: \"kubeadmin\", and password: \"AbCdE-fGhIj-KlMnO-pQrSt\"""#;
        let out = r.line(line);
        assert!(!out.contains("AbCdE"), "{out}");
        assert!(out.contains(r#"password: \"<redacted>\""#), "{out}");
        assert!(out.contains(r#"user: \"kubeadmin\""#), "{out}");
        // Unknown to the redactor, still caught by the shape of the line.
        let out = Redactor::default().line(r#"msg="and password: \"zzzzz-yyyyy\"" done"#);
        assert_eq!(out, r#"msg="and password: \"<redacted>\"" done"#);
        let out = Redactor::default().line(r#"password: "plain""#);
        assert_eq!(out, r#"password: "<redacted>""#);
        // The secret anywhere else in a line.
        assert_eq!(r.line("x AbCdE-fGhIj-KlMnO-pQrSt y"), "x <redacted> y");
        assert_eq!(r.line("no secret here"), "no secret here");
    }

    #[test]
    fn auth_files_become_private() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("auth")).unwrap();
        for f in [
            "auth/kubeadmin-password",
            "auth/kubeconfig",
            ".openshift_install.log",
        ] {
            let p = d.path().join(f);
            std::fs::write(&p, "x").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        protect_assets(d.path()).unwrap();
        for f in [
            "auth/kubeadmin-password",
            "auth/kubeconfig",
            ".openshift_install.log",
        ] {
            let m = std::fs::metadata(d.path().join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(m & 0o777, 0o600, "{f}");
        }
    }
}
