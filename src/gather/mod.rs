//! `shiftlab gather NAME`: one tarball with what it takes to tell why a cluster
//! failed, and no secret. What goes in (`docs/troubleshooting.md` lists it):
//! the cluster's state files, the installer's logs, libvirt's domain and network
//! XML, each node's serial console and QEMU log, the host services' status
//! (HAProxy's backends and stats), serve's journal, doctor's checks, and
//! `openshift-install gather bootstrap`'s bundle while the bootstrap exists,
//! unpacked and redacted entry by entry (`bundle`).
//!
//! What never goes in: `auth/` (kubeconfig, kubeadmin password), Ignition
//! configs, the installer's state file (it holds every generated key), the BMC
//! password and TLS material, the HTTP token and private artifacts. Every text
//! that goes in is passed through [`crate::redact::Redactor`] first (the web
//! page's redactor too).

pub mod bundle;
pub mod hints;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::libvirt::Host;
use crate::plan::Plan;
use crate::redact::Redactor;
use crate::spec::Role;
use crate::state::{ClusterDir, StateDir};
use hints::Hint;

/// What was gathered.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub tarball: PathBuf,
    /// Paths inside the tarball.
    pub files: Vec<String>,
    /// What could not be collected, and why.
    pub missing: Vec<String>,
    pub hints: Vec<Hint>,
}

impl Summary {
    pub fn table(&self) -> String {
        let mut s = format!(
            "wrote {} ({} files)\n",
            self.tarball.display(),
            self.files.len()
        );
        for m in &self.missing {
            s.push_str(&format!("  not collected: {m}\n"));
        }
        if self.hints.is_empty() {
            s.push_str("no known symptom found (docs/troubleshooting.md)\n");
        }
        for h in &self.hints {
            s.push_str(&format!(
                "hint [{}]: {}\n  {}\n  see docs/troubleshooting.md#{}\n",
                h.id, h.symptom, h.hint, h.id
            ));
        }
        s
    }
}

/// The cluster's state files that go in (redacted), by their name in the tarball.
fn state_files(cluster: &ClusterDir) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("state/plan.json", cluster.plan()),
        ("state/install-state.json", cluster.install_state()),
        ("state/install-plan.json", cluster.install_plan()),
        (
            "state/install-config.backup.yaml",
            cluster.install_config_backup(),
        ),
        (
            "state/agent-config.backup.yaml",
            cluster.agent_config_backup(),
        ),
        ("state/libvirt.json", cluster.ledger()),
        ("state/lb-state.json", cluster.lb_state()),
        ("state/serve.json", cluster.serve_endpoints()),
        ("state/host-dns.json", cluster.host_dns()),
        ("state/host-firewall.json", cluster.host_firewall()),
        ("services/haproxy.cfg", cluster.haproxy_cfg()),
        ("install/openshift-install.log", cluster.installer_log()),
        (
            "install/.openshift_install.log",
            cluster.assets().file(".openshift_install.log"),
        ),
    ]
}

struct Tar {
    builder: tar::Builder<flate2::write::GzEncoder<std::fs::File>>,
    prefix: String,
    files: Vec<String>,
    mtime: u64,
}

impl Tar {
    fn add(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(self.mtime);
        h.set_cksum();
        let path = format!("{}/{name}", self.prefix);
        self.builder
            .append_data(&mut h, &path, data)
            .with_context(|| format!("adding {name}"))?;
        self.files.push(name.to_string());
        Ok(())
    }
}

/// Where the tarball goes by default: `./shiftlab-gather-<name>-<unix time>.tar.gz`.
pub fn default_out(name: &str) -> PathBuf {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from(format!("shiftlab-gather-{name}-{t}.tar.gz"))
}

/// Options of a gather.
pub struct Options<'a> {
    pub out: &'a Path,
    /// libvirt, or why it could not be reached.
    pub host: std::result::Result<&'a Host, String>,
    /// Run `openshift-install gather bootstrap` when the bootstrap runs.
    pub bootstrap: bool,
}

/// Why `out` may not be written, if it may not: a symbolic link (in a shared
/// directory such as /tmp one may be planted to point at a file of the user
/// running gather) or anything else that is not a regular file.
fn check_out(out: &Path) -> Result<()> {
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.file_type().is_symlink() => anyhow::bail!(
            "--out {}: a symbolic link is there; gather neither writes through a link nor \
             replaces one (remove it or give another path)",
            out.display()
        ),
        Ok(m) if !m.is_file() => anyhow::bail!(
            "--out {}: not a regular file; give the path of a file to write",
            out.display()
        ),
        _ => Ok(()),
    }
}

/// Gather `cluster` into `opts.out` (0600, replaced atomically, never through a
/// link: one at `out` is refused, one planted meanwhile is replaced by the
/// rename). Reads only.
pub fn gather(state: &StateDir, cluster: &ClusterDir, opts: &Options) -> Result<Summary> {
    check_out(opts.out)?;
    let r = Redactor::of_cluster(cluster);
    let plan = cluster.read_plan().ok();
    let mut missing = Vec::new();
    let mut file = crate::files::AtomicFile::create(opts.out, 0o600)?;
    let mtime = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut tar = Tar {
        builder: tar::Builder::new(flate2::write::GzEncoder::new(
            file.file().try_clone().context("opening the tarball")?,
            flate2::Compression::default(),
        )),
        prefix: format!("gather-{}", cluster.name()),
        files: Vec::new(),
        mtime,
    };
    let mut installer_log = String::new();
    for (name, path) in state_files(cluster) {
        match std::fs::read(&path) {
            Ok(bytes) => {
                let text = r.redact(&String::from_utf8_lossy(&bytes));
                if name.ends_with(".log") {
                    installer_log.push_str(&text);
                }
                tar.add(name, text.as_bytes())?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => missing.push(format!("{}: {e}", path.display())),
        }
    }

    // libvirt: XML, consoles, QEMU's logs.
    let mut node_logs: Vec<(String, String)> = Vec::new();
    match opts.host {
        Ok(host) => {
            for (d, o) in host.owned_domains()? {
                if o.cluster != cluster.name() {
                    continue;
                }
                let name = d.name().context("reading a domain's name")?;
                let xml = d.xml_desc(0).unwrap_or_default();
                tar.add(
                    &format!("libvirt/domain-{name}.xml"),
                    r.redact(&xml).as_bytes(),
                )?;
                if !host.is_local() {
                    continue;
                }
                let console = crate::libvirt::destroy::own_console_log(&name, &xml);
                let qemu_log = format!("/var/log/libvirt/qemu/{name}.log");
                for (label, path) in [("console", console), ("qemu", Some(qemu_log))] {
                    let Some(path) = path else { continue };
                    match std::fs::read(&path) {
                        Ok(b) => {
                            let text = r.redact(&String::from_utf8_lossy(&b));
                            tar.add(&format!("nodes/{name}.{label}.log"), text.as_bytes())?;
                            node_logs.push((name.clone(), text));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => missing.push(format!("{path}: {e}")),
                    }
                }
            }
            for (n, o) in host.owned_networks()? {
                if o.cluster == cluster.name() {
                    let name = n.name().unwrap_or_default();
                    let xml = n.xml_desc(0).unwrap_or_default();
                    tar.add(
                        &format!("libvirt/network-{name}.xml"),
                        r.redact(&xml).as_bytes(),
                    )?;
                }
            }
        }
        Err(ref e) => missing.push(format!("libvirt: {e}")),
    }

    // Host services: status with HAProxy's per-backend state, and serve's journal.
    if plan.is_some() {
        match crate::serve::services_status(state, cluster.name()) {
            Ok(s) => tar.add(
                "services/status.json",
                r.redact(&serde_json::to_string_pretty(&s)?).as_bytes(),
            )?,
            Err(e) => missing.push(format!("host services status: {e:#}")),
        }
        if let Some(stats) = haproxy_stats(&cluster.haproxy_sock()) {
            tar.add("services/haproxy-stats.csv", stats.as_bytes())?;
        }
    }
    match journal(crate::serve::unit::UNIT_NAME) {
        Ok(text) => tar.add("services/serve.journal.log", r.redact(&text).as_bytes())?,
        Err(e) => missing.push(format!("serve's log: {e}")),
    }

    // doctor, for this plan.
    let uri = plan
        .as_ref()
        .map(|p| p.libvirt.uri.clone())
        .unwrap_or_default();
    let facts = match opts.host {
        Ok(h) => crate::doctor::facts::gather_on(Ok(h), false, plan.as_ref()),
        Err(ref e) => {
            crate::doctor::facts::gather_on(Err(format!("{uri}: {e}")), false, plan.as_ref())
        }
    };
    let checks = crate::doctor::checks(&facts, plan.as_ref());
    tar.add(
        "doctor.json",
        r.redact(&serde_json::to_string_pretty(&crate::doctor::Report::new(
            Some(cluster.name().to_string()),
            checks.clone(),
        ))?)
        .as_bytes(),
    )?;

    // The bootstrap, while it exists.
    if let (Some(p), true, Ok(host)) = (&plan, opts.bootstrap, &opts.host) {
        match bootstrap_bundle(host, cluster, p) {
            Ok(Some((bundle, log))) => {
                tar.add("bootstrap-gather/gather.log", r.redact(&log).as_bytes())?;
                // Unpacked and redacted entry by entry; what cannot be, left out.
                match bundle::redact_bundle(&bundle, &r) {
                    Ok(b) => {
                        for (path, bytes) in &b.entries {
                            tar.add(&format!("bootstrap-gather/{path}"), bytes)?;
                        }
                        let mut text = String::new();
                        for l in &b.left_out {
                            text.push_str(l);
                            text.push('\n');
                        }
                        tar.add("bootstrap-gather/LEFT-OUT.txt", r.redact(&text).as_bytes())?;
                    }
                    Err(e) => missing.push(format!(
                        "the installer's log bundle {} (left out): {e:#}",
                        bundle.display()
                    )),
                }
            }
            Ok(None) => {}
            Err(e) => missing.push(format!("openshift-install gather bootstrap: {e:#}")),
        }
    }

    // Pending CSRs, when the API answers.
    let pending = match (&plan, cluster.assets().kubeconfig()) {
        (Some(p), kc) if kc.is_file() => {
            let nodes = crate::kube::csr::NodeIdentity::from_plan(p);
            match crate::kube::approve::pending_blocking(&kc, &nodes, Duration::from_secs(15)) {
                Ok(n) => Some(n),
                Err(e) => {
                    missing.push(format!("pending CSRs: {e:#}"));
                    None
                }
            }
        }
        _ => None,
    };

    let hints = hints::hints(&hints::Evidence {
        installer_log: &installer_log,
        node_logs: node_logs
            .iter()
            .map(|(n, t)| (n.clone(), t.as_str()))
            .collect(),
        doctor: &checks,
        pending_csrs: pending,
    });
    let mut summary_text = String::new();
    for h in &hints {
        summary_text.push_str(&format!("[{}] {}\n  {}\n", h.id, h.symptom, h.hint));
    }
    for m in &missing {
        summary_text.push_str(&format!("not collected: {m}\n"));
    }
    tar.add("SUMMARY.txt", r.redact(&summary_text).as_bytes())?;
    let Tar {
        builder,
        files,
        prefix: _prefix,
        mtime: _,
    } = tar;
    builder
        .into_inner()
        .context("finishing the tarball")?
        .finish()
        .context("compressing the tarball")?
        .flush()?;
    file.commit()
        .with_context(|| format!("writing {}", opts.out.display()))?;
    Ok(Summary {
        tarball: opts.out.to_path_buf(),
        files,
        missing,
        hints,
    })
}

/// HAProxy's `show stat` over the cluster's stats socket (HAProxy management
/// guide, "show stat"): CSV, one row per frontend, backend and server.
fn haproxy_stats(sock: &Path) -> Option<String> {
    use std::io::Read;
    let mut s = std::os::unix::net::UnixStream::connect(sock).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"show stat\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The last lines of a systemd unit's journal.
fn journal(unit: &str) -> std::result::Result<String, String> {
    let out = std::process::Command::new("journalctl")
        .args(["-u", unit, "--no-pager", "-n", "5000", "-o", "short-iso"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("journalctl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "journalctl -u {unit}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `openshift-install gather bootstrap --dir <assets> --bootstrap <ip> --master
/// <ip>…` (openshift/installer docs/user/troubleshootingbootstrap.md) while the
/// bootstrap domain runs; the bundle it wrote, and its output. `None` when there
/// is no bootstrap to ask (removed, or not running) or no installer yet.
fn bootstrap_bundle(
    host: &Host,
    cluster: &ClusterDir,
    plan: &Plan,
) -> Result<Option<(PathBuf, String)>> {
    let Some(boot) = plan.nodes.iter().find(|n| n.role == Role::Bootstrap) else {
        return Ok(None);
    };
    let running = host
        .domain(&boot.name)?
        .is_some_and(|d| d.is_active().unwrap_or(false));
    if !running {
        return Ok(None);
    }
    let installer = crate::install::state::read(cluster)?
        .and_then(|s| s.facts.openshift_install.clone())
        .filter(|p| p.is_file());
    let Some(installer) = installer else {
        return Ok(None);
    };
    let dir = cluster.assets().path().to_path_buf();
    let before: Vec<PathBuf> = bundles(&dir);
    let mut cmd = std::process::Command::new(&installer);
    cmd.arg("gather")
        .arg("bootstrap")
        .arg("--dir")
        .arg(&dir)
        .arg("--bootstrap")
        .arg(boot.ip.to_string());
    for m in plan.nodes.iter().filter(|n| n.role == Role::Ctlplane) {
        cmd.arg("--master").arg(m.ip.to_string());
    }
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {}", installer.display()))?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let new = bundles(&dir).into_iter().find(|b| !before.contains(b));
    match new {
        Some(b) => Ok(Some((b, log))),
        None => anyhow::bail!(
            "it wrote no log bundle (exit {}): {}",
            out.status,
            log.lines().last().unwrap_or("")
        ),
    }
}

fn bundles(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("log-bundle-") && n.ends_with(".tar.gz"))
        })
        .collect()
}
