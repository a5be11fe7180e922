//! Reaching a cluster's nodes and API from the host: which node a name on the
//! command line means, the `ssh` command line for it, and the shell line that
//! points `oc`/`kubectl` at the cluster. Pure functions over the plan; the
//! commands run them (and `ssh`).

use std::ffi::OsString;
use std::path::Path;

use anyhow::{bail, Result};

use crate::plan::{Node, Plan};

/// The user RHCOS and FCOS let in with the install's SSH keys (openshift/installer
/// docs/user/troubleshooting.md: "ssh core@<node>").
pub const NODE_USER: &str = "core";

/// The plan's node called `given`: its full name (`lab1-ctlplane-0`) or the part
/// after `<cluster>-` (`ctlplane-0`). Anything else is refused with the names there are.
pub fn find_node<'a>(plan: &'a Plan, given: &str) -> Result<&'a Node> {
    let prefixed = format!("{}-{given}", plan.cluster);
    if let Some(n) = plan
        .nodes
        .iter()
        .find(|n| n.name == given || n.name == prefixed)
    {
        return Ok(n);
    }
    let names: Vec<&str> = plan.nodes.iter().map(|n| n.name.as_str()).collect();
    bail!(
        "cluster {} has no node {given:?}; its nodes: {}",
        plan.cluster,
        names.join(", ")
    )
}

/// The `ssh` argument list (without the program) to log in to `node` as
/// [`NODE_USER`]. Host keys go to the cluster's own `known_hosts`: nodes are
/// reinstalled at the same address with new keys, and the user's file should
/// not collect a lab's churn; a first key is accepted, a changed one refused.
pub fn ssh_args(
    node: &Node,
    known_hosts: &Path,
    identity: Option<&Path>,
    command: &[String],
) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut opt = |s: &str| {
        a.push("-o".into());
        a.push(s.into());
    };
    opt("StrictHostKeyChecking=accept-new");
    opt("LogLevel=ERROR");
    let mut kh = OsString::from("UserKnownHostsFile=");
    kh.push(known_hosts);
    a.push("-o".into());
    a.push(kh);
    if let Some(i) = identity {
        a.push("-i".into());
        a.push(i.into());
        a.push("-o".into());
        a.push("IdentitiesOnly=yes".into());
    }
    a.push("-l".into());
    a.push(NODE_USER.into());
    a.push(node.ip.to_string().into());
    if !command.is_empty() {
        // ssh joins the words with spaces for the remote shell; `--` ends its options.
        a.insert(a.len() - 1, "--".into());
        a.extend(command.iter().map(OsString::from));
    }
    a
}

/// The `ssh` command line of `argv` ([`ssh_args`]), each word quoted for a
/// POSIX shell: what `ssh --print` shows.
pub fn ssh_line(argv: &[OsString]) -> String {
    std::iter::once("ssh".to_string())
        .chain(argv.iter().map(|a| shell_quote(&a.to_string_lossy())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `export KUBECONFIG=<path>`, quoted for a POSIX shell.
pub fn env_line(kubeconfig: &Path) -> String {
    format!(
        "export KUBECONFIG={}\n",
        shell_quote(&kubeconfig.to_string_lossy())
    )
}

/// `oc login` as a lab user, commented out so that `eval "$(shiftlab env …)"`
/// runs nothing: the password is read from its file, never printed.
pub fn login_line(user: &str, password_file: &Path, server: &str) -> String {
    format!(
        "# oc login -u {} -p \"$(cat {})\" {}\n",
        shell_quote(user),
        shell_quote(&password_file.to_string_lossy()),
        shell_quote(server)
    )
}

/// Single-quote `s` for a POSIX shell unless it is made only of safe characters.
pub fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        let text = "cluster: lab1\ndomain: example.com\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: 1\n";
        crate::plan::from_yaml(text)
    }

    #[test]
    fn the_login_line_points_at_the_password_file_and_is_a_comment() {
        let l = login_line(
            "alice",
            Path::new("/s/lab1/assets/auth/alice-password"),
            "https://api.lab1.example.com:6443",
        );
        assert_eq!(
            l,
            "# oc login -u alice -p \"$(cat /s/lab1/assets/auth/alice-password)\" https://api.lab1.example.com:6443\n"
        );
        let l = login_line(
            "bob",
            Path::new("/my dir/pw"),
            "https://api.lab1.example.com:6443",
        );
        assert!(l.contains("$(cat '/my dir/pw')"), "{l}");
    }

    #[test]
    fn a_node_is_named_in_full_or_after_the_cluster() {
        let p = plan();
        assert_eq!(
            find_node(&p, "lab1-ctlplane-1").unwrap().name,
            "lab1-ctlplane-1"
        );
        assert_eq!(find_node(&p, "worker-0").unwrap().name, "lab1-worker-0");
        let e = find_node(&p, "worker-7").unwrap_err().to_string();
        assert!(e.contains("no node \"worker-7\""), "{e}");
        assert!(e.contains("lab1-ctlplane-0, "), "{e}");
        // Not a path, not a prefix match.
        assert!(find_node(&p, "../lab1-worker-0").is_err());
        assert!(find_node(&p, "worker").is_err());
    }

    #[test]
    fn ssh_logs_in_as_core_with_the_cluster_known_hosts() {
        let p = plan();
        let n = find_node(&p, "worker-0").unwrap();
        let a = ssh_args(n, Path::new("/s/kh"), None, &[]);
        let s: Vec<String> = a.iter().map(|x| x.to_string_lossy().into()).collect();
        assert!(s
            .windows(2)
            .any(|w| w == ["-o", "UserKnownHostsFile=/s/kh"]));
        assert!(s
            .windows(2)
            .any(|w| w == ["-o", "StrictHostKeyChecking=accept-new"]));
        assert_eq!(s[s.len() - 2..], ["core".to_string(), n.ip.to_string()]);
        assert!(!s.contains(&"-i".to_string()));

        let a = ssh_args(
            n,
            Path::new("/s/kh"),
            Some(Path::new("/k/id")),
            &["uptime".into(), "-p".into()],
        );
        let s: Vec<String> = a.iter().map(|x| x.to_string_lossy().into()).collect();
        assert!(s.windows(2).any(|w| w == ["-i", "/k/id"]));
        let ip = n.ip.to_string();
        assert_eq!(
            s[s.len() - 4..],
            ["--".to_string(), ip, "uptime".into(), "-p".into()]
        );
    }

    #[test]
    fn the_printed_ssh_line_quotes_each_word() {
        let argv: Vec<OsString> = ["-l", "core", "--", "cat it's"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(ssh_line(&argv), r"ssh -l core -- 'cat it'\''s'");
        assert_eq!(ssh_line(&[]), "ssh");
    }

    #[test]
    fn the_env_line_is_quoted_for_the_shell() {
        assert_eq!(
            env_line(Path::new(
                "/var/lib/shiftlab/clusters/lab1/assets/auth/kubeconfig"
            )),
            "export KUBECONFIG=/var/lib/shiftlab/clusters/lab1/assets/auth/kubeconfig\n"
        );
        assert_eq!(
            env_line(Path::new("/home/a b/it's")),
            "export KUBECONFIG='/home/a b/it'\\''s'\n"
        );
    }
}
