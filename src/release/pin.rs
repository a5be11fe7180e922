//! `openshift_install:` names an installer, and an installer installs exactly the
//! release it was built for: its `version` output names it (openshift/installer
//! cmd/openshift-install/version.go, `runVersionCmd`: `<argv0> <version>`, then
//! `release image <pullspec>`; pkg/asset/releaseimage: the default release image
//! is baked into the binary). `version:` is then either the same release or a
//! mistake: shiftlab compares the two before the installer runs and refuses a
//! mismatch, instead of letting the binary silently win.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::spec::{Distribution, Version};

/// What `openshift-install version` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallerVersion {
    pub version: String,
    pub release_image: Option<String>,
}

/// The installer's override of its release image (pkg/asset/releaseimage/default.go:
/// `OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE` replaces the baked-in pullspec).
pub const OVERRIDE_ENV: &str = "OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE";

/// Parse the output of `openshift-install version`.
pub fn parse_version_output(text: &str) -> Option<InstallerVersion> {
    let mut lines = text.lines();
    let first = lines.next()?;
    let version = first.split_whitespace().nth(1)?.to_string();
    let release_image = text
        .lines()
        .find_map(|l| l.strip_prefix("release image "))
        .map(|s| s.trim().to_string());
    Some(InstallerVersion {
        version,
        release_image,
    })
}

/// Run `<bin> version` and parse it.
pub fn installer_version(bin: &Path) -> Result<InstallerVersion> {
    let out = Command::new(bin)
        .arg("version")
        .output()
        .with_context(|| format!("running {} version", bin.display()))?;
    if !out.status.success() {
        bail!(
            "{} version failed ({}): {}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    parse_version_output(&text)
        .with_context(|| format!("{} version printed no version: {text:?}", bin.display()))
}

/// Does `installed` (a concrete version such as `4.18.7` or `4.17.0-okd-scos.0`)
/// satisfy the request? `None`: the request names no release (a channel without a
/// minor), so anything goes.
fn satisfies(requested: &Version, installed: &str) -> Option<bool> {
    let minor_of = |v: &str| {
        v.strip_prefix("4.")
            .and_then(|r| r.split('.').next())
            .and_then(|m| m.parse::<u32>().ok())
    };
    match requested {
        Version::Exact { version } => Some(installed == version),
        Version::Minor { minor } => Some(minor_of(installed) == Some(*minor)),
        Version::Channel {
            minor: Some(minor), ..
        } => Some(minor_of(installed) == Some(*minor)),
        Version::Channel { minor: None, .. } => None,
    }
}

/// Which distribution a release image belongs to, when its repository says.
fn image_distribution(image: &str) -> Option<Distribution> {
    if image.contains("/okd/") || image.contains("okd-scos") || image.contains("scos-release") {
        Some(Distribution::Okd)
    } else if image.contains("openshift-release-dev/ocp-release") {
        Some(Distribution::Ocp)
    } else {
        None
    }
}

/// The decision, pure: a note for the user, or the refusal. `override_image`: the
/// installer's override variable, when set.
pub fn check(
    dist: Distribution,
    requested: &Version,
    bin: &Path,
    iv: &InstallerVersion,
    override_image: Option<&str>,
) -> std::result::Result<String, String> {
    let image = override_image.or(iv.release_image.as_deref());
    let what = format!(
        "{} is openshift-install {}{}",
        bin.display(),
        iv.version,
        image
            .map(|i| format!(" (release image {i})"))
            .unwrap_or_default()
    );
    if let Some(d) = image.and_then(image_distribution) {
        if d != dist {
            return Err(format!(
                "{what}: a release of {d}, but the cluster file says `distribution: {dist}`; name the {dist} installer in `openshift_install:`, or set `distribution: {d}`"
            ));
        }
    }
    let mut note = what.clone();
    if let Some(o) = override_image {
        note.push_str(&format!(
            "; {OVERRIDE_ENV} is set: the installer installs {o}, whatever its version says"
        ));
    }
    match satisfies(requested, &iv.version) {
        Some(true) => Ok(note),
        None => Ok(format!("{note}; `version: {requested}` names no release, so this one is installed")),
        Some(false) => Err(format!(
            "{what}, but the cluster file asks for `version: {requested}`: the installer would install its own release, not the one asked for. Make them agree: remove `openshift_install:` to let shiftlab fetch {requested}, or set `version: {}`",
            iv.version
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(v: &str, img: &str) -> InstallerVersion {
        InstallerVersion {
            version: v.into(),
            release_image: Some(img.into()),
        }
    }

    #[test]
    fn version_output_parses() {
        let t = "/usr/local/bin/openshift-install 4.18.7\nbuilt from commit 1234\nrelease image quay.io/openshift-release-dev/ocp-release@sha256:abcd\nrelease architecture amd64\n";
        assert_eq!(
            parse_version_output(t),
            Some(iv(
                "4.18.7",
                "quay.io/openshift-release-dev/ocp-release@sha256:abcd"
            ))
        );
        assert_eq!(parse_version_output(""), None);
    }

    #[test]
    fn a_pinned_installer_must_match_the_requested_version() {
        let bin = Path::new("/opt/oi");
        let ocp = iv(
            "4.18.7",
            "quay.io/openshift-release-dev/ocp-release@sha256:ab",
        );
        let v = |s: &str| crate::spec::parse_version(s).unwrap();
        assert!(check(Distribution::Ocp, &v("4.18.7"), bin, &ocp, None).is_ok());
        assert!(check(Distribution::Ocp, &v("4.18"), bin, &ocp, None).is_ok());
        assert!(check(Distribution::Ocp, &v("stable-4.18"), bin, &ocp, None).is_ok());
        let n = check(Distribution::Ocp, &v("stable"), bin, &ocp, None).unwrap();
        assert!(n.contains("names no release"), "{n}");
        let e = check(Distribution::Ocp, &v("4.17.3"), bin, &ocp, None).unwrap_err();
        assert!(e.contains("openshift-install 4.18.7"), "{e}");
        assert!(e.contains("`version: 4.17.3`"), "{e}");
        assert!(e.contains("remove `openshift_install:`"), "{e}");
        assert!(e.contains("set `version: 4.18.7`"), "{e}");
        assert!(check(Distribution::Ocp, &v("4.19"), bin, &ocp, None).is_err());
        assert!(check(Distribution::Ocp, &v("candidate-4.17"), bin, &ocp, None).is_err());
    }

    #[test]
    fn the_distribution_and_the_override_are_said() {
        let bin = Path::new("/opt/oi");
        let v = |s: &str| crate::spec::parse_version(s).unwrap();
        let okd = iv(
            "4.17.0-okd-scos.0",
            "quay.io/okd/scos-release:4.17.0-okd-scos.0",
        );
        assert!(check(Distribution::Okd, &v("4.17.0-okd-scos.0"), bin, &okd, None).is_ok());
        let e = check(Distribution::Ocp, &v("4.17.0-okd-scos.0"), bin, &okd, None).unwrap_err();
        assert!(e.contains("distribution: ocp"), "{e}");
        let n = check(
            Distribution::Okd,
            &v("4.17.0-okd-scos.0"),
            bin,
            &okd,
            Some("registry.lab/okd:x"),
        )
        .unwrap();
        assert!(n.contains(OVERRIDE_ENV), "{n}");
    }
}
