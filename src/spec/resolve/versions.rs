//! Version rules: what an install method or a setting needs of the release
//! `version:` asks for, checked before anything is made.
//!
//! - `method: ipi` from 4.16: before it the baremetal platform is only in
//!   `openshift-baremetal-install`, a separate binary extracted from the release
//!   payload (metal3-io dev-scripts, `default_installer_cmd`), which shiftlab does
//!   not run.
//! - `bmc.verify_certificate: true` from 4.21: the lab BMC's CA reaches Ironic as
//!   install-config `platform.baremetal.bmcVerifyCA`, a field the installer knows
//!   from 4.21; 4.18 logs `unknown field "bmcVerifyCA"`, ignores it, and Ironic then
//!   rejects the lab CA.

use super::Src;
use crate::spec::types::{Method, Version};

/// The first minor with the bare-metal platform in `openshift-install` itself.
pub const IPI_SINCE: u32 = 16;
/// The first minor whose install-config has `bmcVerifyCA`.
pub const BMC_VERIFY_CA_SINCE: u32 = 21;

/// The minor `version` names, when it names one (`stable` or `latest` do not).
pub fn minor(v: &Version) -> Option<u32> {
    match v {
        Version::Exact { version } => version.split('.').nth(1)?.parse().ok(),
        Version::Minor { minor } => Some(*minor),
        Version::Channel { minor, .. } => *minor,
    }
}

/// The refusals, each as (field, message), for `method` (`method_field`: where the
/// file set it) and `verify_certificate` (the `bmc.verify_certificate` entry when
/// the file has one) at `version`.
pub fn refusals(
    version: &Version,
    method: Method,
    method_field: &str,
    verify_certificate: Option<&Src<bool>>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if method != Method::Ipi {
        return out;
    }
    let m = minor(version);
    if m.is_some_and(|m| m < IPI_SINCE) {
        out.push((
            method_field.to_string(),
            format!(
                "ipi needs OpenShift 4.{IPI_SINCE} or newer, and version is {version}: before 4.{IPI_SINCE} the bare-metal platform is only in openshift-baremetal-install, which shiftlab does not run; set version to 4.{IPI_SINCE} or later, or use method upi or agent"
            ),
        ));
    }
    if let Some(v) = verify_certificate.filter(|v| v.v) {
        let why = format!(
            "true needs OpenShift 4.{BMC_VERIFY_CA_SINCE} or newer (the BMC's CA reaches Ironic as install-config bmcVerifyCA, which older installers ignore, and Ironic then rejects the lab CA)"
        );
        match m {
            Some(m) if m >= BMC_VERIFY_CA_SINCE => {}
            Some(_) => out.push((
                v.field.clone(),
                format!(
                    "{why}, and version is {version}: set version to 4.{BMC_VERIFY_CA_SINCE} or later, or verify_certificate: false"
                ),
            )),
            None => out.push((
                v.field.clone(),
                format!(
                    "{why}, and version {version} does not say which minor it installs: pin it (version: 4.{BMC_VERIFY_CA_SINCE}, stable-4.{BMC_VERIFY_CA_SINCE} or later), or verify_certificate: false"
                ),
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_version;

    fn yes() -> Src<bool> {
        Src {
            v: true,
            field: "bmc.verify_certificate".into(),
        }
    }

    fn check(version: &str, method: Method, verify: Option<&Src<bool>>) -> Vec<(String, String)> {
        refusals(&parse_version(version).unwrap(), method, "method", verify)
    }

    #[test]
    fn minors_are_read_from_every_kind_of_version() {
        for (v, m) in [
            ("4.18.7", Some(18)),
            ("4.17.0-okd-scos.0", Some(17)),
            ("4.21", Some(21)),
            ("stable-4.16", Some(16)),
            ("stable", None),
            ("latest", None),
        ] {
            assert_eq!(minor(&parse_version(v).unwrap()), m, "{v}");
        }
    }

    #[test]
    fn ipi_below_4_16_is_refused_naming_the_version() {
        let r = check("4.15.3", Method::Ipi, None);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].0, "method");
        for part in ["4.15.3", "4.16 or newer", "openshift-baremetal-install"] {
            assert!(r[0].1.contains(part), "{part}: {}", r[0].1);
        }
        for ok in ["4.16.0", "4.18", "stable-4.17", "stable"] {
            assert!(check(ok, Method::Ipi, None).is_empty(), "{ok}");
        }
        // Other methods have no such rule.
        assert!(check("4.14.1", Method::Upi, None).is_empty());
    }

    #[test]
    fn bmc_verify_ca_only_from_4_21() {
        let r = check("4.18.30", Method::Ipi, Some(&yes()));
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].0, "bmc.verify_certificate");
        for part in [
            "4.18.30",
            "4.21 or newer",
            "bmcVerifyCA",
            "verify_certificate: false",
        ] {
            assert!(r[0].1.contains(part), "{part}: {}", r[0].1);
        }
        // A channel without a minor could be either side of 4.21.
        let r = check("stable", Method::Ipi, Some(&yes()));
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            r[0].1.contains("stable does not say which minor"),
            "{}",
            r[0].1
        );
        for ok in ["4.21.0", "4.22", "candidate-4.21", "4.21.0-okd-scos.0"] {
            assert!(check(ok, Method::Ipi, Some(&yes())).is_empty(), "{ok}");
        }
        let no = Src {
            v: false,
            field: "bmc.verify_certificate".into(),
        };
        assert!(check("4.18.30", Method::Ipi, Some(&no)).is_empty());
        // Both rules at once.
        assert_eq!(check("4.15.0", Method::Ipi, Some(&yes())).len(), 2);
    }
}
