//! IPI scale's Kubernetes side: a new worker becomes a BareMetalHost the
//! cluster's machine API provisions through the lab BMC; a worker that goes is
//! its Machine marked for deletion and the MachineSet scaled down.
//!
//! - The objects (metal3-io/baremetal-operator `apis/metal3.io/v1alpha1/
//!   baremetalhost_types.go` and its docs/api.md): a BMC Secret
//!   (`username`/`password`) and a `BareMetalHost` in `openshift-machine-api`
//!   with `spec.bmc.address` (`redfish-virtualmedia+https://…/redfish/v1/Systems/
//!   <uuid>`, the plan's), `spec.bmc.credentialsName`,
//!   `spec.bmc.disableCertificateVerification`, `spec.bootMACAddress`,
//!   `spec.bootMode`, `spec.online: true` and `spec.rootDeviceHints.deviceName`:
//!   the same host the installer's `platform.baremetal.hosts` entry makes.
//!   OpenShift's "Expanding the cluster" > "Preparing the bare metal node" /
//!   "Provisioning the bare metal node" (openshift/openshift-docs,
//!   modules/ipi-install-preparing-the-bare-metal-node.adoc) applies exactly
//!   these two, then scales the worker MachineSet by one.
//! - Down ("Scaling down a compute machine set" and "Deleting a bare metal
//!   host", openshift-docs): the host's Machine (`spec.consumerRef` of the
//!   BareMetalHost) gets the annotation `machine.openshift.io/delete-machine`,
//!   which the MachineSet controller deletes first when replicas drop
//!   (openshift/machine-api-operator `pkg/controller/machineset/delete_policy.go`);
//!   the machine controller drains and deletes the Node; once the Machine is
//!   gone the BareMetalHost and its Secret are deleted.
//!
//! Every object carries shiftlab's owner label; writes are server-side apply
//! (field manager `shiftlab`) or merge patches, so a rerun converges.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ::kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use ::kube::core::ApiResource;
use ::kube::Client;
use anyhow::{bail, Context, Result};
use base64::Engine;
use serde_json::{json, Value};

use crate::plan::Node;

pub const NAMESPACE: &str = "openshift-machine-api";
pub use super::owner::FIELD_MANAGER;
/// The annotation the MachineSet controller deletes a Machine first for.
pub const DELETE_MACHINE: &str = "machine.openshift.io/delete-machine";
/// The MachineSet template label naming the machines' role.
pub const ROLE_LABEL: &str = "machine.openshift.io/cluster-api-machine-role";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub fn bmh_resource() -> ApiResource {
    resource("metal3.io", "v1alpha1", "BareMetalHost", "baremetalhosts")
}
pub fn machineset_resource() -> ApiResource {
    resource(
        "machine.openshift.io",
        "v1beta1",
        "MachineSet",
        "machinesets",
    )
}
pub fn machine_resource() -> ApiResource {
    resource("machine.openshift.io", "v1beta1", "Machine", "machines")
}
fn secret_resource() -> ApiResource {
    resource("", "v1", "Secret", "secrets")
}

/// What a host needs besides its plan node.
#[derive(Debug, Clone)]
pub struct HostInputs<'a> {
    pub cluster: &'a str,
    pub username: &'a str,
    pub password: &'a str,
    pub verify_certificate: bool,
    /// `UEFI` or `legacy`, as the install-config's host.
    pub boot_mode: &'a str,
    /// `rootDeviceHints.deviceName`, as the install-config's host.
    pub device_name: &'a str,
}

/// The BMC Secret's name for a node (the installer names its hosts' secrets
/// `<host>-bmc-secret`).
pub fn secret_name(node: &Node) -> String {
    format!("{}-bmc-secret", node.name)
}

/// The BMC Secret and the BareMetalHost of a worker.
pub fn render(node: &Node, i: &HostInputs) -> Result<[Value; 2]> {
    let Some(bmc) = &node.bmc else {
        bail!(
            "{} has no BMC address in the plan (not an IPI node)",
            node.name
        );
    };
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let labels = json!({ super::owner::OWNER_LABEL: i.cluster });
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret_name(node), "namespace": NAMESPACE, "labels": labels},
        "type": "Opaque",
        "data": {"username": b64(i.username), "password": b64(i.password)},
    });
    let host = json!({
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "BareMetalHost",
        "metadata": {"name": node.name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "online": true,
            "bootMACAddress": node.mac,
            "bootMode": i.boot_mode,
            "bmc": {
                "address": bmc.address,
                "credentialsName": secret_name(node),
                "disableCertificateVerification": !i.verify_certificate,
            },
            "rootDeviceHints": {"deviceName": i.device_name},
        },
    });
    Ok([secret, host])
}

fn api(client: &Client, ar: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NAMESPACE, ar)
}

/// The worker MachineSet: the one whose template's role label is `worker`.
pub async fn worker_machineset(client: &Client) -> Result<DynamicObject> {
    let list = api(client, &machineset_resource())
        .list(&ListParams::default())
        .await
        .context("listing the MachineSets (is this an IPI cluster?)")?;
    let mut workers: Vec<DynamicObject> = list
        .items
        .into_iter()
        .filter(|m| {
            m.data
                .pointer(&format!(
                    "/spec/template/metadata/labels/{}",
                    ROLE_LABEL.replace('/', "~1")
                ))
                .and_then(Value::as_str)
                == Some("worker")
        })
        .collect();
    match workers.len() {
        1 => Ok(workers.remove(0)),
        0 => bail!(
            "no worker MachineSet in {NAMESPACE} (none with {ROLE_LABEL}=worker in its template)"
        ),
        n => bail!("{n} worker MachineSets in {NAMESPACE}: shiftlab scales exactly one"),
    }
}

async fn set_replicas(client: &Client, ms: &str, replicas: u32) -> Result<()> {
    api(client, &machineset_resource())
        .patch(
            ms,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .with_context(|| format!("scaling MachineSet {ms} to {replicas}"))?;
    Ok(())
}

/// Up: apply each new worker's Secret and BareMetalHost, then scale the worker
/// MachineSet to `replicas`. Returns what was applied, as `Kind/name`.
pub async fn scale_up(
    client: &Client,
    objects: &[[Value; 2]],
    replicas: u32,
) -> Result<Vec<String>> {
    let ms = worker_machineset(client).await?;
    let ms_name = ms.metadata.name.clone().unwrap_or_default();
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let mut done = Vec::new();
    for pair in objects {
        for o in pair {
            let (kind, name) = (
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default(),
            );
            let ar = if kind == "Secret" {
                secret_resource()
            } else {
                bmh_resource()
            };
            api(client, &ar)
                .patch(name, &pp, &Patch::Apply(o))
                .await
                .with_context(|| format!("applying {kind} {NAMESPACE}/{name}"))?;
            done.push(format!("{kind}/{name}"));
        }
    }
    set_replicas(client, &ms_name, replicas).await?;
    done.push(format!("MachineSet/{ms_name} replicas={replicas}"));
    Ok(done)
}

/// Down, first half: each host's Machine annotated for deletion, then the
/// worker MachineSet scaled to `replicas`. Returns the Machines, by host.
pub async fn scale_down_begin(
    client: &Client,
    hosts: &[&str],
    replicas: u32,
) -> Result<BTreeMap<String, Option<String>>> {
    let ms = worker_machineset(client).await?;
    let ms_name = ms.metadata.name.clone().unwrap_or_default();
    let bmhs = api(client, &bmh_resource());
    let machines = api(client, &machine_resource());
    let mut out = BTreeMap::new();
    for host in hosts {
        let machine = match bmhs
            .get_opt(host)
            .await
            .with_context(|| format!("reading BareMetalHost {host}"))?
        {
            Some(b) => b
                .data
                .pointer("/spec/consumerRef/name")
                .and_then(Value::as_str)
                .map(str::to_string),
            None => None,
        };
        if let Some(m) = &machine {
            machines
                .patch(
                    m,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"annotations": {DELETE_MACHINE: "true"}}})),
                )
                .await
                .with_context(|| format!("annotating Machine {m} for deletion"))?;
        }
        out.insert(host.to_string(), machine);
    }
    set_replicas(client, &ms_name, replicas).await?;
    Ok(out)
}

/// Down, second half: wait (up to `timeout`) until each Machine is gone (the
/// machine controller drained and deleted its Node), then delete the hosts'
/// BareMetalHosts and Secrets. Returns what was deleted.
pub async fn scale_down_finish(
    client: &Client,
    machines: &BTreeMap<String, Option<String>>,
    timeout: Duration,
    interval: Duration,
) -> Result<Vec<String>> {
    let deadline = Instant::now() + timeout;
    let mapi = api(client, &machine_resource());
    for m in machines.values().flatten() {
        while mapi
            .get_opt(m)
            .await
            .with_context(|| format!("reading Machine {m}"))?
            .is_some()
        {
            if Instant::now() + interval > deadline {
                bail!(
                    "Machine {m} still exists after {}s: its drain may be held by a PodDisruptionBudget (oc -n {NAMESPACE} describe machine {m})",
                    timeout.as_secs()
                );
            }
            tokio::time::sleep(interval).await;
        }
    }
    let mut deleted = Vec::new();
    let (bmhs, secrets) = (
        api(client, &bmh_resource()),
        api(client, &secret_resource()),
    );
    for host in machines.keys() {
        if bmhs.get_opt(host).await?.is_some() {
            bmhs.delete(host, &DeleteParams::default())
                .await
                .with_context(|| format!("deleting BareMetalHost {host}"))?;
            deleted.push(format!("BareMetalHost/{host}"));
        }
        let s = format!("{host}-bmc-secret");
        if secrets.get_opt(&s).await?.is_some() {
            secrets
                .delete(&s, &DeleteParams::default())
                .await
                .with_context(|| format!("deleting Secret {s}"))?;
            deleted.push(format!("Secret/{s}"));
        }
    }
    Ok(deleted)
}
