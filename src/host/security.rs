//! The host's MAC (AppArmor, SELinux) and DAC versus the fw_cfg Ignition file.
//!
//! shiftlab gives a node its Ignition with `<sysinfo type='fwcfg'><entry
//! name='opt/com.coreos/config' file='…'/>`, the file being a volume of the
//! cluster's pool. libvirt's security drivers handle that file themselves, so no
//! host policy needs changing (and `security_driver = "none"` is never needed):
//! - AppArmor: `virt-aa-helper` grants the VM's profile read on every fw_cfg file
//!   (libvirt `src/security/virt-aa-helper.c`, `vah_add_file(&buf, f->file, "r")`
//!   over `sysinfo[i]->fw_cfgs`); measured on Debian 12, libvirt 9.0.0
//!   (`tests/apparmor_fwcfg.rs` keeps it true);
//! - SELinux: `virSecuritySELinuxSetSysinfoLabel` labels it at start and
//!   `virSecuritySELinuxRestoreSysinfoLabel` restores it
//!   (`src/security/security_selinux.c`); DAC: `virSecurityDACRestoreSysinfoLabel`
//!   (`src/security/security_dac.c`).
//!
//! `<sysinfo type='fwcfg'>` itself is libvirt 6.5.0 (the series "conf: Add firmware
//! blob configuration", libvir-list 2020-06, released in 6.5.0 on 2020-07-03). The
//! first release whose security drivers label the sysinfo files was not
//! established from libvirt's NEWS here, so below 9.0.0 (the version measured)
//! preflight warns rather than guesses.

use std::path::Path;

/// libvirt's packed version: major * 1,000,000 + minor * 1,000 + micro.
pub fn version_string(v: u32) -> String {
    format!("{}.{}.{}", v / 1_000_000, (v / 1_000) % 1_000, v % 1_000)
}

/// `<sysinfo type='fwcfg'>`: libvirt 6.5.0.
pub const FWCFG_MIN: u32 = 6_005_000;
/// The release where the fw_cfg file's labelling was measured (Debian 12).
pub const LABELLING_VERIFIED: u32 = 9_000_000;

/// A problem (nothing is created) when libvirt cannot give a node its Ignition
/// through fw_cfg at all.
pub fn fwcfg_problem(libvirt: u32, fwcfg_nodes: usize) -> Option<String> {
    (fwcfg_nodes > 0 && libvirt < FWCFG_MIN).then(|| {
        format!(
            "libvirt {}: {fwcfg_nodes} node(s) get their Ignition through <sysinfo type='fwcfg'>, which needs libvirt 6.5.0 or later; upgrade libvirt on the host",
            version_string(libvirt)
        )
    })
}

/// A warning when libvirt has fw_cfg but its labelling of the file is unverified.
pub fn fwcfg_labelling_warning(libvirt: u32, fwcfg_nodes: usize) -> Option<String> {
    (fwcfg_nodes > 0 && (FWCFG_MIN..LABELLING_VERIFIED).contains(&libvirt)).then(|| {
        format!(
            "libvirt {}: that its AppArmor/SELinux/DAC drivers label fw_cfg Ignition files is verified from 9.0.0 on; if a node fails with \"Could not open '<file>.ign': Permission denied\", upgrade libvirt (do not set security_driver = \"none\")",
            version_string(libvirt)
        )
    })
}

/// SELinux on this host, from `/sys/fs/selinux/enforce` (absent: no SELinux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selinux {
    Absent,
    Permissive,
    Enforcing,
}

pub fn selinux_mode(enforce_file: Option<&str>) -> Selinux {
    match enforce_file.map(str::trim) {
        None => Selinux::Absent,
        Some("1") => Selinux::Enforcing,
        Some(_) => Selinux::Permissive,
    }
}

/// The type of an SELinux context (`user:role:type:level`).
fn context_type(ctx: &str) -> Option<&str> {
    ctx.trim_end_matches('\0').split(':').nth(2)
}

/// Types of a pool directory under which QEMU (svirt_t) reaches the volumes
/// libvirt labels: the policy's own for `/var/lib/libvirt/images`.
const POOL_DIR_TYPES: &[&str] = &["virt_image_t", "svirt_image_t"];

/// A warning when SELinux enforces and the pool directory is not labelled for
/// images (a pool under /home, say): QEMU may not traverse it.
pub fn pool_dir_warning(mode: Selinux, dir: &Path, ctx: Option<&str>) -> Option<String> {
    if mode != Selinux::Enforcing {
        return None;
    }
    let ty = ctx.and_then(context_type);
    if ty.is_some_and(|t| POOL_DIR_TYPES.contains(&t)) {
        return None;
    }
    let d = dir.display();
    Some(format!(
        "libvirt.pool_path {d}: SELinux context {} is not virt_image_t; QEMU may be denied the node volumes. Label it: semanage fcontext -a -t virt_image_t '{d}(/.*)?' && restorecon -Rv {d}",
        ctx.map(|c| c.trim_end_matches('\0')).unwrap_or("unknown")
    ))
}

/// After a node started: libvirt gave its fw_cfg file the VM's label
/// (`svirt_image_t` with the VM's categories). A warning otherwise.
pub fn running_label_warning(mode: Selinux, file: &Path, ctx: Option<&str>) -> Option<String> {
    if mode != Selinux::Enforcing {
        return None;
    }
    match ctx.and_then(context_type) {
        Some("svirt_image_t") => None,
        other => Some(format!(
            "{}: SELinux type {} while its VM runs, not svirt_image_t: libvirt did not label the fw_cfg Ignition file; upgrade libvirt if the node cannot read its Ignition",
            file.display(),
            other.unwrap_or("unknown")
        )),
    }
}

/// The host's SELinux mode.
pub fn selinux() -> Selinux {
    selinux_mode(
        std::fs::read_to_string("/sys/fs/selinux/enforce")
            .ok()
            .as_deref(),
    )
}

/// The `security.selinux` attribute of a path (what `ls -Z` shows).
pub fn selinux_context(path: &Path) -> Option<String> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let name = c"security.selinux";
    let mut buf = vec![0u8; 256];
    // SAFETY: valid C strings and a buffer of the length given.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n <= 0 {
        return None;
    }
    buf.truncate(n as usize);
    Some(
        String::from_utf8_lossy(&buf)
            .trim_end_matches('\0')
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_print_as_libvirt_does() {
        assert_eq!(version_string(9_000_000), "9.0.0");
        assert_eq!(version_string(6_005_000), "6.5.0");
        assert_eq!(version_string(10_010_001), "10.10.1");
    }

    #[test]
    fn fwcfg_needs_6_5_and_labelling_is_verified_from_9_0() {
        // Older than fw_cfg sysinfo: refused, naming the fix.
        let p = fwcfg_problem(6_004_000, 4).unwrap();
        assert!(p.contains("libvirt 6.4.0"), "{p}");
        assert!(p.contains("6.5.0 or later; upgrade libvirt"), "{p}");
        // No fw_cfg node (an ISO-booted single node): nothing to say.
        assert_eq!(fwcfg_problem(6_004_000, 0), None);
        assert_eq!(fwcfg_problem(6_005_000, 4), None);
        // Ubuntu 22.04's 8.0.0: works, labelling not verified: a warning.
        let w = fwcfg_labelling_warning(8_000_000, 4).unwrap();
        assert!(w.contains("libvirt 8.0.0"), "{w}");
        assert!(w.contains("do not set security_driver = \"none\""), "{w}");
        assert_eq!(fwcfg_labelling_warning(9_000_000, 4), None);
        assert_eq!(fwcfg_labelling_warning(6_004_000, 4), None);
        assert_eq!(fwcfg_labelling_warning(8_000_000, 0), None);
    }

    #[test]
    fn selinux_mode_from_the_enforce_file() {
        assert_eq!(selinux_mode(None), Selinux::Absent);
        assert_eq!(selinux_mode(Some("1")), Selinux::Enforcing);
        assert_eq!(selinux_mode(Some("0\n")), Selinux::Permissive);
    }

    #[test]
    fn pool_directory_must_be_an_image_type_when_enforcing() {
        let d = Path::new("/var/lib/libvirt/images/shiftlab");
        // Fedora's policy for /var/lib/libvirt/images.
        assert_eq!(
            pool_dir_warning(
                Selinux::Enforcing,
                d,
                Some("system_u:object_r:virt_image_t:s0\0")
            ),
            None
        );
        let home = Path::new("/home/me/pool");
        let w = pool_dir_warning(
            Selinux::Enforcing,
            home,
            Some("unconfined_u:object_r:user_home_t:s0"),
        )
        .unwrap();
        assert!(w.contains("user_home_t"), "{w}");
        assert!(
            w.contains("semanage fcontext -a -t virt_image_t '/home/me/pool(/.*)?'"),
            "{w}"
        );
        assert!(pool_dir_warning(Selinux::Permissive, home, None).is_none());
        assert!(pool_dir_warning(Selinux::Absent, home, None).is_none());
    }

    #[test]
    fn a_running_node_s_fwcfg_file_carries_the_vm_label() {
        let f = Path::new("/var/lib/libvirt/images/shiftlab/lab1-ctlplane-0.ign");
        assert_eq!(
            running_label_warning(
                Selinux::Enforcing,
                f,
                Some("system_u:object_r:svirt_image_t:s0:c104,c733")
            ),
            None
        );
        let w = running_label_warning(
            Selinux::Enforcing,
            f,
            Some("system_u:object_r:virt_image_t:s0"),
        )
        .unwrap();
        assert!(w.contains("virt_image_t while its VM runs"), "{w}");
        assert!(running_label_warning(Selinux::Absent, f, None).is_none());
    }
}
