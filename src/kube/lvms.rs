//! `storage: lvms` after install, through the API with the admin kubeconfig
//! (docs/storage.md): wait, bounded, for the LVM Storage operator's CRD
//! `lvmclusters.lvm.topolvm.io` to be Established (OLM installs the operator
//! some time after the install-time Subscription), then create the
//! `LVMCluster` and the registry's claim, replace `cluster-monitoring-config`
//! by read-modify-write with its `resourceVersion`, and JSON-merge-patch the
//! registry's Config onto the claim. Every step converges: a rerun after a
//! crash, or after it all succeeded, changes nothing (Kubernetes API
//! conventions: a create of an existing name is 409 AlreadyExists, a PUT with a
//! stale resourceVersion 409 Conflict; a JSON merge patch is RFC 7386).

use std::time::{Duration, Instant};

use ::kube::Client;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::rest::{self, get, Reply, JSON};

/// The operator's CRD, which OLM creates when it installs the operator.
pub const CRD: &str = "lvmclusters.lvm.topolvm.io";
const CRD_PATH: &str =
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/lvmclusters.lvm.topolvm.io";
const REGISTRY: &str = "/apis/imageregistry.operator.openshift.io/v1/configs/cluster";
/// Tries of the ConfigMap's read-modify-write before giving up.
const ATTEMPTS: usize = 5;

/// How long and how often to wait for the CRD, and how often to say so.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    pub timeout: Duration,
    pub every: Duration,
    pub progress_every: Duration,
}

impl Wait {
    /// After install-complete: OLM's catalog pull and the operator's rollout
    /// take minutes on a lab.
    pub const AFTER_INSTALL: Wait = Wait {
        timeout: Duration::from_secs(30 * 60),
        every: Duration::from_secs(10),
        progress_every: Duration::from_secs(60),
    };
}

/// The after-install objects, as `render::lvms::after_install` wrote them.
#[derive(Debug, Clone)]
pub struct Objects {
    pub lvm_cluster: Value,
    pub claim: Value,
    pub config_map: Value,
}

impl Objects {
    /// From the YAML documents of `lvmcluster.yaml`, by kind.
    pub fn parse(text: &str) -> Result<Objects> {
        let mut by_kind = std::collections::BTreeMap::new();
        for doc in text.split("---\n").filter(|d| !d.trim().is_empty()) {
            let v: Value = yaml_serde::from_str(doc).context("a document is not YAML")?;
            let kind = v["kind"].as_str().unwrap_or_default().to_string();
            by_kind.insert(kind, v);
        }
        let mut take = |kind: &str| {
            by_kind
                .remove(kind)
                .with_context(|| format!("no {kind} in it"))
        };
        Ok(Objects {
            lvm_cluster: take("LVMCluster")?,
            claim: take("PersistentVolumeClaim")?,
            config_map: take("ConfigMap")?,
        })
    }
}

/// The CRD as read: absent (404), served but not yet Established, Established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrdState {
    Absent,
    Pending,
    Established,
}

/// Pure: a CRD object's state (its `Established` condition).
pub fn crd_state(crd: Option<&Value>) -> CrdState {
    let Some(crd) = crd else {
        return CrdState::Absent;
    };
    let established = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    if established {
        CrdState::Established
    } else {
        CrdState::Pending
    }
}

/// Pure: the phase of the operator's CSV in a ClusterServiceVersion list
/// (`lvms-operator.v…`), as `name: phase`.
pub fn csv_phase(list: &Value) -> Option<String> {
    list["items"].as_array()?.iter().find_map(|c| {
        let name = c.pointer("/metadata/name")?.as_str()?;
        name.starts_with(crate::render::lvms::PACKAGE).then(|| {
            let phase = c.pointer("/status/phase").and_then(Value::as_str);
            format!("{name}: {}", phase.unwrap_or("no phase yet"))
        })
    })
}

/// Pure: RFC 7386 JSON merge patch of `patch` onto `target` (null removes).
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Some(p) = patch.as_object() else {
        return patch.clone();
    };
    let mut out = target.as_object().cloned().unwrap_or_default();
    for (k, v) in p {
        if v.is_null() {
            out.remove(k);
        } else {
            let merged = merge_patch(out.get(k).unwrap_or(&Value::Null), v);
            out.insert(k.clone(), merged);
        }
    }
    Value::Object(out)
}

/// Pure: the ConfigMap to PUT (`current` with `desired`'s data, carrying the
/// resourceVersion read), or `None` when it holds that data already.
pub fn config_map_update(current: &Value, desired: &Value) -> Option<Value> {
    if current["data"] == desired["data"] {
        return None;
    }
    let mut next = current.clone();
    next["data"] = desired["data"].clone();
    Some(next)
}

fn name_of(v: &Value) -> Result<(&str, &str)> {
    let md = &v["metadata"];
    match (md["namespace"].as_str(), md["name"].as_str()) {
        (Some(ns), Some(n)) => Ok((ns, n)),
        _ => bail!("an object without namespace and name"),
    }
}

/// Wait until the CRD is Established; on timeout an error naming it and the
/// operator's CSV phase when readable.
async fn wait_for_crd(client: &Client, ns: &str, wait: Wait, say: &dyn Fn(String)) -> Result<()> {
    let start = Instant::now();
    let mut said = start;
    let csvs =
        format!("/apis/operators.coreos.com/v1alpha1/namespaces/{ns}/clusterserviceversions");
    loop {
        let state = crd_state(get(client, CRD_PATH).await?.as_ref());
        if state == CrdState::Established {
            return Ok(());
        }
        let csv = || async {
            get(client, &csvs)
                .await
                .ok()
                .flatten()
                .and_then(|l| csv_phase(&l))
                .unwrap_or_else(|| format!("no {} CSV in {ns} yet", crate::render::lvms::PACKAGE))
        };
        if start.elapsed() >= wait.timeout {
            bail!(
                "the LVM Storage operator's CRD {CRD} was not {} after {} min (CSV {})",
                if state == CrdState::Absent {
                    "there"
                } else {
                    "Established"
                },
                wait.timeout.as_secs() / 60,
                csv().await
            );
        }
        if said.elapsed() >= wait.progress_every {
            said = Instant::now();
            say(format!(
                "  waiting for the LVM Storage operator ({} s; CRD {CRD} {}; CSV {})",
                start.elapsed().as_secs(),
                if state == CrdState::Absent {
                    "absent"
                } else {
                    "not Established"
                },
                csv().await
            ));
        }
        tokio::time::sleep(wait.every).await;
    }
}

/// POST `obj` to its collection; an existing one is fine.
async fn create(client: &Client, collection: &str, obj: &Value) -> Result<Option<String>> {
    let (ns, name) = name_of(obj)?;
    let kind = obj["kind"].as_str().unwrap_or("object");
    let path = format!("{}/namespaces/{ns}/{collection}", api_prefix(obj));
    match rest::call(client, hyper::Method::POST, &path, JSON, Some(obj)).await? {
        Reply::Ok(_) => Ok(Some(format!("{kind} {ns}/{name}: created"))),
        Reply::Conflict => Ok(None),
        Reply::NotFound => bail!("POST {path}: 404, the API does not serve {collection}"),
    }
}

fn api_prefix(obj: &Value) -> String {
    match obj["apiVersion"].as_str() {
        Some(v) if v.contains('/') => format!("/apis/{v}"),
        Some(v) => format!("/api/{v}"),
        None => "/api/v1".to_string(),
    }
}

/// Replace the ConfigMap's data by read-modify-write (a 409 reads again).
async fn replace_config_map(client: &Client, desired: &Value) -> Result<Option<String>> {
    let (ns, name) = name_of(desired)?;
    let collection = format!("/api/v1/namespaces/{ns}/configmaps");
    let path = format!("{collection}/{name}");
    for attempt in 1..=ATTEMPTS {
        let reply = match get(client, &path).await? {
            Some(current) => match config_map_update(&current, desired) {
                None => return Ok(None),
                // Carries the resourceVersion read: 409 if written meanwhile.
                Some(next) => {
                    rest::call(client, hyper::Method::PUT, &path, JSON, Some(&next)).await?
                }
            },
            None => {
                rest::call(
                    client,
                    hyper::Method::POST,
                    &collection,
                    JSON,
                    Some(desired),
                )
                .await?
            }
        };
        match reply {
            Reply::Ok(_) => return Ok(Some(format!("ConfigMap {ns}/{name}: claims on lvms-vg1"))),
            _ => tracing::warn!(
                "ConfigMap {ns}/{name} was written meanwhile; reading it again ({attempt}/{ATTEMPTS})"
            ),
        }
    }
    bail!("ConfigMap {ns}/{name} was written by someone else {ATTEMPTS} times; try again")
}

/// Merge-patch the registry's Config unless it reads as patched already.
async fn patch_registry(client: &Client, patch: &Value) -> Result<Option<String>> {
    let Some(current) = get(client, REGISTRY).await? else {
        bail!("the API has no image registry Config named cluster");
    };
    if merge_patch(&current, patch) == current {
        return Ok(None);
    }
    let ct = "application/merge-patch+json";
    match rest::call(client, hyper::Method::PATCH, REGISTRY, ct, Some(patch)).await? {
        Reply::Ok(_) => Ok(Some(
            "image registry Config cluster: on its claim (replicas 1, Recreate, no emptyDir)"
                .into(),
        )),
        _ => bail!("PATCH {REGISTRY}: refused"),
    }
}

/// Apply it all once the operator's CRD is Established: what was done, empty
/// when all of it was so already.
pub async fn apply(
    client: &Client,
    objects: &Objects,
    registry_patch: &Value,
    wait: Wait,
    say: &dyn Fn(String),
) -> Result<Vec<String>> {
    let (ns, _) = name_of(&objects.lvm_cluster)?;
    wait_for_crd(client, ns, wait, say).await?;
    let mut done = Vec::new();
    done.extend(create(client, "lvmclusters", &objects.lvm_cluster).await?);
    done.extend(create(client, "persistentvolumeclaims", &objects.claim).await?);
    done.extend(replace_config_map(client, &objects.config_map).await?);
    done.extend(patch_registry(client, registry_patch).await?);
    Ok(done)
}

/// The registry's patch as a value.
pub fn registry_patch() -> Value {
    serde_json::from_str(crate::render::manifests::LVMS_REGISTRY_PATCH)
        .unwrap_or_else(|_| json!({}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_is_rfc_7386() {
        // RFC 7386 section 3's example.
        let target = json!({"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"},
                            "tags": ["example", "sample"], "content": "This will be unchanged"});
        let patch = json!({"title": "Hello!", "phoneNumber": "+01-123-456-7890",
                           "author": {"familyName": null}, "tags": ["example"]});
        assert_eq!(
            merge_patch(&target, &patch),
            json!({"title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"],
                   "content": "This will be unchanged", "phoneNumber": "+01-123-456-7890"})
        );
        // The registry's: emptyDir gone, the claim in; applied twice, no change.
        let registry = json!({"spec": {"managementState": "Managed", "replicas": 1,
                                        "storage": {"emptyDir": {}}}});
        let once = merge_patch(&registry, &registry_patch());
        assert_eq!(
            once["spec"]["storage"],
            json!({"pvc": {"claim": "shiftlab-image-registry"}})
        );
        assert_eq!(once["spec"]["managementState"], "Managed");
        assert_eq!(merge_patch(&once, &registry_patch()), once);
    }

    #[test]
    fn the_crd_counts_once_established_and_the_csv_phase_is_named() {
        assert_eq!(crd_state(None), CrdState::Absent);
        let pending = json!({"status": {"conditions": [
            {"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "False"}]}});
        assert_eq!(crd_state(Some(&pending)), CrdState::Pending);
        let ok = json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}});
        assert_eq!(crd_state(Some(&ok)), CrdState::Established);
        let list = json!({"items": [
            {"metadata": {"name": "other.v1"}, "status": {"phase": "Failed"}},
            {"metadata": {"name": "lvms-operator.v4.18.3"}, "status": {"phase": "Installing"}}]});
        assert_eq!(
            csv_phase(&list).as_deref(),
            Some("lvms-operator.v4.18.3: Installing")
        );
        assert_eq!(csv_phase(&json!({"items": []})), None);
    }

    #[test]
    fn the_config_map_is_replaced_only_when_its_data_differs() {
        let current = json!({"metadata": {"name": "c", "resourceVersion": "7"},
                             "data": {"config.yaml": "prometheusK8s:\n  retention: 24h\n"}});
        let desired = json!({"metadata": {"name": "c"}, "data": {"config.yaml": "x: 1\n"}});
        let next = config_map_update(&current, &desired).unwrap();
        assert_eq!(next["metadata"]["resourceVersion"], "7");
        assert_eq!(next["data"], desired["data"]);
        assert_eq!(config_map_update(&next, &desired), None);
    }

    #[test]
    fn the_written_file_parses_into_its_three_objects() {
        let text = [
            crate::render::lvms::lvm_cluster(18),
            crate::render::manifests::lvms_registry_claim(),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: m}\ndata: {}\n".into(),
        ]
        .join("---\n");
        let o = Objects::parse(&text).unwrap();
        assert_eq!(
            name_of(&o.lvm_cluster).unwrap(),
            ("openshift-storage", "shiftlab")
        );
        assert_eq!(api_prefix(&o.lvm_cluster), "/apis/lvm.topolvm.io/v1alpha1");
        assert_eq!(api_prefix(&o.claim), "/api/v1");
        assert!(Objects::parse("kind: LVMCluster\n").is_err());
    }
}
