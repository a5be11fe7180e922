//! Writing files the way shiftlab always does: atomically (temp file, fsync, rename),
//! and with mode 0600 when they hold a secret.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, Result};

fn write_with_mode(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(data)
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.sync_all()
            .with_context(|| format!("syncing {}", tmp.display()))?;
        fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Atomic write of an ordinary file (0644).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    write_with_mode(path, data, 0o644)
}

/// Atomic write of a file holding a secret: 0600 from the first byte.
pub fn write_private(path: &Path, data: &[u8]) -> Result<()> {
    write_with_mode(path, data, 0o600)
}

/// A random secret of `len` URL-safe characters from the kernel's CSPRNG.
pub fn random_secret(len: usize) -> Result<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    let mut buf = vec![0u8; len * 2];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut buf))
        .context("reading /dev/urandom")?;
    // Rejection sampling keeps the distribution uniform.
    let limit = 256 - (256 % ALPHABET.len());
    let out: String = buf
        .iter()
        .filter(|b| (**b as usize) < limit)
        .take(len)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect();
    if out.len() < len {
        return random_secret(len);
    }
    Ok(out)
}

/// A file's digest (sha256, sha512, …) as lowercase hex, read in chunks.
pub fn hash_file<D: sha2::Digest>(path: &Path) -> Result<String> {
    use std::io::Read;
    let mut f = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut h = D::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_files_are_0600() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/secret");
        write_private(&p, b"x").unwrap();
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(fs::read(&p).unwrap(), b"x");
        assert_eq!(fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn secrets_are_random_and_sized() {
        let a = random_secret(24).unwrap();
        assert_eq!(a.len(), 24);
        assert_ne!(a, random_secret(24).unwrap());
    }
}
