//! The house rule of docs/development.md: `commands` is on top; no module below it
//! imports it (a domain module reaching up into the CLI glue is how the install
//! driver once came to depend on `create infra`'s command).

mod common;

use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every line of `files` whose code (what precedes a `//`) `hit` matches, as
/// `path:line: text`.
fn offending_lines(files: &[std::path::PathBuf], hit: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if hit(code) {
                out.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    out
}

/// Whether `code` names the crate's module `m` itself (`crate::m::…`,
/// `crate::m;`, `crate::m as x`, in a `use` list), not one that merely starts
/// like it (`kube` is not `kubevirt`).
fn names_module(code: &str, m: &str) -> bool {
    ["::", ";", "}", ",", " "]
        .iter()
        .any(|end| code.contains(&format!("crate::{m}{end}")))
}

#[test]
fn no_module_below_commands_imports_it() {
    let src = common::repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "found only {} source files", files.len());
    let mut offenders = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().to_string();
        if rel.starts_with("commands/") || rel == "main.rs" || rel == "lib.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains("crate::commands") || code.contains("shiftlab::commands") {
                offenders.push(format!("src/{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "modules below `commands` import it:\n{}",
        offenders.join("\n")
    );
}

/// The BMC drives libvirt, never the other way round; the HTTP listener both
/// servers run on belongs to neither; the BMC knows nothing of serve; the one
/// redactor is below everything that uses it. libvirt knows no doctor: the
/// preflight that judges a host before `create infra` is doctor's, and the
/// libvirt backend calls it.
#[test]
fn libvirt_redfish_and_httpd_stay_in_their_layers() {
    let src = common::repo().join("src");
    let rules: [(&str, &[&str]); 4] = [
        (
            "libvirt",
            &[
                "crate::redfish",
                "crate::serve",
                "crate::install",
                "crate::doctor",
            ],
        ),
        ("redfish", &["crate::serve", "crate::install"]),
        ("httpd.rs", &["crate::redfish", "crate::serve"]),
        (
            "redact.rs",
            &[
                "crate::serve",
                "crate::gather",
                "crate::install",
                "crate::commands",
            ],
        ),
    ];
    let mut offenders = Vec::new();
    for (module, forbidden) in rules {
        let path = src.join(module);
        let mut files = Vec::new();
        if path.is_dir() {
            rust_files(&path, &mut files);
        } else {
            files.push(path);
        }
        assert!(!files.is_empty(), "no files for {module}");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                if forbidden.iter().any(|m| code.contains(m)) {
                    offenders.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "imports against the layering:\n{}",
        offenders.join("\n")
    );
}

/// The spec is below the plan: validating a cluster file needs the subnet layout
/// (`src/addressing.rs`, neutral ground), never the plan itself.
#[test]
fn spec_and_addressing_do_not_import_the_plan() {
    let src = common::repo().join("src");
    let mut files = vec![src.join("addressing.rs")];
    rust_files(&src.join("spec"), &mut files);
    let mut offenders = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains("crate::plan") || code.contains("super::plan") {
                offenders.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "the spec reaches up into the plan:\n{}",
        offenders.join("\n")
    );
    let addressing = std::fs::read_to_string(src.join("addressing.rs")).unwrap();
    assert!(
        !addressing.contains("crate::spec"),
        "addressing must stay below the spec"
    );
}

/// The plan owns its data: the plan, the renderers and the spec are pure and
/// sit below everything that touches the host or the pipeline, so none of them
/// imports a module that does (the KubeVirt plan, the veth-linked bridge, the
/// HTTP address and the default libvirt URI live under `plan/` and `spec/`).
#[test]
fn plan_render_and_spec_import_nothing_that_touches_the_host() {
    let src = common::repo().join("src");
    let forbidden = [
        "host", "serve", "kubevirt", "libvirt", "install", "backend", "commands", "cli", "cluster",
        "daemon", "redfish", "kube",
    ];
    let mut offenders = Vec::new();
    for module in ["plan", "render", "spec"] {
        let mut files = Vec::new();
        rust_files(&src.join(module), &mut files);
        assert!(!files.is_empty(), "no files for {module}");
        offenders.extend(offending_lines(&files, |code| {
            forbidden.iter().any(|m| names_module(code, m))
        }));
    }
    assert!(
        offenders.is_empty(),
        "plan, render or spec reach up:\n{}",
        offenders.join("\n")
    );
}

/// Targets report, they do not print: their progress goes to the sink the
/// command chose (`crate::progress`), so that `-o json` needs no stdout swap
/// and no command points fd 1 elsewhere around a target.
#[test]
fn targets_report_through_the_sink_and_commands_swap_no_stdout() {
    let src = common::repo().join("src");
    let rules: [(&str, &[&str]); 2] = [
        ("install/targets", &["print!", "println!", "io::stdout"]),
        ("commands", &["dup2", "libc::dup("]),
    ];
    let mut offenders = Vec::new();
    for (dir, forbidden) in rules {
        let mut files = Vec::new();
        rust_files(&src.join(dir), &mut files);
        assert!(
            files.len() > 5,
            "found only {} files under {dir}",
            files.len()
        );
        offenders.extend(offending_lines(&files, |code| {
            forbidden.iter().any(|m| code.contains(m))
        }));
    }
    assert!(
        offenders.is_empty(),
        "printing in a target, or a stdout swap in a command:\n{}",
        offenders.join("\n")
    );
}

/// The seam the right way up: the pipeline calls a backend, never the other
/// way round. A backend works on plain data (plan, state directories, inputs)
/// and knows no target, install lock, daemon or CLI; KubeVirt's building
/// blocks sit below the backend that puts them together.
#[test]
fn backends_sit_below_the_pipeline_and_kubevirt_below_the_backend() {
    let src = common::repo().join("src");
    let rules: [(&str, &[&str]); 2] = [
        ("backend", &["install", "serve", "commands", "cli"]),
        ("kubevirt", &["install", "commands", "cli", "backend"]),
    ];
    let mut offenders = Vec::new();
    for (module, forbidden) in rules {
        let mut files = Vec::new();
        rust_files(&src.join(module), &mut files);
        assert!(!files.is_empty(), "no files for {module}");
        offenders.extend(offending_lines(&files, |code| {
            forbidden.iter().any(|m| names_module(code, m))
        }));
    }
    assert!(
        offenders.is_empty(),
        "backend or kubevirt reach up:\n{}",
        offenders.join("\n")
    );
}

/// A command opens no libvirt connection itself: a cluster's host is chosen
/// and connected in `cluster::open` (`--connect`, else the ledger's, else the
/// plan's), the one place the rule lives.
#[test]
fn commands_open_no_host_themselves() {
    let mut files = Vec::new();
    rust_files(&common::repo().join("src/commands"), &mut files);
    assert!(files.len() > 10, "found only {} command files", files.len());
    let offenders = offending_lines(&files, |code| {
        ["Host::open", "host_uri(", "libvirt::Host"]
            .iter()
            .any(|m| code.contains(m))
    });
    assert!(
        offenders.is_empty(),
        "a command opens a host itself:\n{}",
        offenders.join("\n")
    );
}

/// Commands stay glue: one short function per subcommand calling a domain
/// module (as coreos-installer's handlers are); a loop, a rendering or a
/// decision belongs below. Counted: lines neither blank nor `//` comments.
#[test]
fn each_command_file_stays_under_80_lines_of_code() {
    let mut files = Vec::new();
    rust_files(&common::repo().join("src/commands"), &mut files);
    assert!(files.len() > 10, "found only {} command files", files.len());
    let mut long = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .count();
        if code >= 80 {
            long.push(format!("{}: {code} lines of code", f.display()));
        }
    }
    assert!(
        long.is_empty(),
        "commands doing a domain module's work (move it under cluster/, install/, …):\n{}",
        long.join("\n")
    );
}

/// serve is split the right way up: `daemon/` is `shiftlab serve` (its loop,
/// HAProxy supervision, the artifact server, DNS, the lab BMC, the web page) and
/// `serve/` the small client the commands and targets call. The client neither
/// holds nor imports the daemon and serves nothing (no listener: that is the
/// daemon's); the daemon imports the client's shared records, never the
/// other way round.
#[test]
fn serve_is_the_client_and_holds_no_daemon() {
    let src = common::repo().join("src");
    assert!(
        src.join("daemon/mod.rs").is_file(),
        "the daemon has its own top-level module, src/daemon/"
    );
    let mut files = Vec::new();
    rust_files(&src.join("serve"), &mut files);
    assert!(
        files.len() > 3,
        "found only {} files under serve",
        files.len()
    );
    let listeners = [
        "UnixListener",
        "TcpListener",
        "UdpSocket",
        "httpd::Listener",
    ];
    let offenders = offending_lines(&files, |code| {
        names_module(code, "daemon")
            || code.contains("super::daemon")
            || code.contains("mod daemon")
            || code.contains("mod web")
            || listeners.iter().any(|l| code.contains(l))
    });
    assert!(
        offenders.is_empty(),
        "serve/ holds or imports the daemon, or serves something itself:\n{}",
        offenders.join("\n")
    );
}

/// Nothing imports the daemon but the CLI that starts it (`commands/serve.rs`,
/// and `commands/bmc.rs` for its runtime): the daemon sits beside the
/// pipeline and imports it, so the plan, renderers, spec, libvirt, redfish,
/// kube, backends, install targets, cluster operations and the rest reach it
/// only through `serve`'s client.
#[test]
fn nothing_but_the_cli_imports_the_daemon() {
    let src = common::repo().join("src");
    assert!(src.join("daemon/mod.rs").is_file(), "no src/daemon/");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.retain(|f| {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().to_string();
        !(rel.starts_with("daemon/")
            || rel.starts_with("commands/")
            || rel.starts_with("cli/")
            || rel == "main.rs"
            || rel == "lib.rs")
    });
    for must in [
        "plan", "render", "spec", "libvirt", "redfish", "kube", "backend", "install", "cluster",
    ] {
        assert!(
            files.iter().any(|f| f.starts_with(src.join(must))),
            "no files under {must}/"
        );
    }
    let offenders = offending_lines(&files, |code| names_module(code, "daemon"));
    assert!(
        offenders.is_empty(),
        "modules below the CLI import the daemon:\n{}",
        offenders.join("\n")
    );
}

/// The acceptance rule of the layering, for the rooms below the pipeline that
/// the tests above do not cover whole: libvirt/, redfish/ and kube/ import no
/// `install`, `commands`, `cli`, `backend` or the daemon (plan/, render/ and
/// spec/ are held to it and more by
/// `plan_render_and_spec_import_nothing_that_touches_the_host`, backend/ by
/// `backends_sit_below_the_pipeline_and_kubevirt_below_the_backend`).
#[test]
fn libvirt_redfish_and_kube_import_nothing_of_the_pipeline() {
    let src = common::repo().join("src");
    let forbidden = ["install", "commands", "cli", "backend", "daemon"];
    let mut offenders = Vec::new();
    for module in ["libvirt", "redfish", "kube"] {
        let mut files = Vec::new();
        rust_files(&src.join(module), &mut files);
        assert!(!files.is_empty(), "no files for {module}");
        offenders.extend(offending_lines(&files, |code| {
            forbidden.iter().any(|m| names_module(code, m))
        }));
    }
    assert!(
        offenders.is_empty(),
        "libvirt, redfish or kube reach up:\n{}",
        offenders.join("\n")
    );
}
