//! `shiftlab users NAME add|remove|list` (docs/users.md): the users of an
//! installed cluster changed through its API (kube::users), the password
//! taken or made as at install time (a generated one 0600 in `auth/`), and the
//! record `users.json` that `env` and `status` read kept in step. Nothing of a
//! password reaches the output: only where it is.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;

use crate::install::users::{read_record, write_record, Recorded};
use crate::kube::users::{self as api, AddRequest, Listing};
use crate::state::ClusterDir;

/// What `add` or `remove` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub user: String,
    /// Each change made, as said; empty: it was so already.
    pub done: Vec<String>,
    /// Where the user's password is (`add`; never the password).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
}

/// The cluster's admin kubeconfig, `given` or the install's; it must exist.
fn kubeconfig(cluster: &ClusterDir, name: &str, given: Option<&Path>) -> Result<PathBuf> {
    let path = given.map_or_else(|| cluster.assets().kubeconfig(), Path::to_path_buf);
    if !path.is_file() {
        bail!(
            "{name} has no kubeconfig ({}): users are changed on an installed cluster (--kubeconfig names another)",
            path.display()
        );
    }
    Ok(path)
}

pub fn list(cluster: &ClusterDir, name: &str, given: Option<&Path>) -> Result<Listing> {
    let kc = kubeconfig(cluster, name, given)?;
    crate::runtime::block_on(async {
        let client = crate::kube::approve::client_from_kubeconfig(&kc).await?;
        api::list(&client).await
    })
}

/// Add `user` (a cluster-admin with `admin`), its password from
/// `password_file` or generated; rerun with the same password changes nothing.
pub fn add(
    cluster: &ClusterDir,
    name: &str,
    given: Option<&Path>,
    user: &str,
    admin: bool,
    password_file: Option<&Path>,
) -> Result<Change> {
    // Everything checked before anything is touched.
    crate::spec::check_user_name(user).map_err(|e| anyhow::anyhow!("user: {e}"))?;
    if let Some(p) = password_file {
        crate::spec::read_password_file(p).map_err(|e| anyhow::anyhow!("--password-file: {e}"))?;
    }
    let kc = kubeconfig(cluster, name, given)?;
    // Recorded as given on the command line, it would mean nothing elsewhere.
    let password_file = password_file.map(std::path::absolute).transpose()?;
    let spec_user = crate::spec::User {
        name: user.to_string(),
        password_file,
        admin,
    };
    let (password, file) = crate::install::users::password(&spec_user, &cluster.assets())?;
    let done = crate::runtime::block_on(async {
        let client = crate::kube::approve::client_from_kubeconfig(&kc).await?;
        let req = AddRequest {
            cluster: name,
            user,
            password: &password,
            admin,
        };
        api::add(&client, &req).await
    })?;
    let mut record = read_record(&cluster.users())?;
    match record.iter_mut().find(|r| r.name == user) {
        Some(r) => {
            r.admin |= admin;
            r.password_file = file.clone();
        }
        None => record.push(Recorded {
            name: user.to_string(),
            admin,
            password_file: file.clone(),
        }),
    }
    write_record(&cluster.users(), &record)?;
    Ok(Change {
        user: user.to_string(),
        done,
        password_file: Some(file),
    })
}

/// Remove `user`, or kubeadmin once another cluster-admin has logged in.
pub fn remove(
    cluster: &ClusterDir,
    name: &str,
    given: Option<&Path>,
    user: &str,
) -> Result<Change> {
    let kubeadmin = user == "kubeadmin";
    if !kubeadmin {
        crate::spec::check_user_name(user).map_err(|e| anyhow::anyhow!("user: {e}"))?;
    }
    let kc = kubeconfig(cluster, name, given)?;
    let done = crate::runtime::block_on(async {
        let client = crate::kube::approve::client_from_kubeconfig(&kc).await?;
        if kubeadmin {
            api::remove_kubeadmin(&client).await
        } else {
            api::remove(&client, name, user).await
        }
    })?;
    if !kubeadmin {
        let record = read_record(&cluster.users())?;
        let kept: Vec<Recorded> = record.iter().filter(|r| r.name != user).cloned().collect();
        if kept.len() != record.len() {
            write_record(&cluster.users(), &kept)?;
        }
        // The generated password is shiftlab's: it goes with the user (a
        // user's own password file is not touched).
        let generated = cluster.assets().user_password(user);
        match std::fs::remove_file(&generated) {
            Ok(()) => tracing::info!("removed {}", generated.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("removing {}: {e}", generated.display()),
        }
    }
    Ok(Change {
        user: user.to_string(),
        done,
        password_file: None,
    })
}

/// `list`'s table: no hash, no password.
pub fn render_list(l: &Listing) -> String {
    let yes = |b: bool| if b { "yes" } else { "no" };
    let mut out = match (&l.provider, &l.secret) {
        (Some(p), Some(s)) => format!("identity provider {p} (htpasswd, Secret {s})\n"),
        _ => "no htpasswd identity provider (users NAME add USER adds one)\n".to_string(),
    };
    let w = l
        .users
        .iter()
        .map(|u| u.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    out += &format!("{:w$}  {:13}  LOGGED IN\n", "USER", "CLUSTER-ADMIN");
    for u in &l.users {
        out += &format!("{:w$}  {:13}  {}\n", u.name, yes(u.admin), yes(u.logged_in));
    }
    out += if l.kubeadmin {
        "kubeadmin: present (kube-system/kubeadmin)\n"
    } else {
        "kubeadmin: removed\n"
    };
    out
}

/// `add`'s and `remove`'s lines: each change, or that there was none.
pub fn render_change(c: &Change) -> String {
    let mut out: String = c.done.iter().map(|d| format!("{d}\n")).collect();
    if c.done.is_empty() && c.user == "kubeadmin" {
        out += "kubeadmin: already removed (no Secret kube-system/kubeadmin)\n";
    } else if c.done.is_empty() {
        out += &format!("{}: nothing to change\n", c.user);
    }
    if let Some(f) = &c.password_file {
        out += &format!("{}'s password: {}\n", c.user, f.display());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::users::UserView;

    #[test]
    fn the_table_has_no_secret_and_says_kubeadmin() {
        let l = Listing {
            provider: Some("shiftlab-htpasswd".into()),
            secret: Some("openshift-config/shiftlab-htpasswd".into()),
            kubeadmin: false,
            users: vec![UserView {
                name: "alice".into(),
                admin: true,
                logged_in: false,
            }],
        };
        assert_eq!(
            render_list(&l),
            "identity provider shiftlab-htpasswd (htpasswd, Secret openshift-config/shiftlab-htpasswd)\n\
             USER   CLUSTER-ADMIN  LOGGED IN\n\
             alice  yes            no\n\
             kubeadmin: removed\n"
        );
    }

    #[test]
    fn bad_input_is_refused_before_anything_is_touched() {
        let d = tempfile::tempdir().unwrap();
        let state = crate::state::StateDir {
            root: d.path().into(),
        };
        let c = state.cluster("lab1");
        let e = add(&c, "lab1", None, "../etc", false, None).unwrap_err();
        assert!(format!("{e:#}").contains("not a valid user name"), "{e:#}");
        let e = add(&c, "lab1", None, "kubeadmin", true, None).unwrap_err();
        assert!(format!("{e:#}").contains("installer's own user"), "{e:#}");
        let pw = d.path().join("pw");
        std::fs::write(&pw, "first-secret\nsecond\n").unwrap();
        let e = format!(
            "{:#}",
            add(&c, "lab1", None, "bob", false, Some(&pw)).unwrap_err()
        );
        assert!(
            e.contains("--password-file") && !e.contains("first-secret"),
            "{e}"
        );
        // No kubeconfig: said, and no password was made.
        let e = format!(
            "{:#}",
            add(&c, "lab1", None, "bob", false, None).unwrap_err()
        );
        assert!(e.contains("has no kubeconfig"), "{e}");
        assert!(!c.assets().user_password("bob").exists());
        let e = format!("{:#}", remove(&c, "lab1", None, "a/b").unwrap_err());
        assert!(e.contains("not a valid user name"), "{e}");
    }
}
