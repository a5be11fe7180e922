//! The stand-in **live ISO**: the stand-in node booted the way CoreOS's live ISO
//! boots, so that rehearsals of ISO-based installs (single node, agent, IPI
//! virtual media) exercise the same path as a real install: Ignition embedded by
//! the real `coreos-installer iso ignition embed`, the ISO attached as a CD-ROM
//! behind the disk in the boot order, an "install" that writes the disk and
//! reboots, and the node coming back from its disk.
//!
//! Layout, as CoreOS's live ISO has it where anything looks (docs/standin.md):
//!
//! ```text
//! /isolinux/isolinux.bin, ldlinux.c32, isolinux.cfg, boot.cat   BIOS El Torito boot
//! /images/pxeboot/vmlinuz, initrd.img                          kernel and initramfs
//! /images/pxeboot/rootfs.img    extra initrd: /standin/disk.img, the disk to install
//! /images/ignition.img          the embed area: 256 KiB of zeros until
//!                               coreos-installer writes an xz-compressed newc
//!                               cpio holding /config.ign into it
//! ```
//!
//! isolinux loads `ignition.img` as the last initrd (`initrd=a,b,c`), so the
//! kernel unpacks the embedded config to `/config.ign` in the initramfs, as on
//! CoreOS (the kernel skips the zero padding after the cpio). The kernel and
//! the initramfs are the stand-in disk's own.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::release::CpuLevel;

use super::{
    build_disk, cpio_newc, find_tool, kernel_cmdline, run, write_atomically, CpioEntry, TempDir,
    Tools,
};

/// The ISO's volume label (CoreOS's live ISO passes its label as `coreos.liveiso=`).
pub const ISO_VOLUME_ID: &str = "STANDIN-LIVE";

/// Size of `images/ignition.img`, the area `coreos-installer iso ignition embed`
/// writes into (zero-filled; 256 KiB holds a compressed config of any lab's size).
pub const IGNITION_EMBED_AREA: u64 = 256 * 1024;

/// Where the initramfs finds the disk image it installs (from `rootfs.img`).
pub const DISK_IN_LIVE_ROOT: &str = "standin/disk.img";

/// The isolinux configuration: the stand-in kernel, its initramfs, the disk to
/// install, and the Ignition embed area last, as CoreOS's
/// `initrd=/images/pxeboot/initrd.img,/images/ignition.img`.
pub fn isolinux_cfg(level: Option<CpuLevel>) -> String {
    format!(
        "SERIAL 0 115200\nDEFAULT standin\nPROMPT 0\nTIMEOUT 0\nLABEL standin\n  \
         KERNEL /images/pxeboot/vmlinuz\n  \
         APPEND initrd=/images/pxeboot/initrd.img,/images/pxeboot/rootfs.img,/images/ignition.img \
         {} coreos.liveiso={ISO_VOLUME_ID}\n",
        kernel_cmdline(level)
    )
}

/// BIOS boot files the ISO needs, and the Debian package that ships each.
const ISOLINUX_FILES: &[(&str, &str, &str)] = &[
    ("/usr/lib/ISOLINUX/isolinux.bin", "isolinux.bin", "isolinux"),
    (
        "/usr/lib/syslinux/modules/bios/ldlinux.c32",
        "ldlinux.c32",
        "syslinux-common",
    ),
];

/// Build the stand-in live ISO into `out` (about 20 MB), atomically. Its embed
/// area is empty: embed a node's Ignition with `coreos-installer iso ignition
/// embed`, as for a real CoreOS live ISO.
pub fn build_iso(out: &Path) -> Result<()> {
    build_iso_for(out, None)
}

/// [`build_iso`] for an image that needs the x86-64 `level` (`None`: any CPU).
pub fn build_iso_for(out: &Path, level: Option<CpuLevel>) -> Result<()> {
    let tools = Tools::find()?;
    let genisoimage = find_tool("genisoimage", "genisoimage")?;
    let mut boot_files = Vec::new();
    for (path, name, package) in ISOLINUX_FILES {
        let p = Path::new(path);
        if !p.is_file() {
            anyhow::bail!("{path} not found: install the Debian package {package}");
        }
        boot_files.push((p.to_path_buf(), *name));
    }
    let work = TempDir::new("shiftlab-standin-iso")?;
    let parts = build_disk(&tools, work.path(), level)?;

    let root = work.path().join("iso");
    let isolinux = root.join("isolinux");
    let pxeboot = root.join("images/pxeboot");
    fs::create_dir_all(&isolinux).context("creating the ISO tree")?;
    fs::create_dir_all(&pxeboot).context("creating the ISO tree")?;
    for (src, name) in &boot_files {
        // genisoimage's -boot-info-table patches isolinux.bin: copies, never the host's.
        copy(src, &isolinux.join(name))?;
    }
    fs::write(isolinux.join("isolinux.cfg"), isolinux_cfg(level))
        .context("writing isolinux.cfg")?;
    copy(&parts.kernel, &pxeboot.join("vmlinuz"))?;
    copy(&parts.initrd, &pxeboot.join("initrd.img"))?;
    let disk = fs::read(&parts.disk).context("reading the stand-in disk")?;
    fs::write(pxeboot.join("rootfs.img"), rootfs_img(disk)?).context("writing rootfs.img")?;
    let embed = fs::File::create(root.join("images/ignition.img"))
        .context("creating images/ignition.img")?;
    embed
        .set_len(IGNITION_EMBED_AREA)
        .context("sizing images/ignition.img")?;
    drop(embed);

    write_atomically(out, |tmp| {
        run(Command::new(&genisoimage)
            .args(["-quiet", "-V", ISO_VOLUME_ID, "-R", "-J"])
            .args(["-b", "isolinux/isolinux.bin", "-c", "isolinux/boot.cat"])
            .args(["-no-emul-boot", "-boot-load-size", "4", "-boot-info-table"])
            .arg("-o")
            .arg(tmp)
            .arg(&root))
        .map(drop)
    })
    .with_context(|| format!("writing stand-in live ISO {}", out.display()))?;
    tracing::info!("stand-in live ISO written to {}", out.display());
    Ok(())
}

/// `rootfs.img`: a gzip-compressed newc cpio holding the disk image the live
/// stand-in installs (the kernel unpacks it next to the initramfs).
fn rootfs_img(disk: Vec<u8>) -> Result<Vec<u8>> {
    let dir = DISK_IN_LIVE_ROOT
        .rsplit_once('/')
        .map(|(d, _)| d)
        .unwrap_or_default();
    let cpio = cpio_newc(&[
        CpioEntry::dir(dir),
        CpioEntry::file(DISK_IN_LIVE_ROOT, 0o644, disk),
    ]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&cpio).context("compressing rootfs.img")?;
    gz.finish().context("compressing rootfs.img")
}

fn copy(from: &Path, to: &PathBuf) -> Result<()> {
    fs::copy(from, to)
        .map(|_| ())
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn isolinux_loads_the_embed_area_last() {
        let cfg = isolinux_cfg(None);
        let append = cfg.lines().find(|l| l.contains("APPEND")).unwrap();
        let initrds = append
            .split_whitespace()
            .find_map(|w| w.strip_prefix("initrd="))
            .unwrap();
        assert_eq!(
            initrds.split(',').collect::<Vec<_>>(),
            [
                "/images/pxeboot/initrd.img",
                "/images/pxeboot/rootfs.img",
                "/images/ignition.img"
            ]
        );
        assert!(append.contains("console=ttyS0"));
        assert!(append.contains(&format!("coreos.liveiso={ISO_VOLUME_ID}")));
        assert!(cfg.contains("KERNEL /images/pxeboot/vmlinuz"));
    }

    #[test]
    fn rootfs_img_carries_the_disk() {
        let gz = rootfs_img(b"DISK".to_vec()).unwrap();
        let mut cpio = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut cpio)
            .unwrap();
        let text = String::from_utf8_lossy(&cpio);
        assert!(text.starts_with("070701"));
        assert!(text.contains("standin/disk.img"));
        assert!(text.contains("DISK"));
        assert!(text.contains("TRAILER!!!"));
    }
}
