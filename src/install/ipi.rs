//! Bare-metal IPI: what shiftlab does around `openshift-install create cluster`
//! with `platform: baremetal` — which bridge the installer's bootstrap VM joins,
//! how a stopped install is resumed, and recognising (for `status`) and removing
//! (for `destroy`) the bootstrap VM the installer made through libvirt.
//!
//! The installer's bootstrap VM (openshift/installer, since 4.16
//! pkg/infrastructure/baremetal/bootstrap.go): a storage pool `<infraID>-bootstrap`
//! holding `<infraID>-live-provisioner` (the live ISO with the bootstrap Ignition)
//! and `<infraID>-scratch` (20 GiB), and the domain `<infraID>-bootstrap` (6 GiB,
//! 4 vCPUs) booting the ISO, with a NIC on `externalBridge`, on `libvirtURI`.
//! (Before 4.16, data/data/baremetal/bootstrap/main.tf made `-base`, the domain's
//! own volume and `.ign` in the same pool: [`remove_bootstrap`] takes every
//! volume of the pool, whichever layout left it.) It carries no shiftlab
//! metadata, so it is recognised by that name alone, with the infraID the
//! installer wrote into this cluster's `metadata.json`
//! (pkg/types/clustermetadata.go): never by a pattern that could match another
//! cluster's objects.

use anyhow::{bail, Context, Result};

use crate::install::state::Locked;
use crate::install::{installer, Ctx};
use crate::libvirt::Host;
use crate::spec::NetworkMode;
use crate::state::ClusterDir;

/// The bridge the installer's bootstrap VM is attached to, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExternalBridge {
    /// The cluster network's own bridge: the bootstrap VM shares L2 (and so the
    /// network's dnsmasq, DHCP and DNS) with the nodes.
    Own(String),
    /// A Linux bridge (`baremetal` by default) with one end of a veth pair, the
    /// other end in the libvirt NAT bridge (the founding notes' layout), made by
    /// the infra target (`network.external_bridge: veth`, src/host/veth.rs).
    VethLinked { bridge: String, nat: String },
    /// The installer would not accept the network's own bridge (remote libvirt,
    /// network not named like its bridge), and a veth-linked bridge, made on this
    /// host, would not be on libvirt's.
    Unusable { nat: String },
}

/// Which bridge the installer gets as `externalBridge`. The installer accepts an
/// interface that is up on the host it runs on, or a libvirt network named like
/// its bridge (openshift/installer pkg/types/baremetal/validation, the
/// externalBridge check against the host's interfaces and libvirt's networks):
/// - `mode: bridge`: the existing host bridge, as it is;
/// - `mode: nat` on the local libvirt: the network's bridge is a host interface,
///   up once the infra target started the network;
/// - `mode: nat` on a remote libvirt: only a network named like its bridge passes
///   the check made on this host;
/// - `external_bridge: veth` (`veth`: its name): the veth-linked bridge, on the
///   local libvirt only (the links are made on this host).
pub fn external_bridge(
    mode: NetworkMode,
    network: &str,
    bridge: &str,
    veth: Option<&str>,
    local_libvirt: bool,
) -> ExternalBridge {
    match (mode, veth) {
        (NetworkMode::Nat, Some(v)) if local_libvirt => ExternalBridge::VethLinked {
            bridge: v.to_string(),
            nat: bridge.to_string(),
        },
        (NetworkMode::Bridge, _) => ExternalBridge::Own(bridge.to_string()),
        (NetworkMode::Nat, None) if local_libvirt || network == bridge => {
            ExternalBridge::Own(bridge.to_string())
        }
        (NetworkMode::Nat, _) => ExternalBridge::Unusable {
            nat: bridge.to_string(),
        },
    }
}

/// The infraID of this cluster's install, from the installer's `metadata.json`;
/// `None` before the installer wrote it. Checked before it reaches libvirt.
pub fn infra_id(assets: &crate::state::Assets) -> Result<Option<String>> {
    let path = assets.metadata();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let Some(id) = v.get("infraID").and_then(|i| i.as_str()) else {
        bail!("{}: no infraID", path.display());
    };
    if !valid_infra_id(id) {
        bail!(
            "{}: infraID {id:?} is not a name the installer makes (lowercase letters, digits and '-', up to 32)",
            path.display()
        );
    }
    Ok(Some(id.to_string()))
}

/// The installer's infraIDs: the cluster name cut to 27 characters, '-' and five
/// random lowercase alphanumerics (pkg/asset/installconfig/clusterid.go).
fn valid_infra_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 32
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !id.starts_with('-')
}

/// The bootstrap VM's domain (and pool) name for `infra_id`.
pub fn bootstrap_name(infra_id: &str) -> String {
    format!("{infra_id}-bootstrap")
}

/// The installer's bootstrap VM as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BootstrapVm {
    pub name: String,
    pub running: bool,
    /// The bridges its NICs are on.
    pub bridges: Vec<String>,
}

/// The bootstrap VM of this cluster's install, if the installer made one and it
/// is still defined.
pub fn bootstrap_vm(host: &Host, cluster: &ClusterDir) -> Result<Option<BootstrapVm>> {
    let Some(id) = infra_id(&cluster.assets())? else {
        return Ok(None);
    };
    let name = bootstrap_name(&id);
    let Some(d) = host.domain(&name)? else {
        return Ok(None);
    };
    let xml = d.xml_desc(0).with_context(|| format!("reading {name}"))?;
    Ok(Some(BootstrapVm {
        running: d.is_active().unwrap_or(false),
        bridges: bridges_of(&xml),
        name,
    }))
}

/// The source bridges of a domain's `<interface type='bridge'>` NICs.
pub fn bridges_of(xml: &str) -> Vec<String> {
    let Ok(doc) = roxmltree::Document::parse(xml) else {
        return Vec::new();
    };
    doc.descendants()
        .filter(|n| n.tag_name().name() == "interface" && n.attribute("type") == Some("bridge"))
        .filter_map(|n| {
            n.children()
                .find(|c| c.tag_name().name() == "source")
                .and_then(|s| s.attribute("bridge"))
                .map(str::to_string)
        })
        .collect()
}

/// The volumes the installer puts in the bootstrap pool (since 4.16,
/// pkg/infrastructure/baremetal/bootstrap.go: createLiveVolume, createScratchVolume).
pub fn bootstrap_volumes(infra_id: &str) -> [String; 2] {
    [
        format!("{infra_id}-live-provisioner"),
        format!("{infra_id}-scratch"),
    ]
}

/// What is left of the installer's bootstrap resources on libvirt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootstrapLeft {
    /// The domain: `Some(running)` while it is defined.
    pub domain: Option<bool>,
    /// The pool is defined (active or not).
    pub pool: bool,
    /// The volumes in it (only an active pool lists them).
    pub volumes: Vec<String>,
}

impl BootstrapLeft {
    /// Any of it is there: `create cluster` got as far as making some.
    pub fn any(&self) -> bool {
        self.domain.is_some() || self.pool
    }

    /// All of it is there and the domain runs: Ironic on it may go on.
    /// Anything less is a half-made (or stopped) bootstrap.
    pub fn whole(&self, infra_id: &str) -> bool {
        self.domain == Some(true)
            && bootstrap_volumes(infra_id)
                .iter()
                .all(|v| self.volumes.contains(v))
    }
}

/// The bootstrap resources named for `infra_id` on `host`.
pub fn bootstrap_left(host: &Host, infra_id: &str) -> Result<BootstrapLeft> {
    let name = bootstrap_name(infra_id);
    let domain = match host.domain(&name)? {
        Some(d) => Some(d.is_active().with_context(|| format!("reading {name}"))?),
        None => None,
    };
    let pool = host.pool(&name)?;
    let volumes = match &pool {
        Some(p) if p.is_active().unwrap_or(false) => {
            let _ = p.refresh(0);
            p.list_volumes().unwrap_or_default()
        }
        _ => Vec::new(),
    };
    Ok(BootstrapLeft {
        domain,
        pool: pool.is_some(),
        volumes,
    })
}

/// Remove the installer's bootstrap VM, every volume of its pool and the pool
/// (what `openshift-install destroy bootstrap` removes, and the pool's
/// definition, which it leaves: it destroys and deletes the pool but never
/// undefines it), whatever is left of them: only the objects named after this
/// cluster's infraID, on `host` (the cluster's libvirt).
pub fn remove_bootstrap(host: &Host, cluster: &ClusterDir) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let Some(id) = infra_id(&cluster.assets())? else {
        return Ok(removed);
    };
    let name = bootstrap_name(&id);
    if let Some(d) = host.domain(&name)? {
        if d.is_active()? {
            d.destroy().with_context(|| format!("stopping {name}"))?;
        }
        if d.undefine_flags(virt::sys::VIR_DOMAIN_UNDEFINE_NVRAM)
            .is_err()
        {
            d.undefine().with_context(|| format!("undefining {name}"))?;
        }
        removed.push(format!("domain {name} (the installer's bootstrap VM)"));
    }
    if let Some(pool) = host.pool(&name)? {
        // Its volumes are listed only while it runs; one whose directory is
        // gone cannot start, and then holds nothing.
        if !pool.is_active()? {
            let _ = pool.create(0);
        }
        if pool.is_active()? {
            let _ = pool.refresh(0);
            // The pool is the installer's for this infraID alone: all of it goes.
            for vol in pool.list_volumes().unwrap_or_default() {
                if let Some(v) = Host::volume(&pool, &vol)? {
                    v.delete(0)
                        .with_context(|| format!("deleting volume {vol}"))?;
                    removed.push(format!("volume {vol}"));
                }
            }
            pool.destroy()
                .with_context(|| format!("stopping pool {name}"))?;
        }
        // Its directory, when empty (rmdir; a file shiftlab does not know stays).
        let _ = pool.delete(0);
        pool.undefine()
            .with_context(|| format!("undefining pool {name}"))?;
        removed.push(format!("pool {name}"));
    }
    Ok(removed)
}

/// How far an earlier `create cluster` got, read from what it left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Nothing provisioned yet (no `metadata.json`): create the cluster.
    NotStarted,
    /// The installer wrote `metadata.json` (and its state) and stopped before it
    /// made anything: no `terraform.tfvars.json` (it writes them just before the
    /// bootstrap, and its `destroy bootstrap` cannot run without them), or no
    /// bootstrap resource at all. Its state goes and `create cluster` starts over.
    NothingCreated,
    /// The installer made its infrastructure (the bootstrap VM; Ironic on it
    /// provisions the hosts on its own) and was stopped before the bootstrap
    /// resources went.
    Bootstrapping,
    /// The bootstrap resources were destroyed: only the wait for the cluster is left.
    BootstrapDestroyed,
}

/// What an earlier `create cluster` left in the asset directory and on libvirt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Left {
    /// `metadata.json`.
    pub metadata: bool,
    /// `terraform.tfvars.json`, what `destroy bootstrap` reads first
    /// (pkg/infrastructure/baremetal/variables.go, getConfig).
    pub tfvars: bool,
    /// Any bootstrap resource ([`BootstrapLeft::any`]).
    pub bootstrap: bool,
}

/// The installer's files that make it resume rather than start over: its state
/// (install-config as it consumed it, the infraID, every CA), `metadata.json`
/// and the variables of its infrastructure step (pkg/asset/store/store.go,
/// pkg/asset/cluster/metadata.go, pkg/infrastructure/baremetal/variables.go).
pub const INSTALLER_STATE: [&str; 4] = [
    ".openshift_install_state.json",
    "metadata.json",
    "terraform.tfvars.json",
    "terraform.platform.auto.tfvars.json",
];

/// The line `create cluster` logs once bootstrap is complete, before it removes
/// the bootstrap VM (openshift/installer cmd/openshift-install/create.go).
pub const BOOTSTRAP_DESTROYING: &str = "Destroying the bootstrap resources...";
/// What shiftlab appends to the installer's log once its own `destroy bootstrap`
/// succeeded (the installer's success says nothing shiftlab could rely on).
pub const BOOTSTRAP_DESTROYED: &str = "### shiftlab: the bootstrap resources are destroyed";

/// Where an install stands, from what it left and the installer's log (all
/// runs appended, shiftlab's `### <command>` line before each).
pub fn progress(left: Left, log: &str) -> Progress {
    if !left.metadata {
        return Progress::NotStarted;
    }
    // Only the runs since the last `create cluster` count: an earlier install
    // in the same directory (destroyed since) said the same lines.
    let since = log
        .rfind(" create cluster")
        .map(|i| &log[i..])
        .unwrap_or(log);
    if since.contains(BOOTSTRAP_DESTROYED) || since.contains(BOOTSTRAP_DESTROYING) {
        Progress::BootstrapDestroyed
    } else if !left.tfvars || !left.bootstrap {
        Progress::NothingCreated
    } else {
        Progress::Bootstrapping
    }
}

/// The installer commands that take an install at `progress` to the end;
/// `bootstrap_whole`: the installer's bootstrap VM runs with all its volumes.
///
/// `create cluster` itself does not resume (openshift/installer
/// cmd/openshift-install/create.go runs the Cluster asset's infrastructure
/// provisioning again, and libvirt refuses the bootstrap objects that exist). But
/// Ironic runs on the bootstrap VM, not in the installer: once that VM runs, a
/// stopped installer leaves it deploying the hosts, and the waits pick the
/// install up. A bootstrap VM that is missing, stopped or half made goes
/// (`destroy bootstrap`, else shiftlab through libvirt: see [`run`]) and
/// `create cluster` runs again, keeping the infraID of its state file. With
/// nothing created, `create cluster` starts over on its own (shiftlab removed
/// its state first): `destroy bootstrap` would fail there.
pub fn commands(progress: Progress, bootstrap_whole: bool) -> Vec<Vec<&'static str>> {
    let wait = |what| vec!["wait-for", what, "--log-level", "info"];
    let create = vec!["create", "cluster", "--log-level", "info"];
    let destroy = vec!["destroy", "bootstrap", "--log-level", "info"];
    match progress {
        Progress::NotStarted | Progress::NothingCreated => vec![create],
        Progress::Bootstrapping if !bootstrap_whole => vec![destroy, create],
        Progress::Bootstrapping => vec![
            wait("bootstrap-complete"),
            destroy,
            wait("install-complete"),
        ],
        Progress::BootstrapDestroyed => vec![wait("install-complete")],
    }
}

/// Remove the installer's state in `assets` ([`INSTALLER_STATE`], by name: the
/// rest of the directory stays), so that `create cluster` starts over from
/// install-config.yaml; returns the files removed.
pub fn start_over(assets: &crate::state::Assets) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for f in INSTALLER_STATE {
        let path = assets.file(f);
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(f.to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
    }
    Ok(removed)
}

/// How long serve may take to pick the cluster up and open its BMC.
const BMC_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Before the installer runs: serve's BMC accepts connections (Ironic reaches
/// every host through it), else a clear refusal. An IPv6 BMC address still
/// tentative (no node runs on the lab bridge yet, so it has no carrier and
/// duplicate address detection cannot finish) takes no connection from the
/// host itself: there serve's listening socket on it is enough, since it
/// answers once the installer's bootstrap VM brings the link up.
fn ensure_bmc(ctx: &Ctx) -> Result<()> {
    let Some(bmc) = &ctx.plan.bmc else {
        bail!(
            "the plan of {} has no BMC (method ipi has one)",
            ctx.spec.cluster
        );
    };
    let _ = crate::serve::notify(ctx.state, Some(&ctx.spec.cluster));
    let addr = std::net::SocketAddr::from((bmc.address, bmc.port));
    let deadline = std::time::Instant::now() + BMC_GRACE;
    loop {
        if std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).is_ok() {
            return Ok(());
        }
        if let std::net::IpAddr::V6(ip) = bmc.address {
            let listening = crate::host::sockets::listening_on(bmc.port).contains(&bmc.address);
            let if_inet6 = std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default();
            if listening && crate::host::ipv6::is_tentative(&if_inet6, ip) {
                return Ok(());
            }
        }
        if std::time::Instant::now() >= deadline {
            bail!(
                "the lab BMC {} does not accept connections after {} s: Ironic drives every host through it; start `shiftlab serve` (docs/serve.md), `shiftlab serve status {}` says why",
                bmc.endpoint,
                BMC_GRACE.as_secs(),
                ctx.spec.cluster
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// The install-complete target of the ipi flow: `openshift-install create
/// cluster`, or after a stop, the rest of it ([`progress`]).
pub fn run(ctx: &Ctx, locked: &mut Locked) -> Result<()> {
    let host = Host::open(&ctx.plan.libvirt.uri)?;
    let net = &ctx.plan.network;
    match external_bridge(
        net.mode,
        &net.name,
        &net.bridge,
        net.veth.as_ref().map(|v| v.bridge.as_str()),
        host.is_local(),
    ) {
        ExternalBridge::Own(_) => {}
        ExternalBridge::VethLinked { .. } => {
            // The infra target made it; a rerun completes what a kill left.
            let v = net.veth.as_ref().context("the plan has no veth-linked bridge")?;
            for made in crate::host::veth::ensure(&ctx.spec.cluster, &ctx.cluster.host_links(), v)? {
                eprintln!("    made {made}");
            }
        }
        ExternalBridge::Unusable { nat } => bail!(
            "the installer on this host would not accept {nat} as externalBridge (libvirt is remote and its network is not named like its bridge), and a veth-linked bridge made here would not be on libvirt's host: name the network like its bridge (network.name: {nat})"
        ),
    }
    ensure_bmc(ctx)?;
    let assets = ctx.cluster.assets();
    let log = std::fs::read_to_string(ctx.cluster.installer_log()).unwrap_or_default();
    let id = infra_id(&assets)?;
    let bootstrap = match &id {
        Some(id) => bootstrap_left(&host, id)?,
        None => BootstrapLeft::default(),
    };
    let left = Left {
        metadata: assets.metadata().is_file(),
        tfvars: assets.file("terraform.tfvars.json").is_file(),
        bootstrap: bootstrap.any(),
    };
    let at = progress(left, &log);
    if at == Progress::NothingCreated {
        // The installer stopped before it made anything (a failed provisioning
        // check writes metadata.json first): it starts over from the backup.
        let removed = start_over(&assets)?;
        ctx.progress.aside(format_args!(
            "    the installer made nothing last time: starting over (removed {})",
            removed.join(", ")
        ));
    }
    if matches!(at, Progress::NotStarted | Progress::NothingCreated) {
        // A run killed after the installer consumed install-config.yaml, before
        // it kept it in its state file, left neither: the backup comes back.
        crate::install::targets::install_config::restore(&ctx.cluster)?;
    }
    if at == Progress::NothingCreated {
        // Without its state the installer takes the restored install-config as
        // changed and discards the manifests on disk, making its own again
        // (openshift/installer pkg/asset/store/store.go, load: "Discarding the
        // ... because its dependencies are dirty"): the lab's are added again.
        let added = crate::install::targets::manifests::make(ctx, locked)?;
        ctx.progress.aside(format_args!(
            "    manifests made again: added {}",
            added.join(", ")
        ));
    }
    let whole = id.as_deref().is_some_and(|id| bootstrap.whole(id));
    if !matches!(at, Progress::NotStarted | Progress::NothingCreated) {
        ctx.progress.aside(format_args!(
            "    resuming the install: {at:?}, the installer's bootstrap VM {}",
            if whole {
                "runs"
            } else {
                "is stopped, missing or half made"
            }
        ));
    }
    let steps = commands(at, whole);
    let last = steps.len() - 1;
    for (i, args) in steps.iter().enumerate() {
        let destroy = args[..2] == ["destroy", "bootstrap"];
        match installer::run(ctx, locked, args) {
            Ok(()) => {}
            // The installer's `destroy bootstrap` fails on a bootstrap it did
            // not finish (a domain missing or not running, a volume or the pool
            // missing: pkg/infrastructure/baremetal/bootstrap.go,
            // destroyBootstrap): shiftlab removes what is left itself.
            Err(e) if destroy => {
                ctx.progress.aside(format_args!(
                    "    openshift-install destroy bootstrap failed ({e:#}): removing what is left of the bootstrap through libvirt"
                ));
                for r in remove_bootstrap(&host, &ctx.cluster)
                    .context("removing the installer's bootstrap VM after its destroy failed")?
                {
                    ctx.progress.aside(format_args!("    removed {r}"));
                }
            }
            Err(e) => return Err(e),
        }
        // A `destroy bootstrap` that ends the bootstrap phase (not one that
        // clears a half-made VM before `create cluster` runs again).
        if destroy && i < last && steps[i + 1][0] == "wait-for" {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(ctx.cluster.installer_log())
                .context("opening the installer log")?;
            writeln!(f, "{BOOTSTRAP_DESTROYED}")?;
        }
    }
    // The installer removes its bootstrap VM but leaves the pool defined; one it
    // left (killed in between) goes now, as `destroy bootstrap` would.
    for r in remove_bootstrap(&host, &ctx.cluster)? {
        eprintln!("    removed {r}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_s_own_bridge_when_the_installer_takes_it() {
        assert_eq!(
            external_bridge(NetworkMode::Nat, "shiftlab-lab1", "sl-lab1", None, true),
            ExternalBridge::Own("sl-lab1".into())
        );
        assert_eq!(
            external_bridge(NetworkMode::Nat, "sl-lab1", "sl-lab1", None, false),
            ExternalBridge::Own("sl-lab1".into())
        );
        assert_eq!(
            external_bridge(NetworkMode::Bridge, "lab", "br0", None, false),
            ExternalBridge::Own("br0".into())
        );
        assert_eq!(
            external_bridge(NetworkMode::Nat, "shiftlab-lab1", "sl-lab1", None, false),
            ExternalBridge::Unusable {
                nat: "sl-lab1".into()
            }
        );
    }

    #[test]
    fn the_veth_linked_bridge_when_asked_for_and_local() {
        assert_eq!(
            external_bridge(
                NetworkMode::Nat,
                "shiftlab-lab1",
                "sl-lab1",
                Some("baremetal"),
                true
            ),
            ExternalBridge::VethLinked {
                bridge: "baremetal".into(),
                nat: "sl-lab1".into()
            }
        );
        // Made on this host, it would not be on a remote libvirt's.
        assert_eq!(
            external_bridge(
                NetworkMode::Nat,
                "shiftlab-lab1",
                "sl-lab1",
                Some("baremetal"),
                false
            ),
            ExternalBridge::Unusable {
                nat: "sl-lab1".into()
            }
        );
    }

    #[test]
    fn infra_ids_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let state = crate::state::StateDir {
            root: dir.path().to_path_buf(),
        };
        let assets = state.cluster("lab1").assets();
        std::fs::create_dir_all(assets.path()).unwrap();
        assert_eq!(infra_id(&assets).unwrap(), None);
        let m = assets.metadata();
        std::fs::write(&m, r#"{"clusterName":"lab1","infraID":"lab1-x7k2p"}"#).unwrap();
        assert_eq!(infra_id(&assets).unwrap().as_deref(), Some("lab1-x7k2p"));
        assert_eq!(bootstrap_name("lab1-x7k2p"), "lab1-x7k2p-bootstrap");
        for bad in ["../etc", "Lab1-x", "", "-lab1", "a b"] {
            std::fs::write(&m, serde_json::json!({ "infraID": bad }).to_string()).unwrap();
            let e = format!("{:#}", infra_id(&assets).unwrap_err());
            assert!(e.contains("infraID"), "{e}");
        }
        std::fs::write(&m, "{}").unwrap();
        assert!(format!("{:#}", infra_id(&assets).unwrap_err()).contains("no infraID"));
    }

    #[test]
    fn bridges_of_a_domain() {
        let xml = "<domain><devices>\
            <interface type='bridge'><source bridge='sl-lab1'/><mac address='52:54:00:00:00:01'/></interface>\
            <interface type='network'><source network='default'/></interface>\
            </devices></domain>";
        assert_eq!(bridges_of(xml), ["sl-lab1"]);
        assert!(bridges_of("not xml").is_empty());
    }

    #[test]
    fn a_stopped_install_resumes_where_it_stood() {
        let all = Left {
            metadata: true,
            tfvars: true,
            bootstrap: true,
        };
        assert_eq!(progress(Left::default(), ""), Progress::NotStarted);
        let started = "### /x/openshift-install create cluster --log-level info\n\
            level=info msg=\"Creating infrastructure resources...\"\n";
        assert_eq!(progress(all, started), Progress::Bootstrapping);
        let past = format!("{started}level=info msg=\"{BOOTSTRAP_DESTROYING}\"\n");
        assert_eq!(progress(all, &past), Progress::BootstrapDestroyed);
        // Once destroyed, no bootstrap resource is what is expected.
        let gone = Left {
            bootstrap: false,
            ..all
        };
        assert_eq!(progress(gone, &past), Progress::BootstrapDestroyed);
        // An earlier install's lines do not count for a new one.
        let again = format!("{past}### /x/openshift-install create cluster --log-level info\n");
        assert_eq!(progress(all, &again), Progress::Bootstrapping);
        let by_hand =
            format!("{started}### /x/openshift-install destroy bootstrap\n{BOOTSTRAP_DESTROYED}\n");
        assert_eq!(progress(all, &by_hand), Progress::BootstrapDestroyed);
        assert_eq!(
            commands(Progress::NotStarted, false)[0][..2],
            ["create", "cluster"]
        );
        let resume = commands(Progress::Bootstrapping, true);
        assert_eq!(
            resume.iter().map(|c| c[1]).collect::<Vec<_>>(),
            ["bootstrap-complete", "bootstrap", "install-complete"]
        );
        // A half-made bootstrap VM: removed, and create cluster again.
        let again = commands(Progress::Bootstrapping, false);
        assert_eq!(
            again.iter().map(|c| c[..2].join(" ")).collect::<Vec<_>>(),
            ["destroy bootstrap", "create cluster"]
        );
        assert_eq!(commands(Progress::BootstrapDestroyed, false).len(), 1);
    }

    /// The real `create cluster` writes metadata.json before its provisioning
    /// checks; failing one leaves no terraform.tfvars.json, and its `destroy
    /// bootstrap` then fails on every rerun: nothing was created, so the rerun
    /// starts over and never calls it.
    #[test]
    fn metadata_without_anything_made_is_a_fresh_start() {
        let started = "### /x/openshift-install create cluster --log-level info\n\
            level=fatal msg=\"failed to connect to libvirt\"\n";
        let only_metadata = Left {
            metadata: true,
            ..Left::default()
        };
        assert_eq!(progress(only_metadata, started), Progress::NothingCreated);
        // The variables written, but no bootstrap resource made.
        let no_bootstrap = Left {
            metadata: true,
            tfvars: true,
            bootstrap: false,
        };
        assert_eq!(progress(no_bootstrap, started), Progress::NothingCreated);
        // A bootstrap resource without the variables: destroy bootstrap could
        // not run either.
        let no_tfvars = Left {
            metadata: true,
            tfvars: false,
            bootstrap: true,
        };
        assert_eq!(progress(no_tfvars, started), Progress::NothingCreated);
        let steps = commands(Progress::NothingCreated, false);
        assert_eq!(
            steps.iter().map(|c| c[..2].join(" ")).collect::<Vec<_>>(),
            ["create cluster"]
        );
    }

    #[test]
    fn starting_over_removes_the_installer_state_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let state = crate::state::StateDir {
            root: dir.path().to_path_buf(),
        };
        let assets = state.cluster("lab1").assets();
        std::fs::create_dir_all(assets.path().join("auth")).unwrap();
        for f in [
            ".openshift_install_state.json",
            "metadata.json",
            ".openshift_install.log",
            "auth/kubeconfig",
        ] {
            std::fs::write(assets.file(f), "x").unwrap();
        }
        assert_eq!(
            start_over(&assets).unwrap(),
            [".openshift_install_state.json", "metadata.json"]
        );
        for gone in INSTALLER_STATE {
            assert!(!assets.file(gone).exists(), "{gone}");
        }
        for kept in [".openshift_install.log", "auth/kubeconfig"] {
            assert!(assets.file(kept).exists(), "{kept}");
        }
        assert!(start_over(&assets).unwrap().is_empty());
    }

    #[test]
    fn a_bootstrap_is_whole_when_it_runs_with_both_volumes() {
        let id = "lab1-x7k2p";
        let whole = BootstrapLeft {
            domain: Some(true),
            pool: true,
            volumes: vec![
                "lab1-x7k2p-live-provisioner".into(),
                "lab1-x7k2p-scratch".into(),
            ],
        };
        assert!(whole.whole(id) && whole.any());
        let stopped = BootstrapLeft {
            domain: Some(false),
            ..whole.clone()
        };
        assert!(!stopped.whole(id) && stopped.any());
        let missing_volume = BootstrapLeft {
            volumes: vec!["lab1-x7k2p-live-provisioner".into()],
            ..whole.clone()
        };
        assert!(!missing_volume.whole(id));
        // The older layout's volumes are not this installer's bootstrap.
        let old = BootstrapLeft {
            volumes: vec![
                "lab1-x7k2p-bootstrap".into(),
                "lab1-x7k2p-bootstrap-base".into(),
            ],
            ..whole.clone()
        };
        assert!(!old.whole(id));
        let pool_only = BootstrapLeft {
            domain: None,
            pool: true,
            volumes: vec![],
        };
        assert!(pool_only.any() && !pool_only.whole(id));
        assert!(!BootstrapLeft::default().any());
    }
}
