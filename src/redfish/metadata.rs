//! What the BMC keeps in a domain's `<metadata>`: the boot override (so that a
//! `Once` can be consumed at the next start) and the media it inserted. Kept in
//! the definition itself, so it never diverges from the domain.

use anyhow::{Context, Result};
use roxmltree::{Document, Node};

use super::machine::BootState;
use super::model::{BootEnabled, BootTarget};
use crate::libvirt::xml::{edit, esc};

/// XML namespace of the BMC's own state inside `<metadata>`.
pub const BMC_NS: &str = "https://shiftlab.dev/xmlns/libvirt/bmc/1";

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

impl BmcMeta {
    /// The BMC's state in a domain definition (default when there is none).
    pub fn read(domain_xml: &str) -> Result<BmcMeta> {
        let doc = Document::parse(domain_xml).context("parsing domain xml")?;
        let el = doc
            .root_element()
            .children()
            .filter(|m| m.is_element() && m.tag_name().name() == "metadata")
            .flat_map(|m| m.children())
            .find(|e| e.is_element() && e.tag_name().namespace() == Some(BMC_NS));
        let Some(el) = el else {
            return Ok(BmcMeta::default());
        };
        Ok(BmcMeta {
            boot: parse_boot_state(el),
            media: el
                .children()
                .find(|c| c.is_element() && c.tag_name().name() == "media")
                .and_then(|c| {
                    Some(MediaRecord {
                        image: c.attribute("image")?.to_string(),
                        pool: c.attribute("pool")?.to_string(),
                        volume: c.attribute("volume")?.to_string(),
                    })
                }),
        })
    }

    fn element(&self) -> String {
        let mut el = format!("<bmc:state xmlns:bmc='{BMC_NS}'");
        if let Some(b) = self.boot {
            el.push_str(&format!(
                " boot-target='{}' boot-enabled='{}'",
                b.target, b.enabled
            ));
            if let Some((t, en)) = b.previous {
                el.push_str(&format!(" prev-target='{t}' prev-enabled='{en}'"));
            }
        }
        match &self.media {
            Some(m) => el.push_str(&format!(
                "><bmc:media slot='Cd' image='{}' pool='{}' volume='{}'/></bmc:state>",
                esc(&m.image),
                esc(&m.pool),
                esc(&m.volume)
            )),
            None => el.push_str("/>"),
        }
        el
    }

    /// The domain definition with this state in place of the one it had.
    pub fn write(&self, domain_xml: &str) -> Result<String> {
        edit::set_metadata(domain_xml, BMC_NS, &self.element())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = r#"<domain type='qemu'>
  <name>lab1-master-0</name>
  <metadata>
    <shiftlab:owner xmlns:shiftlab="https://shiftlab.dev/xmlns/libvirt/1" cluster="lab1" role="ctlplane" node="lab1-master-0" version="0.1.0"/>
  </metadata>
  <devices/>
</domain>
"#;

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
        assert_eq!(BmcMeta::read(XML).unwrap(), BmcMeta::default());
        let x = meta.write(XML).unwrap();
        assert_eq!(BmcMeta::read(&x).unwrap(), meta);
        assert!(x.contains("<shiftlab:owner "), "the owner stays");
        let x = BmcMeta::default().write(&x).unwrap();
        assert_eq!(BmcMeta::read(&x).unwrap(), BmcMeta::default());
        assert_eq!(x.matches("bmc:state").count(), 1);
        // A domain without <metadata> gets one.
        let bare = "<domain type='qemu'>\n  <name>vm</name>\n  <devices/>\n</domain>\n";
        assert_eq!(BmcMeta::read(&meta.write(bare).unwrap()).unwrap(), meta);
    }
}
