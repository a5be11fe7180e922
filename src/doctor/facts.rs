//! The host, read once: everything `doctor`'s checks decide on. Plain data with
//! serde, so a recorded host (`tests/fixtures/doctor/*.json`) can stand in for a
//! real one. Reading never changes anything.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::host::firewall;
use crate::plan::Plan;
use crate::state::StateDir;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostFacts {
    /// `host::kvm::check()`: can KVM give a guest x86-64-v2.
    pub kvm_usable: bool,
    pub kvm_reason: String,
    /// The KVM module's `nested` parameter (`kvm_intel` or `kvm_amd`), if loaded.
    pub nested: Option<Nested>,
    /// This host is itself a VM (the CPU's `hypervisor` flag).
    pub in_vm: bool,
    /// The host CPU's `/proc/cpuinfo` flags: what KVM nodes get
    /// (host-passthrough). Empty when not read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpu_flags: Vec<String>,
    /// libvirt, as connected to.
    pub libvirt: Option<Libvirt>,
    /// Why libvirt could not be reached.
    pub libvirt_error: Option<String>,
    /// `enforcing`, `permissive`, `absent`.
    pub selinux: String,
    /// The pool directory's (or its nearest existing parent's) SELinux context.
    pub pool_dir_context: Option<String>,
    /// AppArmor enabled in the kernel.
    pub apparmor: bool,
    /// What filters the host's input, and firewalld's zone of the cluster's bridge.
    pub firewall: Option<firewall::Backend>,
    pub firewall_zone: Option<String>,
    pub firewall_error: Option<String>,
    /// NetworkManager's devices and their state (`nmcli -t -f DEVICE,STATE device`), when it runs.
    pub network_manager: Option<Vec<NmDevice>>,
    /// The text of `/etc/hosts`.
    pub etc_hosts: String,
    /// TCP sockets listening on the host.
    pub listening: Vec<SocketAddr>,
    /// `shiftlab serve` answers on its control socket.
    pub serve_running: bool,
    /// Names of the cluster the host was asked to resolve, with what it got.
    pub resolved: Vec<Resolved>,
    pub memory_total_mib: u64,
    pub memory_available_mib: u64,
    pub cpus: u32,
    /// The storage pool's directory (or nearest existing parent): free bytes, rotational disk.
    pub pool_path: Option<PathBuf>,
    pub pool_free_bytes: Option<u64>,
    pub pool_rotational: Option<bool>,
    /// libvirt's networks (`None`: not read, libvirt unreachable or a recorded
    /// host without them): the cluster's network name must be free or its own,
    /// its subnet and bridge no other network's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<LibvirtNetwork>>,
    /// The host's routes (`/proc/net/route`, no default route).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// The host's network interfaces (`/sys/class/net`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<String>,
    /// Which of the commands a rehearsal's stand-in installer runs are on PATH
    /// (`None`: not read, a recorded host without them).
    pub commands: Option<Vec<String>>,
    /// The kernel's clock discipline and the time services running (`None`:
    /// not read, a recorded host without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<crate::host::clock::Clock>,
    /// The host's IPv6 as a dual-stack lab's network needs it (`None`: not
    /// read, a recorded host without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<crate::host::ipv6::Ipv6Host>,
}

/// One libvirt network, as the name and address checks see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibvirtNetwork {
    pub name: String,
    /// The shiftlab cluster that owns it (its metadata), if any.
    pub owner: Option<String>,
    pub bridge: Option<String>,
    /// Both families' (a recorded host from before: IPv4 only).
    pub subnets: Vec<ipnet::IpNet>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub iface: String,
    pub dest: ipnet::IpNet,
}

/// Every libvirt network of `host`, with its owner, bridge and subnets.
pub fn libvirt_networks(host: &crate::libvirt::Host) -> anyhow::Result<Vec<LibvirtNetwork>> {
    use crate::libvirt::xml::parse::{network_bridge, network_subnets, network_subnets6};
    let mut out = Vec::new();
    for n in host.conn.list_all_networks(0)? {
        let xml = n.xml_desc(0)?;
        out.push(LibvirtNetwork {
            name: n.name()?,
            owner: crate::libvirt::xml::owner::Owner::parse(&xml).map(|o| o.cluster),
            bridge: network_bridge(&xml),
            subnets: network_subnets(&xml)
                .into_iter()
                .map(ipnet::IpNet::V4)
                .chain(network_subnets6(&xml).into_iter().map(ipnet::IpNet::V6))
                .collect(),
        });
    }
    Ok(out)
}

/// The host's routes and interfaces, for the address checks.
pub fn host_links() -> (Vec<Route>, Vec<String>) {
    let v4 = crate::host::routes()
        .into_iter()
        .map(|(iface, dest)| (iface, ipnet::IpNet::V4(dest)));
    let v6 = crate::host::routes6()
        .into_iter()
        .map(|(iface, dest)| (iface, ipnet::IpNet::V6(dest)));
    let routes = v4
        .chain(v6)
        .map(|(iface, dest)| Route { iface, dest })
        .collect();
    let mut interfaces: Vec<String> = std::fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    interfaces.sort();
    (routes, interfaces)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nested {
    pub module: String,
    pub enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Libvirt {
    pub uri: String,
    pub local: bool,
    /// libvirt's packed version (major*1e6 + minor*1e3 + micro).
    pub version: u32,
    /// The hypervisor's (QEMU's), packed the same way.
    pub hypervisor_version: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NmDevice {
    pub device: String,
    pub state: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    pub name: String,
    pub addresses: Vec<IpAddr>,
}

/// Recorded facts (`doctor -o json`'s `facts`), for `--facts`.
pub fn read_recorded(path: &Path) -> anyhow::Result<HostFacts> {
    use anyhow::Context;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("reading host facts from {}", path.display()))
}

/// `nmcli -t -f DEVICE,STATE device`: `name:state` lines (`\:` escapes a colon).
pub fn parse_nmcli_devices(text: &str) -> Vec<NmDevice> {
    text.lines()
        .filter_map(|l| {
            let i = l.rfind(':')?;
            Some(NmDevice {
                device: l[..i].replace("\\:", ":"),
                state: l[i + 1..].trim().to_string(),
            })
        })
        .collect()
}

/// `/proc/meminfo`: (MemTotal, MemAvailable) in MiB.
pub fn parse_meminfo(text: &str) -> (u64, u64) {
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kib| kib / 1024)
            .unwrap_or(0)
    };
    (get("MemTotal:"), get("MemAvailable:"))
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn nested() -> Option<Nested> {
    ["kvm_intel", "kvm_amd"].iter().find_map(|m| {
        let v = read(&format!("/sys/module/{m}/parameters/nested"))?;
        Some(Nested {
            module: m.to_string(),
            enabled: matches!(v.trim(), "Y" | "1"),
        })
    })
}

/// Is the disk under `path` rotational (`/sys/dev/block/<maj>:<min>/queue/rotational`,
/// the whole disk's for a partition)? `None` for what has no block device (tmpfs,
/// overlay) or cannot be told.
fn rotational(path: &Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major == 0 {
        return None;
    }
    let base = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let text = std::fs::read_to_string(base.join("queue/rotational"))
        .or_else(|_| std::fs::read_to_string(base.join("../queue/rotational")))
        .ok()?;
    Some(text.trim() == "1")
}

fn process_running(comm: &str) -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .any(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == comm))
}

fn run(argv: &[&str]) -> Option<String> {
    let out = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The names of a cluster the host itself must resolve (OpenShift's "User-provisioned DNS requirements"):
/// the API and a route under `*.apps`.
pub fn host_names(plan: &Plan) -> Vec<String> {
    vec![
        format!("api.{}", plan.cluster_domain),
        format!("console-openshift-console.apps.{}", plan.cluster_domain),
    ]
}

fn resolve(name: &str) -> Resolved {
    let mut addresses: Vec<IpAddr> = (name, 0u16)
        .to_socket_addrs()
        .map(|it| it.map(|a| a.ip()).collect())
        .unwrap_or_default();
    addresses.sort();
    addresses.dedup();
    Resolved {
        name: name.to_string(),
        addresses,
    }
}

/// Read the host. `uri` is libvirt's; `plan`, when given, says which pool, bridge
/// and names to look at.
pub fn gather(state: &StateDir, uri: &str, plan: Option<&Plan>) -> HostFacts {
    let serve_running = matches!(
        crate::serve::control::request(state, &crate::serve::control::Request::Ping),
        Ok(Some(_))
    );
    match crate::libvirt::Host::open(uri) {
        Ok(h) => gather_on(Ok(&h), serve_running, plan),
        Err(e) => gather_on(Err(format!("{e:#}")), serve_running, plan),
    }
}

/// [`gather`] over a libvirt connection already open (or why there is none).
pub fn gather_on(
    host: Result<&crate::libvirt::Host, String>,
    serve_running: bool,
    plan: Option<&Plan>,
) -> HostFacts {
    let mut f = gather_host(host, serve_running, plan);
    if let Some(plan) = plan {
        f.resolved = host_names(plan).iter().map(|n| resolve(n)).collect();
    }
    f
}

/// What `create` checks before its long work ([`super::preflight::decide`]):
/// the host as [`gather`] reads it, without looking the cluster's names up
/// (a resolver that does not answer would hold the run for its timeouts, and
/// before infra they resolve nowhere yet).
pub fn gather_for_create(state: &StateDir, uri: &str, plan: &Plan) -> HostFacts {
    let serve_running = matches!(
        crate::serve::control::request(state, &crate::serve::control::Request::Ping),
        Ok(Some(_))
    );
    match crate::libvirt::Host::open(uri) {
        Ok(h) => gather_host(Ok(&h), serve_running, Some(plan)),
        Err(e) => gather_host(Err(format!("{e:#}")), serve_running, Some(plan)),
    }
}

fn gather_host(
    host: Result<&crate::libvirt::Host, String>,
    serve_running: bool,
    plan: Option<&Plan>,
) -> HostFacts {
    let kvm = crate::host::kvm::check();
    let mut f = HostFacts {
        kvm_usable: kvm.usable,
        kvm_reason: kvm.reason,
        nested: nested(),
        in_vm: read("/proc/cpuinfo").is_some_and(|c| {
            c.lines()
                .any(|l| l.starts_with("flags") && l.split_whitespace().any(|w| w == "hypervisor"))
        }),
        cpu_flags: read("/proc/cpuinfo")
            .map(|c| {
                crate::release::cpu_level::cpuinfo_flags(&c)
                    .into_iter()
                    .collect()
            })
            .unwrap_or_default(),
        selinux: match crate::host::security::selinux() {
            crate::host::security::Selinux::Absent => "absent",
            crate::host::security::Selinux::Permissive => "permissive",
            crate::host::security::Selinux::Enforcing => "enforcing",
        }
        .into(),
        apparmor: read("/sys/module/apparmor/parameters/enabled").is_some_and(|v| v.trim() == "Y"),
        etc_hosts: read("/etc/hosts").unwrap_or_default(),
        serve_running,
        commands: Some({
            let mut c = crate::rehearse::installer::tools_on_path();
            // The NFS export's server (storage: nfs), with its VFS backend.
            c.extend(crate::host::nfs::installed().map(|_| crate::host::nfs::SERVER.to_string()));
            c
        }),
        ..HostFacts::default()
    };
    match host {
        Ok(h) => {
            f.libvirt = Some(Libvirt {
                uri: h.uri.clone(),
                local: h.is_local(),
                version: h.conn.lib_version().unwrap_or(0),
                // QEMU's version, only from QEMU's driver (the test driver's is its own).
                hypervisor_version: h
                    .conn
                    .driver_type()
                    .is_ok_and(|t| t.eq_ignore_ascii_case("qemu"))
                    .then(|| h.conn.hyp_version().ok())
                    .flatten(),
            });
            f.networks = libvirt_networks(h).ok();
        }
        Err(e) => f.libvirt_error = Some(e),
    }
    (f.routes, f.interfaces) = host_links();
    f.ipv6 = Some(crate::host::ipv6::read());
    for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        if let Some(t) = read(file) {
            f.listening
                .extend(crate::host::sockets::parse_listening(&t, v6));
        }
    }
    if process_running("NetworkManager") {
        f.network_manager = Some(
            run(&["nmcli", "-t", "-f", "DEVICE,STATE", "device"])
                .map(|t| parse_nmcli_devices(&t))
                .unwrap_or_default(),
        );
    }
    f.clock = crate::host::clock::read().map(|mut c| {
        c.services = crate::host::clock::SERVICES
            .iter()
            .filter(|(comm, _)| process_running(comm))
            .map(|(_, name)| name.to_string())
            .collect();
        c
    });
    let (total, avail) = parse_meminfo(&read("/proc/meminfo").unwrap_or_default());
    f.memory_total_mib = total;
    f.memory_available_mib = avail;
    f.cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);

    let fw = firewall::Firewall {
        runner: &firewall::System,
    };
    match fw.probe() {
        Ok(p) => f.firewall = Some(firewall::decide(&p)),
        Err(e) => f.firewall_error = Some(format!("{e:#}")),
    }
    if let Some(plan) = plan {
        if f.firewall == Some(firewall::Backend::Firewalld) {
            f.firewall_zone = run(&[
                "firewall-cmd",
                &format!("--get-zone-of-interface={}", plan.network.bridge),
            ])
            .map(|z| z.trim().to_string())
            .filter(|z| !z.is_empty());
        }
        let dir = &plan.libvirt.pool_path;
        let existing = dir
            .ancestors()
            .find(|d| d.exists())
            .unwrap_or(dir)
            .to_path_buf();
        f.pool_free_bytes = crate::host::free_bytes(&existing);
        f.pool_rotational = rotational(&existing);
        f.pool_dir_context = crate::host::security::selinux_context(&existing);
        f.pool_path = Some(dir.clone());
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nmcli_and_meminfo_parse() {
        let d =
            parse_nmcli_devices("eth0:connected\nvirbr0:connected (externally)\nveth1:unmanaged\n");
        assert_eq!(d[1].device, "virbr0");
        assert_eq!(d[1].state, "connected (externally)");
        assert_eq!(d[2].state, "unmanaged");
        assert_eq!(
            parse_meminfo(
                "MemTotal:       65843372 kB\nMemFree: 1 kB\nMemAvailable:   40000000 kB\n"
            ),
            (64300, 39062)
        );
    }
}
