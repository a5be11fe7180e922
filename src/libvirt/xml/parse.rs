//! Reading what libvirt returns: a domain definition as the BMC and destroy see it,
//! and the subnets and bridge of a network.

use anyhow::{Context, Result};
use ipnet::Ipv4Net;
use roxmltree::Document;

use super::owner::{Owner, OWNER_NS};
use super::{boot_order, child, device_class, devices};
use crate::spec::Firmware;

/// A class of boot device, as per-device `<boot order>` and `<os><boot dev>` name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootDevice {
    Disk,
    Cdrom,
    Network,
}

impl BootDevice {
    /// Every class, this one first, then the others in the order a lab wants
    /// (disk before CD-ROM before network).
    pub fn order(self) -> [BootDevice; 3] {
        use BootDevice::*;
        match self {
            Disk => [Disk, Cdrom, Network],
            Cdrom => [Cdrom, Disk, Network],
            Network => [Network, Disk, Cdrom],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cdrom {
    pub target: String,
    pub bus: String,
    /// `(pool, volume)` for a volume source.
    pub volume: Option<(String, String)>,
    /// File path for a file source.
    pub file: Option<String>,
}

impl Cdrom {
    pub fn inserted(&self) -> bool {
        self.volume.is_some() || self.file.is_some()
    }
}

/// What is read from a domain definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainView {
    pub name: String,
    pub uuid: String,
    pub vcpus: u32,
    pub memory_kib: u64,
    pub machine: String,
    pub firmware: Firmware,
    pub macs: Vec<String>,
    /// `(target dev, source path or pool/volume)`.
    pub disks: Vec<(String, Option<String>)>,
    pub cdroms: Vec<Cdrom>,
    /// Device class booted first, from per-device orders or `<os><boot dev>`.
    pub first_boot: Option<BootDevice>,
    pub owner: Option<Owner>,
    /// `<os><type arch>` (`x86_64`) when written.
    pub arch: Option<String>,
    /// `<cpu><topology>`: (sockets, cores, threads) when written.
    pub cpu_topology: Option<(u32, u32, u32)>,
    /// `<cpu mode>` and `<cpu><model>` when written.
    pub cpu_mode: Option<String>,
    pub cpu_model: Option<String>,
    /// The firmware is a secure-boot OVMF: `<loader secure='yes'>`, a
    /// secboot/ms loader, or the `secure-boot` firmware feature enabled.
    pub secure_boot: bool,
}

impl DomainView {
    fn has(&self, class: BootDevice) -> bool {
        match class {
            BootDevice::Cdrom => !self.cdroms.is_empty(),
            BootDevice::Disk => !self.disks.is_empty(),
            BootDevice::Network => !self.macs.is_empty(),
        }
    }

    /// The class that boots first when `wanted` is put first, given the devices
    /// the domain has (a class without devices is skipped).
    pub fn effective_first(&self, wanted: BootDevice) -> Option<BootDevice> {
        wanted.order().into_iter().find(|c| self.has(*c))
    }
}

fn unit_to_kib(value: u64, unit: &str) -> u64 {
    match unit {
        "b" | "bytes" => value / 1024,
        "KB" => value * 1000 / 1024,
        "M" | "MiB" => value * 1024,
        "MB" => value * 1_000_000 / 1024,
        "G" | "GiB" => value * 1024 * 1024,
        "GB" => value * 1_000_000_000 / 1024,
        _ => value,
    }
}

/// Reads a domain definition.
pub fn domain(xml: &str) -> Result<DomainView> {
    let doc = Document::parse(xml).context("parsing domain xml")?;
    let root = doc.root_element();
    let text = |name: &str| {
        child(root, name)
            .and_then(|n| n.text())
            .map(str::trim)
            .unwrap_or("")
            .to_string()
    };
    let name = text("name");
    let uuid = text("uuid");
    let vcpus = text("vcpu").parse().unwrap_or(1);
    let memory_kib = child(root, "memory")
        .and_then(|m| {
            Some(unit_to_kib(
                m.text()?.trim().parse().ok()?,
                m.attribute("unit").unwrap_or("KiB"),
            ))
        })
        .unwrap_or(0);
    let os = child(root, "os");
    let machine = os
        .and_then(|o| child(o, "type"))
        .and_then(|t| t.attribute("machine"))
        .unwrap_or("")
        .to_string();
    let arch = os
        .and_then(|o| child(o, "type"))
        .and_then(|t| t.attribute("arch"))
        .map(str::to_string);
    let firmware = match os {
        Some(o)
            if o.attribute("firmware") == Some("efi")
                || child(o, "loader").is_some_and(|l| l.attribute("type") == Some("pflash")) =>
        {
            Firmware::Uefi
        }
        _ => Firmware::Bios,
    };
    let mut macs = Vec::new();
    let mut disks = Vec::new();
    let mut cdroms = Vec::new();
    let mut ordered: Vec<(u32, BootDevice)> = Vec::new();
    for d in devices(root)
        .into_iter()
        .flat_map(|devs| devs.children().filter(|c| c.is_element()))
    {
        let Some(class) = device_class(&d) else {
            continue;
        };
        let source = child(d, "source");
        let target = child(d, "target");
        let target_attr = |a: &str| {
            target
                .and_then(|t| t.attribute(a))
                .unwrap_or("")
                .to_string()
        };
        match class {
            BootDevice::Network => {
                if let Some(mac) = child(d, "mac").and_then(|m| m.attribute("address")) {
                    macs.push(mac.to_ascii_lowercase());
                }
            }
            BootDevice::Cdrom => cdroms.push(Cdrom {
                target: target_attr("dev"),
                bus: target_attr("bus"),
                volume: source.and_then(|s| {
                    Some((
                        s.attribute("pool")?.to_string(),
                        s.attribute("volume")?.to_string(),
                    ))
                }),
                file: source.and_then(|s| s.attribute("file")).map(str::to_string),
            }),
            BootDevice::Disk => {
                let src = source.and_then(|s| {
                    s.attribute("file")
                        .or_else(|| s.attribute("dev"))
                        .map(str::to_string)
                        .or_else(|| {
                            Some(format!(
                                "{}/{}",
                                s.attribute("pool")?,
                                s.attribute("volume")?
                            ))
                        })
                });
                disks.push((target_attr("dev"), src));
            }
        }
        if let Some(order) = boot_order(&d) {
            ordered.push((order, class));
        }
    }
    ordered.sort_by_key(|(o, _)| *o);
    let first_boot = match ordered.first() {
        Some((_, class)) => Some(*class),
        None => match os
            .and_then(|o| child(o, "boot"))
            .and_then(|b| b.attribute("dev"))
        {
            Some("cdrom") => Some(BootDevice::Cdrom),
            Some("network") => Some(BootDevice::Network),
            Some("hd") => Some(BootDevice::Disk),
            _ => None,
        },
    };
    let owner = child(root, "metadata")
        .and_then(|m| {
            m.children().find(|e| {
                e.is_element()
                    && e.tag_name().namespace() == Some(OWNER_NS)
                    && e.tag_name().name() == "owner"
            })
        })
        .and_then(Owner::from_node);
    let cpu = child(root, "cpu");
    let cpu_topology = cpu.and_then(|c| child(c, "topology")).and_then(|t| {
        let n = |a: &str| t.attribute(a)?.parse::<u32>().ok().filter(|v| *v > 0);
        // dies and clusters multiply the cores of a socket
        let per = n("dies").unwrap_or(1) * n("clusters").unwrap_or(1);
        Some((n("sockets")?, n("cores")? * per, n("threads")?))
    });
    let cpu_mode = cpu.and_then(|c| c.attribute("mode")).map(str::to_string);
    let cpu_model = cpu
        .and_then(|c| child(c, "model"))
        .and_then(|m| m.text())
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string);
    let secure_boot = os.is_some_and(secure_boot_firmware);
    Ok(DomainView {
        name,
        uuid,
        vcpus,
        memory_kib,
        machine,
        firmware,
        macs,
        disks,
        cdroms,
        first_boot,
        owner,
        arch,
        cpu_topology,
        cpu_mode,
        cpu_model,
        secure_boot,
    })
}

/// Does `<os>` name a firmware that verifies what it boots?
fn secure_boot_firmware(os: roxmltree::Node) -> bool {
    let loader = child(os, "loader");
    let feature = child(os, "firmware").is_some_and(|f| {
        f.children().any(|x| {
            x.has_tag_name("feature")
                && x.attribute("name") == Some("secure-boot")
                && x.attribute("enabled") == Some("yes")
        })
    });
    let loader_secure = loader.is_some_and(|l| {
        let path = l.text().unwrap_or("");
        l.attribute("secure") == Some("yes") || path.contains("secboot") || path.ends_with(".ms.fd")
    });
    feature || loader_secure
}

/// Disks and fw_cfg files a domain uses, from its XML: (pool, volume) pairs for
/// `type='volume'` disks, and plain paths for files.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DomainStorage {
    pub volumes: Vec<(String, String)>,
    pub files: Vec<String>,
}

pub fn domain_storage(xml: &str) -> DomainStorage {
    let mut out = DomainStorage::default();
    let Ok(doc) = Document::parse(xml) else {
        return out;
    };
    for n in doc.descendants() {
        match n.tag_name().name() {
            "source" if n.parent().is_some_and(|p| p.tag_name().name() == "disk") => {
                if let (Some(pool), Some(vol)) = (n.attribute("pool"), n.attribute("volume")) {
                    out.volumes.push((pool.to_string(), vol.to_string()));
                } else if let Some(f) = n.attribute("file") {
                    out.files.push(f.to_string());
                }
            }
            "entry" if n.attribute("name") == Some("opt/com.coreos/config") => {
                if let Some(f) = n.attribute("file") {
                    out.files.push(f.to_string());
                }
            }
            _ => {}
        }
    }
    out
}

/// The networks a libvirt network XML declares (IPv4 only).
pub fn network_subnets(xml: &str) -> Vec<Ipv4Net> {
    let Ok(doc) = Document::parse(xml) else {
        return Vec::new();
    };
    doc.descendants()
        .filter(|n| n.tag_name().name() == "ip")
        .filter(|n| n.attribute("family").is_none_or(|f| f == "ipv4"))
        .filter_map(|n| {
            let addr: std::net::Ipv4Addr = n.attribute("address")?.parse().ok()?;
            let prefix = match (n.attribute("prefix"), n.attribute("netmask")) {
                (Some(p), _) => p.parse().ok()?,
                (None, Some(m)) => {
                    let m: std::net::Ipv4Addr = m.parse().ok()?;
                    u32::from(m).count_ones() as u8
                }
                (None, None) => 24,
            };
            Ipv4Net::new(addr, prefix).ok().map(|n| n.trunc())
        })
        .collect()
}

/// The IPv6 subnets of a libvirt network XML (`<ip family='ipv6'>`).
pub fn network_subnets6(xml: &str) -> Vec<ipnet::Ipv6Net> {
    let Ok(doc) = Document::parse(xml) else {
        return Vec::new();
    };
    doc.descendants()
        .filter(|n| n.tag_name().name() == "ip" && n.attribute("family") == Some("ipv6"))
        .filter_map(|n| {
            let addr: std::net::Ipv6Addr = n.attribute("address")?.parse().ok()?;
            let prefix = n.attribute("prefix").map_or(Some(64), |p| p.parse().ok())?;
            ipnet::Ipv6Net::new(addr, prefix).ok().map(|n| n.trunc())
        })
        .collect()
}

/// The bridge a libvirt network XML names.
pub fn network_bridge(xml: &str) -> Option<String> {
    let doc = Document::parse(xml).ok()?;
    doc.descendants()
        .find(|n| n.tag_name().name() == "bridge")
        .and_then(|n| n.attribute("name"))
        .map(str::to_string)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub const XML: &str = r#"<domain type='qemu'>
  <name>lab1-master-0</name>
  <uuid>6695eb01-f6a4-8304-79aa-97f2502e193f</uuid>
  <metadata>
    <shiftlab:owner xmlns:shiftlab="https://shiftlab.dev/xmlns/libvirt/1" cluster="lab1" role="ctlplane" node="lab1-master-0" version="0.1.0"/>
  </metadata>
  <memory unit='KiB'>8388608</memory>
  <vcpu placement='static'>4</vcpu>
  <os>
    <type arch='x86_64' machine='pc-q35-7.2'>hvm</type>
    <loader readonly='yes' type='rom'>/usr/share/seabios/bios.bin</loader>
    <boot dev='hd'/>
  </os>
  <devices>
    <disk type='file' device='disk'>
      <source file='/var/lib/libvirt/images/m0.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='network'>
      <mac address='52:54:00:AA:00:01'/>
      <source network='lab1'/>
    </interface>
  </devices>
</domain>
"#;

    #[test]
    fn reads_a_domain() {
        let v = domain(XML).unwrap();
        assert_eq!(v.name, "lab1-master-0");
        assert_eq!(v.vcpus, 4);
        assert_eq!(v.memory_kib, 8 << 20);
        assert_eq!(v.firmware, Firmware::Bios);
        assert_eq!(v.macs, vec!["52:54:00:aa:00:01"]);
        assert_eq!(
            v.disks,
            vec![(
                "vda".to_string(),
                Some("/var/lib/libvirt/images/m0.qcow2".to_string())
            )]
        );
        assert_eq!(v.first_boot, Some(BootDevice::Disk));
        assert_eq!(v.owner.as_ref().map(|o| o.cluster.as_str()), Some("lab1"));
        assert!(v.cdroms.is_empty());
        // No CD-ROM: wanting one first boots the disk.
        assert_eq!(v.effective_first(BootDevice::Cdrom), Some(BootDevice::Disk));
        assert_eq!(
            v.effective_first(BootDevice::Network),
            Some(BootDevice::Network)
        );
    }

    #[test]
    fn reads_cpu_topology_model_and_secure_boot() {
        let v = domain(XML).unwrap();
        assert_eq!(v.arch.as_deref(), Some("x86_64"));
        assert_eq!(
            (v.cpu_topology, v.cpu_model, v.secure_boot),
            (None, None, false)
        );
        let with = |cpu: &str, os: &str| {
            domain(
                &XML.replace("<devices>", &format!("{cpu}<devices>"))
                    .replace("<boot dev='hd'/>", &format!("<boot dev='hd'/>{os}")),
            )
            .unwrap()
        };
        let v = with(
            "<cpu mode='custom'><model fallback='allow'>Skylake-Client</model><topology sockets='2' dies='1' cores='3' threads='2'/></cpu>",
            "",
        );
        assert_eq!(v.cpu_topology, Some((2, 3, 2)));
        assert_eq!(v.cpu_model.as_deref(), Some("Skylake-Client"));
        assert_eq!(v.cpu_mode.as_deref(), Some("custom"));
        let v = with(
            "<cpu><topology sockets='1' dies='2' cores='2' threads='1'/></cpu>",
            "",
        );
        assert_eq!(v.cpu_topology, Some((1, 4, 1)), "dies multiply the cores");
        // the secure-boot firmware feature, a secure loader, a secboot image
        let efi = |inner: &str| {
            XML.replace("<os>", "<os firmware='efi'>")
                .replace("<boot dev='hd'/>", inner)
        };
        let feature =
            "<firmware><feature enabled='yes' name='secure-boot'/></firmware><boot dev='hd'/>";
        assert!(domain(&efi(feature)).unwrap().secure_boot);
        let off = "<firmware><feature enabled='no' name='secure-boot'/></firmware><boot dev='hd'/>";
        assert!(!domain(&efi(off)).unwrap().secure_boot);
        let plain = XML.replace(
            "<loader readonly='yes' type='rom'>/usr/share/seabios/bios.bin</loader>",
            "<loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader>",
        );
        assert!(!domain(&plain).unwrap().secure_boot);
        for loader in [
            "<loader readonly='yes' secure='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader>",
            "<loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.secboot.fd</loader>",
            "<loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.ms.fd</loader>",
        ] {
            let x = XML.replace(
                "<loader readonly='yes' type='rom'>/usr/share/seabios/bios.bin</loader>",
                loader,
            );
            assert!(domain(&x).unwrap().secure_boot, "{loader}");
        }
    }

    #[test]
    fn storage_of_a_domain() {
        let xml = "<domain><sysinfo type='fwcfg'><entry name='opt/com.coreos/config' file='/p/n.ign'/></sysinfo>\
<devices><disk type='volume'><source pool='shiftlab' volume='n.qcow2'/></disk>\
<disk type='file' device='cdrom'><source file='/p/x.iso'/></disk><disk type='file' device='cdrom'/></devices></domain>";
        let s = domain_storage(xml);
        assert_eq!(s.volumes, vec![("shiftlab".into(), "n.qcow2".into())]);
        assert_eq!(
            s.files,
            vec!["/p/n.ign".to_string(), "/p/x.iso".to_string()]
        );
    }

    #[test]
    fn subnets_and_bridge_of_a_network() {
        let xml = "<network><ip address='192.168.122.1' netmask='255.255.255.0'/><ip address='10.0.0.1' prefix='16'/><ip family='ipv6' address='fd00::1' prefix='64'/></network>";
        assert_eq!(
            network_subnets(xml),
            vec![
                "192.168.122.0/24".parse::<Ipv4Net>().unwrap(),
                "10.0.0.0/16".parse().unwrap()
            ]
        );
        assert_eq!(
            network_bridge("<network><bridge name='virbr0'/></network>").as_deref(),
            Some("virbr0")
        );
    }
}
