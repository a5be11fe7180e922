//! `users:`: the lab's htpasswd users. Every entry is checked before anything is
//! touched; a password file's contents are never echoed.
//!
//! A name becomes an OpenShift `User`, a line of the htpasswd file (`name:hash`,
//! so no `:`), and part of file names (`auth/<name>-password`, the admin's
//! ClusterRoleBinding manifest), so the rule is strict: [`USER_NAME_RULE`].

use std::collections::BTreeSet;
use std::path::Path;

use super::Env;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;
use crate::spec::types::User;

/// What a user name may be, as the error says it.
pub const USER_NAME_RULE: &str =
    "1 to 63 characters: lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit";

/// The installer's own user; its password is the installer's (`auth/kubeadmin-password`).
const KUBEADMIN: &str = "kubeadmin";

/// bcrypt reads at most 72 bytes of a password: a longer one would be cut silently.
pub const MAX_PASSWORD_BYTES: usize = 72;

pub fn is_user_name(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && edge(b[0])
        && edge(b[b.len() - 1])
        && b.iter()
            .all(|&c| edge(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// Whether `n` may be a lab user's name (the cluster file's `users:` and
/// `shiftlab users NAME add`): the error says what is valid.
pub fn check_user_name(n: &str) -> Result<(), String> {
    if n == KUBEADMIN {
        return Err("\"kubeadmin\" is the installer's own user; choose another name".into());
    }
    if n.starts_with("system:") {
        return Err(format!(
            "{n:?} is in OpenShift's reserved system: namespace; choose another name"
        ));
    }
    if !is_user_name(n) {
        return Err(format!("{n:?} is not a valid user name: {USER_NAME_RULE}"));
    }
    Ok(())
}

/// The password in `path`: one non-empty line (a final newline allowed) of at
/// most [`MAX_PASSWORD_BYTES`]. The error names the file, never its contents.
pub fn read_password_file(path: &Path) -> Result<String, String> {
    let text = crate::spec::read_input(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let line = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if line.is_empty() {
        return Err(format!(
            "{} is empty; it must hold the password on one line",
            path.display()
        ));
    }
    if line.contains(['\n', '\r']) {
        return Err(format!(
            "{} has more than one line; it must hold the password on one line",
            path.display()
        ));
    }
    if line.len() > MAX_PASSWORD_BYTES {
        return Err(format!(
            "{} holds a password of {} bytes; bcrypt uses at most {MAX_PASSWORD_BYTES}",
            path.display(),
            line.len()
        ));
    }
    Ok(line.to_string())
}

pub fn resolve(raw: &RawSpec, env: &Env, d: &mut Diagnostics) -> Vec<User> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in &raw.users {
        let Some(name) = &entry.name else {
            d.error(&entry.field, "needs `name` (the user's login name)");
            continue;
        };
        let n = name.v.as_str();
        if let Err(e) = check_user_name(n) {
            d.error(&name.field, e);
            continue;
        }
        if !seen.insert(n.to_string()) {
            d.error(
                &name.field,
                format!("{n:?} is listed twice; each user once"),
            );
            continue;
        }
        let password_file = entry.password_file.as_ref().map(|p| {
            let path = env.path(&p.v);
            if let Err(e) = read_password_file(&path) {
                d.error(&p.field, e);
            }
            path
        });
        out.push(User {
            name: n.to_string(),
            password_file,
            admin: entry.admin.as_ref().is_some_and(|a| a.v),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_are_strict() {
        for ok in ["alice", "a", "dev-1", "b.o_b", "0x"] {
            assert!(is_user_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Alice",
            "a:b",
            "a/b",
            "..",
            ".a",
            "a-",
            "-a",
            "a b",
            "é",
            "a\n",
            &"a".repeat(64),
        ] {
            assert!(!is_user_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_password_file_holds_one_line() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("pw");
        for (text, ok) in [
            ("s3cret\n", Some("s3cret")),
            ("s3cret", Some("s3cret")),
            ("s3 cret:x\r\n", Some("s3 cret:x")),
            ("", None),
            ("\n", None),
            ("alpha\nbravo\n", None),
        ] {
            std::fs::write(&f, text).unwrap();
            let got = read_password_file(&f);
            assert_eq!(got.as_deref().ok(), ok, "{text:?}");
            if let Err(e) = got {
                // The message names the file, never what it holds.
                assert!(e.contains(&f.display().to_string()), "{e}");
                for secret in ["alpha", "bravo"] {
                    assert!(!e.contains(secret), "{e}");
                }
            }
        }
        std::fs::write(&f, "x".repeat(73)).unwrap();
        assert!(read_password_file(&f).unwrap_err().contains("73 bytes"));
        std::fs::write(&f, "x".repeat(72)).unwrap();
        assert!(read_password_file(&f).is_ok());
        assert!(read_password_file(&d.path().join("absent"))
            .unwrap_err()
            .contains("cannot read"));
    }
}
