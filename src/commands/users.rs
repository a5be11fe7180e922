use std::io::Write;

use anyhow::Result;

use crate::cli::users::{UsersAction, UsersArgs};
use crate::cluster::users;
use crate::output::emit;
use crate::state::StateDir;

pub fn run(args: &UsersArgs, state: &StateDir, out: &mut dyn Write) -> Result<()> {
    let cluster = crate::cluster::known(state, &args.name, "")?;
    let name = args.name.as_str();
    let kubeconfig = args.kubeconfig.as_deref();
    match &args.action {
        UsersAction::List => {
            let l = users::list(&cluster, name, kubeconfig)?;
            emit(out, args.output, &l, || users::render_list(&l))
        }
        UsersAction::Add(a) => {
            let c = users::add(
                &cluster,
                name,
                kubeconfig,
                &a.user,
                a.admin,
                a.password_file.as_deref(),
            )?;
            emit(out, args.output, &c, || users::render_change(&c))
        }
        UsersAction::Remove(r) => {
            let c = users::remove(&cluster, name, kubeconfig, &r.user)?;
            emit(out, args.output, &c, || users::render_change(&c))
        }
    }
}
