//! `users:` (docs/users.md): the rendered identity provider, golden; the
//! Secret's hashes checked with the bcrypt library; the OAuth object against
//! openshift/api's own CRD (tests/fixtures/openshift-crds/README.md), unknown
//! fields refused; the Secret and ClusterRoleBindings through k8s-openapi's
//! types.

mod common;
#[path = "support/openshift_crd.rs"]
mod openshift_crd;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use serde_json::{json, Value};
use shiftlab::render::users::{self, Hashed};
use shiftlab::spec::{self, ClusterSpec, Env};

fn load() -> ClusterSpec {
    let dir = common::repo().join("tests/golden");
    let text = std::fs::read_to_string(dir.join("users.cluster.yaml")).unwrap();
    let env = Env {
        home: None,
        base_dir: dir,
        libvirt_default_uri: None,
    };
    spec::from_str(&text, "users.cluster.yaml", &env)
        .unwrap_or_else(|e| panic!("{e}"))
        .spec
}

/// Each user's password: its file's, else a fixed stand-in for the generated
/// one; hashed with a fixed salt per user so the render is the same every run.
fn hashed(spec: &ClusterSpec) -> Vec<(String, Hashed)> {
    spec.users
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let pw = match &u.password_file {
                Some(p) => spec::read_password_file(p).unwrap(),
                None => format!("{}-generated", u.name),
            };
            let hash = users::hash(&pw, [i as u8 + 1; 16]).unwrap();
            (
                pw,
                Hashed {
                    name: u.name.clone(),
                    hash,
                    admin: u.admin,
                },
            )
        })
        .collect()
}

fn rendered() -> (Vec<String>, Vec<(String, Value)>) {
    let spec = load();
    let (passwords, hashed): (Vec<String>, Vec<Hashed>) = hashed(&spec).into_iter().unzip();
    let objects = users::manifests(&hashed)
        .into_iter()
        .map(|(p, t)| (p, yaml_serde::from_str(&t).unwrap()))
        .collect();
    (passwords, objects)
}

fn object<'a>(objects: &'a [(String, Value)], path: &str) -> &'a Value {
    &objects.iter().find(|(p, _)| p == path).unwrap().1
}

#[test]
fn the_users_manifests_are_golden() {
    let spec = load();
    let hashed: Vec<Hashed> = hashed(&spec).into_iter().map(|(_, h)| h).collect();
    let text: String = users::manifests(&hashed)
        .into_iter()
        .map(|(path, text)| format!("# {path}\n{text}"))
        .collect();
    common::golden(
        &common::repo().join("tests/golden/users.manifests.yaml"),
        &text,
    );
}

#[test]
fn the_secret_holds_htpasswd_lines_whose_hashes_verify_the_passwords() {
    let (passwords, objects) = rendered();
    let secret = object(&objects, users::SECRET);
    assert_eq!(secret["metadata"]["namespace"], "openshift-config");
    let data = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["htpasswd"].as_str().unwrap())
        .unwrap();
    let text = String::from_utf8(data).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for ((line, pw), name) in lines
        .iter()
        .zip(&passwords)
        .zip(["alice", "bob", "carol.ops"])
    {
        let (user, hash) = line.split_once(':').unwrap();
        assert_eq!(user, name);
        assert!(hash.starts_with("$2y$"), "htpasswd -B's form: {hash}");
        assert!(bcrypt::verify(pw, hash).unwrap(), "{name}'s password");
        assert!(!bcrypt::verify(format!("{pw}x"), hash).unwrap());
    }
    // The file's password, not its newline.
    assert_eq!(passwords[0], "alice-lab-password");
}

#[test]
fn the_oauth_resource_validates_against_openshift_apis_crd() {
    let (_, objects) = rendered();
    let oauth = object(&objects, users::OAUTH);
    assert_eq!(oauth["apiVersion"], "config.openshift.io/v1");
    assert_eq!(oauth["kind"], "OAuth");
    assert_eq!(oauth["metadata"]["name"], "cluster");
    let v = openshift_crd::v1_validator(
        "oauths.config.openshift.io.yaml",
        "oauths.config.openshift.io",
    );
    assert_eq!(openshift_crd::violations(&v, oauth), Vec::<String>::new());
    let idp = &oauth["spec"]["identityProviders"][0];
    assert_eq!(idp["type"], "HTPasswd");
    assert_eq!(
        idp["htpasswd"]["fileData"]["name"],
        object(&objects, users::SECRET)["metadata"]["name"]
    );
    // The check bites: a misspelt field, a name of the wrong type.
    let mut bad = oauth.clone();
    bad["spec"]["identityProviders"][0]["htpasswd"]["fileDta"] = json!({"name": "x"});
    assert!(!openshift_crd::violations(&v, &bad).is_empty());
    let mut bad = oauth.clone();
    bad["spec"]["identityProviders"][0]["htpasswd"]["fileData"] = json!({});
    assert!(
        !openshift_crd::violations(&v, &bad).is_empty(),
        "fileData.name is required"
    );
}

#[test]
fn the_secret_and_the_admins_bindings_round_trip_through_k8s_openapi() {
    let (_, objects) = rendered();
    let secret = object(&objects, users::SECRET);
    let typed: Secret = serde_json::from_value(secret.clone()).unwrap();
    assert_eq!(&serde_json::to_value(&typed).unwrap(), secret);
    let bindings: Vec<&(String, Value)> = objects
        .iter()
        .filter(|(_, o)| o["kind"] == "ClusterRoleBinding")
        .collect();
    // alice and carol.ops are admins; bob is not.
    assert_eq!(
        bindings.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        [
            "openshift/99-shiftlab-user-alice-cluster-admin.yaml",
            "openshift/99-shiftlab-user-carol.ops-cluster-admin.yaml",
        ]
    );
    for ((_, b), name) in bindings.iter().zip(["alice", "carol.ops"]) {
        let typed: ClusterRoleBinding = serde_json::from_value(b.clone()).unwrap();
        assert_eq!(&serde_json::to_value(&typed).unwrap(), b, "{name}");
        assert_eq!(typed.role_ref.kind, "ClusterRole");
        assert_eq!(typed.role_ref.name, "cluster-admin");
        let subjects = typed.subjects.unwrap();
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].kind, "User");
        assert_eq!(subjects[0].name, name);
    }
}
