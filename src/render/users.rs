//! The lab's identity provider (`users:`, docs/users.md) as install-time
//! manifests: pure, from the users and their bcrypt hashes. The hashes' salts
//! are the caller's (random in the product, fixed in golden tests).
//!
//! As OpenShift's docs configure an htpasswd identity provider
//! (authentication/identity_providers/configuring-htpasswd-identity-provider):
//! a Secret in `openshift-config` whose key `htpasswd` holds `htpasswd -B`'s
//! file (`name:$2y$…` lines), and the `OAuth` named `cluster` listing an
//! `HTPasswd` provider that names the Secret. Admins get a ClusterRoleBinding
//! to `cluster-admin` each, subject kind `User` (what `oc adm policy
//! add-cluster-role-to-user cluster-admin <name>` makes).

use base64::Engine;
use serde_json::json;

/// The Secret's and the identity provider's name (the provider's name shows on
/// the console's login page and prefixes the users' identities).
pub const PROVIDER: &str = "shiftlab-htpasswd";
/// Where the Secret goes.
pub const SECRET: &str = "openshift/99-shiftlab-users-htpasswd-secret.yaml";
/// Where the OAuth resource goes.
pub const OAUTH: &str = "openshift/99-shiftlab-users-oauth.yaml";

/// bcrypt's cost: 2^10 rounds, above `htpasswd -B`'s default of 5.
pub const COST: u32 = 10;

/// One user as rendered: the name, its bcrypt hash (`$2y$…`), cluster-admin or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashed {
    pub name: String,
    pub hash: String,
    pub admin: bool,
}

/// `password`'s bcrypt hash with `salt`, in the `$2y$` form `htpasswd -B` writes.
pub fn hash(password: &str, salt: [u8; 16]) -> anyhow::Result<String> {
    Ok(bcrypt::hash_with_salt(password, COST, salt)?.format_for_version(bcrypt::Version::TwoY))
}

/// The htpasswd file: one `name:hash` line per user, in the given order.
pub fn htpasswd(users: &[Hashed]) -> String {
    users
        .iter()
        .map(|u| format!("{}:{}\n", u.name, u.hash))
        .collect()
}

/// Where an admin's ClusterRoleBinding goes (the name is checked: spec's
/// `is_user_name`).
pub fn admin_binding_path(name: &str) -> String {
    format!("openshift/99-shiftlab-user-{name}-cluster-admin.yaml")
}

/// The manifests, by their path in the asset directory; none without users.
pub fn manifests(users: &[Hashed]) -> Vec<(String, String)> {
    if users.is_empty() {
        return Vec::new();
    }
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": PROVIDER, "namespace": "openshift-config"},
        "type": "Opaque",
        "data": {
            "htpasswd": base64::engine::general_purpose::STANDARD.encode(htpasswd(users)),
        },
    });
    let oauth = json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "OAuth",
        "metadata": {"name": "cluster"},
        "spec": {
            "identityProviders": [{
                "name": PROVIDER,
                "mappingMethod": "claim",
                "type": "HTPasswd",
                "htpasswd": {"fileData": {"name": PROVIDER}},
            }],
        },
    });
    let mut out = vec![
        (SECRET.to_string(), yaml(&secret)),
        (OAUTH.to_string(), yaml(&oauth)),
    ];
    for u in users.iter().filter(|u| u.admin) {
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            // The label marks it shiftlab's: `users NAME remove` deletes only those.
            "metadata": {"name": format!("shiftlab-user-{}-cluster-admin", u.name),
                         "labels": {"app.kubernetes.io/managed-by": "shiftlab"}},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "User",
                "name": u.name,
            }],
        });
        out.push((admin_binding_path(&u.name), yaml(&binding)));
    }
    out
}

fn yaml(v: &serde_json::Value) -> String {
    // A JSON value always has a YAML form.
    yaml_serde::to_string(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_users_no_manifests() {
        assert!(manifests(&[]).is_empty());
    }

    #[test]
    fn the_hash_is_htpasswd_b_form_and_verifies() {
        let h = hash("s3cret", [7; 16]).unwrap();
        assert!(h.starts_with("$2y$10$"), "{h}");
        assert_eq!(h.len(), 60);
        assert!(bcrypt::verify("s3cret", &h).unwrap());
        assert!(!bcrypt::verify("s3creT", &h).unwrap());
        // The salt is the caller's: the same input, the same hash.
        assert_eq!(hash("s3cret", [7; 16]).unwrap(), h);
        assert_ne!(hash("s3cret", [8; 16]).unwrap(), h);
    }

    #[test]
    fn only_admins_get_a_binding() {
        let u = |name: &str, admin| Hashed {
            name: name.into(),
            hash: "$2y$10$x".into(),
            admin,
        };
        let m = manifests(&[u("alice", true), u("bob", false)]);
        let paths: Vec<&str> = m.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                SECRET,
                OAUTH,
                "openshift/99-shiftlab-user-alice-cluster-admin.yaml"
            ]
        );
        assert_eq!(
            htpasswd(&[u("alice", true), u("bob", false)]),
            "alice:$2y$10$x\nbob:$2y$10$x\n"
        );
    }
}
