//! `shiftlab status`: one function gathers it, one type holds it, for every
//! backend.

use anyhow::{bail, Result};
use serde::Serialize;

use crate::backend::{self, Place};
use crate::install::state::InstallStatus;
use crate::libvirt::Host;
use crate::plan::render_table_rows;
use crate::serve::ServicesStatus;
use crate::state::{ClusterDir, StateDir};

/// Everything known of a cluster. Its JSON is `shiftlab status -o json`'s.
#[derive(Debug, Serialize)]
pub struct Status {
    /// What the backend holds (network or namespace, nodes) at the top level.
    #[serde(flatten)]
    pub infra: backend::Status,
    /// The host services, known where the cluster's plan is recorded.
    pub services: Option<ServicesStatus>,
    /// The install targets, known once one ran.
    pub install: Option<InstallStatus>,
    /// The installer's own bootstrap VM (bare-metal IPI), while it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub installer_bootstrap: Option<crate::install::ipi::BootstrapVm>,
    /// The veth-linked bridge (bare-metal IPI, `external_bridge: veth`), when made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub veth_bridge: Option<crate::host::veth::VethStatus>,
    /// Certificate expiry, where it can be read.
    pub certificates: Option<Certificates>,
    /// The bundle the cluster was restored from (docs/bundles.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<crate::bundle::restore::Origin>,
    /// The lab's users (`users:`, docs/users.md) as the install recorded them:
    /// where each password is, never a password.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<crate::install::users::Recorded>,
    /// The lab's storage (`storage:`): StorageClass, the host's export.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<super::storage::StorageStatus>,
}

/// What `status` can tell of the cluster's certificates without the API.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Certificates {
    /// When the install's certificates were made (the ignition target), seconds
    /// since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub made_at: Option<u64>,
    /// By when the cluster must have run to rotate them (made + 24 h): stopping it
    /// before leaves expired certificates (docs/stop-start.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_rotation_by: Option<u64>,
    /// The admin kubeconfig's client certificate's notAfter, seconds since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_client_not_after: Option<i64>,
}

/// notAfter of the first certificate of a kubeconfig's first user
/// (`client-certificate-data`, base64 PEM).
pub fn kubeconfig_client_not_after(kubeconfig: &str) -> Option<i64> {
    use base64::Engine;
    let v: yaml_serde::Value = yaml_serde::from_str(kubeconfig).ok()?;
    let data = v
        .get("users")?
        .as_sequence()?
        .first()?
        .get("user")?
        .get("client-certificate-data")?
        .as_str()?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let cert = pem.parse_x509().ok()?;
    Some(cert.validity().not_after.timestamp())
}

fn certificates(cluster: &ClusterDir) -> Result<Option<Certificates>> {
    let made = super::power::certificates_made(crate::install::state::read(cluster)?.as_ref());
    let admin = std::fs::read_to_string(cluster.assets().kubeconfig())
        .ok()
        .and_then(|t| kubeconfig_client_not_after(&t));
    if made.is_none() && admin.is_none() {
        return Ok(None);
    }
    Ok(Some(Certificates {
        made_at: made,
        first_rotation_by: made.map(|m| m + super::power::FIRST_ROTATION.as_secs()),
        admin_client_not_after: admin,
    }))
}

/// Gather the status of `cluster` from the backend its record names
/// (`connect`: the libvirt URI over the recorded one). Changes nothing.
pub fn status(state: &StateDir, cluster: &ClusterDir, connect: Option<&str>) -> Result<Status> {
    let backend = backend::for_cluster(cluster, connect)?;
    let infra = match backend.status(cluster.name())? {
        Some(s) => s,
        // Planned, or installing before `infra` made anything: its services
        // and targets without the backend's objects.
        None if cluster.has_plan()?
            || cluster.install_state().is_file()
            || cluster.install_plan().is_file() =>
        {
            backend.empty_status(cluster.name())
        }
        None => bail!(
            "no shiftlab cluster named {} on {}",
            cluster.name(),
            backend.location()
        ),
    };
    let services = if cluster.has_plan()? {
        Some(crate::serve::services_status(state, cluster.name())?)
    } else {
        None
    };
    // The storage of the plan serve works from, else the one the install
    // recorded (an install under way before infra).
    let plan = if cluster.has_plan()? {
        Some(cluster.read_plan())
    } else if cluster.install_plan().is_file() {
        Some(crate::state::read_plan_file(&cluster.install_plan()))
    } else {
        None
    };
    // Status shows what it can: storage it cannot read is a warning.
    let storage = plan
        .map(|p| p.and_then(|p| super::storage::status(state, cluster, &p)))
        .transpose()
        .unwrap_or_else(|e| {
            tracing::warn!("the lab's storage: {e:#}");
            None
        })
        .flatten();
    // The installer's bootstrap VM (IPI) is a libvirt domain on the cluster's
    // host, whose URI is the libvirt backend's location.
    let installer_bootstrap = match infra.place {
        Place::Libvirt { .. } => Host::open(&backend.location())
            .and_then(|host| crate::install::ipi::bootstrap_vm(&host, cluster))
            // Status shows what it can: a metadata.json it cannot read is a warning.
            .unwrap_or_else(|e| {
                tracing::warn!("the installer's bootstrap VM: {e:#}");
                None
            }),
        Place::Kubevirt { .. } => None,
    };
    Ok(Status {
        infra,
        services,
        install: crate::install::status(cluster)?,
        installer_bootstrap,
        veth_bridge: crate::host::veth::status(cluster.name(), &cluster.host_links())
            .unwrap_or_else(|e| {
                tracing::warn!("the veth-linked bridge: {e:#}");
                None
            }),
        certificates: certificates(cluster)?,
        restored_from: crate::bundle::restore::origin(cluster)?,
        users: crate::install::users::read_record(&cluster.users())?,
        storage,
    })
}

impl Status {
    /// The human form.
    pub fn table(&self) -> String {
        let st = &self.infra;
        let dash = || "-".to_string();
        let mut s = match &st.place {
            Place::Libvirt {
                network,
                network_active,
            } => {
                let mut s = format!(
                    "cluster {}: network {} ({})\n\n",
                    st.cluster,
                    network.clone().unwrap_or_else(dash),
                    if *network_active {
                        "active"
                    } else {
                        "inactive"
                    }
                );
                let rows: Vec<Vec<String>> = st
                    .nodes
                    .iter()
                    .map(|n| {
                        vec![
                            n.name.clone(),
                            n.role.clone().unwrap_or_else(dash),
                            n.state.clone(),
                            n.mac.clone().unwrap_or_else(dash),
                            n.planned_ip.clone().unwrap_or_else(dash),
                            n.leased_ip.clone().unwrap_or_else(dash),
                            n.console_log.clone().unwrap_or_else(dash),
                        ]
                    })
                    .collect();
                s.push_str(&render_table_rows(
                    &[
                        "NODE",
                        "ROLE",
                        "STATE",
                        "MAC",
                        "PLANNED IP",
                        "LEASED IP",
                        "CONSOLE LOG",
                    ],
                    &rows,
                ));
                s
            }
            Place::Kubevirt { namespace, .. } => {
                let mut s = format!(
                    "cluster {} on KubeVirt, namespace {namespace}\n",
                    st.cluster
                );
                let rows: Vec<Vec<String>> = st
                    .nodes
                    .iter()
                    .map(|n| {
                        vec![
                            n.name.clone(),
                            n.role.clone().unwrap_or_else(dash),
                            n.run_strategy.clone().unwrap_or_else(dash),
                            n.status.clone().unwrap_or_else(dash),
                            n.leased_ip.clone().unwrap_or_else(dash),
                        ]
                    })
                    .collect();
                s.push_str(&render_table_rows(
                    &["NODE", "ROLE", "RUN STRATEGY", "STATUS", "IP"],
                    &rows,
                ));
                s
            }
        };
        if let Some(o) = &self.restored_from {
            s.push_str(&format!("\n{}\n", o.line()));
        }
        if let Some(v) = &self.veth_bridge {
            s.push_str(&format!(
                "\nveth-linked bridge {}: {}\n",
                v.bridge,
                v.problem.as_deref().unwrap_or("linked")
            ));
        }
        if let Some(b) = &self.installer_bootstrap {
            s.push_str(&format!(
                "\ninstaller's bootstrap VM {}: {} on {}\n",
                b.name,
                if b.running { "running" } else { "shut off" },
                if b.bridges.is_empty() {
                    "no bridge".to_string()
                } else {
                    b.bridges.join(", ")
                }
            ));
        }
        if let Some(sv) = &self.services {
            s.push('\n');
            s.push_str(&sv.table());
        }
        if let Some(i) = &self.install {
            s.push_str(&i.table());
        }
        if let Some(st) = &self.storage {
            s.push_str(&st.table());
        }
        if !self.users.is_empty() {
            s.push_str(&format!("\nusers: {}\n", users_line(&self.users)));
        }
        if let Some(c) = &self.certificates {
            let now = super::power::now() as i64;
            let when = |t: i64| {
                let d = t - now;
                if d >= 0 {
                    format!("in {}h{:02}m", d / 3600, d % 3600 / 60)
                } else {
                    format!("{}h{:02}m ago", -d / 3600, -d % 3600 / 60)
                }
            };
            s.push_str(
                "
certificates:
",
            );
            if let Some(r) = c.first_rotation_by {
                s.push_str(&format!(
                    "  install certificates: first rotation due {} (do not stop the cluster before)\n",
                    when(r as i64)
                ));
            }
            if let Some(a) = c.admin_client_not_after {
                s.push_str(&format!(
                    "  admin kubeconfig client certificate expires {}\n",
                    when(a)
                ));
            }
        }
        s
    }
}

/// `alice (cluster-admin), bob`: the users in their order, admins marked.
fn users_line(users: &[crate::install::users::Recorded]) -> String {
    users
        .iter()
        .map(|u| {
            if u.admin {
                format!("{} (cluster-admin)", u.name)
            } else {
                u.name.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_line_marks_the_admins() {
        let u = |name: &str, admin| crate::install::users::Recorded {
            name: name.into(),
            admin,
            password_file: format!("/s/{name}-password").into(),
        };
        assert_eq!(
            users_line(&[u("alice", true), u("bob", false)]),
            "alice (cluster-admin), bob"
        );
    }

    #[test]
    fn the_admin_client_certificate_expiry_is_read_from_the_kubeconfig() {
        use base64::Engine;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_after = rcgen::date_time_ymd(2036, 11, 21);
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        let data = base64::engine::general_purpose::STANDARD.encode(pem);
        let kc = format!("apiVersion: v1\nusers:\n- name: admin\n  user:\n    client-certificate-data: {data}\n    client-key-data: eA==\n");
        // 2036-11-21T00:00:00Z
        assert_eq!(kubeconfig_client_not_after(&kc), Some(2_110_838_400));
        assert_eq!(kubeconfig_client_not_after("apiVersion: v1\n"), None);
    }
}
