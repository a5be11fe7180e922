//! `pull_secret` and `ssh_keys`: paths and keys checked, contents never echoed.

use std::path::{Path, PathBuf};

use super::Env;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::{RawSpec, Src};
use crate::spec::types::*;

pub struct Credentials {
    /// Path only: the contents are a secret, read when rendering.
    pub pull_secret: Option<PathBuf>,
    pub ssh_keys: Vec<SshKey>,
}

pub fn resolve(
    raw: &RawSpec,
    distribution: Distribution,
    env: &Env,
    d: &mut Diagnostics,
) -> Credentials {
    let pull_secret = match &raw.pull_secret {
        Some(p) => {
            let path = env.path(&p.v);
            check_pull_secret(&p.field, &path, d);
            Some(path)
        }
        None => {
            if distribution == Distribution::Ocp {
                d.error(
                    "pull_secret",
                    "missing: OCP needs a pull secret file (download it from console.redhat.com/openshift/install/pull-secret); OKD can do without",
                );
            }
            None
        }
    };
    Credentials {
        pull_secret,
        ssh_keys: resolve_ssh_keys(&raw.ssh_keys, env, d),
    }
}

fn check_pull_secret(field: &str, path: &Path, d: &mut Diagnostics) {
    let text = match crate::spec::read_input(path) {
        Ok(t) => t,
        Err(e) => {
            d.error(field, format!("cannot read {}: {e}", path.display()));
            return;
        }
    };
    // Never echo the contents: serde_json's messages carry only line and column.
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) if v.get("auths").is_some_and(|a| a.is_object()) => {}
        Ok(_) => d.error(
            field,
            format!(
                "{} is JSON but has no `auths` object; a pull secret looks like {{\"auths\": {{…}}}}",
                path.display()
            ),
        ),
        Err(e) => d.error(
            field,
            format!("{} is not valid JSON ({e})", path.display()),
        ),
    }
}

fn is_public_key(s: &str) -> bool {
    ["ssh-", "ecdsa-", "sk-"].iter().any(|p| s.starts_with(p))
}

fn resolve_ssh_keys(raw: &Option<Src<Vec<String>>>, env: &Env, d: &mut Diagnostics) -> Vec<SshKey> {
    let mut out = Vec::new();
    match raw {
        Some(list) => {
            for (i, entry) in list.v.iter().enumerate() {
                let field = format!("{}[{i}]", list.field);
                let entry = entry.trim();
                if is_public_key(entry) {
                    out.push(SshKey {
                        source: "literal".into(),
                        key: entry.to_string(),
                    });
                    continue;
                }
                let path = env.path(entry);
                match crate::spec::read_input(&path) {
                    Ok(t) if t.contains("PRIVATE KEY") => d.error(
                        field,
                        format!(
                            "{} is a private key; give the public key (usually the .pub file beside it)",
                            path.display()
                        ),
                    ),
                    Ok(t) if is_public_key(t.trim()) => out.push(SshKey {
                        source: entry.to_string(),
                        key: t.trim().to_string(),
                    }),
                    Ok(_) => d.error(
                        field,
                        format!(
                            "{} is not an SSH public key (expected a line starting with ssh-, ecdsa- or sk-)",
                            path.display()
                        ),
                    ),
                    Err(e) => d.error(
                        field,
                        format!("cannot read SSH key {}: {e}", path.display()),
                    ),
                }
            }
        }
        None => {
            // Default: every ~/.ssh/id_*.pub, in name order so the plan is stable.
            let mut found = Vec::new();
            if let Some(home) = &env.home {
                if let Ok(rd) = std::fs::read_dir(home.join(".ssh")) {
                    for e in rd.flatten() {
                        let name = e.file_name().to_string_lossy().to_string();
                        if name.starts_with("id_") && name.ends_with(".pub") {
                            found.push(e.path());
                        }
                    }
                }
            }
            found.sort();
            for p in found {
                if let Ok(t) = crate::spec::read_input(&p) {
                    if is_public_key(t.trim()) {
                        out.push(SshKey {
                            source: p.display().to_string(),
                            key: t.trim().to_string(),
                        });
                    }
                }
            }
            if out.is_empty() {
                d.warn(
                    "ssh_keys",
                    "no key given and none found in ~/.ssh/id_*.pub: you will not be able to ssh to the nodes",
                );
            }
        }
    }
    out
}
