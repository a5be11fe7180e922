use std::io::Write;
use std::os::unix::process::CommandExt;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::cli::access::{ConsoleArgs, EnvArgs, SshArgs};
use crate::cluster::{access, Recorded};
use crate::output::emit;
use crate::state::StateDir;

/// How a command on a cluster shiftlab does not know ends its refusal.
const UNKNOWN: &str = " (shiftlab list shows the clusters on the host)";

#[derive(Serialize)]
struct Env {
    #[serde(rename = "KUBECONFIG")]
    kubeconfig: String,
    /// The first admin of `users:` and where its password is (never the password).
    #[serde(skip_serializing_if = "Option::is_none")]
    login: Option<crate::install::users::Login>,
}

pub fn env(args: &EnvArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let cluster = crate::cluster::known(state, &args.name, UNKNOWN)?;
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
        login: crate::install::users::admin_login(&cluster)?,
    };
    emit(out, args.output, &v, || {
        let login = v
            .login
            .as_ref()
            .map(|l| access::login_line(&l.user, &l.password_file, &l.server));
        access::env_line(&kubeconfig) + &login.unwrap_or_default()
    })
}

pub fn ssh(args: &SshArgs, state: &StateDir) -> Result<()> {
    let c = Recorded::read_only(state, &args.name, UNKNOWN)?;
    let node = access::find_node(&c.plan, &args.node)?;
    if let Some(i) = &args.identity {
        if !i.is_file() {
            bail!("no key file {}", i.display());
        }
    }
    let argv = access::ssh_args(
        node,
        &c.dir.known_hosts(),
        args.identity.as_deref(),
        &args.command,
    );
    if args.print {
        println!("{}", access::ssh_line(&argv));
        return Ok(());
    }
    // exec: ssh owns the terminal and its exit status becomes ours.
    let e = std::process::Command::new("ssh").args(&argv).exec();
    Err(e).context("running ssh (is openssh-client installed?)")
}

pub fn console(args: &ConsoleArgs, state: &StateDir) -> Result<()> {
    let c = Recorded::read_only(state, &args.name, UNKNOWN)?;
    let node = access::find_node(&c.plan, &args.node)?.name.clone();
    let c = c.connect(
        args.connect.uri.as_deref(),
        "console",
        "use `virtctl console`",
    )?;
    crate::libvirt::console::attach(&c.host, &node, args.force)
}
