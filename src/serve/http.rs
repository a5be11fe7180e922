//! The client side of the HTTP artifact server (`crate::daemon::http`): what it
//! serves is a cluster's `http/` directory and, behind the cluster's token,
//! `http-private/`; the commands and targets publish into them and withdraw
//! from them here, without the daemon. Also the one rule of which names it
//! serves ([`safe_relative`]), shared with the server, and [`list_files`], what
//! status shows.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::state::ClusterDir;

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The relative path a request names, if it is a safe one: decoded segments of
/// letters, digits, `-`, `_`, `.`, `+`, none empty, none starting with a dot.
pub fn safe_relative(path: &str) -> Option<PathBuf> {
    let decoded = String::from_utf8(percent_decode(path)?).ok()?;
    let rel = decoded.strip_prefix('/')?;
    let mut out = PathBuf::new();
    for seg in rel.split('/') {
        let ok = !seg.is_empty()
            && !seg.starts_with('.')
            && seg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'));
        if !ok {
            return None;
        }
        out.push(seg);
    }
    Some(out)
}

/// Publish an artifact that carries secrets: written 0600 into the private
/// directory, served at the returned path (`/<token>/<name>`) and nowhere else.
/// The token is made once per cluster and kept.
pub fn publish_private(cluster: &ClusterDir, name: &str, bytes: &[u8]) -> Result<String> {
    if safe_relative(&format!("/{name}")).is_none() || name.contains('/') {
        anyhow::bail!("{name:?} is not a file name the HTTP server serves");
    }
    let token = cluster_token(cluster)?;
    crate::files::write_private(&cluster.http_private().join(name), bytes)?;
    Ok(format!("/{token}/{name}"))
}

/// The cluster's HTTP token when it has one; nothing is made.
pub fn stored_token(cluster: &ClusterDir) -> Option<String> {
    std::fs::read_to_string(cluster.http_token())
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| t.len() >= MIN_TOKEN_LEN)
}

/// The token a render (which writes nothing) puts in the URLs: the cluster's,
/// else a new one for the render alone, stored nowhere (said on stderr).
pub fn token_for_render(cluster: &ClusterDir) -> Result<String> {
    if let Some(t) = stored_token(cluster) {
        return Ok(t);
    }
    eprintln!(
        "note: {} has no HTTP token yet: this render's is stored nowhere (create makes the cluster's own)",
        cluster.name()
    );
    crate::files::random_secret(MIN_TOKEN_LEN)
}

/// The cluster's HTTP token (a secret), made once and kept.
pub fn cluster_token(cluster: &ClusterDir) -> Result<String> {
    Ok(match stored_token(cluster) {
        Some(t) => t,
        None => {
            let t = crate::files::random_secret(MIN_TOKEN_LEN)?;
            crate::files::write_private(&cluster.http_token(), format!("{t}\n").as_bytes())?;
            t
        }
    })
}

/// Withdraw everything published for `node` (`<node>.*`, public or private),
/// e.g. the bootstrap's once it is removed. Returns the files removed.
pub fn unpublish_node(cluster: &ClusterDir, node: &str) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for dir in [cluster.http_public(), cluster.http_private()] {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let is_node = name
                .strip_prefix(node)
                .is_some_and(|rest| rest.starts_with('.'));
            if is_node && e.file_type().is_ok_and(|t| t.is_file()) {
                std::fs::remove_file(e.path())
                    .with_context(|| format!("removing {}", e.path().display()))?;
                removed.push(e.path());
            }
        }
    }
    Ok(removed)
}

/// Shortest token the private route accepts (a shorter file is not a token).
pub const MIN_TOKEN_LEN: usize = 32;

/// Every regular, non-hidden file below `root`, relative, sorted.
pub fn list_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => walk(root, &p, out),
                Ok(t) if t.is_file() => {
                    if let Ok(r) = p.strip_prefix(root) {
                        if safe_relative(&format!("/{}", r.display())).is_some() {
                            out.push(r.to_path_buf());
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_paths_are_refused() {
        for p in [
            "/../etc/passwd",
            "/a/../../x",
            "/%2e%2e/etc/passwd",
            "/..%2fetc",
            "/.hidden",
            "/a//b",
            "/",
            "/a/",
            "/a\\b",
            "/a%00b",
            "/%zz",
            "relative",
        ] {
            assert_eq!(safe_relative(p), None, "{p}");
        }
        assert_eq!(safe_relative("/master.ign"), Some("master.ign".into()));
        assert_eq!(
            safe_relative("/iso/agent.x86_64.iso"),
            Some("iso/agent.x86_64.iso".into())
        );
        assert_eq!(safe_relative("/a%2Bb"), Some("a+b".into()));
    }
}
