//! Writing files the way shiftlab always does: atomically (temp file, fsync, rename,
//! directory fsync — [`AtomicFile`] and the `write_*` functions over it), with mode
//! 0600 when they hold a secret, JSON through [`read_json`]/[`write_json`]; the one
//! way shiftlab takes a lock (flock on a file that names the holder); and the one
//! generator of random secrets. Which file is where is `state`'s business.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, Result};

/// Rename `from` over `to` and fsync the directory, so that the rename itself
/// survives a crash (a renamed file whose directory entry was not synced may come
/// back as the old file, or as nothing).
pub fn rename_durably(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::rename(from, to)?;
    sync_dir(to)
}

/// fsync the directory holding `path`.
pub fn sync_dir(path: &Path) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::File::open(dir)?.sync_all()
}

/// A file being written atomically: a temp file beside `path`, created with its
/// final mode, that [`AtomicFile::commit`] fsyncs and renames over `path` (the
/// directory fsynced too). Dropped uncommitted, the temp file goes and `path` is
/// as it was. The one way shiftlab replaces a file.
///
/// The temp file cannot be planted: its name is random, it is created new
/// (`O_EXCL`, so neither a file nor a symlink already at that name is opened)
/// with `O_NOFOLLOW`, and its mode is set on the descriptor. The rename
/// replaces whatever is at `path` (a symlink there is replaced, never
/// followed), so the result has the mode asked for, whatever was there.
pub struct AtomicFile {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    file: Option<fs::File>,
}

/// How many names are tried before creating a temp file gives up (each is new
/// and random: a clash means someone plants names, or a broken CSPRNG).
const TEMP_TRIES: usize = 16;

impl AtomicFile {
    /// Start replacing `path` (its directory made if missing); `mode` applies from
    /// the first byte (0600 for secrets).
    pub fn create(path: &Path, mode: u32) -> Result<AtomicFile> {
        Self::create_named(path, mode, || Ok(hex::encode(random_bytes(8)?)))
    }

    /// [`AtomicFile::create`] with the temp name's suffix from `suffix` (tests
    /// give it the names they planted).
    fn create_named(
        path: &Path,
        mode: u32,
        suffix: impl FnMut() -> Result<String>,
    ) -> Result<AtomicFile> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let (file, tmp) = create_temp_named(dir, &name, mode, suffix)?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            tmp,
            file: Some(file),
        })
    }

    /// The temp file, to write into (or to set its owner).
    pub fn file(&mut self) -> &mut fs::File {
        self.file
            .as_mut()
            .expect("an uncommitted AtomicFile has its file")
    }

    /// The temp file's path, for messages.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// fsync the content and rename it over the target. On an error the temp file
    /// is gone and the target untouched; the error is the raw one, so that a caller
    /// can tell a rename over a mount point (`EBUSY`, `EXDEV`) from the rest.
    pub fn commit(mut self) -> std::io::Result<()> {
        let result = self
            .file
            .take()
            .expect("an uncommitted AtomicFile has its file")
            .sync_all()
            .and_then(|()| rename_durably(&self.tmp, &self.path));
        if result.is_ok() {
            self.tmp = std::path::PathBuf::new();
        }
        result
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// A new temporary file `.{name}.tmp-<random>` in `dir`, of mode `mode`, and
/// its path: created new (`O_EXCL`, `O_NOFOLLOW`: nothing already at the name,
/// a planted file or symlink, is opened), its mode set on the descriptor. The
/// caller removes or renames it.
pub fn create_temp(dir: &Path, name: &str, mode: u32) -> Result<(fs::File, std::path::PathBuf)> {
    create_temp_named(dir, name, mode, || Ok(hex::encode(random_bytes(8)?)))
}

fn create_temp_named(
    dir: &Path,
    name: &str,
    mode: u32,
    mut suffix: impl FnMut() -> Result<String>,
) -> Result<(fs::File, std::path::PathBuf)> {
    use std::os::unix::fs::PermissionsExt;
    for _ in 0..TEMP_TRIES {
        let tmp = dir.join(format!(".{name}.tmp-{}", suffix()?));
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(mode & 0o700)
            .open(&tmp);
        match opened {
            Ok(file) => {
                // fchmod: the mode asked for, not the umask's cut of it.
                if let Err(e) = file.set_permissions(fs::Permissions::from_mode(mode)) {
                    let _ = fs::remove_file(&tmp);
                    return Err(e)
                        .with_context(|| format!("setting the mode of {}", tmp.display()));
                }
                return Ok((file, tmp));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", tmp.display())),
        }
    }
    anyhow::bail!(
        "creating a temporary file for {name} in {}: {TEMP_TRIES} random names were all taken",
        dir.display()
    )
}

/// Atomic write of what `fill` writes, with the given mode.
pub fn write_atomic_with(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut fs::File) -> Result<()>,
) -> Result<()> {
    let mut f = AtomicFile::create(path, mode)?;
    fill(f.file()).with_context(|| format!("writing {}", f.temp_path().display()))?;
    f.commit()
        .with_context(|| format!("renaming into {}", path.display()))
}

/// Atomic write with the given mode (0600 for secrets, 0644 for the rest).
pub fn write_atomic_mode(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    write_atomic_with(path, mode, |f| Ok(f.write_all(data)?))
}

/// Atomic write of an ordinary file (0644).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    write_atomic_mode(path, data, 0o644)
}

/// Atomic write of a file holding a secret: 0600 from the first byte.
pub fn write_private(path: &Path, data: &[u8]) -> Result<()> {
    write_atomic_mode(path, data, 0o600)
}

/// Read a JSON file shiftlab wrote; `None` when it does not exist.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(
            serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Write `value` as pretty JSON with a final newline, atomically (0644).
pub fn write_json<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

/// An exclusive flock, released when dropped (or when the process dies).
#[derive(Debug)]
pub struct FileLock {
    _file: fs::File,
}

fn open_lock(path: &Path) -> Result<fs::File> {
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

fn flock_nb(f: &fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor we own.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

fn claim(mut f: fs::File) -> Result<FileLock> {
    // Say who holds it, for the message of the next one who tries.
    f.set_len(0)?;
    write!(f, "{}", std::process::id())?;
    Ok(FileLock { _file: f })
}

/// Take the lock at `path` now, or `Ok(None)` with the holder's pid when another
/// process holds it.
pub fn try_lock(path: &Path) -> Result<Result<FileLock, String>> {
    let f = open_lock(path)?;
    if flock_nb(&f) {
        return Ok(Ok(claim(f)?));
    }
    let holder = fs::read_to_string(path).unwrap_or_default();
    Ok(Err(holder.trim().to_string()))
}

/// Take the lock at `path`, waiting as long as its holder keeps it (locks held
/// for one short operation: a cache blob's download, a hosts-file edit).
pub fn lock_blocking(path: &Path) -> Result<FileLock> {
    use std::os::fd::AsRawFd;
    let f = open_lock(path)?;
    // SAFETY: flock on a file descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("locking {}", path.display()));
    }
    claim(f)
}

/// Take the lock at `path`, waiting up to `wait` for its holder (`what` names the
/// lock in the message when the wait runs out). Off a terminal the wait beats
/// on stderr with the holder's pid: the host lock may be held for minutes.
pub fn lock_waiting(path: &Path, wait: std::time::Duration, what: &str) -> Result<FileLock> {
    let deadline = std::time::Instant::now() + wait;
    let mut said = false;
    let sink = crate::progress::Sink::stderr();
    let mut beat = sink
        .wants_heartbeat()
        .then(|| crate::progress::Beat::every(sink.heartbeat_every()));
    loop {
        match try_lock(path)? {
            Ok(l) => return Ok(l),
            Err(holder) if std::time::Instant::now() >= deadline => anyhow::bail!(
                "{what} is still held by pid {holder} after {}s; wait for it or stop it",
                wait.as_secs()
            ),
            Err(holder) => {
                if !said {
                    tracing::info!("waiting for {what} (held by pid {holder})");
                    said = true;
                }
                if let Some(line) = beat
                    .as_mut()
                    .and_then(|b| b.due(what, || format!("held by pid {holder}")))
                {
                    sink.aside(line);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

/// `n` bytes from the kernel's CSPRNG.
pub fn random_bytes(n: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut buf))
        .context("reading /dev/urandom")?;
    Ok(buf)
}

/// How long the passwords shiftlab makes are (BMC passwords).
pub const PASSWORD_LEN: usize = 24;

/// A random secret of `len` URL-safe characters from the kernel's CSPRNG: the one
/// generator of passwords and tokens.
pub fn random_secret(len: usize) -> Result<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    let buf = random_bytes(len * 2)?;
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
    fn a_file_is_hashed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        // more than one read buffer
        let data: Vec<u8> = (0..(3 << 20) + 5).map(|i| (i % 251) as u8).collect();
        std::fs::write(&f, &data).unwrap();
        assert_eq!(
            hash_file::<sha2::Sha256>(&f).unwrap(),
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&data))
        );
    }

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
    fn locks_exclude_and_wait() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/.lock");
        let held = try_lock(&p).unwrap().unwrap();
        let pid = std::process::id().to_string();
        // flock conflicts between two open file descriptions, even in one process.
        assert_eq!(try_lock(&p).unwrap().unwrap_err(), pid);
        let e =
            lock_waiting(&p, std::time::Duration::from_millis(300), "the host lock").unwrap_err();
        assert!(
            e.to_string().contains("the host lock is still held by pid"),
            "{e}"
        );
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(held);
        });
        lock_waiting(&p, std::time::Duration::from_secs(30), "the host lock").unwrap();
        t.join().unwrap();
    }

    #[test]
    fn durable_renames_move_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::write(&a, "x").unwrap();
        rename_durably(&a, &b).unwrap();
        assert!(!a.exists());
        assert_eq!(fs::read(&b).unwrap(), b"x");
        assert!(
            rename_durably(&a, &b).is_err(),
            "a missing source is an error"
        );
        // relative names sync the current directory
        sync_dir(Path::new("x")).unwrap();
    }

    #[test]
    fn an_uncommitted_write_leaves_the_file_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_atomic(&p, b"old").unwrap();
        let e = write_atomic_with(&p, 0o644, |f| {
            f.write_all(b"half")?;
            anyhow::bail!("interrupted")
        })
        .unwrap_err();
        assert!(format!("{e:#}").contains("interrupted"), "{e:#}");
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
        let mut a = AtomicFile::create(&p, 0o755).unwrap();
        a.file().write_all(b"new").unwrap();
        a.commit().unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
    }

    #[test]
    fn a_planted_temp_name_cannot_redirect_a_write() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "victim's").unwrap();
        let p = dir.path().join("secret");
        // What the temp name used to be (`.NAME.tmp-PID`): a symlink to the
        // victim.
        let pid_name = dir
            .path()
            .join(format!(".secret.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &pid_name).unwrap();
        write_private(&p, b"s3cret").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "victim's");
        assert!(fs::symlink_metadata(&pid_name).unwrap().is_symlink());
        assert_eq!(fs::read(&p).unwrap(), b"s3cret");

        // Whatever name comes up, one already there is never opened: a symlink
        // (dangling or not) and a file are skipped for the next name.
        let planted = ["link", "dangling", "file"];
        std::os::unix::fs::symlink(&victim, dir.path().join(".f.tmp-link")).unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("nothing"),
            dir.path().join(".f.tmp-dangling"),
        )
        .unwrap();
        fs::write(dir.path().join(".f.tmp-file"), "planted").unwrap();
        let mut names = planted.iter().map(|n| n.to_string()).chain(["mine".into()]);
        let f = dir.path().join("f");
        let mut a = AtomicFile::create_named(&f, 0o600, || Ok(names.next().unwrap())).unwrap();
        assert_eq!(a.temp_path(), dir.path().join(".f.tmp-mine"));
        a.file().write_all(b"new").unwrap();
        a.commit().unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"new");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "victim's");
        assert!(!dir.path().join("nothing").exists());
        assert_eq!(
            fs::read_to_string(dir.path().join(".f.tmp-file")).unwrap(),
            "planted"
        );
        // Only planted names: a clear error, nothing written.
        let e = AtomicFile::create_named(&f, 0o600, || Ok("file".into()))
            .err()
            .unwrap();
        assert!(
            format!("{e:#}").contains("random names were all taken"),
            "{e:#}"
        );
        assert_eq!(fs::read(&f).unwrap(), b"new");
    }

    #[test]
    fn a_planted_world_readable_file_does_not_make_a_secret_readable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("secret");
        // 0666 files planted at the destination and at what the temp name used
        // to be (someone else's file, which they would keep reading).
        let pid_name = dir
            .path()
            .join(format!(".secret.tmp-{}", std::process::id()));
        for f in [&p, &pid_name] {
            fs::write(f, "planted").unwrap();
            fs::set_permissions(f, fs::Permissions::from_mode(0o666)).unwrap();
        }
        write_private(&p, b"s3cret").unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(fs::read(&p).unwrap(), b"s3cret");
        assert_eq!(fs::read_to_string(&pid_name).unwrap(), "planted");
        // A symlink at the destination is replaced, its target untouched.
        let victim = dir.path().join("victim");
        fs::write(&victim, "victim's").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        write_private(&link, b"s3cret").unwrap();
        assert!(!fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "victim's");
    }

    #[test]
    fn json_round_trips_and_absence_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        assert_eq!(read_json::<Vec<u32>>(&p).unwrap(), None);
        write_json(&p, &vec![1u32, 2]).unwrap();
        assert!(fs::read_to_string(&p).unwrap().ends_with("]\n"));
        assert_eq!(read_json::<Vec<u32>>(&p).unwrap(), Some(vec![1, 2]));
        fs::write(&p, "{").unwrap();
        assert!(format!("{:#}", read_json::<Vec<u32>>(&p).unwrap_err()).contains("x.json"));
    }

    #[test]
    fn secrets_are_random_and_sized() {
        let a = random_secret(24).unwrap();
        assert_eq!(a.len(), 24);
        assert_ne!(a, random_secret(24).unwrap());
        // (was redfish::auth::generate_password's test)
        let p = random_secret(PASSWORD_LEN).unwrap();
        assert_eq!(p.len(), 24);
        assert_ne!(p, random_secret(PASSWORD_LEN).unwrap());
        assert!(p.chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
