use std::io::Write;
use std::os::unix::process::CommandExt;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::cli::access::{ConsoleArgs, EnvArgs, SshArgs};
use crate::cluster::access;
use crate::libvirt::Host;
use crate::output::emit;
use crate::state::{ClusterDir, StateDir};

/// The cluster's state, or a clear refusal when shiftlab knows no such cluster.
fn known(state: &StateDir, name: &str) -> Result<ClusterDir> {
    let cluster = state.cluster(name);
    if !cluster.exists() {
        bail!(
            "no cluster {name} in {} (shiftlab list shows the clusters on the host)",
            state.clusters().display()
        );
    }
    Ok(cluster)
}

#[derive(Serialize)]
struct Env {
    #[serde(rename = "KUBECONFIG")]
    kubeconfig: String,
}

pub fn env(args: &EnvArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let cluster = known(state, &args.name)?;
    let kubeconfig = cluster.assets().kubeconfig();
    if !kubeconfig.is_file() {
        bail!(
            "{} has no kubeconfig yet ({}): the install writes it at its ignition target",
            args.name,
            kubeconfig.display()
        );
    }
    let v = Env {
        kubeconfig: kubeconfig.to_string_lossy().into_owned(),
    };
    emit(out, args.output, &v, || access::env_line(&kubeconfig))
}

pub fn ssh(args: &SshArgs, state: &StateDir) -> Result<()> {
    let cluster = known(state, &args.name)?;
    let plan = cluster
        .read_plan()
        .context("was the cluster's infrastructure created with shiftlab create infra?")?;
    let node = access::find_node(&plan, &args.node)?;
    if let Some(i) = &args.identity {
        if !i.is_file() {
            bail!("no key file {}", i.display());
        }
    }
    let argv = access::ssh_args(
        node,
        &cluster.known_hosts(),
        args.identity.as_deref(),
        &args.command,
    );
    if args.print {
        let words: Vec<String> = std::iter::once("ssh".to_string())
            .chain(
                argv.iter()
                    .map(|a| access::shell_quote(&a.to_string_lossy())),
            )
            .collect();
        println!("{}", words.join(" "));
        return Ok(());
    }
    // exec: ssh owns the terminal and its exit status becomes ours.
    let e = std::process::Command::new("ssh").args(&argv).exec();
    Err(e).context("running ssh (is openssh-client installed?)")
}

pub fn console(args: &ConsoleArgs, state: &StateDir) -> Result<()> {
    let cluster = known(state, &args.name)?;
    let plan = cluster
        .read_plan()
        .context("was the cluster's infrastructure created with shiftlab create infra?")?;
    let node = access::find_node(&plan, &args.node)?;
    crate::kubevirt::refuse_libvirt_only(&plan, "console", "use `virtctl console`")?;
    let recorded = crate::cluster::recorded_uri(&cluster)?;
    let uri = crate::libvirt::uri(
        args.connect
            .uri
            .as_deref()
            .or(recorded.as_deref())
            .or(Some(plan.libvirt.uri.as_str())),
    );
    let host = Host::open(&uri)?;
    crate::libvirt::console::attach(&host, &node.name, args.force)
}
