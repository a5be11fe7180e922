use clap::Args;

/// `-P KEY=VALUE`, on every command that reads a cluster file with `-f`
/// (docs/cluster-file.md, "Overrides on the command line").
#[derive(Debug, Args, Default)]
pub struct ParamArgs {
    /// Override a key of the cluster file, as kcli's -P: KEY a dotted path (workers,
    /// ctlplane.memory, a kcli key such as master_memory), VALUE read as YAML (3, true, "3",
    /// [50, 100]); applied in order before validation; repeatable
    #[arg(
        short = 'P',
        long = "param",
        value_name = "KEY=VALUE",
        requires = "file"
    )]
    pub params: Vec<String>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command that takes `-f` takes `-P` too, and only those.
    #[test]
    fn every_command_with_a_file_takes_params() {
        fn walk(cmd: &clap::Command, path: String, found: &mut Vec<String>) {
            let has = |id: &str| cmd.get_arguments().any(|a| a.get_id() == id);
            assert_eq!(has("file"), has("params"), "{path}: -f and -P go together");
            if has("file") {
                found.push(path.clone());
            }
            for sub in cmd.get_subcommands() {
                walk(sub, format!("{path} {}", sub.get_name()), found);
            }
        }
        let mut found = Vec::new();
        walk(&crate::cli::Cli::command(), "shiftlab".into(), &mut found);
        for cmd in [
            "plan",
            "render",
            "create cluster",
            "create infra",
            "scale",
            "doctor",
        ] {
            assert!(
                found.contains(&format!("shiftlab {cmd}")),
                "{cmd} has no -f: {found:?}"
            );
        }
    }
}
