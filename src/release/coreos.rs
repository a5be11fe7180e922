//! CoreOS images from the installer's stream metadata.

use std::fs::{self, File};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use super::cache::Cache;
use super::fetch::{fetch, Progress};
use super::parse::{parse_stream, Compression, CoreosKind};

/// `<installer> coreos print-stream-json`.
pub fn coreos_stream_json(installer: &Path) -> Result<String> {
    let out = Command::new(installer)
        .args(["coreos", "print-stream-json"])
        .output()
        .with_context(|| format!("running {} coreos print-stream-json", installer.display()))?;
    if !out.status.success() {
        bail!(
            "{} coreos print-stream-json failed ({}): {}",
            installer.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).context("stream metadata is not UTF-8")
}

/// The CoreOS image the installer pins, verified and cached: for [`CoreosKind::Qemu`]
/// the decompressed qcow2 (from `qcow2.gz`, else `qcow2.xz`; the download checked
/// against `sha256`, the qcow2 against `uncompressed-sha256`; cached by its
/// uncompressed digest, so a second call does nothing but run the installer), for
/// [`CoreosKind::LiveIso`] the ISO.
pub fn coreos_image(
    installer: &Path,
    kind: CoreosKind,
    cache: &Cache,
    progress: &Progress,
) -> Result<PathBuf> {
    let json = coreos_stream_json(installer)?;
    coreos_image_from_stream(&json, kind, cache, progress)
}

/// [`coreos_image`] from stream metadata already at hand.
pub fn coreos_image_from_stream(
    json: &str,
    kind: CoreosKind,
    cache: &Cache,
    progress: &Progress,
) -> Result<PathBuf> {
    let art = parse_stream(json, kind)?;
    let (Some(uncompressed), Some(compression)) =
        (art.uncompressed_sha256.clone(), art.compression)
    else {
        return fetch(&art.location, &art.sha256, cache, progress)
            .with_context(|| format!("CoreOS {kind} image"));
    };
    if let Some(p) = cache.blob(&uncompressed) {
        return Ok(p);
    }
    let packed = fetch(&art.location, &art.sha256, cache, progress)
        .with_context(|| format!("CoreOS {kind} image"))?;
    let _lock = cache.lock(&uncompressed)?;
    if let Some(p) = cache.blob(&uncompressed) {
        return Ok(p);
    }
    let (out, tmp) = crate::files::create_temp(
        &cache.tmp_dir(),
        &format!("{uncompressed}.decompressed"),
        0o644,
    )?;
    let result = (|| -> Result<PathBuf> {
        let mut out = out;
        let len = fs::metadata(&packed).ok().map(|m| m.len());
        let bar = progress.bar(len, "decompressing CoreOS image");
        let input = bar.wrap_read(BufReader::new(File::open(&packed)?));
        let mut dec = decoder(compression, input);
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 18];
        loop {
            let n = match dec.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).with_context(|| format!("decompressing {}", art.location)),
            };
            h.update(&buf[..n]);
            out.write_all(&buf[..n])
                .with_context(|| format!("writing {}", tmp.display()))?;
        }
        out.sync_all()?;
        bar.finish_and_clear();
        let actual = hex::encode(h.finalize());
        if actual != uncompressed {
            bail!(
                "uncompressed-sha256 mismatch for {}: expected {uncompressed}, got {actual}; \
                 the decompressed image was discarded",
                art.location
            );
        }
        let dest = cache.blob_path(&uncompressed);
        crate::files::rename_durably(&tmp, &dest)
            .with_context(|| format!("moving {} into the cache", tmp.display()))?;
        Ok(dest)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    let dest = result?;
    // The compressed image served its purpose; keep only the qcow2 (saves ~1 GB).
    let _ = fs::remove_file(&packed);
    Ok(dest)
}

/// The largest xz dictionary and decoder state accepted (KiB): `xz -9` needs 65 MiB;
/// a stream asking for more is refused before anything is allocated.
const XZ_MEM_LIMIT_KIB: u32 = 256 * 1024;

/// A streaming decoder: memory stays bounded (gzip's window, xz's dictionary)
/// whatever the image's size.
fn decoder<'a>(compression: Compression, input: impl Read + 'a) -> Box<dyn Read + 'a> {
    match compression {
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(input)),
        // Multiple streams allowed: to the `xz` tool a concatenation is one file.
        Compression::Xz => Box::new(lzma_rust2::XzReader::new_mem_limit(
            input,
            true,
            XZ_MEM_LIMIT_KIB,
        )),
    }
}
