//! The stand-in installer a rehearsal without a release runs: `openshift-install`
//! and `oc` (assets/rehearsal/, README.md there), shipped in the binary and
//! written for a run into shiftlab's cache with this run's settings baked in at
//! the installer's `# @BAKED@` line (version, release image, the stream metadata
//! pointing at the stand-in images, the command that plays Ironic), so it needs
//! no environment.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::libvirt::xml::write::Accel;
use crate::spec::{ClusterSpec, Distribution, Version};

/// The stand-in installer as shipped (unbaked).
pub const OPENSHIFT_INSTALL: &str = include_str!("../../assets/rehearsal/openshift-install");
/// The stand-in client (`agent create image` runs it).
pub const OC: &str = include_str!("../../assets/rehearsal/oc");

const BAKED_MARK: &str = "# @BAKED@";
const OC_VERSION_LINE: &str = "FAKE_OC_VERSION=";

/// The minor the stand-in plays when the cluster file names none: the installer
/// it was recorded against (tests/fixtures/installer-4.18).
const DEFAULT_MINOR: u32 = 18;

/// A stand-in image the stream metadata names: the file and its sha256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub path: PathBuf,
    pub sha256: String,
}

/// What a run's copy of the installer has baked in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baked {
    pub version: String,
    pub release_image: String,
    pub stream_json: String,
    /// The shiftlab that plays Ironic for IPI (`<exe> ironic-standin`).
    pub ironic_exe: PathBuf,
    /// IPI's bootstrap VM (`None`: the real one's size, KVM).
    pub bootstrap: Option<BootstrapVm>,
}

/// The bootstrap VM the stand-in installer makes for IPI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootstrapVm {
    pub memory_mib: u32,
    pub vcpus: u32,
    pub accel: Accel,
}

/// A rehearsal's bootstrap VM: the stand-in live system it boots runs in 512 MiB
/// and one vCPU (the real one's 6 GiB and 4 vCPUs would crowd a small host for
/// nothing), on the accelerator shiftlab chose for the nodes on this host (TCG
/// where KVM cannot run guests: host/kvm.rs).
pub fn rehearsal_bootstrap(accel: Accel) -> BootstrapVm {
    BootstrapVm {
        memory_mib: 512,
        vcpus: 1,
        accel,
    }
}

/// The materialized pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools {
    pub openshift_install: PathBuf,
    pub oc: PathBuf,
}

/// The release a rehearsal plays: the cluster file's exact version as it is,
/// else `4.<minor>.0-rehearsal`, and an image name in the distribution's form.
pub fn release_of(spec: &ClusterSpec) -> (String, String) {
    let version = match &spec.version {
        Version::Exact { version } => version.clone(),
        Version::Minor { minor }
        | Version::Channel {
            minor: Some(minor), ..
        } => {
            format!("4.{minor}.0-rehearsal")
        }
        Version::Channel { minor: None, .. } => format!("4.{DEFAULT_MINOR}.0-rehearsal"),
    };
    let image = match spec.distribution {
        Distribution::Ocp => format!("quay.io/openshift-release-dev/ocp-release:{version}-x86_64"),
        Distribution::Okd => format!("quay.io/okd/scos-release:{version}"),
    };
    (version, image)
}

/// The stream metadata the stand-in installer prints, shaped as Fedora CoreOS
/// 39's (what the stand-in's TCG CPU model fits: install/cpu.rs): the stand-in
/// disk image as the qemu qcow2 and the stand-in live ISO as the metal ISO, each
/// by `file://` URL with its sha256.
pub fn stream_json(qcow2: Option<&Image>, iso: Option<&Image>) -> String {
    use serde_json::{json, Map, Value};
    let disk = |i: &Image| json!({"disk": {"location": format!("file://{}", i.path.display()), "sha256": i.sha256}});
    let mut artifacts = Map::new();
    if let Some(q) = qcow2 {
        artifacts.insert(
            "qemu".into(),
            json!({"release": "39.20231101.3.0", "formats": {"qcow2": disk(q)}}),
        );
    }
    if let Some(i) = iso {
        artifacts.insert(
            "metal".into(),
            json!({"release": "39.20231101.3.0", "formats": {"iso": disk(i)}}),
        );
    }
    let root = json!({"stream": "stable", "architectures": {"x86_64": {"artifacts": Value::Object(artifacts)}}});
    let mut s = serde_json::to_string_pretty(&root).expect("JSON values serialize");
    s.push('\n');
    s
}

/// A shell word holding `s` as it is.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The installer with `b` baked in at its `# @BAKED@` line.
pub fn bake_installer(b: &Baked) -> Result<String> {
    let marker = format!("\n{BAKED_MARK}\n");
    if b.stream_json.lines().any(|l| l == "SHIFTLAB_STREAM_JSON") {
        bail!("stream metadata holds the here-document's end marker");
    }
    let mut block = format!(
        "\nFAKE_VERSION={}\nFAKE_RELEASE_IMAGE={}\nFAKE_IRONIC_EXE={}\nstream_json() {{\n\tcat <<'SHIFTLAB_STREAM_JSON'\n{}",
        quote(&b.version),
        quote(&b.release_image),
        quote(&b.ironic_exe.to_string_lossy()),
        b.stream_json
    );
    if !b.stream_json.ends_with('\n') {
        block.push('\n');
    }
    block.push_str("SHIFTLAB_STREAM_JSON\n}\n");
    if let Some(vm) = b.bootstrap {
        let kind = match vm.accel {
            Accel::Kvm => "kvm",
            Accel::Tcg => "qemu",
        };
        block.push_str(&format!(
            "BOOTSTRAP_MEMORY_MIB={}\nBOOTSTRAP_VCPUS={}\nBOOTSTRAP_DOMAIN_TYPE={kind}\n",
            vm.memory_mib, vm.vcpus
        ));
    }
    if OPENSHIFT_INSTALL.matches(&marker).count() != 1 {
        bail!("the shipped installer has no single {BAKED_MARK} line");
    }
    Ok(OPENSHIFT_INSTALL.replacen(&marker, &block, 1))
}

/// The client reporting `version`.
pub fn bake_oc(version: &str) -> Result<String> {
    let mut found = false;
    let out: Vec<String> = OC
        .split_inclusive('\n')
        .map(|l| {
            if !found && l.starts_with(OC_VERSION_LINE) {
                found = true;
                format!("{OC_VERSION_LINE}{}\n", quote(version))
            } else {
                l.to_string()
            }
        })
        .collect();
    if !found {
        bail!("the shipped oc has no {OC_VERSION_LINE} line");
    }
    Ok(out.concat())
}

/// `b`'s installer and client under `<cache>/rehearsal/<sha256>/` (0755, each
/// written atomically; a copy already there is kept: the name is its content).
pub fn materialize(cache_root: &Path, b: &Baked) -> Result<Tools> {
    let installer = bake_installer(b)?;
    let oc = bake_oc(&b.version)?;
    let mut h = Sha256::new();
    h.update(installer.as_bytes());
    h.update([0]);
    h.update(oc.as_bytes());
    let dir = cache_root.join("rehearsal").join(hex::encode(h.finalize()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let tools = Tools {
        openshift_install: dir.join("openshift-install"),
        oc: dir.join("oc"),
    };
    for (path, text) in [(&tools.openshift_install, &installer), (&tools.oc, &oc)] {
        if std::fs::read(path).ok().as_deref() != Some(text.as_bytes()) {
            crate::files::write_atomic_mode(path, text.as_bytes(), 0o755)?;
        }
    }
    Ok(tools)
}

/// What the stand-in installer runs for `flow`, each command with the Debian
/// package that has it (assets/rehearsal/openshift-install's "Needs").
pub fn tools_for(flow: crate::install::target::Flow) -> Vec<(&'static str, &'static str)> {
    use crate::install::target::Flow;
    let mut v = vec![
        ("bash", "bash"),
        ("jq", "jq"),
        ("curl", "curl"),
        ("dig", "bind9-dnsutils"),
    ];
    if flow == Flow::Ipi {
        v.push(("virsh", "libvirt-clients"));
    }
    if matches!(flow, Flow::Sno | Flow::Agent | Flow::Ipi) {
        v.push(("coreos-installer", "coreos-installer"));
        v.push(("genisoimage", "genisoimage"));
    }
    v
}

/// Those of every flow's commands found on PATH.
pub fn tools_on_path() -> Vec<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    let mut all = tools_for(crate::install::target::Flow::Ipi);
    all.extend(tools_for(crate::install::target::Flow::Sno));
    all.sort();
    all.dedup();
    all.into_iter()
        .filter(|(c, _)| dirs.iter().any(|d| is_executable(&d.join(c))))
        .map(|(c, _)| c.to_string())
        .collect()
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// An image and its digest.
pub fn image(path: &Path) -> Result<Image> {
    Ok(Image {
        path: path.to_path_buf(),
        sha256: crate::release::sha256_file(path)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baked() -> Baked {
        Baked {
            version: "4.18.0-rehearsal".into(),
            release_image: "quay.io/x/y:it's".into(),
            stream_json: stream_json(
                Some(&Image {
                    path: "/c/standin.qcow2".into(),
                    sha256: "ab".repeat(32),
                }),
                Some(&Image {
                    path: "/c/live.iso".into(),
                    sha256: "cd".repeat(32),
                }),
            ),
            ironic_exe: "/usr/bin/shiftlab".into(),
            bootstrap: None,
        }
    }

    /// The bootstrap VM's settings as the baked installer's bash reads them, with
    /// `env` set: its settings alone (everything before its helpers) run.
    fn bootstrap_seen(installer: &str, env: &[(&str, &str)]) -> String {
        let (settings, _) = installer
            .split_once(
                "\n# ----------------------------------------------------------------- helpers",
            )
            .unwrap();
        let script = format!(
            "{settings}\necho \"${{FAKE_BOOTSTRAP_MEMORY_MIB:-$BOOTSTRAP_MEMORY_MIB}} ${{FAKE_BOOTSTRAP_VCPUS:-$BOOTSTRAP_VCPUS}} ${{FAKE_BOOTSTRAP_DOMAIN_TYPE:-$BOOTSTRAP_DOMAIN_TYPE}}\"\n"
        );
        let mut cmd = std::process::Command::new("bash");
        cmd.arg("-c").arg(script).env_clear();
        cmd.envs(env.iter().copied());
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    #[test]
    fn a_rehearsal_bakes_a_small_bootstrap_vm_on_the_nodes_accelerator() {
        // Shipped (and baked without one): the real bootstrap VM.
        assert_eq!(bootstrap_seen(OPENSHIFT_INSTALL, &[]), "6144 4 kvm");
        assert_eq!(
            bootstrap_seen(&bake_installer(&baked()).unwrap(), &[]),
            "6144 4 kvm"
        );
        for (accel, kind) in [(Accel::Tcg, "qemu"), (Accel::Kvm, "kvm")] {
            let b = Baked {
                bootstrap: Some(rehearsal_bootstrap(accel)),
                ..baked()
            };
            let out = bake_installer(&b).unwrap();
            assert_eq!(bootstrap_seen(&out, &[]), format!("512 1 {kind}"));
            // The tests' knobs still win.
            assert_eq!(
                bootstrap_seen(
                    &out,
                    &[
                        ("FAKE_BOOTSTRAP_MEMORY_MIB", "768"),
                        ("FAKE_BOOTSTRAP_VCPUS", "2"),
                        ("FAKE_BOOTSTRAP_DOMAIN_TYPE", "kvm")
                    ]
                ),
                "768 2 kvm"
            );
        }
        // The VM is made from those settings.
        for used in [
            "mem=${FAKE_BOOTSTRAP_MEMORY_MIB:-$BOOTSTRAP_MEMORY_MIB}",
            "cpus=${FAKE_BOOTSTRAP_VCPUS:-$BOOTSTRAP_VCPUS}",
            "type=${FAKE_BOOTSTRAP_DOMAIN_TYPE:-$BOOTSTRAP_DOMAIN_TYPE}",
        ] {
            assert_eq!(OPENSHIFT_INSTALL.matches(used).count(), 1, "{used}");
        }
    }

    #[test]
    fn stream_names_both_images_by_file_url() {
        let s: serde_json::Value = serde_json::from_str(&baked().stream_json).unwrap();
        let a = &s["architectures"]["x86_64"]["artifacts"];
        assert_eq!(
            a["qemu"]["formats"]["qcow2"]["disk"]["location"],
            "file:///c/standin.qcow2"
        );
        assert_eq!(
            a["qemu"]["formats"]["qcow2"]["disk"]["sha256"],
            "ab".repeat(32)
        );
        assert_eq!(
            a["metal"]["formats"]["iso"]["disk"]["location"],
            "file:///c/live.iso"
        );
        assert_eq!(
            a["metal"]["formats"]["iso"]["disk"]["sha256"],
            "cd".repeat(32)
        );
        // The CPU check reads the level from it (release.rs).
        let level = crate::release::cpu_level::stream_level(&baked().stream_json).unwrap();
        assert_eq!(level.release, "39.20231101.3.0");
        let bare = stream_json(None, None);
        assert!(!bare.contains("qemu") && !bare.contains("metal"), "{bare}");
    }

    #[test]
    fn baking_replaces_the_marked_line_alone() {
        let b = baked();
        let out = bake_installer(&b).unwrap();
        assert!(!out.contains(BAKED_MARK));
        assert!(
            out.contains("\nFAKE_VERSION='4.18.0-rehearsal'\n"),
            "version"
        );
        assert!(
            out.contains(r"FAKE_RELEASE_IMAGE='quay.io/x/y:it'\''s'"),
            "quoted"
        );
        assert!(out.contains("FAKE_IRONIC_EXE='/usr/bin/shiftlab'"));
        assert!(out.contains(&b.stream_json), "stream");
        // Everything else is the shipped text.
        let (head, _) = OPENSHIFT_INSTALL.split_once(BAKED_MARK).unwrap();
        assert!(out.starts_with(head));
        let (_, tail) = OPENSHIFT_INSTALL.split_once(BAKED_MARK).unwrap();
        assert!(out.ends_with(tail));
        let bad = Baked {
            stream_json: "x\nSHIFTLAB_STREAM_JSON\n".into(),
            ..b
        };
        assert!(bake_installer(&bad).is_err());
    }

    #[test]
    fn the_release_a_rehearsal_plays() {
        let spec = |text: &str| {
            crate::spec::from_str(
                &format!(
                    "cluster: lab1\nssh_keys: ['ssh-ed25519 AAAA k']\nrehearsal: true\n{text}"
                ),
                "t.yaml",
                &crate::spec::Env::default(),
            )
            .unwrap()
            .spec
        };
        assert_eq!(
            release_of(&spec("distribution: okd\nversion: 4.17.0-okd-scos.0\n")),
            (
                "4.17.0-okd-scos.0".to_string(),
                "quay.io/okd/scos-release:4.17.0-okd-scos.0".to_string()
            )
        );
        assert_eq!(
            release_of(&spec("distribution: okd\nversion: stable-4.19\n")).0,
            "4.19.0-rehearsal"
        );
        let mut ocp = spec("distribution: okd\nversion: \"4.16\"\n");
        ocp.distribution = Distribution::Ocp;
        assert_eq!(
            release_of(&ocp),
            (
                "4.16.0-rehearsal".to_string(),
                "quay.io/openshift-release-dev/ocp-release:4.16.0-rehearsal-x86_64".to_string()
            )
        );
    }

    #[test]
    fn oc_reports_the_release() {
        let out = bake_oc("4.17.0-okd-scos.0").unwrap();
        assert!(out.contains("\nFAKE_OC_VERSION='4.17.0-okd-scos.0'\n"));
        assert_eq!(out.lines().count(), OC.lines().count());
    }

    #[test]
    fn materialized_once_by_content() {
        let d = tempfile::tempdir().unwrap();
        let t = materialize(d.path(), &baked()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        for p in [&t.openshift_install, &t.oc] {
            let m = std::fs::metadata(p).unwrap().permissions().mode();
            assert_eq!(m & 0o777, 0o755, "{}", p.display());
        }
        assert_eq!(
            std::fs::read_to_string(&t.openshift_install).unwrap(),
            bake_installer(&baked()).unwrap()
        );
        assert_eq!(materialize(d.path(), &baked()).unwrap(), t);
        let other = Baked {
            version: "4.19.0-rehearsal".into(),
            ..baked()
        };
        assert_ne!(materialize(d.path(), &other).unwrap(), t);
    }
}
