//! The network's parts the plan names beyond the libvirt network itself: the
//! veth-linked bridge of a bare-metal IPI cluster (`network.external_bridge:
//! veth`; made and removed by src/host/veth.rs).

use serde::{Deserialize, Serialize};

use crate::addressing::stable_hash;

/// The links of one veth-linked bridge, as the plan names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VethBridge {
    /// The bridge the installer's bootstrap VM joins.
    pub bridge: String,
    /// The libvirt NAT bridge it is linked to.
    pub nat: String,
    /// The veth end enslaved to `bridge`.
    pub bridge_end: String,
    /// The veth end enslaved to `nat`.
    pub nat_end: String,
}

impl VethBridge {
    /// The links for `cluster`: the veth ends are named from a digest of the
    /// cluster name (interface names have at most 15 characters).
    pub fn new(cluster: &str, bridge: &str, nat: &str) -> Self {
        let h = stable_hash(&["veth", cluster]);
        VethBridge {
            bridge: bridge.to_string(),
            nat: nat.to_string(),
            bridge_end: format!("sl-bm-{}", &h[..8]),
            nat_end: format!("sl-nat-{}", &h[..8]),
        }
    }

    /// The links shiftlab makes (and so may remove), the bridge last.
    pub fn owned(&self) -> [&str; 3] {
        [&self.bridge_end, &self.nat_end, &self.bridge]
    }
}
