//! libvirt XML for the plan's objects: network, pool, volumes, domains. Pure text;
//! the few facts only the host knows (volume paths, the domain type) come in as
//! arguments.

use std::fmt::Write;

use super::esc;
use super::owner::{network_owner, node_owner};
use crate::plan::{Boot, DiskKind, Node, Plan, RecordType};
use crate::spec::{Firmware, Graphics, NetworkMode};

/// The cluster's libvirt network: NAT with DHCP reservations and every DNS record,
/// or an existing host bridge.
pub fn network_xml(plan: &Plan) -> String {
    let n = &plan.network;
    let mut x = String::new();
    let _ = writeln!(
        x,
        "<network xmlns:dnsmasq='http://libvirt.org/schemas/network/dnsmasq/1.0'>"
    );
    let _ = writeln!(x, "  <name>{}</name>", esc(&n.name));
    let _ = writeln!(
        x,
        "  <metadata>\n    {}\n  </metadata>",
        network_owner(plan).element()
    );
    if n.mode == NetworkMode::Bridge {
        let _ = writeln!(x, "  <forward mode='bridge'/>");
        let _ = writeln!(x, "  <bridge name='{}'/>", esc(&n.bridge));
        x.push_str("</network>\n");
        return x;
    }
    if n.ipv6.is_some() {
        // NAT66 (libvirt 6.5.0, formatnetwork.html "IPv6 NAT based network"):
        // the lab's unique local addresses reach the outside through the host's
        // own IPv6 address, as IPv4 does. Without it libvirt routes IPv6 unNATed.
        let _ = writeln!(
            x,
            "  <forward mode='nat'>\n    <nat ipv6='yes'/>\n  </forward>"
        );
    } else {
        let _ = writeln!(x, "  <forward mode='nat'/>");
    }
    let _ = writeln!(
        x,
        "  <bridge name='{}' stp='on' delay='0'/>",
        esc(&n.bridge)
    );
    // localOnly: names under the cluster domain are answered here, never forwarded.
    let _ = writeln!(x, "  <domain name='{}' localOnly='yes'/>", esc(&n.domain));
    let _ = writeln!(x, "  <dns>");
    // Group names per address, in plan order: dnsmasq answers PTR with the first,
    // so the plan's PTR target goes first (single node: its own name, not api).
    let mut hosts: Vec<(String, Vec<String>)> = Vec::new();
    for r in plan
        .dns
        .iter()
        .filter(|r| matches!(r.kind, RecordType::A | RecordType::AAAA))
    {
        match hosts.iter_mut().find(|(ip, _)| *ip == r.value) {
            Some((_, names)) => names.push(r.name.clone()),
            None => hosts.push((r.value.clone(), vec![r.name.clone()])),
        }
    }
    for (ip, mut names) in hosts {
        ptr_first(plan, &ip, &mut names);
        let _ = writeln!(x, "    <host ip='{}'>", esc(&ip));
        for name in names {
            let _ = writeln!(x, "      <hostname>{}</hostname>", esc(&name));
        }
        let _ = writeln!(x, "    </host>");
    }
    let _ = writeln!(x, "  </dns>");
    if let (Some(gateway), Some(netmask)) = (n.gateway, n.netmask) {
        let _ = writeln!(x, "  <ip address='{gateway}' netmask='{netmask}'>");
        let _ = writeln!(x, "    <dhcp>");
        if let Some(dhcp) = &n.dhcp {
            let _ = writeln!(
                x,
                "      <range start='{}' end='{}'/>",
                dhcp.start, dhcp.end
            );
        }
        for r in &n.reservations {
            let _ = writeln!(
                x,
                "      <host mac='{}' name='{}' ip='{}'/>",
                esc(&r.mac),
                esc(&r.hostname),
                r.ip
            );
        }
        let _ = writeln!(x, "    </dhcp>");
        let _ = writeln!(x, "  </ip>");
    }
    if let Some(v6) = &n.ipv6 {
        ipv6_element(&mut x, v6);
    }
    // The load balancer's addresses live on the host side of the bridge.
    for a in &n.host_addresses {
        let _ = writeln!(x, "  <ip address='{a}' prefix='32'/>");
    }
    for a in n.ipv6.iter().flat_map(|v6| &v6.host_addresses) {
        let _ = writeln!(x, "  <ip family='ipv6' address='{a}' prefix='128'/>");
    }
    let wildcard: Vec<_> = plan
        .dns
        .iter()
        .filter(|r| matches!(r.kind, RecordType::Wildcard | RecordType::Wildcard6))
        .collect();
    if !wildcard.is_empty() {
        let _ = writeln!(x, "  <dnsmasq:options>");
        for r in wildcard {
            let domain = r.name.trim_start_matches("*.");
            let _ = writeln!(
                x,
                "    <dnsmasq:option value='address=/{}/{}'/>",
                esc(domain),
                esc(&r.value)
            );
        }
        let _ = writeln!(x, "  </dnsmasq:options>");
    }
    x.push_str("</network>\n");
    x
}

/// The network's IPv6 `<ip>`: libvirt's dnsmasq sends router advertisements
/// for it and answers DHCPv6, each node reserved by its DUID-LL
/// (plan::ipv6, which says why not by MAC).
fn ipv6_element(x: &mut String, v6: &crate::plan::ipv6::Ipv6Network) {
    let _ = writeln!(
        x,
        "  <ip family='ipv6' address='{}' prefix='{}'>",
        v6.gateway,
        v6.cidr.prefix_len()
    );
    let _ = writeln!(x, "    <dhcp>");
    let _ = writeln!(
        x,
        "      <range start='{}' end='{}'/>",
        v6.dhcp.start, v6.dhcp.end
    );
    for r in &v6.reservations {
        let _ = writeln!(
            x,
            "      <host id='{}' name='{}' ip='{}'/>",
            esc(&r.id),
            esc(&r.hostname),
            r.ip
        );
    }
    let _ = writeln!(x, "    </dhcp>");
    let _ = writeln!(x, "  </ip>");
}

/// A directory pool.
pub fn pool_xml(name: &str, path: &str) -> String {
    format!(
        "<pool type='dir'>\n  <name>{}</name>\n  <target>\n    <path>{}</path>\n  </target>\n</pool>\n",
        esc(name),
        esc(path)
    )
}

/// A qcow2 volume; with `backing`, a thin overlay on that path.
pub fn qcow2_volume_xml(name: &str, capacity_bytes: u64, backing: Option<&str>) -> String {
    let mut x = format!(
        "<volume type='file'>\n  <name>{}</name>\n  <capacity unit='bytes'>{capacity_bytes}</capacity>\n  <allocation unit='bytes'>0</allocation>\n  <target>\n    <format type='qcow2'/>\n  </target>\n",
        esc(name)
    );
    if let Some(b) = backing {
        let _ = write!(
            x,
            "  <backingStore>\n    <path>{}</path>\n    <format type='qcow2'/>\n  </backingStore>\n",
            esc(b)
        );
    }
    x.push_str("</volume>\n");
    x
}

/// A raw volume filled by upload (Ignition configs, ISOs). Mode 0600: an Ignition
/// config can hold the pull secret.
pub fn raw_volume_xml(name: &str, capacity_bytes: u64) -> String {
    format!(
        "<volume type='file'>\n  <name>{}</name>\n  <capacity unit='bytes'>{capacity_bytes}</capacity>\n  <target>\n    <format type='raw'/>\n    <permissions>\n      <mode>0600</mode>\n    </permissions>\n  </target>\n</volume>\n",
        esc(name)
    )
}

/// A raw volume for installation media the BMC streams in: readable by the
/// hypervisor like any CD-ROM image (no mode of its own).
pub fn media_volume_xml(name: &str, capacity_bytes: u64) -> String {
    format!(
        "<volume><name>{}</name><capacity unit='bytes'>{capacity_bytes}</capacity><target><format type='raw'/></target></volume>",
        esc(name)
    )
}

/// How the domain runs: decided on the host (see `host::kvm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    /// QEMU's TCG: a named CPU model with the level the stream needs.
    Tcg,
}

/// The CPU model used under TCG when the release's stream is not known: the
/// oldest QEMU model with every x86-64-v2 feature (SSE3, SSSE3, SSE4.1/4.2,
/// POPCNT, CX16, LAHF), which RHEL 9-based CoreOS needs.
pub const TCG_CPU_MODEL: &str = "Nehalem";

/// The named model a node gets, if any (`None`: the host's CPU, KVM only):
/// `libvirt.cpu_model` when set, else under TCG the model for the stream's level.
pub fn cpu_model(plan: &Plan, accel: Accel) -> Option<&str> {
    match (&plan.libvirt.cpu_model, accel) {
        (Some(m), _) => Some(m),
        (None, Accel::Kvm) => None,
        (None, Accel::Tcg) => Some(
            plan.libvirt
                .cpu_level
                .map_or(TCG_CPU_MODEL, crate::release::cpu_level::tcg_model),
        ),
    }
}

/// Paths on the libvirt host that only exist once volumes are created.
pub struct NodePaths<'a> {
    pub ignition: Option<&'a str>,
    pub console_log: &'a str,
    /// The volume (in the plan's pool) in the CD-ROM drive of an ISO node.
    pub cdrom: Option<&'a str>,
}

pub fn domain_xml(plan: &Plan, node: &Node, accel: Accel, paths: &NodePaths<'_>) -> String {
    let mut x = String::new();
    let kind = match accel {
        Accel::Kvm => "kvm",
        Accel::Tcg => "qemu",
    };
    let _ = writeln!(x, "<domain type='{kind}'>");
    let _ = writeln!(x, "  <name>{}</name>", esc(&node.name));
    let _ = writeln!(x, "  <uuid>{}</uuid>", node.uuid);
    let _ = writeln!(
        x,
        "  <metadata>\n    {}\n  </metadata>",
        node_owner(plan, node).element()
    );
    let _ = writeln!(x, "  <memory unit='MiB'>{}</memory>", node.memory_mib);
    let _ = writeln!(x, "  <vcpu>{}</vcpu>", node.vcpus);
    if let Some(ign) = paths.ignition {
        let _ = writeln!(
            x,
            "  <sysinfo type='fwcfg'>\n    <entry name='opt/com.coreos/config' file='{}'/>\n  </sysinfo>",
            esc(ign)
        );
    }
    let firmware = match plan.libvirt.firmware {
        Firmware::Uefi => " firmware='efi'",
        Firmware::Bios => "",
    };
    let _ = writeln!(x, "  <os{firmware}>");
    let _ = writeln!(x, "    <type arch='x86_64' machine='q35'>hvm</type>");
    let _ = writeln!(x, "  </os>");
    // ACPI is also what makes QEMU expose fw_cfg to the guest kernel.
    let _ = writeln!(x, "  <features>\n    <acpi/>\n    <apic/>\n  </features>");
    match cpu_model(plan, accel) {
        None => {
            let _ = writeln!(x, "  <cpu mode='host-passthrough' check='none'/>");
        }
        Some(model) => {
            let _ = writeln!(
                x,
                "  <cpu mode='custom' match='exact' check='none'>\n    <model fallback='forbid'>{}</model>\n  </cpu>",
                esc(model)
            );
        }
    }
    let _ = writeln!(x, "  <clock offset='utc'/>");
    let _ = writeln!(x, "  <on_poweroff>destroy</on_poweroff>");
    let _ = writeln!(x, "  <on_reboot>restart</on_reboot>");
    let _ = writeln!(x, "  <on_crash>destroy</on_crash>");
    let _ = writeln!(x, "  <devices>");
    // Disk first in boot order, then the CD-ROM (agent and ISO installs come back
    // from disk after the install's reboot).
    let mut order = 1;
    for (i, d) in node.disks.iter().enumerate() {
        let dev = format!("vd{}", (b'a' + i as u8) as char);
        let boot = if d.kind == DiskKind::Root {
            let s = format!("\n      <boot order='{order}'/>");
            order += 1;
            s
        } else {
            String::new()
        };
        let _ = writeln!(
            x,
            "    <disk type='volume' device='disk'>\n      <driver name='qemu' type='qcow2' discard='unmap'/>\n      <source pool='{}' volume='{}'/>\n      <target dev='{dev}' bus='virtio'/>{boot}\n    </disk>",
            esc(&plan.libvirt.pool),
            esc(&d.volume)
        );
    }
    match (node.boot, paths.cdrom) {
        (Boot::DiskFwCfg, _) => {}
        // The live ISO behind the disk: an empty disk has nothing to boot, so the
        // firmware falls through to the CD; once the install wrote the disk, the
        // disk boots (no loop back into the installer).
        (_, Some(volume)) => {
            let _ = writeln!(
                x,
                "    <disk type='volume' device='cdrom'>\n      <driver name='qemu' type='raw'/>\n      <source pool='{}' volume='{}'/>\n      <target dev='sda' bus='sata'/>\n      <readonly/>\n      <boot order='{order}'/>\n    </disk>",
                esc(&plan.libvirt.pool),
                esc(volume)
            );
        }
        // An empty drive that the ISO (or the BMC's virtual media) is inserted into.
        (_, None) => {
            let _ = writeln!(
                x,
                "    <disk type='file' device='cdrom'>\n      <driver name='qemu' type='raw'/>\n      <target dev='sda' bus='sata'/>\n      <readonly/>\n      <boot order='{order}'/>\n    </disk>"
            );
        }
    }
    let _ = writeln!(
        x,
        "    <interface type='network'>\n      <source network='{}'/>\n      <mac address='{}'/>\n      <model type='virtio'/>\n    </interface>",
        esc(&plan.network.name),
        esc(&node.mac)
    );
    let _ = writeln!(
        x,
        "    <serial type='pty'>\n      <log file='{}' append='on'/>\n      <target port='0'/>\n    </serial>\n    <console type='pty'>\n      <target type='serial' port='0'/>\n    </console>",
        esc(paths.console_log)
    );
    x.push_str(&graphics_xml(plan.libvirt.graphics));
    let _ = writeln!(
        x,
        "    <rng model='virtio'>\n      <backend model='random'>/dev/urandom</backend>\n    </rng>"
    );
    let _ = writeln!(x, "  </devices>");
    x.push_str("</domain>\n");
    x
}

/// The screen and its display server, or nothing (headless: the serial console
/// alone). Loopback only, so no password: a screen is reached from the libvirt
/// host itself, or through the ssh tunnel virt-manager opens for qemu+ssh.
/// A virtio GPU: the VGA-compatible kind for the firmware's screen, which
/// CoreOS drives with virtio_gpu.
pub fn graphics_xml(graphics: Graphics) -> String {
    let kind = match graphics {
        Graphics::None => return String::new(),
        Graphics::Vnc => "vnc",
        Graphics::Spice => "spice",
    };
    format!(
        "    <graphics type='{kind}' autoport='yes' listen='127.0.0.1'>\n      <listen type='address' address='127.0.0.1'/>\n    </graphics>\n    <video>\n      <model type='virtio'/>\n    </video>\n"
    )
}

/// Where a node's serial console is logged on the libvirt host.
pub fn console_log_path(domain: &str) -> String {
    format!("/var/log/libvirt/qemu/{domain}-console.log")
}

/// Put the name the plan's PTR record for `ip` gives first among `names`.
pub fn ptr_first(plan: &Plan, ip: &str, names: &mut [String]) {
    let rev = match ip.parse() {
        Ok(std::net::IpAddr::V4(a)) => crate::addressing::reverse_name(a),
        Ok(std::net::IpAddr::V6(a)) => crate::addressing::reverse_name6(a),
        Err(_) => return,
    };
    let Some(ptr) = plan
        .dns
        .iter()
        .find(|r| r.kind == RecordType::PTR && r.name == rev)
    else {
        return;
    };
    if let Some(i) = names.iter().position(|n| *n == ptr.value) {
        names[..=i].rotate_right(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::CpuLevel;

    fn cpu_element(plan: &Plan, accel: Accel) -> String {
        let paths = NodePaths {
            ignition: None,
            console_log: "/c.log",
            cdrom: None,
        };
        let xml = domain_xml(plan, &plan.nodes[0], accel, &paths);
        let start = xml.find("  <cpu").unwrap();
        let end = start + xml[start..].find("<clock").unwrap();
        xml[start..end].trim().to_string()
    }

    /// The stream's level picks the TCG model (Nehalem for x86-64-v2,
    /// Haswell-noTSX-IBRS for x86-64-v3, which QEMU's TCG runs since 7.2);
    /// KVM passes the host's CPU through; `libvirt.cpu_model` wins for both.
    #[test]
    fn the_cpu_model_follows_the_level_and_the_cluster_file() {
        let mut plan = crate::plan::from_yaml(
            "cluster: lab1\ndistribution: okd\nrehearsal: true\nssh_keys: ['ssh-ed25519 AAAA k']\n",
        );
        let model = |m: &str| {
            format!("<cpu mode='custom' match='exact' check='none'>\n    <model fallback='forbid'>{m}</model>\n  </cpu>")
        };
        assert_eq!(cpu_element(&plan, Accel::Tcg), model("Nehalem"));
        plan.libvirt.cpu_level = Some(CpuLevel::V2);
        assert_eq!(cpu_element(&plan, Accel::Tcg), model("Nehalem"));
        plan.libvirt.cpu_level = Some(CpuLevel::V3);
        assert_eq!(cpu_element(&plan, Accel::Tcg), model("Haswell-noTSX-IBRS"));
        assert_eq!(
            cpu_element(&plan, Accel::Kvm),
            "<cpu mode='host-passthrough' check='none'/>"
        );
        plan.libvirt.cpu_model = Some("EPYC-Rome".into());
        assert_eq!(cpu_element(&plan, Accel::Tcg), model("EPYC-Rome"));
        assert_eq!(cpu_element(&plan, Accel::Kvm), model("EPYC-Rome"));
    }

    /// `libvirt.graphics`: a screen on loopback with a video device, or the
    /// headless domain of before (a rehearsal's default); a real cluster's
    /// default is VNC.
    #[test]
    fn the_screen_follows_libvirt_graphics() {
        let paths = NodePaths {
            ignition: None,
            console_log: "/c.log",
            cdrom: None,
        };
        let base = "cluster: lab1\ndistribution: okd\nssh_keys: ['ssh-ed25519 AAAA k']\n";
        let xml_of = |extra: &str| {
            let plan = crate::plan::from_yaml(&format!("{base}{extra}"));
            domain_xml(&plan, &plan.nodes[0], Accel::Kvm, &paths)
        };
        let screen = |xml: &str| {
            let doc = roxmltree::Document::parse(xml).unwrap();
            let g = doc.descendants().find(|n| n.has_tag_name("graphics"));
            let video = doc.descendants().find(|n| n.has_tag_name("video"));
            g.map(|g| {
                let listen = g.children().find(|n| n.has_tag_name("listen")).unwrap();
                (
                    g.attribute("type").unwrap().to_string(),
                    g.attribute("autoport").unwrap().to_string(),
                    g.attribute("listen").unwrap().to_string(),
                    listen.attribute("address").unwrap().to_string(),
                    g.attribute("passwd").is_some(),
                    video.is_some(),
                )
            })
            .or_else(|| video.map(|_| panic!("a video device without a screen")))
        };
        let on = |kind: &str| {
            Some((
                kind.to_string(),
                "yes".to_string(),
                "127.0.0.1".to_string(),
                "127.0.0.1".to_string(),
                false,
                true,
            ))
        };
        assert_eq!(screen(&xml_of("")), on("vnc"));
        assert_eq!(screen(&xml_of("rehearsal: true\n")), None);
        assert_eq!(screen(&xml_of("libvirt: {graphics: spice}\n")), on("spice"));
        assert_eq!(screen(&xml_of("libvirt: {graphics: none}\n")), None);
        assert_eq!(
            screen(&xml_of("rehearsal: true\nlibvirt: {graphics: vnc}\n")),
            on("vnc")
        );
    }
}
