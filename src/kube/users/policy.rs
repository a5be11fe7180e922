//! What `users` reads from the API objects and decides from them, pure:
//! who is a cluster-admin (ClusterRoleBindings), which of them shiftlab made,
//! who has logged in (a `User` exists), which htpasswd provider the OAuth has,
//! and whether kubeadmin or a user may be removed.
//!
//! OpenShift's docs ("Removing the kubeadmin user", Authentication and
//! authorization, e.g. docs.redhat.com openshift_container_platform 4.8
//! understanding-identity-provider §6.3): after an identity provider is defined
//! and another user is a cluster-admin, `oc delete secrets kubeadmin -n
//! kube-system`; "If you follow this procedure before another user is a
//! cluster-admin, then OpenShift Container Platform must be reinstalled. It is
//! not possible to undo this command." A binding alone does not prove the user
//! can log in (a wrong password, a broken provider), so shiftlab asks for a
//! cluster-admin that has logged in: the OAuth server made its `User`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::kube::owner::MANAGED_BY;

/// The ClusterRole whose binding makes a cluster-admin.
pub const CLUSTER_ADMIN: &str = "cluster-admin";

/// A ClusterRoleBinding of `cluster-admin` to a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminBinding {
    pub name: String,
    /// Labelled `app.kubernetes.io/managed-by: shiftlab`: shiftlab may delete it.
    pub shiftlab: bool,
    /// Its subjects are this one user only.
    pub sole: bool,
}

/// The users bound to `cluster-admin` (subject kind `User`), with their bindings.
pub fn cluster_admins(bindings: &Value) -> BTreeMap<String, Vec<AdminBinding>> {
    let mut out: BTreeMap<String, Vec<AdminBinding>> = BTreeMap::new();
    let items = bindings.get("items").and_then(Value::as_array);
    for b in items.into_iter().flatten() {
        let role = b.get("roleRef");
        let is_admin = role.and_then(|r| r.get("kind")).and_then(Value::as_str)
            == Some("ClusterRole")
            && role.and_then(|r| r.get("name")).and_then(Value::as_str) == Some(CLUSTER_ADMIN);
        if !is_admin {
            continue;
        }
        let name = b
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let shiftlab = b
            .pointer("/metadata/labels")
            .and_then(|l| l.get(MANAGED_BY))
            .and_then(Value::as_str)
            == Some("shiftlab");
        let subjects = b
            .get("subjects")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for s in subjects {
            if s.get("kind").and_then(Value::as_str) != Some("User") {
                continue;
            }
            let Some(user) = s.get("name").and_then(Value::as_str) else {
                continue;
            };
            out.entry(user.to_string()).or_default().push(AdminBinding {
                name: name.to_string(),
                shiftlab,
                sole: subjects.len() == 1,
            });
        }
    }
    out
}

/// The names of a `UserList` (user.openshift.io/v1): who has logged in.
pub fn logged_in(users: &Value) -> BTreeSet<String> {
    users
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|u| u.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// An htpasswd identity provider of the OAuth `cluster`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    pub name: String,
    /// Its Secret in `openshift-config` (`htpasswd.fileData.name`).
    pub secret: String,
}

/// The OAuth's htpasswd provider: shiftlab's by name if it has it, else the
/// first of type `HTPasswd`.
pub fn htpasswd_provider(oauth: &Value, preferred: &str) -> Option<Provider> {
    let all: Vec<Provider> = oauth
        .pointer("/spec/identityProviders")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("HTPasswd"))
        .filter_map(|p| {
            Some(Provider {
                name: p.get("name")?.as_str()?.to_string(),
                secret: p.pointer("/htpasswd/fileData/name")?.as_str()?.to_string(),
            })
        })
        .collect();
    all.iter()
        .find(|p| p.name == preferred)
        .or(all.first())
        .cloned()
}

/// What the cluster has that the removals decide on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// Users bound to `cluster-admin`.
    pub admins: BTreeSet<String>,
    /// Users that have logged in (a `User` object).
    pub logged_in: BTreeSet<String>,
    /// `kube-system/kubeadmin` exists.
    pub kubeadmin: bool,
}

impl Facts {
    /// The cluster-admins that have logged in, but `except`.
    fn proven_admins(&self, except: &str) -> Vec<String> {
        self.admins
            .iter()
            .filter(|a| *a != except && self.logged_in.contains(*a))
            .cloned()
            .collect()
    }
}

/// Whether kubeadmin may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeadminRemoval {
    /// Remove it: these cluster-admins have logged in.
    Remove { admins: Vec<String> },
    /// It is gone already.
    Gone,
    /// Not yet: why, and what to do first.
    Refuse(String),
}

/// kubeadmin may go only when another cluster-admin has logged in.
pub fn kubeadmin_removal(f: &Facts) -> KubeadminRemoval {
    if !f.kubeadmin {
        return KubeadminRemoval::Gone;
    }
    let proven = f.proven_admins("kubeadmin");
    if !proven.is_empty() {
        return KubeadminRemoval::Remove { admins: proven };
    }
    let admins: Vec<&String> = f.admins.iter().filter(|a| *a != "kubeadmin").collect();
    KubeadminRemoval::Refuse(if admins.is_empty() {
        "no user is a cluster-admin: add one (users NAME add USER --admin), log in as that user, then remove kubeadmin".into()
    } else {
        let names: Vec<&str> = admins.iter().map(|a| a.as_str()).collect();
        format!(
            "no other cluster-admin has logged in yet: log in once as {} (oc login -u USER), then remove kubeadmin",
            names.join(" or ")
        )
    })
}

/// Whether `user` may be removed: not the last cluster-admin that has logged
/// in once kubeadmin is gone (nobody could administer the cluster).
pub fn user_removal(f: &Facts, user: &str) -> Result<(), String> {
    let last = !f.kubeadmin
        && f.admins.contains(user)
        && f.logged_in.contains(user)
        && f.proven_admins(user).is_empty();
    if last {
        return Err(format!(
            "{user} is the last cluster-admin that has logged in and kubeadmin is removed: nobody could administer the cluster; make another user a cluster-admin and log in as that user first"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts(admins: &[&str], logged_in: &[&str], kubeadmin: bool) -> Facts {
        Facts {
            admins: admins.iter().map(|s| s.to_string()).collect(),
            logged_in: logged_in.iter().map(|s| s.to_string()).collect(),
            kubeadmin,
        }
    }

    #[test]
    fn kubeadmin_goes_only_after_another_admin_logged_in() {
        assert_eq!(
            kubeadmin_removal(&facts(&[], &[], true)),
            KubeadminRemoval::Refuse("no user is a cluster-admin: add one (users NAME add USER --admin), log in as that user, then remove kubeadmin".into())
        );
        // An admin that never logged in, a user that did but is no admin.
        let KubeadminRemoval::Refuse(why) = kubeadmin_removal(&facts(&["alice"], &["bob"], true))
        else {
            panic!("removed before alice logged in");
        };
        assert!(why.contains("log in once as alice"), "{why}");
        assert_eq!(
            kubeadmin_removal(&facts(&["alice", "carol"], &["bob", "carol"], true)),
            KubeadminRemoval::Remove {
                admins: vec!["carol".into()]
            }
        );
        assert_eq!(
            kubeadmin_removal(&facts(&["alice"], &["alice"], false)),
            KubeadminRemoval::Gone
        );
    }

    #[test]
    fn the_last_proven_admin_stays_once_kubeadmin_is_gone() {
        // kubeadmin still there: anyone may go.
        assert!(user_removal(&facts(&["alice"], &["alice"], true), "alice").is_ok());
        let e = user_removal(&facts(&["alice"], &["alice"], false), "alice").unwrap_err();
        assert!(e.contains("alice is the last cluster-admin"), "{e}");
        // Another admin has logged in: alice may go.
        assert!(user_removal(
            &facts(&["alice", "carol"], &["alice", "carol"], false),
            "alice"
        )
        .is_ok());
        // An admin that never logged in does not count, but removing a
        // non-admin or an admin that never logged in is fine.
        assert!(user_removal(&facts(&["alice", "dave"], &["alice"], false), "alice").is_err());
        assert!(user_removal(&facts(&["alice", "dave"], &["alice"], false), "dave").is_ok());
        assert!(user_removal(&facts(&["alice"], &["alice", "bob"], false), "bob").is_ok());
    }

    #[test]
    fn admins_from_bindings_with_shiftlabs_marked() {
        let list = json!({"items": [
            {"metadata": {"name": "shiftlab-user-alice-cluster-admin",
                          "labels": {"app.kubernetes.io/managed-by": "shiftlab"}},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]},
            {"metadata": {"name": "by-hand"},
             "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
             "subjects": [{"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                          {"kind": "Group", "name": "system:masters"}]},
            {"metadata": {"name": "viewer"},
             "roleRef": {"kind": "ClusterRole", "name": "view"},
             "subjects": [{"kind": "User", "name": "carol"}]},
        ]});
        let a = cluster_admins(&list);
        assert_eq!(a.keys().collect::<Vec<_>>(), ["alice", "bob"]);
        assert_eq!(
            a["alice"],
            [
                AdminBinding {
                    name: "shiftlab-user-alice-cluster-admin".into(),
                    shiftlab: true,
                    sole: true
                },
                AdminBinding {
                    name: "by-hand".into(),
                    shiftlab: false,
                    sole: false
                }
            ]
        );
    }

    #[test]
    fn the_oauths_htpasswd_provider() {
        let oauth = json!({"spec": {"identityProviders": [
            {"name": "ldap", "type": "LDAP"},
            {"name": "mine", "type": "HTPasswd", "htpasswd": {"fileData": {"name": "htpass-secret"}}},
            {"name": "shiftlab-htpasswd", "type": "HTPasswd", "htpasswd": {"fileData": {"name": "shiftlab-htpasswd"}}},
        ]}});
        assert_eq!(
            htpasswd_provider(&oauth, "shiftlab-htpasswd")
                .unwrap()
                .secret,
            "shiftlab-htpasswd"
        );
        assert_eq!(htpasswd_provider(&oauth, "other").unwrap().name, "mine");
        assert_eq!(htpasswd_provider(&json!({"spec": {}}), "x"), None);
        assert_eq!(
            logged_in(&json!({"items": [{"metadata": {"name": "alice"}}]})),
            BTreeSet::from(["alice".to_string()])
        );
    }
}
