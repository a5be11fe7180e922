//! The installer's bootstrap VM (bare-metal IPI) against libvirt's test driver
//! (`test:///default`, no daemon): recognised by `<infraID>-bootstrap` with the
//! infraID of this cluster's `metadata.json` only, shown with its bridge, and
//! removed with its volumes and pool — and nothing of another install.
//! The objects are shaped like the installer's (openshift/installer
//! data/data/baremetal/bootstrap/main.tf: pool, `-base`, the 20 GiB volume,
//! `.ign`, the domain with a NIC on externalBridge).

use shiftlab::install::ipi;
use shiftlab::libvirt::Host;
use shiftlab::state::StateDir;

fn define_install(host: &Host, id: &str, bridge: &str, dir: &std::path::Path) {
    let name = format!("{id}-bootstrap");
    let pool_dir = dir.join(&name);
    std::fs::create_dir_all(&pool_dir).unwrap();
    let pool = host
        .conn
        .define_storage_pool_xml(
            &format!(
                "<pool type='dir'><name>{name}</name><target><path>{}</path></target></pool>",
                pool_dir.display()
            ),
            0,
        )
        .unwrap();
    pool.create(0).unwrap();
    for (vol, gib) in [
        (format!("{name}-base"), 1),
        (name.clone(), 20),
        (format!("{name}.ign"), 0),
    ] {
        virt::storage_vol::StorageVol::create_xml(
            &pool,
            &format!("<volume><name>{vol}</name><capacity unit='GiB'>{gib}</capacity></volume>"),
            0,
        )
        .unwrap();
    }
    host.conn
        .define_domain_xml(&format!(
            "<domain type='test'><name>{name}</name><memory unit='MiB'>128</memory>\
             <os><type arch='x86_64'>hvm</type></os><devices>\
             <interface type='bridge'><source bridge='{bridge}'/></interface>\
             </devices></domain>"
        ))
        .unwrap()
        .create()
        .unwrap();
}

#[test]
fn the_installer_s_bootstrap_vm_is_shown_and_removed_and_no_other() {
    let host = Host::open("test:///default").unwrap();
    let home = tempfile::tempdir().unwrap();
    let state = StateDir {
        root: home.path().join("state"),
    };
    let cluster = state.cluster("lab1");
    // Before the installer wrote metadata.json: nothing is the cluster's.
    assert_eq!(ipi::bootstrap_vm(&host, &cluster).unwrap(), None);
    assert!(ipi::remove_bootstrap(&host, &cluster).unwrap().is_empty());

    define_install(&host, "lab1-x7k2p", "sl-lab1", home.path());
    // Another install on the same host (another cluster's infraID).
    define_install(&host, "lab1-other", "sl-other", home.path());

    std::fs::create_dir_all(cluster.assets().path()).unwrap();
    std::fs::write(
        cluster.assets().path().join("metadata.json"),
        r#"{"clusterName":"lab1","clusterID":"c","infraID":"lab1-x7k2p"}"#,
    )
    .unwrap();
    let vm = ipi::bootstrap_vm(&host, &cluster).unwrap().unwrap();
    assert_eq!(vm.name, "lab1-x7k2p-bootstrap");
    assert!(vm.running);
    assert_eq!(vm.bridges, ["sl-lab1"]);

    let removed = ipi::remove_bootstrap(&host, &cluster).unwrap();
    assert_eq!(
        removed,
        [
            "domain lab1-x7k2p-bootstrap (the installer's bootstrap VM)",
            "volume lab1-x7k2p-bootstrap-base",
            "volume lab1-x7k2p-bootstrap",
            "volume lab1-x7k2p-bootstrap.ign",
            "pool lab1-x7k2p-bootstrap",
        ]
    );
    assert!(host.domain("lab1-x7k2p-bootstrap").unwrap().is_none());
    assert!(host.pool("lab1-x7k2p-bootstrap").unwrap().is_none());
    assert_eq!(ipi::bootstrap_vm(&host, &cluster).unwrap(), None);
    // Idempotent, and the other install's objects are untouched.
    assert!(ipi::remove_bootstrap(&host, &cluster).unwrap().is_empty());
    assert!(host.domain("lab1-other-bootstrap").unwrap().is_some());
    let other = host.pool("lab1-other-bootstrap").unwrap().unwrap();
    assert_eq!(other.list_volumes().unwrap().len(), 3);
}
