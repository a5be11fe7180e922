//! Every `shiftlab` command shown in a shell code block of README.md or
//! docs/*.md that runs without a host (plan, render, create install-config,
//! man, completion, doctor on recorded facts, --help) is run and must exit as
//! the docs say, printing the output a `console` block shows. The rules —
//! which blocks and commands, placeholders, the exit marker — are
//! docs/development.md's "Commands in the docs"; this file keeps to them.

mod common;

use std::path::{Path, PathBuf};

/// Example names the docs use for a cluster file, and the file of the
/// repository each stands for.
const PLACEHOLDERS: &[(&str, &str)] = &[
    ("FILE", "examples/upi.yaml"),
    ("lab1.yaml", "examples/upi.yaml"),
    ("CLUSTER.yaml", "examples/upi.yaml"),
    // docs/kubevirt.md's team1: multus, with the fixture's kubeconfig.
    ("team1.yaml", "tests/fixtures/kubevirt/multus.yaml"),
    ("DIR", "out"),
    ("SHELL", "bash"),
];

/// The facts `doctor` is run on: a host where every check passes.
const DOCTOR_FACTS: &str = "tests/fixtures/doctor/good-host.json";

/// One command of a code block.
#[derive(Debug, Clone, PartialEq)]
struct Shown {
    /// `docs/x.md:12`
    at: String,
    /// The words after `shiftlab`, as the shell would split them.
    args: Vec<String>,
    /// What it must exit with.
    exit: i32,
    /// In a `console` block, the lines shown after it: its output, each of
    /// which must be a line it prints (one with `…` stands for more and is
    /// not compared).
    output: Vec<String>,
}

/// Every `shiftlab` command in the shell code blocks of `text` (page `page`).
fn commands(page: &str, text: &str) -> Vec<Shown> {
    let mut out: Vec<Shown> = Vec::new();
    let mut block: Option<(String, i32)> = None; // (info string, expected exit)
    let mut last_text = "";
    let mut pending: Option<(usize, String)> = None;
    // The block's last command, which a `console` block's output lines belong to.
    let mut last: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            last = None;
            block = match block {
                Some(_) => None,
                None => {
                    let exit = last_text
                        .trim()
                        .strip_prefix("<!-- docs-test: exit ")
                        .and_then(|r| r.strip_suffix("-->"))
                        .and_then(|n| n.trim().parse().ok())
                        .unwrap_or(0);
                    Some((info.trim().to_string(), exit))
                }
            };
            continue;
        }
        if !trimmed.is_empty() {
            last_text = line;
        }
        let Some((info, exit)) = &block else { continue };
        if !matches!(info.as_str(), "" | "sh" | "bash" | "shell" | "console") {
            continue;
        }
        let (start, mut joined) = match pending.take() {
            Some((start, so_far)) => (start, so_far + " " + trimmed),
            None => {
                let cmd = match trimmed.strip_prefix("$ ") {
                    Some(c) => c,
                    None if info == "console" => {
                        if let Some(n) = last {
                            out[n].output.push(line.trim_end().to_string());
                        }
                        continue;
                    }
                    None => trimmed,
                };
                (i + 1, cmd.to_string())
            }
        };
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((start, head.trim_end().to_string()));
            continue;
        }
        joined = joined.trim().to_string();
        let words = split(&joined);
        let words = match words.first().map(String::as_str) {
            Some("sudo") => &words[1..],
            _ => &words[..],
        };
        if let Some((program, args)) = words.split_first() {
            if matches!(
                program.as_str(),
                "shiftlab" | "./target/debug/shiftlab" | "target/debug/shiftlab"
            ) {
                last = Some(out.len());
                out.push(Shown {
                    at: format!("{page}:{start}"),
                    args: args.to_vec(),
                    exit: *exit,
                    output: Vec::new(),
                });
                continue;
            }
        }
        last = None;
    }
    out
}

/// A command line's words, as sh splits them, up to a comment or an operator.
fn split(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => words.extend(word.take()),
            '#' if word.is_none() => break,
            '|' | '>' | ';' | '&' => {
                // `2>` redirects: its number is no word.
                words.extend(word.filter(|w| !w.bytes().all(|b| b.is_ascii_digit())));
                return words;
            }
            '\'' | '"' => {
                let w = word.get_or_insert_with(String::new);
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    w.push(q);
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// Whether the command runs without a host (the kinds the module names).
fn runs_without_a_host(args: &[String]) -> bool {
    let has = |f: &str| args.iter().any(|a| a == f);
    if has("--help") || has("-h") || has("--version") || has("-V") {
        return true;
    }
    let words: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .take(2)
        .collect();
    matches!(
        words.as_slice(),
        ["plan", ..]
            | ["render", ..]
            | ["create", "install-config"]
            | ["man", ..]
            | ["completion", ..]
            | ["doctor", ..]
            | ["help", ..]
    )
}

/// A word still standing for something: `NAME`, `<file>`, `[lab1]`, `…`.
fn placeholder(word: &str) -> bool {
    word.contains(['<', '>', '[', ']', '…'])
        || (word.chars().any(|c| c.is_ascii_uppercase())
            && word
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || "_=.".contains(c)))
}

/// The arguments to run `args` with, in a directory with home `home`; an
/// error names a placeholder no rule resolves.
fn resolved(args: &[String], repo: &Path, home: &Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for a in args {
        let a = PLACEHOLDERS
            .iter()
            .find(|(p, _)| p == a)
            .map_or(a.as_str(), |(_, to)| to);
        let a = match a.strip_prefix("~/") {
            Some(rest) => home.join(rest).display().to_string(),
            None => a.to_string(),
        };
        if placeholder(&a) {
            return Err(format!(
                "{a:?} is a placeholder: add it to PLACEHOLDERS in tests/docs_commands.rs or name a file of the repository"
            ));
        }
        let file = repo.join(&a);
        out.push(if !a.starts_with('/') && file.is_file() {
            file.display().to_string()
        } else {
            a
        });
    }
    let doctor = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str)
        == Some("doctor");
    if doctor && !args.iter().any(|a| a == "--facts") {
        out.push("--facts".into());
        out.push(repo.join(DOCTOR_FACTS).display().to_string());
    }
    Ok(out)
}

fn pages(repo: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, repo.join("README.md"));
    pages
}

#[test]
fn every_command_the_docs_show_that_needs_no_host_succeeds() {
    let repo = common::repo();
    let mut ran = Vec::new();
    let mut not_run = Vec::new();
    let mut failures = Vec::new();
    for page in pages(&repo) {
        let name = page.strip_prefix(&repo).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        for shown in commands(&name, &text) {
            let line = format!("{}  shiftlab {}", shown.at, shown.args.join(" "));
            if !runs_without_a_host(&shown.args) {
                not_run.push(line);
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let args = match resolved(&shown.args, &repo, dir.path()) {
                Ok(a) => a,
                Err(e) => {
                    failures.push(format!("{line}: {e}"));
                    continue;
                }
            };
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = common::shiftlab(&args, dir.path());
            let code = out.status.code().unwrap_or(-1);
            ran.push(format!("{line}  (exit {code})"));
            // Files of the repository were given by their full path: shown as the docs name them.
            let printed = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
            .replace(&format!("{}/", repo.display()), "");
            if code != shown.exit {
                failures.push(format!(
                    "{line}: exit {code}, the docs say {}; ran {args:?}\nprinted: {printed}",
                    shown.exit
                ));
            }
            for l in shown
                .output
                .iter()
                .filter(|l| !l.trim().is_empty() && !l.contains('…'))
            {
                if !printed.lines().any(|p| p.trim_end() == l) {
                    failures.push(format!(
                        "{line}: the docs show {l:?}, which it does not print; it printed:\n{printed}"
                    ));
                }
            }
        }
    }
    let report = format!(
        "ran {}:\n  {}\nnot run (they need a host) {}:\n  {}",
        ran.len(),
        ran.join("\n  "),
        not_run.len(),
        not_run.join("\n  ")
    );
    println!("{report}");
    assert!(!ran.is_empty(), "no command of the docs was run\n{report}");
    assert!(
        failures.is_empty(),
        "{} commands of the docs failed:\n{}\n{report}",
        failures.len(),
        failures.join("\n")
    );
}

/// The extraction rules on a page made for them.
#[test]
fn commands_are_read_as_the_rules_say() {
    let page = "\
text `shiftlab plan -f inline.yaml` is no block

```console
$ shiftlab doctor        # a comment
output: shiftlab is not a command here
```

<!-- docs-test: exit 2 -->
```sh
sudo shiftlab plan -f 'a b.yaml' \\
    -o json | jq .
./target/debug/shiftlab man --out docs/man 2>/dev/null
kubectl get nodes
```

```yaml
# shiftlab plan -f no.yaml
```
";
    let shown = commands("p.md", page);
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        shown,
        vec![
            Shown {
                at: "p.md:4".into(),
                args: args(&["doctor"]),
                exit: 0,
                output: vec!["output: shiftlab is not a command here".into()],
            },
            Shown {
                at: "p.md:10".into(),
                args: args(&["plan", "-f", "a b.yaml", "-o", "json"]),
                exit: 2,
                output: vec![],
            },
            Shown {
                at: "p.md:12".into(),
                args: args(&["man", "--out", "docs/man"]),
                exit: 2,
                output: vec![],
            },
        ]
    );
    assert!(runs_without_a_host(&args(&[
        "create",
        "install-config",
        "-f",
        "x"
    ])));
    assert!(!runs_without_a_host(&args(&[
        "create", "cluster", "-f", "x"
    ])));
    assert!(runs_without_a_host(&args(&["serve", "--help"])));
    assert!(!runs_without_a_host(&args(&["serve", "status", "lab1"])));
    let repo = common::repo();
    let home = Path::new("/h");
    assert!(resolved(&args(&["status", "NAME"]), &repo, home).is_err());
    assert!(resolved(&args(&["plan", "-f", "<file>"]), &repo, home).is_err());
    assert_eq!(
        resolved(
            &args(&["plan", "-f", "lab1.yaml", "-P", "workers=3"]),
            &repo,
            home
        )
        .unwrap(),
        args(&[
            "plan",
            "-f",
            &repo.join("examples/upi.yaml").display().to_string(),
            "-P",
            "workers=3"
        ])
    );
    assert_eq!(
        resolved(&args(&["man", "--out", "~/man"]), &repo, home).unwrap(),
        args(&["man", "--out", "/h/man"])
    );
}
