//! What `destroy cluster` of a rehearsal left behind: read what the cluster
//! owns before the destroy ([`before`]), look for each piece after it
//! ([`left`]): its domains, volumes and network on libvirt, serve's HAProxy,
//! host DNS and firewall rules for it, its NFS server, its host chrony drop-in,
//! its state directory (the NFS data is kept unless asked). The destroy prints
//! the outcome and fails when something is left.

use std::path::PathBuf;

use anyhow::Result;

use crate::host::dns::{self, HostDns};
use crate::host::firewall::{Firewall, Openings, System};
use crate::libvirt::Host;
use crate::state::{ClusterName, StateDir};

/// What a rehearsal cluster owns, read before its destroy.
#[derive(Debug, Clone)]
pub struct Owned {
    pub cluster: String,
    /// (pool, volume) of every node's disks and Ignition.
    pub volumes: Vec<(String, String)>,
    pub network: String,
    pub openings: Openings,
    pub host_dns: Option<dns::Record>,
    pub haproxy_cfg: PathBuf,
    /// The NFS server's configuration (its `-f` argument) when storage is nfs.
    pub nfs_cfg: PathBuf,
    pub state_dir: PathBuf,
}

/// What `name` owns, when it is a rehearsal on libvirt with a recorded plan.
pub fn before(state: &StateDir, name: &ClusterName) -> Option<Owned> {
    let files = state.cluster(name);
    let plan = files.read_plan().ok()?;
    if !plan.rehearsal || plan.kubevirt.is_some() {
        return None;
    }
    let pool = plan.libvirt.pool.clone();
    Some(Owned {
        cluster: plan.cluster.clone(),
        volumes: plan
            .nodes
            .iter()
            .flat_map(|n| n.volumes())
            .map(|v| (pool.clone(), v.clone()))
            .collect(),
        network: plan.network.name.clone(),
        openings: crate::serve::read_firewall_record(&files)
            .map(|r| r.openings)
            .unwrap_or_else(|| Openings::from_plan(&plan, None)),
        host_dns: crate::serve::read_dns_record(&files),
        haproxy_cfg: files.haproxy_cfg(),
        nfs_cfg: crate::host::nfs::ServerFiles::of(&files).config(),
        state_dir: files.path().to_path_buf(),
    })
}

/// Every piece of `o` still there after the destroy; empty when it left nothing.
pub fn left(host: &Host, state: &StateDir, o: &Owned) -> Result<Vec<String>> {
    let mut left = Vec::new();
    for (d, owner) in host.owned_domains()? {
        if owner.cluster == o.cluster {
            left.push(format!("domain {}", d.name()?));
        }
    }
    for (pool, vol) in &o.volumes {
        if let Some(p) = host.pool(pool)? {
            if Host::volume(&p, vol)?.is_some() {
                left.push(format!("volume {pool}/{vol}"));
            }
        }
    }
    if host.network(&o.network)?.is_some() {
        left.push(format!("network {}", o.network));
    }
    if running_with(&o.haproxy_cfg) {
        left.push(format!("HAProxy of {}", o.haproxy_cfg.display()));
    }
    if running_with(&o.nfs_cfg) {
        left.push(format!("NFS server of {}", o.nfs_cfg.display()));
    }
    if let Some(r) = &o.host_dns {
        if HostDns::system(state.host_dns_lock()).is_configured(r) {
            left.push("host DNS entries".into());
        }
    }
    let (_, rules) = (Firewall { runner: &System }).in_place(&o.openings)?;
    for (p, _) in rules.iter().filter(|(_, ok)| *ok) {
        left.push(format!(
            "firewall rule for {} {}:{}",
            p.service, p.address, p.port
        ));
    }
    let chrony = crate::host::chrony::system().path(&o.cluster);
    if std::fs::read_to_string(&chrony).is_ok_and(|t| crate::host::chrony::owned(&t, &o.cluster)) {
        left.push(format!("host chrony drop-in {}", chrony.display()));
    }
    if o.state_dir.exists() {
        left.push(format!("state {}", o.state_dir.display()));
    }
    Ok(left)
}

/// Whether a process runs on `cfg` (its `-f` argument: serve's HAProxy and
/// NFS-Ganesha), from /proc.
fn running_with(cfg: &std::path::Path) -> bool {
    let want = cfg.as_os_str().as_encoded_bytes();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        std::fs::read(p.path().join("cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == want))
    })
}

#[cfg(test)]
mod tests {
    use super::running_with;

    #[test]
    fn a_process_is_found_by_its_config_argument_only_while_it_runs() {
        let cfg =
            std::env::temp_dir().join(format!("leftover-{}/ganesha.conf", std::process::id()));
        assert!(!running_with(&cfg));
        // `; :` keeps the shell from exec'ing sleep, so the argument stays in its cmdline.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; :"])
            .arg(&cfg)
            .spawn()
            .unwrap();
        // spawn returns after fork: until the child has exec'd sh, its cmdline
        // is still this test's, so look again for a while (a busy host is slow).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut seen = running_with(&cfg);
        while !seen && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            seen = running_with(&cfg);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            seen,
            "the process with {} in its command line",
            cfg.display()
        );
        assert!(!running_with(&cfg));
        assert!(!running_with(&cfg.with_file_name("other.conf")));
    }
}
