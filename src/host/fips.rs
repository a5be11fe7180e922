//! Is this host in FIPS mode, as a `fips: true` install needs? The installer
//! refuses to make a FIPS cluster from a host that is not
//! (openshift/installer pkg/hostcrypt/hostcrypt.go, `VerifyHostTargetState`,
//! reading `/proc/sys/crypto/fips_enabled`; called from
//! pkg/types/validation/installconfig.go `validateFIPSconfig`, which turns the
//! refusal into a warning when `OPENSHIFT_INSTALL_SKIP_HOSTCRYPT_VALIDATION` is
//! set). shiftlab says so before the installer runs, in the installer's words,
//! with the ways out. A rehearsal's fake installer does not check: a warning there.

use anyhow::Result;

/// The file the installer reads.
pub const FIPS_FILE: &str = "/proc/sys/crypto/fips_enabled";
/// The installer's own escape hatch.
pub const SKIP_ENV: &str = "OPENSHIFT_INSTALL_SKIP_HOSTCRYPT_VALIDATION";

/// The host's FIPS state: `Ok(true/false)`, or why it cannot be read.
pub fn host_state() -> Result<bool, String> {
    parse(
        std::fs::read_to_string(FIPS_FILE)
            .map_err(|e| format!("failed to read client FIPS state {FIPS_FILE}: {e}")),
    )
}

fn parse(text: Result<String, String>) -> Result<bool, String> {
    let t = text?;
    match t.trim_end_matches('\n') {
        "1" => Ok(true),
        "0" => Ok(false),
        other => Err(format!(
            "failed to parse client FIPS state {FIPS_FILE}: {other:?}"
        )),
    }
}

/// What to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Fine,
    Warn(String),
    Refuse(String),
}

/// The decision, pure: `fips` from the cluster file, the host's state, whether
/// this is a rehearsal, whether the installer's skip variable is set.
pub fn decide(fips: bool, host: &Result<bool, String>, rehearsal: bool, skip: bool) -> Decision {
    if !fips {
        return Decision::Fine;
    }
    let why = match host {
        Ok(true) => return Decision::Fine,
        Ok(false) => {
            "target cluster is in FIPS mode, operation requires a FIPS enabled client".to_string()
        }
        Err(e) => format!("target cluster is in FIPS mode, but {e}"),
    };
    let way_out = format!(
        "install from a host booted in FIPS mode (RHEL/Fedora: `sudo fips-mode-setup --enable` and reboot) with the release's FIPS installer (`oc adm release extract --command=openshift-install-fips`, named in `openshift_install:`), or set `fips: false`; {SKIP_ENV}=1 makes the installer only warn, and the cluster is then not FIPS-validated"
    );
    if rehearsal {
        Decision::Warn(format!(
            "{why} (openshift-install's check; a real install would stop here, and a rehearsal's installer refuses too unless {SKIP_ENV} is set: {way_out})"
        ))
    } else if skip {
        Decision::Warn(format!(
            "{why} ({SKIP_ENV} is set: the installer warns and goes on)"
        ))
    } else {
        Decision::Refuse(format!("fips: {why}: {way_out}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fips_cluster_needs_a_fips_host() {
        let off = Ok(false);
        match decide(true, &off, false, false) {
            Decision::Refuse(m) => {
                assert!(
                    m.contains(
                        "target cluster is in FIPS mode, operation requires a FIPS enabled client"
                    ),
                    "{m}"
                );
                assert!(m.contains("fips-mode-setup --enable"), "{m}");
                assert!(m.contains("openshift-install-fips"), "{m}");
                assert!(m.contains("fips: false"), "{m}");
            }
            d => panic!("{d:?}"),
        }
        assert!(matches!(decide(true, &off, false, true), Decision::Warn(_)));
        assert!(matches!(decide(true, &off, true, false), Decision::Warn(_)));
        assert_eq!(decide(true, &Ok(true), false, false), Decision::Fine);
        assert_eq!(decide(false, &off, false, false), Decision::Fine);
        let unreadable = Err("failed to read client FIPS state x: gone".to_string());
        assert!(
            matches!(decide(true, &unreadable, false, false), Decision::Refuse(m) if m.contains("failed to read"))
        );
    }

    #[test]
    fn the_state_file_reads_as_the_installer_reads_it() {
        assert_eq!(parse(Ok("1\n".into())), Ok(true));
        assert_eq!(parse(Ok("0\n".into())), Ok(false));
        assert!(parse(Ok("yes\n".into())).is_err());
    }
}
