//! The lab's Redfish BMC in serve (method ipi): one per cluster with a `bmc` in
//! its plan, on the plan's BMC address, over the cluster's own domains (libvirt)
//! or VMs (KubeVirt), with the lab CA and the lab password; what a BMC is and
//! does is `crate::redfish`, assembled by `redfish::bmc::build`.

use std::net::SocketAddr;

use anyhow::{anyhow, Result};

use super::Daemon;
use crate::plan::Plan;
use crate::redfish::source::ImageSources;
use crate::state::ClusterDir;

/// Where a cluster's lab BMC fetches images from: the machine network, both
/// families of a dual-stack lab (where Ironic serves them), and `allow`; in a
/// rehearsal also loopback over https, verified against the cluster's stand-in Ironic CA (the stand-in serves
/// them on 127.0.0.1, from `<assets>/.ironic`). Pure.
fn image_sources(plan: &Plan, files: &ClusterDir, allow: Vec<ipnet::IpNet>) -> ImageSources {
    let standin_ca = plan.rehearsal.then(|| {
        let state = crate::rehearse::ironic::state_dir(files.assets().path());
        crate::rehearse::ironic::ca_path(&state)
    });
    ImageSources::within(plan.network.subnets(), allow).with_standin_ca(standin_ca)
}

impl Daemon {
    /// Serve the lab's Redfish BMC for an ipi cluster: its own domains only, on the
    /// plan's BMC address (the gateway), TLS with the lab CA, the lab password.
    /// Retried every scan while the address is not on the host yet.
    pub(super) async fn ensure_bmc(&mut self, name: &str, files: &ClusterDir) {
        let Some(served) = self.clusters.get_mut(name) else {
            return;
        };
        let Some(b) = served.plan.bmc.clone() else {
            if let Some(s) = served.bmc.take() {
                s.shutdown().await;
            }
            return;
        };
        let want = SocketAddr::from((b.address, b.port));
        if served.bmc.as_ref().is_some_and(|s| s.local_addr() == want) {
            return;
        }
        if let Some(s) = served.bmc.take() {
            s.shutdown().await;
        }
        let plan = served.plan.clone();
        let dir = files.bmc_dir();
        let allow = self.opts.allow_image_source.clone();
        let media_ca = self.opts.media_ca.clone();
        let cluster_dir = files.clone();
        let setup = tokio::task::spawn_blocking(move || -> Result<_> {
            use crate::redfish::bmc::{self, Credentials, Systems};
            // The password `create install-config` put into install-config.yaml.
            let password = cluster_dir.lab_bmc_password(None)?;
            bmc::build(bmc::Config {
                listen: want,
                dir,
                systems: match &plan.kubevirt {
                    Some(k) => {
                        Systems::Kubevirt(crate::redfish::machine_kubevirt::KubevirtConfig {
                            kubeconfig: k.kubeconfig.clone(),
                            context: k.context.clone(),
                            namespace: k.namespace.clone(),
                            cluster: plan.cluster.clone(),
                        })
                    }
                    None => Systems::Libvirt {
                        uri: plan.libvirt.uri.clone(),
                        scope: crate::redfish::machine_libvirt::Scope::Cluster(
                            plan.cluster.clone(),
                        ),
                        pool: plan.libvirt.pool.clone(),
                        max_image_bytes: bmc::DEFAULT_MAX_IMAGE_BYTES,
                    },
                },
                credentials: Some(Credentials {
                    user: b.username,
                    password,
                }),
                tls: Some(Vec::new()),
                session_timeout: bmc::DEFAULT_SESSION_TIMEOUT,
                identity: format!("bmc/{}", plan.cluster),
                image_sources: image_sources(&plan, &cluster_dir, allow),
                media_ca,
            })
        })
        .await
        .map_err(|e| anyhow!("bmc setup task: {e}"))
        .and_then(|r| r);
        let started = match setup {
            Ok(bmc) => bmc.start().await,
            Err(e) => Err(e),
        };
        match started {
            Ok(server) => {
                tracing::info!(cluster = %name, addr = %want, "redfish bmc serving the lab's domains");
                served.bmc = Some(server);
                served.bmc_error = None;
            }
            Err(e) => {
                let msg = format!("{e:#}");
                if served.bmc_error.as_deref() != Some(msg.as_str()) {
                    tracing::warn!(cluster = %name, error = %msg, "bmc not served yet (retrying)");
                }
                served.bmc_error = Some(msg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(rehearsal: bool) -> Plan {
        let text = "cluster: lab1\ndomain: example.com\ndistribution: okd\nrehearsal: true\n\
             ssh_keys: ['ssh-ed25519 AAAA k']\nmethod: ipi\n";
        let mut p = crate::plan::derive(
            &crate::spec::from_str(text, "t.yaml", &crate::spec::Env::default())
                .unwrap()
                .spec,
        );
        p.rehearsal = rehearsal;
        p
    }

    #[test]
    fn a_rehearsals_bmc_trusts_its_own_clusters_standin_ca_on_loopback_only() {
        let state = crate::state::StateDir::resolve(Some(std::path::Path::new("/s")));
        let lab1 = state.cluster("lab1");
        let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let ca = std::path::PathBuf::from("/s/clusters/lab1/assets/.ironic/tls/ca.crt");
        assert_eq!(
            image_sources(&plan(true), &lab1, vec![]).standin_ca_for(lo),
            Some(ca.as_path())
        );
        let machine = plan(true).network.host_ip();
        assert_eq!(
            image_sources(&plan(true), &lab1, vec![]).standin_ca_for(machine),
            None
        );
        assert_eq!(
            image_sources(&plan(false), &lab1, vec![]).standin_ca_for(lo),
            None
        );
        assert_eq!(
            image_sources(&plan(false), &lab1, vec![]),
            ImageSources::within(plan(false).network.subnets(), vec![])
        );
    }
}
