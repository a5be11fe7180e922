//! `shiftlab doctor`'s decisions over recorded host facts
//! (`tests/fixtures/doctor/*.json`, in the form `doctor -o json` prints them):
//! each check's verdict and severity, and the exit code, without the host they
//! describe. Goldens in `tests/golden/doctor/` (UPDATE_GOLDEN=1 rewrites them).

mod common;

use shiftlab::doctor::{self, HostFacts, Report, Severity};

fn facts(name: &str) -> HostFacts {
    let p = common::repo().join(format!("tests/fixtures/doctor/{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A full-size OKD UPI lab, 3 control planes and 2 workers, default sizes (and
/// `extra` lines).
fn plan(extra: &str) -> shiftlab::plan::Plan {
    let workers = if extra.contains("workers:") {
        ""
    } else {
        "workers: 2\n"
    };
    let text = format!(
        "cluster: lab1\ndomain: example.com\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n{workers}{extra}"
    );
    common::plan_from_yaml(&text, "lab1.yaml", None)
}

fn severity(checks: &[doctor::Check], id: &str) -> Severity {
    checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id}"))
        .severity
}

#[test]
fn a_good_host_passes_every_check() {
    let p = plan("");
    let checks = doctor::checks(&facts("good-host"), Some(&p));
    let bad: Vec<_> = checks
        .iter()
        .filter(|c| c.severity >= Severity::Warn)
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    assert_eq!(doctor::exit_code(&checks), 0);
    let table = Report::new(Some("lab1".into()), checks).table(false);
    common::golden(
        &common::repo().join("tests/golden/doctor/good-host.txt"),
        &table,
    );
}

#[test]
fn a_troubled_host_gets_a_verdict_and_a_fix_for_each_problem() {
    let p = plan("");
    let checks = doctor::checks(&facts("troubled-host"), Some(&p));
    for (id, want) in [
        ("kvm", Severity::Fail),
        ("nested-virt", Severity::Info),
        ("fw-cfg", Severity::Ok),
        ("fw-cfg-labels", Severity::Warn),
        ("firewall", Severity::Warn),
        ("network-manager", Severity::Warn),
        ("etc-hosts", Severity::Warn),
        ("serve", Severity::Warn),
        ("ports", Severity::Warn),
        ("host-dns", Severity::Warn),
        // 80 GiB of nodes on a 31 GiB host: no overcommit makes that install.
        ("memory", Severity::Fail),
        ("cpu", Severity::Info),
        ("disk", Severity::Ok),
        ("etcd-disk", Severity::Warn),
        // Recorded on a container with no time service: the kernel's ceiling.
        ("clock", Severity::Warn),
    ] {
        assert_eq!(severity(&checks, id), want, "{id}");
    }
    for c in checks.iter().filter(|c| c.severity >= Severity::Warn) {
        assert!(c.fix.is_some(), "{} has no fix", c.id);
    }
    assert_eq!(doctor::exit_code(&checks), 4);
    // KVM missing does not stop create infra here (libvirt::apply::choose_accel
    // decides, knowing domain_type): a note. The memory does.
    let blocking = doctor::checks::blocking(&checks);
    assert!(
        blocking.len() == 1
            && blocking[0].starts_with(
                "memory: the nodes want 80.0 GiB together and the host has 31.2 GiB in all"
            ),
        "{blocking:?}"
    );
    let table = Report::new(Some("lab1".into()), checks).table(false);
    common::golden(
        &common::repo().join("tests/golden/doctor/troubled-host.txt"),
        &table,
    );
}

/// `storage: nfs` binds the gateway's 2049 (serve's NFS server): doctor names
/// it among the ports, and another program already on it is said.
#[test]
fn the_nfs_port_is_among_the_ports_a_storage_lab_binds() {
    let p = plan("storage: nfs\n");
    let mut f = facts("good-host");
    let ports = |f: &HostFacts| {
        doctor::checks(f, Some(&p))
            .into_iter()
            .find(|c| c.id == "ports")
            .unwrap()
    };
    let free = ports(&f);
    assert_eq!(free.severity, Severity::Ok);
    assert!(
        free.verdict.contains("192.168.126.1:2049"),
        "{}",
        free.verdict
    );
    f.serve_running = false;
    f.listening.push("0.0.0.0:2049".parse().unwrap());
    let taken = ports(&f);
    assert_eq!(taken.severity, Severity::Warn);
    assert_eq!(
        taken.verdict,
        "another program listens on 192.168.126.1:2049"
    );
}

/// The clock: synchronised is fine; not synchronised warns (never fails), with
/// what to install when no time service runs and what to look at when one does;
/// a recorded host without the clock gets no verdict on it.
#[test]
fn an_unsynchronised_clock_warns_with_what_to_do() {
    let clock = |f: &HostFacts| {
        doctor::checks(f, None)
            .into_iter()
            .find(|c| c.id == "clock")
    };
    let good = clock(&facts("good-host")).unwrap();
    assert_eq!(good.severity, Severity::Ok);
    assert!(
        good.verdict
            .contains("synchronised (maximum error 13 ms, kept by chronyd)"),
        "{}",
        good.verdict
    );
    let bad = clock(&facts("troubled-host")).unwrap();
    assert_eq!(bad.severity, Severity::Warn);
    assert!(
        bad.verdict.contains("no time service runs"),
        "{}",
        bad.verdict
    );
    assert!(
        bad.fix
            .as_deref()
            .unwrap()
            .contains("apt-get install chrony"),
        "{bad:?}"
    );
    let mut f = facts("troubled-host");
    f.clock.as_mut().unwrap().services = vec!["systemd-timesyncd".into()];
    let stuck = clock(&f).unwrap();
    assert_eq!(stuck.severity, Severity::Warn);
    assert!(
        stuck.verdict.contains("although systemd-timesyncd runs"),
        "{}",
        stuck.verdict
    );
    assert!(
        stuck
            .fix
            .as_deref()
            .unwrap()
            .contains("timedatectl timesync-status"),
        "{stuck:?}"
    );
    f.clock = None;
    assert!(clock(&f).is_none());
}

/// `host_ntp: true` needs the host's chronyd running: said with what to install.
#[test]
fn host_ntp_needs_chronyd_on_the_host() {
    let p = plan("host_ntp: true\n");
    let find = |f: &HostFacts| {
        doctor::checks(f, Some(&p))
            .into_iter()
            .find(|c| c.id == "host-ntp")
    };
    let good = find(&facts("good-host")).unwrap();
    assert_eq!(good.severity, Severity::Ok);
    assert!(
        good.verdict.contains("192.168.126.0/24 at 192.168.126.1"),
        "{}",
        good.verdict
    );
    let bad = find(&facts("troubled-host")).unwrap();
    assert_eq!(bad.severity, Severity::Warn);
    assert!(
        bad.fix
            .as_deref()
            .unwrap()
            .contains("apt-get install chrony"),
        "{bad:?}"
    );
    assert!(doctor::checks(&facts("troubled-host"), Some(&plan("")))
        .iter()
        .all(|c| c.id != "host-ntp"));
}

#[test]
fn capacity_is_weighed_against_the_plan() {
    let mut f = facts("good-host");
    // A node bigger than the host cannot boot.
    f.memory_total_mib = 12_000;
    f.memory_available_mib = 11_000;
    let c = doctor::checks(&f, Some(&plan("")));
    assert_eq!(severity(&c, "memory"), Severity::Fail);
    let b = doctor::checks::blocking(&c);
    assert!(
        b.len() == 1 && b[0].starts_with("memory: a node wants 16.0 GiB"),
        "{b:?}"
    );
    // Too little free space for the thin disks: refused, as preflight does.
    let mut f = facts("good-host");
    f.pool_free_bytes = Some(10 << 30);
    let c = doctor::checks(&f, Some(&plan("")));
    assert_eq!(severity(&c, "disk"), Severity::Fail);
    // Single node: the documented 8 vCPU / 16 GiB (its 120 GB disk is already
    // a cluster-file error, src/spec/resolve: documented_minimum).
    let sno = plan("method: sno\nworkers: 0\nnumcpus: 4\ndisk_size: 120\n");
    let c = doctor::checks(&facts("good-host"), Some(&sno));
    assert_eq!(severity(&c, "cpu"), Severity::Warn);
    assert_ne!(severity(&c, "disk"), Severity::Fail);
    // A rehearsal without KVM runs, slowly; a real cluster does not.
    let mut f = facts("good-host");
    f.kvm_usable = false;
    let c = doctor::checks(&f, Some(&plan("rehearsal: true\n")));
    assert_eq!(severity(&c, "kvm"), Severity::Warn);
    assert_eq!(severity(&c, "etcd-disk"), Severity::Ok);
    assert_eq!(doctor::exit_code(&c), 3);
}

#[test]
fn nodes_below_the_documented_minimums_are_named_for_a_real_cluster_only() {
    // Bootstrap and control planes of 12 GiB and 3 vCPUs: below 16 GiB and 4
    // (workers are not: 8 GiB and 2), on a host with room for all of them.
    let small = "memory: 12288\nnumcpus: 3\n";
    let (memory, cpu) = memory_and_cpu(&facts("good-host"), small);
    assert_eq!(memory.severity, Severity::Warn);
    assert_eq!(
        memory.verdict,
        "the nodes want 72.0 GiB together; the host has 125.0 GiB (117.2 GiB available); \
         below the documented minimums: lab1-bootstrap 12.0 GiB < 16.0 GiB, lab1-ctlplane-0 12.0 GiB < 16.0 GiB, \
         lab1-ctlplane-1 12.0 GiB < 16.0 GiB, lab1-ctlplane-2 12.0 GiB < 16.0 GiB"
    );
    assert_eq!(
        memory.fix.as_deref(),
        Some("labs run smaller than the minimums at their own risk; raise memory: if the install stalls")
    );
    assert_eq!(cpu.severity, Severity::Warn);
    assert_eq!(
        cpu.verdict,
        "the nodes want 18 vCPUs; the host has 32 CPU threads; below the documented minimums: \
         lab1-bootstrap 3 < 4, lab1-ctlplane-0 3 < 4, lab1-ctlplane-1 3 < 4, lab1-ctlplane-2 3 < 4"
    );
    assert_eq!(
        cpu.fix.as_deref(),
        Some("raise numcpus: if the install stalls")
    );
    // An overcommitted host: its fix comes first, the minimums are still named.
    let mut f = facts("good-host");
    f.memory_available_mib = 40_000;
    f.cpus = 10;
    let (memory, cpu) = memory_and_cpu(&f, small);
    for (check, parts, fix) in [
        (
            memory,
            [
                "; overcommitted: ",
                "; below the documented minimums: lab1-bootstrap 12.0 GiB",
            ],
            "fewer or smaller nodes, or free memory on the host",
        ),
        (
            cpu,
            [
                "; overcommitted 1.8:1; ",
                "; below the documented minimums: lab1-bootstrap 3 < 4",
            ],
            "raise numcpus: if the install stalls",
        ),
    ] {
        assert_eq!(check.severity, Severity::Warn, "{check:?}");
        for part in parts {
            assert!(check.verdict.contains(part), "{part}: {}", check.verdict);
        }
        assert_eq!(check.fix.as_deref(), Some(fix));
    }
    // A rehearsal's nodes are small on purpose.
    let (memory, cpu) = memory_and_cpu(&facts("good-host"), &format!("rehearsal: true\n{small}"));
    for check in [memory, cpu] {
        assert_eq!(check.severity, Severity::Ok, "{check:?}");
        assert!(!check.verdict.contains("minimums"), "{check:?}");
    }
}

/// The memory and cpu checks of the lab `plan(extra)` on a host with these facts.
fn memory_and_cpu(f: &HostFacts, extra: &str) -> (doctor::Check, doctor::Check) {
    let c = doctor::checks(f, Some(&plan(extra)));
    let get = |id: &str| c.iter().find(|c| c.id == id).unwrap().clone();
    (get("memory"), get("cpu"))
}

#[test]
fn the_ipv6_localhost_lines_that_break_and_those_that_do_not() {
    let p = plan("");
    let hosts = |text: &str| {
        let mut f = facts("good-host");
        f.etc_hosts = text.into();
        severity(&doctor::checks(&f, Some(&p)), "etc-hosts")
    };
    // Debian's and Fedora's defaults.
    assert_eq!(
        hosts("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"),
        Severity::Ok
    );
    assert_eq!(
        hosts("127.0.0.1 localhost localhost.localdomain\n::1 localhost localhost.localdomain localhost6 localhost6.localdomain6\n"),
        Severity::Ok
    );
    assert_eq!(hosts("::1 localhost\n"), Severity::Warn);
    assert_eq!(
        hosts("127.0.0.1 localhost\n::1 localhost myhost\n"),
        Severity::Warn
    );
    assert_eq!(
        hosts("127.0.0.1 localhost api.lab1.example.com\n"),
        Severity::Warn
    );
}

#[test]
fn the_cli_replays_recorded_facts_with_an_exit_code_by_severity() {
    let home = tempfile::tempdir().unwrap();
    let fx = |n: &str| {
        common::repo()
            .join(format!("tests/fixtures/doctor/{n}.json"))
            .display()
            .to_string()
    };
    let out = common::shiftlab(&["doctor", "--facts", &fx("good-host")], home.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = common::shiftlab(
        &["doctor", "--facts", &fx("troubled-host"), "-o", "json"],
        home.path(),
    );
    assert_eq!(out.status.code(), Some(4));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["worst"], "fail");
    assert_eq!(v["checks"][0]["id"], "kvm");
    // The facts printed are the facts read: replaying them gives the same report.
    let again = home.path().join("facts.json");
    std::fs::write(&again, serde_json::to_string(&v["facts"]).unwrap()).unwrap();
    let out2 = common::shiftlab(
        &[
            "doctor",
            "--facts",
            &again.display().to_string(),
            "-o",
            "json",
        ],
        home.path(),
    );
    assert_eq!(out2.stdout, out.stdout);
}

/// The veth-linked bridge of an IPI cluster is shiftlab's like the NAT bridge:
/// NetworkManager managing it is a warning, and the fix names its links.
#[test]
fn network_manager_must_leave_the_veth_linked_bridge_alone() {
    let p = plan("method: ipi\nnetwork:\n  external_bridge: veth\n");
    let v = p.network.veth.clone().unwrap();
    let mut f = facts("good-host");
    f.network_manager = Some(vec![shiftlab::doctor::facts::NmDevice {
        device: v.bridge.clone(),
        state: "connected".into(),
    }]);
    let checks = doctor::checks(&f, Some(&p));
    assert_eq!(severity(&checks, "network-manager"), Severity::Warn);
    let c = checks.iter().find(|c| c.id == "network-manager").unwrap();
    let text = serde_json::to_string(c).unwrap();
    for l in [&v.bridge, &v.bridge_end, &v.nat_end] {
        assert!(text.contains(&format!("interface-name:{l}")), "{text}");
    }
}

#[test]
fn an_ipi_install_counts_the_installers_bootstrap_vm() {
    let ipi = plan("method: ipi\n");
    let nodes_mib: u64 = ipi.nodes.iter().map(|n| n.memory_mib).sum();
    let nodes_cpus: u32 = ipi.nodes.iter().map(|n| n.vcpus).sum();
    let nodes_disk = shiftlab::doctor::preflight::expected_node_use(&ipi);
    // Room for the nodes, not for the 6 GiB / 4 vCPU / 20 GiB bootstrap VM too.
    let mut f = facts("good-host");
    f.memory_available_mib = nodes_mib + 1024;
    f.cpus = nodes_cpus + 2;
    f.pool_free_bytes = Some(nodes_disk + (10 << 30));
    let c = doctor::checks(&f, Some(&ipi));
    let get = |id: &str| c.iter().find(|c| c.id == id).unwrap().clone();
    let (memory, cpu, disk) = (get("memory"), get("cpu"), get("disk"));
    assert_eq!(memory.severity, Severity::Warn, "{memory:?}");
    assert!(
        memory.verdict.starts_with(&format!(
            "the nodes and the installer's bootstrap VM (<infraID>-live-provisioner: 6 GiB, 4 vCPUs, 20 GiB scratch disk) want {:.1} GiB together",
            (nodes_mib + 6144) as f64 / 1024.0
        )) && memory.verdict.contains("overcommitted"),
        "{memory:?}"
    );
    assert!(
        cpu.verdict.contains("bootstrap VM")
            && cpu
                .verdict
                .contains(&format!("want {} vCPUs", nodes_cpus + 4)),
        "{cpu:?}"
    );
    assert_eq!(cpu.severity, Severity::Info, "overcommitted: {cpu:?}");
    assert_eq!(disk.severity, Severity::Fail, "{disk:?}");
    assert!(disk.verdict.contains("live-provisioner"), "{disk:?}");
    // A bootstrap VM bigger than the host cannot boot: refused, naming it. (Nodes
    // this small take --force: a control plane under 8 GiB is refused otherwise.)
    let mut small = facts("good-host");
    small.memory_total_mib = 5 * 1024;
    small.memory_available_mib = 5 * 1024;
    let tiny = shiftlab::plan::derive(
        &shiftlab::spec::from_str_with(
            "cluster: lab1\ndomain: example.com\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\nworkers: 2\nmethod: ipi\nmemory: 4096\n",
            "lab1.yaml",
            &shiftlab::spec::Env::default(),
            shiftlab::spec::Overrides {
                force: true,
                ..Default::default()
            },
        )
        .unwrap()
        .spec,
    );
    let b = doctor::checks::blocking(&doctor::checks(&small, Some(&tiny)));
    assert!(
        b.iter()
            .any(|l| l.starts_with("memory: the installer's bootstrap VM")),
        "{b:?}"
    );
    // A rehearsal's installer is the stand-in: no such VM counted.
    let rehearsal = plan("method: ipi\nrehearsal: true\n");
    let c = doctor::checks(&f, Some(&rehearsal));
    assert!(
        c.iter().all(|c| !c.verdict.contains("bootstrap VM")),
        "{c:?}"
    );
}

/// The x86-64 level of the nodes' CPU (src/release/cpu_level.rs): a KVM host
/// whose CPU stops at x86-64-v2 is told that streams needing x86-64-v3 (SCOS
/// 10, RHEL 10 CoreOS) are refused there, with the missing features; an
/// x86-64-v3 host passes; a `libvirt.cpu_model` is judged instead of the host.
#[test]
fn the_nodes_cpu_level_is_named_with_what_it_lacks() {
    let check = |f: &HostFacts, p: Option<&shiftlab::plan::Plan>| {
        doctor::checks(f, p)
            .into_iter()
            .find(|c| c.id == "cpu-level")
    };
    // A recorded host without its flags: nothing said.
    assert!(check(&facts("good-host"), None).is_none());
    let mut v2 = facts("good-host");
    assert!(v2.kvm_usable);
    // The flags of a Nehalem CPU (recorded from a TCG guest, src/release/cpu_level.rs).
    v2.cpu_flags = "fpu de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 syscall nx lm constant_tsc rep_good nopl xtopology cpuid pni ssse3 cx16 sse4_1 sse4_2 popcnt hypervisor lahf_lm pti"
        .split(' ')
        .map(str::to_string)
        .collect();
    let c = check(&v2, None).unwrap();
    assert_eq!(c.severity, Severity::Warn);
    assert!(
        c.verdict.starts_with(
            "the host's CPU offers x86-64-v2 and lacks avx, avx2, bmi1, bmi2, f16c, fma, abm, movbe, xsave (x86-64-v3)"
        ),
        "{}",
        c.verdict
    );
    assert!(c.fix.unwrap().contains("Haswell"));
    let mut v3 = v2.clone();
    v3.cpu_flags.extend(
        [
            "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave",
        ]
        .map(String::from),
    );
    assert_eq!(check(&v3, None).unwrap().severity, Severity::Ok);
    let p = plan("libvirt:\n  cpu_model: IvyBridge\n");
    let c = check(&v3, Some(&p)).unwrap();
    assert_eq!(c.severity, Severity::Info);
    assert!(
        c.verdict.starts_with(
            "libvirt.cpu_model IvyBridge offers x86-64-v2 (lacks avx2, bmi1, bmi2, fma, abm, movbe)"
        ),
        "{}",
        c.verdict
    );
}

/// The verdict words are coloured on a terminal or with `--color always` (FAIL
/// red, warn yellow, ok green), never with NO_COLOR on a terminal, into a pipe
/// by default, or in a `-o json` document; colour changes no column.
#[test]
fn verdicts_are_coloured_on_a_terminal_or_when_asked_and_never_in_a_document() {
    let home = tempfile::tempdir().unwrap();
    let facts = common::repo().join("tests/fixtures/doctor/troubled-host.json");
    let facts = facts.to_str().unwrap();
    let (fail, ok) = ("\x1b[31mFAIL\x1b[0m", "\x1b[32mok\x1b[0m");
    let run = |extra: &[&str]| {
        let mut args = vec!["doctor", "--facts", facts];
        args.extend_from_slice(extra);
        let out = common::shiftlab(&args, home.path());
        assert_eq!(out.status.code(), Some(4), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let plain = run(&[]);
    assert!(!plain.contains('\x1b'), "a pipe is not coloured: {plain}");
    assert!(plain.lines().any(|l| l.starts_with("FAIL ")), "{plain}");
    let always = run(&["--color", "always"]);
    assert!(always.contains(fail) && always.contains(ok), "{always}");
    // Only the words: without their codes the table is the plain one.
    let stripped = always
        .replace("\x1b[31m", "")
        .replace("\x1b[33m", "")
        .replace("\x1b[32m", "")
        .replace("\x1b[0m", "");
    assert_eq!(stripped, plain);
    for extra in [
        &["--color", "always", "-o", "json"][..],
        &["--color", "never"],
    ] {
        let out = run(extra);
        assert!(!out.contains('\x1b'), "{extra:?}: {out}");
    }
    // A terminal (script(1) gives one): coloured unless NO_COLOR is set.
    let on_tty = |no_color: &str| {
        let cmd = format!(
            "NO_COLOR={no_color} {} doctor --facts {facts}",
            env!("CARGO_BIN_EXE_shiftlab")
        );
        let out = std::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("SHIFTLAB_HOME", home.path().join("state"))
            .output()
            .expect("script(1), util-linux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let tty = on_tty("");
    assert!(tty.contains(fail) && tty.contains(ok), "{tty}");
    let tty = on_tty("1");
    assert!(tty.contains("FAIL") && !tty.contains('\x1b'), "{tty}");
}

/// The cluster's network against libvirt's and the host's (the rule create's
/// preflight, `doctor -f` and `create infra` share): every problem named, the
/// cluster's own network and bridge no problem (a resumed run), host routes
/// only judged for a local libvirt before the network exists.
#[test]
fn the_network_must_be_free_or_the_clusters_own() {
    use shiftlab::doctor::checks::network_problems;
    use shiftlab::doctor::facts::{LibvirtNetwork, Route};
    let p = plan("network:\n  cidr: 192.168.150.0/24\n");
    let net = |name: &str, owner: Option<&str>, bridge: &str, cidr: &str| LibvirtNetwork {
        name: name.into(),
        owner: owner.map(String::from),
        bridge: Some(bridge.into()),
        subnets: vec![cidr.parse().unwrap()],
    };
    let ours = net(
        &p.network.name,
        Some("lab1"),
        &p.network.bridge,
        "192.168.150.0/24",
    );
    let route = |iface: &str, dest: &str| Route {
        iface: iface.into(),
        dest: dest.parse().unwrap(),
    };
    let own_route = route(&p.network.bridge, "192.168.150.0/24");
    let bridge = vec![p.network.bridge.clone()];
    // Resumed: the network, its bridge and its route are the cluster's own.
    assert_eq!(
        network_problems(&p, &[ours], &[own_route], &bridge, true),
        Vec::<String>::new()
    );
    let others = [
        net(&p.network.name, Some("lab2"), "virbr9", "10.9.0.0/24"),
        net("default", None, &p.network.bridge, "192.168.150.128/25"),
    ];
    let routes = [route("eth1", "192.168.0.0/16"), route("eth0", "10.0.0.0/8")];
    let got = network_problems(&p, &others, &routes, &bridge, true);
    assert_eq!(
        got,
        [
            format!("network {}: already used by shiftlab cluster lab2; set network.name", p.network.name),
            format!("network.bridge {}: already the bridge of libvirt network default", p.network.bridge),
            "network.cidr 192.168.150.0/24: overlaps 192.168.150.128/25 of libvirt network default; choose another subnet".into(),
            "network.cidr 192.168.150.0/24: overlaps the host route 192.168.0.0/16 via eth1; choose another subnet".into(),
            format!("network.bridge {}: a host interface of that name exists", p.network.bridge),
        ]
    );
    // A remote libvirt: this host's routes and interfaces say nothing.
    assert_eq!(
        network_problems(&p, &[], &routes, &bridge, false),
        Vec::<String>::new()
    );
    // As a check: one failing row naming every problem, and none when libvirt's
    // networks were not read (a recorded host from before).
    let mut f = facts("good-host");
    f.routes = routes.to_vec();
    let c = doctor::checks(&f, Some(&p));
    assert!(c.iter().all(|c| c.id != "network"), "{c:?}");
    f.networks = Some(others.to_vec());
    let c = doctor::checks(&f, Some(&p));
    assert_eq!(severity(&c, "network"), Severity::Fail);
    assert_eq!(
        c.iter().find(|c| c.id == "network").unwrap().verdict,
        got[..4].join("; ")
    );
}

/// create's preflight decides over the same checks, judged for the run: serve
/// fails only when a wait goes through it, a resumed run's disks are its own,
/// KVM missing is fine for a rehearsal or `domain_type: qemu`; failures are
/// problems (with their fix), warnings go on.
#[test]
fn the_preflight_judges_the_checks_for_what_is_left_of_the_run() {
    use shiftlab::doctor::checks::Run;
    use shiftlab::doctor::preflight::decide;
    let p = plan("");
    let mut f = facts("good-host");
    f.serve_running = false;
    let waits = Run {
        needs_serve: true,
        infra_done: false,
        ..Run::default()
    };
    let d = decide(&f, &p, waits);
    assert_eq!(d.problems.len(), 1, "{d:?}");
    assert!(
        d.problems[0].starts_with("serve: shiftlab serve is not running")
            && d.problems[0].contains("(fix: start it with `sudo shiftlab serve --install-unit`"),
        "{d:?}"
    );
    // Up to infra, serve is a warning (it may be started before the waits).
    let d = decide(&f, &p, Run::default());
    assert!(d.problems.is_empty(), "{d:?}");
    assert!(d.warnings.iter().any(|w| w.starts_with("serve: ")), "{d:?}");
    // Free space for the nodes' disks, unless infra made them already.
    let mut f = facts("good-host");
    f.pool_free_bytes = Some(10 << 30);
    assert!(decide(&f, &p, Run::default()).problems[0].starts_with("disk: 10 GiB free"));
    let resumed = Run {
        needs_serve: true,
        infra_done: true,
        ..Run::default()
    };
    assert!(decide(&f, &p, resumed).problems.is_empty());
    // No KVM: a real cluster is refused, TCG asked for by name is not.
    let mut f = facts("good-host");
    f.kvm_usable = false;
    f.kvm_reason = "/dev/kvm does not exist".into();
    assert!(decide(&f, &p, Run::default()).problems[0]
        .starts_with("kvm: /dev/kvm does not exist (fix: "));
    let tcg = plan("libvirt:\n  domain_type: qemu\n");
    assert!(decide(&f, &tcg, Run::default()).problems.is_empty());
    assert!(decide(&f, &plan("rehearsal: true\n"), Run::default())
        .problems
        .is_empty());
}
