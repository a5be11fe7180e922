//! The stand-in's initramfs: busybox, the init script and the modules, as a
//! deterministic `newc` cpio archive.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use super::modules::Module;
use super::INIT_SCRIPT;

const BUSYBOX_PATHS: &[&str] = &["/bin/busybox", "/usr/bin/busybox"];

pub(super) fn find_busybox() -> Result<PathBuf> {
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

/// The initramfs: busybox, `/init`, the modules, and `extra` files (path
/// without the leading `/`, contents; executable) with their directories.
pub(super) fn initramfs(
    busybox: &Path,
    modules: &[(Module, Vec<u8>)],
    extra: &[super::dhcp6::File],
) -> Result<Vec<u8>> {
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
    for link in ["bin/standin-dhcp", "bin/standin-dhcp6", "bin/standin-http"] {
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
    let mut dirs: std::collections::BTreeSet<String> = entries
        .iter()
        .filter(|e| e.mode & 0o170_000 == 0o040_000)
        .map(|e| e.name.clone())
        .collect();
    for (path, data) in extra {
        // Each parent first, once (cpio wants a directory before its files).
        let mut at = String::new();
        for part in path.split('/').take(path.split('/').count() - 1) {
            at = if at.is_empty() {
                part.into()
            } else {
                format!("{at}/{part}")
            };
            if dirs.insert(at.clone()) {
                entries.push(CpioEntry::dir(&at));
            }
        }
        entries.push(CpioEntry::file(path, 0o755, data.clone()));
    }
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
        while !buf.len().is_multiple_of(4) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
