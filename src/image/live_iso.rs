//! Embedding Ignition into a CoreOS live ISO with the real `coreos-installer iso
//! ignition embed` (coreos/coreos-installer src/live/embed.rs: the config goes
//! into `images/ignition.img`, which the ISO's boot loader loads as the last
//! initrd). shiftlab never writes the embed area itself.
//!
//! The binary, not the `coreos-installer` crate's `libcoreinst`: the crate
//! exposes its command implementations (`live::iso_ignition_embed` takes the CLI's
//! argument structs and writes to files it opens itself), not a library API with
//! compatibility promises, and it would add its C dependencies (zstd, lzma,
//! OpenSSL) to shiftlab's build. scripts/setup installs the pinned binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The `coreos-installer` binary: on `PATH`, else where `cargo install` puts it
/// (scripts/setup installs it that way).
pub fn coreos_installer() -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        dirs.push(PathBuf::from(home).join("bin"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("coreos-installer"))
        .find(|p| p.is_file())
        .context("coreos-installer not found: run scripts/setup (it runs `cargo install --locked coreos-installer`)")
}

/// Write `iso` with `ignition` embedded to `out`, atomically: a run stopped
/// half-way leaves `out` as it was (a `.partial` file beside it, replaced next
/// time).
pub fn embed(iso: &Path, ignition: &Path, out: &Path) -> Result<()> {
    let bin = coreos_installer()?;
    let partial = out.with_extension("iso.partial");
    let _ = std::fs::remove_file(&partial);
    // Tied to shiftlab: killed with it, it leaves only the partial file.
    let child = crate::process::spawn_tied(
        Command::new(&bin)
            .args(["iso", "ignition", "embed", "--force", "--ignition-file"])
            .arg(ignition)
            .arg("--output")
            .arg(&partial)
            .arg(iso)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    )
    .with_context(|| format!("running {}", bin.display()))?;
    let output = child
        .wait_with_output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "coreos-installer iso ignition embed into {} failed ({}): {}",
            iso.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    // The ISO carries the Ignition (secrets): 0600 before it takes its name,
    // whatever mode coreos-installer created it with.
    std::fs::set_permissions(
        &partial,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .with_context(|| format!("restricting {}", partial.display()))?;
    crate::files::rename_durably(&partial, out)
        .with_context(|| format!("moving {} into place", partial.display()))
}

/// The Ignition embedded in `iso` (`coreos-installer iso ignition show`), or
/// `None` when its embed area is empty.
pub fn embedded(iso: &Path) -> Result<Option<Vec<u8>>> {
    let bin = coreos_installer()?;
    let output = Command::new(&bin)
        .args(["iso", "ignition", "show"])
        .arg(iso)
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if output.status.success() {
        return Ok(Some(output.stdout));
    }
    let err = String::from_utf8_lossy(&output.stderr);
    // src/live/embed.rs: "No embedded Ignition config." for an empty area.
    if err.contains("No embedded Ignition config") {
        return Ok(None);
    }
    bail!(
        "coreos-installer iso ignition show {} failed ({}): {}",
        iso.display(),
        output.status,
        err.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// The ISO with a config embedded holds its secrets: it is 0600 whatever
    /// the umask, and the config reads back. (A plain ISO9660 image with a
    /// zero-filled `images/ignition.img` is what coreos-installer embeds into.)
    #[test]
    fn an_embedded_iso_is_private_and_reads_back() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root/images");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("ignition.img"), vec![0u8; 256 * 1024]).unwrap();
        let iso = d.path().join("live.iso");
        let made = Command::new("genisoimage")
            .args(["-quiet", "-V", "test", "-o"])
            .arg(&iso)
            .arg(d.path().join("root"))
            .status()
            .expect("genisoimage (scripts/setup installs it)");
        assert!(made.success());
        let ign = d.path().join("config.ign");
        std::fs::write(&ign, br#"{"ignition":{"version":"3.2.0"}}"#).unwrap();
        let out = d.path().join("node.iso");
        embed(&iso, &ign, &out).unwrap();
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        let shown = embedded(&out).unwrap().expect("an embedded config");
        assert!(String::from_utf8_lossy(&shown).contains("3.2.0"));
    }
}
