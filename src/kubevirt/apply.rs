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
//!
//! Deletion is asynchronous on a real API server: a deleted Namespace stays
//! `Terminating` until the namespace controller has emptied it, and a
//! foreground deletion until the garbage collector has removed the
//! dependents. destroy waits (bounded) until what it deleted is gone, and
//! apply waits for what an earlier destroy left terminating, instead of
//! failing on the API's 403 for new content in a Terminating namespace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    let mut config = Config::from_custom_kubeconfig(kc, &opts)
        .await
        .with_context(|| format!("loading kubeconfig {}", kubeconfig.display()))?;
    // As kube::approve's client: shiftlab's loops do the retrying.
    config.default_retry = false;
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

/// How long create and destroy wait for Kubernetes to finish deletions: a
/// namespace holding VMs (their launcher pods' grace period, their volumes)
/// takes a minute or two on a real cluster.
pub const DELETION_WAIT: Duration = Duration::from_secs(300);

/// Whether a deletion of `obj` is under way: it has a deletionTimestamp (a
/// finalizer holds it, Kubernetes docs "Finalizers"), or, for a Namespace,
/// `status.phase: Terminating`.
fn terminating(obj: &DynamicObject) -> bool {
    obj.metadata.deletion_timestamp.is_some()
        || obj.data.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating")
}

/// The NamespaceLifecycle admission plugin's refusal of new content in a
/// namespace being deleted: 403 with "unable to create new content in
/// namespace NS because it is being terminated" (kubernetes
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go`).
pub fn is_terminating_refusal(code: u16, message: &str) -> bool {
    code == 403 && message.contains("is being terminated")
}

fn refused_as_terminating(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(c.downcast_ref::<kube::Error>(),
            Some(kube::Error::Api(r)) if is_terminating_refusal(r.code, &r.message))
    })
}

/// The pause before the `n`th look at a deletion: short at first (a few
/// objects go in a second), then every 2 s.
pub fn poll_pause(n: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << n.min(5))).min(Duration::from_secs(2))
}

/// Wait until each of `targets` (kind and name in `ns`) is gone from the API,
/// at most `bound`, with a spinner on a terminal; off one (where the spinner
/// draws nothing) a heartbeat on stderr names what is still terminating.
/// Returns those still there.
pub async fn wait_gone(
    client: &Client,
    ns: &str,
    targets: &[(Kind, String)],
    bound: Duration,
) -> Result<Vec<(Kind, String)>> {
    let mut left: Vec<(Kind, String)> = targets.to_vec();
    if left.is_empty() {
        return Ok(left);
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let sink = crate::progress::Sink::stderr();
    let mut beat = sink
        .wants_heartbeat()
        .then(|| crate::progress::Beat::every(sink.heartbeat_every()));
    let deadline = Instant::now() + bound;
    let mut n = 0;
    loop {
        let mut still = Vec::new();
        for (kind, name) in left {
            let found = api(client, kind, ns)
                .get_opt(&name)
                .await
                .with_context(|| format!("reading {}/{name}", kind.as_str()))?;
            if found.is_some() {
                still.push((kind, name));
            }
        }
        left = still;
        if left.is_empty() || Instant::now() >= deadline {
            break;
        }
        let pending = left
            .iter()
            .map(|(k, n)| format!("{}/{n}", k.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        if let Some(line) = beat.as_mut().and_then(|b| {
            b.due("Kubernetes to finish deleting", || {
                format!("{} still Terminating: {pending}", left.len())
            })
        }) {
            sink.aside(line);
        }
        bar.set_message(format!(
            "waiting for Kubernetes to finish deleting {pending} ({} left)",
            left.len()
        ));
        let pause = poll_pause(n).min(deadline.saturating_duration_since(Instant::now()));
        tokio::time::sleep(pause).await;
        n += 1;
    }
    bar.finish_and_clear();
    Ok(left)
}

/// Apply `objects` in order. `ledger` is saved (via `save`) before the first
/// write and again once it is known whether the namespace is shiftlab's.
/// What an earlier destroy left terminating is waited for, at most
/// [`DELETION_WAIT`].
pub async fn apply(
    client: &Client,
    cluster: &str,
    objects: &[Object],
    ledger: &mut Ledger,
    save: &dyn Fn(&Ledger) -> Result<()>,
) -> Result<Report> {
    apply_waiting(client, cluster, objects, ledger, save, DELETION_WAIT).await
}

/// [`apply`], waiting at most `bound` for deletions under way.
pub async fn apply_waiting(
    client: &Client,
    cluster: &str,
    objects: &[Object],
    ledger: &mut Ledger,
    save: &dyn Fn(&Ledger) -> Result<()>,
    bound: Duration,
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
    match apply_once(client, cluster, objects, ledger, save, bound).await {
        // The namespace went Terminating between the look and the write
        // (someone's destroy): once it is gone, the whole apply again.
        Err(e) if refused_as_terminating(&e) => {
            let ns = ledger.namespace.clone();
            wait_namespace_gone(client, &ns, bound).await?;
            apply_once(client, cluster, objects, ledger, save, bound).await
        }
        r => r,
    }
}

async fn wait_namespace_gone(client: &Client, ns: &str, bound: Duration) -> Result<()> {
    let left = wait_gone(client, ns, &[(Kind::Namespace, ns.to_string())], bound).await?;
    if !left.is_empty() {
        bail!(still_terminating_error(ns, bound));
    }
    Ok(())
}

fn still_terminating_error(ns: &str, bound: Duration) -> String {
    format!(
        "namespace {ns} is still terminating after {}s (Kubernetes is finishing an earlier deletion; check with `kubectl get ns {ns}`); nothing more was created: run create again once it is gone",
        bound.as_secs()
    )
}

async fn apply_once(
    client: &Client,
    cluster: &str,
    objects: &[Object],
    ledger: &mut Ledger,
    save: &dyn Fn(&Ledger) -> Result<()>,
    bound: Duration,
) -> Result<Report> {
    let mut report = Report::default();
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    // Check every existing object first: one that is someone else's stops the
    // run before anything is written. What a deletion is still removing is
    // waited for first: applied now, it would be updated, then vanish.
    let mut existing: BTreeMap<String, DynamicObject> = BTreeMap::new();
    for pass in 0..2 {
        existing.clear();
        let mut going: Vec<(Kind, String)> = Vec::new();
        for o in objects {
            let a = api(client, o.kind, &ledger.namespace);
            if let Some(cur) = a
                .get_opt(&o.name)
                .await
                .with_context(|| format!("reading {}", o.reference()))?
            {
                if terminating(&cur) {
                    going.push((o.kind, o.name.clone()));
                    continue;
                }
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
        if going.is_empty() {
            break;
        }
        if pass == 1 {
            // Gone once, being deleted again: someone else is at work.
            bail!(
                "{} in namespace {} are being deleted again after a wait for them; nothing was changed",
                going
                    .iter()
                    .map(|(k, n)| format!("{}/{n}", k.as_str()))
                    .collect::<Vec<_>>()
                    .join(", "),
                ledger.namespace
            );
        }
        let left = wait_gone(client, &ledger.namespace, &going, bound).await?;
        if left.iter().any(|(k, _)| *k == Kind::Namespace) {
            bail!(still_terminating_error(&ledger.namespace, bound));
        }
        if let Some((k, n)) = left.first() {
            bail!(
                "{}/{n} in namespace {} is still being deleted after {}s (check with `kubectl get {} {n} -n {}`); nothing was created: run create again once it is gone",
                k.as_str(),
                ledger.namespace,
                bound.as_secs(),
                k.plural(),
                ledger.namespace
            );
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

/// Delete one object if it carries the owner label, and wait (at most
/// [`DELETION_WAIT`]) until it is gone; returns whether it deleted it. An
/// object already being deleted is waited for, not deleted again.
pub async fn delete_owned(
    client: &Client,
    cluster: &str,
    kind: Kind,
    ns: &str,
    name: &str,
) -> Result<bool> {
    let a = api(client, kind, ns);
    let reference = format!("{}/{name}", kind.as_str());
    let deleted = match a
        .get_opt(name)
        .await
        .with_context(|| format!("reading {reference}"))?
    {
        Some(o) if has_owner(&o, cluster) && !terminating(&o) => {
            a.delete(name, &DeleteParams::foreground())
                .await
                .with_context(|| format!("deleting {reference}"))?;
            true
        }
        Some(o) if has_owner(&o, cluster) => false,
        _ => return Ok(false),
    };
    let left = wait_gone(client, ns, &[(kind, name.to_string())], DELETION_WAIT).await?;
    if !left.is_empty() {
        bail!(
            "{reference} is still being deleted after {}s (check with `kubectl get {} {name} -n {ns}`)",
            DELETION_WAIT.as_secs(),
            kind.plural()
        );
    }
    Ok(deleted)
}

/// What [`destroy`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Destroyed {
    /// Deleted and gone from the API.
    pub removed: Vec<String>,
    /// Deleted, but still there when the wait ended (`Kind/name`).
    pub terminating: Vec<String>,
}

impl Destroyed {
    /// What to tell the user about what is still terminating: how to check.
    pub fn still_terminating(&self, ns: &str, bound: Duration) -> Option<String> {
        if self.terminating.is_empty() {
            return None;
        }
        let check = if self.terminating.iter().any(|t| t.starts_with("Namespace/")) {
            format!("kubectl get ns {ns}")
        } else {
            format!("kubectl get all -n {ns}")
        };
        Some(format!(
            "still terminating after {}s: {} (Kubernetes finishes the deletion; check with `{check}`; a create waits for it)",
            bound.as_secs(),
            self.terminating.join(", ")
        ))
    }
}

/// Remove everything of `cluster` that carries the owner label: VMs (their
/// DataVolumes go with them, owned by the VM), Services, the in-cluster
/// HAProxy's Deployment and ConfigMap, Secrets, the network
/// attachment, then the namespace if shiftlab created it; then wait, at most
/// `bound`, until they are gone.
pub async fn destroy(
    client: &Client,
    cluster: &str,
    ledger: &Ledger,
    bound: Duration,
) -> Result<Destroyed> {
    client
        .apiserver_version()
        .await
        .context("the Kubernetes API is unreachable (nothing was removed)")?;
    let ns = &ledger.namespace;
    let mut deleted: Vec<(Kind, String)> = Vec::new();
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
            // One already going (an earlier destroy) is waited for, not deleted again.
            if !terminating(&o) {
                a.delete(&name, &DeleteParams::foreground())
                    .await
                    .with_context(|| format!("deleting {}/{name}", kind.as_str()))?;
            }
            deleted.push((kind, name));
        }
    }
    if ledger.owns_namespace {
        let a = api(client, Kind::Namespace, ns);
        match a
            .get_opt(ns)
            .await
            .with_context(|| format!("reading Namespace/{ns}"))?
        {
            Some(o) if has_owner(&o, cluster) => {
                if !terminating(&o) {
                    a.delete(ns, &DeleteParams::foreground())
                        .await
                        .with_context(|| format!("deleting Namespace/{ns}"))?;
                }
                deleted.push((Kind::Namespace, ns.clone()));
            }
            _ => {}
        }
    }
    let left = wait_gone(client, ns, &deleted, bound).await?;
    let name = |(k, n): &(Kind, String)| format!("{}/{n}", k.as_str());
    Ok(Destroyed {
        removed: deleted
            .iter()
            .filter(|d| !left.contains(d))
            .map(name)
            .collect(),
        terminating: left.iter().map(name).collect(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_namespace_lifecycle_refusal_counts_as_terminating() {
        // The real apiserver's words (NamespaceLifecycle admission).
        let real = "configmaps \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated";
        assert!(is_terminating_refusal(403, real));
        assert!(!is_terminating_refusal(
            403,
            "secrets is forbidden: User \"lab\" cannot patch resource \"secrets\""
        ));
        assert!(!is_terminating_refusal(409, real));
    }

    #[test]
    fn polls_start_short_and_settle_at_two_seconds() {
        let p: Vec<u64> = (0..8).map(|n| poll_pause(n).as_millis() as u64).collect();
        assert_eq!(p, [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
    }

    #[test]
    fn what_is_still_terminating_is_named_with_how_to_check() {
        let d = Destroyed {
            removed: vec!["VirtualMachine/a".into()],
            terminating: vec![],
        };
        assert_eq!(d.still_terminating("ns1", DELETION_WAIT), None);
        let d = Destroyed {
            removed: vec![],
            terminating: vec!["Secret/s".into(), "Namespace/ns1".into()],
        };
        assert_eq!(
            d.still_terminating("ns1", Duration::from_secs(300)).unwrap(),
            "still terminating after 300s: Secret/s, Namespace/ns1 (Kubernetes finishes the deletion; check with `kubectl get ns ns1`; a create waits for it)"
        );
        let d = Destroyed {
            removed: vec![],
            terminating: vec!["VirtualMachine/v".into()],
        };
        assert!(d
            .still_terminating("ns1", DELETION_WAIT)
            .unwrap()
            .contains("`kubectl get all -n ns1`"));
    }
}
