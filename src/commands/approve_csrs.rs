use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::cli::approve_csrs::ApproveCsrsArgs;
use crate::cli::OutputFormat;
use crate::kube::approve::{self, Until, WatchOptions};
use crate::kube::csr::NodeIdentity;
use crate::kube::report;
use crate::output::emit;
use crate::state::StateDir;

pub fn run(args: &ApproveCsrsArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let cluster = state.cluster(&args.name);
    let plan = cluster
        .read_plan()
        .context("was the cluster's infrastructure created with shiftlab create infra?")?;
    let nodes = NodeIdentity::from_plan(&plan);
    let kubeconfig = args
        .kubeconfig
        .clone()
        .unwrap_or_else(|| cluster.assets().kubeconfig());
    if !args.watch {
        let r = approve::approve_once_blocking(&kubeconfig, &nodes)?;
        return emit(out, args.output, &r, || report::render_report(&r));
    }
    let opts = WatchOptions {
        until: if args.forever {
            Until::Interrupted
        } else {
            Until::AllApproved
        },
        interval: Duration::from_secs(args.interval),
        nodes: args.nodes.clone(),
        deadline: None,
    };
    let mut failed = None;
    let r = approve::watch_blocking(&kubeconfig, &nodes, &opts, |pass| {
        if args.output == OutputFormat::Table {
            if let Err(e) = report::print_events(out, pass) {
                failed.get_or_insert(e);
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    emit(out, args.output, &r, || report::render_watch(&r))
}
