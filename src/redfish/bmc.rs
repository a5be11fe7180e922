//! One Redfish BMC assembled from its configuration: the systems it exposes,
//! authentication, TLS material and the service. `shiftlab bmc` and the lab BMC
//! that `shiftlab serve` runs for an ipi cluster are both built here; they differ
//! only in the [`Config`] they pass.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::auth::Auth;
use super::machine::{Machine, MemoryMachine, MemorySystem};
use super::machine_libvirt::{LibvirtConfig, LibvirtMachine, Scope};
pub use super::source::ImageSources;
use super::{tls, Server, Service};

/// Largest virtual media image accepted unless configured otherwise.
pub const DEFAULT_MAX_IMAGE_BYTES: u64 = 8 << 30;
/// Idle timeout of Redfish sessions unless configured otherwise.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(1800);
/// Bounds of the session timeout: long enough for Ironic's polling, short
/// enough that a forgotten session ends within a day.
const SESSION_TIMEOUT_BOUNDS: (Duration, Duration) =
    (Duration::from_secs(30), Duration::from_secs(86400));
/// The password file's name in the BMC's directory (standalone BMC).
const PASSWORD_FILE: &str = "password";

/// What the BMC exposes as Redfish Systems.
#[derive(Debug, Clone)]
pub enum Systems {
    /// libvirt domains.
    Libvirt {
        uri: String,
        scope: Scope,
        /// Storage pool that receives virtual media images.
        pool: String,
        max_image_bytes: u64,
    },
    /// KubeVirt VirtualMachines of one cluster (src/redfish/machine_kubevirt.rs).
    Kubevirt(crate::redfish::machine_kubevirt::KubevirtConfig),
    /// In-memory systems with these names (for trying clients without libvirt).
    Memory(Vec<String>),
}

/// The user and password clients authenticate with.
#[derive(Clone)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Address and port to listen on; only this address is bound.
    pub listen: SocketAddr,
    /// The BMC's directory: CA and certificates (`tls/`), media cache index.
    pub dir: PathBuf,
    pub systems: Systems,
    /// `None`: requests need no credentials (plain HTTP only).
    pub credentials: Option<Credentials>,
    /// TLS with a certificate for the listen address plus these DNS names;
    /// `None`: plain HTTP.
    pub tls: Option<Vec<String>>,
    pub session_timeout: Duration,
    /// What the service's UUID is derived from: stable for one BMC.
    pub identity: String,
    /// Where virtual media images may be fetched from.
    pub image_sources: ImageSources,
    /// CA file that image servers' certificates must come from (`--media-ca`);
    /// `None`: certificates are not verified.
    pub media_ca: Option<PathBuf>,
}

/// A BMC ready to listen.
pub struct Bmc {
    listen: SocketAddr,
    service: Arc<Service<dyn Machine>>,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// `SHIFTLAB_BMC_TRACE`'s request trace, when set.
    trace: Option<Arc<super::trace::Trace>>,
    /// Where the CA certificate that clients verify the BMC with was exported.
    pub ca_path: Option<PathBuf>,
}

impl Bmc {
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Binds the listen address and serves until [`Server::shutdown`].
    pub async fn start(self) -> Result<Server> {
        Server::start_traced(self.listen, self.tls, self.service, self.trace).await
    }
}

/// Opens the systems, prepares authentication and TLS material. Blocking (libvirt,
/// files): call it off an async runtime's event loop.
pub fn build(config: Config) -> Result<Bmc> {
    if config.credentials.is_none() && config.tls.is_some() {
        bail!("a BMC without authentication serves plain HTTP only");
    }
    std::fs::create_dir_all(&config.dir)
        .with_context(|| format!("creating {}", config.dir.display()))?;
    let machine: Arc<dyn Machine> = match config.systems {
        Systems::Memory(names) => Arc::new(MemoryMachine::new(
            names.iter().map(|n| MemorySystem::new(&derived_uuid(n), n)),
        )),
        Systems::Kubevirt(cfg) => {
            Arc::new(crate::redfish::machine_kubevirt::KubevirtMachine::open(
                &cfg,
                config.image_sources.clone(),
            )?)
        }
        Systems::Libvirt {
            uri,
            scope,
            pool,
            max_image_bytes,
        } => Arc::new(LibvirtMachine::open(&LibvirtConfig {
            uri,
            scope,
            pool,
            state_dir: config.dir.clone(),
            max_image_bytes,
            image_sources: config.image_sources.clone(),
            media_ca: config.media_ca.clone(),
        })?),
    };
    let (lo, hi) = SESSION_TIMEOUT_BOUNDS;
    let timeout = config.session_timeout.clamp(lo, hi);
    let auth = match &config.credentials {
        Some(c) => Auth::new(&c.user, &c.password, timeout),
        None => {
            tracing::warn!("authentication is disabled");
            Auth::open(timeout)
        }
    };
    let service = Arc::new(Service::new(machine, auth, &derived_uuid(&config.identity)));
    let (tls, ca_path) = match &config.tls {
        Some(names) => {
            let material = tls::ensure(&config.dir.join("tls"), &[config.listen.ip()], names)?;
            (Some(tls::server_config(&material)?), Some(material.ca_path))
        }
        None => (None, None),
    };
    let mut redactor = crate::redact::Redactor::default();
    if let Some(c) = &config.credentials {
        redactor.add(&c.password);
    }
    let trace = super::trace::Trace::from_env(redactor)?.map(Arc::new);
    Ok(Bmc {
        listen: config.listen,
        service,
        tls,
        trace,
        ca_path,
    })
}

/// The id of an in-memory system or of the service, derived from its name:
/// the one deriver (`addressing::stable_uuid`, as the plan's nodes), under
/// its own first part. Neither is stored: each start derives them again.
pub fn derived_uuid(seed: &str) -> String {
    crate::addressing::stable_uuid(&["redfish", seed])
}

/// Where a standalone BMC keeps its password unless told otherwise.
pub fn password_path(dir: &Path) -> PathBuf {
    dir.join(PASSWORD_FILE)
}

/// A standalone BMC's password: $SHIFTLAB_BMC_PASSWORD, else the password file,
/// else a new random one written to the password file (0600). (The lab BMC uses
/// the password install-config names instead.)
pub fn load_or_create_password(path: &Path) -> Result<String> {
    if let Ok(p) = std::env::var("SHIFTLAB_BMC_PASSWORD") {
        if !p.is_empty() {
            return Ok(p);
        }
    }
    match std::fs::read_to_string(path) {
        Ok(s) => {
            let p = s.trim_end_matches(['\n', '\r']).to_string();
            if p.is_empty() {
                bail!("{} is empty", path.display());
            }
            Ok(p)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let p = crate::files::random_secret(crate::files::PASSWORD_LEN)?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            crate::files::write_private(path, format!("{p}\n").as_bytes())?;
            tracing::info!(path = %path.display(), "generated a bmc password");
            Ok(p)
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path) -> Config {
        Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            dir: dir.to_path_buf(),
            systems: Systems::Memory(vec!["vm1".into()]),
            credentials: Some(Credentials {
                user: "admin".into(),
                password: "s3cret".into(),
            }),
            tls: Some(vec!["localhost".into()]),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            identity: "test".into(),
            image_sources: ImageSources::default(),
            media_ca: None,
        }
    }

    #[test]
    fn tls_material_goes_into_the_bmc_dir_and_the_password_stays_out_of_debug() {
        let dir = tempfile::tempdir().unwrap();
        let c = config(&dir.path().join("bmc"));
        assert!(!format!("{c:?}").contains("s3cret"));
        let bmc = build(c).unwrap();
        assert_eq!(bmc.scheme(), "https");
        assert_eq!(
            bmc.ca_path.as_deref(),
            Some(dir.path().join("bmc/tls/ca.crt").as_path())
        );
        assert!(dir.path().join("bmc/tls/ca.crt").is_file());
    }

    #[test]
    fn no_authentication_only_over_plain_http() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path());
        c.credentials = None;
        assert!(build(c.clone()).is_err());
        c.tls = None;
        let bmc = build(c).unwrap();
        assert_eq!(bmc.scheme(), "http");
        assert_eq!(bmc.ca_path, None);
    }

    #[test]
    fn a_fake_systems_uuid_comes_from_the_one_deriver() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(&dir.path().join("bmc"));
        c.tls = None;
        let bmc = build(c).unwrap();
        let vm1 = bmc.service.machine().resolve("vm1").unwrap();
        assert_eq!(
            vm1.uuid,
            crate::addressing::stable_uuid(&["redfish", "vm1"])
        );
        assert_eq!(&vm1.uuid[14..15], "8", "version 8: {}", vm1.uuid);
        assert_ne!(derived_uuid("bmc/lab1"), derived_uuid("bmc/lab2"));
    }
}
