//! The kernel modules the stand-in's initramfs loads: resolved against
//! `modules.dep` in dependency order, decompressed for busybox insmod.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

use super::{find_tool, MODULES, OPTIONAL_MODULES};

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
pub(super) fn collect_modules(moddir: &Path) -> Result<Vec<(Module, Vec<u8>)>> {
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
kernel/fs/nls/nls_cp437.ko:
kernel/fs/nls/nls_ascii.ko:
kernel/fs/nls/nls_utf8.ko:
kernel/fs/fat/fat.ko:
kernel/fs/fat/vfat.ko: kernel/fs/fat/fat.ko
kernel/fs/fat/msdos.ko: kernel/fs/fat/fat.ko
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
}
