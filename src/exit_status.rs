//! shiftlab's exit status: 0, 1 for any failure, 2 for a cluster file that
//! cannot be used, and openshift-install's own codes for the phase of the install
//! that failed, so that scripts written against the installer branch the same way.
//!
//! The installer's codes (openshift/installer cmd/openshift-install/command/
//! waitfor.go: `ExitCodeInstallConfigError = iota + 3`, then
//! `ExitCodeInfrastructureFailed`, `ExitCodeBootstrapFailed`,
//! `ExitCodeInstallFailed`, `ExitCodeOperatorStabilityFailed`,
//! `ExitCodeInterrupt`): 3 to 8.
//!
//! The code comes from the error: [`code`] finds in its chain a
//! [`crate::spec::InvalidSpec`] (2), the installer's own exit 3..=8
//! ([`InstallerExit`], passed through), an [`Interrupted`] wait (8), or the
//! install target that failed ([`TargetFailed`], mapped by [`Phase::of_target`]).

use std::fmt;

use crate::install::target::Target;

/// Any failure no other code names.
pub const FAILURE: u8 = 1;
/// Bad usage, or a cluster file that cannot be used.
pub const INVALID: u8 = 2;
/// A rehearsal's report has a failed row (after the installer's 3..=8).
pub const REHEARSAL_FAILED: u8 = 9;

/// A phase of the install that has its own exit code, as openshift-install's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The install-config is invalid.
    InstallConfig,
    /// The cluster's infrastructure could not be made.
    Infrastructure,
    /// The bootstrap did not complete.
    Bootstrap,
    /// The install did not complete.
    Install,
    /// The cluster operators did not become stable.
    OperatorStability,
    /// Interrupted (Ctrl-C) during a wait.
    Interrupt,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::InstallConfig,
        Phase::Infrastructure,
        Phase::Bootstrap,
        Phase::Install,
        Phase::OperatorStability,
        Phase::Interrupt,
    ];

    /// Its exit code: the installer's.
    pub fn code(self) -> u8 {
        match self {
            Phase::InstallConfig => 3,
            Phase::Infrastructure => 4,
            Phase::Bootstrap => 5,
            Phase::Install => 6,
            Phase::OperatorStability => 7,
            Phase::Interrupt => 8,
        }
    }

    /// The phase of one of the installer's exit codes (3..=8).
    pub fn of_code(code: i32) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| i32::from(p.code()) == code)
    }

    /// The phase a failure of `target` is, when shiftlab itself knows it. The
    /// targets that run the installer before the cluster exists (manifests,
    /// ignition, iso) fail with 3 only when the installer says so: its exit
    /// code is passed through ([`InstallerExit`]).
    pub fn of_target(target: Target) -> Option<Phase> {
        match target {
            Target::Infra => Some(Phase::Infrastructure),
            Target::BootstrapComplete => Some(Phase::Bootstrap),
            Target::InstallComplete => Some(Phase::Install),
            _ => None,
        }
    }
}

/// A target of the install failed: the context `install::reach` gives a target's
/// error. Shown as before ("target infra: …"); [`code`] maps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetFailed(pub Target);

impl fmt::Display for TargetFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "target {}", self.0)
    }
}

/// `openshift-install` exited with a failure. Callers branch on its code.
#[derive(Debug, thiserror::Error)]
#[error(
    "openshift-install {args} failed ({status}){}; its log is {log}",
    reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
)]
pub struct InstallerExit {
    /// Its arguments, joined.
    pub args: String,
    /// Its exit status, as shown.
    pub status: String,
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Its last fatal (else error) message, redacted like its log.
    pub reason: Option<String>,
    /// The cluster's installer log.
    pub log: String,
}

/// A wait stopped by Ctrl-C before its outcome.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Interrupted(pub String);

/// A rehearsal installed, or was asked for its report, and a row of the report
/// failed (docs/rehearsal.md): the report, printed before, names it.
#[derive(Debug, thiserror::Error)]
#[error("rehearsal {cluster}: {failed} check(s) of the report failed")]
pub struct RehearsalFailed {
    pub cluster: String,
    pub failed: usize,
}

/// The exit code of a failed command. Pure.
pub fn code(e: &anyhow::Error) -> u8 {
    if e.chain()
        .any(|c| c.downcast_ref::<crate::spec::InvalidSpec>().is_some())
    {
        return INVALID;
    }
    if let Some(p) = e
        .downcast_ref::<InstallerExit>()
        .and_then(|x| x.code)
        .and_then(Phase::of_code)
    {
        return p.code();
    }
    if e.downcast_ref::<Interrupted>().is_some() {
        return Phase::Interrupt.code();
    }
    if e.downcast_ref::<RehearsalFailed>().is_some() {
        return REHEARSAL_FAILED;
    }
    // The host cannot take the cluster: found before the infra, its phase still.
    if e.downcast_ref::<crate::doctor::preflight::NotReady>()
        .is_some()
    {
        return Phase::Infrastructure.code();
    }
    e.downcast_ref::<TargetFailed>()
        .and_then(|t| Phase::of_target(t.0))
        .map_or(FAILURE, Phase::code)
}

/// The EXIT STATUS section of `--help` and the man page: each code and when.
pub const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "success"),
    ("1", "any other failure (libvirt, a download, a host service, a target not named below)"),
    ("2", "bad usage, or a cluster file that cannot be used (every error named)"),
    ("3", "the install-config is invalid: openshift-install refused it"),
    ("4", "infrastructure failed: the infra target (network, pool, VMs), or create's preflight found the host cannot take the cluster (before any download)"),
    ("5", "bootstrap failed: the bootstrap-complete target"),
    ("6", "install failed: the install-complete target (IPI: the installer's create cluster)"),
    ("7", "the cluster operators did not become stable (openshift-install's wait at install-complete)"),
    ("8", "interrupted: Ctrl-C while csr-approval waits, or the installer interrupted"),
    ("9", "a rehearsal's report has a failed check (report, or create cluster of a rehearsal): the report names it"),
];

/// The note under the codes.
pub const EXIT_STATUS_NOTE: &str = "3 to 8 are openshift-install's own codes: when it exits with one, shiftlab exits with it. Ctrl-C elsewhere ends shiftlab by the signal (130 in a shell). doctor exits by its worst finding instead: 3 a warning, 4 a failing check.";

/// The ENVIRONMENT section: every variable shiftlab reads that a user sets.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    ("SHIFTLAB_HOME", "the state directory when --state-dir is not given (default /var/lib/shiftlab for root, else $XDG_DATA_HOME/shiftlab or ~/.local/share/shiftlab)"),
    ("SHIFTLAB_CACHE", "the download cache (default /var/cache/shiftlab for root, else $XDG_CACHE_HOME/shiftlab or ~/.cache/shiftlab)"),
    ("SHIFTLAB_LOG", "the log filter, in tracing's EnvFilter syntax: a level (error, warn, info, debug, trace, off) or comma-separated TARGET=LEVEL directives (e.g. debug, warn,shiftlab=trace); over -v; a value it cannot read is an error (exit 2)"),
    ("NO_COLOR", "set and not empty: no colour for FAIL, WARN and OK on a terminal (no-color.org); --color always|never decides over it"),
    ("LIBVIRT_DEFAULT_URI", "the libvirt URI when the cluster file sets no libvirt.uri (default qemu:///system)"),
    ("SHIFTLAB_BMC_PASSWORD", "the password of shiftlab bmc (else --password-file, else one generated)"),
    ("SHIFTLAB_HAPROXY", "the haproxy binary serve runs (default from PATH, then /usr/sbin)"),
    ("SHIFTLAB_HOSTS_FILE", "the hosts file host DNS writes (default /etc/hosts)"),
    ("SHIFTLAB_IMPORT", "stream: images reach libvirt through its upload stream, never by file"),
    ("OPENSHIFT_INSTALL_SKIP_HOSTCRYPT_VALIDATION", "set: fips: true on a host not in FIPS mode warns instead of refusing (the installer's own variable)"),
    ("OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE", "the release an openshift_install: binary installs instead of its own (the installer's own variable)"),
    ("PATH", "where openshift-install is found when the cluster file names none"),
];

/// Both sections as `--help` shows them after the options.
pub fn help_text() -> String {
    let width = |rows: &[(&str, &str)]| rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::from("Exit status:\n");
    let w = width(EXIT_STATUS);
    for (k, v) in EXIT_STATUS {
        out.push_str(&format!("  {k:w$}  {v}\n"));
    }
    out.push_str(&format!("  {EXIT_STATUS_NOTE}\n\nEnvironment:\n"));
    for (k, v) in ENVIRONMENT {
        out.push_str(&format!("  {k}\n          {v}\n"));
    }
    out.trim_end().to_string()
}

/// Both sections as a man page's roff (`.SH EXIT STATUS`, `.SH ENVIRONMENT`).
pub fn man_sections() -> String {
    use clap_mangen::roff::{bold, roman, Roff};
    let mut roff = Roff::new();
    for (title, rows, note) in [
        ("EXIT STATUS", EXIT_STATUS, Some(EXIT_STATUS_NOTE)),
        ("ENVIRONMENT", ENVIRONMENT, None),
    ] {
        roff.control("SH", [title]);
        for (k, v) in rows {
            roff.control("TP", []);
            roff.text([bold(*k)]);
            roff.text([roman(*v)]);
        }
        if let Some(n) = note {
            roff.control("PP", []);
            roff.text([roman(n)]);
        }
    }
    // The page's own preamble defines \*(Aq, which the sections' apostrophes use.
    let text = roff.render();
    match text.split_once(".el .ds Aq '\n") {
        Some((_, body)) => body.to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    fn installer_exit(code: Option<i32>) -> anyhow::Error {
        InstallerExit {
            args: "create manifests".into(),
            status: "exit status: 3".into(),
            code,
            reason: None,
            log: "/x/openshift-install.log".into(),
        }
        .into()
    }

    #[test]
    fn the_codes_are_the_installers() {
        let codes: Vec<u8> = Phase::ALL.iter().map(|p| p.code()).collect();
        assert_eq!(codes, [3, 4, 5, 6, 7, 8]);
        for p in Phase::ALL {
            assert_eq!(Phase::of_code(p.code().into()), Some(p));
        }
        assert_eq!(Phase::of_code(1), None);
        assert_eq!(Phase::of_code(9), None);
    }

    #[test]
    fn each_target_maps_to_its_phase_or_to_one() {
        for t in Target::ALL {
            let want = match t {
                Target::Infra => 4,
                Target::BootstrapComplete => 5,
                Target::InstallComplete => 6,
                _ => 1,
            };
            let e = anyhow::anyhow!("libvirt said no").context(TargetFailed(t));
            // Further context, as the commands add, hides nothing.
            let e = e.context("creating lab1");
            assert_eq!(code(&e), want, "{t}");
            assert_eq!(
                format!("{e:#}"),
                format!("creating lab1: target {t}: libvirt said no")
            );
        }
    }

    #[test]
    fn the_installers_own_code_wins_over_the_target() {
        let e = installer_exit(Some(3)).context(TargetFailed(Target::Manifests));
        assert_eq!(code(&e), 3);
        // install-complete's wait: operators not stable is 7, not the target's 6.
        let e = installer_exit(Some(7)).context(TargetFailed(Target::InstallComplete));
        assert_eq!(code(&e), 7);
        // An exit the installer gives no phase, or a signal: the target decides.
        let e = installer_exit(Some(1)).context(TargetFailed(Target::BootstrapComplete));
        assert_eq!(code(&e), 5);
        let e = installer_exit(None).context(TargetFailed(Target::Ignition));
        assert_eq!(code(&e), 1);
    }

    #[test]
    fn an_invalid_cluster_file_is_two_and_an_interrupt_eight() {
        let e: anyhow::Error = crate::spec::InvalidSpec {
            file: "lab1.yaml".into(),
            errors: vec![],
        }
        .into();
        assert_eq!(code(&e.context(TargetFailed(Target::Infra))), 2);
        let e: anyhow::Error = Interrupted("stopped".into()).into();
        assert_eq!(code(&e.context(TargetFailed(Target::CsrApproval))), 8);
        assert_eq!(code(&anyhow::anyhow!("x")), 1);
        let e: anyhow::Error = RehearsalFailed {
            cluster: "lab1".into(),
            failed: 1,
        }
        .into();
        assert_eq!(code(&e.context("create cluster")), 9);
        let e: anyhow::Result<()> = Err(anyhow::anyhow!("x")).context("y");
        assert_eq!(code(&e.unwrap_err()), 1);
    }

    #[test]
    fn help_and_man_name_every_code_and_variable() {
        let help = help_text();
        let man = man_sections();
        assert!(man.starts_with(".SH \"EXIT STATUS\"\n"), "{man}");
        assert!(man.contains(".SH ENVIRONMENT\n"), "{man}");
        for code in 0..=9 {
            assert!(help.contains(&format!("\n  {code}  ")), "{code}: {help}");
            assert!(
                man.contains(&format!(".TP\n\\fB{code}\\fR\n")),
                "{code}: {man}"
            );
        }
        for (k, _) in ENVIRONMENT {
            assert!(help.contains(&format!("\n  {k}\n")), "{k}");
            assert!(man.contains(&format!("\\fB{k}\\fR")), "{k}: {man}");
        }
    }
}
