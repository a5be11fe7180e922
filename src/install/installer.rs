//! Finding and running `openshift-install` for a cluster: its output appended to
//! the cluster's log, its progress on one line, the child tied to shiftlab
//! ([`super::process`]).

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
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
    run_with_env(ctx, locked, args, &[])
}

/// [`run`], with `env` set for the installer (over shiftlab's own environment).
pub fn run_with_env(
    ctx: &Ctx,
    locked: &Locked,
    args: &[&str],
    env: &[(OsString, OsString)],
) -> Result<()> {
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
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .with_context(|| format!("running {}", bin.display()))?;
    crate::process::record(&record, &child)?;
    tracing::info!(
        "running {} {} (log {})",
        bin.display(),
        args.join(" "),
        log_path.display()
    );
    let redactor = crate::redact::Redactor::of_cluster(&ctx.cluster);
    let what = format!("openshift-install {}", args.join(" "));
    let every = ctx.progress.heartbeat_every();
    let reason = supervise(&mut child, &log, &redactor, &ctx.progress, &what, every);
    let status = child.wait();
    let _ = std::fs::remove_file(&record);
    // Whatever the run's outcome: a failed one leaves its secrets too.
    super::redact::protect_assets(assets.path())?;
    let status = status?;
    tracing::info!("openshift-install {}: {status}", args.join(" "));
    if !status.success() {
        // Its code says which phase failed (src/exit_status.rs): kept for main.
        return Err(crate::exit_status::InstallerExit {
            args: args.join(" "),
            status: status.to_string(),
            code: status.code(),
            reason: reason.get(),
            log: log_path.display().to_string(),
        }
        .into());
    }
    Ok(())
}

/// Follow the installer to the end of its output: on a terminal a spinner with
/// its latest line, off it a heartbeat every `every` with its latest INFO line
/// (progress.rs), as nobody sees the spinner there. Returns why it failed, as
/// far as its output said.
fn supervise(
    child: &mut std::process::Child,
    log: &std::fs::File,
    redactor: &crate::redact::Redactor,
    progress: &crate::progress::Sink,
    what: &str,
    every: std::time::Duration,
) -> Reason {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar.set_message(what.to_string());
    let latest = crate::progress::Latest::default();
    let reason = Reason::default();
    if progress.wants_heartbeat() {
        progress.beating_every(every, what, &latest, || {
            follow(child, log, redactor, &bar, &latest, &reason)
        });
    } else {
        follow(child, log, redactor, &bar, &latest, &reason);
    }
    bar.finish_and_clear();
    reason
}

/// Why the installer failed, in its own words: its `fatal` message, else its
/// `error` messages in order — of many, the first and the last two. A failed
/// command ends with `logrus.Fatal` or with `error` lines and `logrus.Exit`
/// (cmd/openshift-install/main.go; command/waitfor.go). The cause may come
/// first (recorded with 4.18: an invalid install-config is the cause, then how
/// to get the FIPS binary) or last (a failed install-complete ends with "failed
/// to initialize the cluster: …" after its troubleshooting lines). Shown in
/// shiftlab's error, so the user reads the cause without opening the log.
#[derive(Default)]
struct Reason {
    fatal: crate::progress::Latest,
    errors: std::sync::Mutex<Vec<String>>,
}

impl Reason {
    /// A message is cut here: the error line stays readable.
    const LONGEST: usize = 600;

    fn see(&self, line: &str) {
        match log_level(line) {
            Some("fatal" | "panic") => self.fatal.set(log_message(line)),
            Some("error") => {
                let mut errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
                let m = log_message(line);
                errors.push(match m.char_indices().nth(Self::LONGEST) {
                    Some((at, _)) => format!("{}…", &m[..at]),
                    None => m.into_owned(),
                });
            }
            _ => {}
        }
    }

    fn get(&self) -> Option<String> {
        if let Some(f) = self.fatal.get() {
            return Some(f);
        }
        let e = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        match e.len() {
            0 => None,
            1..=3 => Some(e.join(" / ")),
            n => Some(format!(
                "{} / … ({} more in its log) … / {} / {}",
                e[0],
                n - 3,
                e[n - 2],
                e[n - 1]
            )),
        }
    }
}

/// The `level` field of a logrus text line, if it has one. Pure.
fn log_level(line: &str) -> Option<&str> {
    let at = if line.starts_with("level=") {
        0
    } else {
        line.find(" level=")? + 1
    };
    line[at + "level=".len()..].split(' ').next()
}

/// Read the installer's output to its end. openshift-install logs on stderr;
/// both streams are merged into the log and the spinner, without the secrets it
/// prints (src/redact.rs; src/install/redact.rs says which), and its latest INFO
/// message is kept in `latest` for the heartbeat.
fn follow(
    child: &mut std::process::Child,
    log: &std::fs::File,
    redactor: &crate::redact::Redactor,
    bar: &indicatif::ProgressBar,
    latest: &crate::progress::Latest,
    reason: &Reason,
) {
    let each = |line: String, mut log: &std::fs::File| {
        let line = redactor.redact(&line);
        reason.see(&line);
        // One write per line: the two streams' lines do not interleave.
        let _ = log.write_all(format!("{line}\n").as_bytes());
        tracing::debug!("openshift-install: {line}");
        bar.set_message(short(&line));
        if let Some(news) = info_message(&line) {
            latest.set(news);
        }
    };
    let stderr = child.stderr.take();
    let stdout = child.stdout.take();
    std::thread::scope(|s| {
        s.spawn(|| {
            for line in stderr.into_iter().flat_map(|e| BufReader::new(e).lines()) {
                let Ok(line) = line else { break };
                each(line, log);
            }
        });
        for line in stdout.into_iter().flat_map(|o| BufReader::new(o).lines()) {
            let Ok(line) = line else { break };
            each(line, log);
        }
    });
}

/// The message of an INFO line of the installer's, cut for one line: what a
/// heartbeat reports (its debug lines are noise; a warning stays in the log).
fn info_message(line: &str) -> Option<String> {
    (log_level(line) == Some("info")).then(|| short(line))
}

/// The installer's override of the agent ISO's base image
/// (openshift/installer pkg/asset/agent/image/baseiso.go, `BaseIso.Generate`: when
/// set it takes the image from there through `DownloadImageFile`, and neither
/// extracts it from the release payload nor downloads the stream's).
pub const OS_IMAGE_OVERRIDE_ENV: &str = "OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE";

/// What shiftlab gives `agent create image`: the verified `oc` and live ISO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentTools<'a> {
    /// The `oc` the release target verified.
    pub oc: &'a Path,
    /// The installer's cache home (its `XDG_CACHE_HOME`), which shiftlab owns.
    pub cache_home: &'a Path,
    /// The stream metadata's location of the live ISO, and its sha256.
    pub iso_url: &'a str,
    pub iso_sha256: &'a str,
}

/// The environment of `openshift-install agent create image`. Pure.
///
/// - `PATH`: `oc`'s directory first, then `user_path`. The installer runs `oc adm
///   release info` and `oc image extract` (pkg/asset/agent/image/oc.go, found by
///   `exec.LookPath`); an older `oc` earlier on the user's PATH would be taken
///   instead of the release's.
/// - `XDG_CACHE_HOME`: `cache_home`, so its caches (`agent/image_cache`,
///   `agent/files_cache`: pkg/asset/agent/image/cache.go, `GetCacheDir` under
///   `os.UserCacheDir`) are shiftlab's, where [`image_cache_path`] holds the ISO.
/// - [`OS_IMAGE_OVERRIDE_ENV`]: the ISO's URL with `?sha256=` (cache.go,
///   `DownloadImageFile`: the query is the expected digest of a download). Its
///   `download` first looks for the URL's file name in `agent/image_cache` and
///   takes a file found there as it is, so the ISO shiftlab verified is used
///   without a second download.
pub fn agent_env(
    tools: &AgentTools,
    user_path: Option<&OsStr>,
) -> Result<Vec<(OsString, OsString)>> {
    let oc_dir = tools
        .oc
        .parent()
        .filter(|d| d.is_absolute())
        .with_context(|| format!("oc {} is not an absolute path", tools.oc.display()))?;
    let mut dirs = vec![oc_dir.to_path_buf()];
    if let Some(p) = user_path {
        dirs.extend(std::env::split_paths(p).filter(|d| d != oc_dir));
    }
    let path = std::env::join_paths(&dirs)
        .with_context(|| format!("oc's directory {} cannot be on PATH", oc_dir.display()))?;
    image_cache_name(tools.iso_url)?;
    let sep = if tools.iso_url.contains('?') {
        '&'
    } else {
        '?'
    };
    Ok(vec![
        ("PATH".into(), path),
        ("XDG_CACHE_HOME".into(), tools.cache_home.into()),
        (
            OS_IMAGE_OVERRIDE_ENV.into(),
            format!("{}{sep}sha256={}", tools.iso_url, tools.iso_sha256).into(),
        ),
    ])
}

/// The file name the installer caches an image URL under (pkg/asset/agent/image
/// cache.go, `uncompressedName`: the path's last element without `.gz`, then
/// `.xz`). Pure; a name that is no plain file name is refused.
pub fn image_cache_name(url: &str) -> Result<String> {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let base = path.rsplit('/').next().unwrap_or_default();
    let name = base.strip_suffix(".gz").unwrap_or(base);
    let name = name.strip_suffix(".xz").unwrap_or(name);
    if name.is_empty() || name == "." || name == ".." || name.contains('\0') {
        bail!("the live ISO's location {url:?} names no file (the installer caches it by its file name)");
    }
    Ok(name.to_string())
}

/// Where the installer looks for `url`'s image in its cache
/// (`<XDG_CACHE_HOME>/agent/image_cache/<name>`: cache.go, `GetCacheDir`).
pub fn image_cache_path(cache_home: &Path, url: &str) -> Result<PathBuf> {
    Ok(cache_home
        .join("agent/image_cache")
        .join(image_cache_name(url)?))
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
    use super::*;

    fn tools<'a>(oc: &'a Path, url: &'a str) -> AgentTools<'a> {
        AgentTools {
            oc,
            cache_home: Path::new("/var/cache/shiftlab/openshift-install"),
            iso_url: url,
            iso_sha256: "abc123",
        }
    }

    fn env_of(env: &[(OsString, OsString)], key: &str) -> String {
        let v = env.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        v.unwrap_or_else(|| panic!("no {key}"))
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn the_agent_installer_finds_the_releases_oc_first() {
        let oc = Path::new("/var/cache/shiftlab/bin/d1/oc");
        let url = "https://m.example/rhcos/rhcos-live.x86_64.iso";
        let env = agent_env(
            &tools(oc, url),
            Some(OsStr::new(
                "/usr/local/bin:/usr/bin:/var/cache/shiftlab/bin/d1",
            )),
        )
        .unwrap();
        // Before a user's (maybe older) oc; its own directory once.
        assert_eq!(
            env_of(&env, "PATH"),
            "/var/cache/shiftlab/bin/d1:/usr/local/bin:/usr/bin"
        );
        assert_eq!(
            env_of(&env, "XDG_CACHE_HOME"),
            "/var/cache/shiftlab/openshift-install"
        );
        assert_eq!(
            env_of(&env, OS_IMAGE_OVERRIDE_ENV),
            "https://m.example/rhcos/rhcos-live.x86_64.iso?sha256=abc123"
        );
        let no_path = agent_env(&tools(oc, url), None).unwrap();
        assert_eq!(env_of(&no_path, "PATH"), "/var/cache/shiftlab/bin/d1");
        // A query already there: the digest joins it.
        let q = agent_env(&tools(oc, "http://h/x.iso?a=1"), None).unwrap();
        assert_eq!(
            env_of(&q, OS_IMAGE_OVERRIDE_ENV),
            "http://h/x.iso?a=1&sha256=abc123"
        );
    }

    #[test]
    fn an_oc_that_cannot_lead_path_is_refused() {
        let url = "http://h/x.iso";
        for oc in ["oc", "/odd:dir/oc"] {
            let e = agent_env(&tools(Path::new(oc), url), None).unwrap_err();
            assert!(format!("{e:#}").contains("oc"), "{e:#}");
        }
    }

    #[test]
    fn the_iso_is_cached_under_the_installers_name_for_it() {
        for (url, name) in [
            (
                "https://m.example/a/rhcos-live.x86_64.iso",
                "rhcos-live.x86_64.iso",
            ),
            (
                "file:///srv/m/coreos-live.x86_64.iso?x=1#f",
                "coreos-live.x86_64.iso",
            ),
            ("http://h/img.raw.xz", "img.raw"),
            ("http://h/img.iso.gz", "img.iso"),
        ] {
            assert_eq!(image_cache_name(url).unwrap(), name, "{url}");
        }
        assert_eq!(
            image_cache_path(Path::new("/c"), "http://h/a.iso").unwrap(),
            Path::new("/c/agent/image_cache/a.iso")
        );
        for bad in ["http://h/", "http://h/..", "http://h/.", ""] {
            let e = image_cache_name(bad).unwrap_err();
            assert!(format!("{e}").contains("names no file"), "{bad}: {e}");
        }
    }

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
    fn only_info_lines_are_news() {
        assert_eq!(
            info_message("level=info msg=Waiting up to 20m0s").as_deref(),
            Some("Waiting up to 20m0s")
        );
        assert_eq!(
            info_message(r#"time="x" level=info msg="API up""#).as_deref(),
            Some("API up")
        );
        for other in [
            "level=debug msg=Fetching Master Machines...",
            "level=warning msg=x",
            "level=fatal msg=Bootstrap failed",
            "plain level=information",
        ] {
            assert_eq!(info_message(other), None, "{other}");
        }
    }

    /// The fake installer's bootstrap wait, its output piped as under nohup or
    /// CI: the wait beats, each beat with the installer's latest INFO line and
    /// the time since the start. The fake's API is looked up on the install
    /// config's gateway, here 127.0.0.1: it finds none and fails after
    /// FAKE_INSTALL_TIMEOUT, as the real one does without a load balancer.
    #[test]
    fn the_fake_installers_bootstrap_wait_beats_with_its_latest_info_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("install-config.yaml"),
            "apiVersion: v1\nbaseDomain: lab.test\nmetadata:\n  name: hb\n\
             controlPlane:\n  replicas: 1\ncompute:\n- name: worker\n  replicas: 0\n\
             networking:\n  machineNetwork:\n  - cidr: 127.0.0.0/24\nplatform:\n  none: {}\n",
        )
        .unwrap();
        let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/rehearsal/openshift-install");
        let mut child = Command::new(fake)
            .args(["wait-for", "bootstrap-complete", "--dir"])
            .arg(dir.path())
            .env("FAKE_INSTALL_TIMEOUT", "2")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = std::fs::File::create(dir.path().join("openshift-install.log")).unwrap();
        // A memory sink is no terminal, as a pipe or file.
        let sink = crate::progress::Sink::memory();
        let what = "openshift-install wait-for bootstrap-complete";
        let every = std::time::Duration::from_millis(300);
        let redactor = crate::redact::Redactor::default();
        let reason = supervise(&mut child, &log, &redactor, &sink, what, every);
        assert_eq!(child.wait().unwrap().code(), Some(5), "bootstrap failed");
        // Why, in the installer's words: its error lines, in order.
        assert_eq!(
            reason.get().as_deref(),
            Some(
                "Attempted to gather debug logs after installation failure: the API at \
                 https://api.hb.lab.test:6443 does not answer / Bootstrap failed to complete: \
                 waiting for Kubernetes API: context deadline exceeded"
            )
        );
        let news = "Waiting up to 20m0s (until …) for the Kubernetes API at https://api.hb.lab.test:6443...";
        let beats: Vec<String> = sink.lines().into_iter().map(|(_, l)| l).collect();
        assert!(!beats.is_empty(), "no heartbeat");
        let last = beats.last().unwrap();
        let (head, tail) = last.split_once("): ").unwrap_or_else(|| panic!("{last}"));
        assert_eq!(tail, news, "{beats:?}");
        let elapsed = head
            .strip_prefix(&format!("    still waiting for {what} ("))
            .unwrap_or_else(|| panic!("{last}"));
        assert!(
            elapsed.ends_with('s') && elapsed[..1].parse::<u8>().is_ok(),
            "{last}"
        );
        // The log has every line, the failure too (at level error, as the real
        // wait says it before its exit 5).
        let text = std::fs::read_to_string(dir.path().join("openshift-install.log")).unwrap();
        assert!(text.contains(&format!("level=info msg={news}")), "{text}");
        assert!(text.contains("level=error msg=Bootstrap failed"), "{text}");
    }

    /// The real installer's failures: `error` lines then an exit, or a `fatal`
    /// line (cmd/openshift-install/main.go), in either form of a logrus line.
    #[test]
    fn the_reason_is_the_fatal_message_else_the_errors_in_order() {
        let r = Reason::default();
        assert_eq!(r.get(), None);
        r.see("level=info msg=Waiting up to 20m0s");
        r.see("level=warning msg=not yet");
        assert_eq!(r.get(), None, "info and warning are no reason");
        // Recorded with 4.18 (an invalid install-config): the cause, then a hint.
        r.see(r#"level=error msg=failed to fetch Master Machines: fips: Forbidden: FIPS mode"#);
        r.see(r#"time="t" level=error msg="To obtain a suitable \"binary\"""#);
        assert_eq!(
            r.get().as_deref(),
            Some(
                r#"failed to fetch Master Machines: fips: Forbidden: FIPS mode / To obtain a suitable "binary""#
            )
        );
        r.see("level=error msg=three");
        assert!(r.get().unwrap().ends_with(r#""binary" / three"#));
        // Of many, the first and the last two (install-complete's cause is last).
        r.see("level=error msg=four");
        r.see("level=error msg=failed to initialize the cluster: operators down");
        assert_eq!(
            r.get().unwrap(),
            "failed to fetch Master Machines: fips: Forbidden: FIPS mode / … (2 more in its log) … \
             / four / failed to initialize the cluster: operators down"
        );
        let long = Reason::default();
        long.see(&format!("level=error msg={}", "é".repeat(700)));
        assert_eq!(long.get().unwrap().chars().count(), Reason::LONGEST + 1);
        r.see("level=fatal msg=Bootstrap failed to complete");
        assert_eq!(r.get().as_deref(), Some("Bootstrap failed to complete"));
        assert_eq!(log_level("plain level=information x"), Some("information"));
        assert_eq!(log_level("no level here"), None);
    }

    #[test]
    fn other_lines_are_their_own_message() {
        assert_eq!(short("plain"), "plain");
        assert_eq!(log_message("an xmsg=not a field"), "an xmsg=not a field");
        assert_eq!(short(&"x".repeat(300)).len(), 100);
    }
}
