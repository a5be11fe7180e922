//! `doctor`'s verdicts: pure functions of the host's facts and, when a cluster
//! file was given, its plan. Each check says what it found and how to fix it.
//! The rules reuse the ones preflight and the spec already hold
//! (`host::security`, `host::firewall`, `doctor::preflight::expected_node_use`,
//! `spec::documented_minimum`); the sources are cited where they are defined.

use std::net::{IpAddr, SocketAddr};

use serde::Serialize;

use super::facts::HostFacts;
use super::Severity;
use crate::host::{firewall, security};
use crate::plan::{installer_vm, Boot, Node, Plan};
use crate::spec::{Method, NetworkMode, Role};

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable name (`kvm`, `memory`, …): what scripts match on.
    pub id: &'static str,
    pub severity: Severity,
    pub verdict: String,
    /// What to do about it (for anything worse than a note).
    pub fix: Option<String>,
}

fn check(id: &'static str, severity: Severity, verdict: impl Into<String>) -> Check {
    Check {
        id,
        severity,
        verdict: verdict.into(),
        fix: None,
    }
}

impl Check {
    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

const GIB: u64 = 1 << 30;

/// What the checks are judged for: a `create` run and what is left of it.
/// The default is the host alone (`create infra`'s view: nothing waits on serve).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Run {
    /// The run waits on what serve gives the cluster (its load balancer at
    /// bootstrap-complete and install-complete, its BMC for IPI's installer):
    /// serve not running fails instead of warning.
    pub needs_serve: bool,
    /// The cluster's infra is done (a resumed run): its network and its disks
    /// are its own, only what is still to be made needs room.
    pub infra_done: bool,
    /// The run rehearses this method's flow with the shipped stand-in installer
    /// (a rehearsal without a release): the tools it runs must be on PATH.
    pub rehearsal: Option<crate::install::target::Flow>,
}

/// Every check, in a fixed order: the virtualisation stack, the host's files and
/// services, then the plan's capacity.
pub fn checks(f: &HostFacts, plan: Option<&Plan>) -> Vec<Check> {
    checks_for(f, plan, Run::default())
}

/// [`checks`], judged for `run` (`create`'s preflight, `doctor -f`).
pub fn checks_for(f: &HostFacts, plan: Option<&Plan>, run: Run) -> Vec<Check> {
    let mut v = vec![kvm(f, plan), nested(f), libvirt(f)];
    v.extend(cpu_level(f, plan));
    v.extend(fwcfg(f, plan));
    v.push(firewall_check(f, plan));
    v.push(network_manager(f, plan));
    v.push(etc_hosts(f, plan));
    v.extend(clock(f));
    v.push(serve(f, plan, run));
    v.extend(rehearsal_tools(f, run));
    if let Some(p) = plan {
        v.extend(network(f, p));
        v.extend(ipv6(f, p));
        v.push(ports(f, p));
        v.push(host_dns(f, p));
        v.extend(host_ntp(f, p));
        v.push(memory(f, p));
        v.push(cpu(f, p));
        v.push(disk(f, p, run));
        v.push(etcd_disk(f, p));
        v.extend(nfs_server(f, p));
    }
    v
}

/// `storage: nfs`: the program that serves the export (host::nfs) is
/// installed. Not shown without NFS storage, or when the host's commands were
/// not read (a recorded host without them).
fn nfs_server(f: &HostFacts, p: &Plan) -> Option<Check> {
    use crate::host::nfs::{PACKAGES, SERVER};
    p.storage.as_ref()?.nfs.as_ref()?;
    let found = f.commands.as_ref()?;
    Some(if found.iter().any(|c| c == SERVER) {
        check(
            "nfs-server",
            Severity::Ok,
            format!("{SERVER} (NFS-Ganesha with its VFS backend) serves the storage: nfs export"),
        )
    } else {
        check(
            "nfs-server",
            Severity::Fail,
            format!(
                "storage: nfs is served by {SERVER} (Debian packages {PACKAGES}), not installed"
            ),
        )
        .fix(format!("sudo apt-get install {PACKAGES}"))
    })
}

/// The commands the stand-in installer runs for the rehearsed flow
/// (crate::rehearse::installer::tools_for), each with the Debian package that
/// has it. Not shown when the host's commands were not read (a recorded host
/// without them) or no method is rehearsed.
fn rehearsal_tools(f: &HostFacts, run: Run) -> Option<Check> {
    let flow = run.rehearsal?;
    let found = f.commands.as_ref()?;
    let needed = crate::rehearse::installer::tools_for(flow);
    let missing: Vec<&(&str, &str)> = needed
        .iter()
        .filter(|(c, _)| !found.iter().any(|f| f == c))
        .collect();
    if missing.is_empty() {
        let names: Vec<&str> = needed.iter().map(|(c, _)| *c).collect();
        return Some(check(
            "rehearsal-tools",
            Severity::Ok,
            format!(
                "the stand-in installer's tools are here: {}",
                names.join(", ")
            ),
        ));
    }
    let names: Vec<String> = missing
        .iter()
        .map(|(c, p)| format!("{c} (Debian package {p})"))
        .collect();
    let mut packages: Vec<&str> = missing.iter().map(|(_, p)| *p).collect();
    packages.dedup();
    Some(
        check(
            "rehearsal-tools",
            Severity::Fail,
            format!(
                "the {} rehearsal's stand-in installer runs commands not on PATH: {}",
                flow,
                names.join(", ")
            ),
        )
        .fix(format!("sudo apt-get install {}", packages.join(" "))),
    )
}

fn kvm(f: &HostFacts, plan: Option<&Plan>) -> Check {
    if f.kvm_usable {
        return check("kvm", Severity::Ok, &f.kvm_reason);
    }
    let fix = if f.in_vm {
        "this host is a VM: enable nested virtualisation on the outer host and give this VM a host-passthrough (or host-model) CPU"
    } else {
        "enable VT-x/AMD-V in the firmware, load kvm_intel or kvm_amd, and give your user access to /dev/kvm (group kvm)"
    };
    if plan.is_some_and(|p| p.libvirt.domain_type == crate::spec::DomainType::Qemu) {
        return check(
            "kvm",
            Severity::Info,
            format!(
                "{}; libvirt.domain_type is qemu: the nodes run under TCG emulation, slowly",
                f.kvm_reason
            ),
        );
    }
    if plan.is_some_and(|p| p.rehearsal) {
        check(
            "kvm",
            Severity::Warn,
            format!(
                "{}; the rehearsal's stand-in nodes run under TCG emulation, slowly",
                f.kvm_reason
            ),
        )
        .fix(fix)
    } else {
        check("kvm", Severity::Fail, &f.kvm_reason).fix(fix)
    }
}

/// The x86-64 level of the CPU the nodes get: the host's under KVM, else the
/// model (`libvirt.cpu_model`). Streams built for a higher level (x86-64-v3:
/// SCOS 10 `c10s`, RHEL 10 CoreOS) are refused by `plan`/`create`
/// (src/install/cpu.rs); here the host is told what it can run. Not shown
/// when the host's flags were not read (a recorded host without them).
fn cpu_level(f: &HostFacts, plan: Option<&Plan>) -> Option<Check> {
    use crate::release::cpu_level::{self, CpuLevel};
    if f.cpu_flags.is_empty() {
        return None;
    }
    if let Some(model) = plan.and_then(|p| p.libvirt.cpu_model.as_deref()) {
        let lacks = cpu_level::model_missing(model, CpuLevel::V3).unwrap_or_default();
        let level = CpuLevel::ALL
            .into_iter()
            .rev()
            .find(|l| cpu_level::model_missing(model, *l).is_some_and(|m| m.is_empty()))
            .unwrap_or(CpuLevel::V1);
        return Some(if lacks.is_empty() {
            check(
                "cpu-level",
                Severity::Ok,
                format!(
                    "libvirt.cpu_model {model} offers x86-64-v3: every CoreOS stream runs on it"
                ),
            )
        } else {
            check(
                "cpu-level",
                Severity::Info,
                format!(
                    "libvirt.cpu_model {model} offers {level} (lacks {}): streams that need x86-64-v3 \
                     (SCOS 10 c10s, RHEL 10 CoreOS) are refused on it",
                    lacks.join(", ")
                ),
            )
            .fix("a model with x86-64-v3, such as Haswell-noTSX-IBRS, for such a stream")
        });
    }
    let flags: std::collections::BTreeSet<String> = f.cpu_flags.iter().cloned().collect();
    let level = cpu_level::level_of(&flags);
    if !f.kvm_usable {
        return Some(check(
            "cpu-level",
            Severity::Info,
            format!(
                "the host's CPU offers {level}; without KVM the nodes run under TCG as the model \
                 their stream needs (Nehalem for x86-64-v2, Haswell-noTSX-IBRS for x86-64-v3)"
            ),
        ));
    }
    let lacks = cpu_level::missing(CpuLevel::V3, &flags);
    Some(if lacks.is_empty() {
        check(
            "cpu-level",
            Severity::Ok,
            format!("the host's CPU offers {level}: KVM nodes (host-passthrough) can run every CoreOS stream"),
        )
    } else {
        check(
            "cpu-level",
            Severity::Warn,
            format!(
                "the host's CPU offers {level} and lacks {} (x86-64-v3): KVM nodes get the host's CPU, \
                 so streams that need x86-64-v3 (SCOS 10 c10s, RHEL 10 CoreOS) are refused here",
                lacks.join(", ")
            ),
        )
        .fix("run such releases on a host with x86-64-v3 (Intel Haswell, AMD Excavator or newer); RHEL 9 and older streams run here")
    })
}

fn nested(f: &HostFacts) -> Check {
    match &f.nested {
        None => check(
            "nested-virt",
            Severity::Info,
            "no kvm_intel/kvm_amd module loaded: cannot tell whether nodes could run VMs themselves",
        ),
        Some(n) if n.enabled => check(
            "nested-virt",
            Severity::Ok,
            format!("{} nested=Y: nodes can run VMs (OpenShift Virtualization)", n.module),
        ),
        Some(n) => check(
            "nested-virt",
            Severity::Info,
            format!(
                "{} nested=N: fine for OpenShift; nodes cannot run VMs (OpenShift Virtualization) themselves",
                n.module
            ),
        )
        .fix(format!(
            "only if nodes must run VMs: echo 'options {} nested=1' > /etc/modprobe.d/kvm-nested.conf, then reload {} with no VM running",
            n.module, n.module
        )),
    }
}

fn libvirt(f: &HostFacts) -> Check {
    match (&f.libvirt, &f.libvirt_error) {
        (Some(l), _) => check(
            "libvirt",
            Severity::Ok,
            format!(
                "libvirt {}, hypervisor {} at {}",
                security::version_string(l.version),
                l.hypervisor_version
                    .map(security::version_string)
                    .unwrap_or_else(|| "unknown".into()),
                l.uri
            ),
        ),
        (None, e) => check(
            "libvirt",
            Severity::Fail,
            format!("cannot reach libvirt: {}", e.as_deref().unwrap_or("unknown error")),
        )
        .fix("install libvirt's QEMU driver (libvirt-daemon-system or libvirt-daemon-driver-qemu), start libvirtd or virtqemud, and add your user to group libvirt (or use -c qemu:///session)"),
    }
}

/// QEMU's `-fw_cfg name=opt/…,file=…` (QEMU docs/specs/fw_cfg.rst, "Externally
/// Provided Items": since QEMU 2.4).
const QEMU_FWCFG_MIN: u32 = 2_004_000;

fn fwcfg_nodes(plan: Option<&Plan>) -> usize {
    match plan {
        Some(p) => p.nodes.iter().filter(|n| n.boot == Boot::DiskFwCfg).count(),
        // No plan: a UPI cluster's, the default method's, nodes use fw_cfg.
        None => 1,
    }
}

fn fwcfg(f: &HostFacts, plan: Option<&Plan>) -> Vec<Check> {
    let n = fwcfg_nodes(plan);
    let Some(l) = &f.libvirt else {
        return Vec::new();
    };
    if n == 0 {
        return vec![check(
            "fw-cfg",
            Severity::Ok,
            "no node of the plan gets its Ignition through fw_cfg",
        )];
    }
    let mut v = Vec::new();
    if let Some(p) = security::fwcfg_problem(l.version, n) {
        v.push(check("fw-cfg", Severity::Fail, p).fix("upgrade libvirt to 6.5.0 or later"));
    } else if l.hypervisor_version.is_some_and(|q| q < QEMU_FWCFG_MIN) {
        v.push(
            check(
                "fw-cfg",
                Severity::Fail,
                format!(
                    "QEMU {} has no -fw_cfg file items (QEMU 2.4 and later)",
                    security::version_string(l.hypervisor_version.unwrap_or(0))
                ),
            )
            .fix("upgrade QEMU"),
        );
    } else {
        v.push(check(
            "fw-cfg",
            Severity::Ok,
            "libvirt and QEMU give nodes their Ignition through <sysinfo type='fwcfg'>",
        ));
    }
    // Labelling: libvirt's security drivers label the file (host::security).
    let mut label = Vec::new();
    label.extend(security::fwcfg_labelling_warning(l.version, n));
    if l.local {
        if let Some(dir) = plan.map(|p| &p.libvirt.pool_path) {
            let mode = match f.selinux.as_str() {
                "enforcing" => security::Selinux::Enforcing,
                "permissive" => security::Selinux::Permissive,
                _ => security::Selinux::Absent,
            };
            label.extend(security::pool_dir_warning(
                mode,
                dir,
                f.pool_dir_context.as_deref(),
            ));
        }
    }
    if label.is_empty() {
        let mac = match (f.selinux.as_str(), f.apparmor) {
            ("enforcing", _) => "SELinux enforcing: libvirt labels the fw_cfg file svirt_image_t",
            (_, true) => "AppArmor: virt-aa-helper lets each VM read its fw_cfg file",
            _ => "no SELinux or AppArmor confinement of QEMU",
        };
        v.push(check("fw-cfg-labels", Severity::Ok, mac));
    } else {
        v.push(
            check("fw-cfg-labels", Severity::Warn, label.join("; "))
                .fix("see docs/apparmor-selinux.md; never set security_driver = \"none\""),
        );
    }
    v
}

fn firewall_check(f: &HostFacts, plan: Option<&Plan>) -> Check {
    let Some(backend) = &f.firewall else {
        return check(
            "firewall",
            Severity::Warn,
            format!(
                "cannot tell what filters the host's input: {}",
                f.firewall_error.as_deref().unwrap_or("unknown")
            ),
        )
        .fix("run doctor as root (nft and iptables need it to list rules)");
    };
    if *backend == firewall::Backend::Open {
        return check(
            "firewall",
            Severity::Ok,
            "nothing filters traffic from the nodes to this host",
        );
    }
    let Some(p) = plan else {
        return check(
            "firewall",
            Severity::Info,
            format!(
                "{}: shiftlab serve adds a cluster's rules and destroy removes them (docs/firewall.md)",
                backend.describe()
            ),
        );
    };
    // The zone libvirt gives its NAT bridges (libvirt src/network/bridge_driver_linux.c).
    let zone = if *backend == firewall::Backend::Firewalld {
        Some(f.firewall_zone.clone().unwrap_or_else(|| "libvirt".into()))
    } else {
        None
    };
    let record = firewall::Record {
        backend: backend.clone(),
        zone: zone.clone(),
        openings: firewall::Openings::from_plan(p, None),
    };
    let mut c = check(
        "firewall",
        Severity::Info,
        firewall::preflight_lines(&record).join("\n"),
    );
    if p.network.mode == NetworkMode::Nat && zone.as_deref().is_some_and(|z| z != "libvirt") {
        c.severity = Severity::Warn;
        c = c.fix(format!(
            "bridge {} is in firewalld zone {}, not libvirt's: DHCP and DNS from the nodes may be dropped; firewall-cmd --zone=libvirt --change-interface={}",
            p.network.bridge,
            zone.unwrap_or_default(),
            p.network.bridge
        ));
    }
    c
}

/// Interfaces libvirt makes (bridges `virbr*`, taps `vnet*`) and container veths.
fn libvirt_interface(name: &str, plan: Option<&Plan>) -> bool {
    name.starts_with("virbr")
        || name.starts_with("vnet")
        || name.starts_with("veth")
        || plan.is_some_and(|p| p.network.mode == NetworkMode::Nat && p.network.bridge == name)
        || plan.is_some_and(|p| {
            // The veth-linked bridge of an IPI cluster (src/host/veth.rs).
            p.network.veth.as_ref().is_some_and(|v| {
                [&v.bridge, &v.bridge_end, &v.nat_end]
                    .iter()
                    .any(|l| l.as_str() == name)
            })
        })
}

fn network_manager(f: &HostFacts, plan: Option<&Plan>) -> Check {
    let Some(devices) = &f.network_manager else {
        return check(
            "network-manager",
            Severity::Ok,
            "NetworkManager is not running",
        );
    };
    let managed: Vec<String> = devices
        .iter()
        .filter(|d| libvirt_interface(&d.device, plan) && d.state != "unmanaged")
        .map(|d| format!("{} ({})", d.device, d.state))
        .collect();
    if managed.is_empty() {
        return check(
            "network-manager",
            Severity::Ok,
            "NetworkManager leaves libvirt's bridges, taps and veths alone",
        );
    }
    // NetworkManager.conf(5), [keyfile] unmanaged-devices: device specs separated by ';'.
    let mut specs = vec![
        "interface-name:virbr*",
        "interface-name:vnet*",
        "interface-name:veth*",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    if let Some(p) = plan.filter(|p| p.network.mode == NetworkMode::Nat) {
        specs.push(format!("interface-name:{}", p.network.bridge));
        if let Some(v) = &p.network.veth {
            specs.extend(
                [&v.bridge, &v.bridge_end, &v.nat_end].map(|l| format!("interface-name:{l}")),
            );
        }
    }
    check(
        "network-manager",
        Severity::Warn,
        format!("NetworkManager manages {}", managed.join(", ")),
    )
    .fix(format!(
        "write /etc/NetworkManager/conf.d/90-libvirt-unmanaged.conf with [keyfile] and unmanaged-devices={}, then systemctl reload NetworkManager",
        specs.join(";")
    ))
}

/// Names `::1` may carry (Debian's and Fedora's default `/etc/hosts`).
const IPV6_LOOPBACK_NAMES: &[&str] = &[
    "localhost",
    "localhost6",
    "localhost.localdomain",
    "localhost6.localdomain6",
    "ip6-localhost",
    "ip6-loopback",
];

fn etc_hosts(f: &HostFacts, plan: Option<&Plan>) -> Check {
    let mut v4_localhost = false;
    let mut v6_extra: Vec<String> = Vec::new();
    let mut v6_localhost = false;
    let mut cluster_on_loopback: Vec<String> = Vec::new();
    for line in f.etc_hosts.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(Ok(addr)) = words.next().map(str::parse::<IpAddr>) else {
            continue;
        };
        for name in words {
            if addr.is_loopback() {
                if let Some(p) = plan {
                    if name == p.cluster_domain || name.ends_with(&format!(".{}", p.cluster_domain))
                    {
                        cluster_on_loopback.push(format!("{name} ({addr})"));
                    }
                }
            }
            match addr {
                IpAddr::V4(a) if a.is_loopback() && name == "localhost" => v4_localhost = true,
                IpAddr::V6(a) if a.is_loopback() => {
                    if name == "localhost" {
                        v6_localhost = true;
                    }
                    if !IPV6_LOOPBACK_NAMES.contains(&name) {
                        v6_extra.push(name.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    let mut problems = Vec::new();
    if v6_localhost && !v4_localhost {
        problems.push(
            "localhost is only ::1: IPv4-only services on 127.0.0.1 are not reached as localhost"
                .to_string(),
        );
    }
    if !v6_extra.is_empty() {
        problems.push(format!(
            "::1 also names {}: those names resolve to the IPv6 loopback first",
            v6_extra.join(", ")
        ));
    }
    if !cluster_on_loopback.is_empty() {
        problems.push(format!(
            "cluster names on a loopback address: {}",
            cluster_on_loopback.join(", ")
        ));
    }
    if problems.is_empty() {
        return check(
            "etc-hosts",
            Severity::Ok,
            "/etc/hosts: localhost on 127.0.0.1, ::1 only for the loopback names",
        );
    }
    check("etc-hosts", Severity::Warn, format!("/etc/hosts: {}", problems.join("; ")))
        .fix("keep '127.0.0.1 localhost' and '::1 localhost ip6-localhost ip6-loopback' only; put the host's own name on its real address")
}

/// The host's clock (host::clock): a warning, never a refusal, when it is not
/// synchronised. Not shown when not read (a recorded host without it).
fn clock(f: &HostFacts) -> Option<Check> {
    let c = f.clock.as_ref()?;
    let services = c.services.join(", ");
    if c.synced() {
        let by = if services.is_empty() {
            String::new()
        } else {
            format!(", kept by {services}")
        };
        return Some(check(
            "clock",
            Severity::Ok,
            format!(
                "the host's clock is synchronised (maximum error {} ms{by})",
                c.maxerror_us / 1000
            ),
        ));
    }
    let why = "the installer and shiftlab sign the lab's certificates with this clock: nodes whose time differs refuse them as not yet valid or expired (etcd, kubelet, the API)";
    Some(if services.is_empty() {
        check(
            "clock",
            Severity::Warn,
            format!("the host's clock is not synchronised and no time service runs; {why}"),
        )
        .fix("sudo apt-get install chrony (it synchronises from Debian's pool at once), or enable systemd-timesyncd: sudo timedatectl set-ntp true")
    } else {
        check(
            "clock",
            Severity::Warn,
            format!("the host's clock is not synchronised although {services} runs: it reaches no time server; {why}"),
        )
        .fix("see which servers it tries and why they fail: chronyc sources -v (chrony) or timedatectl timesync-status (systemd-timesyncd); allow outgoing UDP port 123")
    })
}

/// A dual-stack lab (docs/ipv6.md): libvirt gives the bridge its IPv6 address
/// and turns IPv6 forwarding on for the network's NAT66, which it refuses
/// while links hold routes from router advertisements they would then ignore
/// (host::ipv6, with libvirt's rule). Not shown for an IPv4 lab, or for a
/// recorded host without the facts.
fn ipv6(f: &HostFacts, p: &Plan) -> Option<Check> {
    let v6 = p.network.ipv6.as_ref()?;
    let h = f.ipv6.as_ref()?;
    if !h.enabled {
        return Some(
            check(
                "ipv6",
                Severity::Fail,
                format!(
                    "IPv6 is disabled on this host (net.ipv6.conf.all.disable_ipv6): libvirt cannot give the lab's bridge its address {}",
                    v6.gateway
                ),
            )
            .fix("sudo sysctl -w net.ipv6.conf.all.disable_ipv6=0 (and drop ipv6.disable=1 from the kernel command line if it is there)"),
        );
    }
    let blocking = h.blocking_links();
    if !blocking.is_empty() {
        let links: Vec<String> = blocking
            .iter()
            .map(|l| match l.accept_ra {
                Some(a) => format!("{} (accept_ra {a})", l.iface),
                None => format!("{} (accept_ra unreadable)", l.iface),
            })
            .collect();
        let first = &blocking[0].iface;
        return Some(
            check(
                "ipv6",
                Severity::Fail,
                format!(
                    "libvirt would refuse to start the lab's network: its NAT66 turns IPv6 forwarding on, and a forwarding kernel ignores the router advertisements that gave {} its routes (libvirt: \"enabling IPv6 forwarding with RA routes without accept_ra set to 2 is likely to cause routes loss\")",
                    links.join(", ")
                ),
            )
            .fix(format!(
                "accept them while forwarding, per link: sudo sysctl -w net.ipv6.conf.{first}.accept_ra=2, and keep it across boots: echo 'net.ipv6.conf.{first}.accept_ra = 2' | sudo tee /etc/sysctl.d/90-accept-ra.conf"
            )),
        );
    }
    let forwarding = if h.forwarding {
        "IPv6 forwarding on"
    } else {
        "IPv6 forwarding off (libvirt turns it on when it starts the lab's network)"
    };
    Some(match &h.ra_links {
        None => check(
            "ipv6",
            Severity::Info,
            format!("IPv6 on, {forwarding}; the routes learned from router advertisements could not be read (/proc/net/ipv6_route), which libvirt checks when it starts the network"),
        ),
        Some(l) if l.is_empty() => check(
            "ipv6",
            Severity::Ok,
            format!("IPv6 on, {forwarding}; no route learned from router advertisements"),
        ),
        Some(_) => check(
            "ipv6",
            Severity::Ok,
            format!("IPv6 on, {forwarding}; the links with advertised routes accept them while forwarding (accept_ra 2)"),
        ),
    })
}

/// `host_ntp: true`: the host's chrony must run to serve the nodes (shiftlab
/// writes its drop-in; it installs nothing). Not shown without `host_ntp` or
/// for a recorded host without the clock.
fn host_ntp(f: &HostFacts, p: &Plan) -> Option<Check> {
    if !p.network.host_ntp {
        return None;
    }
    let c = f.clock.as_ref()?;
    Some(if c.services.iter().any(|s| s == "chronyd") {
        check(
            "host-ntp",
            Severity::Ok,
            format!(
                "chronyd runs: serve lets it answer {} at {} (UDP 123)",
                p.network.host_cidr(),
                p.network.host_ip()
            ),
        )
    } else {
        check(
            "host-ntp",
            Severity::Warn,
            "host_ntp is set but chronyd does not run: the nodes get no time from the host",
        )
        .fix("sudo apt-get install chrony (Debian's, whose /etc/chrony/conf.d serve writes to), or use ntp_servers")
    })
}

fn serve(f: &HostFacts, plan: Option<&Plan>, run: Run) -> Check {
    if f.serve_running {
        return check("serve", Severity::Ok, "shiftlab serve is running");
    }
    // The install waits through serve's load balancer or BMC: without it the
    // wait would fail after the download, manifests and infra.
    if run.needs_serve {
        return check(
            "serve",
            Severity::Fail,
            "shiftlab serve is not running: the install waits through its load balancer (api, api-int:22623) or BMC, and would fail at bootstrap",
        )
        .fix(crate::serve::ready::HOW_TO_SERVE);
    }
    let severity = if plan.is_some() {
        Severity::Warn
    } else {
        Severity::Info
    };
    check(
        "serve",
        severity,
        "shiftlab serve is not running: no load balancer, Ignition/ISO server, BMC or host DNS for the clusters",
    )
    .fix("shiftlab serve --install-unit (a systemd unit), or run shiftlab serve")
}

/// Of one family and sharing an address (`IpNet::contains` is false across families).
fn overlaps(a: &ipnet::IpNet, b: &ipnet::IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// The cluster's libvirt network against the host's: its name free or its own,
/// its subnet in no other network and (libvirt on this machine, the network not
/// made yet) on no host route, its bridge no other's. Every problem, one per line.
/// Run by `create`'s preflight, `doctor -f` and `create infra` (over what
/// libvirt says at that moment: src/doctor/preflight.rs).
pub fn network_problems(
    p: &Plan,
    networks: &[super::facts::LibvirtNetwork],
    routes: &[super::facts::Route],
    interfaces: &[String],
    local: bool,
) -> Vec<String> {
    let net = &p.network;
    let nat = net.mode == NetworkMode::Nat;
    // The lab's subnets: IPv4's, and IPv6's.
    let cidrs = net.subnets();
    let mut problems = Vec::new();
    let mut ours = false;
    for n in networks {
        if n.name == net.name {
            match &n.owner {
                Some(o) if *o == p.cluster => ours = true,
                Some(o) => problems.push(format!(
                    "network {}: already used by shiftlab cluster {o}; set network.name",
                    net.name
                )),
                None => problems.push(format!(
                    "network {}: a libvirt network of that name exists and is not shiftlab's; set network.name to another name",
                    net.name
                )),
            }
            continue;
        }
        if nat && n.bridge.as_deref() == Some(&net.bridge) {
            problems.push(format!(
                "network.bridge {}: already the bridge of libvirt network {}",
                net.bridge, n.name
            ));
        }
        for cidr in &cidrs {
            for s in n.subnets.iter().filter(|s| nat && overlaps(s, cidr)) {
                problems.push(format!(
                    "network.cidr {cidr}: overlaps {s} of libvirt network {}; choose another subnet",
                    n.name
                ));
            }
        }
    }
    // Host routes and interfaces (only meaningful when libvirt is on this machine).
    if local && nat && !ours {
        for cidr in &cidrs {
            for r in routes {
                if r.iface != net.bridge && overlaps(&r.dest, cidr) {
                    problems.push(format!(
                        "network.cidr {cidr}: overlaps the host route {} via {}; choose another subnet",
                        r.dest, r.iface
                    ));
                }
            }
        }
        if interfaces.contains(&net.bridge) {
            problems.push(format!(
                "network.bridge {}: a host interface of that name exists",
                net.bridge
            ));
        }
    }
    problems
}

/// [`network_problems`] as a check; none when libvirt's networks were not read.
fn network(f: &HostFacts, p: &Plan) -> Option<Check> {
    let networks = f.networks.as_deref()?;
    let local = f.libvirt.as_ref().is_some_and(|l| l.local);
    let problems = network_problems(p, networks, &f.routes, &f.interfaces, local);
    if problems.is_empty() {
        let whose = if networks.iter().any(|n| n.name == p.network.name) {
            "exists and is the cluster's"
        } else {
            "is free"
        };
        return Some(check(
            "network",
            Severity::Ok,
            format!(
                "network {} ({}) {whose}",
                p.network.name,
                join(&p.network.subnets())
            ),
        ));
    }
    Some(
        check("network", Severity::Fail, problems.join("; "))
            .fix("choose another network.cidr (or network.name) in the cluster file, or remove what is in the way"),
    )
}

/// Subnets as the messages list them.
fn join(nets: &[ipnet::IpNet]) -> String {
    let v: Vec<String> = nets.iter().map(ToString::to_string).collect();
    v.join(", ")
}

/// The host ports a cluster's services bind: the load balancer's frontends,
/// the lab BMC and the NFS server of `storage: nfs` (on the gateway).
fn wanted_ports(p: &Plan) -> Vec<SocketAddr> {
    let mut v: Vec<SocketAddr> = p
        .load_balancer
        .iter()
        .flat_map(|lb| &lb.frontends)
        .flat_map(|fe| {
            fe.addresses()
                .into_iter()
                .map(|a| SocketAddr::new(a, fe.port))
        })
        .collect();
    if let Some(b) = &p.bmc {
        v.push(SocketAddr::new(b.address, b.port));
    }
    if let Some(nfs) = p.storage.as_ref().and_then(|s| s.nfs.as_ref()) {
        v.push(SocketAddr::new(nfs.server, crate::host::nfs::PORT));
    }
    v
}

fn ports(f: &HostFacts, p: &Plan) -> Check {
    let wanted = wanted_ports(p);
    if wanted.is_empty() {
        return check("ports", Severity::Ok, "the plan binds no host port");
    }
    let taken: Vec<String> = wanted
        .iter()
        .filter(|w| {
            f.listening
                .iter()
                .any(|l| l.port() == w.port() && (l.ip() == w.ip() || l.ip().is_unspecified()))
        })
        .map(|w| w.to_string())
        .collect();
    if taken.is_empty() {
        return check(
            "ports",
            Severity::Ok,
            format!(
                "free: {}",
                wanted
                    .iter()
                    .map(|w| w.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        );
    }
    if f.serve_running {
        // serve holds them for the cluster once it serves it.
        return check(
            "ports",
            Severity::Info,
            format!(
                "in use (by shiftlab serve if it serves {}): {}",
                p.cluster,
                taken.join(" ")
            ),
        );
    }
    check(
        "ports",
        Severity::Warn,
        format!("another program listens on {}", taken.join(" ")),
    )
    .fix("find it with ss -ltnp and stop it, or give the cluster other addresses (network.cidr)")
}

fn host_dns(f: &HostFacts, p: &Plan) -> Check {
    if f.resolved.is_empty() {
        return check(
            "host-dns",
            Severity::Info,
            "the cluster's names were not looked up",
        );
    }
    let expect = |name: &str| -> IpAddr {
        if name.starts_with("api.") {
            p.vips.api_ip()
        } else {
            p.vips.ingress_ip()
        }
    };
    let mut bad = Vec::new();
    for r in &f.resolved {
        let want = expect(&r.name);
        if r.addresses.is_empty() {
            bad.push(format!("{} does not resolve (want {want})", r.name));
        } else if !r.addresses.contains(&want) {
            let got: Vec<String> = r.addresses.iter().map(|a| a.to_string()).collect();
            bad.push(format!("{} is {} (want {want})", r.name, got.join(", ")));
        }
    }
    if bad.is_empty() {
        return check(
            "host-dns",
            Severity::Ok,
            format!("the host resolves api and *.apps of {}", p.cluster_domain),
        );
    }
    check("host-dns", Severity::Warn, bad.join("; ")).fix(
        "shiftlab serve configures the host's resolver for the cluster (docs/dns.md); with serve running, check NetworkManager's dnsmasq or systemd-resolved",
    )
}

fn role_min(p: &Plan, role: Role) -> (u64, u64, u64) {
    crate::spec::documented_minimum(role, p.method)
}

/// Who the capacity checks count: the nodes, and an IPI install's bootstrap VM.
fn wanting(p: &Plan) -> String {
    match installer_vm::bootstrap_vm(p) {
        Some(vm) => format!("the nodes and {}", vm.name()),
        None => "the nodes".into(),
    }
}

fn memory(f: &HostFacts, p: &Plan) -> Check {
    let (need, _, _) = installer_vm::host_need(p, 0);
    let biggest = p.nodes.iter().map(|n| n.memory_mib).max().unwrap_or(0);
    let total = f.memory_total_mib;
    let gib = |mib: u64| format!("{:.1} GiB", mib as f64 / 1024.0);
    if biggest > total {
        return check(
            "memory",
            Severity::Fail,
            format!(
                "a node wants {} and the host has {}",
                gib(biggest),
                gib(total)
            ),
        )
        .fix("give the nodes less memory (memory: in the cluster file) or use a bigger host");
    }
    if let Some(vm) = installer_vm::bootstrap_vm(p).filter(|vm| vm.memory_mib > total) {
        return check(
            "memory",
            Severity::Fail,
            format!("{} and the host has {}", vm.name(), gib(total)),
        )
        .fix("use a bigger host: the installer sizes its bootstrap VM itself");
    }
    // More than the host has at all: no sharing makes room for OpenShift nodes,
    // which use what they are given.
    if need > total {
        return check(
            "memory",
            Severity::Fail,
            format!(
                "{} want {} together and the host has {} in all",
                wanting(p),
                gib(need),
                gib(total)
            ),
        )
        .fix("fewer or smaller nodes (workers:, memory: in the cluster file), or a bigger host");
    }
    let mut c = Capacity::new(
        "memory",
        format!(
            "{} want {} together; the host has {} ({} available)",
            wanting(p),
            gib(need),
            gib(total),
            gib(f.memory_available_mib)
        ),
    );
    if need > f.memory_available_mib {
        c.note(
            Severity::Warn,
            "overcommitted: KVM lets guests share memory, but OpenShift nodes use what they are given; expect swapping or the OOM killer",
            Some("fewer or smaller nodes, or free memory on the host"),
        );
    }
    c.below_minimums(
        p,
        |n| n.memory_mib,
        |(_, mib, _)| mib,
        gib,
        "labs run smaller than the minimums at their own risk; raise memory: if the install stalls",
    );
    c.check()
}

fn cpu(f: &HostFacts, p: &Plan) -> Check {
    let (_, need, _) = installer_vm::host_need(p, 0);
    let biggest = p.nodes.iter().map(|n| n.vcpus).max().unwrap_or(0);
    let cpus = f.cpus.max(1);
    let mut c = Capacity::new(
        "cpu",
        format!(
            "{} want {need} vCPUs; the host has {cpus} CPU threads",
            wanting(p)
        ),
    );
    if biggest > cpus {
        c.note(
            Severity::Warn,
            format!("a node has {biggest} vCPUs, more than the host's threads: it will be slower than with fewer"),
            Some("give no node more vCPUs than the host has threads (numcpus:)"),
        );
    } else if need > cpus {
        c.note(
            Severity::Info,
            format!(
                "overcommitted {:.1}:1; fine for a lab while the nodes are idle, slow during the install",
                need as f64 / cpus as f64
            ),
            None,
        );
    }
    c.below_minimums(
        p,
        |n| n.vcpus as u64,
        |(vcpus, _, _)| vcpus,
        |v| v.to_string(),
        "raise numcpus: if the install stalls",
    );
    c.check()
}

/// A capacity check (memory, cpu) built note by note: the worst severity of its
/// notes, and the first fix one of them offered.
struct Capacity {
    id: &'static str,
    severity: Severity,
    notes: Vec<String>,
    fix: Option<String>,
}

impl Capacity {
    fn new(id: &'static str, first: String) -> Self {
        Capacity {
            id,
            severity: Severity::Ok,
            notes: vec![first],
            fix: None,
        }
    }

    fn note(&mut self, severity: Severity, note: impl Into<String>, fix: Option<&str>) {
        self.severity = self.severity.max(severity);
        self.notes.push(note.into());
        if let Some(fix) = fix {
            self.fix.get_or_insert_with(|| fix.into());
        }
    }

    /// A warning naming the nodes whose `amount` is below their role's
    /// documented minimum (`minimum` picks it from `spec::documented_minimum`);
    /// a rehearsal's nodes are small on purpose.
    fn below_minimums(
        &mut self,
        p: &Plan,
        amount: impl Fn(&Node) -> u64,
        minimum: impl Fn((u64, u64, u64)) -> u64,
        show: impl Fn(u64) -> String,
        fix: &str,
    ) {
        if p.rehearsal {
            return;
        }
        let below: Vec<String> = p
            .nodes
            .iter()
            .filter_map(|n| {
                let (have, min) = (amount(n), minimum(role_min(p, n.role)));
                (have < min).then(|| format!("{} {} < {}", n.name, show(have), show(min)))
            })
            .collect();
        if !below.is_empty() {
            self.note(
                Severity::Warn,
                format!("below the documented minimums: {}", below.join(", ")),
                Some(fix),
            );
        }
    }

    fn check(self) -> Check {
        Check {
            id: self.id,
            severity: self.severity,
            verdict: self.notes.join("; "),
            fix: self.fix,
        }
    }
}

fn disk(f: &HostFacts, p: &Plan, run: Run) -> Check {
    // A resumed run's nodes have their disks: only the installer's VM is to come.
    let nodes = if run.infra_done {
        0
    } else {
        super::preflight::expected_node_use(p)
    };
    let (_, _, need) = installer_vm::host_need(p, nodes);
    let Some(free) = f.pool_free_bytes else {
        return check(
            "disk",
            Severity::Info,
            format!(
                "cannot tell the free space at {} (a remote libvirt?)",
                p.libvirt.pool_path.display()
            ),
        );
    };
    let sno_small = p.method == Method::Sno
        && !p.rehearsal
        && p.nodes
            .iter()
            .any(|n| n.disks[0].size_gb < role_min(p, Role::Ctlplane).2);
    let verdict = format!(
        "{} GiB free at {}; the nodes' thin disks are expected to use {} GiB early on{}",
        free / GIB,
        p.libvirt.pool_path.display(),
        need.div_ceil(GIB),
        installer_vm::installer_disk_words(p)
    );
    if free < need {
        return check("disk", Severity::Fail, verdict)
            .fix("free space there, or set libvirt.pool_path to a bigger filesystem");
    }
    if sno_small {
        return check(
            "disk",
            Severity::Warn,
            format!("{verdict}; a single node wants a 120 GB disk (documented minimum)"),
        )
        .fix("disk_size: 120");
    }
    check("disk", Severity::Ok, verdict)
}

fn etcd_disk(f: &HostFacts, p: &Plan) -> Check {
    match f.pool_rotational {
        _ if p.rehearsal => check("etcd-disk", Severity::Ok, "a rehearsal runs no etcd"),
        Some(false) => check(
            "etcd-disk",
            Severity::Ok,
            "the pool is on solid-state storage (etcd wants fsync p99 <= 10 ms)",
        ),
        Some(true) => check(
            "etcd-disk",
            Severity::Warn,
            format!(
                "{} is on a rotational disk: etcd wants fsync p99 <= 10 ms and will miss heartbeats",
                p.libvirt.pool_path.display()
            ),
        )
        .fix("put libvirt.pool_path on an SSD or NVMe"),
        None => check(
            "etcd-disk",
            Severity::Info,
            "cannot tell whether the pool's disk is rotational",
        ),
    }
}

/// The checks that stop `create infra` (preflight): every failing one, except
/// those preflight makes itself (fw_cfg support, free space, the network) and KVM, which
/// `libvirt::apply::choose_accel` decides knowing `domain_type`: TCG for a
/// rehearsal or when asked for by name, else a refusal (src/host/kvm.rs).
pub fn blocking(checks: &[Check]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| {
            c.severity == Severity::Fail && !matches!(c.id, "fw-cfg" | "disk" | "kvm" | "network")
        })
        .map(|c| match &c.fix {
            Some(fix) => format!("{}: {} (fix: {fix})", c.id, c.verdict),
            None => format!("{}: {}", c.id, c.verdict),
        })
        .collect()
}
