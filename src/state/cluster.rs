//! One cluster's directory, `<state>/clusters/<name>/`: every file in it named
//! here and nowhere else, its lock, and the typed plan. `destroy` removes the
//! directory, so everything of a cluster lives inside it.
//!
//! | file | written by | what |
//! |---|---|---|
//! | `.lock` | every command that changes the cluster | flock; holds the holder's pid |
//! | `plan.json` | the infra target | the plan the host services work from |
//! | `install-state.json` | the install targets | which target is started or done; facts; plan fingerprint |
//! | `install-plan.json` | the install targets | the plan the done targets were made from |
//! | `cluster-file.json` | the install targets, scale | the cluster file as read, with its `-P` and scale's count (0600) |
//! | `install-config.backup.yaml`, `agent-config.backup.yaml` | install-config | what was asked for (0600) |
//! | `assets/` | openshift-install | its asset directory ([`Assets`]) |
//! | `openshift-install.log`, `openshift-install.pid` | the install targets | the installer's output; the running child |
//! | `bin/` | an older shiftlab | a cluster-local `openshift-install` |
//! | `libvirt.json` | libvirt apply | the ledger: volumes shiftlab created |
//! | `kubevirt.json` | KubeVirt apply | kubeconfig, context and namespace of a `backend: kubevirt` cluster's objects |
//! | `bmc-password`, `bmc/` (`bmc/tls/`) | install-config, serve | the lab BMC's password (0600) and state (its CA and certificates) |
//! | `lb-state.json` | remove-bootstrap | whether the bootstrap left the backends |
//! | `haproxy.cfg`, `haproxy.cfg.new`, `haproxy.pid`, `haproxy.sock` | serve | the load balancer |
//! | `http/`, `http-private/`, `http-token` | serve | artifacts: public, and private behind the token (0600) |
//! | `host-dns.json`, `serve.json`, `serve-stopped` | serve | host DNS record, endpoints, retired plan |
//! | `sno-live.x86_64.iso` | the iso target (sno) | the live ISO with the node's Ignition embedded |
//! | `host-firewall.json` | serve | the host firewall rules added for the nodes, removed at destroy |
//! | `host-links.json` | infra (ipi, `external_bridge: veth`) | the veth-linked bridge's links, removed at destroy |
//! | `known_hosts` | ssh | the nodes' SSH host keys |
//! | `power.json` | stop, start | the last stop or start, per node (ACPI or forced) |
//! | `restored-from.json` | bundle restore | the bundle the cluster was restored from, and whether the restore finished |
//! | `nfs/` | serve (`storage: nfs`) | the NFS server's config, pid, log, recovery dir (`host::nfs::ServerFiles`) |

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::files::FileLock;
use crate::plan::{Plan, PLAN_FORMAT};

/// The directory of one cluster. Made from a checked name only
/// ([`super::StateDir::cluster`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDir {
    name: String,
    path: PathBuf,
}

/// The cluster's lock, held until dropped.
#[derive(Debug)]
pub struct ClusterLock {
    _lock: FileLock,
}

macro_rules! files {
    ($($(#[$doc:meta])* $fn:ident => $name:literal;)*) => {
        $(
            $(#[$doc])*
            pub fn $fn(&self) -> PathBuf {
                self.path.join($name)
            }
        )*
    };
}

impl ClusterDir {
    pub(super) fn new(name: &str, path: PathBuf) -> Self {
        ClusterDir {
            name: name.to_string(),
            path,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    files! {
        /// The lock file.
        lock_file => ".lock";
        /// The plan the host services work from.
        plan => "plan.json";
        /// The install's targets, facts and plan fingerprint.
        install_state => "install-state.json";
        /// The plan the install's done targets were made from.
        install_plan => "install-plan.json";
        /// The cluster file the install was made from (0600; src/spec/source.rs).
        cluster_file => "cluster-file.json";
        /// The lab's users: names, admin or not, where each password is (no secret).
        users => "users.json";
        /// What install-config.yaml was (the installer consumes the original).
        install_config_backup => "install-config.backup.yaml";
        /// What agent-config.yaml was.
        agent_config_backup => "agent-config.backup.yaml";
        /// Every installer run's output, appended.
        installer_log => "openshift-install.log";
        /// The running installer child's record.
        installer_pid => "openshift-install.pid";
        /// A cluster-local `openshift-install` (an older shiftlab put it here).
        installer_bin => "bin/openshift-install";
        /// The libvirt ledger.
        ledger => "libvirt.json";
        /// Where a `backend: kubevirt` cluster's objects are (src/kubevirt/apply.rs).
        kubevirt_ledger => "kubevirt.json";
        /// The lab BMC's password (0600).
        bmc_password => "bmc-password";
        /// The lab BMC's own state directory (TLS material, media cache).
        bmc_dir => "bmc";
        /// The lab BMC's CA and certificates (src/redfish/tls.rs).
        bmc_tls => "bmc/tls";
        /// The veth-linked bridge's links, recorded before they are made (src/host/veth.rs).
        host_links => "host-links.json";
        /// Load-balancer state that outlives restarts.
        lb_state => "lb-state.json";
        /// The HAProxy configuration in force.
        haproxy_cfg => "haproxy.cfg";
        /// A candidate configuration, checked before it replaces the one in force.
        haproxy_cfg_candidate => "haproxy.cfg.new";
        /// The HAProxy master's pid.
        haproxy_pid => "haproxy.pid";
        /// HAProxy's stats socket (admin, 0600).
        haproxy_sock => "haproxy.sock";
        /// Artifacts served over HTTP to anyone on the cluster's network.
        http_public => "http";
        /// Artifacts that carry secrets, served only under `/<token>/`.
        http_private => "http-private";
        /// The cluster's HTTP token (0600): the first path segment of private URLs.
        http_token => "http-token";
        /// How host DNS was configured, to undo it.
        host_dns => "host-dns.json";
        /// The host firewall rules serve added for the cluster, to remove them.
        host_firewall => "host-firewall.json";
        /// The endpoints serve runs for the cluster.
        serve_endpoints => "serve.json";
        /// Marks a plan serve must leave alone (destroy under way).
        serve_stopped => "serve-stopped";
        /// The nodes' SSH host keys (`shiftlab ssh`), apart from the user's own file.
        known_hosts => "known_hosts";
        /// The last `stop` or `start`: what each node went through.
        power => "power.json";
        /// The bundle the cluster was restored from (src/bundle/restore.rs).
        restored_from => "restored-from.json";
        /// The single node's live ISO with its Ignition embedded (sno).
        sno_iso => "sno-live.x86_64.iso";
    }

    /// openshift-install's asset directory.
    pub fn assets(&self) -> Assets {
        Assets(self.path.join("assets"))
    }

    /// Take the cluster's lock (the directory made if missing), failing at once
    /// when another shiftlab holds it.
    pub fn lock(&self) -> Result<ClusterLock> {
        std::fs::create_dir_all(&self.path)
            .with_context(|| format!("creating {}", self.path.display()))?;
        match crate::files::try_lock(&self.lock_file())? {
            Ok(l) => Ok(ClusterLock { _lock: l }),
            Err(holder) => bail!(
                "another shiftlab is working on {} (pid {holder}); wait for it or stop it",
                self.name
            ),
        }
    }

    /// The lock, for a command that changes a cluster that may not exist: none is
    /// taken (and no directory made) when the cluster has no state at all.
    pub fn lock_if_exists(&self) -> Result<Option<ClusterLock>> {
        if !self.exists() {
            return Ok(None);
        }
        self.lock().map(Some)
    }

    /// The lab BMC's password, the one reader and writer of `bmc-password`: the
    /// cluster file's (`configured`), else the one stored, else a new random one;
    /// stored 0600. The install-config target puts it into install-config.yaml,
    /// the lab's BMC in `shiftlab serve` authenticates with it (`configured` is
    /// `None` there: the plan holds no secret).
    pub fn lab_bmc_password(&self, configured: Option<&str>) -> Result<String> {
        let path = self.bmc_password();
        let stored = std::fs::read_to_string(&path)
            .ok()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty());
        let password = match (configured, stored) {
            (Some(p), Some(s)) if p == s => return Ok(s),
            (None, Some(s)) => return Ok(s),
            (Some(p), _) => p.to_string(),
            (None, None) => crate::files::random_secret(crate::files::PASSWORD_LEN)?,
        };
        crate::files::write_private(&path, password.as_bytes())
            .with_context(|| format!("storing the BMC password in {}", path.display()))?;
        Ok(password)
    }

    /// Whether the cluster has a plan: `false` only when `plan.json` (or the
    /// directory) is positively absent; a failure to look is an error.
    pub fn has_plan(&self) -> Result<bool> {
        match std::fs::metadata(self.plan()) {
            Ok(m) => Ok(m.is_file()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e).with_context(|| format!("inspecting {}", self.plan().display())),
        }
    }

    /// The recorded plan; refused when another shiftlab version wrote it in
    /// another format.
    pub fn read_plan(&self) -> Result<Plan> {
        read_plan_file(&self.plan())
    }

    /// Record the plan for the host services (and `approve-csrs`).
    pub fn write_plan(&self, plan: &Plan) -> Result<()> {
        crate::files::write_json(&self.plan(), plan)
    }
}

/// A plan written by [`ClusterDir::write_plan`] (or `shiftlab plan -o json`).
pub fn read_plan_file(path: &Path) -> Result<Plan> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    plan_from_json(&text).with_context(|| format!("reading {}", path.display()))
}

/// Parse a persisted plan, checking its format first so that another version's
/// plan is named as such rather than as a missing field.
pub fn plan_from_json(text: &str) -> Result<Plan> {
    #[derive(serde::Deserialize)]
    struct Format {
        format: u32,
    }
    let f: Format = serde_json::from_str(text)?;
    if f.format != PLAN_FORMAT {
        bail!(
            "plan format {} is not {PLAN_FORMAT} (written by another shiftlab version)",
            f.format
        );
    }
    Ok(serde_json::from_str(text)?)
}

/// openshift-install's asset directory, `<cluster>/assets/`: the names in it are
/// the installer's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assets(PathBuf);

impl Assets {
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A file of the asset directory, by its path relative to it (a manifest's
    /// `openshift/99-….yaml`).
    pub fn file(&self, relative: &str) -> PathBuf {
        debug_assert!(!relative.starts_with('/') && !relative.contains(".."));
        self.0.join(relative)
    }

    pub fn install_config(&self) -> PathBuf {
        self.0.join("install-config.yaml")
    }

    pub fn agent_config(&self) -> PathBuf {
        self.0.join("agent-config.yaml")
    }

    /// The installer's record of what it generated.
    pub fn installer_state(&self) -> PathBuf {
        self.0.join(".openshift_install_state.json")
    }

    /// The manifests the installer reads besides its own (`openshift/`).
    pub fn openshift_manifests(&self) -> PathBuf {
        self.0.join("openshift")
    }

    /// The installer's Ignition config for `role` (`bootstrap`, `master`, `worker`).
    pub fn ignition(&self, role: &str) -> PathBuf {
        self.0.join(format!("{role}.ign"))
    }

    /// The cluster's admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.0.join("auth/kubeconfig")
    }

    /// The installer's `metadata.json` (the infraID, for IPI's bootstrap VM).
    pub fn metadata(&self) -> PathBuf {
        self.0.join("metadata.json")
    }

    pub fn kubeadmin_password(&self) -> PathBuf {
        self.0.join("auth/kubeadmin-password")
    }

    /// A `users:` entry's generated password (0600), beside kubeadmin's; `name`
    /// is checked (`spec::is_user_name`).
    pub fn user_password(&self, name: &str) -> PathBuf {
        debug_assert!(crate::spec::is_user_name(name));
        self.0.join(format!("auth/{name}-password"))
    }

    /// `create single-node-ignition-config`'s config for the live ISO
    /// (pkg/asset/ignition/bootstrap/bootstrapinplace.go in openshift/installer).
    pub fn single_node_ignition(&self) -> PathBuf {
        self.0.join("bootstrap-in-place-for-live-iso.ign")
    }

    /// `agent create image`'s ISO (pkg/asset/agent/image/agentimage.go:
    /// `agent.<arch>.iso`).
    pub fn agent_iso(&self) -> PathBuf {
        self.0.join("agent.x86_64.iso")
    }
}

#[cfg(test)]
mod tests {
    use super::super::StateDir;
    use super::*;

    fn plan() -> Plan {
        let text = "cluster: lab1\ndomain: example.com\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAAtest t@t']\nworkers: 2\n";
        crate::plan::from_yaml(text)
    }

    #[test]
    fn the_plan_round_trips_and_another_format_is_named() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: d.path().into(),
        };
        let c = state.cluster("lab1");
        assert!(!c.has_plan().unwrap());
        // Not looked at is not absent.
        let f = d.path().join("file");
        std::fs::write(&f, "x").unwrap();
        let odd = ClusterDir::new("lab9", f.join("lab9"));
        assert!(odd.has_plan().is_err());
        let e = format!("{:#}", c.read_plan().unwrap_err());
        assert!(e.contains("clusters/lab1/plan.json"), "{e}");
        let p = plan();
        c.write_plan(&p).unwrap();
        assert!(c.has_plan().unwrap());
        assert_eq!(c.read_plan().unwrap(), p);
        // (was kube::csr's partial schema of plan.json)
        assert!(format!(
            "{:#}",
            plan_from_json("{\"format\": 999, \"nodes\": []}").unwrap_err()
        )
        .contains("plan format 999"));
    }

    #[test]
    fn every_file_is_inside_the_cluster_directory() {
        let state = StateDir { root: "/s".into() };
        let c = state.cluster("lab1");
        for p in [
            c.lock_file(),
            c.plan(),
            c.install_state(),
            c.installer_bin(),
            c.http_private(),
            c.assets().kubeconfig(),
            c.assets().file("openshift/x.yaml"),
        ] {
            assert!(p.starts_with("/s/clusters/lab1/"), "{}", p.display());
        }
    }

    #[test]
    fn the_lock_is_exclusive_and_names_the_holder() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: d.path().into(),
        };
        let c = state.cluster("lab1");
        assert!(c.lock_if_exists().unwrap().is_none());
        assert!(!c.exists(), "no directory made for a cluster without state");
        let held = c.lock().unwrap();
        let e = c.lock().unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "another shiftlab is working on lab1 (pid {})",
                std::process::id()
            )),
            "{e}"
        );
        drop(held);
        assert!(c.lock_if_exists().unwrap().is_some());
    }
}
