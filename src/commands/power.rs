use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::cli::power::{StartArgs, StopArgs};
use crate::cluster::power::{self, PowerRecord};
use crate::kube::csr::NodeIdentity;
use crate::libvirt::Host;
use crate::output::emit;
use crate::state::{ClusterDir, StateDir};

fn open(
    state: &StateDir,
    name: &str,
    uri: Option<&str>,
) -> Result<(
    ClusterDir,
    crate::state::ClusterLock,
    crate::plan::Plan,
    Host,
)> {
    let cluster = state.cluster(name);
    if !cluster.exists() {
        bail!("no cluster {name} in {}", state.clusters().display());
    }
    let lock = cluster.lock()?;
    let plan = cluster
        .read_plan()
        .context("was the cluster's infrastructure created with shiftlab create infra?")?;
    crate::kubevirt::refuse_libvirt_only(
        &plan,
        "stop/start",
        "use `virtctl stop|start` on its VirtualMachines",
    )?;
    let recorded = crate::cluster::recorded_uri(&cluster)?;
    let uri = crate::libvirt::uri(
        uri.or(recorded.as_deref())
            .or(Some(plan.libvirt.uri.as_str())),
    );
    let host = Host::open(&uri)?;
    Ok((cluster, lock, plan, host))
}

pub fn stop(args: &StopArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let (cluster, _lock, plan, host) = open(state, &args.name, args.connect.uri.as_deref())?;
    let install = crate::install::state::read(&cluster)?;
    if let Some(why) = power::too_early(power::certificates_made(install.as_ref()), power::now()) {
        if !args.force {
            bail!("not stopping {}: {why}", args.name);
        }
        eprintln!("warning: stopping {} anyway (--force): {why}", args.name);
    }
    let nodes = power::stop(
        &host,
        &plan,
        Duration::from_secs(args.timeout),
        Duration::from_millis(500),
    )?;
    let r = PowerRecord {
        action: "stop".into(),
        at: power::now(),
        nodes,
        api: None,
        note: None,
    };
    power::record(&cluster, &r)?;
    emit(out, args.output, &r, || r.table())
}

pub fn start(args: &StartArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let (cluster, _lock, plan, host) = open(state, &args.name, args.connect.uri.as_deref())?;
    // The heartbeat a powered-on node's Ready must be newer than (whole seconds,
    // as the API writes times).
    let since = k8s_openapi::chrono::DateTime::from_timestamp(power::now() as i64, 0)
        .unwrap_or_else(k8s_openapi::chrono::Utc::now);
    let nodes = power::start(&host, &plan)?;
    let fresh = crate::kube::ready::Fresh {
        since,
        nodes: nodes
            .iter()
            .filter(|n| n.action == "started")
            .map(|n| n.node.clone())
            .collect(),
    };
    let kubeconfig = args
        .kubeconfig
        .clone()
        .unwrap_or_else(|| cluster.assets().kubeconfig());
    let mut r = PowerRecord {
        action: "start".into(),
        at: power::now(),
        nodes,
        api: None,
        note: None,
    };
    if args.no_api {
        r.note = Some("--no-api: the API, CSRs and readiness were not looked at".into());
    } else if !kubeconfig.is_file() {
        r.note = Some(format!(
            "no kubeconfig at {}: the API, CSRs and readiness were not looked at",
            kubeconfig.display()
        ));
    } else {
        let wanted = power::wanted_ready(&host, &plan)?;
        let api = crate::kube::ready::bring_back_blocking(
            &kubeconfig,
            &NodeIdentity::from_plan(&plan),
            &wanted,
            Some(&fresh),
            Duration::from_secs(args.timeout),
            Duration::from_secs(args.interval),
        );
        match api {
            Ok(a) => r.api = Some(a),
            Err(e) => {
                r.note = Some(format!("{e:#}"));
                power::record(&cluster, &r)?;
                return Err(e.context(format!("{} was started but did not come back", args.name)));
            }
        }
    }
    power::record(&cluster, &r)?;
    emit(out, args.output, &r, || r.table())?;
    if let Some(a) = &r.api {
        if !a.not_ready.is_empty() {
            bail!(
                "not Ready within {}s: {} (shiftlab approve-csrs {} --watch; shiftlab gather {})",
                args.timeout,
                a.not_ready.join(", "),
                args.name,
                args.name
            );
        }
    }
    Ok(())
}
