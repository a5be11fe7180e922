use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::bundle::{create, restore, store};
use crate::cli::bundle::BundleCommand;
use crate::cli::create::ClusterArgs;
use crate::cli::OutputFormat;
use crate::output::emit;
use crate::progress::Sink;
use crate::state::StateDir;

pub fn run(cmd: &BundleCommand, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    match cmd {
        BundleCommand::Create(a) => {
            let req = create::CreateRequest {
                out: a.out.clone(),
                force: a.force,
                timeout: Duration::from_secs(a.timeout),
            };
            let sink = Sink::for_output(a.output != OutputFormat::Table);
            let r = create::create(state, &a.name, a.connect.uri.as_deref(), &req, &sink)?;
            emit(out, a.output, &r, || r.table())
        }
        BundleCommand::Restore(a) => {
            let req = restore::start_request(a.kubeconfig.clone(), Duration::from_secs(a.timeout));
            let sink = Sink::for_output(a.output != OutputFormat::Table);
            let start = a.start.then_some(&req);
            let r = restore::restore(state, &a.path, a.connect.uri.as_deref(), start, &sink)?;
            emit(out, a.output, &r, || r.table())?;
            match &r.start {
                Some(p) => p.all_ready(&r.cluster, req.timeout),
                None => Ok(()),
            }
        }
        BundleCommand::List(a) => {
            let l = store::list(state)?;
            emit(out, a.output, &l, || store::list_table(&l))
        }
        BundleCommand::Inspect(a) => {
            let (m, _) = store::read(&store::locate(state, &a.bundle)?)?;
            emit(out, a.output, &m, || store::inspect_table(&m))
        }
        BundleCommand::Verify(a) => {
            let v = store::verify(&store::locate(state, &a.bundle)?)?;
            emit(out, a.output, &v, || {
                format!(
                    "{}: {} files, {} bad\n",
                    v.path.display(),
                    v.files,
                    v.bad.len()
                )
            })?;
            if !v.bad.is_empty() {
                bail!(
                    "{} is damaged:\n  - {}",
                    v.path.display(),
                    v.bad.join("\n  - ")
                );
            }
            Ok(())
        }
        BundleCommand::Delete(a) => {
            let d = store::delete(&store::locate(state, &a.bundle)?)?;
            emit(out, a.output, &d, || d.table())
        }
    }
}

/// `create cluster -f FILE --from-bundle PATH`: the file's plan checked
/// against the bundle's, then restored and started as `bundle restore --start`.
pub fn adopt(a: &ClusterArgs, state: &StateDir) -> Result<()> {
    let (Some(file), Some(bundle)) = (&a.target.which.file, &a.bundle) else {
        bail!("--from-bundle needs the cluster file (-f FILE)");
    };
    let plan = crate::plan::derive(
        &super::load_spec_with(file, a.target.force, &a.target.which.params)?.spec,
    );
    let req = restore::start_request(None, Duration::from_secs(1800));
    let r = restore::from_file(state, &plan, bundle, &req, &Sink::for_output(false))?;
    print!("{}", r.table());
    r.start
        .map_or(Ok(()), |p| p.all_ready(&r.cluster, req.timeout))
}
