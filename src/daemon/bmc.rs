//! The lab's Redfish BMC in serve (method ipi): one per cluster with a `bmc` in
//! its plan, on the plan's BMC address, over the cluster's own domains (libvirt)
//! or VMs (KubeVirt), with the lab CA and the lab password; what a BMC is and
//! does is `crate::redfish`, assembled by `redfish::bmc::build`.

use std::net::SocketAddr;

use anyhow::{anyhow, Result};

use super::Daemon;
use crate::state::ClusterDir;

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
                // images come from the cluster's machine network (Ironic's);
                // a rehearsal's stand-in Ironic serves them on loopback, over
                // https from its own CA, which the BMC then verifies
                image_sources: bmc::ImageSources::within(vec![plan.network.cidr.into()], allow)
                    .with_standin_ca(plan.rehearsal.then(|| {
                        let state = crate::rehearse::ironic::state_dir(cluster_dir.assets().path());
                        crate::rehearse::ironic::ca_path(&state)
                    })),
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
