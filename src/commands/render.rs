//! `shiftlab render --backend kubevirt -f FILE --dir DIR`: the objects `create`
//! would apply, as YAML files, one per object, numbered in apply order. The
//! Secrets hold each node's pointer Ignition (which names the cluster's HTTP
//! token), so they are written 0600. Nothing is applied.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use crate::cli::render::{RenderArgs, RenderBackend};
use crate::kubevirt::render::{self, Inputs, Kind};
use crate::plan;
use crate::spec::BackendKind;
use crate::state::StateDir;

pub fn run(args: &RenderArgs, state: &StateDir) -> Result<()> {
    let RenderBackend::Kubevirt = args.backend;
    // Rendering installs nothing: a size `create --force` may go on with warns.
    let loaded = super::load_spec_with(&args.file, true, &args.params)?;
    let spec = &loaded.spec;
    if spec.backend != BackendKind::Kubevirt {
        return Err(unusable(
            &args.file,
            "backend",
            "libvirt: render writes a KubeVirt cluster's objects; set `backend: kubevirt` and a `kubevirt:` section (docs/kubevirt.md)",
        ));
    }
    let plan = plan::derive(spec);
    let kp = crate::kubevirt::plan_of(&plan)?;
    let Some(image) = &kp.image else {
        return Err(unusable(
            &args.file,
            "kubevirt.image",
            "render needs the node image named (create takes it from the release's stream metadata)",
        ));
    };
    let Some(base) = &kp.http_url else {
        return Err(unusable(
            &args.file,
            "kubevirt.http_url",
            "no URL at which the VMs reach shiftlab's HTTP server",
        ));
    };
    let cluster = state.cluster(&spec.cluster);
    let token = crate::serve::http::token_for_render(&cluster)?;
    let mut userdata = BTreeMap::new();
    for n in &plan.nodes {
        let url = format!("{base}/{token}/{}.ign", n.name);
        userdata.insert(n.name.clone(), crate::ignition::pointer_config(&url)?);
    }
    let objects = render::render(
        &plan,
        &Inputs {
            image,
            userdata: &userdata,
        },
    )?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    for (i, o) in objects.iter().enumerate() {
        let file = args.dir.join(format!(
            "{:02}-{}-{}.yaml",
            i + 1,
            o.kind.as_str().to_lowercase(),
            o.name
        ));
        let text = render::to_yaml(std::slice::from_ref(o))?;
        if o.kind == Kind::Secret {
            crate::files::write_private(&file, text.as_bytes())?;
        } else {
            crate::files::write_atomic(&file, text.as_bytes())?;
        }
        println!("{}", file.display());
    }
    Ok(())
}

/// A cluster file render cannot use: refused as any invalid cluster file is
/// (the CLI's exit 2), before anything is written.
fn unusable(file: &Path, field: &str, message: &str) -> anyhow::Error {
    crate::spec::InvalidSpec {
        file: file.display().to_string(),
        errors: vec![crate::spec::Diagnostic {
            field: field.into(),
            message: message.into(),
        }],
    }
    .into()
}
