//! Pure reading and editing of libvirt domain XML. Edits are splices of the
//! original text at element ranges, so everything the BMC does not manage is
//! kept byte for byte.

use anyhow::{anyhow, Context, Result};
use roxmltree::{Document, Node};

use super::machine::BootState;
use super::model::{BootEnabled, BootMode, BootTarget};

/// XML namespace of the BMC's own state inside `<metadata>`.
pub const BMC_NS: &str = "https://shiftlab.dev/xmlns/libvirt/bmc/1";
/// XML namespace of shiftlab's ownership metadata.
pub const OWNER_NS: &str = "https://shiftlab.dev/xmlns/libvirt/1";

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

/// Media the BMC inserted: the URL a client asked for and the volume used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRecord {
    pub image: String,
    pub pool: String,
    pub volume: String,
}

/// BMC state kept in the domain definition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BmcMeta {
    pub boot: Option<BootState>,
    pub media: Option<MediaRecord>,
}

/// What the BMC reads from a domain definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainView {
    pub name: String,
    pub uuid: String,
    pub vcpus: u32,
    pub memory_kib: u64,
    pub machine: String,
    pub mode: BootMode,
    pub macs: Vec<String>,
    /// `(target dev, source path or volume)`.
    pub disks: Vec<(String, Option<String>)>,
    pub cdroms: Vec<Cdrom>,
    /// Device class booted first, from per-device orders or `<os><boot dev>`.
    pub first_boot: BootTarget,
    pub meta: BmcMeta,
    pub owner_cluster: Option<String>,
}

fn child<'a, 'i>(n: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    n.children().find(|c| {
        c.is_element() && c.tag_name().name() == name && c.tag_name().namespace().is_none()
    })
}

fn children<'a, 'i: 'a>(n: Node<'a, 'i>, name: &'a str) -> impl Iterator<Item = Node<'a, 'i>> + 'a {
    n.children().filter(move |c| {
        c.is_element() && c.tag_name().name() == name && c.tag_name().namespace().is_none()
    })
}

fn devices<'a, 'i>(root: Node<'a, 'i>) -> Option<Node<'a, 'i>> {
    child(root, "devices")
}

fn is_cdrom(n: &Node) -> bool {
    n.tag_name().name() == "disk" && n.attribute("device") == Some("cdrom")
}

fn is_disk(n: &Node) -> bool {
    n.tag_name().name() == "disk" && matches!(n.attribute("device"), None | Some("disk"))
}

fn boot_order(n: &Node) -> Option<u32> {
    child(*n, "boot")
        .and_then(|b| b.attribute("order"))
        .and_then(|o| o.parse().ok())
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

fn parse_boot_state(n: Node) -> Option<BootState> {
    let target = BootTarget::parse(n.attribute("boot-target")?)?;
    let enabled = BootEnabled::parse(n.attribute("boot-enabled")?)?;
    let previous = match (n.attribute("prev-target"), n.attribute("prev-enabled")) {
        (Some(t), Some(e)) => Some((BootTarget::parse(t)?, BootEnabled::parse(e)?)),
        _ => None,
    };
    Some(BootState {
        target,
        enabled,
        previous,
    })
}

/// Reads a domain definition.
pub fn parse(xml: &str) -> Result<DomainView> {
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
    let mode = match os {
        Some(o)
            if o.attribute("firmware") == Some("efi")
                || child(o, "loader").is_some_and(|l| l.attribute("type") == Some("pflash")) =>
        {
            BootMode::UEFI
        }
        _ => BootMode::Legacy,
    };
    let mut macs = Vec::new();
    let mut disks = Vec::new();
    let mut cdroms = Vec::new();
    let mut ordered: Vec<(u32, BootTarget)> = Vec::new();
    if let Some(devs) = devices(root) {
        for d in devs.children().filter(|c| c.is_element()) {
            let class = if d.tag_name().name() == "interface" {
                if let Some(mac) = child(d, "mac").and_then(|m| m.attribute("address")) {
                    macs.push(mac.to_ascii_lowercase());
                }
                Some(BootTarget::Pxe)
            } else if is_cdrom(&d) {
                let source = child(d, "source");
                let target = child(d, "target");
                cdroms.push(Cdrom {
                    target: target
                        .and_then(|t| t.attribute("dev"))
                        .unwrap_or("")
                        .to_string(),
                    bus: target
                        .and_then(|t| t.attribute("bus"))
                        .unwrap_or("")
                        .to_string(),
                    volume: source.and_then(|s| {
                        Some((
                            s.attribute("pool")?.to_string(),
                            s.attribute("volume")?.to_string(),
                        ))
                    }),
                    file: source.and_then(|s| s.attribute("file")).map(str::to_string),
                });
                Some(BootTarget::Cd)
            } else if is_disk(&d) {
                let dev = child(d, "target")
                    .and_then(|t| t.attribute("dev"))
                    .unwrap_or("")
                    .to_string();
                let src = child(d, "source").and_then(|s| {
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
                disks.push((dev, src));
                Some(BootTarget::Hdd)
            } else {
                None
            };
            if let (Some(class), Some(order)) = (class, boot_order(&d)) {
                ordered.push((order, class));
            }
        }
    }
    ordered.sort_by_key(|(o, _)| *o);
    let first_boot = match ordered.first() {
        Some((_, class)) => *class,
        None => match os
            .and_then(|o| child(o, "boot"))
            .and_then(|b| b.attribute("dev"))
        {
            Some("cdrom") => BootTarget::Cd,
            Some("network") => BootTarget::Pxe,
            Some("hd") => BootTarget::Hdd,
            _ => BootTarget::None,
        },
    };
    let mut meta = BmcMeta::default();
    let mut owner_cluster = None;
    if let Some(m) = child(root, "metadata") {
        for e in m.children().filter(|c| c.is_element()) {
            match e.tag_name().namespace() {
                Some(BMC_NS) => {
                    meta.boot = parse_boot_state(e);
                    meta.media = e
                        .children()
                        .find(|c| c.is_element() && c.tag_name().name() == "media")
                        .and_then(|c| {
                            Some(MediaRecord {
                                image: c.attribute("image")?.to_string(),
                                pool: c.attribute("pool")?.to_string(),
                                volume: c.attribute("volume")?.to_string(),
                            })
                        });
                }
                Some(OWNER_NS) if e.tag_name().name() == "owner" => {
                    owner_cluster = e.attribute("cluster").map(str::to_string);
                }
                _ => {}
            }
        }
    }
    Ok(DomainView {
        name,
        uuid,
        vcpus,
        memory_kib,
        machine,
        mode,
        macs,
        disks,
        cdroms,
        first_boot,
        meta,
        owner_cluster,
    })
}

/// A list of text edits on one document, applied back to front.
struct Edits<'s> {
    text: &'s str,
    edits: Vec<(usize, usize, String)>,
}

impl<'s> Edits<'s> {
    fn new(text: &'s str) -> Self {
        Edits {
            text,
            edits: Vec::new(),
        }
    }
    fn replace(&mut self, range: std::ops::Range<usize>, with: impl Into<String>) {
        self.edits.push((range.start, range.end, with.into()));
    }
    fn remove(&mut self, n: Node) {
        self.replace(n.range(), "");
    }
    fn insert(&mut self, at: usize, s: impl Into<String>) {
        self.replace(at..at, s);
    }
    /// Position just before an element's closing tag.
    fn before_close(&self, n: Node) -> Result<usize> {
        let r = n.range();
        let slice = &self.text[r.start..r.end];
        if slice.ends_with("/>") {
            return Err(anyhow!("<{}> has no content", n.tag_name().name()));
        }
        slice
            .rfind("</")
            .map(|i| r.start + i)
            .ok_or_else(|| anyhow!("no closing tag for <{}>", n.tag_name().name()))
    }
    fn apply(mut self) -> Result<String> {
        self.edits.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        let mut out = self.text.to_string();
        let mut last_start = usize::MAX;
        for (start, end, with) in self.edits {
            if end > last_start {
                return Err(anyhow!("overlapping xml edits"));
            }
            out.replace_range(start..end, &with);
            last_start = start;
        }
        Ok(out)
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// Gives every disk, cdrom and interface a boot order, `first` class first,
/// and drops `<os><boot dev>` (libvirt allows only one of the two forms).
pub fn set_boot_order(xml: &str, first: BootTarget) -> Result<String> {
    let doc = Document::parse(xml).context("parsing domain xml")?;
    let root = doc.root_element();
    let mut e = Edits::new(xml);
    if let Some(os) = child(root, "os") {
        for b in children(os, "boot") {
            e.remove(b);
        }
    }
    let classes: [BootTarget; 3] = match first {
        BootTarget::Cd => [BootTarget::Cd, BootTarget::Hdd, BootTarget::Pxe],
        BootTarget::Pxe => [BootTarget::Pxe, BootTarget::Hdd, BootTarget::Cd],
        BootTarget::Hdd | BootTarget::None => [BootTarget::Hdd, BootTarget::Cd, BootTarget::Pxe],
    };
    let class_of = |d: &Node| {
        if d.tag_name().name() == "interface" {
            Some(BootTarget::Pxe)
        } else if is_cdrom(d) {
            Some(BootTarget::Cd)
        } else if is_disk(d) {
            Some(BootTarget::Hdd)
        } else {
            None
        }
    };
    let devs = devices(root).ok_or_else(|| anyhow!("domain has no <devices>"))?;
    let mut order = 1;
    for class in classes {
        for d in devs.children().filter(|c| c.is_element()) {
            if class_of(&d) != Some(class) {
                continue;
            }
            for b in children(d, "boot") {
                e.remove(b);
            }
            let at = e.before_close(d)?;
            e.insert(at, format!("  <boot order='{order}'/>\n    "));
            order += 1;
        }
    }
    // Other devices (hostdev, redirdev) lose their boot order.
    for d in devs
        .children()
        .filter(|c| c.is_element() && class_of(c).is_none())
    {
        for b in children(d, "boot") {
            e.remove(b);
        }
    }
    e.apply()
}

/// Switches firmware: `UEFI` sets `<os firmware='efi'>`, `Legacy` removes it
/// along with any UEFI loader and NVRAM.
pub fn set_firmware(xml: &str, mode: BootMode) -> Result<String> {
    let doc = Document::parse(xml).context("parsing domain xml")?;
    let os = child(doc.root_element(), "os").ok_or_else(|| anyhow!("domain has no <os>"))?;
    let mut e = Edits::new(xml);
    let r = os.range();
    let start_tag_end = r.start
        + xml[r.start..]
            .find('>')
            .ok_or_else(|| anyhow!("unterminated <os>"))?
        + 1;
    let mut attrs: Vec<String> = os
        .attributes()
        .filter(|a| a.name() != "firmware" && a.namespace().is_none())
        .map(|a| format!(" {}='{}'", a.name(), esc(a.value())))
        .collect();
    if mode == BootMode::UEFI {
        attrs.push(" firmware='efi'".into());
    }
    e.replace(r.start..start_tag_end, format!("<os{}>", attrs.concat()));
    for name in ["loader", "nvram", "firmware"] {
        for n in children(os, name) {
            let legacy_loader = name == "loader" && n.attribute("type") != Some("pflash");
            if mode == BootMode::Legacy || legacy_loader {
                e.remove(n);
            }
        }
    }
    e.apply()
}

fn cdrom_xml(cd: &Cdrom, volume: Option<(&str, &str)>) -> String {
    match volume {
        Some((pool, vol)) => format!(
            "<disk type='volume' device='cdrom'>\n      <driver name='qemu' type='raw'/>\n      <source pool='{}' volume='{}'/>\n      <target dev='{}' bus='{}'/>\n      <readonly/>\n    </disk>",
            esc(pool),
            esc(vol),
            esc(&cd.target),
            esc(&cd.bus)
        ),
        None => format!(
            "<disk type='file' device='cdrom'>\n      <driver name='qemu' type='raw'/>\n      <target dev='{}' bus='{}'/>\n      <readonly/>\n    </disk>",
            esc(&cd.target),
            esc(&cd.bus)
        ),
    }
}

/// Bus and device name for a new cdrom on this machine type: SATA on q35,
/// IDE on i440fx, SCSI elsewhere (virt); the first free name on that bus.
pub fn new_cdrom(view: &DomainView, all_targets: &[String]) -> Cdrom {
    let (bus, prefix) = if view.machine.contains("q35") {
        ("sata", "sd")
    } else if view.machine.is_empty() || view.machine.starts_with("pc") {
        ("ide", "hd")
    } else {
        ("scsi", "sd")
    };
    let target = (b'a'..=b'z')
        .map(|c| format!("{prefix}{}", c as char))
        .find(|t| !all_targets.contains(t))
        .unwrap_or_else(|| format!("{prefix}z"));
    Cdrom {
        target,
        bus: bus.to_string(),
        volume: None,
        file: None,
    }
}

/// The domain with a read-only cdrom holding `pool/volume` (the first cdrom
/// is reused; one is added if there is none). Returns the XML and the cdrom
/// device XML (for a live update).
pub fn insert_cdrom(xml: &str, pool: &str, volume: &str) -> Result<(String, String)> {
    let view = parse(xml)?;
    let doc = Document::parse(xml).context("parsing domain xml")?;
    let devs = devices(doc.root_element()).ok_or_else(|| anyhow!("domain has no <devices>"))?;
    let mut e = Edits::new(xml);
    let existing = devs.children().find(|c| c.is_element() && is_cdrom(c));
    let cd = match (existing, view.cdroms.first()) {
        (Some(n), Some(cd)) => {
            let cd = cd.clone();
            let device = cdrom_xml(&cd, Some((pool, volume)));
            // Keep the boot order the cdrom had.
            let device = match boot_order(&n) {
                Some(o) => device.replace(
                    "<readonly/>",
                    &format!("<readonly/>\n      <boot order='{o}'/>"),
                ),
                None => device,
            };
            e.replace(n.range(), device.clone());
            return Ok((e.apply()?, device));
        }
        _ => {
            let targets: Vec<String> = view.disks.iter().map(|(t, _)| t.clone()).collect();
            new_cdrom(&view, &targets)
        }
    };
    let device = cdrom_xml(&cd, Some((pool, volume)));
    let at = e.before_close(devs)?;
    e.insert(at, format!("  {device}\n  "));
    Ok((e.apply()?, device))
}

/// The domain with every cdrom emptied (the drive stays). Returns the XML
/// and the emptied devices' XML.
pub fn eject_cdroms(xml: &str) -> Result<(String, Vec<String>)> {
    let view = parse(xml)?;
    let doc = Document::parse(xml).context("parsing domain xml")?;
    let devs = devices(doc.root_element()).ok_or_else(|| anyhow!("domain has no <devices>"))?;
    let mut e = Edits::new(xml);
    let mut emptied = Vec::new();
    for (n, cd) in devs
        .children()
        .filter(|c| c.is_element() && is_cdrom(c))
        .zip(view.cdroms.iter())
    {
        if !cd.inserted() {
            continue;
        }
        let mut device = cdrom_xml(cd, None);
        if let Some(o) = boot_order(&n) {
            device = device.replace(
                "<readonly/>",
                &format!("<readonly/>\n      <boot order='{o}'/>"),
            );
        }
        e.replace(n.range(), device.clone());
        emptied.push(device);
    }
    Ok((e.apply()?, emptied))
}

/// The domain with the BMC's metadata element replaced by `meta`.
pub fn set_meta(xml: &str, meta: &BmcMeta) -> Result<String> {
    let doc = Document::parse(xml).context("parsing domain xml")?;
    let root = doc.root_element();
    let mut el = format!("<bmc:state xmlns:bmc='{BMC_NS}'");
    if let Some(b) = meta.boot {
        el.push_str(&format!(
            " boot-target='{}' boot-enabled='{}'",
            b.target, b.enabled
        ));
        if let Some((t, en)) = b.previous {
            el.push_str(&format!(" prev-target='{t}' prev-enabled='{en}'"));
        }
    }
    match &meta.media {
        Some(m) => el.push_str(&format!(
            "><bmc:media slot='Cd' image='{}' pool='{}' volume='{}'/></bmc:state>",
            esc(&m.image),
            esc(&m.pool),
            esc(&m.volume)
        )),
        None => el.push_str("/>"),
    }
    let mut e = Edits::new(xml);
    match child(root, "metadata") {
        Some(m) => {
            for old in m
                .children()
                .filter(|c| c.is_element() && c.tag_name().namespace() == Some(BMC_NS))
            {
                e.remove(old);
            }
            if xml[m.range()].ends_with("/>") {
                e.replace(m.range(), format!("<metadata>{el}</metadata>"));
            } else {
                let at = e.before_close(m)?;
                e.insert(at, format!("  {el}\n  "));
            }
        }
        None => {
            let at = e.before_close(root)?;
            e.insert(at, format!("  <metadata>{el}</metadata>\n"));
        }
    }
    e.apply()
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = r#"<domain type='qemu'>
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
    fn reads_what_the_bmc_shows() {
        let v = parse(XML).unwrap();
        assert_eq!(v.name, "lab1-master-0");
        assert_eq!(v.vcpus, 4);
        assert_eq!(v.memory_kib, 8 << 20);
        assert_eq!(v.mode, BootMode::Legacy);
        assert_eq!(v.macs, vec!["52:54:00:aa:00:01"]);
        assert_eq!(v.first_boot, BootTarget::Hdd);
        assert_eq!(v.owner_cluster.as_deref(), Some("lab1"));
        assert!(v.cdroms.is_empty());
    }

    #[test]
    fn boot_order_is_per_device() {
        let x = set_boot_order(XML, BootTarget::Pxe).unwrap();
        assert!(!x.contains("<boot dev="));
        let v = parse(&x).unwrap();
        assert_eq!(v.first_boot, BootTarget::Pxe);
        let x2 = set_boot_order(&x, BootTarget::Hdd).unwrap();
        assert_eq!(x2.matches("<boot order=").count(), 2);
        assert_eq!(parse(&x2).unwrap().first_boot, BootTarget::Hdd);
    }

    #[test]
    fn cdrom_insert_eject_keeps_the_drive_and_its_boot_order() {
        let (x, dev) = insert_cdrom(XML, "lab1", "shiftlab-media-1.iso").unwrap();
        assert!(dev.contains("bus='sata'") && dev.contains("<readonly/>"));
        let v = parse(&x).unwrap();
        assert_eq!(
            v.cdroms[0].volume,
            Some(("lab1".into(), "shiftlab-media-1.iso".into()))
        );
        assert_eq!(v.cdroms[0].target, "sda");
        let x = set_boot_order(&x, BootTarget::Cd).unwrap();
        assert_eq!(parse(&x).unwrap().first_boot, BootTarget::Cd);
        let (x, emptied) = eject_cdroms(&x).unwrap();
        assert_eq!(emptied.len(), 1);
        let v = parse(&x).unwrap();
        assert!(!v.cdroms[0].inserted());
        assert_eq!(
            v.first_boot,
            BootTarget::Cd,
            "the empty drive keeps its boot order"
        );
        let (x, _) = insert_cdrom(&x, "lab1", "b.iso").unwrap();
        assert_eq!(parse(&x).unwrap().cdroms.len(), 1, "the drive is reused");
    }

    #[test]
    fn i440fx_gets_ide() {
        let x = XML.replace("pc-q35-7.2", "pc-i440fx-7.2");
        let (_, dev) = insert_cdrom(&x, "p", "v").unwrap();
        assert!(dev.contains("bus='ide'") && dev.contains("dev='hda'"));
    }

    #[test]
    fn firmware_switches() {
        let x = set_firmware(XML, BootMode::UEFI).unwrap();
        assert!(x.contains("<os firmware='efi'>"));
        assert!(!x.contains("<loader"));
        assert_eq!(parse(&x).unwrap().mode, BootMode::UEFI);
        let y = set_firmware(&x, BootMode::Legacy).unwrap();
        assert_eq!(parse(&y).unwrap().mode, BootMode::Legacy);
        assert!(y.contains("<os>"));
    }

    #[test]
    fn metadata_round_trips_and_keeps_the_owner() {
        let meta = BmcMeta {
            boot: Some(BootState {
                target: BootTarget::Cd,
                enabled: BootEnabled::Once,
                previous: Some((BootTarget::Hdd, BootEnabled::Continuous)),
            }),
            media: Some(MediaRecord {
                image: "http://h/a.iso?x=1&y=2".into(),
                pool: "lab1".into(),
                volume: "v".into(),
            }),
        };
        let x = set_meta(XML, &meta).unwrap();
        let v = parse(&x).unwrap();
        assert_eq!(v.meta, meta);
        assert_eq!(v.owner_cluster.as_deref(), Some("lab1"));
        let x = set_meta(&x, &BmcMeta::default()).unwrap();
        assert_eq!(parse(&x).unwrap().meta, BmcMeta::default());
        assert_eq!(x.matches("bmc:state").count(), 1);
        let bare = XML.replace(
            "  <metadata>\n    <shiftlab:owner xmlns:shiftlab=\"https://shiftlab.dev/xmlns/libvirt/1\" cluster=\"lab1\" role=\"ctlplane\" node=\"lab1-master-0\" version=\"0.1.0\"/>\n  </metadata>\n",
            "",
        );
        assert_eq!(parse(&set_meta(&bare, &meta).unwrap()).unwrap().meta, meta);
    }
}
