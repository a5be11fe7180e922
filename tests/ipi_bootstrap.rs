//! The installer's bootstrap VM (bare-metal IPI) against libvirt's test driver
//! (`test:///default`, no daemon): recognised by `<infraID>-bootstrap` with the
//! infraID of this cluster's `metadata.json` only, shown with its bridge, and
//! removed with its volumes and pool — and nothing of another install.
//! The objects are shaped like the installer's (openshift/installer, since 4.16
//! pkg/infrastructure/baremetal/bootstrap.go: the pool, `-live-provisioner`, the
//! 20 GiB `-scratch`, the domain with a NIC on externalBridge; before it
//! data/data/baremetal/bootstrap/main.tf: `-base`, the 20 GiB volume, `.ign`).

use shiftlab::install::ipi;
use shiftlab::libvirt::Host;
use shiftlab::state::StateDir;

/// The 4.16+ volumes of `id`'s bootstrap pool.
fn live_layout(id: &str) -> Vec<(String, u32)> {
    vec![
        (format!("{id}-live-provisioner"), 1),
        (format!("{id}-scratch"), 20),
    ]
}

fn define_install(host: &Host, id: &str, bridge: &str, dir: &std::path::Path) {
    define_bootstrap(host, id, bridge, dir, &live_layout(id), true);
}

/// The pool with `volumes`, and the running domain when `domain`.
fn define_bootstrap(
    host: &Host,
    id: &str,
    bridge: &str,
    dir: &std::path::Path,
    volumes: &[(String, u32)],
    domain: bool,
) {
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
    for (vol, gib) in volumes {
        virt::storage_vol::StorageVol::create_xml(
            &pool,
            &format!("<volume><name>{vol}</name><capacity unit='GiB'>{gib}</capacity></volume>"),
            0,
        )
        .unwrap();
    }
    if !domain {
        return;
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

    let left = ipi::bootstrap_left(&host, "lab1-x7k2p").unwrap();
    assert!(left.any() && left.whole("lab1-x7k2p"), "{left:?}");
    let mut removed = ipi::remove_bootstrap(&host, &cluster).unwrap();
    removed.sort();
    assert_eq!(
        removed,
        [
            "domain lab1-x7k2p-bootstrap (the installer's bootstrap VM)",
            "pool lab1-x7k2p-bootstrap",
            "volume lab1-x7k2p-live-provisioner",
            "volume lab1-x7k2p-scratch",
        ]
    );
    assert!(host.domain("lab1-x7k2p-bootstrap").unwrap().is_none());
    assert!(host.pool("lab1-x7k2p-bootstrap").unwrap().is_none());
    assert_eq!(ipi::bootstrap_vm(&host, &cluster).unwrap(), None);
    // Idempotent, and the other install's objects are untouched.
    assert!(ipi::remove_bootstrap(&host, &cluster).unwrap().is_empty());
    assert!(host.domain("lab1-other-bootstrap").unwrap().is_some());
    let other = host.pool("lab1-other-bootstrap").unwrap().unwrap();
    assert_eq!(other.list_volumes().unwrap().len(), 2);
    assert!(!ipi::bootstrap_left(&host, "lab1-x7k2p").unwrap().any());
}

/// What a killed `create cluster` or the real `destroy bootstrap` leaves: a pool
/// without its domain and with one volume; a pool stopped but defined (the real
/// `destroy bootstrap` never undefines it); the older layout. Each goes whole.
#[test]
fn half_made_bootstraps_are_removed_whole() {
    let host = Host::open("test:///default").unwrap();
    let home = tempfile::tempdir().unwrap();
    let state = StateDir {
        root: home.path().join("state"),
    };
    let cluster = state.cluster("lab2");
    std::fs::create_dir_all(cluster.assets().path()).unwrap();
    let metadata = |id: &str| {
        std::fs::write(
            cluster.assets().metadata(),
            format!(r#"{{"clusterName":"lab2","clusterID":"c","infraID":"{id}"}}"#),
        )
        .unwrap()
    };

    // The pool and the live ISO, no scratch volume, no domain.
    let id = "lab2-half1";
    define_bootstrap(
        &host,
        id,
        "sl-lab2",
        home.path(),
        &live_layout(id)[..1],
        false,
    );
    metadata(id);
    let left = ipi::bootstrap_left(&host, id).unwrap();
    assert!(left.any() && !left.whole(id), "{left:?}");
    assert_eq!(
        ipi::remove_bootstrap(&host, &cluster).unwrap(),
        [
            "volume lab2-half1-live-provisioner",
            "pool lab2-half1-bootstrap"
        ]
    );
    assert!(host.pool("lab2-half1-bootstrap").unwrap().is_none());

    // A stopped pool, still defined.
    let id = "lab2-stop1";
    define_bootstrap(&host, id, "sl-lab2", home.path(), &[], false);
    host.pool("lab2-stop1-bootstrap")
        .unwrap()
        .unwrap()
        .destroy()
        .unwrap();
    metadata(id);
    assert!(ipi::bootstrap_left(&host, id).unwrap().any());
    assert_eq!(
        ipi::remove_bootstrap(&host, &cluster).unwrap(),
        ["pool lab2-stop1-bootstrap"]
    );
    assert!(host.pool("lab2-stop1-bootstrap").unwrap().is_none());

    // The layout before 4.16: every volume of the pool goes too.
    let id = "lab2-old01";
    let old = [
        (format!("{id}-bootstrap-base"), 1),
        (format!("{id}-bootstrap"), 20),
        (format!("{id}-bootstrap.ign"), 0),
    ];
    define_bootstrap(&host, id, "sl-lab2", home.path(), &old, true);
    metadata(id);
    assert!(!ipi::bootstrap_left(&host, id).unwrap().whole(id));
    let removed = ipi::remove_bootstrap(&host, &cluster).unwrap();
    assert_eq!(removed.len(), 5, "{removed:?}");
    assert!(host.domain("lab2-old01-bootstrap").unwrap().is_none());
    assert!(host.pool("lab2-old01-bootstrap").unwrap().is_none());
}
