//! docs/man is generated from the clap definitions; this keeps it true.
//! Regenerate with `cargo run -- man --out docs/man`.

mod common;

#[test]
fn shipped_man_pages_match_the_cli() {
    let dir = common::repo().join("docs/man");
    let pages = shiftlab::cli::completion::man_pages().unwrap();
    let mut shipped: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    shipped.sort();
    let mut generated: Vec<String> = pages.iter().map(|(n, _)| n.clone()).collect();
    generated.sort();
    assert_eq!(shipped, generated, "run `cargo run -- man --out docs/man`");
    for (name, text) in pages {
        let on_disk = std::fs::read(dir.join(&name)).unwrap();
        assert!(
            on_disk == text,
            "docs/man/{name} is stale: run `cargo run -- man --out docs/man`"
        );
    }
}

#[test]
fn completion_scripts_are_generated() {
    let home = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let out = common::shiftlab(&["completion", shell], home.path());
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("install-config"));
    }
}
