//! The fw_cfg Ignition file of a node is readable under AppArmor without any rule
//! of shiftlab's: libvirt's `virt-aa-helper` (which writes each VM's profile) adds
//! a read rule for every `<sysinfo type='fwcfg'>` entry with a `file`
//! (libvirt `src/security/virt-aa-helper.c`, the loop over `sysinfo[i]->fw_cfgs`:
//! `vah_add_file(&buf, f->file, "r")`). This keeps that true for the domain XML
//! shiftlab renders: the helper runs in dry-run mode (`-d`: print the profile,
//! load nothing) on the real rendered control-plane XML.

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use shiftlab::libvirt::xml::write::{domain_xml, Accel, NodePaths};
use shiftlab::plan;
use shiftlab::spec::{self, Env};

const HELPER: &str = "/usr/lib/libvirt/virt-aa-helper";

#[test]
fn virt_aa_helper_grants_read_on_the_fwcfg_ignition_file() {
    if !Path::new(HELPER).exists() {
        // Debian/Ubuntu ship it with libvirt-daemon-system; SELinux hosts do not.
        eprintln!("SKIP: {HELPER} is not installed (no AppArmor libvirt on this host)");
        return;
    }
    let dir = common::repo().join("tests/golden");
    let text = std::fs::read_to_string(dir.join("upi.cluster.yaml")).unwrap();
    let env = Env {
        home: None,
        base_dir: dir,
        libvirt_default_uri: None,
    };
    let spec = spec::from_str(&text, "upi.cluster.yaml", &env)
        .unwrap()
        .spec;
    let plan = plan::derive(&spec);
    let node = plan.node("lab1-ctlplane-0").unwrap();

    // A real file: the helper resolves the paths it grants.
    let tmp = tempfile::tempdir().unwrap();
    let ign = tmp.path().join("lab1-ctlplane-0.ign");
    std::fs::write(&ign, b"{\"ignition\":{\"version\":\"3.4.0\"}}").unwrap();
    let ign = ign.canonicalize().unwrap();
    let ign_s = ign.to_str().unwrap();
    let xml = domain_xml(
        &plan,
        node,
        Accel::Kvm,
        &NodePaths {
            ignition: Some(ign_s),
            console_log: "/var/log/libvirt/qemu/lab1-ctlplane-0-console.log",
            cdrom: None,
        },
    );
    assert!(
        xml.contains(&format!(
            "<entry name='opt/com.coreos/config' file='{ign_s}'/>"
        )),
        "the rendered XML has the fw_cfg entry:\n{xml}"
    );

    let mut child = Command::new(HELPER)
        .args(["-d", "-c", "-u", &format!("libvirt-{}", node.uuid)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(xml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "virt-aa-helper failed: {stderr}\n{stdout}"
    );
    // The dry run prints the profile on stderr (libvirt 9.0) or stdout.
    let printed = format!("{stdout}{stderr}");
    let rule = format!("\"{ign_s}\" r,");
    assert!(
        printed.lines().any(|l| l.trim() == rule),
        "no read rule {rule} for the fw_cfg file in:\n{printed}"
    );
    // And nothing writable: the helper denies writes to read-only files.
    assert!(
        printed
            .lines()
            .any(|l| l.trim() == format!("deny \"{ign_s}\" w,")),
        "{printed}"
    );
}
