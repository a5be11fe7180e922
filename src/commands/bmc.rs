use anyhow::{bail, Result};

use crate::cli::bmc::BmcArgs;
use crate::redfish::bmc::{self, Config, Credentials, Systems};
use crate::redfish::machine_libvirt::Scope;
use crate::state::StateDir;

pub fn run(args: &BmcArgs, state: &StateDir) -> Result<()> {
    let dir = args.bmc_dir.clone().unwrap_or_else(|| state.bmc_dir());
    let systems = if !args.fake.is_empty() {
        Systems::Memory(args.fake.clone())
    } else {
        let scope = match (&args.cluster, args.allow.is_empty()) {
            (Some(c), _) => Scope::Cluster(c.to_string()),
            (None, false) => Scope::Allow(args.allow.clone()),
            (None, true) => bail!("choose the domains to expose: --cluster NAME or --allow DOMAIN"),
        };
        Systems::Libvirt {
            uri: crate::libvirt::uri(args.connect.as_deref()),
            scope,
            pool: args.pool.clone(),
            max_image_bytes: args.max_image_bytes,
        }
    };
    let credentials = if args.no_auth {
        None
    } else {
        let path = args
            .password_file
            .clone()
            .unwrap_or_else(|| bmc::password_path(&dir));
        Some(Credentials {
            user: args.user.clone(),
            password: bmc::load_or_create_password(&path)?,
        })
    };
    let bmc = bmc::build(Config {
        listen: args.listen,
        identity: dir.display().to_string(),
        dir,
        systems,
        credentials,
        tls: (!args.insecure_http).then(|| args.san.clone()),
        session_timeout: std::time::Duration::from_secs(args.session_timeout),
        image_sources: bmc::ImageSources::anywhere(args.allow_image_source.clone()),
        media_ca: args.media_ca.clone(),
    })?;
    if let Some(ca) = &bmc.ca_path {
        eprintln!("bmc CA certificate: {}", ca.display());
    }
    let scheme = bmc.scheme();
    crate::daemon::runtime()?.block_on(async move {
        let server = bmc.start().await?;
        eprintln!(
            "redfish bmc on {scheme}://{}/redfish/v1/",
            server.local_addr()
        );
        crate::daemon::shutdown_signal().await;
        server.shutdown().await;
        Ok(())
    })
}
