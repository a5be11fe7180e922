//! `host_ntp: true`: Debian's chrony on the host serves time to a cluster's
//! subnet, and the nodes take it from the network's gateway (render::chrony).
//!
//! Debian's `/etc/chrony/chrony.conf` reads every `*.conf` of
//! `/etc/chrony/conf.d` (`confdir`); shiftlab writes one file per cluster there,
//! `shiftlab-<cluster>.conf`, holding `allow <subnet>` (chrony serves only the
//! clients an `allow` names: chrony.conf(5), `allow`). chrony reads `allow` at
//! start only (`chronyc reload sources` rereads sources, not access rules), so
//! chrony is restarted after the file is written or removed. The host firewall
//! opens UDP 123 at the gateway for the subnet (host::firewall). serve applies
//! it while it serves the cluster; forgetting the cluster (destroy) removes it.
//!
//! A file of that name that does not start with shiftlab's line for the
//! cluster is not shiftlab's: it is neither overwritten nor removed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ipnet::IpNet;

use super::firewall::Runner;

/// Where Debian's chrony reads drop-ins.
pub const CONF_DIR: &str = "/etc/chrony/conf.d";

/// The first line of a cluster's drop-in: what makes it shiftlab's.
fn header(cluster: &str) -> String {
    format!("# shiftlab {cluster}: chrony serves the cluster's nodes; removed by destroy")
}

/// The drop-in's text for `cluster` on `subnet`.
pub fn dropin_text(cluster: &str, subnet: IpNet) -> String {
    format!("{}\nallow {subnet}\n", header(cluster))
}

/// Is `text` the drop-in shiftlab wrote for `cluster`?
pub fn owned(text: &str, cluster: &str) -> bool {
    text.lines().next() == Some(header(cluster).as_str())
}

/// The host's chrony configuration: its drop-in directory and how commands run.
pub struct HostChrony<'a> {
    pub dir: PathBuf,
    pub runner: &'a dyn Runner,
}

impl HostChrony<'_> {
    /// The drop-in's path. `cluster` is a checked cluster name (spec::is_cluster_name):
    /// a file name, never a path.
    pub fn path(&self, cluster: &str) -> PathBuf {
        self.dir.join(format!("shiftlab-{cluster}.conf"))
    }

    /// Write the cluster's drop-in and restart chrony, unless it is there as
    /// wanted. `Ok(true)` when something changed.
    pub fn apply(&self, cluster: &str, subnet: IpNet) -> Result<bool> {
        if !self.dir.is_dir() {
            bail!(
                "host_ntp: {} does not exist: chrony is not installed (sudo apt-get install chrony)",
                self.dir.display()
            );
        }
        let path = self.path(cluster);
        let want = dropin_text(cluster, subnet);
        let before = std::fs::read_to_string(&path).ok();
        match &before {
            Some(have) if *have == want => return Ok(false),
            Some(have) if !owned(have, cluster) => bail!(
                "host_ntp: {} exists and is not shiftlab's; it is left alone (remove or rename it)",
                path.display()
            ),
            _ => {}
        }
        crate::files::write_atomic(&path, want.as_bytes())?;
        if let Err(e) = self.restart() {
            // Put back what was there, so that the next attempt restarts again.
            let _ = match &before {
                Some(old) => crate::files::write_atomic(&path, old.as_bytes()),
                None => std::fs::remove_file(&path).map_err(Into::into),
            };
            return Err(e);
        }
        Ok(true)
    }

    /// Remove the cluster's drop-in, if it is shiftlab's, and restart chrony.
    /// `Ok(false)` when there was none of shiftlab's.
    pub fn remove(&self, cluster: &str) -> Result<bool> {
        let path = self.path(cluster);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        if !owned(&text, cluster) {
            tracing::warn!(path = %path.display(), "not shiftlab's chrony drop-in: left alone");
            return Ok(false);
        }
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        self.restart()?;
        Ok(true)
    }

    fn restart(&self) -> Result<()> {
        let argv = ["systemctl", "restart", "chrony"].map(String::from);
        match self.runner.run(&argv)? {
            Some(o) if o.ok() => Ok(()),
            Some(o) => bail!("systemctl restart chrony: {}", o.stderr.trim()),
            None => bail!("systemctl restart chrony: systemctl not found"),
        }
    }
}

/// The system's: [`CONF_DIR`], commands run for real.
pub fn system() -> HostChrony<'static> {
    HostChrony {
        dir: Path::new(CONF_DIR).to_path_buf(),
        runner: &super::firewall::System,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::firewall::Output;
    use std::sync::Mutex;

    /// Records the commands; answers as `systemctl` does when it works (or not).
    struct Fake {
        ran: Mutex<Vec<String>>,
        fails: bool,
    }

    impl Runner for Fake {
        fn run(&self, argv: &[String]) -> Result<Option<Output>> {
            self.ran.lock().unwrap().push(argv.join(" "));
            Ok(Some(Output {
                code: Some(if self.fails { 5 } else { 0 }),
                stdout: String::new(),
                stderr: if self.fails {
                    "Failed to restart chrony.service: Unit chrony.service not found.".into()
                } else {
                    String::new()
                },
            }))
        }
    }

    fn fake(fails: bool) -> Fake {
        Fake {
            ran: Mutex::new(Vec::new()),
            fails,
        }
    }

    fn subnet() -> IpNet {
        "192.168.126.0/24".parse().unwrap()
    }

    #[test]
    fn the_dropin_allows_the_subnet_only() {
        let t = dropin_text("lab1", subnet());
        assert_eq!(
            t,
            "# shiftlab lab1: chrony serves the cluster's nodes; removed by destroy\nallow 192.168.126.0/24\n"
        );
        assert!(owned(&t, "lab1"));
        assert!(!owned(&t, "lab2"));
        assert!(!owned("allow all\n", "lab1"));
    }

    #[test]
    fn apply_writes_once_and_restarts_remove_takes_it_back() {
        let d = tempfile::tempdir().unwrap();
        let f = fake(false);
        let c = HostChrony {
            dir: d.path().to_path_buf(),
            runner: &f,
        };
        assert!(c.apply("lab1", subnet()).unwrap());
        let path = d.path().join("shiftlab-lab1.conf");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            dropin_text("lab1", subnet())
        );
        assert!(!c.apply("lab1", subnet()).unwrap(), "unchanged: no restart");
        assert_eq!(*f.ran.lock().unwrap(), ["systemctl restart chrony"]);
        // Another cluster's file and the user's are not touched.
        std::fs::write(d.path().join("local.conf"), "allow 10.0.0.0/8\n").unwrap();
        assert!(c
            .apply("lab2", "192.168.127.0/24".parse().unwrap())
            .unwrap());
        assert!(c.remove("lab1").unwrap());
        assert!(!path.exists());
        assert!(d.path().join("shiftlab-lab2.conf").exists());
        assert!(d.path().join("local.conf").exists());
        assert!(!c.remove("lab1").unwrap(), "gone already");
        assert_eq!(f.ran.lock().unwrap().len(), 3);
    }

    #[test]
    fn a_file_not_shiftlabs_is_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let f = fake(false);
        let c = HostChrony {
            dir: d.path().to_path_buf(),
            runner: &f,
        };
        let path = d.path().join("shiftlab-lab1.conf");
        std::fs::write(&path, "allow all\n").unwrap();
        let e = c.apply("lab1", subnet()).unwrap_err().to_string();
        assert!(e.contains("is not shiftlab's"), "{e}");
        assert!(!c.remove("lab1").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "allow all\n");
        assert!(f.ran.lock().unwrap().is_empty());
    }

    #[test]
    fn without_chrony_it_says_what_to_install() {
        let d = tempfile::tempdir().unwrap();
        let f = fake(true);
        let missing = HostChrony {
            dir: d.path().join("conf.d"),
            runner: &f,
        };
        let e = missing.apply("lab1", subnet()).unwrap_err().to_string();
        assert!(e.contains("apt-get install chrony"), "{e}");
        let c = HostChrony {
            dir: d.path().to_path_buf(),
            runner: &f,
        };
        let e = format!("{:#}", c.apply("lab1", subnet()).unwrap_err());
        assert!(e.contains("Unit chrony.service not found"), "{e}");
        // Nothing is left behind to make the next attempt skip the restart.
        assert!(!c.path("lab1").exists());
    }
}
