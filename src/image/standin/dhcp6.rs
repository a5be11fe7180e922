//! The stand-in's DHCPv6 client: Debian's `dhclient` (package isc-dhcp-client),
//! copied into the initramfs with the libraries `ldd` names. busybox has no
//! DHCPv6 client (Debian builds it without `udhcpc6`), and an OpenShift node
//! takes its IPv6 address by DHCPv6 (NetworkManager, a link-layer DUID), so a
//! stand-in on a dual-stack lab does the same with `dhclient -6 -D LL`.
//! Optional: without dhclient on the host the image is built as before and its
//! stand-ins speak IPv4 only.

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Where Debian's isc-dhcp-client installs it.
pub const DHCLIENT: &str = "/sbin/dhclient";

/// A file of the initramfs: its path without the leading `/`, its contents.
pub(super) type File = (String, Vec<u8>);

/// The files of the DHCPv6 client: dhclient, its libraries and program
/// interpreter, and an empty `etc/dhcp/dhclient.conf` (it reads one at start).
/// `None` when the host has no dhclient.
pub(super) fn files() -> Result<Option<Vec<File>>> {
    if !Path::new(DHCLIENT).is_file() {
        tracing::info!("{DHCLIENT} not found (isc-dhcp-client): stand-ins without DHCPv6");
        return Ok(None);
    }
    let libs = super::run(Command::new("ldd").arg(DHCLIENT))
        .context("listing dhclient's libraries (ldd, package libc-bin)")?;
    let mut files = Vec::new();
    for path in std::iter::once(DHCLIENT.to_string()).chain(ldd_paths(&libs)?) {
        // Through symlinks (/lib64/ld-linux-x86-64.so.2 is one): the file, at
        // the path the program asks for.
        let data = fs::read(&path).with_context(|| format!("reading {path}"))?;
        files.push((path.trim_start_matches('/').to_string(), data));
    }
    files.push(("etc/dhcp/dhclient.conf".into(), Vec::new()));
    Ok(Some(files))
}

/// The absolute paths of the libraries and the program interpreter in `ldd`
/// output (`libc.so.6 => /lib/…/libc.so.6 (0x…)`, `/lib64/ld-linux….so.2
/// (0x…)`); the kernel's vDSO has none. A library ldd could not find is an
/// error naming it. Pure.
pub fn ldd_paths(out: &str) -> Result<Vec<String>> {
    let mut paths = Vec::new();
    for line in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let target = match line.split_once(" => ") {
            Some((name, rest)) => {
                if rest.trim_start().starts_with("not found") {
                    bail!("ldd {DHCLIENT}: {name} not found");
                }
                rest
            }
            None => line,
        };
        let path = target.split_whitespace().next().unwrap_or("");
        if path.starts_with('/') {
            paths.push(path.to_string());
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded: `ldd /sbin/dhclient` on Debian 12 (isc-dhcp-client 4.4.3).
    const DEBIAN12: &str = "\tlinux-vdso.so.1 (0x00007f5241d7c000)\n\
        \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f524181e000)\n\
        \t/lib64/ld-linux-x86-64.so.2 (0x00007f5241d7e000)\n";

    #[test]
    fn ldd_names_the_libraries_and_the_interpreter() {
        assert_eq!(
            ldd_paths(DEBIAN12).unwrap(),
            [
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
        assert!(ldd_paths("").unwrap().is_empty());
        let missing = "\tlibfoo.so.1 => not found\n";
        assert!(ldd_paths(missing)
            .unwrap_err()
            .to_string()
            .contains("libfoo.so.1 not found"));
    }
}
