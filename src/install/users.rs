//! The lab's users at the manifests target: each password read from its file
//! or generated once into `auth/<name>-password` (0600, kept across reruns: a
//! user may already log in with it), hashed with a random salt, rendered
//! (src/render/users.rs), and recorded without secrets in `users.json` for
//! `env` and `status`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::render::users::Hashed;
use crate::spec::User;
use crate::state::Assets;

/// One user as `users.json` records it: never the password, only where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    pub name: String,
    pub admin: bool,
    pub password_file: PathBuf,
}

/// The password of `user`: its file's, else the generated one in `assets`,
/// made now when there is none (also `shiftlab users NAME add`).
pub fn password(user: &User, assets: &Assets) -> Result<(String, PathBuf)> {
    if let Some(p) = &user.password_file {
        let pw = crate::spec::read_password_file(p)
            .map_err(|e| anyhow::anyhow!("users: {}: {e}", user.name))?;
        return Ok((pw, p.clone()));
    }
    let path = assets.user_password(&user.name);
    match std::fs::read_to_string(&path) {
        Ok(pw) if !pw.is_empty() => return Ok((pw, path)),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let pw = crate::files::random_secret(crate::files::PASSWORD_LEN)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    crate::files::write_private(&path, pw.as_bytes())?;
    Ok((pw, path))
}

/// The users' manifests (path, text) and their record.
pub struct Prepared {
    pub manifests: Vec<(String, String)>,
    pub record: Vec<Recorded>,
}

/// The users' manifests and their record, passwords made where missing.
pub fn prepare(users: &[User], assets: &Assets) -> Result<Prepared> {
    let mut hashed = Vec::new();
    let mut record = Vec::new();
    for u in users {
        let (pw, file) = password(u, assets)?;
        let salt: [u8; 16] = crate::files::random_bytes(16)?
            .try_into()
            .map_err(|_| anyhow::anyhow!("short read of random bytes"))?;
        hashed.push(Hashed {
            name: u.name.clone(),
            hash: crate::render::users::hash(&pw, salt).context("hashing a password")?,
            admin: u.admin,
        });
        record.push(Recorded {
            name: u.name.clone(),
            admin: u.admin,
            password_file: file,
        });
    }
    Ok(Prepared {
        manifests: crate::render::users::manifests(&hashed),
        record,
    })
}

/// Is `name` (a file of `openshift/`) one of the users' manifests shiftlab writes?
fn is_users_manifest(name: &str) -> bool {
    let secret = crate::render::users::SECRET.trim_start_matches("openshift/");
    let oauth = crate::render::users::OAUTH.trim_start_matches("openshift/");
    name == secret
        || name == oauth
        || name
            .strip_prefix("99-shiftlab-user-")
            .is_some_and(|n| n.ends_with("-cluster-admin.yaml"))
}

/// Remove the users' manifests of an earlier run that `kept` (this run's, by
/// their path in the asset directory) does not have: a user no longer an admin
/// must not keep a ClusterRoleBinding from a file left behind.
pub fn remove_stale(assets: &Assets, kept: &[(String, String)]) -> Result<()> {
    let dir = assets.openshift_manifests();
    let entries = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for e in entries {
        let e = e.with_context(|| format!("reading {}", dir.display()))?;
        let name = e.file_name().to_string_lossy().to_string();
        let rel = format!("openshift/{name}");
        if is_users_manifest(&name) && !kept.iter().any(|(p, _)| *p == rel) {
            std::fs::remove_file(e.path())
                .with_context(|| format!("removing {}", e.path().display()))?;
        }
    }
    Ok(())
}

/// Write `users.json`; without users there is none (a rerun without them removes it).
pub fn write_record(path: &Path, record: &[Recorded]) -> Result<()> {
    if !record.is_empty() {
        return crate::files::write_json(path, record);
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// How to log in as the cluster's first admin: never the password, its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Login {
    pub user: String,
    pub password_file: PathBuf,
    pub server: String,
}

/// The first admin of the cluster's `users:`, if any, at the API its plan names
/// (the plan serve works from, else the one the install recorded first).
pub fn admin_login(cluster: &crate::state::ClusterDir) -> Result<Option<Login>> {
    let Some(u) = read_record(&cluster.users())?.into_iter().find(|u| u.admin) else {
        return Ok(None);
    };
    let plan = if cluster.has_plan()? {
        cluster.read_plan()?
    } else {
        crate::state::read_plan_file(&cluster.install_plan())?
    };
    Ok(Some(Login {
        user: u.name,
        password_file: u.password_file,
        // The admin kubeconfig's server (openshift/installer pkg/asset/kubeconfig/admin.go).
        server: format!("https://api.{}:6443", plan.cluster_domain),
    }))
}

/// Read `users.json`; empty when the cluster has none.
pub fn read_record(path: &Path) -> Result<Vec<Recorded>> {
    Ok(crate::files::read_json(path)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, file: Option<PathBuf>, admin: bool) -> User {
        User {
            name: name.into(),
            password_file: file,
            admin,
        }
    }

    #[test]
    fn a_generated_password_is_made_once_private_and_kept() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let assets = crate::state::StateDir {
            root: d.path().into(),
        }
        .cluster("lab1")
        .assets();
        let given = d.path().join("bob.pw");
        std::fs::write(&given, "bobs-secret\n").unwrap();
        let users = [
            user("alice", None, true),
            user("bob", Some(given.clone()), false),
        ];
        let Prepared {
            manifests: m,
            record: rec,
        } = prepare(&users, &assets).unwrap();
        let file = assets.user_password("alice");
        let alice = std::fs::read_to_string(&file).unwrap();
        assert_eq!(alice.len(), crate::files::PASSWORD_LEN);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(rec[0].password_file, file);
        assert_eq!(rec[1].password_file, given);
        assert!(rec[0].admin && !rec[1].admin);
        // The Secret's hashes verify both passwords.
        let secret: yaml_serde::Value = yaml_serde::from_str(&m[0].1).unwrap();
        let b64 = secret["data"]["htpasswd"].as_str().unwrap();
        let text = String::from_utf8(
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64).unwrap(),
        )
        .unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let (n, h) = lines[0].split_once(':').unwrap();
        assert_eq!(n, "alice");
        assert!(bcrypt::verify(&alice, h).unwrap());
        let (n, h) = lines[1].split_once(':').unwrap();
        assert_eq!(n, "bob");
        assert!(bcrypt::verify("bobs-secret", h).unwrap());
        // Again: the same password, a new salt.
        let m2 = prepare(&users, &assets).unwrap().manifests;
        assert_eq!(std::fs::read_to_string(&file).unwrap(), alice);
        assert_ne!(m2[0].1, m[0].1, "a fresh salt each render");
        // Nothing of the passwords in the record.
        let json = serde_json::to_string(&rec).unwrap();
        assert!(!json.contains(&alice) && !json.contains("bobs-secret"));
    }

    #[test]
    fn a_rerun_removes_the_users_manifests_it_no_longer_renders_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let assets = crate::state::StateDir {
            root: d.path().into(),
        }
        .cluster("lab1")
        .assets();
        let dir = assets.openshift_manifests();
        std::fs::create_dir_all(&dir).unwrap();
        let first = prepare(
            &[user("alice", None, true), user("bob", None, true)],
            &assets,
        )
        .unwrap()
        .manifests;
        for (rel, text) in &first {
            std::fs::write(assets.file(rel), text).unwrap();
        }
        let others = [
            "99_kubeadmin-password-secret.yaml",
            "99-shiftlab-image-registry.yaml",
        ];
        for f in others {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        // bob is no admin any more.
        let second = prepare(
            &[user("alice", None, true), user("bob", None, false)],
            &assets,
        )
        .unwrap()
        .manifests;
        remove_stale(&assets, &second).unwrap();
        assert!(!dir.join("99-shiftlab-user-bob-cluster-admin.yaml").exists());
        assert!(dir
            .join("99-shiftlab-user-alice-cluster-admin.yaml")
            .exists());
        assert!(dir.join("99-shiftlab-users-oauth.yaml").exists());
        for f in others {
            assert!(dir.join(f).exists(), "{f}");
        }
        // No users at all: none of their manifests stays.
        remove_stale(&assets, &[]).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "99-shiftlab-image-registry.yaml",
                "99_kubeadmin-password-secret.yaml"
            ]
        );
    }

    #[test]
    fn a_password_file_gone_bad_since_validation_is_an_error_without_its_contents() {
        let d = tempfile::tempdir().unwrap();
        let assets = crate::state::StateDir {
            root: d.path().into(),
        }
        .cluster("lab1")
        .assets();
        let given = d.path().join("pw");
        std::fs::write(&given, "first\nsecond\n").unwrap();
        let e = prepare(&[user("carol", Some(given), false)], &assets)
            .err()
            .unwrap();
        let e = format!("{e:#}");
        assert!(e.contains("carol") && e.contains("one line"), "{e}");
        assert!(!e.contains("first") && !e.contains("second"), "{e}");
    }
}
