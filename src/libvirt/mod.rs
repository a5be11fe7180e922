//! libvirt, reached only through its API: the connection and its default URI,
//! lookups, ownership, uploads through streams; the XML shiftlab writes, reads and
//! edits ([`xml`]); and the apply/destroy/inspect operations on a
//! cluster's objects. The Redfish BMC's machine is built on this module.

pub mod apply;
pub mod console;
pub mod destroy;
pub mod events;
pub mod import;
pub mod inspect;
pub mod iso;
pub mod ledger;
pub mod parallel;
pub mod xml;

use std::io::Read;

use anyhow::{bail, Context, Result};
use virt::connect::Connect;
use virt::domain::Domain;
use virt::error::ErrorNumber;
use virt::network::Network;
use virt::storage_pool::StoragePool;
use virt::storage_vol::StorageVol;
use virt::stream::Stream;

use xml::{Owner, OWNER_NS};

pub use crate::spec::uri::{choose_uri, env_uri, SYSTEM_URI};

/// Name prefix of the volumes shiftlab's BMC streams virtual media into: ours by
/// this prefix (libvirt has no metadata for volumes), removed once no domain uses
/// them.
pub const MEDIA_VOLUME_PREFIX: &str = "shiftlab-media-";

/// The libvirt URI to use: the one given (a flag, the cluster file, the ledger),
/// else `$LIBVIRT_DEFAULT_URI`, else [`SYSTEM_URI`]. The one place this is decided.
pub fn uri(given: Option<&str>) -> String {
    choose_uri(given, env_uri().as_deref())
}

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
        tracing::info!("connected to libvirt at {uri}");
        Ok(Host {
            conn,
            uri: uri.to_string(),
        })
    }

    /// Is the hypervisor on this machine (so that /dev/kvm and routes are its own)?
    pub fn is_local(&self) -> bool {
        uri_is_local(&self.uri)
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
        with_owners(all, owner_of_domain)
    }

    /// Every network with shiftlab ownership metadata, with its owner.
    pub fn owned_networks(&self) -> Result<Vec<(Network, Owner)>> {
        let all = self.conn.list_all_networks(0).context("listing networks")?;
        with_owners(all, owner_of_network)
    }

    /// Stream bytes into a volume through libvirt, so a remote host works the same.
    /// A read error aborts the upload and is returned as it is.
    pub fn upload(&self, vol: &StorageVol, mut src: impl Read, len: u64) -> Result<()> {
        let stream = Stream::new(&self.conn, 0).context("opening an upload stream")?;
        vol.upload(&stream, 0, len, 0)
            .context("starting the upload")?;
        let mut buf = vec![0u8; 1 << 20];
        let result = (|| -> Result<()> {
            loop {
                let n = src.read(&mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                send_all(&stream, &buf[..n])?;
            }
        })();
        match result {
            Ok(()) => stream.finish().context("finishing the upload"),
            Err(e) => {
                let _ = stream.abort();
                Err(e)
            }
        }
    }

    /// [`Host::upload`] that also returns the sha256 of the bytes sent, hashed
    /// on a thread of its own from the very buffers that go out
    /// ([`import::copy_hashing`]).
    pub fn upload_sha256(&self, vol: &StorageVol, src: impl Read, len: u64) -> Result<String> {
        let stream = Stream::new(&self.conn, 0).context("opening an upload stream")?;
        vol.upload(&stream, 0, len, 0)
            .context("starting the upload")?;
        match import::copy_hashing(src, |b| send_all(&stream, b)) {
            Ok(digest) => {
                stream.finish().context("finishing the upload")?;
                Ok(digest)
            }
            Err(e) => {
                let _ = stream.abort();
                Err(e)
            }
        }
    }

    /// A volume's whole content, through libvirt.
    pub fn download(&self, vol: &StorageVol) -> Result<Vec<u8>> {
        let len = vol.info()?.capacity;
        let stream = Stream::new(&self.conn, 0)?;
        vol.download(&stream, 0, len, 0)?;
        let mut out = Vec::with_capacity(len as usize);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = stream.recv(&mut buf)?;
            if n <= 0 {
                break;
            }
            out.extend_from_slice(&buf[..n as usize]);
        }
        stream.finish()?;
        Ok(out)
    }
}

/// The objects that have an owner, with it.
/// Send all of `data` on an upload stream (libvirt may take less per call).
fn send_all(stream: &Stream, data: &[u8]) -> Result<()> {
    let mut off = 0;
    while off < data.len() {
        let sent = stream.send(&data[off..]).context("sending data")?;
        if sent <= 0 {
            bail!("libvirt accepted no data");
        }
        off += sent as usize;
    }
    Ok(())
}

fn with_owners<T>(
    all: Vec<T>,
    owner: impl Fn(&T) -> Result<Option<Owner>>,
) -> Result<Vec<(T, Owner)>> {
    let mut out = Vec::new();
    for x in all {
        if let Some(o) = owner(&x)? {
            out.push((x, o));
        }
    }
    Ok(out)
}

/// The owner recorded in a domain's metadata, if shiftlab created it. Read through
/// the metadata API: only the element, not the whole definition.
/// A URI whose hypervisor runs on this machine (no remote host in it).
pub fn uri_is_local(u: &str) -> bool {
    !u.contains("://") || {
        let rest = u.split_once("://").map(|x| x.1).unwrap_or_default();
        rest.starts_with('/') || rest.starts_with("localhost/")
    }
}

pub fn owner_of_domain(d: &Domain) -> Result<Option<Owner>> {
    let kind = virt::sys::VIR_DOMAIN_METADATA_ELEMENT as i32;
    match d.metadata(kind, Some(OWNER_NS), 0) {
        Ok(el) => Ok(Owner::parse_element(&el)),
        Err(e) if not_found(&e, ErrorNumber::NoDomainMetadata) => Ok(None),
        Err(e) => Err(e).context("reading domain metadata"),
    }
}

/// The owner recorded in a network's XML, if shiftlab created it.
pub fn owner_of_network(n: &Network) -> Result<Option<Owner>> {
    Ok(Owner::parse(&n.xml_desc(0).context("reading network XML")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uri_given_wins_then_the_environment_then_the_system_daemon() {
        assert_eq!(
            choose_uri(Some("test:///default"), Some("qemu:///session")),
            "test:///default"
        );
        assert_eq!(choose_uri(None, Some("qemu:///session")), "qemu:///session");
        assert_eq!(choose_uri(None, Some("")), SYSTEM_URI);
        assert_eq!(choose_uri(None, None), "qemu:///system");
    }
}
