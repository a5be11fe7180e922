//! Credentials for CDI's registry import: the default node image (the
//! release's `kubevirt` containerDisk, on quay.io for OCP) needs the pull
//! secret's credentials for its registry. CDI takes them from a Secret named by
//! the DataVolume's `source.registry.secretRef`, with the keys `accessKeyId`
//! (the user) and `secretKey` (the password) (kubevirt/containerized-data-importer
//! `pkg/common/common.go`: `KeyAccess = "accessKeyId"`, `KeySecret =
//! "secretKey"`, "key names expected in credential secret"; the importer pod
//! gets them as `IMPORTER_ACCESS_KEY_ID` / `IMPORTER_SECRET_KEY`).
//!
//! When the pull secret has credentials for the image's registry, shiftlab
//! makes that Secret (`<cluster>-registry`, with the owner labels, removed by
//! destroy) and points every registry DataVolume at it; otherwise the image is
//! pulled anonymously (a public image such as quay.io/containerdisks).
//! Nothing here names a credential in an error.

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine as _;
use serde_json::{json, Value};

use super::render::{owner_labels, Kind, Object};
use crate::plan::Plan;

/// A user and password for one registry. Debug never shows them.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryAuth {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RegistryAuth(<redacted>)")
    }
}

/// The Secret's name.
pub fn secret_name(plan: &Plan) -> String {
    format!("{}-registry", plan.cluster)
}

/// The registry host and repository path of a `docker://` image; `None` for
/// anything else (http(s) disks need no registry). A first component without a
/// dot or port that is not `localhost` is a Docker Hub path, as
/// containers/image's reference parsing has it.
pub fn registry_path(image: &str) -> Option<(String, String)> {
    let rest = image.strip_prefix("docker://")?;
    let rest = rest.split(['@']).next().unwrap_or(rest);
    let (first, path) = rest.split_once('/').unwrap_or(("", rest));
    if !first.is_empty() && (first.contains('.') || first.contains(':') || first == "localhost") {
        Some((first.to_string(), path.to_string()))
    } else {
        let path = if first.is_empty() {
            path.to_string()
        } else {
            format!("{first}/{path}")
        };
        Some(("docker.io".to_string(), path))
    }
}

/// The pull secret's credentials for `image`: the `auths` entry of its host,
/// or the most specific `host/namespace` entry that prefixes its repository
/// (containers-auth.json(5)). `None` when the image is not `docker://` or the
/// pull secret has no entry for it.
pub fn auth_for(pull_secret: &str, image: &str) -> Result<Option<RegistryAuth>> {
    let Some((host, path)) = registry_path(image) else {
        return Ok(None);
    };
    let root: Value = serde_json::from_str(pull_secret)
        .context("pull_secret: not JSON (its content is not shown)")?;
    let Some(auths) = root.get("auths").and_then(Value::as_object) else {
        bail!("pull_secret: no `auths` object");
    };
    let repo = format!("{host}/{path}");
    let mut best: Option<(&str, &Value)> = None;
    for (key, entry) in auths {
        let k = key
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_end_matches('/');
        let matches = k == host || repo.starts_with(&format!("{k}/"));
        if matches && best.is_none_or(|(b, _)| k.len() > b.len()) {
            best = Some((k, entry));
        }
    }
    let Some((key, entry)) = best else {
        return Ok(None);
    };
    let bad = || anyhow!("pull_secret: auths.{key}.auth is not base64 of user:password");
    let (username, password) = match entry.get("auth").and_then(Value::as_str) {
        Some(a) => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(a.trim())
                .map_err(|_| bad())?;
            let text = String::from_utf8(raw).map_err(|_| bad())?;
            let (u, p) = text.split_once(':').ok_or_else(bad)?;
            (u.to_string(), p.to_string())
        }
        None => match (
            entry.get("username").and_then(Value::as_str),
            entry.get("password").and_then(Value::as_str),
        ) {
            (Some(u), Some(p)) => (u.to_string(), p.to_string()),
            _ => bail!("pull_secret: auths.{key} has neither `auth` nor `username` and `password`"),
        },
    };
    Ok(Some(RegistryAuth { username, password }))
}

/// The Secret CDI reads the credentials from.
pub fn secret(plan: &Plan, ns: &str, auth: &RegistryAuth) -> Object {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let name = secret_name(plan);
    Object {
        kind: Kind::Secret,
        name: name.clone(),
        body: json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": ns, "labels": owner_labels(&plan.cluster)},
            "type": "Opaque",
            "data": {"accessKeyId": b64(&auth.username), "secretKey": b64(&auth.password)},
        }),
    }
}

/// Add the Secret before the first VirtualMachine and point every registry
/// DataVolume of the VMs at it.
pub fn use_secret(objects: &mut Vec<Object>, secret: Object) {
    for o in objects
        .iter_mut()
        .filter(|o| o.kind == Kind::VirtualMachine)
    {
        if let Some(dvs) = o
            .body
            .pointer_mut("/spec/dataVolumeTemplates")
            .and_then(Value::as_array_mut)
        {
            for dv in dvs {
                if let Some(reg) = dv
                    .pointer_mut("/spec/source/registry")
                    .and_then(Value::as_object_mut)
                {
                    reg.insert("secretRef".into(), json!(secret.name));
                }
            }
        }
    }
    let at = objects
        .iter()
        .position(|o| o.kind == Kind::VirtualMachine)
        .unwrap_or(objects.len());
    objects.insert(at, secret);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ps(auths: Value) -> String {
        json!({"auths": auths}).to_string()
    }

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn the_registry_of_an_image_as_containers_image_parses_it() {
        let r = |i: &str| registry_path(i);
        assert_eq!(
            r("docker://quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:ab"),
            Some((
                "quay.io".into(),
                "openshift-release-dev/ocp-v4.0-art-dev".into()
            ))
        );
        assert_eq!(
            r("docker://registry.lab:5000/fcos:stable"),
            Some(("registry.lab:5000".into(), "fcos:stable".into()))
        );
        assert_eq!(
            r("docker://fedora/coreos"),
            Some(("docker.io".into(), "fedora/coreos".into()))
        );
        assert_eq!(r("https://example.test/disk.qcow2.gz"), None);
    }

    #[test]
    fn the_most_specific_entry_for_the_image_gives_the_credentials() {
        let secret = ps(json!({
            "quay.io": {"auth": b64("robot:pw1")},
            "quay.io/openshift-release-dev": {"auth": b64("art:pw2")},
            "registry.redhat.io": {"username": "rh", "password": "pw3"},
        }));
        let a = auth_for(
            &secret,
            "docker://quay.io/openshift-release-dev/ocp@sha256:1",
        )
        .unwrap()
        .unwrap();
        assert_eq!((a.username.as_str(), a.password.as_str()), ("art", "pw2"));
        let a = auth_for(&secret, "docker://quay.io/containerdisks/fedora:40")
            .unwrap()
            .unwrap();
        assert_eq!(a.username, "robot");
        let a = auth_for(&secret, "docker://registry.redhat.io/rhcos:1")
            .unwrap()
            .unwrap();
        assert_eq!(a.password, "pw3");
        assert_eq!(auth_for(&secret, "docker://ghcr.io/x/y:1").unwrap(), None);
        assert_eq!(
            auth_for(&secret, "https://example.test/d.qcow2.gz").unwrap(),
            None
        );
        // Debug hides them.
        assert_eq!(format!("{a:?}"), "RegistryAuth(<redacted>)");
    }

    #[test]
    fn a_broken_entry_is_named_without_its_content() {
        let secret = ps(json!({"quay.io": {"auth": "PLANTED-not-base64!"}}));
        let e = auth_for(&secret, "docker://quay.io/a/b")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "pull_secret: auths.quay.io.auth is not base64 of user:password"
        );
        let e = auth_for("PLANTED{", "docker://quay.io/a/b").unwrap_err();
        assert!(!format!("{e:#}").contains("PLANTED"), "{e:#}");
    }
}
