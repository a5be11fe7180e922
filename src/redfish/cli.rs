//! `shiftlab bmc`: a standalone Redfish BMC for libvirt domains.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use sha2::{Digest as _, Sha256};

use super::auth::Auth;
use super::libvirt::{LibvirtConfig, LibvirtMachine, Scope};
use super::machine::{Machine, MemoryMachine, MemorySystem};
use super::{tls, Server, Service};

/// Serve a Redfish BMC for libvirt domains.
///
/// Exposes the chosen domains as Redfish Systems (addressed by domain UUID;
/// a domain name redirects to its UUID) with power, boot override, virtual
/// media and sessions, the way Ironic's `sushy` drives them. TLS and
/// authentication are on by default: the CA is created in the state
/// directory (`ca.crt`, to give to install-config or Ironic), and a random
/// password is generated into `<state-dir>/password` (mode 0600) unless
/// SHIFTLAB_BMC_PASSWORD or --password-file gives one.
///
/// Examples:
///
///   shiftlab bmc --listen 192.168.130.1:8443 --cluster lab1
///
///   shiftlab bmc --allow vm1 --allow vm2 --connect qemu:///system
///
/// Then point Ironic or install-config at
/// redfish-virtualmedia+https://<listen>/redfish/v1/Systems/<domain-uuid>.
#[derive(Debug, Clone, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Address and port to listen on; binds only this address.
    #[arg(long, default_value = "127.0.0.1:8443")]
    pub listen: SocketAddr,
    /// libvirt connection URI.
    #[arg(
        long,
        short = 'c',
        default_value = "qemu:///system",
        env = "LIBVIRT_DEFAULT_URI"
    )]
    pub connect: String,
    /// Expose the domains whose shiftlab ownership metadata names this cluster.
    #[arg(long, conflicts_with = "allow")]
    pub cluster: Option<crate::state::ClusterName>,
    /// Expose this domain (name or UUID); repeat for more.
    #[arg(long, value_name = "DOMAIN")]
    pub allow: Vec<String>,
    /// Storage pool that receives virtual media images.
    #[arg(long, default_value = "default")]
    pub pool: String,
    /// Largest virtual media image accepted, in bytes.
    #[arg(long, default_value_t = 8 << 30)]
    pub max_image_bytes: u64,
    /// Directory for the CA, certificates, password and media cache
    /// [default: <shiftlab state dir>/bmc].
    #[arg(long, value_name = "DIR")]
    pub bmc_dir: Option<PathBuf>,
    /// User name clients authenticate as.
    #[arg(long, default_value = "admin")]
    pub user: String,
    /// File holding the password (created with a random one if missing)
    /// [default: <state-dir>/password].
    #[arg(long)]
    pub password_file: Option<PathBuf>,
    /// Extra DNS names for the server certificate (the listen IP is always in it).
    #[arg(long, value_name = "NAME")]
    pub san: Vec<String>,
    /// Idle timeout of Redfish sessions, in seconds.
    #[arg(long, default_value_t = 1800)]
    pub session_timeout: u64,
    /// Serve plain HTTP instead of TLS.
    #[arg(long)]
    pub insecure_http: bool,
    /// Accept requests without credentials (only with --insecure-http; for benchmarks).
    #[arg(long, requires = "insecure_http")]
    pub no_auth: bool,
    /// Serve in-memory systems with these names instead of libvirt domains (for trying clients).
    #[arg(long, hide = true, value_name = "NAME")]
    pub fake: Vec<String>,
}

/// A UUID-shaped id derived from a string (for in-memory systems and the service).
pub fn derived_uuid(seed: &str) -> String {
    let h = hex::encode(Sha256::digest(seed.as_bytes()));
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// The password: $SHIFTLAB_BMC_PASSWORD, else the password file, else a new
/// random one written to the password file (0600).
pub fn load_or_create_password(path: &std::path::Path) -> Result<String> {
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

/// `default_dir`: the BMC's state directory without `--bmc-dir` (`<state>/bmc`).
pub fn run(args: Args, default_dir: &std::path::Path) -> Result<()> {
    let state_dir = match &args.bmc_dir {
        Some(d) => d.clone(),
        None => default_dir.to_path_buf(),
    };
    std::fs::create_dir_all(&state_dir)
        .with_context(|| format!("creating {}", state_dir.display()))?;
    let machine: Arc<dyn Machine> = if !args.fake.is_empty() {
        Arc::new(MemoryMachine::new(
            args.fake
                .iter()
                .map(|n| MemorySystem::new(&derived_uuid(n), n)),
        ))
    } else {
        let scope = match (&args.cluster, args.allow.is_empty()) {
            (Some(c), _) => Scope::Cluster(c.to_string()),
            (None, false) => Scope::Allow(args.allow.clone()),
            (None, true) => bail!("choose the domains to expose: --cluster NAME or --allow DOMAIN"),
        };
        let cfg = LibvirtConfig {
            uri: args.connect.clone(),
            scope,
            pool: args.pool.clone(),
            state_dir: state_dir.clone(),
            max_image_bytes: args.max_image_bytes,
        };
        Arc::new(LibvirtMachine::open(&cfg)?)
    };
    let timeout = Duration::from_secs(args.session_timeout.clamp(30, 86400));
    let auth = if args.no_auth {
        tracing::warn!("authentication is disabled");
        Auth::open(timeout)
    } else {
        let path = args
            .password_file
            .clone()
            .unwrap_or_else(|| state_dir.join("password"));
        Auth::new(&args.user, &load_or_create_password(&path)?, timeout)
    };
    let service = Arc::new(Service::new(
        machine,
        auth,
        &derived_uuid(&state_dir.display().to_string()),
    ));
    let tls_config = if args.insecure_http {
        None
    } else {
        let material = tls::ensure(&state_dir.join("tls"), &[args.listen.ip()], &args.san)?;
        eprintln!("bmc CA certificate: {}", material.ca_path.display());
        Some(tls::server_config(&material)?)
    };
    let scheme = if tls_config.is_some() {
        "https"
    } else {
        "http"
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let server = Server::start(args.listen, tls_config, service).await?;
        eprintln!(
            "redfish bmc on {scheme}://{}/redfish/v1/",
            server.local_addr()
        );
        wait_for_signal().await;
        server.shutdown().await;
        Ok(())
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
