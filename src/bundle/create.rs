//! `shiftlab bundle create`: an installed cluster stopped as `stop` stops it,
//! then written out as a bundle: each node's disk flattened into one
//! compressed, self-contained qcow2 (`qemu-img convert -c -O qcow2`: the
//! overlay and its base read as one image, unallocated and zero clusters
//! left out), each node's Ignition, the domain and network XML as they were,
//! the cluster's state (plan, install state, assets with auth/, LB state, BMC
//! state), and `bundle.json` last. The cluster is left stopped, whole
//! (`shiftlab start` brings it back).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use sha2::Sha256;

use super::manifest::{self, FileEntry, Manifest};
use super::OWNER_MARK;
use crate::cluster::power;
use crate::plan::DiskKind;
use crate::progress::Sink;
use crate::state::{ClusterDir, ClusterName, StateDir};

/// What `bundle create` is asked.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    /// The bundle's directory; `<state>/bundles/<name>` when `None`.
    pub out: Option<PathBuf>,
    /// Bundle within the first certificate rotation anyway.
    pub force: bool,
    /// Each group's shutdown timeout (as `stop --timeout`).
    pub timeout: Duration,
}

/// What `bundle create` did.
#[derive(Debug, Serialize)]
pub struct Created {
    pub path: PathBuf,
    pub manifest: Manifest,
}

impl Created {
    pub fn table(&self) -> String {
        let bytes: u64 = self.manifest.files.iter().map(|f| f.bytes).sum();
        format!(
            "bundled {} ({} nodes, {} MiB) in {}\n{} is stopped: shiftlab start {} brings it back\n",
            self.manifest.cluster,
            self.manifest.nodes.len(),
            bytes.div_ceil(1 << 20),
            self.path.display(),
            self.manifest.cluster,
            self.manifest.cluster,
        )
    }
}

/// The cluster state a bundle carries, as paths in the cluster's directory
/// (files or directories; the missing ones are passed over). Not the libvirt
/// ledger, serve's records or logs: those are the host's, made again there.
fn state_paths(dir: &ClusterDir) -> Vec<PathBuf> {
    vec![
        dir.plan(),
        dir.install_state(),
        dir.install_plan(),
        dir.cluster_file(),
        dir.users(),
        dir.install_config_backup(),
        dir.agent_config_backup(),
        dir.bmc_password(),
        dir.bmc_dir(),
        dir.lb_state(),
        dir.known_hosts(),
        // IPI: the BareMetalHosts the stop set offline, for start to set online.
        dir.power(),
        dir.assets().path().to_path_buf(),
    ]
}

/// `bundle create NAME`.
pub fn create(
    state: &StateDir,
    name: &ClusterName,
    connect: Option<&str>,
    req: &CreateRequest,
    progress: &Sink,
) -> Result<Created> {
    let out = req.out.clone().unwrap_or_else(|| state.bundle(name));
    if out.join(manifest::MANIFEST).exists() {
        bail!(
            "{} holds a bundle already: shiftlab bundle delete {} first, or give another --out",
            out.display(),
            out.display()
        );
    }
    // An install under way (its certificates made, not complete) has nothing
    // to bundle yet; a lab built by `create infra` alone made none.
    let dir = crate::cluster::known(state, name.as_str(), "")?;
    let install = crate::install::state::read(&dir)?;
    if let Some(why) = unfinished(install.as_ref()) {
        bail!("not bundling {name}: {why}");
    }
    // Stopped the way `stop` stops it: its guard (the first certificate
    // rotation), its order, its record.
    let stopped = power::stop_cluster(
        state,
        name.as_str(),
        connect,
        req.force,
        req.timeout,
        progress,
    )
    .with_context(|| format!("stopping {name} to bundle it"))?;
    progress.say(format_args!(
        "stopped {name}: {}",
        stopped
            .nodes
            .iter()
            .map(|n| format!("{} {}", n.node, n.action))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let opened = crate::cluster::Recorded::locked(state, name.as_str(), "")?.connect(
        connect,
        "bundle create",
        "a KubeVirt cluster's disks are PVCs: snapshot them with the hosting cluster's tools",
    )?;
    if !opened.host.is_local() {
        bail!(
            "bundle create reads the disks as files: run it on the libvirt host itself, not over {}",
            opened.host.uri
        );
    }
    prepare_dir(&out, name)?;
    let plan = &opened.plan;
    let host = &opened.host;
    let pool = host
        .pool(&plan.libvirt.pool)?
        .with_context(|| format!("pool {} is gone", plan.libvirt.pool))?;
    pool.refresh(0).context("refreshing the pool")?;
    let mut bundled = Vec::new();
    for node in &plan.nodes {
        // A node the install removed (the bootstrap) is not part of the lab.
        let Some(domain) = host.domain(&node.name)? else {
            continue;
        };
        if domain.is_active()? {
            bail!(
                "{} still runs after the stop: not bundling a running disk",
                node.name
            );
        }
        let root = node
            .disks
            .iter()
            .find(|d| d.kind == DiskKind::Root)
            .with_context(|| format!("{}: no root disk in the plan", node.name))?;
        let vol = crate::libvirt::Host::volume(&pool, &root.volume)?
            .with_context(|| format!("{}: its disk {} is gone", node.name, root.volume))?;
        let src = PathBuf::from(vol.path()?);
        let disk = out.join(manifest::disk_path(&node.name));
        progress.say(format_args!("flattening {}'s disk", node.name));
        flatten(&src, &disk).with_context(|| format!("bundling {}'s disk", node.name))?;
        if let Some(ign) = &node.ignition_volume {
            if let Some(v) = crate::libvirt::Host::volume(&pool, ign)? {
                let bytes = host
                    .download(&v)
                    .with_context(|| format!("reading {ign}"))?;
                write_private(&out.join(format!("ignition/{}.ign", node.name)), &bytes)?;
            }
        }
        let xml = domain.xml_desc(0)?;
        write_private(
            &out.join(format!("libvirt/domain-{}.xml", node.name)),
            xml.as_bytes(),
        )?;
        bundled.push(node.name.clone());
    }
    if bundled.is_empty() {
        bail!("{name} has no node on {}: nothing to bundle", host.uri);
    }
    if let Some(net) = host.network(&plan.network.name)? {
        write_private(
            &out.join("libvirt/network.xml"),
            net.xml_desc(0)?.as_bytes(),
        )?;
    }
    for p in state_paths(&opened.dir) {
        let rel = p
            .strip_prefix(opened.dir.path())
            .context("a state path outside the cluster's directory")?;
        copy_tree(&p, &out.join("state").join(rel))?;
    }
    let certs = certificates(&opened.dir.assets().path().join("auth"))
        .into_iter()
        .chain(certificates(opened.dir.assets().path()))
        .collect::<Vec<_>>();
    let files = hash_tree(&out)?;
    let m = Manifest {
        format: manifest::FORMAT,
        cluster: plan.cluster.clone(),
        domain: plan.domain.clone(),
        method: serde_json::to_value(plan.method)?
            .as_str()
            .unwrap_or_default()
            .to_string(),
        release_version: install
            .as_ref()
            .and_then(|s| s.facts.release_version.clone()),
        rehearsal: plan.rehearsal,
        created_at: power::now(),
        installed_at: power::certificates_made(install.as_ref()),
        certificates_expire: manifest::earliest_not_after(certs.iter().map(Vec::as_slice)),
        nodes: manifest::identities(plan, &bundled),
        files,
    };
    // Last: until it is there, the directory is no bundle.
    crate::files::write_json(&out.join(manifest::MANIFEST), &m)?;
    Ok(Created {
        path: out,
        manifest: m,
    })
}

/// Why an install is not one to bundle: its certificates were made (the
/// ignition target) and install-complete is not done. Pure.
pub fn unfinished(install: Option<&crate::install::state::InstallState>) -> Option<String> {
    let s = install?;
    power::certificates_made(Some(s))?;
    let done = s
        .targets
        .get(crate::install::target::Target::InstallComplete.as_str())
        .is_some_and(|t| t.status == crate::install::state::Status::Done);
    (!done).then(|| {
        "its install has not finished (install-complete is not done): bundle an installed cluster, \
or a lab built by create infra alone"
            .to_string()
    })
}

/// The bundle's directory made ready: a leftover of an interrupted create
/// (shiftlab's mark, no manifest) is removed and made again; a directory that
/// is not shiftlab's is refused.
fn prepare_dir(out: &Path, name: &ClusterName) -> Result<()> {
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.is_dir() => {
            let empty = std::fs::read_dir(out)?.next().is_none();
            if !empty {
                if !out.join(OWNER_MARK).is_file() {
                    bail!(
                        "{} is not empty and not a bundle shiftlab was writing: give another --out",
                        out.display()
                    );
                }
                tracing::info!(path = %out.display(), "removing an unfinished bundle");
                std::fs::remove_dir_all(out)
                    .with_context(|| format!("removing the unfinished bundle {}", out.display()))?;
            }
        }
        Ok(_) => bail!("{} is not a directory", out.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", out.display())),
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o700))?;
    crate::files::write_atomic(&out.join(OWNER_MARK), format!("{name}\n").as_bytes())
}

/// One self-contained compressed qcow2 of `src` and its backing chain.
fn flatten(src: &Path, out: &Path) -> Result<()> {
    let part = out.with_extension("qcow2.part");
    if let Some(d) = out.parent() {
        std::fs::create_dir_all(d)?;
    }
    let o = Command::new("qemu-img")
        .args(["convert", "-c", "-O", "qcow2"])
        .arg(src)
        .arg(&part)
        .output()
        .context("running qemu-img convert (Debian package qemu-utils)")?;
    if !o.status.success() {
        bail!(
            "qemu-img convert {}: {}",
            src.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    // A node's disk holds its secrets (kubeconfigs, etcd): 0600 as the rest.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&part, out).with_context(|| format!("naming {}", out.display()))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    crate::files::write_private(path, bytes)
}

/// Copy a file or a directory's regular files (links are passed over), each
/// 0600: the state holds secrets (auth/, the BMC password, the pull secret).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let meta = match std::fs::symlink_metadata(from) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", from.display())),
    };
    if meta.is_dir() {
        for e in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
            let e = e?;
            copy_tree(&e.path(), &to.join(e.file_name()))?;
        }
    } else if meta.is_file() {
        let bytes = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
        write_private(to, &bytes)?;
    }
    Ok(())
}

/// The files directly in `dir` (certificates, kubeconfigs), read.
fn certificates(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| e.metadata().is_ok_and(|m| m.len() < 1 << 20))
        .filter_map(|e| std::fs::read(e.path()).ok())
        .collect()
}

/// Every regular file under `root` but the manifest and the mark: its path
/// relative to `root`, sha256 and size, sorted by path.
pub fn hash_tree(root: &Path) -> Result<Vec<FileEntry>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<FileEntry>) -> Result<()> {
        for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let e = e?;
            let p = e.path();
            let t = e.file_type()?;
            if t.is_dir() {
                walk(root, &p, out)?;
            } else if t.is_file() {
                let rel = p.strip_prefix(root)?.to_string_lossy().into_owned();
                if rel == manifest::MANIFEST || rel == OWNER_MARK {
                    continue;
                }
                out.push(FileEntry {
                    sha256: crate::files::hash_file::<Sha256>(&p)?,
                    bytes: e.metadata()?.len(),
                    path: rel,
                });
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_under_way_is_not_bundled_and_a_lab_or_a_finished_one_is() {
        let state = |targets: &str| -> crate::install::state::InstallState {
            serde_json::from_str(&format!(
                r#"{{"format":1,"cluster":"lab1","targets":{{{targets}}}}}"#
            ))
            .unwrap()
        };
        let done = |t: &str| format!(r#""{t}":{{"status":"done","at":1}}"#);
        assert_eq!(unfinished(None), None);
        let lab = state(&format!("{},{}", done("release"), done("infra")));
        assert_eq!(unfinished(Some(&lab)), None, "create infra alone");
        let installing = state(&format!("{},{}", done("ignition"), done("infra")));
        let e = unfinished(Some(&installing)).unwrap();
        assert!(e.contains("install-complete is not done"), "{e}");
        let installed = state(&format!(
            "{},{}",
            done("ignition"),
            done("install-complete")
        ));
        assert_eq!(unfinished(Some(&installed)), None);
    }

    #[test]
    fn an_unfinished_bundle_is_started_over_and_a_stranger_directory_refused() {
        let t = tempfile::tempdir().unwrap();
        let name = ClusterName::parse("lab1").unwrap();
        let out = t.path().join("b");
        prepare_dir(&out, &name).unwrap();
        // What a create killed before its manifest leaves.
        std::fs::create_dir_all(out.join("disks")).unwrap();
        std::fs::write(out.join("disks/lab1-ctlplane-0.qcow2.part"), "half").unwrap();
        prepare_dir(&out, &name).unwrap();
        assert!(!out.join("disks").exists(), "the leftover stayed");
        assert_eq!(
            std::fs::read_to_string(out.join(OWNER_MARK)).unwrap(),
            "lab1\n"
        );

        let theirs = t.path().join("theirs");
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::write(theirs.join("notes.txt"), "mine").unwrap();
        let e = prepare_dir(&theirs, &name).unwrap_err().to_string();
        assert!(e.contains("not a bundle shiftlab was writing"), "{e}");
        assert_eq!(
            std::fs::read_to_string(theirs.join("notes.txt")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn every_file_is_hashed_but_the_manifest_and_the_mark() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("state/assets/auth")).unwrap();
        std::fs::write(t.path().join("state/assets/auth/kubeconfig"), "k").unwrap();
        std::fs::write(t.path().join(OWNER_MARK), "lab1\n").unwrap();
        std::fs::write(t.path().join(manifest::MANIFEST), "{}").unwrap();
        let files = hash_tree(t.path()).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path, "state/assets/auth/kubeconfig");
        assert_eq!(
            files[0].sha256,
            "8254c329a92850f6d539dd376f4816ee2764517da5e0235514af433164480d7a"
        );
    }
}
