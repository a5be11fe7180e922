//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The plan of a cluster file's text: the integration tests' one fixture.
/// `base_dir` is where relative paths in the file resolve (its directory).
pub fn plan_from_yaml(text: &str, name: &str, base_dir: Option<&Path>) -> shiftlab::plan::Plan {
    let env = shiftlab::spec::Env {
        home: None,
        base_dir: base_dir.map(Path::to_path_buf).unwrap_or_default(),
        libvirt_default_uri: None,
    };
    let loaded = shiftlab::spec::from_str(text, name, &env);
    shiftlab::plan::derive(&loaded.unwrap_or_else(|e| panic!("{e}")).spec)
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Run the shiftlab binary with an isolated HOME and state directory, so that
/// nothing of the machine running the tests leaks in or gets written.
pub fn shiftlab(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shiftlab"))
        .args(args)
        .current_dir(home)
        .env("HOME", home)
        .env("SHIFTLAB_HOME", home.join("state"))
        .env_remove("LIBVIRT_DEFAULT_URI")
        .env_remove("XDG_DATA_HOME")
        .output()
        .expect("running shiftlab")
}

/// Write `<home>/lab1.yaml`: a rehearsal (no release) on the test driver, with
/// `extra` lines; returns its path.
pub fn rehearsal_file(home: &Path, extra: &str) -> String {
    let f = home.join("lab1.yaml");
    std::fs::write(
        &f,
        format!(
            "cluster: lab1\ndomain: lab.test\ndistribution: okd\nrehearsal: true\n\
             ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl k']\n\
             libvirt:\n  uri: test:///default\n{extra}"
        ),
    )
    .unwrap();
    f.display().to_string()
}

/// Every file below `dir`, relative, sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let p = e.path();
                out.push(p.strip_prefix(base).unwrap().display().to_string());
                if p.is_dir() {
                    walk(base, &p, out);
                }
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Compare with a golden file; `UPDATE_GOLDEN=1` rewrites it instead.
pub fn golden(path: &Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create)",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "{} differs from the rendered output (UPDATE_GOLDEN=1 rewrites it):\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        );
    }
}

/// `haproxy -c` must accept the text (it parses and resolves, binds nothing).
pub fn assert_haproxy_accepts(text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("haproxy.cfg");
    std::fs::write(&cfg, text).unwrap();
    let out = Command::new("haproxy")
        .arg("-c")
        .arg("-f")
        .arg(&cfg)
        .output()
        .expect("running haproxy -c (install the haproxy package)");
    assert!(
        out.status.success(),
        "haproxy -c rejected:\n{text}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
