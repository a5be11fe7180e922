//! Editing a domain definition: boot order, firmware, CD-ROMs, a metadata element.
//! Edits are splices of the original text at element ranges, so everything not
//! edited is kept byte for byte.

use anyhow::{anyhow, Context, Result};
use roxmltree::{Document, Node};

use super::parse::{self, BootDevice, Cdrom, DomainView};
use super::{boot_order, child, children, device_class, devices, esc, is_cdrom};
use crate::spec::Firmware;

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

/// Gives every disk, cdrom and interface a boot order, `first` class first,
/// and drops `<os><boot dev>` (libvirt allows only one of the two forms).
pub fn set_boot_order(xml: &str, first: BootDevice) -> Result<String> {
    let doc = Document::parse(xml).context("parsing domain xml")?;
    let root = doc.root_element();
    let mut e = Edits::new(xml);
    if let Some(os) = child(root, "os") {
        for b in children(os, "boot") {
            e.remove(b);
        }
    }
    let devs = devices(root).ok_or_else(|| anyhow!("domain has no <devices>"))?;
    let mut order = 1;
    for class in first.order() {
        for d in devs.children().filter(|c| c.is_element()) {
            if device_class(&d) != Some(class) {
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
        .filter(|c| c.is_element() && device_class(c).is_none())
    {
        for b in children(d, "boot") {
            e.remove(b);
        }
    }
    e.apply()
}

/// Switches firmware: UEFI sets `<os firmware='efi'>`, BIOS removes it along
/// with any UEFI loader and NVRAM.
pub fn set_firmware(xml: &str, firmware: Firmware) -> Result<String> {
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
    if firmware == Firmware::Uefi {
        attrs.push(" firmware='efi'".into());
    }
    e.replace(r.start..start_tag_end, format!("<os{}>", attrs.concat()));
    for name in ["loader", "nvram", "firmware"] {
        for n in children(os, name) {
            let legacy_loader = name == "loader" && n.attribute("type") != Some("pflash");
            if firmware == Firmware::Bios || legacy_loader {
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

/// A cdrom's new XML with the boot order the old element `n` had.
fn keeping_boot_order(device: String, n: &Node) -> String {
    match boot_order(n) {
        Some(o) => device.replace(
            "<readonly/>",
            &format!("<readonly/>\n      <boot order='{o}'/>"),
        ),
        None => device,
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
    let view = parse::domain(xml)?;
    let doc = Document::parse(xml).context("parsing domain xml")?;
    let devs = devices(doc.root_element()).ok_or_else(|| anyhow!("domain has no <devices>"))?;
    let mut e = Edits::new(xml);
    let existing = devs.children().find(|c| c.is_element() && is_cdrom(c));
    let cd = match (existing, view.cdroms.first()) {
        (Some(n), Some(cd)) => {
            let cd = cd.clone();
            let device = keeping_boot_order(cdrom_xml(&cd, Some((pool, volume))), &n);
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
    let view = parse::domain(xml)?;
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
        let device = keeping_boot_order(cdrom_xml(cd, None), &n);
        e.replace(n.range(), device.clone());
        emptied.push(device);
    }
    Ok((e.apply()?, emptied))
}

/// The domain with `element` as its only `<metadata>` child in namespace `ns`
/// (any earlier one replaced; `<metadata>` added if missing). `element` must
/// declare `ns` itself.
pub fn set_metadata(xml: &str, ns: &str, element: &str) -> Result<String> {
    let doc = Document::parse(xml).context("parsing domain xml")?;
    let root = doc.root_element();
    let mut e = Edits::new(xml);
    match child(root, "metadata") {
        Some(m) => {
            for old in m
                .children()
                .filter(|c| c.is_element() && c.tag_name().namespace() == Some(ns))
            {
                e.remove(old);
            }
            if xml[m.range()].ends_with("/>") {
                e.replace(m.range(), format!("<metadata>{element}</metadata>"));
            } else {
                let at = e.before_close(m)?;
                e.insert(at, format!("  {element}\n  "));
            }
        }
        None => {
            let at = e.before_close(root)?;
            e.insert(at, format!("  <metadata>{element}</metadata>\n"));
        }
    }
    e.apply()
}

#[cfg(test)]
mod tests {
    use super::super::parse::tests::XML;
    use super::*;

    #[test]
    fn boot_order_is_per_device() {
        let x = set_boot_order(XML, BootDevice::Network).unwrap();
        assert!(!x.contains("<boot dev="));
        let v = parse::domain(&x).unwrap();
        assert_eq!(v.first_boot, Some(BootDevice::Network));
        let x2 = set_boot_order(&x, BootDevice::Disk).unwrap();
        assert_eq!(x2.matches("<boot order=").count(), 2);
        assert_eq!(
            parse::domain(&x2).unwrap().first_boot,
            Some(BootDevice::Disk)
        );
    }

    #[test]
    fn cdrom_insert_eject_keeps_the_drive_and_its_boot_order() {
        let (x, dev) = insert_cdrom(XML, "lab1", "shiftlab-media-1.iso").unwrap();
        assert!(dev.contains("bus='sata'") && dev.contains("<readonly/>"));
        let v = parse::domain(&x).unwrap();
        assert_eq!(
            v.cdroms[0].volume,
            Some(("lab1".into(), "shiftlab-media-1.iso".into()))
        );
        assert_eq!(v.cdroms[0].target, "sda");
        let x = set_boot_order(&x, BootDevice::Cdrom).unwrap();
        assert_eq!(
            parse::domain(&x).unwrap().first_boot,
            Some(BootDevice::Cdrom)
        );
        let (x, emptied) = eject_cdroms(&x).unwrap();
        assert_eq!(emptied.len(), 1);
        let v = parse::domain(&x).unwrap();
        assert!(!v.cdroms[0].inserted());
        assert_eq!(
            v.first_boot,
            Some(BootDevice::Cdrom),
            "the empty drive keeps its boot order"
        );
        let (x, _) = insert_cdrom(&x, "lab1", "b.iso").unwrap();
        assert_eq!(
            parse::domain(&x).unwrap().cdroms.len(),
            1,
            "the drive is reused"
        );
    }

    #[test]
    fn i440fx_gets_ide() {
        let x = XML.replace("pc-q35-7.2", "pc-i440fx-7.2");
        let (_, dev) = insert_cdrom(&x, "p", "v").unwrap();
        assert!(dev.contains("bus='ide'") && dev.contains("dev='hda'"));
    }

    #[test]
    fn firmware_switches() {
        let x = set_firmware(XML, Firmware::Uefi).unwrap();
        assert!(x.contains("<os firmware='efi'>"));
        assert!(!x.contains("<loader"));
        assert_eq!(parse::domain(&x).unwrap().firmware, Firmware::Uefi);
        let y = set_firmware(&x, Firmware::Bios).unwrap();
        assert_eq!(parse::domain(&y).unwrap().firmware, Firmware::Bios);
        assert!(y.contains("<os>"));
    }

    #[test]
    fn metadata_element_is_replaced_and_the_owner_kept() {
        let ns = "urn:test";
        let x = set_metadata(XML, ns, "<t:a xmlns:t='urn:test' n='1'/>").unwrap();
        let x = set_metadata(&x, ns, "<t:a xmlns:t='urn:test' n='2'/>").unwrap();
        assert_eq!(x.matches("<t:a").count(), 1);
        assert!(x.contains("n='2'"));
        assert_eq!(
            parse::domain(&x)
                .unwrap()
                .owner
                .map(|o| o.cluster)
                .as_deref(),
            Some("lab1")
        );
        let bare = XML.replace(
            "  <metadata>\n    <shiftlab:owner xmlns:shiftlab=\"https://shiftlab.dev/xmlns/libvirt/1\" cluster=\"lab1\" role=\"ctlplane\" node=\"lab1-master-0\" version=\"0.1.0\"/>\n  </metadata>\n",
            "",
        );
        assert_ne!(bare, XML);
        let x = set_metadata(&bare, ns, "<t:a xmlns:t='urn:test'/>").unwrap();
        assert!(x.contains("<metadata><t:a xmlns:t='urn:test'/></metadata>"));
        roxmltree::Document::parse(&x).unwrap();
        let empty = bare.replace("<devices>", "<metadata/>\n  <devices>");
        let x = set_metadata(&empty, ns, "<t:a xmlns:t='urn:test'/>").unwrap();
        assert!(x.contains("<metadata><t:a xmlns:t='urn:test'/></metadata>"));
    }
}
