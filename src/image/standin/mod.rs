//! The stand-in node image: a tiny bootable qcow2 (FAT + syslinux + Debian's
//! kernel + a busybox initramfs) that behaves, from the network's point of
//! view, like an OpenShift node. See `docs/standin.md`.
//!
//! Everything comes from the host's Debian packages; the build never touches
//! the network. The guest side is `assets/standin/init`.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

use crate::release::CpuLevel;

mod cpio;
mod dhcp6;
mod iso;
mod kernel;
mod modules;

pub use cpio::{cpio_newc, elf_is_static, CpioEntry};
pub use dhcp6::ldd_paths;
pub use iso::{build_iso, build_iso_for, isolinux_cfg, IGNITION_EMBED_AREA, ISO_VOLUME_ID};
pub use kernel::{pick_newest_kernel, version_cmp, Kernel};
pub use modules::{module_load_order, module_name, module_plan, Compression, Module};

use cpio::{find_busybox, initramfs};
use kernel::newest_kernel;
use modules::collect_modules;

/// PID 1 of the initramfs (also the udhcpc script and the HTTP responder).
pub const INIT_SCRIPT: &str = include_str!("../../../assets/standin/init");

/// Prefix of the machine-readable line the stand-in prints on ttyS0; the rest
/// of the line is a flat JSON object of strings.
pub const REPORT_PREFIX: &str = "SHIFTLAB-STANDIN-REPORT ";

/// fw_cfg key the stand-in reads its Ignition from (as on Fedora CoreOS).
pub const FW_CFG_IGNITION_KEY: &str = "opt/com.coreos/config";

/// Control port (all roles): `GET /fail-readyz`, `/restore-readyz`, `/report`.
pub const CONTROL_PORT: u16 = 8000;

/// Kernel modules the initramfs loads, in dependency order (dependencies
/// found in `modules.dep` are added before the module that needs them).
pub const MODULES: &[&str] = &[
    "qemu_fw_cfg",
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
    "virtio_blk",
    // The FAT boot filesystem: a stand-in booted from its live ISO "installs" by
    // writing its disk image and its Ignition to `/ignition/config.ign` on it, as
    // coreos-installer does (docs/standin.md); a disk boot reads it back.
    "fat",
    "vfat",
    "nls_cp437",
    "nls_ascii",
    "nls_utf8",
];

/// Modules loaded when the kernel has them: the ACPI power button and evdev,
/// so that an ACPI shutdown (`virsh shutdown`, Redfish GracefulShutdown)
/// powers the stand-in off.
pub const OPTIONAL_MODULES: &[&str] = &["button", "evdev"];

/// Kernel command line given to the stand-in by syslinux. `no_timer_check`: under
/// TCG on a loaded host the emulated CPU can be too slow for the kernel's IO-APIC
/// timer check, which then panics ("IO-APIC + timer doesn't work!") before init;
/// the check proves nothing about a virtual machine's timer (cloud images set it).
pub const KERNEL_CMDLINE: &str = "console=ttyS0,115200 quiet loglevel=3 no_timer_check";

/// Kernel argument naming the x86-64 level the image stands in for (an image
/// built with `--cpu-level`): the init refuses to come up on a CPU without it,
/// as a CoreOS built for that level does not boot there (release::cpu_level).
pub const CPU_LEVEL_ARG: &str = "shiftlab.cpu_level";

/// The kernel command line of an image built for `level` (`None`: any CPU).
pub fn kernel_cmdline(level: Option<CpuLevel>) -> String {
    match level {
        Some(l) => format!("{KERNEL_CMDLINE} {CPU_LEVEL_ARG}={l}"),
        None => KERNEL_CMDLINE.to_string(),
    }
}

/// Host tools the build runs, and the Debian package that ships each.
const TOOLS: &[(&str, &str)] = &[
    ("mkfs.vfat", "dosfstools"),
    ("syslinux", "syslinux"),
    ("mcopy", "mtools"),
    ("qemu-img", "qemu-utils"),
];

/// Build the stand-in image into `out` (qcow2, about 10 MB), atomically:
/// the file appears complete or not at all.
pub fn build(out: &Path) -> Result<()> {
    build_for(out, None)
}

/// [`build`] for an image that needs the x86-64 `level` (`None`: any CPU).
pub fn build_for(out: &Path, level: Option<CpuLevel>) -> Result<()> {
    let tools = Tools::find()?;
    let work = TempDir::new("shiftlab-standin")?;
    let parts = build_disk(&tools, work.path(), level)?;
    write_atomically(out, |tmp| {
        run(Command::new(&tools.qemu_img)
            .args(["convert", "-q", "-f", "raw", "-O", "qcow2"])
            .arg(&parts.disk)
            .arg(tmp))
        .map(drop)
    })
    .with_context(|| format!("writing stand-in image {}", out.display()))?;
    tracing::info!("stand-in image written to {}", out.display());
    Ok(())
}

/// What [`build_disk`] made in its work directory.
struct DiskParts {
    /// The raw bootable disk: FAT with syslinux, `vmlinuz`, `initrd.img`.
    disk: PathBuf,
    /// The kernel and the initramfs it boots, also on their own (the live ISO
    /// boots them straight from the ISO).
    kernel: PathBuf,
    initrd: PathBuf,
}

/// The raw stand-in disk, built in `work`.
fn build_disk(tools: &Tools, work: &Path, level: Option<CpuLevel>) -> Result<DiskParts> {
    let kernel = newest_kernel(Path::new("/boot"))?;
    let busybox = find_busybox()?;
    let moddir = Path::new("/lib/modules").join(&kernel.version);
    let modules = collect_modules(&moddir)?;
    tracing::info!(
        kernel = %kernel.version,
        modules = modules.len(),
        "building the stand-in disk"
    );
    let initrd = work.join("initrd.img");
    let dhclient = dhcp6::files()?.unwrap_or_default();
    let cpio = initramfs(&busybox, &modules, &dhclient)?;
    // gzip (the kernel unpacks it, CONFIG_RD_GZIP): fewer bytes for SeaBIOS and
    // syslinux to read under TCG; flate2's header has no time, so the same
    // inputs still give the same bytes.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &cpio).context("compressing initramfs")?;
    fs::write(&initrd, gz.finish().context("compressing initramfs")?)
        .context("writing initramfs")?;
    let cfg = work.join("syslinux.cfg");
    fs::write(&cfg, syslinux_cfg(level)).context("writing syslinux.cfg")?;

    let kernel_len = fs::metadata(&kernel.path)?.len();
    let initrd_len = fs::metadata(&initrd)?.len();
    let raw = work.join("standin.raw");
    let f = fs::File::create(&raw).context("creating raw image")?;
    f.set_len(fat_image_size(kernel_len + initrd_len))
        .context("sizing raw image")?;
    drop(f);

    run(Command::new(&tools.mkfs_vfat)
        .args(["-n", "STANDIN", "-i", "5348494c"])
        .arg(&raw))?;
    run(Command::new(&tools.syslinux).arg("--install").arg(&raw))?;
    for (src, dst) in [
        (kernel.path.as_path(), "::vmlinuz"),
        (initrd.as_path(), "::initrd.img"),
        (cfg.as_path(), "::syslinux.cfg"),
    ] {
        run(Command::new(&tools.mcopy)
            .env("MTOOLS_SKIP_CHECK", "1")
            .arg("-o")
            .arg("-i")
            .arg(&raw)
            .arg(src)
            .arg(dst))?;
    }
    Ok(DiskParts {
        disk: raw,
        kernel: kernel.path,
        initrd,
    })
}

/// Write `out` through `make(tmp)`: the tool writes a temporary file beside it
/// (`files::AtomicFile`: a random name, created new, so nothing planted is
/// written through), renamed over it once complete and synced; on failure the
/// temporary file goes.
fn write_atomically(out: &Path, make: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    if out.file_name().is_none() {
        bail!("output path {} has no file name", out.display());
    }
    let file = crate::files::AtomicFile::create(out, 0o644)?;
    make(file.temp_path())?;
    // The tool wrote through a descriptor of its own: sync what the name holds.
    fs::File::open(file.temp_path())
        .and_then(|f| f.sync_all())
        .with_context(|| format!("syncing {}", file.temp_path().display()))?;
    file.commit()
        .with_context(|| format!("renaming into {}", out.display()))
}

/// The JSON payload of the last report line in a console log, if any.
pub fn find_report(console: &str) -> Option<&str> {
    console.lines().rev().find_map(|l| {
        let l = l.trim_end_matches('\r');
        let i = l.find(REPORT_PREFIX)?;
        let json = l[i + REPORT_PREFIX.len()..].trim();
        (json.starts_with('{') && json.ends_with('}')).then_some(json)
    })
}

/// The syslinux configuration: boot the kernel at once, console on ttyS0.
pub fn syslinux_cfg(level: Option<CpuLevel>) -> String {
    format!(
        "SERIAL 0 115200\nDEFAULT standin\nPROMPT 0\nTIMEOUT 0\nLABEL standin\n  \
         KERNEL /vmlinuz\n  INITRD /initrd.img\n  APPEND {}\n",
        kernel_cmdline(level)
    )
}

/// Size of the FAT image for `payload` bytes of files: the payload plus
/// 25% and 2 MiB for FAT structures and syslinux, rounded up to a MiB.
pub fn fat_image_size(payload: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    let want = payload + payload / 4 + 2 * MIB;
    want.div_ceil(MIB) * MIB
}

struct Tools {
    mkfs_vfat: PathBuf,
    syslinux: PathBuf,
    mcopy: PathBuf,
    qemu_img: PathBuf,
}

impl Tools {
    fn find() -> Result<Tools> {
        let mut found = Vec::new();
        for (tool, package) in TOOLS {
            found.push(find_tool(tool, package)?);
        }
        let mut it = found.into_iter();
        let mut next = || it.next().expect("one path per tool");
        Ok(Tools {
            mkfs_vfat: next(),
            syslinux: next(),
            mcopy: next(),
            qemu_img: next(),
        })
    }
}

/// A tool on PATH (plus the sbin directories, which a non-root PATH may
/// lack), or an error naming the Debian package that ships it.
pub(super) fn find_tool(tool: &str, package: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    search_path(tool, &path)
        .ok_or_else(|| anyhow!("{tool} not found: install the Debian package {package}"))
}

fn search_path(tool: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Run `cmd`, require success; its standard output.
fn run(cmd: &mut Command) -> Result<String> {
    let desc = format!("{cmd:?}");
    tracing::debug!("running {desc}");
    let out = cmd.output().with_context(|| format!("running {desc}"))?;
    if !out.status.success() {
        let mut msg = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if msg.is_empty() {
            msg = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        }
        bail!("{desc} failed ({}): {msg}", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A private directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    /// A new directory of mode 0700 with a random name (one already there,
    /// planted or not, is never used).
    fn new(prefix: &str) -> Result<TempDir> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        for _ in 0..16 {
            let p = base.join(format!(
                "{prefix}-{}",
                hex::encode(crate::files::random_bytes(8)?)
            ));
            match fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("creating {}", p.display()));
                }
            }
        }
        bail!(
            "could not create a temporary directory in {}",
            base.display()
        )
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_is_found_in_a_noisy_console() {
        let log = "SeaBIOS\r\n[    1.2] random: crng init done\r\n\
            SHIFTLAB-STANDIN-REPORT {\"hostname\":\"a\"}\r\n\
            standin: x\r\n\
            SHIFTLAB-STANDIN-REPORT {\"hostname\":\"b\"}\r\n\
            SHIFTLAB-STANDIN-REPORT {\"hostname\":\"trunc\r\n";
        assert_eq!(find_report(log), Some("{\"hostname\":\"b\"}"));
        assert_eq!(find_report("nothing"), None);
    }

    #[test]
    fn init_script_is_embedded() {
        assert!(INIT_SCRIPT.starts_with("#!/bin/sh\n"));
        assert!(INIT_SCRIPT.contains(REPORT_PREFIX.trim_end()));
        assert!(INIT_SCRIPT.contains(FW_CFG_IGNITION_KEY));
        assert!(INIT_SCRIPT.contains(&format!("{CONTROL_PORT}:/fail-readyz")));
    }

    #[test]
    fn image_size_and_config() {
        assert_eq!(fat_image_size(0), 2 << 20);
        assert_eq!(fat_image_size(8 << 20), 12 << 20);
        assert_eq!(fat_image_size(10_000_000) % (1 << 20), 0);
        let cfg = syslinux_cfg(None);
        assert!(cfg.contains("KERNEL /vmlinuz"));
        assert!(cfg.contains("console=ttyS0"));
        assert!(!cfg.contains(CPU_LEVEL_ARG));
        let v3 = syslinux_cfg(Some(CpuLevel::V3));
        assert!(
            v3.contains("no_timer_check shiftlab.cpu_level=x86-64-v3\n"),
            "{v3}"
        );
        // The init reads the argument by this name (a sed pattern there).
        assert!(INIT_SCRIPT.contains(&format!("{}=", CPU_LEVEL_ARG.replace('.', "\\."))));
    }

    #[test]
    fn missing_tool_names_the_package() {
        assert!(search_path("definitely-not-a-tool-xyz", OsStr::new("/nonexistent")).is_none());
        let e = find_tool("definitely-not-a-tool-xyz", "some-package").unwrap_err();
        assert_eq!(
            e.to_string(),
            "definitely-not-a-tool-xyz not found: install the Debian package some-package"
        );
    }
}
