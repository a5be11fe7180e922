//! What goes into install-config besides nodes and networks: `proxy`, trust bundle,
//! `capabilities`, extra `manifests`, `image_digest_sources`, `fips`,
//! `installation_disk`.

use std::path::PathBuf;

use super::Env;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;
use crate::spec::types::*;

pub struct InstallOptions {
    pub proxy: Option<ProxySpec>,
    pub additional_trust_bundle: Option<PathBuf>,
    pub trust_bundle_pem: Option<String>,
    pub capabilities: Option<Capabilities>,
    pub manifests: Option<PathBuf>,
    pub image_digest_sources: Vec<ImageDigestSource>,
    pub fips: bool,
    pub installation_disk: String,
}

/// kcli's default for `manifests`.
const KCLI_MANIFESTS: &str = "manifests";

pub fn resolve(raw: &RawSpec, env: &Env, d: &mut Diagnostics) -> InstallOptions {
    let proxy = raw.proxy.as_ref().map(|p| {
        for (slot, schemes) in [
            (&p.http_proxy, &["http://"][..]),
            (&p.https_proxy, &["http://", "https://"][..]),
        ] {
            if let Some(s) = slot {
                if !schemes.iter().any(|sch| s.v.starts_with(sch)) {
                    d.error(
                        &s.field,
                        format!(
                            "{:?} must be a URL starting with {}",
                            s.v,
                            schemes.join(" or ")
                        ),
                    );
                }
            }
        }
        ProxySpec {
            http_proxy: p.http_proxy.as_ref().map(|s| s.v.clone()),
            https_proxy: p.https_proxy.as_ref().map(|s| s.v.clone()),
            no_proxy: p.no_proxy.as_ref().map(|s| s.v.clone()),
        }
    });

    let additional_trust_bundle = raw.additional_trust_bundle.as_ref().map(|s| {
        let path = env.path(&s.v);
        match crate::spec::read_input(&path) {
            Ok(t) if t.contains("-----BEGIN CERTIFICATE-----") => {}
            Ok(_) => d.error(
                &s.field,
                format!("{} holds no PEM certificate", path.display()),
            ),
            Err(e) => d.error(&s.field, format!("cannot read {}: {e}", path.display())),
        }
        path
    });
    let trust_bundle_pem = raw.trust_bundle_pem.as_ref().map(|s| {
        if !s.v.contains("-----BEGIN CERTIFICATE-----") {
            d.error(
                &s.field,
                "holds no PEM certificate: kcli's `ca` is the bundle's text (-----BEGIN CERTIFICATE----- …); for a file use additional_trust_bundle",
            );
        }
        s.v.clone()
    });
    // Checked against the version's rules in capabilities.rs.
    let capabilities = raw.capabilities.as_ref().map(|c| Capabilities {
        baseline_capability_set: c.baseline_capability_set.as_ref().map(|s| s.v.clone()),
        additional_enabled_capabilities: c.additional_enabled_capabilities.clone(),
    });
    let manifests = raw.manifests.as_ref().and_then(|s| {
        let path = env.path(&s.v);
        // kcli's default `manifests: manifests` names a directory that is often
        // absent; kcli then adds no manifest, and neither does shiftlab.
        if s.v == KCLI_MANIFESTS && !path.exists() {
            d.warn(
                &s.field,
                format!(
                    "{} does not exist: no extra manifests (as kcli)",
                    path.display()
                ),
            );
            return None;
        }
        if !path.is_dir() {
            d.error(
                &s.field,
                format!("{} is not a directory of manifests", path.display()),
            );
        }
        Some(path)
    });

    InstallOptions {
        proxy,
        additional_trust_bundle,
        trust_bundle_pem,
        capabilities,
        manifests,
        image_digest_sources: raw
            .image_digest_sources
            .iter()
            .map(|(s, m)| ImageDigestSource {
                source: s.clone(),
                mirrors: m.clone(),
            })
            .collect(),
        fips: raw.fips.as_ref().is_some_and(|s| s.v),
        installation_disk: raw
            .installation_disk
            .as_ref()
            .map_or("/dev/vda".into(), |s| s.v.clone()),
    }
}
