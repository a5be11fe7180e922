//! The rendered objects applied through kube-rs: server-side apply with field
//! manager `shiftlab`, the owner label on every object, and a destroy that
//! removes exactly what carries it. No `kubectl`.
//!
//! Resumable: apply is idempotent (a server-side apply of the same object
//! changes nothing), the ledger naming the API and namespace is written before
//! the first object, so a run killed anywhere is finished by running it again
//! and undone by `destroy`.
//!
//! Ownership: an object of the same name that exists without the owner label
//! is someone else's: apply refuses to take it over, destroy never deletes it.
//! A namespace that already exists without the label is used as it is and left.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::ApiResource;
use kube::{Client, Config};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::render::{owner_selector, Kind, Object};
use super::{KubevirtPlan, FIELD_MANAGER, OWNER_LABEL};
use crate::state::ClusterDir;

/// Where a cluster's objects are: recorded before the first is created, so
/// that `status` and `destroy` find them without the cluster file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    pub kubeconfig: PathBuf,
    pub context: Option<String>,
    pub namespace: String,
    /// Whether shiftlab created the namespace (and so may delete it).
    pub owns_namespace: bool,
}

impl Ledger {
    pub fn of(kp: &KubevirtPlan) -> Ledger {
        Ledger {
            kubeconfig: kp.kubeconfig.clone(),
            context: kp.context.clone(),
            namespace: kp.namespace.clone(),
            owns_namespace: false,
        }
    }
}

pub fn ledger_path(cluster: &ClusterDir) -> PathBuf {
    cluster.kubevirt_ledger()
}

pub fn load_ledger(cluster: &ClusterDir) -> Result<Option<Ledger>> {
    crate::files::read_json(&ledger_path(cluster))
}

pub fn save_ledger(cluster: &ClusterDir, ledger: &Ledger) -> Result<()> {
    std::fs::create_dir_all(cluster.path())
        .with_context(|| format!("creating {}", cluster.path().display()))?;
    crate::files::write_json(&ledger_path(cluster), ledger)
}

/// The API resource of a kind, for `Api<DynamicObject>`.
pub fn resource(kind: Kind) -> ApiResource {
    ApiResource {
        group: kind.group().into(),
        version: kind.version().into(),
        api_version: kind.api_version(),
        kind: kind.as_str().into(),
        plural: kind.plural().into(),
    }
}

fn api(client: &Client, kind: Kind, ns: &str) -> Api<DynamicObject> {
    let ar = resource(kind);
    if kind.namespaced() {
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    }
}

/// A client for the kubeconfig and context of the cluster file.
pub async fn client(kubeconfig: &Path, context: Option<&str>) -> Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading kubeconfig {}", kubeconfig.display()))?;
    let opts = KubeConfigOptions {
        context: context.map(String::from),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(kc, &opts)
        .await
        .with_context(|| format!("loading kubeconfig {}", kubeconfig.display()))?;
    Client::try_from(config).context("building the API client")
}

/// Before anything is created: the API answers, serves KubeVirt (and
/// Multus' NetworkAttachmentDefinition when the objects include one), and has
/// the StorageClass the cluster file names (a missing one would leave every
/// DataVolume pending). A user who may not read StorageClasses gets a warning
/// instead of the last check.
pub async fn preflight(
    client: &Client,
    needs_multus: bool,
    storage_class: Option<&str>,
) -> Result<()> {
    client
        .apiserver_version()
        .await
        .context("the Kubernetes API is unreachable (nothing was created)")?;
    let mut groups: Vec<(Kind, &str)> = vec![(Kind::VirtualMachine, "KubeVirt")];
    if needs_multus {
        groups.push((Kind::NetworkAttachmentDefinition, "Multus"));
    }
    for (kind, what) in groups {
        let list = client
            .list_api_group_resources(&kind.api_version())
            .await
            .with_context(|| {
                format!(
                    "the API does not serve {} ({what} is not installed?); nothing was created",
                    kind.api_version()
                )
            })?;
        if !list.resources.iter().any(|r| r.name == kind.plural()) {
            bail!(
                "the API serves {} without {} ({what} is not installed?); nothing was created",
                kind.api_version(),
                kind.plural()
            );
        }
    }
    if let Some(sc) = storage_class {
        check_storage_class(client, sc).await?;
    }
    Ok(())
}

async fn check_storage_class(client: &Client, name: &str) -> Result<()> {
    let classes: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource {
            group: "storage.k8s.io".into(),
            version: "v1".into(),
            api_version: "storage.k8s.io/v1".into(),
            kind: "StorageClass".into(),
            plural: "storageclasses".into(),
        },
    );
    match classes.get_opt(name).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            let known: Vec<String> = classes
                .list(&ListParams::default())
                .await
                .map(|l| {
                    l.items
                        .into_iter()
                        .filter_map(|c| c.metadata.name)
                        .collect()
                })
                .unwrap_or_default();
            bail!(
                "kubevirt.storage_class: StorageClass {name} does not exist on the cluster (it has: {}); nothing was created",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )
        }
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::warn!(
                "cannot read StorageClasses (forbidden): kubevirt.storage_class {name} is not checked"
            );
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("reading StorageClass {name}")),
    }
}

fn has_owner(obj: &DynamicObject, cluster: &str) -> bool {
    obj.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(OWNER_LABEL))
        .is_some_and(|v| v == cluster)
}

/// What [`apply`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    /// Existing objects used as they are (a namespace that is not shiftlab's).
    pub used_as_is: Vec<String>,
}

/// Apply `objects` in order. `ledger` is saved (via `save`) before the first
/// write and again once it is known whether the namespace is shiftlab's.
pub async fn apply(
    client: &Client,
    cluster: &str,
    objects: &[Object],
    ledger: &mut Ledger,
    save: &dyn Fn(&Ledger) -> Result<()>,
) -> Result<Report> {
    let needs_multus = objects
        .iter()
        .any(|o| o.kind == Kind::NetworkAttachmentDefinition);
    // The StorageClass the VMs' DataVolumes ask for (one per cluster file).
    let storage_class = objects
        .iter()
        .filter(|o| o.kind == Kind::VirtualMachine)
        .find_map(|o| {
            o.body
                .pointer("/spec/dataVolumeTemplates/0/spec/storage/storageClassName")
                .and_then(Value::as_str)
        });
    preflight(client, needs_multus, storage_class).await?;
    let mut report = Report::default();
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    // Check every existing object first: one that is someone else's stops the
    // run before anything is written.
    let mut existing: BTreeMap<String, DynamicObject> = BTreeMap::new();
    for o in objects {
        let a = api(client, o.kind, &ledger.namespace);
        if let Some(cur) = a
            .get_opt(&o.name)
            .await
            .with_context(|| format!("reading {}", o.reference()))?
        {
            if !has_owner(&cur, cluster) && o.kind != Kind::Namespace {
                bail!(
                    "{} exists in namespace {} and is not shiftlab's (no {OWNER_LABEL}={cluster} label); nothing was changed",
                    o.reference(),
                    ledger.namespace
                );
            }
            existing.insert(o.reference(), cur);
        }
    }
    save(ledger)?;
    for o in objects {
        let reference = o.reference();
        let cur = existing.get(&reference);
        if o.kind == Kind::Namespace {
            match cur {
                Some(ns) if !has_owner(ns, cluster) => {
                    report.used_as_is.push(reference);
                    continue;
                }
                _ => {
                    if !ledger.owns_namespace {
                        ledger.owns_namespace = true;
                        save(ledger)?;
                    }
                }
            }
        }
        let mut body = o.body.clone();
        if let (Kind::VirtualMachine, Some(cur)) = (o.kind, cur) {
            // Power is the workers target's and the BMC's: keep it.
            if let Some(rs) = cur.data.pointer("/spec/runStrategy") {
                body["spec"]["runStrategy"] = rs.clone();
            }
        }
        api(client, o.kind, &ledger.namespace)
            .patch(&o.name, &pp, &Patch::Apply(&body))
            .await
            .with_context(|| format!("applying {reference}"))?;
        if cur.is_some() {
            report.updated.push(reference);
        } else {
            report.created.push(reference);
        }
    }
    Ok(report)
}

/// Set a VM's `spec.runStrategy` (a merge patch of the field alone, by
/// field manager `shiftlab`): virt-controller then creates the VM's
/// VirtualMachineInstance (`Always`) or deletes it, the guest shut down
/// through its ACPI power button within the VMI's grace period (`Halted`).
pub async fn set_run_strategy(client: &Client, ns: &str, vm: &str, strategy: &str) -> Result<()> {
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    api(client, Kind::VirtualMachine, ns)
        .patch(
            vm,
            &pp,
            &Patch::Merge(json!({"spec": {"runStrategy": strategy}})),
        )
        .await
        .with_context(|| format!("setting runStrategy {strategy} on VirtualMachine/{vm}"))?;
    Ok(())
}

/// KubeVirt's VirtualMachineInstance: the running side of a VM, of the same
/// name, there while the VM runs.
fn vmi_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "kubevirt.io".into(),
        version: "v1".into(),
        api_version: "kubevirt.io/v1".into(),
        kind: "VirtualMachineInstance".into(),
        plural: "virtualmachineinstances".into(),
    };
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// What a VM's VirtualMachineInstance says of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vmi {
    /// `status.phase`: Pending, Scheduling, Scheduled, Running, Succeeded, Failed.
    pub phase: Option<String>,
    /// Being deleted (its guest shutting down).
    pub deleting: bool,
    /// The first interface's address, once the guest agent or DHCP told KubeVirt.
    pub ip: Option<String>,
}

impl Vmi {
    fn of(o: &DynamicObject) -> Vmi {
        Vmi {
            phase: o
                .data
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .map(String::from),
            deleting: o.metadata.deletion_timestamp.is_some(),
            ip: o
                .data
                .pointer("/status/interfaces/0/ipAddress")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from),
        }
    }

    pub fn running(&self) -> bool {
        self.phase.as_deref() == Some("Running") && !self.deleting
    }
}

/// A VM's VirtualMachineInstance, `None` when it has none (it is off).
pub async fn vmi(client: &Client, ns: &str, vm: &str) -> Result<Option<Vmi>> {
    let cur = vmi_api(client, ns)
        .get_opt(vm)
        .await
        .with_context(|| format!("reading VirtualMachineInstance/{vm}"))?;
    Ok(cur.as_ref().map(Vmi::of))
}

/// Power a VM off at once, as `virtctl stop --force --grace-period 0` does:
/// its VMI deleted without a grace period (the runStrategy already `Halted`,
/// so virt-controller makes no new one). A VMI already gone is no error.
pub async fn force_off(client: &Client, ns: &str, vm: &str) -> Result<()> {
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    match vmi_api(client, ns).delete(vm, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting VirtualMachineInstance/{vm}")),
    }
}

/// A Service's addresses (cluster IP, load-balancer address, node ports);
/// `None` when it does not exist.
pub async fn service_address(
    client: &Client,
    ns: &str,
    name: &str,
) -> Result<Option<super::dns::ServiceAddress>> {
    let cur = api(client, Kind::Service, ns)
        .get_opt(name)
        .await
        .with_context(|| format!("reading Service/{name}"))?;
    Ok(cur.map(|c| {
        let v = serde_json::to_value(&c).unwrap_or_default();
        super::dns::ServiceAddress::of(&v)
    }))
}

/// A VM's `spec.runStrategy`, `None` when the VM does not exist.
pub async fn run_strategy(client: &Client, ns: &str, vm: &str) -> Result<Option<String>> {
    let cur = api(client, Kind::VirtualMachine, ns)
        .get_opt(vm)
        .await
        .with_context(|| format!("reading VirtualMachine/{vm}"))?;
    Ok(cur.map(|c| {
        c.data
            .pointer("/spec/runStrategy")
            .and_then(Value::as_str)
            .unwrap_or("Halted")
            .to_string()
    }))
}

/// Delete one object if it carries the owner label; returns whether it did.
pub async fn delete_owned(
    client: &Client,
    cluster: &str,
    kind: Kind,
    ns: &str,
    name: &str,
) -> Result<bool> {
    let a = api(client, kind, ns);
    let reference = format!("{}/{name}", kind.as_str());
    match a
        .get_opt(name)
        .await
        .with_context(|| format!("reading {reference}"))?
    {
        Some(o) if has_owner(&o, cluster) => {
            a.delete(name, &DeleteParams::foreground())
                .await
                .with_context(|| format!("deleting {reference}"))?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Remove everything of `cluster` that carries the owner label: VMs (their
/// DataVolumes go with them, owned by the VM), Services, the in-cluster
/// HAProxy's Deployment and ConfigMap, Secrets, the network
/// attachment, then the namespace if shiftlab created it. Returns what went.
pub async fn destroy(client: &Client, cluster: &str, ledger: &Ledger) -> Result<Vec<String>> {
    client
        .apiserver_version()
        .await
        .context("the Kubernetes API is unreachable (nothing was removed)")?;
    let ns = &ledger.namespace;
    let mut removed = Vec::new();
    let lp = ListParams::default().labels(&owner_selector(cluster));
    for kind in [
        Kind::VirtualMachine,
        Kind::Service,
        Kind::Deployment,
        Kind::ConfigMap,
        Kind::Secret,
        Kind::NetworkAttachmentDefinition,
    ] {
        let a = api(client, kind, ns);
        let list = match a.list(&lp).await {
            Ok(l) => l,
            // A kind the API does not serve (no Multus) holds nothing of ours.
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("listing {}s", kind.as_str()));
            }
        };
        for o in list.items {
            let Some(name) = o.metadata.name.clone() else {
                continue;
            };
            if !has_owner(&o, cluster) {
                continue;
            }
            a.delete(&name, &DeleteParams::foreground())
                .await
                .with_context(|| format!("deleting {}/{name}", kind.as_str()))?;
            removed.push(format!("{}/{name}", kind.as_str()));
        }
    }
    if ledger.owns_namespace && delete_owned(client, cluster, Kind::Namespace, ns, ns).await? {
        removed.push(format!("Namespace/{ns}"));
    }
    Ok(removed)
}

/// One VM as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VmStatus {
    pub name: String,
    pub role: Option<String>,
    pub run_strategy: Option<String>,
    /// KubeVirt's `status.printableStatus` (Running, Stopped, Provisioning…).
    pub status: Option<String>,
    /// The MAC address the VM's interface was given.
    pub mac: Option<String>,
    /// Its VirtualMachineInstance, while it has one.
    #[serde(skip)]
    pub vmi: Option<Vmi>,
}

/// The cluster's VMs (those with the owner label) with their
/// VirtualMachineInstances, sorted by name.
pub async fn inspect(client: &Client, cluster: &str, ns: &str) -> Result<Vec<VmStatus>> {
    let lp = ListParams::default().labels(&owner_selector(cluster));
    let list = api(client, Kind::VirtualMachine, ns)
        .list(&lp)
        .await
        .context("listing VirtualMachines")?;
    let mut out: Vec<VmStatus> = list
        .items
        .iter()
        .filter(|o| has_owner(o, cluster))
        .map(|o| VmStatus {
            name: o.metadata.name.clone().unwrap_or_default(),
            role: o
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(super::ROLE_LABEL).cloned()),
            run_strategy: o
                .data
                .pointer("/spec/runStrategy")
                .and_then(Value::as_str)
                .map(String::from),
            status: o
                .data
                .pointer("/status/printableStatus")
                .and_then(Value::as_str)
                .map(String::from),
            mac: o
                .data
                .pointer("/spec/template/spec/domain/devices/interfaces/0/macAddress")
                .and_then(Value::as_str)
                .map(String::from),
            vmi: None,
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    for v in &mut out {
        v.vmi = vmi(client, ns, &v.name).await?;
    }
    Ok(out)
}
