//! libvirt, reached only through its API: connection, lookups, ownership, and the
//! apply/destroy/inspect operations on a cluster's objects.

pub mod apply;
pub mod destroy;
pub mod inspect;
pub mod ledger;
pub mod preflight;

use anyhow::{Context, Result};
use virt::connect::Connect;
use virt::domain::Domain;
use virt::error::ErrorNumber;
use virt::network::Network;
use virt::storage_pool::StoragePool;
use virt::storage_vol::StorageVol;

use crate::render::libvirt::Owner;

/// An open libvirt connection.
pub struct Host {
    pub conn: Connect,
    pub uri: String,
}

fn not_found(e: &virt::error::Error, what: ErrorNumber) -> bool {
    e.code().is_known_and(|c| c == what)
}

impl Host {
    pub fn open(uri: &str) -> Result<Host> {
        // libvirt prints every error to stderr by default; we report them ourselves.
        virt::error::clear_error_callback();
        let conn =
            Connect::open(Some(uri)).with_context(|| format!("connecting to libvirt at {uri}"))?;
        Ok(Host {
            conn,
            uri: uri.to_string(),
        })
    }

    /// Is the hypervisor on this machine (so that /dev/kvm and routes are its own)?
    pub fn is_local(&self) -> bool {
        let u = self.uri.as_str();
        !u.contains("://") || {
            let rest = u.split_once("://").map(|x| x.1).unwrap_or_default();
            rest.starts_with('/') || rest.starts_with("localhost/")
        }
    }

    pub fn network(&self, name: &str) -> Result<Option<Network>> {
        match self.conn.lookup_network_by_name(name) {
            Ok(n) => Ok(Some(n)),
            Err(e) if not_found(&e, ErrorNumber::NoNetwork) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("looking up network {name}")),
        }
    }

    pub fn domain(&self, name: &str) -> Result<Option<Domain>> {
        match self.conn.lookup_domain_by_name(name) {
            Ok(d) => Ok(Some(d)),
            Err(e) if not_found(&e, ErrorNumber::NoDomain) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("looking up domain {name}")),
        }
    }

    pub fn pool(&self, name: &str) -> Result<Option<StoragePool>> {
        match self.conn.lookup_storage_pool_by_name(name) {
            Ok(p) => Ok(Some(p)),
            Err(e) if not_found(&e, ErrorNumber::NoStoragePool) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("looking up pool {name}")),
        }
    }

    pub fn volume(pool: &StoragePool, name: &str) -> Result<Option<StorageVol>> {
        match pool.lookup_storage_vol_by_name(name) {
            Ok(v) => Ok(Some(v)),
            Err(e) if not_found(&e, ErrorNumber::NoStorageVolume) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("looking up volume {name}")),
        }
    }

    /// Every domain with shiftlab ownership metadata, with its owner.
    pub fn owned_domains(&self) -> Result<Vec<(Domain, Owner)>> {
        let all = self.conn.list_all_domains(0).context("listing domains")?;
        let mut out = Vec::new();
        for d in all {
            let xml = d.xml_desc(0).context("reading domain XML")?;
            if let Some(o) = Owner::parse(&xml) {
                out.push((d, o));
            }
        }
        Ok(out)
    }

    /// Every network with shiftlab ownership metadata, with its owner.
    pub fn owned_networks(&self) -> Result<Vec<(Network, Owner)>> {
        let all = self.conn.list_all_networks(0).context("listing networks")?;
        let mut out = Vec::new();
        for n in all {
            let xml = n.xml_desc(0).context("reading network XML")?;
            if let Some(o) = Owner::parse(&xml) {
                out.push((n, o));
            }
        }
        Ok(out)
    }
}

/// The owner recorded in an object's XML, if shiftlab created it.
pub fn owner_of_domain(d: &Domain) -> Result<Option<Owner>> {
    Ok(Owner::parse(&d.xml_desc(0).context("reading domain XML")?))
}

pub fn owner_of_network(n: &Network) -> Result<Option<Owner>> {
    Ok(Owner::parse(&n.xml_desc(0).context("reading network XML")?))
}

/// Disks and fw_cfg files a domain uses, from its XML: (pool, volume) pairs for
/// `type='volume'` disks, and plain paths for files.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DomainStorage {
    pub volumes: Vec<(String, String)>,
    pub files: Vec<String>,
}

pub fn domain_storage(xml: &str) -> DomainStorage {
    let mut out = DomainStorage::default();
    let Ok(doc) = roxmltree::Document::parse(xml) else {
        return out;
    };
    for n in doc.descendants() {
        match n.tag_name().name() {
            "source" if n.parent().is_some_and(|p| p.tag_name().name() == "disk") => {
                if let (Some(pool), Some(vol)) = (n.attribute("pool"), n.attribute("volume")) {
                    out.volumes.push((pool.to_string(), vol.to_string()));
                } else if let Some(f) = n.attribute("file") {
                    out.files.push(f.to_string());
                }
            }
            "entry" if n.attribute("name") == Some("opt/com.coreos/config") => {
                if let Some(f) = n.attribute("file") {
                    out.files.push(f.to_string());
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_of_a_domain() {
        let xml = "<domain><sysinfo type='fwcfg'><entry name='opt/com.coreos/config' file='/p/n.ign'/></sysinfo>\
<devices><disk type='volume'><source pool='shiftlab' volume='n.qcow2'/></disk>\
<disk type='file' device='cdrom'><source file='/p/x.iso'/></disk><disk type='file' device='cdrom'/></devices></domain>";
        let s = domain_storage(xml);
        assert_eq!(s.volumes, vec![("shiftlab".into(), "n.qcow2".into())]);
        assert_eq!(
            s.files,
            vec!["/p/n.ign".to_string(), "/p/x.iso".to_string()]
        );
    }
}
