//! The install driver: targets reached in order, each idempotent, each recorded in
//! the cluster's state before (intent) and after (done) its side effects, so a run
//! stopped anywhere — even by `kill -9` — converges when started again.
//!
//! ```text
//! release → install-config → manifests → ignition → infra → bootstrap-complete
//!   → bootstrap-removal → workers → csr-approval → install-complete
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use super::state::{self, Locked};
use super::target::{order, Target};
use crate::plan::{Plan, Start};
use crate::spec::{ClusterSpec, Method, Role};
use crate::state::StateDir;

/// The targets of `method`, in order (see [`super::target`]).
pub fn targets(method: Method) -> Result<&'static [Target]> {
    Ok(order(method)?)
}

/// Everything a target needs.
pub struct Ctx<'a> {
    pub spec: &'a ClusterSpec,
    pub plan: &'a Plan,
    pub state: &'a StateDir,
    pub dir: PathBuf,
    pub assets: PathBuf,
    pub log: PathBuf,
}

impl<'a> Ctx<'a> {
    pub fn new(spec: &'a ClusterSpec, plan: &'a Plan, state: &'a StateDir) -> Self {
        let dir = state.cluster(&spec.cluster);
        Ctx {
            assets: dir.join("assets"),
            log: dir.join("openshift-install.log"),
            dir,
            spec,
            plan,
            state,
        }
    }
}

/// Find the `openshift-install` binary: the cluster file's, the one extracted for
/// this cluster, else the one on `PATH`.
pub fn installer(ctx: &Ctx, locked: &Locked) -> Result<PathBuf> {
    if let Some(p) = &ctx.spec.openshift_install {
        return Ok(p.clone());
    }
    if let Some(p) = &locked.facts().openshift_install {
        return Ok(p.clone());
    }
    let local = ctx.dir.join("bin/openshift-install");
    if local.is_file() {
        return Ok(local);
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&paths) {
            let p = d.join("openshift-install");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    bail!("no openshift-install: set `openshift_install:` in the cluster file or put it on PATH")
}

/// Run `openshift-install` with its output appended to the cluster's log and its
/// progress shown on one line.
pub fn run_installer(ctx: &Ctx, locked: &Locked, args: &[&str]) -> Result<()> {
    let bin = installer(ctx, locked)?;
    std::fs::create_dir_all(&ctx.assets)?;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&ctx.log)
        .with_context(|| format!("opening {}", ctx.log.display()))?;
    writeln!(log, "### {} {}", bin.display(), args.join(" "))?;
    // One killed with an earlier shiftlab (kill -9 leaves no chance to stop it)
    // must not race this one over the asset directory.
    let record = ctx.dir.join("openshift-install.pid");
    if let Some(pid) = super::process::stop_leftover(&record, std::time::Duration::from_secs(30))? {
        eprintln!("    stopped openshift-install (pid {pid}) left running by an earlier shiftlab");
    }
    let mut child = super::process::spawn_tied(
        Command::new(&bin)
            .args(args)
            .arg("--dir")
            .arg(&ctx.assets)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .with_context(|| format!("running {}", bin.display()))?;
    super::process::record(&record, &child)?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar.set_message(format!("openshift-install {}", args.join(" ")));
    // openshift-install logs on stderr; merge both into the log and the display.
    let stderr = child.stderr.take();
    let err_log = log.try_clone()?;
    let err_bar = bar.clone();
    let err_thread = std::thread::spawn(move || {
        let mut err_log = err_log;
        if let Some(e) = stderr {
            for line in BufReader::new(e).lines().map_while(Result::ok) {
                let _ = writeln!(err_log, "{line}");
                err_bar.set_message(short(&line));
            }
        }
    });
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = writeln!(log, "{line}");
            bar.set_message(short(&line));
        }
    }
    let _ = err_thread.join();
    let status = child.wait()?;
    let _ = std::fs::remove_file(&record);
    bar.finish_and_clear();
    if !status.success() {
        bail!(
            "openshift-install {} failed ({status}); its log is {}",
            args.join(" "),
            ctx.log.display()
        );
    }
    Ok(())
}

fn short(line: &str) -> String {
    // `level=info msg="…"` → the message.
    let msg = line
        .split_once("msg=\"")
        .map(|(_, m)| m.trim_end_matches('"'))
        .unwrap_or(line);
    msg.chars().take(100).collect()
}

/// Reach `goal`, running every target before it that is not done yet.
pub fn reach(ctx: &Ctx, goal: Target) -> Result<()> {
    let order = targets(ctx.spec.method)?;
    let Some(pos) = order.iter().position(|t| *t == goal) else {
        bail!(
            "{goal} is not a target of method {}; its targets are: {}",
            ctx.spec.method,
            order
                .iter()
                .map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let mut locked = state::lock(&ctx.dir, &ctx.spec.cluster)?;
    locked.check_plan(ctx.plan)?;
    for target in &order[..=pos] {
        if locked.is_done(*target) {
            continue;
        }
        eprintln!("==> {target}");
        locked.start(ctx.spec.method, *target, None)?;
        let note =
            run_target(ctx, &mut locked, *target).with_context(|| format!("target {target}"))?;
        if let Some(n) = &note {
            eprintln!("    {n}");
        }
        locked.done(*target, note)?;
    }
    Ok(())
}

fn run_target(ctx: &Ctx, locked: &mut Locked, target: Target) -> Result<Option<String>> {
    match target {
        Target::Release => release(ctx, locked),
        Target::InstallConfig => install_config(ctx),
        Target::Manifests => manifests(ctx, locked),
        Target::Ignition => ignition(ctx, locked),
        Target::Infra => infra(ctx, locked),
        Target::BootstrapComplete => {
            run_installer(
                ctx,
                locked,
                &["wait-for", "bootstrap-complete", "--log-level", "info"],
            )?;
            Ok(Some("the control plane runs on its own".into()))
        }
        Target::BootstrapRemoval => bootstrap_removal(ctx),
        Target::Workers => workers(ctx),
        Target::CsrApproval => csr_approval(ctx),
        Target::InstallComplete => install_complete(ctx, locked),
    }
}

/// Resolve the release to concrete, verified, cached artifacts: the installer
/// (unless the cluster file names one) and the CoreOS image (unless it gives one).
fn release(ctx: &Ctx, locked: &mut Locked) -> Result<Option<String>> {
    use crate::release::{self, Cache, CoreosKind, Progress, Source};
    let spec = ctx.spec;
    if spec.rehearsal && spec.mirror.is_none() && spec.openshift_install.is_none() {
        return Ok(Some(
            "rehearsal without a release: nothing to download".into(),
        ));
    }
    let cache = Cache::from_env()?;
    let progress = Progress::stderr();
    let mut notes = Vec::new();
    let installer = match &spec.openshift_install {
        Some(p) => {
            notes.push(format!("installer {}", p.display()));
            p.clone()
        }
        None => {
            let source = spec
                .mirror
                .as_deref()
                .map(Source::parse)
                .unwrap_or_else(|| Source::default_for(spec.distribution));
            let rel = release::resolve_verified(
                spec.distribution,
                &spec.version,
                &source,
                &cache,
                &progress,
                spec.release_key.as_deref(),
            )?;
            let tools = rel.tools(&cache)?;
            locked.update_facts(|f| {
                f.release_version = Some(rel.version.clone());
                f.release_image = Some(rel.release_image.clone());
                f.openshift_install = Some(tools.openshift_install.clone());
                f.oc = Some(tools.oc.clone());
            })?;
            notes.push(format!("release {} ({})", rel.version, rel.release_image));
            tools.openshift_install
        }
    };
    if spec.image.is_none() {
        let image = release::coreos_image(&installer, CoreosKind::Qemu, &cache, &progress)?;
        locked.update_facts(|f| f.coreos_image = Some(image.clone()))?;
        notes.push(format!("CoreOS image {}", image.display()));
    }
    for n in progress.notes() {
        eprintln!("    {n}");
    }
    Ok(Some(notes.join(", ")))
}

fn install_config(ctx: &Ctx) -> Result<Option<String>> {
    // Written into the asset directory, where openshift-install consumes it; the
    // backup beside it in the cluster's directory keeps what was asked for.
    let written = super::install_config::write(ctx.spec, ctx.plan, &ctx.assets, ctx.state)?;
    for p in &written {
        if p.file_name()
            .is_some_and(|n| n.to_string_lossy().contains("backup"))
        {
            let dest = ctx.dir.join(p.file_name().unwrap_or_default());
            std::fs::rename(p, &dest)
                .with_context(|| format!("moving the backup to {}", dest.display()))?;
        }
    }
    Ok(Some(format!(
        "{}",
        ctx.assets.join("install-config.yaml").display()
    )))
}

/// Make sure the installer has its input again after an interrupted run consumed it.
fn restore_install_config(ctx: &Ctx) -> Result<()> {
    let ic = ctx.assets.join("install-config.yaml");
    let installer_state = ctx.assets.join(".openshift_install_state.json");
    if !ic.exists() && !installer_state.exists() {
        let backup = ctx.dir.join("install-config.backup.yaml");
        let text =
            std::fs::read(&backup).with_context(|| format!("reading {}", backup.display()))?;
        crate::files::write_private(&ic, &text)?;
    }
    Ok(())
}

/// The manifests the lab adds to what the installer generates.
pub fn lab_manifests(spec: &ClusterSpec) -> Vec<(&'static str, String)> {
    let mut out = vec![(
        "openshift/99-shiftlab-image-registry.yaml",
        // platform none has no storage for the registry: emptyDir, fine for a lab.
        "apiVersion: imageregistry.operator.openshift.io/v1\nkind: Config\nmetadata:\n  name: cluster\nspec:\n  managementState: Managed\n  storage:\n    emptyDir: {}\n".to_string(),
    )];
    if spec.workers == 0 {
        out.push((
            "manifests/cluster-scheduler-02-config.yml",
            "apiVersion: config.openshift.io/v1\nkind: Scheduler\nmetadata:\n  creationTimestamp: null\n  name: cluster\nspec:\n  mastersSchedulable: true\n  policy:\n    name: \"\"\nstatus: {}\n".to_string(),
        ));
    }
    out
}

fn manifests(ctx: &Ctx, locked: &Locked) -> Result<Option<String>> {
    restore_install_config(ctx)?;
    run_installer(ctx, locked, &["create", "manifests"])?;
    // UPI: the nodes are ours, not Machines: drop the Machine API's objects.
    let openshift = ctx.assets.join("openshift");
    if let Ok(rd) = std::fs::read_dir(&openshift) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("99_openshift-cluster-api_master-machines-")
                || name.starts_with("99_openshift-cluster-api_worker-machineset-")
                || name.starts_with("99_openshift-machine-api_master-control-plane-machine-set")
            {
                std::fs::remove_file(e.path())?;
            }
        }
    }
    let mut added = Vec::new();
    for (rel, text) in lab_manifests(ctx.spec) {
        crate::files::write_atomic(&ctx.assets.join(rel), text.as_bytes())?;
        added.push(rel.to_string());
    }
    if let Some(dir) = &ctx.spec.manifests {
        for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let e = e?;
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json") {
                let text = std::fs::read(e.path())?;
                crate::files::write_atomic(&openshift.join(&name), &text)?;
                added.push(format!("openshift/{name}"));
            }
        }
    }
    Ok(Some(format!("added {}", added.join(", "))))
}

fn ignition(ctx: &Ctx, locked: &Locked) -> Result<Option<String>> {
    if !ctx.assets.join("bootstrap.ign").exists() {
        run_installer(ctx, locked, &["create", "ignition-configs"])?;
    }
    for f in [
        "bootstrap.ign",
        "master.ign",
        "worker.ign",
        "auth/kubeconfig",
    ] {
        if !ctx.assets.join(f).exists() {
            bail!("openshift-install did not write {f}");
        }
    }
    Ok(Some("bootstrap.ign, master.ign, worker.ign".into()))
}

fn infra(ctx: &Ctx, locked: &Locked) -> Result<Option<String>> {
    let host = crate::libvirt::Host::open(&ctx.plan.libvirt.uri)?;
    let image = locked.facts().coreos_image.clone();
    let report = super::infra::apply_infra(
        ctx.spec,
        ctx.plan,
        ctx.state,
        &host,
        false,
        image.as_deref(),
    )?;
    Ok(Some(format!(
        "{} created, {} started",
        report.created.len(),
        report.started.len()
    )))
}

fn bootstrap_removal(ctx: &Ctx) -> Result<Option<String>> {
    // Out of the load balancer first, so no request goes to a node that is leaving.
    if ctx.plan.load_balancer.is_some() {
        crate::serve::remove_bootstrap(ctx.state, &ctx.plan.cluster)
            .context("removing the bootstrap from the load balancer")?;
    }
    let host = crate::libvirt::Host::open(&ctx.plan.libvirt.uri)?;
    let mut removed = Vec::new();
    // Whatever was published for the bootstrap (its config holds the admin
    // kubeconfig, CA keys and pull secret) goes with it.
    let files = crate::serve::ClusterFiles::new(ctx.state, &ctx.plan.cluster);
    for node in ctx.plan.nodes_with_role(Role::Bootstrap) {
        for f in files.unpublish_node(&node.name)? {
            removed.push(format!("published {}", f.display()));
        }
    }
    for node in ctx.plan.nodes_with_role(Role::Bootstrap) {
        removed.extend(crate::libvirt::destroy::remove_node(
            &host,
            &ctx.plan.cluster,
            node,
            &ctx.plan.libvirt.pool,
            &ctx.state.root,
        )?);
    }
    Ok(Some(if removed.is_empty() {
        "the bootstrap was already gone".into()
    } else {
        format!("removed {}", removed.join(", "))
    }))
}

fn workers(ctx: &Ctx) -> Result<Option<String>> {
    let host = crate::libvirt::Host::open(&ctx.plan.libvirt.uri)?;
    let later: Vec<Role> = ctx
        .plan
        .nodes
        .iter()
        .filter(|n| n.start == Start::AfterBootstrap)
        .map(|n| n.role)
        .collect();
    let started = crate::libvirt::apply::start_nodes(&host, ctx.plan, &later)?;
    Ok(Some(if started.is_empty() {
        "every worker already runs".into()
    } else {
        format!("started {}", started.join(", "))
    }))
}

/// Approve the new nodes' client and serving CSRs (nobody else does on
/// `platform: none`), until every node that started after bootstrap has both.
fn csr_approval(ctx: &Ctx) -> Result<Option<String>> {
    use crate::kube::approve::{self, WatchOptions};
    use crate::kube::csr::NodeIdentity;
    if ctx.spec.rehearsal {
        return Ok(Some(
            "rehearsal: stand-in nodes raise no CSRs (there is no Kubernetes API)".into(),
        ));
    }
    let kubeconfig = ctx.assets.join("auth/kubeconfig");
    let nodes = NodeIdentity::from_plan(ctx.plan);
    let opts = WatchOptions {
        nodes: csr_awaited(ctx.plan),
        deadline: Some(CSR_DEADLINE),
        ..WatchOptions::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let done = rt.block_on(async {
        let client = approve::client_from_kubeconfig(&kubeconfig).await?;
        approve::watch(&client, &nodes, &opts, |_| {}).await
    })?;
    if done.timed_out && !done.missing.is_empty() {
        bail!("{}", csr_timeout_message(&done.missing, &ctx.log));
    }
    if done.interrupted || !done.missing.is_empty() {
        bail!(
            "stopped before every worker's certificates were approved ({} missing); run again to continue",
            done.missing.len()
        );
    }
    Ok(Some(format!(
        "{} CSRs approved",
        done.report.approved.len()
    )))
}

/// How long the csr-approval target waits for every awaited node's two CSRs. A
/// worker started after bootstrap-complete installs CoreOS from its Ignition, reboots
/// and joins in minutes on KVM; under TCG or on slow disks it can take much longer.
pub const CSR_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// The nodes whose certificates the target waits for, named explicitly: the nodes
/// started after bootstrap (workers), or in a compact cluster (no workers) the
/// control planes, which then run the workloads.
pub fn csr_awaited(plan: &Plan) -> Vec<String> {
    let later: Vec<String> = plan
        .nodes
        .iter()
        .filter(|n| n.start == Start::AfterBootstrap)
        .map(|n| n.name.clone())
        .collect();
    if !later.is_empty() {
        return later;
    }
    plan.nodes_with_role(Role::Ctlplane)
        .map(|n| n.name.clone())
        .collect()
}

/// What to tell the user when the deadline passed with certificates missing.
pub fn csr_timeout_message(
    missing: &[crate::kube::approve::Missing],
    log: &std::path::Path,
) -> String {
    let list: Vec<String> = missing
        .iter()
        .map(|m| format!("{} ({})", m.node, m.kind))
        .collect();
    format!(
        "no approvable CSR came within {} min for: {}\n\
         likely causes: the node did not boot or install (see its console log: shiftlab status), \
         it named itself wrongly (its DHCP hostname or PTR record: a node called localhost raises \
         CSRs no rule approves), or its kubelet cannot reach api-int:6443 (DNS, load balancer); \
         refused CSRs and why are in `shiftlab approve-csrs <cluster>`; the installer's log is {}\n\
         run the same command again to go on waiting",
        CSR_DEADLINE.as_secs() / 60,
        list.join(", "),
        log.display()
    )
}

fn install_complete(ctx: &Ctx, locked: &mut Locked) -> Result<Option<String>> {
    run_installer(
        ctx,
        locked,
        &["wait-for", "install-complete", "--log-level", "info"],
    )?;
    let console = format!(
        "https://console-openshift-console.apps.{}",
        ctx.plan.cluster_domain
    );
    locked.update_facts(|f| f.console = Some(console.clone()))?;
    let kubeconfig = ctx.assets.join("auth/kubeconfig");
    let password = ctx.assets.join("auth/kubeadmin-password");
    println!("The cluster is installed.");
    println!("  console:  {console}");
    println!("  user:     kubeadmin, password in {}", password.display());
    println!("  export KUBECONFIG={}", kubeconfig.display());
    Ok(Some(console))
}
