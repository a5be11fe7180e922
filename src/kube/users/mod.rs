//! The lab's htpasswd users on an installed cluster, through its API with the
//! admin kubeconfig (`shiftlab users`, docs/users.md): the users of the
//! htpasswd Secret the OAuth `cluster` names, their `cluster-admin`
//! ClusterRoleBindings, and the `User`/`Identity` objects the OAuth server makes
//! at a first login (user.openshift.io/v1).
//!
//! The Secret is changed by read-modify-write: the PUT carries the
//! `resourceVersion` read, and the API answers 409 Conflict when someone wrote
//! in between (Kubernetes API conventions, "Concurrency Control and
//! Consistency"); then it is read again and the edit redone, a bounded number
//! of times, so another writer's lines are never lost. Hashes and passwords
//! never reach a log, an error or a listing.

pub mod htpasswd;
pub mod policy;

use std::collections::BTreeSet;

use ::kube::Client;
use anyhow::{bail, Context, Result};
use base64::Engine;
use serde::Serialize;
use serde_json::{json, Value};

use self::htpasswd::Htpasswd;
use self::policy::{Facts, KubeadminRemoval, Provider};
use super::rest::{self, delete, get, Reply};
use crate::render::users::PROVIDER;

const OAUTH: &str = "/apis/config.openshift.io/v1/oauths/cluster";
/// Where the OAuth's Secrets live.
const CONFIG_NS: &str = "openshift-config";
const BINDINGS: &str = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
const USERS: &str = "/apis/user.openshift.io/v1/users";
const IDENTITIES: &str = "/apis/user.openshift.io/v1/identities";
/// The installer's kubeadmin: its password hash lives in this Secret.
const KUBEADMIN: &str = "/api/v1/namespaces/kube-system/secrets/kubeadmin";
/// Tries of a read-modify-write before giving up on a busy object.
pub const ATTEMPTS: usize = 5;

/// The Secret's key holding the file (what the OAuth server reads).
const KEY: &str = "htpasswd";

/// A name from the API about to become part of a URL path: one segment.
fn is_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && !s
            .chars()
            .any(|c| matches!(c, '/' | '?' | '#' | '%') || c.is_whitespace() || c.is_control())
}

fn secret_path(name: &str) -> Result<String> {
    if !is_segment(name) {
        bail!("the OAuth names a Secret {name:?} that is no object name");
    }
    Ok(format!("/api/v1/namespaces/{CONFIG_NS}/secrets/{name}"))
}

/// The htpasswd file of a Secret as read.
fn file_of(secret: &Value, name: &str) -> Result<Htpasswd> {
    let Some(b64) = secret.pointer("/data/htpasswd").and_then(Value::as_str) else {
        return Ok(Htpasswd::default());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| anyhow::anyhow!("Secret {CONFIG_NS}/{name}: key {KEY} is not base64"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("Secret {CONFIG_NS}/{name}: key {KEY} is not text"))?;
    Ok(Htpasswd::parse(&text))
}

fn encode(file: &Htpasswd) -> String {
    base64::engine::general_purpose::STANDARD.encode(file.render())
}

/// What the cluster has, as `users` reads it.
struct Seen {
    provider: Option<Provider>,
    file: Htpasswd,
    admins: std::collections::BTreeMap<String, Vec<policy::AdminBinding>>,
    logged_in: BTreeSet<String>,
    kubeadmin: bool,
}

impl Seen {
    fn facts(&self) -> Facts {
        Facts {
            admins: self.admins.keys().cloned().collect(),
            logged_in: self.logged_in.clone(),
            kubeadmin: self.kubeadmin,
        }
    }
}

async fn look(client: &Client) -> Result<Seen> {
    let Some(oauth) = get(client, OAUTH).await? else {
        bail!("the API has no OAuth named cluster (config.openshift.io/v1): is this OpenShift?");
    };
    let provider = policy::htpasswd_provider(&oauth, PROVIDER);
    let file = match &provider {
        Some(p) => match get(client, &secret_path(&p.secret)?).await? {
            Some(s) => file_of(&s, &p.secret)?,
            None => Htpasswd::default(),
        },
        None => Htpasswd::default(),
    };
    let bindings = get(client, BINDINGS).await?.unwrap_or(Value::Null);
    let users = get(client, USERS).await?.unwrap_or(Value::Null);
    Ok(Seen {
        provider,
        file,
        admins: policy::cluster_admins(&bindings),
        logged_in: policy::logged_in(&users),
        kubeadmin: get(client, KUBEADMIN).await?.is_some(),
    })
}

/// One user as listed: never a hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserView {
    pub name: String,
    /// Bound to `cluster-admin`.
    pub admin: bool,
    /// Has logged in (the OAuth server made its `User`).
    pub logged_in: bool,
}

/// `users NAME list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listing {
    /// The OAuth's htpasswd identity provider, if it has one.
    pub provider: Option<String>,
    /// Its Secret, `openshift-config/<name>`.
    pub secret: Option<String>,
    /// `kube-system/kubeadmin` exists.
    pub kubeadmin: bool,
    pub users: Vec<UserView>,
}

pub async fn list(client: &Client) -> Result<Listing> {
    let seen = look(client).await?;
    let users = seen
        .file
        .users()
        .into_iter()
        .map(|n| UserView {
            name: n.to_string(),
            admin: seen.admins.contains_key(n),
            logged_in: seen.logged_in.contains(n),
        })
        .collect();
    Ok(Listing {
        provider: seen.provider.as_ref().map(|p| p.name.clone()),
        secret: seen
            .provider
            .as_ref()
            .map(|p| format!("{CONFIG_NS}/{}", p.secret)),
        kubeadmin: seen.kubeadmin,
        users,
    })
}

/// Edit the htpasswd file of Secret `name` by read-modify-write: `edit`
/// changes the file and says what it did, or `None` for nothing to do. A
/// missing Secret is made when `create` (labelled as shiftlab's). A 409 (the
/// Secret written meanwhile, or made by another) reads it again.
async fn edit_secret(
    client: &Client,
    name: &str,
    cluster: &str,
    create: bool,
    edit: impl Fn(&mut Htpasswd) -> Option<String>,
) -> Result<Option<String>> {
    let path = secret_path(name)?;
    for attempt in 1..=ATTEMPTS {
        let (done, reply) = match get(client, &path).await? {
            Some(mut secret) => {
                let mut file = file_of(&secret, name)?;
                let Some(done) = edit(&mut file) else {
                    return Ok(None);
                };
                secret["data"][KEY] = json!(encode(&file));
                // The PUT carries the resourceVersion read: the API refuses it
                // (409) if the Secret changed since.
                let r = rest::call(client, hyper::Method::PUT, &path, rest::JSON, Some(&secret))
                    .await?;
                (done, r)
            }
            None if create => {
                let mut file = Htpasswd::default();
                let Some(done) = edit(&mut file) else {
                    return Ok(None);
                };
                let secret = json!({
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": name, "namespace": CONFIG_NS,
                                 "labels": crate::kube::owner::owner_labels(cluster)},
                    "type": "Opaque",
                    "data": {KEY: encode(&file)},
                });
                let post = format!("/api/v1/namespaces/{CONFIG_NS}/secrets");
                (
                    done,
                    rest::call(
                        client,
                        hyper::Method::POST,
                        &post,
                        rest::JSON,
                        Some(&secret),
                    )
                    .await?,
                )
            }
            None => return Ok(None),
        };
        match reply {
            Reply::Ok(_) => return Ok(Some(done)),
            Reply::Conflict => tracing::warn!(
                "Secret {CONFIG_NS}/{name} was written meanwhile (409 Conflict); reading it again ({attempt}/{ATTEMPTS})"
            ),
            Reply::NotFound => tracing::warn!(
                "Secret {CONFIG_NS}/{name} went away meanwhile; reading it again ({attempt}/{ATTEMPTS})"
            ),
        }
    }
    bail!("Secret {CONFIG_NS}/{name} was written by someone else {ATTEMPTS} times while shiftlab edited it; try again")
}

/// The identity provider shiftlab adds to an OAuth without an htpasswd one
/// (as render::users writes it at install time).
fn provider_entry() -> Value {
    json!({
        "name": PROVIDER,
        "mappingMethod": "claim",
        "type": "HTPasswd",
        "htpasswd": {"fileData": {"name": PROVIDER}},
    })
}

/// Give the OAuth `cluster` shiftlab's htpasswd provider unless it has an
/// htpasswd provider by now; read-modify-write as the Secret.
async fn ensure_provider(client: &Client) -> Result<Option<String>> {
    for attempt in 1..=ATTEMPTS {
        let Some(mut oauth) = get(client, OAUTH).await? else {
            bail!(
                "the API has no OAuth named cluster (config.openshift.io/v1): is this OpenShift?"
            );
        };
        if policy::htpasswd_provider(&oauth, PROVIDER).is_some() {
            return Ok(None);
        }
        let spec = oauth
            .as_object_mut()
            .context("the OAuth is no object")?
            .entry("spec")
            .or_insert_with(|| json!({}));
        let idps = spec
            .as_object_mut()
            .context("the OAuth's spec is no object")?
            .entry("identityProviders")
            .or_insert_with(|| json!([]));
        if idps.is_null() {
            *idps = json!([]);
        }
        idps.as_array_mut()
            .context("the OAuth's identityProviders is no list")?
            .push(provider_entry());
        match rest::call(client, hyper::Method::PUT, OAUTH, rest::JSON, Some(&oauth)).await? {
            Reply::Ok(_) => {
                return Ok(Some(format!(
                    "OAuth cluster: identity provider {PROVIDER} (HTPasswd, Secret {CONFIG_NS}/{PROVIDER}) added"
                )))
            }
            _ => tracing::warn!(
                "the OAuth cluster was written meanwhile (409 Conflict); reading it again ({attempt}/{ATTEMPTS})"
            ),
        }
    }
    bail!("the OAuth cluster was written by someone else {ATTEMPTS} times while shiftlab edited it; try again")
}

/// The name of the binding shiftlab makes for an admin (as at install time).
pub fn admin_binding(user: &str) -> String {
    format!("shiftlab-user-{user}-cluster-admin")
}

fn binding_object(user: &str, cluster: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": admin_binding(user),
                     "labels": crate::kube::owner::owner_labels(cluster)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": policy::CLUSTER_ADMIN},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    })
}

/// What `add` asks for; the name is checked by the caller (`spec::check_user_name`).
pub struct AddRequest<'a> {
    /// The lab's name, for the owner labels.
    pub cluster: &'a str,
    pub user: &'a str,
    pub password: &'a str,
    pub admin: bool,
}

/// Add `user` (or give it the password, or make it an admin): what was done,
/// empty when it was all so already.
pub async fn add(client: &Client, req: &AddRequest<'_>) -> Result<Vec<String>> {
    let seen = look(client).await?;
    let mut done = Vec::new();
    let secret = seen
        .provider
        .as_ref()
        .map_or(PROVIDER.to_string(), |p| p.secret.clone());
    // One hash, a random salt: a retry after a conflict writes the same line.
    let salt: [u8; 16] = crate::files::random_bytes(16)?
        .try_into()
        .map_err(|_| anyhow::anyhow!("short read of random bytes"))?;
    let hash = crate::render::users::hash(req.password, salt).context("hashing the password")?;
    let (user, password) = (req.user, req.password);
    // A Secret the OAuth names but that is missing is made: the provider then works.
    let edited = edit_secret(client, &secret, req.cluster, true, |f| {
        let old = f.hash_of(user).map(str::to_string);
        // Same password: nothing to write (the hash's salt differs each time).
        if old
            .as_deref()
            .is_some_and(|h| bcrypt::verify(password, h).unwrap_or(false))
        {
            return None;
        }
        f.set(user, &hash);
        Some(format!(
            "Secret {CONFIG_NS}/{secret}: {user} {}",
            if old.is_some() {
                "given the new password"
            } else {
                "added"
            }
        ))
    })
    .await?;
    done.extend(edited);
    if seen.provider.is_none() {
        done.extend(ensure_provider(client).await?);
    }
    if req.admin && !seen.admins.contains_key(user) {
        let r = rest::call(
            client,
            hyper::Method::POST,
            BINDINGS,
            rest::JSON,
            Some(&binding_object(user, req.cluster)),
        )
        .await?;
        match r {
            Reply::Ok(_) => done.push(format!(
                "ClusterRoleBinding {}: {user} made a cluster-admin",
                admin_binding(user)
            )),
            // Made meanwhile (409 AlreadyExists): look at what it binds.
            _ => {
                let b = get(client, &format!("{BINDINGS}/{}", admin_binding(user))).await?;
                let list = json!({"items": [b.unwrap_or(Value::Null)]});
                if !policy::cluster_admins(&list).contains_key(user) {
                    bail!(
                        "ClusterRoleBinding {} exists and does not bind {user} to cluster-admin; shiftlab leaves it alone",
                        admin_binding(user)
                    );
                }
            }
        }
    }
    Ok(done)
}

/// Remove `user`: its htpasswd line, the cluster-admin bindings shiftlab made
/// for it, its `Identity` and `User` objects. Refused for the last
/// cluster-admin that has logged in once kubeadmin is gone. What was done, and
/// what was left (bindings shiftlab did not make).
pub async fn remove(client: &Client, cluster: &str, user: &str) -> Result<Vec<String>> {
    let seen = look(client).await?;
    policy::user_removal(&seen.facts(), user).map_err(anyhow::Error::msg)?;
    let mut done = Vec::new();
    if let Some(p) = &seen.provider {
        let secret = p.secret.clone();
        done.extend(
            edit_secret(client, &p.secret, cluster, false, |f| {
                f.remove(user)
                    .then(|| format!("Secret {CONFIG_NS}/{secret}: {user} removed"))
            })
            .await?,
        );
    }
    for b in seen.admins.get(user).into_iter().flatten() {
        if b.shiftlab && b.sole && is_segment(&b.name) {
            if delete(client, &format!("{BINDINGS}/{}", b.name)).await? {
                done.push(format!("ClusterRoleBinding {}: deleted", b.name));
            }
        } else {
            done.push(format!(
                "ClusterRoleBinding {}: left (not shiftlab's alone); it still binds {user} to cluster-admin",
                b.name
            ));
        }
    }
    // The identities the User lists, and the provider's own for the name
    // (an Identity may outlive its User).
    let user_obj = get(client, &format!("{USERS}/{user}")).await?;
    let mut identities: BTreeSet<String> = user_obj
        .as_ref()
        .and_then(|u| u.get("identities"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    if let Some(p) = &seen.provider {
        identities.insert(format!("{}:{user}", p.name));
    }
    for id in identities.iter().filter(|i| is_segment(i)) {
        if delete(client, &format!("{IDENTITIES}/{id}")).await? {
            done.push(format!("Identity {id}: deleted"));
        }
    }
    if user_obj.is_some() && delete(client, &format!("{USERS}/{user}")).await? {
        done.push(format!("User {user}: deleted"));
    }
    Ok(done)
}

/// Remove `kube-system/kubeadmin` once another cluster-admin has logged in;
/// otherwise an error saying who must log in first.
pub async fn remove_kubeadmin(client: &Client) -> Result<Vec<String>> {
    let seen = look(client).await?;
    match policy::kubeadmin_removal(&seen.facts()) {
        KubeadminRemoval::Gone => Ok(Vec::new()),
        KubeadminRemoval::Refuse(why) => bail!("refusing to remove kubeadmin: {why}"),
        KubeadminRemoval::Remove { admins } => {
            delete(client, KUBEADMIN).await?;
            Ok(vec![format!(
                "Secret kube-system/kubeadmin: deleted (kubeadmin can no longer log in; cluster-admin {} has logged in)",
                admins.join(", ")
            )])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_the_api_stay_one_path_segment() {
        for ok in ["shiftlab-htpasswd", "htpass-secret", "my_idp:alice"] {
            assert!(is_segment(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a?b", "a#b", "a%2fb", "a b", "a\nb"] {
            assert!(!is_segment(bad), "{bad:?}");
        }
        assert!(secret_path("../kube-system").is_err());
    }

    #[test]
    fn a_secret_without_the_key_is_an_empty_file_and_bad_base64_names_no_content() {
        let s = json!({"data": {}});
        assert!(file_of(&s, "x").unwrap().users().is_empty());
        let bad = json!({"data": {"htpasswd": "not base64!"}});
        let e = format!("{:#}", file_of(&bad, "x").err().unwrap());
        assert!(
            e.contains("not base64") && !e.contains("not base64!"),
            "{e}"
        );
    }
}
