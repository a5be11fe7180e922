//! The stand-in node image: a tiny bootable qcow2 (FAT + syslinux + Debian's
//! kernel + a busybox initramfs) that behaves, from the network's point of
//! view, like an OpenShift node. See `docs/standin.md`.
//!
//! Everything comes from the host's Debian packages; the build never touches
//! the network. The guest side is `assets/standin/init`.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

/// PID 1 of the initramfs (also the udhcpc script and the HTTP responder).
pub const INIT_SCRIPT: &str = include_str!("../../assets/standin/init");

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
];

/// Modules loaded when the kernel has them: the ACPI power button and evdev,
/// so that an ACPI shutdown (`virsh shutdown`, Redfish GracefulShutdown)
/// powers the stand-in off.
pub const OPTIONAL_MODULES: &[&str] = &["button", "evdev"];

/// Kernel command line given to the stand-in by syslinux.
pub const KERNEL_CMDLINE: &str = "console=ttyS0,115200 quiet loglevel=3";

const BUSYBOX_PATHS: &[&str] = &["/bin/busybox", "/usr/bin/busybox"];

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
    let tools = Tools::find()?;
    let kernel = newest_kernel(Path::new("/boot"))?;
    let busybox = find_busybox()?;
    let moddir = Path::new("/lib/modules").join(&kernel.version);
    let modules = collect_modules(&moddir)?;
    tracing::info!(
        kernel = %kernel.version,
        modules = modules.len(),
        "building stand-in image {}",
        out.display()
    );

    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let work = TempDir::new("shiftlab-standin")?;
    let initrd = work.path().join("initrd.img");
    let cpio = initramfs(&busybox, &modules)?;
    fs::write(&initrd, cpio).context("writing initramfs")?;
    let cfg = work.path().join("syslinux.cfg");
    fs::write(&cfg, syslinux_cfg()).context("writing syslinux.cfg")?;

    let kernel_len = fs::metadata(&kernel.path)?.len();
    let initrd_len = fs::metadata(&initrd)?.len();
    let raw = work.path().join("standin.raw");
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

    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = out
        .file_name()
        .ok_or_else(|| anyhow!("output path {} has no file name", out.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let converted = run(Command::new(&tools.qemu_img)
        .args(["convert", "-q", "-f", "raw", "-O", "qcow2"])
        .arg(&raw)
        .arg(&tmp))
    .and_then(|_| {
        fs::File::open(&tmp)?.sync_all()?;
        fs::rename(&tmp, out)
            .with_context(|| format!("renaming {} to {}", tmp.display(), out.display()))
    });
    if converted.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    converted.with_context(|| format!("writing stand-in image {}", out.display()))?;
    tracing::info!("stand-in image written to {}", out.display());
    Ok(())
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
pub fn syslinux_cfg() -> String {
    format!(
        "SERIAL 0 115200\nDEFAULT standin\nPROMPT 0\nTIMEOUT 0\nLABEL standin\n  \
         KERNEL /vmlinuz\n  INITRD /initrd.img\n  APPEND {KERNEL_CMDLINE}\n"
    )
}

/// Size of the FAT image for `payload` bytes of files: the payload plus
/// 25% and 2 MiB for FAT structures and syslinux, rounded up to a MiB.
pub fn fat_image_size(payload: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    let want = payload + payload / 4 + 2 * MIB;
    want.div_ceil(MIB) * MIB
}

// ------------------------------------------------------------------ kernel

/// A kernel found in /boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    pub version: String,
    pub path: PathBuf,
}

fn newest_kernel(boot: &Path) -> Result<Kernel> {
    let mut names = Vec::new();
    if let Ok(rd) = fs::read_dir(boot) {
        for e in rd.flatten() {
            names.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    let version = pick_newest_kernel(&names).ok_or_else(|| {
        anyhow!(
            "no kernel found in {} (vmlinuz-*): install the Debian package linux-image-amd64",
            boot.display()
        )
    })?;
    Ok(Kernel {
        path: boot.join(format!("vmlinuz-{version}")),
        version,
    })
}

/// The newest kernel version among `/boot` file names (`vmlinuz-<version>`).
pub fn pick_newest_kernel(names: &[String]) -> Option<String> {
    names
        .iter()
        .filter_map(|n| n.strip_prefix("vmlinuz-"))
        .filter(|v| !v.is_empty() && !v.ends_with(".old") && !v.ends_with(".bak"))
        .max_by(|a, b| version_cmp(a, b))
        .map(str::to_owned)
}

/// Compare version strings piecewise: digit runs numerically, the rest as text.
pub fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn pieces(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (pa, pb) = (pieces(a), pieces(b));
    for (x, y) in pa.iter().zip(pb.iter()) {
        let ord = match (x, y) {
            ((true, x), (true, y)) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if ord.is_ne() {
            return ord;
        }
    }
    pa.len().cmp(&pb.len())
}

// ----------------------------------------------------------------- modules

/// A kernel module to put in the initramfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Canonical name (underscores), e.g. `virtio_net`.
    pub name: String,
    /// Path relative to `/lib/modules/<version>`, possibly compressed.
    pub rel_path: String,
}

/// Canonical module name of a path in modules.dep: `kernel/x/virtio-net.ko.xz`
/// gives `virtio_net`.
pub fn module_name(path: &str) -> Option<String> {
    let file = path.rsplit('/').next()?;
    let stem = file.split(".ko").next()?;
    if stem.is_empty() || !file.contains(".ko") {
        return None;
    }
    Some(stem.replace('-', "_"))
}

/// Resolve `wanted` against `modules.dep` and `modules.builtin`: the modules
/// to load, each after its dependencies, built-in ones left out.
pub fn module_load_order(deps: &str, builtin: &str, wanted: &[&str]) -> Result<Vec<Module>> {
    let builtin: HashSet<String> = builtin
        .lines()
        .filter_map(|l| module_name(l.trim()))
        .collect();
    let mut table: HashMap<String, (String, Vec<String>)> = HashMap::new();
    for line in deps.lines() {
        let Some((path, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(name) = module_name(path.trim()) else {
            continue;
        };
        let needs = rest.split_whitespace().filter_map(module_name).collect();
        table.insert(name, (path.trim().to_owned(), needs));
    }

    fn visit(
        name: &str,
        table: &HashMap<String, (String, Vec<String>)>,
        builtin: &HashSet<String>,
        seen: &mut HashSet<String>,
        out: &mut Vec<Module>,
    ) -> Result<()> {
        if builtin.contains(name) || !seen.insert(name.to_owned()) {
            return Ok(());
        }
        let (path, needs) = table.get(name).ok_or_else(|| {
            anyhow!("kernel module {name} is neither in modules.dep nor built in")
        })?;
        // modules.dep lists dependencies so that loading them last-to-first works
        for dep in needs.iter().rev() {
            visit(dep, table, builtin, seen, out)?;
        }
        out.push(Module {
            name: name.to_owned(),
            rel_path: path.clone(),
        });
        Ok(())
    }

    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for w in wanted {
        visit(&w.replace('-', "_"), &table, &builtin, &mut seen, &mut out)?;
    }
    Ok(out)
}

/// [`MODULES`], then those of [`OPTIONAL_MODULES`] the kernel has, in load
/// order.
pub fn module_plan(deps: &str, builtin: &str) -> Result<Vec<Module>> {
    let known: HashSet<String> = deps
        .lines()
        .filter_map(|l| module_name(l.split(':').next()?.trim()))
        .chain(builtin.lines().filter_map(|l| module_name(l.trim())))
        .collect();
    let mut wanted = MODULES.to_vec();
    for m in OPTIONAL_MODULES {
        if known.contains(*m) {
            wanted.push(m);
        } else {
            tracing::warn!(
                "kernel module {m} not available, the stand-in will ignore ACPI shutdown"
            );
        }
    }
    module_load_order(deps, builtin, &wanted)
}

/// Modules with their (decompressed) contents.
fn collect_modules(moddir: &Path) -> Result<Vec<(Module, Vec<u8>)>> {
    let pkg = "install the Debian package linux-image-amd64 (matching the kernel in /boot)";
    let deps = fs::read_to_string(moddir.join("modules.dep"))
        .with_context(|| format!("reading {}/modules.dep: {pkg}", moddir.display()))?;
    let builtin = fs::read_to_string(moddir.join("modules.builtin")).unwrap_or_default();
    let order = module_plan(&deps, &builtin)?;
    order
        .into_iter()
        .map(|m| {
            let data = read_module(&moddir.join(&m.rel_path))?;
            Ok((m, data))
        })
        .collect()
}

/// Compression of a module file, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Xz,
    Zstd,
    Gzip,
}

impl Compression {
    pub fn of(path: &str) -> Compression {
        if path.ends_with(".xz") {
            Compression::Xz
        } else if path.ends_with(".zst") {
            Compression::Zstd
        } else if path.ends_with(".gz") {
            Compression::Gzip
        } else {
            Compression::None
        }
    }

    /// (tool, Debian package) that decompresses it.
    fn tool(self) -> Option<(&'static str, &'static str)> {
        match self {
            Compression::None => None,
            Compression::Xz => Some(("xz", "xz-utils")),
            Compression::Zstd => Some(("zstd", "zstd")),
            Compression::Gzip => Some(("gzip", "gzip")),
        }
    }
}

/// A module file's contents, decompressed (busybox insmod wants plain .ko).
fn read_module(path: &Path) -> Result<Vec<u8>> {
    let comp = Compression::of(&path.to_string_lossy());
    let Some((tool, package)) = comp.tool() else {
        return fs::read(path).with_context(|| format!("reading {}", path.display()));
    };
    let exe = find_tool(tool, package)?;
    let out = Command::new(&exe)
        .arg("-dc")
        .arg(path)
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    if !out.status.success() {
        bail!(
            "decompressing {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

// --------------------------------------------------------------- initramfs

fn find_busybox() -> Result<PathBuf> {
    let pkg = "install the Debian package busybox-static";
    let path = BUSYBOX_PATHS
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow!("busybox not found: {pkg}"))?;
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    match elf_is_static(&bytes) {
        Some(true) => Ok(path.to_path_buf()),
        Some(false) => bail!("{} is dynamically linked: {pkg}", path.display()),
        None => bail!("{} is not a 64-bit ELF executable: {pkg}", path.display()),
    }
}

/// Whether a 64-bit little-endian ELF file has no program interpreter
/// (`PT_INTERP`), i.e. is statically linked. None if it is not such an ELF.
pub fn elf_is_static(elf: &[u8]) -> Option<bool> {
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        if u32_at(phoff.checked_add(i.checked_mul(phentsize)?)?)? == PT_INTERP {
            return Some(false);
        }
    }
    Some(true)
}

fn initramfs(busybox: &Path, modules: &[(Module, Vec<u8>)]) -> Result<Vec<u8>> {
    let busybox = fs::read(busybox).with_context(|| format!("reading {}", busybox.display()))?;
    let mut entries = Vec::new();
    for d in [
        "bin",
        "sbin",
        "dev",
        "etc",
        "etc/standin",
        "lib",
        "lib/modules",
        "proc",
        "root",
        "run",
        "sys",
        "tmp",
        "usr",
        "usr/bin",
        "usr/sbin",
        "var",
    ] {
        entries.push(CpioEntry::dir(d));
    }
    entries.push(CpioEntry::char_dev("dev/console", 0o600, 5, 1));
    entries.push(CpioEntry::char_dev("dev/null", 0o666, 1, 3));
    entries.push(CpioEntry::file(
        "init",
        0o755,
        INIT_SCRIPT.as_bytes().to_vec(),
    ));
    entries.push(CpioEntry::file("bin/busybox", 0o755, busybox));
    for link in ["bin/sh", "sbin/init"] {
        entries.push(CpioEntry::symlink(link, "/bin/busybox"));
    }
    for link in ["bin/standin-dhcp", "bin/standin-http"] {
        entries.push(CpioEntry::symlink(link, "/init"));
    }
    let mut list = String::new();
    for (m, data) in modules {
        list.push_str(&m.name);
        list.push('\n');
        entries.push(CpioEntry::file(
            &format!("lib/modules/{}.ko", m.name),
            0o644,
            data.clone(),
        ));
    }
    entries.push(CpioEntry::file(
        "etc/standin/modules",
        0o644,
        list.into_bytes(),
    ));
    entries.push(CpioEntry::file(
        "etc/hosts",
        0o644,
        b"127.0.0.1 localhost\n".to_vec(),
    ));
    Ok(cpio_newc(&entries))
}

/// One member of a `newc` cpio archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpioEntry {
    pub name: String,
    pub mode: u32,
    pub rdev: (u32, u32),
    pub data: Vec<u8>,
}

impl CpioEntry {
    pub fn dir(name: &str) -> Self {
        Self::new(name, 0o040_755, Vec::new())
    }
    pub fn file(name: &str, perm: u32, data: Vec<u8>) -> Self {
        Self::new(name, 0o100_000 | perm, data)
    }
    pub fn symlink(name: &str, target: &str) -> Self {
        Self::new(name, 0o120_777, target.as_bytes().to_vec())
    }
    pub fn char_dev(name: &str, perm: u32, major: u32, minor: u32) -> Self {
        CpioEntry {
            rdev: (major, minor),
            ..Self::new(name, 0o020_000 | perm, Vec::new())
        }
    }
    fn new(name: &str, mode: u32, data: Vec<u8>) -> Self {
        CpioEntry {
            name: name.to_owned(),
            mode,
            rdev: (0, 0),
            data,
        }
    }
}

/// A `newc` cpio archive (what the kernel unpacks as initramfs): owner root,
/// mtime 0, inode numbers in order, so the same entries give the same bytes.
pub fn cpio_newc(entries: &[CpioEntry]) -> Vec<u8> {
    fn pad4(buf: &mut Vec<u8>) {
        while buf.len() % 4 != 0 {
            buf.push(0);
        }
    }
    fn member(buf: &mut Vec<u8>, ino: u32, e: &CpioEntry) {
        let nlink = if e.mode & 0o170_000 == 0o040_000 {
            2
        } else {
            1
        };
        let fields = [
            ino,
            e.mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime
            e.data.len() as u32,
            0, // dev major
            0, // dev minor
            e.rdev.0,
            e.rdev.1,
            e.name.len() as u32 + 1,
            0, // check
        ];
        buf.extend_from_slice(b"070701");
        for f in fields {
            buf.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        buf.extend_from_slice(e.name.as_bytes());
        buf.push(0);
        pad4(buf);
        buf.extend_from_slice(&e.data);
        pad4(buf);
    }
    let mut buf = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        member(&mut buf, i as u32 + 1, e);
    }
    member(&mut buf, 0, &CpioEntry::new("TRAILER!!!", 0, Vec::new()));
    buf
}

// ------------------------------------------------------------- host tools

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
fn find_tool(tool: &str, package: &str) -> Result<PathBuf> {
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

fn run(cmd: &mut Command) -> Result<()> {
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
    Ok(())
}

/// A private directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(prefix: &str) -> Result<TempDir> {
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for i in 0..100u32 {
            let p = base.join(format!("{prefix}-{}-{nanos:x}-{i}", std::process::id()));
            match fs::create_dir(&p) {
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

    const DEP: &str = "\
kernel/drivers/firmware/qemu_fw_cfg.ko:
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/net/core/failover.ko:
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/char/hw_random/virtio-rng.ko.xz: kernel/drivers/virtio/virtio.ko
";

    fn names(m: &[Module]) -> Vec<&str> {
        m.iter().map(|m| m.name.as_str()).collect()
    }

    #[test]
    fn load_order_follows_the_list_on_debian_12() {
        let m = module_load_order(DEP, "", MODULES).unwrap();
        assert_eq!(names(&m), MODULES);
        assert_eq!(m[0].rel_path, "kernel/drivers/firmware/qemu_fw_cfg.ko");
    }

    #[test]
    fn dependencies_come_first_and_builtins_are_skipped() {
        let builtin = "kernel/drivers/virtio/virtio.ko\nkernel/drivers/virtio/virtio_ring.ko\n";
        let m = module_load_order(DEP, builtin, &["virtio_net", "virtio-rng"]).unwrap();
        assert_eq!(
            names(&m),
            ["failover", "net_failover", "virtio_net", "virtio_rng"]
        );
        assert_eq!(
            m[3].rel_path,
            "kernel/drivers/char/hw_random/virtio-rng.ko.xz"
        );
    }

    #[test]
    fn optional_modules_when_present() {
        let m = module_plan(DEP, "").unwrap();
        assert_eq!(names(&m), MODULES);
        let dep = format!("{DEP}kernel/drivers/acpi/button.ko:\nkernel/drivers/input/evdev.ko:\n");
        let m = module_plan(&dep, "").unwrap();
        assert_eq!(&names(&m)[MODULES.len()..], ["button", "evdev"]);
        let m = module_plan(DEP, "kernel/drivers/input/evdev.ko\n").unwrap();
        assert_eq!(names(&m), MODULES, "built-in modules are not loaded");
    }

    #[test]
    fn missing_module_is_an_error() {
        let e = module_load_order(DEP, "", &["e1000"]).unwrap_err();
        assert!(e.to_string().contains("e1000"), "{e}");
    }

    #[test]
    fn module_names() {
        assert_eq!(
            module_name("kernel/a/virtio-net.ko.zst").unwrap(),
            "virtio_net"
        );
        assert_eq!(module_name("virtio.ko").unwrap(), "virtio");
        assert_eq!(module_name("kernel/a/README"), None);
        assert_eq!(Compression::of("a.ko.xz"), Compression::Xz);
        assert_eq!(Compression::of("a.ko.zst"), Compression::Zstd);
        assert_eq!(Compression::of("a.ko.gz"), Compression::Gzip);
        assert_eq!(Compression::of("a.ko"), Compression::None);
    }

    #[test]
    fn newest_kernel_by_version() {
        let names: Vec<String> = [
            "config-6.1.0-9-amd64",
            "vmlinuz-6.1.0-9-amd64",
            "vmlinuz-6.1.0-56-amd64",
            "vmlinuz-6.1.0-10-amd64",
            "vmlinuz-5.10.0-30-amd64",
            "initrd.img-6.1.0-99-amd64",
            "vmlinuz-6.1.0-57-amd64.old",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(pick_newest_kernel(&names).unwrap(), "6.1.0-56-amd64");
        assert_eq!(pick_newest_kernel(&[]), None);
        assert!(version_cmp("6.10.1", "6.9.12").is_gt());
        assert!(version_cmp("6.1.0-56", "6.1.0-56-amd64").is_lt());
    }

    #[test]
    fn cpio_layout() {
        let a = cpio_newc(&[
            CpioEntry::dir("bin"),
            CpioEntry::file("init", 0o755, b"#!/bin/sh\n".to_vec()),
            CpioEntry::symlink("bin/sh", "/bin/busybox"),
            CpioEntry::char_dev("dev/console", 0o600, 5, 1),
        ]);
        assert_eq!(a.len() % 4, 0);
        assert!(a.starts_with(b"070701"));
        // first header: ino 1, mode 040755, nlink 2, namesize 4 ("bin\0")
        let h = std::str::from_utf8(&a[..110]).unwrap();
        assert_eq!(&h[6..14], "00000001");
        assert_eq!(&h[14..22], "000041ED");
        assert_eq!(&h[38..46], "00000002");
        assert_eq!(&h[94..102], "00000004");
        assert_eq!(&a[110..114], b"bin\0");
        // second member starts 4-aligned after the name: 110 + 4 = 114 -> 116
        assert_eq!(&a[116..122], b"070701");
        let s = String::from_utf8_lossy(&a);
        assert!(s.contains("init\0"));
        assert!(s.contains("#!/bin/sh\n"));
        assert!(s.contains("/bin/busybox"));
        // char device: rdevmajor 5, rdevminor 1
        let i = s.find("dev/console").unwrap() - 110;
        assert_eq!(&s[i + 78..i + 86], "00000005");
        assert_eq!(&s[i + 86..i + 94], "00000001");
        assert!(s.contains("TRAILER!!!\0"));
        // deterministic
        assert_eq!(
            a,
            cpio_newc(&[
                CpioEntry::dir("bin"),
                CpioEntry::file("init", 0o755, b"#!/bin/sh\n".to_vec()),
                CpioEntry::symlink("bin/sh", "/bin/busybox"),
                CpioEntry::char_dev("dev/console", 0o600, 5, 1),
            ])
        );
    }

    #[test]
    fn elf_static_detection() {
        let mut elf = vec![0u8; 64 + 2 * 56];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        elf[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        elf[0x38..0x3a].copy_from_slice(&2u16.to_le_bytes());
        elf[64..68].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        assert_eq!(elf_is_static(&elf), Some(true));
        elf[64 + 56..64 + 60].copy_from_slice(&3u32.to_le_bytes()); // PT_INTERP
        assert_eq!(elf_is_static(&elf), Some(false));
        assert_eq!(elf_is_static(b"#!/bin/sh\n"), None);
        // truncated program headers are not an ELF we understand
        assert_eq!(elf_is_static(&elf[..100]), None);
    }

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
        let cfg = syslinux_cfg();
        assert!(cfg.contains("KERNEL /vmlinuz"));
        assert!(cfg.contains("console=ttyS0"));
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
