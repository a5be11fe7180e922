//! The HTTP artifact server over real sockets (loopback): whole files, HEAD,
//! byte ranges, published sha512 digests, and every way out of the directory
//! refused.

mod common;
#[path = "common/services.rs"]
mod services;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use services::get;
use sha2::{Digest, Sha512};
use shiftlab::daemon::http::{Digests, Listener};

fn raw(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn artifacts_are_served_read_only_with_ranges_and_digests() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("clusters/c1/http");
    std::fs::create_dir_all(root.join("iso")).unwrap();
    let ign = br#"{"ignition":{"version":"3.4.0"}}"#.to_vec();
    let iso: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(root.join("worker.ign"), &ign).unwrap();
    std::fs::write(root.join("iso/live.iso"), &iso).unwrap();
    std::fs::write(root.join(".worker.ign.tmp-1"), "partial").unwrap();
    std::fs::write(dir.path().join("clusters/c1/kubeadmin-password"), "secret").unwrap();
    std::os::unix::fs::symlink("../kubeadmin-password", root.join("pw")).unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(Listener::start(
            "127.77.40.1:0".parse().unwrap(),
            root.clone().into(),
            Arc::new(Digests::default()),
        ))
        .unwrap();
    let addr = listener.addr;

    // Whole files, with their type and length.
    let (status, head, body) = get(addr, "/worker.ign", &[]).unwrap();
    assert_eq!(status, 200);
    assert_eq!(body, ign);
    assert_eq!(
        header(&head, "content-type"),
        Some("application/vnd.coreos.ignition+json")
    );
    assert_eq!(header(&head, "accept-ranges"), Some("bytes"));
    let (status, _, body) = get(addr, "/iso/live.iso", &[]).unwrap();
    assert_eq!((status, body.len()), (200, iso.len()));
    assert_eq!(body, iso);

    // HEAD: headers only.
    let head = raw(addr, "HEAD /iso/live.iso HTTP/1.0\r\n\r\n");
    assert!(head.starts_with("HTTP/1.0 200"), "{head}");
    assert_eq!(header(&head, "content-length"), Some("300000"));
    assert!(head.ends_with("\r\n\r\n"));

    // Ranges.
    let (status, head, body) = get(addr, "/iso/live.iso", &[("Range", "bytes=1000-1999")]).unwrap();
    assert_eq!(status, 206);
    assert_eq!(body, &iso[1000..2000]);
    assert_eq!(
        header(&head, "content-range"),
        Some("bytes 1000-1999/300000")
    );
    let (status, _, body) = get(addr, "/iso/live.iso", &[("Range", "bytes=-10")]).unwrap();
    assert_eq!((status, body.as_slice()), (206, &iso[iso.len() - 10..]));
    let (status, _, body) = get(addr, "/iso/live.iso", &[("Range", "bytes=299990-")]).unwrap();
    assert_eq!((status, body.len()), (206, 10));
    let (status, head, _) = get(addr, "/iso/live.iso", &[("Range", "bytes=300000-")]).unwrap();
    assert_eq!(status, 416);
    assert_eq!(header(&head, "content-range"), Some("bytes */300000"));

    // Digests: per file for coreos-installer --ignition-hash, and a sums list.
    let want = hex::encode(Sha512::digest(&ign));
    let (status, _, body) = get(addr, "/worker.ign.sha512", &[]).unwrap();
    assert_eq!(status, 200);
    assert_eq!(String::from_utf8(body).unwrap(), format!("sha512-{want}\n"));
    let (_, _, sums) = get(addr, "/SHA512SUMS", &[]).unwrap();
    let sums = String::from_utf8(sums).unwrap();
    assert_eq!(
        sums,
        format!(
            "{}  iso/live.iso\n{want}  worker.ign\n",
            hex::encode(Sha512::digest(&iso))
        )
    );
    // A changed file gets a new digest.
    std::fs::write(root.join("worker.ign"), b"{}").unwrap();
    let (_, _, body) = get(addr, "/worker.ign.sha512", &[]).unwrap();
    assert_eq!(
        String::from_utf8(body).unwrap(),
        format!("sha512-{}\n", hex::encode(Sha512::digest(b"{}")))
    );

    // No listing, no hidden files, no way out.
    for path in [
        "/",
        "/iso",
        "/iso/",
        "/.worker.ign.tmp-1",
        "/pw",
        "/../kubeadmin-password",
        "/iso/../../kubeadmin-password",
        "/%2e%2e/kubeadmin-password",
        "/..%2fkubeadmin-password",
        "/iso/%2e%2e/%2e%2e/kubeadmin-password",
        "//etc/passwd",
        "/etc/passwd",
        "/worker.ign%00.png",
        "/pw.sha512",
    ] {
        let (status, _, body) = get(addr, path, &[]).unwrap();
        assert_eq!(status, 404, "{path}");
        assert!(!String::from_utf8_lossy(&body).contains("secret"), "{path}");
    }
    // Read-only.
    for method in ["PUT", "POST", "DELETE"] {
        let r = raw(
            addr,
            &format!("{method} /worker.ign HTTP/1.0\r\nContent-Length: 2\r\n\r\n{{}}"),
        );
        assert!(r.starts_with("HTTP/1.0 405"), "{method}: {r}");
    }
    assert_eq!(std::fs::read(root.join("worker.ign")).unwrap(), b"{}");

    rt.block_on(listener.stop());
}

/// Secret-bearing artifacts: served only behind the cluster's token, never listed,
/// withdrawn per node.
#[test]
fn private_artifacts_need_the_token_and_are_never_listed() {
    use shiftlab::daemon::http::Roots;
    use shiftlab::serve::http::{publish_private, unpublish_node};
    use shiftlab::state::StateDir;
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let state = StateDir {
        root: dir.path().into(),
    };
    let files = state.cluster("c1");
    std::fs::create_dir_all(files.http_public()).unwrap();
    std::fs::write(files.http_public().join("live.iso"), b"public iso").unwrap();
    let secret = br#"{"ignition":{"version":"3.4.0"},"pullSecret":"s3cret"}"#;
    let url = publish_private(&files, "c1-bootstrap.ign", secret).unwrap();
    let token = std::fs::read_to_string(files.http_token()).unwrap();
    let token = token.trim();
    assert!(token.len() >= 32, "an unguessable token");
    assert_eq!(url, format!("/{token}/c1-bootstrap.ign"));
    for f in [
        files.http_token(),
        files.http_private().join("c1-bootstrap.ign"),
    ] {
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
    // The token is made once and kept.
    assert_eq!(
        publish_private(&files, "c1-master.ign", b"{}").unwrap(),
        format!("/{token}/c1-master.ign")
    );
    assert!(publish_private(&files, "../x", b"{}").is_err());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(Listener::start(
            "127.77.40.2:0".parse().unwrap(),
            Roots::of(&files),
            Arc::new(Digests::default()),
        ))
        .unwrap();
    let addr = listener.addr;

    let (status, _, body) = get(addr, &url, &[]).unwrap();
    assert_eq!(status, 200);
    assert_eq!(body, secret);
    let (status, _, body) = get(addr, &format!("{url}.sha512"), &[]).unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        String::from_utf8(body).unwrap(),
        format!("sha512-{}\n", hex::encode(Sha512::digest(secret)))
    );
    // Without the token, with a wrong or a partial one: not found, as if absent.
    // One character off (never the same one: a token ending in `x` once made this
    // "wrong" token the right one).
    let last = if token.ends_with('x') { 'y' } else { 'x' };
    let wrong = format!("{}{last}", &token[..token.len() - 1]);
    for path in [
        "/c1-bootstrap.ign".to_string(),
        "/c1-bootstrap.ign.sha512".to_string(),
        format!("/{wrong}/c1-bootstrap.ign"),
        format!("/{}/c1-bootstrap.ign", &token[..16]),
        format!("/{token}/SHA512SUMS"),
        format!("/{token}/"),
        format!("/{token}/../http-token"),
        "/http-token".to_string(),
        "/../http-token".to_string(),
    ] {
        let (status, _, body) = get(addr, &path, &[]).unwrap();
        assert_eq!(status, 404, "{path}");
        assert!(!String::from_utf8_lossy(&body).contains("s3cret"), "{path}");
    }
    // The digest list names the public artifacts only.
    let (_, _, sums) = get(addr, "/SHA512SUMS", &[]).unwrap();
    let sums = String::from_utf8(sums).unwrap();
    assert!(sums.contains("  live.iso"), "{sums}");
    assert!(!sums.contains(".ign") && !sums.contains(token), "{sums}");
    assert_eq!(
        shiftlab::serve::http::list_files(&files.http_public()),
        vec![std::path::PathBuf::from("live.iso")]
    );
    // Log lines never carry the token.
    assert_eq!(
        shiftlab::daemon::http::loggable(&url),
        "/…/c1-bootstrap.ign"
    );

    // The bootstrap's files go when it does; the others stay.
    let removed = unpublish_node(&files, "c1-bootstrap").unwrap();
    assert_eq!(removed.len(), 1, "{removed:?}");
    let (status, _, _) = get(addr, &url, &[]).unwrap();
    assert_eq!(status, 404);
    let (status, _, _) = get(addr, &format!("/{token}/c1-master.ign"), &[]).unwrap();
    assert_eq!(status, 200);
    assert!(unpublish_node(&files, "c1-bootstrap").unwrap().is_empty());

    rt.block_on(listener.stop());
}
