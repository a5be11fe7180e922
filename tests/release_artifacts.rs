//! Releases and artifacts against a loopback mirror (127.0.0.1 only) and local
//! directories: resolve, fetch, resume, verify, extract, CoreOS images, offline.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use sha2::{Digest, Sha256};
use shiftlab::release::{self, Cache, CoreosKind, DigestMismatch, Progress, Source};
use shiftlab::spec::{Channel, Distribution, Version};

const V: &str = "4.18.7";
const OCP_DIR: &str = "pub/openshift-v4/x86_64/clients/ocp";

fn release_image() -> String {
    format!(
        "quay.io/openshift-release-dev/ocp-release@sha256:{}",
        "a".repeat(64)
    )
}

fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Deterministic incompressible bytes.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// `data` xz-compressed by liblzma (Python's `lzma`, the reference implementation;
/// python3 is a test dependency already), CRC64 check as `xz` writes by default.
fn xz(data: &[u8]) -> Vec<u8> {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import lzma,sys; sys.stdout.buffer.write(lzma.compress(sys.stdin.buffer.read(), preset=1))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    out.stdout
}

fn tar_gz(files: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (name, data, mode) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(*mode);
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-openshift-install")
}

/// A fake `openshift-install` printing `stream` for `coreos print-stream-json`.
fn fake_installer(dir: &Path, stream: &str) -> PathBuf {
    fake_installer_of(dir, stream, V, &release_image())
}

/// [`fake_installer`] of another release.
fn fake_installer_of(dir: &Path, stream: &str, version: &str, image: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let json = dir.join("stream.json");
    std::fs::write(&json, stream).unwrap();
    let out = dir.join("openshift-install");
    let st = Command::new(fixture_dir().join("generate.sh"))
        .arg(&out)
        .arg(version)
        .arg(image)
        .arg(&json)
        .status()
        .unwrap();
    assert!(st.success());
    out
}

fn stream_json(
    qcow_location: &str,
    gz_sha: &str,
    raw_sha: &str,
    iso_location: &str,
    iso_sha: &str,
) -> String {
    serde_json::json!({
        "stream": "rhcos-4.18",
        "architectures": {"x86_64": {"artifacts": {
            "qemu": {"release": "418.94.0", "formats": {"qcow2.gz": {"disk": {
                "location": qcow_location, "sha256": gz_sha, "uncompressed-sha256": raw_sha}}}},
            "metal": {"release": "418.94.0", "formats": {"iso": {"disk": {
                "location": iso_location, "sha256": iso_sha}}}}
        }}}
    })
    .to_string()
}

/// What OKD's installer before 4.19 prints (`TAGS=scos` 4.18, recorded): Fedora
/// CoreOS 39 `stable`, whose `qemu` artifact has only `qcow2.xz`.
fn fcos39_stream_json(
    qcow_xz_location: &str,
    xz_sha: &str,
    raw_sha: &str,
    iso_location: &str,
    iso_sha: &str,
) -> String {
    serde_json::json!({
        "stream": "stable",
        "metadata": {"generator": "fedora-coreos-stream-generator v0.4.0"},
        "architectures": {"x86_64": {"artifacts": {
            "qemu": {"release": "39.20231101.3.0", "formats": {"qcow2.xz": {"disk": {
                "location": qcow_xz_location,
                "signature": format!("{qcow_xz_location}.sig"),
                "sha256": xz_sha, "uncompressed-sha256": raw_sha}}}},
            "metal": {"release": "39.20231101.3.0", "formats": {
                "iso": {"disk": {"location": iso_location, "sha256": iso_sha}},
                "raw.xz": {"disk": {"location": format!("{iso_location}.raw.xz"),
                    "sha256": "1".repeat(64), "uncompressed-sha256": "2".repeat(64)}}}}
        }}}
    })
    .to_string()
}

/// The files of a mirror: relative path → content.
struct Fixture {
    files: Vec<(String, Vec<u8>)>,
    qcow2: Vec<u8>,
    iso: Vec<u8>,
    installer_tgz: String,
    client_tgz: String,
}

impl Fixture {
    /// An OCP mirror tree for `V` (under `4.18.7` and `stable-4.18`) whose stream
    /// metadata points at `<image_base>/rhcos/…`.
    fn ocp(work: &Path, image_base: &str) -> Fixture {
        Fixture::build(
            work,
            image_base,
            &[format!("{OCP_DIR}/{V}"), format!("{OCP_DIR}/stable-4.18")],
            V,
        )
    }

    /// A mirror tree of `version` in `dirs`. An OKD release (`…-okd-scos.…`, before
    /// 4.19) carries an installer whose stream is Fedora CoreOS 39's, `qcow2.xz`
    /// only, as the real one's; an OCP release RHCOS's `qcow2.gz`.
    fn build(work: &Path, image_base: &str, dirs: &[String], version: &str) -> Fixture {
        let qcow2 = noise(300_000, 7);
        let iso = noise(100_000, 11);
        let iso_at = format!("{image_base}/rhcos/rhcos-live.x86_64.iso");
        let okd = version.contains("-okd-");
        let (qemu_file, packed, stream, image) = if okd {
            let packed = xz(&qcow2);
            let file = "fcos/fedora-coreos-39.20231101.3.0-qemu.x86_64.qcow2.xz";
            let stream = fcos39_stream_json(
                &format!("{image_base}/{file}"),
                &sha(&packed),
                &sha(&qcow2),
                &iso_at,
                &sha(&iso),
            );
            (
                file,
                packed,
                stream,
                format!("quay.io/okd/scos-release:{version}"),
            )
        } else {
            let packed = gzip(&qcow2);
            let file = "rhcos/rhcos-qemu.x86_64.qcow2.gz";
            let stream = stream_json(
                &format!("{image_base}/{file}"),
                &sha(&packed),
                &sha(&qcow2),
                &iso_at,
                &sha(&iso),
            );
            (file, packed, stream, release_image())
        };
        let installer = std::fs::read(fake_installer_of(
            &work.join("gen"),
            &stream,
            version,
            &image,
        ))
        .unwrap();
        let padding = noise(200_000, 3);
        let installer_tar = tar_gz(&[
            ("README.md", b"openshift-install\n", 0o644),
            ("openshift-install", &installer, 0o755),
            ("padding", &padding, 0o644),
        ]);
        let oc = format!("#!/bin/sh\necho 'Client Version: {version}'\n");
        let client_tar = tar_gz(&[
            ("README.md", b"oc\n", 0o644),
            ("kubectl", b"#!/bin/sh\necho kubectl\n", 0o755),
            ("oc", oc.as_bytes(), 0o755),
        ]);
        let installer_tgz = format!("openshift-install-linux-{version}.tar.gz");
        let client_tgz = format!("openshift-client-linux-{version}.tar.gz");
        let release_txt = format!(
            "Client tools for OpenShift\n--------------------------\n\nName:           {version}\n\
             Digest:         sha256:{a}\nCreated:        2025-03-26T12:00:00Z\n\nPull From: {img}\n\n\
             Release Metadata:\n  Version:  {version}\n  Upgrades: 4.17.16\n\nComponent Versions:\n  kubernetes 1.31.6\n",
            a = "a".repeat(64),
            img = image
        );
        let sums = format!(
            "{}  {installer_tgz}\n{}  {client_tgz}\n{}  release.txt\n",
            sha(&installer_tar),
            sha(&client_tar),
            sha(release_txt.as_bytes())
        );
        let mut files = vec![
            (qemu_file.to_string(), packed),
            ("rhcos/rhcos-live.x86_64.iso".to_string(), iso.clone()),
        ];
        for d in dirs {
            files.push((format!("{d}/release.txt"), release_txt.clone().into_bytes()));
            files.push((format!("{d}/sha256sum.txt"), sums.clone().into_bytes()));
            files.push((format!("{d}/{installer_tgz}"), installer_tar.clone()));
            files.push((format!("{d}/{client_tgz}"), client_tar.clone()));
        }
        Fixture {
            files,
            qcow2,
            iso,
            installer_tgz,
            client_tgz,
        }
    }

    fn get(&self, path: &str) -> &[u8] {
        &self.files.iter().find(|(p, _)| p == path).unwrap().1
    }

    fn write_to(&self, root: &Path) {
        for (p, data) in &self.files {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, data).unwrap();
        }
    }
}

/// One logged request: path and `Range` header.
type Logged = (String, Option<String>);

#[derive(Default)]
struct State {
    files: Mutex<HashMap<String, Vec<u8>>>,
    drop_once: Mutex<HashSet<String>>,
    no_range: AtomicBool,
    log: Mutex<Vec<Logged>>,
    stop: AtomicBool,
}

/// A tiny HTTP/1.1 file server on 127.0.0.1 with `Range` support and fault injection.
struct Mirror {
    addr: SocketAddr,
    state: Arc<State>,
    thread: Option<JoinHandle<()>>,
}

impl Mirror {
    fn start(files: &[(String, Vec<u8>)]) -> Mirror {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        for (p, d) in files {
            state
                .files
                .lock()
                .unwrap()
                .insert(format!("/{p}"), d.clone());
        }
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.stop.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(c) = conn {
                    let _ = serve(&st, c);
                }
            }
        });
        Mirror {
            addr,
            state,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn put(&self, path: &str, data: Vec<u8>) {
        self.state
            .files
            .lock()
            .unwrap()
            .insert(format!("/{path}"), data);
    }

    fn drop_first_get(&self, path: &str) {
        self.state
            .drop_once
            .lock()
            .unwrap()
            .insert(format!("/{path}"));
    }

    fn requests(&self) -> Vec<Logged> {
        self.state.log.lock().unwrap().clone()
    }

    fn requests_for(&self, suffix: &str) -> Vec<Logged> {
        self.requests()
            .into_iter()
            .filter(|(p, _)| p.ends_with(suffix))
            .collect()
    }

    fn clear_log(&self) {
        self.state.log.lock().unwrap().clear();
    }

    fn stop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(st: &State, mut conn: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut range = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_string());
            }
        }
    }
    st.log.lock().unwrap().push((path.clone(), range.clone()));
    let Some(body) = st.files.lock().unwrap().get(&path).cloned() else {
        return conn.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    };
    let start = range
        .as_deref()
        .filter(|_| !st.no_range.load(Ordering::SeqCst))
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok());
    let len = body.len();
    let (head, part) = match start {
        Some(s) if s >= len => {
            let h = format!("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            return conn.write_all(h.as_bytes());
        }
        Some(s) => (
            format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {s}-{}/{len}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                len - 1,
                len - s
            ),
            &body[s..],
        ),
        None => (
            format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nAccept-Ranges: bytes\r\nConnection: close\r\n\r\n"),
            &body[..],
        ),
    };
    conn.write_all(head.as_bytes())?;
    if st.drop_once.lock().unwrap().remove(&path) {
        conn.write_all(&part[..part.len() / 2])?;
        conn.flush()?;
        return conn.shutdown(std::net::Shutdown::Both);
    }
    conn.write_all(part)
}

fn exact(v: &str) -> Version {
    Version::Exact { version: v.into() }
}

fn ocp(v: &Version, src: &Source, cache: &Cache, p: &Progress) -> anyhow::Result<release::Release> {
    release::resolve(Distribution::Ocp, v, src, cache, p)
}

fn run(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A started mirror serving the standard OCP fixture (images on the same mirror).
fn ocp_mirror(work: &Path) -> (Mirror, Fixture) {
    let mirror = Mirror::start(&[]);
    let fx = Fixture::ocp(work, &mirror.url());
    for (p, d) in &fx.files {
        mirror.put(p, d.clone());
    }
    (mirror, fx)
}

#[test]
fn resolve_fetch_extract_coreos_and_a_second_run_downloads_nothing() {
    let work = tempfile::tempdir().unwrap();
    let (mirror, fx) = ocp_mirror(work.path());
    let cache = Cache::new(work.path().join("cache"));
    let src = Source::parse(&mirror.url());
    let p = Progress::quiet();

    let rel = ocp(&Version::Minor { minor: 18 }, &src, &cache, &p).unwrap();
    assert_eq!(rel.version, V);
    assert_eq!(rel.release_image, release_image());
    assert!(
        p.notes().iter().any(|n| n == "ocp 4.18 is 4.18.7"),
        "{:?}",
        p.notes()
    );
    let installer_tar = fx.get(&format!("{OCP_DIR}/{V}/{}", fx.installer_tgz));
    assert_eq!(
        std::fs::read(&rel.installer_tarball).unwrap(),
        installer_tar
    );
    assert_eq!(rel.installer_tarball, cache.blob_path(&sha(installer_tar)));

    let tools = rel.tools(&cache).unwrap();
    assert!(
        run(&tools.openshift_install, &["version"]).contains(&format!("openshift-install {V}\n"))
    );
    assert_eq!(run(&tools.oc, &[]), format!("Client Version: {V}\n"));
    // extract_binary on its own: executable, only the named file.
    let out = work.path().join("bin");
    let oi = release::extract_binary(&rel.installer_tarball, "openshift-install", &out).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&oi).unwrap().permissions().mode() & 0o777,
        0o755
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
    let e = release::extract_binary(&rel.installer_tarball, "nope", &out).unwrap_err();
    assert!(e.to_string().contains("has no file `nope`"), "{e}");

    let qcow2 =
        release::coreos_image(&tools.openshift_install, CoreosKind::Qemu, &cache, &p).unwrap();
    assert_eq!(std::fs::read(&qcow2).unwrap(), fx.qcow2);
    assert_eq!(qcow2, cache.blob_path(&sha(&fx.qcow2)));
    let qgz = fx.get("rhcos/rhcos-qemu.x86_64.qcow2.gz");
    assert!(
        cache.blob(&sha(qgz)).is_none(),
        "the compressed image is not kept"
    );
    let iso =
        release::coreos_image(&tools.openshift_install, CoreosKind::LiveIso, &cache, &p).unwrap();
    assert_eq!(std::fs::read(&iso).unwrap(), fx.iso);
    for f in [
        &fx.installer_tgz,
        &fx.client_tgz,
        &"qcow2.gz".to_string(),
        &".iso".to_string(),
    ] {
        assert_eq!(
            mirror.requests_for(f).len(),
            1,
            "{f}: {:?}",
            mirror.requests()
        );
    }

    // Second run: the channel's metadata is asked for again (it moves), nothing else.
    mirror.clear_log();
    let p2 = Progress::quiet();
    let again = ocp(&Version::Minor { minor: 18 }, &src, &cache, &p2).unwrap();
    assert_eq!(again, rel);
    let tools2 = again.tools(&cache).unwrap();
    assert_eq!(tools2, tools);
    assert_eq!(
        release::coreos_image(&tools2.openshift_install, CoreosKind::Qemu, &cache, &p2).unwrap(),
        qcow2
    );
    assert_eq!(
        release::coreos_image(&tools2.openshift_install, CoreosKind::LiveIso, &cache, &p2).unwrap(),
        iso
    );
    let paths: Vec<String> = mirror.requests().into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        [
            format!("/{OCP_DIR}/stable-4.18/release.txt"),
            format!("/{OCP_DIR}/stable-4.18/sha256sum.txt")
        ]
    );

    // An exact version: its metadata once (other directory), then no request at all.
    mirror.clear_log();
    assert_eq!(ocp(&exact(V), &src, &cache, &p2).unwrap(), rel);
    assert_eq!(mirror.requests().len(), 2, "{:?}", mirror.requests());
    mirror.clear_log();
    assert_eq!(ocp(&exact(V), &src, &cache, &p2).unwrap(), rel);
    assert_eq!(mirror.requests(), vec![]);

    // Nothing left behind in the temporary area but locks.
    for e in std::fs::read_dir(cache.root().join("tmp")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(name.ends_with(".lock"), "{name}");
    }
}

#[test]
fn an_interrupted_download_resumes_with_a_range_request() {
    let work = tempfile::tempdir().unwrap();
    let (mirror, fx) = ocp_mirror(work.path());
    let path = format!("{OCP_DIR}/{V}/{}", fx.installer_tgz);
    mirror.drop_first_get(&path);
    let cache = Cache::new(work.path().join("cache"));
    let p = Progress::quiet();
    let rel = ocp(&exact(V), &Source::parse(&mirror.url()), &cache, &p).unwrap();
    let data = fx.get(&path);
    assert_eq!(std::fs::read(&rel.installer_tarball).unwrap(), data);
    let reqs = mirror.requests_for(&fx.installer_tgz);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(reqs[0].1, None);
    let half = data.len() / 2;
    assert_eq!(
        reqs[1].1.as_deref(),
        Some(format!("bytes={half}-").as_str()),
        "{reqs:?}"
    );
    assert!(
        p.notes()
            .iter()
            .any(|n| n.contains("interrupted") && n.contains("resuming")),
        "{:?}",
        p.notes()
    );
}

#[test]
fn a_partial_file_from_an_earlier_run_resumes_or_restarts() {
    let work = tempfile::tempdir().unwrap();
    let (mirror, fx) = ocp_mirror(work.path());
    let path = format!("{OCP_DIR}/{V}/{}", fx.installer_tgz);
    let data = fx.get(&path).to_vec();
    let digest = sha(&data);
    let url = format!("{}/{path}", mirror.url());
    let p = Progress::quiet();

    let cache = Cache::new(work.path().join("c1"));
    std::fs::create_dir_all(cache.root().join("tmp")).unwrap();
    std::fs::write(cache.partial_path(&digest), &data[..1000]).unwrap();
    let got = release::fetch(&url, &digest, &cache, &p).unwrap();
    assert_eq!(std::fs::read(got).unwrap(), data);
    assert_eq!(
        mirror.requests(),
        vec![(format!("/{path}"), Some("bytes=1000-".to_string()))]
    );
    assert!(!cache.partial_path(&digest).exists());

    // A mirror without range support answers 200: start over, still correct.
    mirror.state.no_range.store(true, Ordering::SeqCst);
    mirror.clear_log();
    let cache = Cache::new(work.path().join("c2"));
    std::fs::create_dir_all(cache.root().join("tmp")).unwrap();
    std::fs::write(cache.partial_path(&digest), &data[..1000]).unwrap();
    let got = release::fetch(&url, &digest, &cache, &p).unwrap();
    assert_eq!(std::fs::read(got).unwrap(), data);
    assert_eq!(mirror.requests().len(), 1);

    // A stale partial that is not a prefix of the file: detected, downloaded again.
    mirror.state.no_range.store(false, Ordering::SeqCst);
    mirror.clear_log();
    let cache = Cache::new(work.path().join("c3"));
    std::fs::create_dir_all(cache.root().join("tmp")).unwrap();
    std::fs::write(cache.partial_path(&digest), vec![0u8; 1000]).unwrap();
    let got = release::fetch(&url, &digest, &cache, &p).unwrap();
    assert_eq!(std::fs::read(got).unwrap(), data);
    assert_eq!(mirror.requests().len(), 2, "{:?}", mirror.requests());
}

fn assert_cache_empty(cache: &Cache) {
    assert_eq!(cache.blobs().unwrap(), Vec::<String>::new());
    if let Ok(rd) = std::fs::read_dir(cache.root().join("tmp")) {
        for e in rd {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(name.ends_with(".lock"), "left behind: {name}");
        }
    }
}

#[test]
fn a_corrupted_or_truncated_tarball_is_a_clear_error_and_nothing_is_cached() {
    let work = tempfile::tempdir().unwrap();
    let (mirror, fx) = ocp_mirror(work.path());
    let path = format!("{OCP_DIR}/{V}/{}", fx.installer_tgz);
    let good = fx.get(&path).to_vec();
    let src = Source::parse(&mirror.url());

    let mut bad = good.clone();
    bad[good.len() / 3] ^= 0x55;
    for (what, served) in [
        ("corrupted", bad.clone()),
        ("truncated", good[..good.len() / 2].to_vec()),
    ] {
        mirror.put(&path, served.clone());
        let cache = Cache::new(work.path().join(what));
        let err = ocp(&exact(V), &src, &cache, &Progress::quiet()).unwrap_err();
        let msg = format!("{err:#}");
        let mismatch = err.downcast_ref::<DigestMismatch>().expect(&msg);
        assert_eq!(mismatch.expected, sha(&good));
        assert_eq!(mismatch.actual, sha(&served));
        assert!(msg.contains(&format!("{}/{path}", mirror.url())), "{msg}");
        assert!(
            msg.contains(&sha(&good)) && msg.contains(&sha(&served)),
            "{msg}"
        );
        assert!(msg.contains("nothing was cached"), "{msg}");
        assert_cache_empty(&cache);
    }

    // Fixed on the mirror: the next run works.
    mirror.put(&path, good.clone());
    let cache = Cache::new(work.path().join("corrupted"));
    assert!(ocp(&exact(V), &src, &cache, &Progress::quiet()).is_ok());

    // A missing file is an HTTP error naming the URL.
    let cache = Cache::new(work.path().join("missing"));
    let err = ocp(&exact("4.18.99"), &src, &cache, &Progress::quiet()).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("4.18.99/release.txt") && msg.contains("404"),
        "{msg}"
    );
}

#[test]
fn a_local_directory_source_works_for_ocp_and_okd() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("mirror");
    let fx = Fixture::ocp(work.path(), root.to_str().unwrap());
    fx.write_to(&root);
    let cache = Cache::new(work.path().join("cache"));
    let p = Progress::quiet();
    let src = Source::parse(root.to_str().unwrap());
    let rel = ocp(
        &Version::Channel {
            channel: Channel::Stable,
            minor: Some(18),
        },
        &src,
        &cache,
        &p,
    )
    .unwrap();
    assert_eq!(rel.version, V);
    let tools = rel.tools(&cache).unwrap();
    let qcow2 =
        release::coreos_image(&tools.openshift_install, CoreosKind::Qemu, &cache, &p).unwrap();
    assert_eq!(std::fs::read(qcow2).unwrap(), fx.qcow2);
    // file:// works too, and the cache is used.
    let file_src = Source::parse(&format!("file://{}", root.display()));
    assert_eq!(ocp(&exact(V), &file_src, &cache, &p).unwrap(), rel);

    // OKD: <base>/<tag>/ with the same file names; channels are refused.
    let okd_v = "4.17.0-okd-scos.0";
    let okd_root = work.path().join("okd");
    let okd = Fixture::build(
        work.path(),
        okd_root.to_str().unwrap(),
        &[okd_v.to_string()],
        okd_v,
    );
    okd.write_to(&okd_root);
    let okd_src = Source::Dir(okd_root.clone());
    let rel = release::resolve(Distribution::Okd, &exact(okd_v), &okd_src, &cache, &p).unwrap();
    assert_eq!(rel.version, okd_v);
    assert_eq!(
        run(&rel.tools(&cache).unwrap().oc, &[]),
        format!("Client Version: {okd_v}\n")
    );
    let err = release::resolve(
        Distribution::Okd,
        &Version::Minor { minor: 17 },
        &okd_src,
        &cache,
        &p,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("OKD needs an exact version such as `4.17.0-okd-scos.0`"),
        "{err}"
    );

    // A local file with the wrong content is refused like a download.
    let cache2 = Cache::new(work.path().join("cache2"));
    let tgz = root.join(format!("{OCP_DIR}/{V}/{}", fx.installer_tgz));
    std::fs::write(&tgz, b"not a tarball").unwrap();
    let err = ocp(&exact(V), &src, &cache2, &p).unwrap_err();
    assert!(err.downcast_ref::<DigestMismatch>().is_some(), "{err:#}");
    assert_cache_empty(&cache2);
}

#[test]
fn offline_with_a_warm_cache_works_and_says_so() {
    let work = tempfile::tempdir().unwrap();
    let (mut mirror, fx) = ocp_mirror(work.path());
    let url = mirror.url();
    let src = Source::parse(&url);
    let cache = Cache::new(work.path().join("cache"));
    let warm = ocp(
        &Version::Minor { minor: 18 },
        &src,
        &cache,
        &Progress::quiet(),
    )
    .unwrap();
    let tools = warm.tools(&cache).unwrap();
    let qcow2 = release::coreos_image(
        &tools.openshift_install,
        CoreosKind::Qemu,
        &cache,
        &Progress::quiet(),
    )
    .unwrap();
    mirror.stop();

    let p = Progress::quiet();
    let rel = ocp(&Version::Minor { minor: 18 }, &src, &cache, &p).unwrap();
    assert_eq!(rel, warm);
    let notes = p.notes();
    assert!(
        notes.iter().any(|n| n.starts_with(&format!(
            "offline: using cached {url}/{OCP_DIR}/stable-4.18/release.txt"
        ))),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("offline: using cached") && n.contains("sha256sum.txt")),
        "{notes:?}"
    );
    assert_eq!(
        release::coreos_image(&tools.openshift_install, CoreosKind::Qemu, &cache, &p).unwrap(),
        qcow2
    );
    assert_eq!(std::fs::read(&qcow2).unwrap(), fx.qcow2);

    // A cold cache offline: a clear error.
    let cold = Cache::new(work.path().join("cold"));
    let err = ocp(
        &Version::Minor { minor: 18 },
        &src,
        &cold,
        &Progress::quiet(),
    )
    .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("cannot reach") && msg.contains("no cached copy"),
        "{msg}"
    );
}

#[test]
fn qcow2_gz_is_checked_compressed_and_uncompressed() {
    let work = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(&[]);
    let raw = noise(50_000, 5);
    let gz = gzip(&raw);
    mirror.put("rhcos/q.qcow2.gz", gz.clone());
    mirror.put("rhcos/live.iso", b"iso".to_vec());
    let loc = format!("{}/rhcos/q.qcow2.gz", mirror.url());
    let iso_loc = format!("{}/rhcos/live.iso", mirror.url());
    let wrong = "0".repeat(64);

    // Wrong compressed digest: refused, nothing cached.
    let cache = Cache::new(work.path().join("c1"));
    let oi = fake_installer(
        &work.path().join("i1"),
        &stream_json(&loc, &wrong, &sha(&raw), &iso_loc, &wrong),
    );
    let err = release::coreos_image(&oi, CoreosKind::Qemu, &cache, &Progress::quiet()).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("sha256 mismatch") && msg.contains(&loc) && msg.contains(&sha(&gz)),
        "{msg}"
    );
    assert_cache_empty(&cache);
    let err =
        release::coreos_image(&oi, CoreosKind::LiveIso, &cache, &Progress::quiet()).unwrap_err();
    assert!(err.downcast_ref::<DigestMismatch>().is_some(), "{err:#}");
    assert_cache_empty(&cache);

    // Right compressed digest, wrong uncompressed one: refused, no qcow2 cached.
    let cache = Cache::new(work.path().join("c2"));
    let oi = fake_installer(
        &work.path().join("i2"),
        &stream_json(&loc, &sha(&gz), &wrong, &iso_loc, &wrong),
    );
    let err = release::coreos_image(&oi, CoreosKind::Qemu, &cache, &Progress::quiet()).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("uncompressed-sha256 mismatch") && msg.contains(&sha(&raw)),
        "{msg}"
    );
    assert_eq!(
        cache.blobs().unwrap(),
        vec![sha(&gz)],
        "only the verified compressed file"
    );
    assert!(cache.blob(&wrong).is_none());

    // Both right: the qcow2, by its uncompressed digest; then no download at all.
    let cache = Cache::new(work.path().join("c3"));
    let oi = fake_installer(
        &work.path().join("i3"),
        &stream_json(&loc, &sha(&gz), &sha(&raw), &iso_loc, &wrong),
    );
    let p = release::coreos_image(&oi, CoreosKind::Qemu, &cache, &Progress::quiet()).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), raw);
    mirror.clear_log();
    assert_eq!(
        release::coreos_image(&oi, CoreosKind::Qemu, &cache, &Progress::quiet()).unwrap(),
        p
    );
    assert_eq!(mirror.requests(), vec![]);
}

/// A throwaway OpenPGP key made by GnuPG in a private home: (GNUPGHOME, armored
/// public key file).
fn test_key(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let home = dir.join(format!("gnupg-{name}"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let gpg = |args: &[&str]| {
        let out = Command::new("gpg")
            .env("GNUPGHOME", &home)
            .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(args)
            .output()
            .expect("gpg (Debian package gnupg)");
        assert!(
            out.status.success(),
            "gpg {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    gpg(&[
        "--quick-gen-key",
        &format!("{name} <{name}@test>"),
        "ed25519",
        "sign",
        "never",
    ]);
    let key = dir.join(format!("{name}.asc"));
    std::fs::write(&key, gpg(&["--armor", "--export"])).unwrap();
    (home, key)
}

fn detach_sign(home: &Path, data: &[u8], dir: &Path) -> Vec<u8> {
    let input = dir.join("to-sign");
    std::fs::write(&input, data).unwrap();
    let sig = dir.join("to-sign.gpg");
    let _ = std::fs::remove_file(&sig);
    let out = Command::new("gpg")
        .env("GNUPGHOME", home)
        .args([
            "--batch",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
            "--detach-sign",
            "-o",
        ])
        .arg(&sig)
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&sig).unwrap()
}

#[test]
fn a_configured_release_key_must_have_signed_the_digest_list() {
    let work = tempfile::tempdir().unwrap();
    let (mirror, fx) = ocp_mirror(work.path());
    let src = Source::parse(&mirror.url());
    let (home, key) = test_key(work.path(), "release");
    let (other_home, _) = test_key(work.path(), "someone-else");
    let sums_path = format!("{OCP_DIR}/{V}/sha256sum.txt");
    let sums = fx.get(&sums_path).to_vec();
    let verified = |n: u32| {
        let cache = Cache::new(work.path().join(format!("cache-{n}")));
        let p = Progress::quiet();
        let r =
            release::resolve_verified(Distribution::Ocp, &exact(V), &src, &cache, &p, Some(&key));
        (r, p.notes())
    };

    // No signature published: a configured key means nothing is trusted.
    let (r, _) = verified(1);
    let e = format!("{:#}", r.unwrap_err());
    assert!(e.contains("publishes no signature of sha256sum.txt"), "{e}");

    // A good signature (sha256sum.txt.gpg, as the mirror publishes it).
    mirror.put(
        &format!("{sums_path}.gpg"),
        detach_sign(&home, &sums, work.path()),
    );
    let (r, notes) = verified(2);
    assert_eq!(r.unwrap().version, V);
    assert!(
        notes.iter().any(|n| n.contains("good signature")),
        "{notes:?}"
    );

    // Signed by another key.
    mirror.put(
        &format!("{sums_path}.gpg"),
        detach_sign(&other_home, &sums, work.path()),
    );
    let e = format!("{:#}", verified(3).0.unwrap_err());
    assert!(e.contains("is not signed by the key in"), "{e}");

    // A tampered list under a signature of the original.
    mirror.put(
        &format!("{sums_path}.gpg"),
        detach_sign(&home, &sums, work.path()),
    );
    let mut tampered = String::from_utf8(sums.clone()).unwrap();
    let first = tampered.find(|c: char| c.is_ascii_hexdigit()).unwrap();
    let flipped = if &tampered[first..first + 1] == "0" {
        "1"
    } else {
        "0"
    };
    tampered.replace_range(first..first + 1, flipped);
    mirror.put(&sums_path, tampered.into_bytes());
    let e = format!("{:#}", verified(4).0.unwrap_err());
    assert!(e.contains("is not signed by the key in"), "{e}");

    // Without a key nothing is checked (and the tampered digest fails later, on the
    // tarball itself).
    mirror.put(&sums_path, sums);
    let cache = Cache::new(work.path().join("cache-5"));
    assert!(ocp(&exact(V), &src, &cache, &Progress::quiet()).is_ok());
}

#[test]
fn oversized_answers_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(&[]);
    let big = noise(200_000, 3);
    mirror.put("big.bin", big.clone());
    let cache = Cache::new(work.path().join("cache"));
    let e = release::fetch_limited(
        &format!("{}/big.bin", mirror.url()),
        &sha(&big),
        &cache,
        &Progress::quiet(),
        64 * 1024,
    )
    .unwrap_err();
    let too = e.downcast_ref::<release::TooLarge>().expect("TooLarge");
    assert_eq!(too.limit, 64 * 1024);
    assert!(e.to_string().contains("larger than the 65536 bytes"), "{e}");
    // Nothing of it is kept.
    assert!(cache.blob(&sha(&big)).is_none());
    // Under the cap it is fetched.
    release::fetch_limited(
        &format!("{}/big.bin", mirror.url()),
        &sha(&big),
        &cache,
        &Progress::quiet(),
        1 << 20,
    )
    .unwrap();
    // A metadata file is at most MAX_TEXT_BYTES.
    mirror.put(
        "huge/release.txt",
        vec![b'a'; (release::MAX_TEXT_BYTES + 10) as usize],
    );
    let e = release::fetch_text(
        &format!("{}/huge/release.txt", mirror.url()),
        release::Freshness::Mutable,
        &cache,
        &Progress::quiet(),
    )
    .unwrap_err();
    assert!(e.downcast_ref::<release::TooLarge>().is_some(), "{e:#}");
}

#[test]
fn okd_before_4_19_takes_the_fcos_qcow2_xz_checked_compressed_and_uncompressed() {
    let work = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(&[]);
    let raw = noise(50_000, 5);
    let packed = xz(&raw);
    mirror.put("fcos/q.qcow2.xz", packed.clone());
    let loc = format!("{}/fcos/q.qcow2.xz", mirror.url());
    let iso_loc = format!("{}/fcos/live.iso", mirror.url());
    let wrong = "0".repeat(64);
    let installer = |name: &str, xz_sha: &str, raw_sha: &str| {
        fake_installer(
            &work.path().join(name),
            &fcos39_stream_json(&loc, xz_sha, raw_sha, &iso_loc, &wrong),
        )
    };

    // Wrong compressed digest: refused, nothing cached.
    let cache = Cache::new(work.path().join("c1"));
    let oi = installer("i1", &wrong, &sha(&raw));
    let err = release::coreos_image(&oi, CoreosKind::Qemu, &cache, &Progress::quiet()).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("sha256 mismatch") && msg.contains(&loc) && msg.contains(&sha(&packed)),
        "{msg}"
    );
    assert_cache_empty(&cache);

    // Right compressed digest, wrong uncompressed one: refused, no qcow2 cached.
    let cache = Cache::new(work.path().join("c2"));
    let oi = installer("i2", &sha(&packed), &wrong);
    let err = release::coreos_image(&oi, CoreosKind::Qemu, &cache, &Progress::quiet()).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("uncompressed-sha256 mismatch") && msg.contains(&sha(&raw)),
        "{msg}"
    );
    assert_eq!(cache.blobs().unwrap(), vec![sha(&packed)]);

    // A damaged xz whose digest the stream vouches for: xz's own check refuses it.
    let mut damaged = packed.clone();
    let mid = damaged.len() / 2;
    damaged[mid] ^= 0x55;
    mirror.put("fcos/damaged.qcow2.xz", damaged.clone());
    let cache = Cache::new(work.path().join("c3"));
    let oi = fake_installer(
        &work.path().join("i3"),
        &fcos39_stream_json(
            &format!("{}/fcos/damaged.qcow2.xz", mirror.url()),
            &sha(&damaged),
            &sha(&raw),
            &iso_loc,
            &wrong,
        ),
    );
    let err = release::coreos_image(&oi, CoreosKind::Qemu, &cache, &Progress::quiet()).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("decompressing"), "{msg}");
    assert!(cache.blob(&sha(&raw)).is_none());

    // Both right: the qcow2, decompressed, by its uncompressed digest; the .xz
    // not kept; then no download at all.
    let cache = Cache::new(work.path().join("c4"));
    let oi = installer("i4", &sha(&packed), &sha(&raw));
    let p = release::coreos_image(&oi, CoreosKind::Qemu, &cache, &Progress::quiet()).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), raw);
    assert_eq!(p, cache.blob_path(&sha(&raw)));
    assert!(cache.blob(&sha(&packed)).is_none());
    mirror.clear_log();
    assert_eq!(
        release::coreos_image(&oi, CoreosKind::Qemu, &cache, &Progress::quiet()).unwrap(),
        p
    );
    assert_eq!(mirror.requests(), vec![]);

    // A stream with both formats: the gz (faster to decompress), wherever it stands.
    let raw = noise(40_000, 9);
    let (gz, packed) = (gzip(&raw), xz(&raw));
    mirror.put("q.qcow2.gz", gz.clone());
    mirror.put("q.qcow2.xz", packed.clone());
    let at = |f: &str| format!("{}/{f}", mirror.url());
    let disk = |f: &str, d: &[u8]| serde_json::json!({"disk": {"location": at(f), "sha256": sha(d), "uncompressed-sha256": sha(&raw)}});
    // The xz first in the file: the order of the formats does not decide.
    let stream = serde_json::json!({"architectures": {"x86_64": {"artifacts": {"qemu": {"formats": {
        "qcow2.xz": disk("q.qcow2.xz", &packed), "qcow2.gz": disk("q.qcow2.gz", &gz)}}}}}});
    let oi = fake_installer(&work.path().join("i5"), &stream.to_string());
    let cache = Cache::new(work.path().join("c5"));
    mirror.clear_log();
    let p = release::coreos_image(&oi, CoreosKind::Qemu, &cache, &Progress::quiet()).unwrap();
    assert_eq!(std::fs::read(p).unwrap(), raw);
    let paths: Vec<String> = mirror.requests().into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["/q.qcow2.gz"]);
}

/// `examples/okd.yaml` (OKD before 4.19) through the release target, from a
/// mirror whose installer's stream has only `qcow2.xz`, as the real one's.
#[test]
fn examples_okd_passes_the_release_target_against_a_mirror_with_only_qcow2_xz() {
    let work = tempfile::tempdir().unwrap();
    let h = work.path();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/okd.yaml");
    let text = std::fs::read_to_string(&example).unwrap();
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("version: "))
        .unwrap()
        .trim()
        .to_string();
    let root = h.join("mirror");
    let fx = Fixture::build(
        h,
        root.to_str().unwrap(),
        std::slice::from_ref(&version),
        &version,
    );
    fx.write_to(&root);
    let file = h.join("okd.yaml");
    std::fs::write(&file, format!("{text}mirror: {}\n", root.display())).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_shiftlab"))
        .args(["create", "manifests", "-f", file.to_str().unwrap()])
        .current_dir(h)
        .env("HOME", h)
        .env("SHIFTLAB_HOME", h.join("state"))
        .env(release::CACHE_ENV, h.join("cache"))
        .env_remove("LIBVIRT_DEFAULT_URI")
        .output()
        .unwrap();
    // `create manifests`: the release target and the two after it (the fake
    // installer from the mirror runs); the CLI has no `create release`.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(h.join("state/clusters/okd/install-state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["targets"]["release"]["status"], "done", "{err}");
    let cache = Cache::new(h.join("cache"));
    let image = cache.blob(&sha(&fx.qcow2)).expect("the decompressed qcow2");
    assert!(
        err.contains(&format!("CoreOS image {}", image.display())),
        "{err}"
    );
    assert_eq!(std::fs::read(image).unwrap(), fx.qcow2);
}
