//! The libvirt machine against libvirt's test driver (no daemon needed).

use std::sync::Arc;

use shiftlab::redfish::machine::{Machine, MachineError};
use shiftlab::redfish::machine_libvirt::{LibvirtConfig, LibvirtMachine, Scope};
use shiftlab::redfish::model::*;

const TEST_UUID: &str = "6695eb01-f6a4-8304-79aa-97f2502e193f";

/// test:///default is one shared instance per process: tests take turns
/// and start from the same state.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = machine(Scope::Allow(vec!["test".into()]));
    let reset = BootPatch {
        target: Some(BootTarget::Hdd),
        enabled: Some(BootEnabled::Continuous),
        mode: Some(BootMode::Legacy),
    };
    m.set_boot(TEST_UUID, reset).unwrap();
    m.reset(TEST_UUID, ResetType::On).unwrap();
    g
}

fn machine(scope: Scope) -> LibvirtMachine {
    let dir = tempfile::tempdir().unwrap();
    LibvirtMachine::open(&LibvirtConfig {
        uri: "test:///default".into(),
        scope,
        pool: "default-pool".into(),
        state_dir: dir.path().to_path_buf(),
        max_image_bytes: 1 << 20,
        image_sources: shiftlab::redfish::source::ImageSources::anywhere(vec!["127.0.0.0/8"
            .parse()
            .unwrap()]),
        media_ca: None,
    })
    .unwrap()
}

#[test]
fn exposes_only_allowed_domains_and_resolves_names() {
    let _g = serial();
    let m = machine(Scope::Allow(vec!["test".into()]));
    let list = m.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].uuid, TEST_UUID);
    assert_eq!(m.resolve("test").unwrap().uuid, TEST_UUID);
    assert!(matches!(m.resolve("nope"), Err(MachineError::NotFound)));
    let none = machine(Scope::Cluster("lab1".into()));
    assert!(
        none.list().unwrap().is_empty(),
        "no domain carries lab1 ownership metadata"
    );
    assert!(matches!(
        none.system(TEST_UUID),
        Err(MachineError::NotFound)
    ));
}

#[test]
fn power_and_one_time_boot() {
    let _g = serial();
    let m = machine(Scope::Allow(vec![TEST_UUID.into()]));
    let s = m.system(TEST_UUID).unwrap();
    assert_eq!(s.power, PowerState::On);
    assert_eq!(s.nics[0].mac, "aa:bb:cc:dd:ee:ff");
    assert_eq!(
        (s.boot.target, s.boot.enabled),
        (BootTarget::Hdd, BootEnabled::Continuous)
    );

    m.reset(TEST_UUID, ResetType::ForceOff).unwrap();
    m.reset(TEST_UUID, ResetType::ForceOff).unwrap();
    assert_eq!(m.system(TEST_UUID).unwrap().power, PowerState::Off);
    assert!(matches!(
        m.reset(TEST_UUID, ResetType::GracefulShutdown),
        Err(MachineError::Conflict(_))
    ));

    let patch = BootPatch {
        target: Some(BootTarget::Cd),
        enabled: Some(BootEnabled::Once),
        mode: Some(BootMode::UEFI),
    };
    m.set_boot(TEST_UUID, patch).unwrap();
    let s = m.system(TEST_UUID).unwrap();
    assert_eq!(
        s.boot,
        BootOverride {
            target: BootTarget::Cd,
            enabled: BootEnabled::Once,
            mode: BootMode::UEFI
        }
    );
    // a GET never writes: reading twice gives the same answer
    assert_eq!(m.system(TEST_UUID).unwrap(), s);

    m.reset(TEST_UUID, ResetType::On).unwrap();
    let s = m.system(TEST_UUID).unwrap();
    assert_eq!(s.power, PowerState::On);
    assert_eq!(
        (s.boot.target, s.boot.enabled),
        (BootTarget::Hdd, BootEnabled::Continuous),
        "Once consumed"
    );

    m.set_boot(
        TEST_UUID,
        BootPatch {
            target: Some(BootTarget::Pxe),
            enabled: Some(BootEnabled::Continuous),
            mode: None,
        },
    )
    .unwrap();
    m.reset(TEST_UUID, ResetType::ForceRestart).unwrap();
    let s = m.system(TEST_UUID).unwrap();
    assert_eq!(
        (s.boot.target, s.boot.enabled),
        (BootTarget::Pxe, BootEnabled::Continuous),
        "Continuous stays"
    );
    m.reset(TEST_UUID, ResetType::GracefulRestart).unwrap();
    m.set_boot(
        TEST_UUID,
        BootPatch {
            mode: Some(BootMode::Legacy),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(m.system(TEST_UUID).unwrap().boot.mode, BootMode::Legacy);
}

#[test]
fn concurrent_boot_patches_are_serialised() {
    let _g = serial();
    let m = Arc::new(machine(Scope::Allow(vec!["test".into()])));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let m = m.clone();
            std::thread::spawn(move || {
                let t = if i % 2 == 0 {
                    BootTarget::Pxe
                } else {
                    BootTarget::Cd
                };
                m.set_boot(
                    TEST_UUID,
                    BootPatch {
                        target: Some(t),
                        enabled: Some(BootEnabled::Continuous),
                        mode: None,
                    },
                )
                .unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = m.system(TEST_UUID).unwrap();
    assert!(matches!(s.boot.target, BootTarget::Pxe | BootTarget::Cd));
    assert_eq!(s.boot.enabled, BootEnabled::Continuous);
}

#[test]
fn insert_refuses_bad_images_and_leaves_nothing_inserted() {
    let _g = serial();
    let m = machine(Scope::Allow(vec!["test".into()]));
    let req = InsertRequest {
        image: "http://127.0.0.1:9/none.iso".into(),
        inserted: true,
        write_protected: true,
    };
    assert!(matches!(
        m.insert_media(TEST_UUID, MediaSlot::Cd, &req),
        Err(MachineError::BadRequest(_))
    ));
    assert!(!m.system(TEST_UUID).unwrap().media[0].inserted);
    m.eject_media(TEST_UUID, MediaSlot::Cd).unwrap();
}

/// Polls `f` until it holds; events are asynchronous, the bound is generous
/// and only stops a broken build from hanging.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "never saw: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn gets_come_from_memory_kept_true_by_libvirt_events() {
    let _g = serial();
    let m = machine(Scope::Allow(vec!["test".into()]));
    assert!(m.events_live(), "the test driver delivers lifecycle events");
    let before = m.system(TEST_UUID).unwrap();
    assert_eq!(before.power, PowerState::On);
    // what a GET from memory (no libvirt call) sees: the same, and the same
    // Arc while nothing changes
    let peeked = m.peek(TEST_UUID).expect("read once, now in memory");
    assert_eq!(*peeked, before);
    assert!(Arc::ptr_eq(&peeked, &m.peek(TEST_UUID).unwrap()));
    assert!(
        m.peek(&TEST_UUID.to_ascii_uppercase()).is_none(),
        "only the canonical UUID is answered from memory"
    );
    // behind the BMC's back: virsh destroy / start / edit on another connection
    let conn = virt::connect::Connect::open(Some("test:///default")).unwrap();
    let dom = conn.lookup_domain_by_uuid_string(TEST_UUID).unwrap();
    dom.destroy().unwrap();
    eventually("power Off from memory after an outside destroy", || {
        m.peek(TEST_UUID)
            .is_some_and(|i| i.power == PowerState::Off)
    });
    eventually("power Off after an outside destroy", || {
        m.system(TEST_UUID).unwrap().power == PowerState::Off
    });
    dom.create().unwrap();
    eventually("power On after an outside start", || {
        m.system(TEST_UUID).unwrap().power == PowerState::On
    });
    let xml = dom
        .xml_desc(virt::sys::VIR_DOMAIN_XML_INACTIVE | virt::sys::VIR_DOMAIN_XML_SECURE)
        .unwrap();
    let start = xml.find("<vcpu").unwrap();
    let end = xml[start..].find("</vcpu>").unwrap() + start;
    let open_end = xml[start..end].find('>').unwrap() + start + 1;
    let more = before.cpus.logical() + 1;
    let edited = format!("{}{more}{}", &xml[..open_end], &xml[end..]);
    conn.define_domain_xml(&edited).unwrap();
    // a definition drops the entry: memory no longer answers until a read
    eventually("the edited definition", || {
        m.peek(TEST_UUID).is_none_or(|i| i.cpus.logical() == more)
            && m.system(TEST_UUID).unwrap().cpus.logical() == more
    });
    assert_eq!(m.peek(TEST_UUID).unwrap().cpus.logical(), more);
    // changes made through the BMC are seen by the very next GET
    m.set_boot(
        TEST_UUID,
        BootPatch {
            target: Some(BootTarget::Pxe),
            enabled: Some(BootEnabled::Continuous),
            mode: None,
        },
    )
    .unwrap();
    assert_eq!(m.system(TEST_UUID).unwrap().boot.target, BootTarget::Pxe);
    // The definition event of that very change may arrive after the read above
    // and drop the entry again: memory then has nothing, never the old target.
    assert!(
        m.peek(TEST_UUID)
            .is_none_or(|i| i.boot.target == BootTarget::Pxe),
        "a boot change made through the BMC is never answered stale from memory"
    );
    m.reset(TEST_UUID, ResetType::ForceOff).unwrap();
    assert!(
        m.peek(TEST_UUID).is_none_or(|i| i.power == PowerState::Off),
        "a change made through the BMC is never answered stale from memory"
    );
    assert_eq!(m.system(TEST_UUID).unwrap().power, PowerState::Off);
    m.reset(TEST_UUID, ResetType::On).unwrap();
    assert_eq!(m.system(TEST_UUID).unwrap().power, PowerState::On);
    conn.define_domain_xml(&xml).unwrap();
}
