//! `storage: lvms` after install: the `LVMCluster` and the registry's and
//! monitoring's claims on its class (render::lvms::after_install) written to
//! `<assets>/lvmcluster.yaml` at the manifests target, for one `oc apply` (and
//! the registry's `oc patch`) once the operator runs (its CRD comes with the operator, so cluster-bootstrap
//! cannot create it). docs/storage.md.

use anyhow::{Context, Result};

use crate::render::lvms;
use crate::spec::{ClusterSpec, Storage};
use crate::state::Assets;

/// Write the `LVMCluster` when the cluster has `storage: lvms` (and remove one a
/// former run wrote when it no longer has); the `oc apply` line that creates it.
pub fn write(spec: &ClusterSpec, assets: &Assets) -> Result<Option<String>> {
    let file = assets.file(lvms::LVM_CLUSTER_FILE);
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
        assert_eq!(write(&spec("none"), &assets).unwrap(), None);
        assert!(!file.exists(), "a former run's LVMCluster is removed");
        assert_eq!(write(&spec("none"), &assets).unwrap(), None);
    }
}
