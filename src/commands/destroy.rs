use anyhow::{bail, Result};

use crate::cli::destroy::DestroyCommand;
use crate::state::{ClusterName, StateDir};

pub fn destroy(cmd: &DestroyCommand, state: &StateDir) -> Result<()> {
    let DestroyCommand::Cluster(args) = cmd;
    let mut kubevirt_file = false;
    let (name, spec_uri) = match (&args.name, &args.file) {
        (Some(n), _) => (n.clone(), None),
        (None, Some(f)) => {
            let loaded = super::load_spec_with(f, true, &args.params)?; // sizes never stop a removal
            kubevirt_file = loaded.spec.kubevirt.is_some();
            let uri = loaded.spec.libvirt.uri.clone();
            (ClusterName::parse(&loaded.spec.cluster)?, Some(uri))
        }
        (None, None) => bail!("name the cluster or give its file with -f"),
    };
    let cluster = state.cluster(&name);
    // Not under a running install or create: they hold the cluster's lock.
    let _lock = cluster.lock_if_exists()?;
    if let Some(removed) = crate::cluster::destroy_kubevirt(state, &name, kubevirt_file)? {
        if removed.is_empty() {
            println!("nothing to remove: no shiftlab objects for {name} on KubeVirt");
        }
        for r in removed {
            println!("removed {r}");
        }
        return Ok(());
    }
    // The flag, else the cluster file's URI, else the one it was created on.
    let connect = args.connect.uri.as_deref().or(spec_uri.as_deref());
    let host = crate::cluster::host(&cluster, connect, None)?;
    let owned = crate::rehearse::leftover::before(state, &name);
    let removed = crate::cluster::destroy(&host, state, &name, args.purge_images)?;
    if removed.is_empty() {
        println!(
            "nothing to remove: no shiftlab objects for {name} on {}",
            host.uri
        );
    }
    for r in removed {
        println!("removed {r}");
    }
    // The export went with the host services; its data only when asked.
    if args.purge_storage {
        if let Some(dir) = crate::host::nfs::purge_data(state, &name)? {
            println!("removed storage {}", dir.display());
        }
    } else {
        let data = crate::host::nfs::storage_dir(state, &name);
        if data.is_dir() {
            println!(
                "kept storage {} (destroy --purge-storage removes it)",
                data.display()
            );
        }
    }
    // A rehearsal proves that destroy leaves nothing (docs/rehearsal.md).
    let Some(o) = owned else { return Ok(()) };
    let left = crate::rehearse::leftover::left(&host, state, &o)?;
    if !left.is_empty() {
        bail!(
            "destroy of rehearsal {name} left behind: {}",
            left.join(", ")
        );
    }
    println!("left nothing: no domain, volume, network, HAProxy, host DNS or firewall entry, or state of {name}");
    Ok(())
}
