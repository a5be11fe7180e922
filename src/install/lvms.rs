//! `storage: lvms` after install: the `LVMCluster` and the registry's and
//! monitoring's claims on its class (render::lvms::after_install) written to
//! `<assets>/lvmcluster.yaml` at the manifests target, for one `oc apply` (and
//! the registry's `oc patch`) once the operator runs (its CRD comes with the operator, so cluster-bootstrap
//! cannot create it). docs/storage.md.
//!
//! After install-complete, [`apply`] does it through the API (kube::lvms) and
//! writes [`APPLIED`] beside the file; `status` says the command only for a
//! cluster without that mark.

use anyhow::{Context, Result};

use crate::render::lvms;
use crate::spec::{ClusterSpec, Storage};
use crate::state::Assets;

/// Write the `LVMCluster` when the cluster has `storage: lvms` (and remove one a
/// former run wrote when it no longer has); the `oc apply` line that creates it.
pub fn write(spec: &ClusterSpec, assets: &Assets) -> Result<Option<String>> {
    let file = assets.file(lvms::LVM_CLUSTER_FILE);
    // A new install's file is not applied yet.
    remove_if_there(&assets.file(APPLIED))?;
    let minor = crate::spec::version_minor(&spec.version);
    let (Storage::Lvms, Some(minor)) = (spec.storage, minor) else {
        match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", file.display()))
            }
            _ => return Ok(None),
        }
    };
    crate::files::write_atomic(&file, lvms::after_install(spec, minor).as_bytes())?;
    Ok(Some(apply_line(&assets.kubeconfig(), &file)))
}

/// The mark that [`apply`] applied `lvmcluster.yaml` (what it did, one per line).
pub const APPLIED: &str = "lvmcluster.applied";

fn remove_if_there(file: &std::path::Path) -> Result<()> {
    match std::fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", file.display()))
        }
        _ => Ok(()),
    }
}

/// Whether `lvmcluster.yaml` was applied (status keeps the command otherwise).
pub fn applied(assets: &Assets) -> bool {
    assets.file(APPLIED).is_file()
}

/// After install-complete: apply `lvmcluster.yaml` through the API once the
/// operator's CRD is Established; what was done. `None` without the file (no
/// `storage: lvms`). On failure the error says the command as the manual way.
/// Idempotent: a rerun (after a crash, or after success) converges.
pub fn apply(
    assets: &Assets,
    wait: crate::kube::lvms::Wait,
    say: &dyn Fn(String),
) -> Result<Option<Vec<String>>> {
    use crate::kube::lvms as api;
    let file = assets.file(lvms::LVM_CLUSTER_FILE);
    if !file.is_file() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let objects = api::Objects::parse(&text).with_context(|| format!("{}", file.display()))?;
    let kubeconfig = assets.kubeconfig();
    say(format!(
        "storage: lvms: waiting for the LVM Storage operator's CRD {} (at most {} min), then applying {}",
        api::CRD,
        wait.timeout.as_secs() / 60,
        file.display()
    ));
    let done = crate::runtime::block_on(async {
        let client = crate::kube::approve::client_from_kubeconfig(&kubeconfig).await?;
        api::apply(&client, &objects, &api::registry_patch(), wait, say).await
    })
    .with_context(|| {
        format!(
            "storage: lvms: applying {} failed; by hand, once the operator runs: {}",
            file.display(),
            apply_line(&kubeconfig, &file)
        )
    })?;
    crate::files::write_atomic(&assets.file(APPLIED), done.join("\n").as_bytes())?;
    Ok(Some(done))
}

/// The command that creates the LVMCluster and the claims once the operator
/// runs, then moves the registry onto its claim.
pub fn apply_line(kubeconfig: &std::path::Path, file: &std::path::Path) -> String {
    use crate::cluster::access::shell_quote;
    let kc = shell_quote(&kubeconfig.display().to_string());
    format!(
        "oc --kubeconfig {kc} apply -f {} && oc --kubeconfig {kc} patch configs.imageregistry.operator.openshift.io cluster --type merge -p {}",
        shell_quote(&file.display().to_string()),
        shell_quote(crate::render::manifests::LVMS_REGISTRY_PATCH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(storage: &str) -> ClusterSpec {
        let text = format!(
            "cluster: lab1\ndistribution: okd\nversion: '4.18'\nssh_keys: ['ssh-ed25519 AAAA k']\nstorage: {storage}\n"
        );
        crate::spec::from_str(&text, "t.yaml", &crate::spec::Env::default())
            .unwrap()
            .spec
    }

    #[test]
    fn the_lvm_cluster_is_written_with_its_apply_line_and_removed_without_lvms() {
        let d = tempfile::tempdir().unwrap();
        let assets = crate::state::StateDir {
            root: d.path().into(),
        }
        .cluster("lab1")
        .assets();
        std::fs::create_dir_all(assets.path()).unwrap();
        let file = assets.file(lvms::LVM_CLUSTER_FILE);
        // OKD refuses lvms in the cluster file: set by hand, the writer's input.
        let mut s = spec("none");
        s.storage = Storage::Lvms;
        let line = write(&s, &assets).unwrap().unwrap();
        assert!(
            line.starts_with(&format!(
                "oc --kubeconfig {} apply -f {} && oc --kubeconfig {} patch configs.imageregistry.operator.openshift.io cluster --type merge -p '{{",
                assets.kubeconfig().display(),
                file.display(),
                assets.kubeconfig().display(),
            )),
            "{line}"
        );
        let text = std::fs::read_to_string(&file).unwrap();
        let kinds: Vec<String> = text
            .split("---\n")
            .map(|d| {
                yaml_serde::from_str::<yaml_serde::Value>(d).unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            kinds,
            ["LVMCluster", "PersistentVolumeClaim", "ConfigMap"],
            "{text}"
        );
        // Applied, then a new install: the mark goes, status says the command again.
        std::fs::write(assets.file(APPLIED), "done").unwrap();
        assert!(applied(&assets));
        write(&s, &assets).unwrap().unwrap();
        assert!(!applied(&assets), "a new install's file is not applied yet");
        assert_eq!(write(&spec("none"), &assets).unwrap(), None);
        assert!(!file.exists(), "a former run's LVMCluster is removed");
        assert_eq!(write(&spec("none"), &assets).unwrap(), None);
    }
}
