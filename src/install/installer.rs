//! Finding and running `openshift-install` for a cluster: its output appended to
//! the cluster's log, its progress on one line, the child tied to shiftlab
//! ([`super::process`]).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::state::Locked;
use super::Ctx;

/// Find the `openshift-install` binary: the cluster file's, the one the release
/// target extracted, a cluster-local one, else the one on `PATH`.
pub fn find(ctx: &Ctx, locked: &Locked) -> Result<PathBuf> {
    if let Some(p) = &ctx.spec.openshift_install {
        return Ok(p.clone());
    }
    if let Some(p) = &locked.facts().openshift_install {
        return Ok(p.clone());
    }
    let local = ctx.cluster.installer_bin();
    if local.is_file() {
        return Ok(local);
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&paths) {
            let p = d.join("openshift-install");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    bail!("no openshift-install: set `openshift_install:` in the cluster file or put it on PATH")
}

/// Run `openshift-install ARGS --dir <assets>`.
pub fn run(ctx: &Ctx, locked: &Locked, args: &[&str]) -> Result<()> {
    let bin = find(ctx, locked)?;
    let assets = ctx.cluster.assets();
    let log_path = ctx.cluster.installer_log();
    std::fs::create_dir_all(assets.path())?;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    // One made before shiftlab kept it private.
    std::fs::set_permissions(
        &log_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )?;
    writeln!(log, "### {} {}", bin.display(), args.join(" "))?;
    // One killed with an earlier shiftlab (kill -9 leaves no chance to stop it)
    // must not race this one over the asset directory.
    let record = ctx.cluster.installer_pid();
    if let Some(pid) = crate::process::stop_leftover(&record, std::time::Duration::from_secs(30))? {
        eprintln!("    stopped openshift-install (pid {pid}) left running by an earlier shiftlab");
    }
    let mut child = crate::process::spawn_tied(
        Command::new(&bin)
            .args(args)
            .arg("--dir")
            .arg(assets.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .with_context(|| format!("running {}", bin.display()))?;
    crate::process::record(&record, &child)?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar.set_message(format!("openshift-install {}", args.join(" ")));
    // openshift-install logs on stderr; merge both into the log and the display,
    // without the secrets it prints (src/redact.rs; src/install/redact.rs says
    // which).
    let redactor = crate::redact::Redactor::of_cluster(&ctx.cluster);
    let stderr = child.stderr.take();
    let err_log = log.try_clone()?;
    let err_bar = bar.clone();
    let err_redactor = redactor.clone();
    let err_thread = std::thread::spawn(move || {
        let mut err_log = err_log;
        if let Some(e) = stderr {
            for line in BufReader::new(e).lines().map_while(Result::ok) {
                let line = err_redactor.redact(&line);
                let _ = writeln!(err_log, "{line}");
                err_bar.set_message(short(&line));
            }
        }
    });
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let line = redactor.redact(&line);
            let _ = writeln!(log, "{line}");
            bar.set_message(short(&line));
        }
    }
    let _ = err_thread.join();
    let status = child.wait();
    let _ = std::fs::remove_file(&record);
    bar.finish_and_clear();
    // Whatever the run's outcome: a failed one leaves its secrets too.
    super::redact::protect_assets(assets.path())?;
    let status = status?;
    if !status.success() {
        bail!(
            "openshift-install {} failed ({status}); its log is {}",
            args.join(" "),
            log_path.display()
        );
    }
    Ok(())
}

/// The message of an installer log line, cut for one line.
fn short(line: &str) -> String {
    log_message(line).chars().take(100).collect()
}

/// The `msg` of a logrus text line, in either form the installer writes:
/// `level=info msg=Text with spaces` (its terminal output: logrus's
/// `DisableQuote`, cmd/openshift-install/main.go), where the message runs to the
/// end of the line, or `level=info msg="Text \"quoted\""` (logrus's default
/// quoting, as in `.openshift_install.log`), unescaped. A line without `msg=` is
/// its own message.
pub(crate) fn log_message(line: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    // `msg=` as a field: at the start or after a space, not inside a message.
    let at = if line.starts_with("msg=") {
        Some(0)
    } else {
        line.find(" msg=").map(|i| i + 1)
    };
    let Some(at) = at else {
        return Cow::Borrowed(line);
    };
    let value = &line[at + "msg=".len()..];
    let Some(quoted) = value.strip_prefix('"') else {
        return Cow::Borrowed(value.trim_end());
    };
    let mut out = String::with_capacity(quoted.len());
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Cow::Owned(out),
            '\\' => match chars.next() {
                Some('n') => out.push(' '),
                Some('t') => out.push(' '),
                Some(e) => out.push(e),
                None => break,
            },
            c => out.push(c),
        }
    }
    // No closing quote (a cut line): what there is.
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::{log_message, short};

    #[test]
    fn the_real_unquoted_form_gives_the_message() {
        // Lines as the real 4.18 installer wrote them on stderr (recorded runs).
        for (line, msg) in [
            (
                "level=info msg=Consuming Install Config from target directory",
                "Consuming Install Config from target directory",
            ),
            (
                "level=warning msg=Making control-plane schedulable by setting MastersSchedulable to true for Scheduler cluster settings",
                "Making control-plane schedulable by setting MastersSchedulable to true for Scheduler cluster settings",
            ),
            (
                "level=info msg=Manifests created in: <dir>/manifests and <dir>/openshift",
                "Manifests created in: <dir>/manifests and <dir>/openshift",
            ),
            (
                r#"level=warning msg=failed to parse first occurrence of unknown field: failed to unmarshal install-config.yaml: error unmarshaling JSON: while decoding JSON: json: unknown field "bmcVerifyCA""#,
                r#"failed to parse first occurrence of unknown field: failed to unmarshal install-config.yaml: error unmarshaling JSON: while decoding JSON: json: unknown field "bmcVerifyCA""#,
            ),
            ("level=info msg=Waiting up to 20m0s", "Waiting up to 20m0s"),
        ] {
            assert_eq!(log_message(line), msg, "{line}");
        }
        assert_eq!(
            short("level=info msg=Consuming Install Config from target directory"),
            "Consuming Install Config from target directory"
        );
    }

    #[test]
    fn the_quoted_form_gives_the_message_unescaped() {
        assert_eq!(
            log_message(r#"time="x" level=info msg="Waiting up to 20m0s""#),
            "Waiting up to 20m0s"
        );
        assert_eq!(
            log_message(
                r#"time="2025-01-01T00:00:00Z" level=info msg="Login to the console with user: \"kubeadmin\", and password: \"<redacted>\"" extra=1"#
            ),
            r#"Login to the console with user: "kubeadmin", and password: "<redacted>""#
        );
        assert_eq!(log_message(r#"level=info msg="cut \\ here"#), r"cut \ here");
    }

    #[test]
    fn other_lines_are_their_own_message() {
        assert_eq!(short("plain"), "plain");
        assert_eq!(log_message("an xmsg=not a field"), "an xmsg=not a field");
        assert_eq!(short(&"x".repeat(300)).len(), 100);
    }
}
