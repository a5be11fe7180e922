//! The lab's persistent storage (`storage:`), as both sides need it: the host's
//! NFS export (src/host/nfs.rs) and the cluster's provisioner and StorageClass
//! (src/render/storage.rs) must name the same server and path.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::spec::Storage;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoragePlan {
    pub kind: Storage,
    /// `storage: nfs`: the host's export for this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs: Option<NfsExport>,
}

/// One cluster's NFS export: served by the host on the lab network's gateway, to
/// the cluster's subnet only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NfsExport {
    /// The address the nodes mount from: the host on the lab network.
    pub server: IpAddr,
    /// The NFSv4 path the nodes mount.
    pub path: String,
    /// Who may mount it: the cluster's machine network, nothing else.
    pub clients: IpNet,
}

/// The NFSv4 path of a cluster's export. The cluster name is already a DNS label
/// (spec::is_cluster_name), so it is safe in a path.
pub fn export_path(cluster: &str) -> String {
    format!("/shiftlab/{cluster}")
}

impl StoragePlan {
    pub fn derive(kind: Storage, cluster: &str, gateway: IpAddr, cidr: IpNet) -> Option<Self> {
        match kind {
            Storage::None => None,
            Storage::Lvms => Some(StoragePlan { kind, nfs: None }),
            Storage::Nfs => Some(StoragePlan {
                kind,
                nfs: Some(NfsExport {
                    server: gateway,
                    path: export_path(cluster),
                    clients: cidr,
                }),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfs_export_is_the_gateway_to_the_subnet() {
        let cidr: IpNet = "192.168.126.0/24".parse().unwrap();
        let gw: IpAddr = "192.168.126.1".parse().unwrap();
        let p = StoragePlan::derive(Storage::Nfs, "lab", gw, cidr).unwrap();
        let nfs = p.nfs.unwrap();
        assert_eq!(nfs.server, gw);
        assert_eq!(nfs.path, "/shiftlab/lab");
        assert_eq!(nfs.clients, cidr);
        assert_eq!(StoragePlan::derive(Storage::None, "lab", gw, cidr), None);
        assert!(StoragePlan::derive(Storage::Lvms, "lab", gw, cidr)
            .unwrap()
            .nfs
            .is_none());
    }
}
