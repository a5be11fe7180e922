//! The lab's manifests written into the asset directory, one way for every
//! method: shiftlab's own (src/render/manifests.rs), the users'
//! (src/install/users.rs) and the cluster file's `manifests` directory. Where
//! the installer takes them from (the recorded runs in tests/fixtures/installer-4.18,
//! and openshift/installer):
//!
//! - upi, ipi: `create manifests`, then `create ignition-configs` (upi) or
//!   `create cluster` (ipi) load `manifests/` and `openshift/` from the directory
//!   into the bootstrap Ignition under /opt/openshift/ (pkg/asset/manifests,
//!   pkg/asset/ignition/bootstrap/common.go).
//! - sno: `create manifests` on the bootstrapInPlace install-config, then
//!   `create single-node-ignition-config` takes them the same way into
//!   bootstrap-in-place-for-live-iso.ign (pkg/asset/ignition/bootstrap/bootstrapinplace.go).
//! - agent: no `create manifests`; `agent create image` reads only
//!   `openshift/*.yaml` and `openshift/*.yml` (pkg/asset/agent/manifests/extramanifests.go,
//!   ExtraManifests.Load) and embeds each YAML document under
//!   /etc/assisted/extra-manifests (pkg/asset/agent/image/ignition.go,
//!   addExtraManifests). So on agent a manifest outside `openshift/` (the
//!   scheduler's: assisted-service decides schedulability there) is left out,
//!   and a user's `.json` goes in as `<name>.json.yaml` (JSON is YAML).

use anyhow::{Context, Result};

use super::target::Flow;
use super::Ctx;

/// Where `rel` (a path in the asset directory) goes for `flow`: None when the
/// flow's installer would not read it there.
pub fn placed(flow: Flow, rel: &str) -> Option<String> {
    if flow != Flow::Agent {
        return Some(rel.to_string());
    }
    let name = rel.strip_prefix("openshift/")?;
    if name.ends_with(".yaml") || name.ends_with(".yml") {
        Some(rel.to_string())
    } else if name.ends_with(".json") {
        Some(format!("{rel}.yaml"))
    } else {
        None
    }
}

/// Is `name` (a file of the cluster file's `manifests` directory) a manifest?
fn is_manifest(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json")
}

/// Write the lab's manifests for `ctx.flow` into the asset directory, the users'
/// passwords made where missing and their record written; returns what was
/// added, by path in the asset directory.
pub fn write(ctx: &Ctx) -> Result<Vec<String>> {
    let assets = ctx.cluster.assets();
    let mut added = Vec::new();
    let mut put = |rel: &str, text: &[u8], private: bool| -> Result<()> {
        let Some(rel) = placed(ctx.flow, rel) else {
            return Ok(());
        };
        let path = assets.file(&rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        if private {
            crate::files::write_private(&path, text)?;
        } else {
            crate::files::write_atomic(&path, text)?;
        }
        added.push(rel);
        Ok(())
    };
    // Private from the first byte: the asset directory holds secrets (the
    // users' hashes among them), made 0600 wholesale only at the next installer run.
    for (rel, text) in crate::render::manifests::lab_manifests(ctx.spec, ctx.plan) {
        put(rel, text.as_bytes(), true)?;
    }
    // The users' hashes need their passwords (files, generated ones) and a
    // random salt: I/O, beside the pure lab manifests.
    let users = crate::install::users::prepare(&ctx.spec.users, &assets)?;
    crate::install::users::remove_stale(&assets, &users.manifests)?;
    for (rel, text) in &users.manifests {
        put(rel, text.as_bytes(), true)?;
    }
    crate::install::users::write_record(&ctx.cluster.users(), &users.record)?;
    if let Some(dir) = &ctx.spec.manifests {
        let mut names = Vec::new();
        for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let name = e?.file_name().to_string_lossy().to_string();
            if is_manifest(&name) {
                names.push(name);
            }
        }
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let text =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            put(&format!("openshift/{name}"), &text, false)?;
        }
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What reaches the cluster only through these manifests is taken on every
    /// method: no error, no warning naming it.
    #[test]
    fn every_method_takes_the_lab_settings() {
        let lab = "storage: nfs\nmonitoring: {retention: 3d}\nntp_servers: [ntp.lab.test]\nusers: [{name: ann, admin: true}]\n";
        for topo in [
            "method: upi\n",
            "method: sno\nctlplanes: 1\n",
            "method: agent\nctlplanes: 3\nworkers: 2\n",
            "method: ipi\nctlplanes: 3\nworkers: 2\n",
        ] {
            let text = format!(
                "cluster: lab1\ndomain: lab.test\ndistribution: okd\nrehearsal: true\n{topo}{lab}"
            );
            let r = crate::spec::from_str(&text, "t.yaml", &crate::spec::Env::default())
                .unwrap_or_else(|e| panic!("{topo}: {e:#}"));
            let warnings = format!("{:?}", r.warnings);
            for field in ["storage", "monitoring", "ntp_servers", "users"] {
                assert!(!warnings.contains(field), "{topo}: {warnings}");
            }
            assert_eq!(r.spec.users.len(), 1, "{topo}");
        }
    }

    #[test]
    fn every_flow_but_agent_takes_every_manifest_where_it_is() {
        for flow in [Flow::Upi, Flow::Sno, Flow::Ipi] {
            for rel in [
                "manifests/cluster-scheduler-02-config.yml",
                "openshift/99-a.yaml",
                "openshift/b.json",
            ] {
                assert_eq!(placed(flow, rel).as_deref(), Some(rel), "{flow}");
            }
        }
    }

    #[test]
    fn agent_takes_only_openshift_yaml_so_json_is_renamed_and_manifests_dir_left_out() {
        assert_eq!(
            placed(Flow::Agent, "manifests/cluster-scheduler-02-config.yml"),
            None
        );
        assert_eq!(
            placed(Flow::Agent, "openshift/99-a.yaml").as_deref(),
            Some("openshift/99-a.yaml")
        );
        assert_eq!(
            placed(Flow::Agent, "openshift/c.yml").as_deref(),
            Some("openshift/c.yml")
        );
        assert_eq!(
            placed(Flow::Agent, "openshift/b.json").as_deref(),
            Some("openshift/b.json.yaml")
        );
    }
}
