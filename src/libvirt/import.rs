//! Bytes into a volume in one write, with their sha256 computed on the way.
//!
//! Through libvirt's upload stream every byte crosses the RPC socket in
//! messages of at most 256 KiB and libvirtd's event loop before a thread of
//! the daemon writes it (`virsh vol-upload` of a 2 GB image takes ~3× a `cp`
//! of it, docs/benchmarks.md). When the daemon and shiftlab see the same
//! filesystem, the volume's file is written directly instead, as `cp` would:
//! only after shiftlab proved that the file it opened is the one libvirt
//! describes (same path, size and modification time to the nanosecond, read
//! back from the volume's XML). Anything else (a remote URI, a daemon in
//! another mount namespace, a file shiftlab may not write, a block device)
//! takes the stream, so a remote host works the same.

use super::Host;
use anyhow::{Context, Result};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use virt::storage_pool::StoragePool;
use virt::storage_vol::StorageVol;

/// How the bytes reached the volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Written into the volume's file (the daemon shares our filesystem).
    File,
    /// Through libvirt's upload stream.
    Stream,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::File => "file",
            Route::Stream => "stream",
        }
    }
}

/// `SHIFTLAB_IMPORT=stream` forces the upload stream (the file route is only an
/// optimisation; this is its off switch).
fn stream_forced() -> bool {
    std::env::var("SHIFTLAB_IMPORT").is_ok_and(|v| v == "stream")
}

/// Write all of `src` (`len` bytes) into `vol`, an empty volume just created in
/// `pool`, and return the bytes' sha256 and the route taken. The file route is
/// checked after the write as well: libvirt must then see a file of `len`
/// bytes, or the stream writes it again.
pub fn write_volume(
    host: &Host,
    pool: &StoragePool,
    vol: &StorageVol,
    src: &mut File,
    len: u64,
) -> Result<(String, Route)> {
    if !stream_forced() {
        if let Some(mut file) = volume_file(host, vol)? {
            let digest =
                match kernel_copy_hashing(src, &file, len).context("writing the volume's file")? {
                    Some(d) => d,
                    None => copy_hashing(&mut *src, |b| Ok(file.write_all(b)?))
                        .context("writing the volume's file")?,
                };
            // Nothing of what libvirt wrote there before may remain past the end.
            file.set_len(len).context("writing the volume's file")?;
            // The completion marker must never outlive the data (a power loss);
            // after a kernel copy this finds little or nothing left to write.
            file.sync_data().context("flushing the volume's file")?;
            drop(file);
            pool.refresh(0).context("refreshing the pool")?;
            if physical(vol) == Some(len) {
                return Ok((digest, Route::File));
            }
            tracing::warn!(
                "libvirt does not see the bytes written into the volume's file; uploading through libvirt"
            );
            src.rewind()?;
        }
    }
    Ok((host.upload_sha256(vol, src, len)?, Route::Stream))
}

/// The volume's size on disk as libvirt reads it (VIR_STORAGE_VOL_GET_PHYSICAL:
/// `allocation` is then the file's size).
fn physical(vol: &StorageVol) -> Option<u64> {
    vol.info_flags(1).map(|i| i.allocation).ok()
}

/// The volume's file opened for writing, when this process sees the very file
/// libvirt manages; `None` sends the bytes through the stream.
fn volume_file(host: &Host, vol: &StorageVol) -> Result<Option<File>> {
    if !host.is_local() {
        return Ok(None);
    }
    let Ok(path) = vol.path() else {
        return Ok(None);
    };
    if !path.starts_with('/') {
        return Ok(None);
    }
    // Never created, never followed through a link, never truncated: only the
    // file libvirt made is written, over its existing bytes (and read back for
    // the hash).
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => {
            tracing::debug!(%path, error = %e, "the volume's file is not writable here; uploading through libvirt");
            return Ok(None);
        }
    };
    let meta = file.metadata()?;
    // The XML after the open: libvirt re-reads the file's metadata for it.
    let xml = vol.xml_desc(0).context("reading the volume's XML")?;
    let ours = Stat {
        regular: meta.file_type().is_file(),
        size: meta.len(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
    };
    if same_file(&xml, physical(vol), &ours) {
        Ok(Some(file))
    } else {
        tracing::debug!(%path, "the file here is not the volume libvirt describes; uploading through libvirt");
        Ok(None)
    }
}

/// What this process sees of a file.
#[derive(Debug, Clone, Copy)]
struct Stat {
    regular: bool,
    size: u64,
    mtime: (i64, i64),
}

/// Is the file this process opened the volume libvirt describes in `vol_xml`
/// (a regular file whose size and modification time, to the nanosecond, are
/// the ones libvirt read)? A file of the same path in another mount namespace
/// fails on its modification time.
fn same_file(vol_xml: &str, physical: Option<u64>, ours: &Stat) -> bool {
    let Ok(doc) = roxmltree::Document::parse(vol_xml) else {
        return false;
    };
    let root = doc.root_element();
    let file_volume = root.attribute("type").is_none_or(|t| t == "file");
    let mtime = root
        .descendants()
        .find(|n| n.has_tag_name("timestamps"))
        .and_then(|t| t.children().find(|n| n.has_tag_name("mtime")))
        .and_then(|n| n.text())
        .and_then(parse_timestamp);
    file_volume && ours.regular && physical == Some(ours.size) && mtime == Some(ours.mtime)
}

/// libvirt's `SECONDS[.NANOSECONDS]` (virStorageVolTimestampFormat: the
/// fraction is printed with 9 digits, and left out when zero).
fn parse_timestamp(s: &str) -> Option<(i64, i64)> {
    let (sec, nsec) = s.trim().split_once('.').unwrap_or((s.trim(), "0"));
    let nsec = if nsec.len() == 9 || nsec == "0" {
        nsec.parse().ok()?
    } else {
        return None;
    };
    Some((sec.parse().ok()?, nsec))
}

/// Copy `len` bytes from the start of `src` into `dst` inside the kernel, as
/// `cp` does: `copy_file_range` (which may even share extents on filesystems
/// that can), else `sendfile` (another filesystem), never through user-space
/// buffers; and return the sha256 of what landed in `dst`, read back behind
/// the copy on a thread of its own (from the page cache: the hash, not the
/// reading, is what that thread spends its time on); the file is flushed to
/// the disk as soon as the copy is done, while the hash goes on. `None` when the kernel
/// cannot copy between these two files and nothing was written: the caller
/// copies through buffers.
fn kernel_copy_hashing(src: &File, dst: &File, len: u64) -> Result<Option<String>> {
    use sha2::{Digest, Sha256};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    use std::sync::mpsc;
    const CHUNK: usize = 8 << 20;
    let (copied, ranges) = mpsc::sync_channel::<(u64, usize)>(64);
    std::thread::scope(|scope| {
        let hasher = scope.spawn(move || -> std::io::Result<String> {
            let mut hash = Sha256::new();
            let mut buf = vec![0u8; 1 << 20];
            for (mut at, mut n) in ranges {
                while n > 0 {
                    let take = n.min(buf.len());
                    dst.read_exact_at(&mut buf[..take], at)?;
                    hash.update(&buf[..take]);
                    at += take as u64;
                    n -= take;
                }
            }
            Ok(hex::encode(hash.finalize()))
        });
        let (s, d) = (src.as_raw_fd(), dst.as_raw_fd());
        let mut use_sendfile = false;
        let mut off_in: libc::off64_t = 0;
        let mut off_out: libc::off64_t = 0;
        let copy = (|| -> Result<bool> {
            while (off_in as u64) < len {
                let want = CHUNK.min((len - off_in as u64) as usize);
                let start = off_in as u64;
                // SAFETY: two open descriptors, offsets owned by this frame.
                let n = unsafe {
                    if use_sendfile {
                        libc::sendfile64(d, s, &mut off_in, want)
                    } else {
                        libc::copy_file_range(s, &mut off_in, d, &mut off_out, want, 0)
                    }
                };
                if n < 0 {
                    let e = std::io::Error::last_os_error();
                    let unsupported = matches!(
                        e.raw_os_error(),
                        Some(libc::EXDEV | libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP)
                    );
                    if start == 0 && unsupported && !use_sendfile {
                        // Another filesystem: sendfile splices across them.
                        use_sendfile = true;
                        continue;
                    }
                    if start == 0 && unsupported {
                        return Ok(false);
                    }
                    return Err(e).context("copying the image");
                }
                if n == 0 {
                    anyhow::bail!("the image ended at {start} of {len} bytes while it was copied");
                }
                if copied.send((start, n as usize)).is_err() {
                    break; // the hasher failed; its error is returned below
                }
            }
            // Written back to the disk while the hasher is still reading: a
            // flush after the hash would add its whole time to the import's.
            dst.sync_data().context("flushing the volume's file")?;
            Ok(true)
        })();
        drop(copied);
        let digest = hasher
            .join()
            .map_err(|_| anyhow::anyhow!("the hashing thread panicked"))?
            .context("reading the volume's file back");
        match copy? {
            true => Ok(Some(digest?)),
            false => Ok(None),
        }
    })
}

/// Copy `src` into `sink` in 1 MiB buffers and return the sha256 of the bytes
/// copied, computed on a thread of its own while the sink is busy (hashing on
/// the copying thread would add its whole time to the copy's). The hasher sees
/// the very buffers that go out; a few are recycled between the two threads.
/// An error of either side ends the copy and is returned.
pub fn copy_hashing(
    mut src: impl Read,
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> Result<String> {
    use sha2::{Digest, Sha256};
    use std::sync::{mpsc, Arc};
    const CHUNK: usize = 1 << 20;
    const IN_FLIGHT: usize = 4;
    let (to_hash, chunks) = mpsc::sync_channel::<(Arc<Vec<u8>>, usize)>(IN_FLIGHT);
    let (give_back, returned) = mpsc::channel::<Arc<Vec<u8>>>();
    std::thread::scope(|scope| {
        let hasher = scope.spawn(move || {
            let mut hash = Sha256::new();
            for (buf, n) in chunks {
                hash.update(&buf[..n]);
                let _ = give_back.send(buf);
            }
            hex::encode(hash.finalize())
        });
        let copied = (|| -> Result<()> {
            let mut spare: Vec<Vec<u8>> = Vec::new();
            let mut made = 0;
            loop {
                // A buffer the hasher is done with (this thread dropped its
                // own handle after the sink took it), or a new one while few exist.
                let mut buf = match spare.pop() {
                    Some(b) => b,
                    None if made < IN_FLIGHT + 1 => {
                        made += 1;
                        vec![0u8; CHUNK]
                    }
                    None => {
                        let back = returned.recv().context("the hashing thread ended")?;
                        Arc::try_unwrap(back).unwrap_or_else(|_| vec![0u8; CHUNK])
                    }
                };
                let n = src.read(&mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                let buf = Arc::new(buf);
                to_hash
                    .send((buf.clone(), n))
                    .context("the hashing thread ended")?;
                sink(&buf[..n])?;
                drop(buf);
                while let Ok(back) = returned.try_recv() {
                    if let Ok(b) = Arc::try_unwrap(back) {
                        spare.push(b);
                    }
                }
            }
        })();
        drop(to_hash);
        let digest = hasher
            .join()
            .map_err(|_| anyhow::anyhow!("the hashing thread panicked"));
        copied.and(digest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = include_str!("../../tests/fixtures/libvirt/volume-qcow2.xml");

    fn stat(size: u64, mtime: (i64, i64)) -> Stat {
        Stat {
            regular: true,
            size,
            mtime,
        }
    }

    #[test]
    fn the_volume_libvirt_describes_is_recognised_by_size_and_mtime() {
        let (size, mtime) = (196_656, (1_795_486_187, 987_690_852));
        assert!(same_file(XML, Some(size), &stat(size, mtime)));
        // Another file at the same path (another mount namespace): a
        // different modification time, or size, or not a regular file.
        assert!(!same_file(
            XML,
            Some(size),
            &stat(size, (mtime.0, mtime.1 + 1))
        ));
        assert!(!same_file(XML, Some(size), &stat(size + 1, mtime)));
        assert!(!same_file(XML, None, &stat(size, mtime)));
        let dev = Stat {
            regular: false,
            ..stat(size, mtime)
        };
        assert!(!same_file(XML, Some(size), &dev));
        // A volume without timestamps (not a file in a directory) or a block one.
        let no_times = XML
            .replace("<mtime>", "<xtime>")
            .replace("</mtime>", "</xtime>");
        assert!(!same_file(&no_times, Some(size), &stat(size, mtime)));
        let block = XML.replace("type='file'", "type='block'");
        assert!(!same_file(&block, Some(size), &stat(size, mtime)));
        assert!(!same_file("not xml", Some(size), &stat(size, mtime)));
    }

    #[test]
    fn timestamps_parse_as_libvirt_prints_them() {
        assert_eq!(
            parse_timestamp("1763952000.123456789"),
            Some((1_763_952_000, 123_456_789))
        );
        assert_eq!(
            parse_timestamp("1763952000.000000001"),
            Some((1_763_952_000, 1))
        );
        assert_eq!(parse_timestamp("1763952000"), Some((1_763_952_000, 0)));
        assert_eq!(parse_timestamp("1763952000.5"), None);
        assert_eq!(parse_timestamp("x.123456789"), None);
    }

    #[test]
    fn the_copy_hashes_exactly_the_bytes_that_went_out() {
        use sha2::{Digest, Sha256};
        // Several buffers, the last one partial, so buffers are recycled.
        let data: Vec<u8> = (0..(7 << 20) + 12_345)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let mut out = Vec::new();
        let digest = copy_hashing(&data[..], |b| {
            out.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(out, data);
        assert_eq!(digest, hex::encode(Sha256::digest(&data)));
    }

    fn sample(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    /// The kernel copy into a file that already holds other bytes (libvirt's
    /// empty qcow2 header), from `src_dir` to `dst_dir`; the digest and the
    /// destination's content.
    fn kernel_copy(
        src_dir: &std::path::Path,
        dst_dir: &std::path::Path,
        data: &[u8],
    ) -> (Option<String>, Vec<u8>) {
        // A name of its own: /dev/shm is shared with every other test run here.
        let src_file = tempfile::Builder::new()
            .prefix("shiftlab-import-test-src")
            .tempfile_in(src_dir)
            .unwrap();
        let src_path = src_file.path().to_path_buf();
        std::fs::write(&src_path, data).unwrap();
        let dst_path = dst_dir.join("dst");
        std::fs::write(&dst_path, vec![0xffu8; 4096]).unwrap();
        let src = File::open(&src_path).unwrap();
        let dst = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&dst_path)
            .unwrap();
        let digest = kernel_copy_hashing(&src, &dst, data.len() as u64).unwrap();
        drop(src_file);
        (digest, std::fs::read(&dst_path).unwrap())
    }

    #[test]
    fn the_kernel_copy_hashes_what_landed_in_the_file() {
        use sha2::{Digest, Sha256};
        let data = sample((19 << 20) + 4321);
        let dir = tempfile::tempdir().unwrap();
        let (digest, got) = kernel_copy(dir.path(), dir.path(), &data);
        assert_eq!(got, data);
        assert_eq!(digest, Some(hex::encode(Sha256::digest(&data))));
        // Across filesystems (tmpfs to the temporary directory's): sendfile.
        let shm = std::path::Path::new("/dev/shm");
        if shm.is_dir() {
            let (digest, got) = kernel_copy(shm, dir.path(), &data);
            assert_eq!(got, data);
            assert_eq!(digest, Some(hex::encode(Sha256::digest(&data))));
        }
    }

    #[test]
    fn a_source_shorter_than_announced_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("src"), sample(1000)).unwrap();
        let src = File::open(dir.path().join("src")).unwrap();
        let dst = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(dir.path().join("dst"))
            .unwrap();
        let err = kernel_copy_hashing(&src, &dst, 5000).unwrap_err();
        assert!(
            format!("{err:#}").contains("ended at 1000 of 5000"),
            "{err:#}"
        );
    }

    #[test]
    fn a_sink_error_ends_the_copy_and_is_returned() {
        let data = vec![1u8; 3 << 20];
        let mut calls = 0;
        let err = copy_hashing(&data[..], |_| {
            calls += 1;
            anyhow::bail!("disk full")
        })
        .unwrap_err();
        assert_eq!(calls, 1);
        assert!(format!("{err:#}").contains("disk full"));
    }
}
