//! libvirt XML: writing the plan's objects ([`write`]), reading what libvirt
//! returns ([`parse`]), splicing changes into a domain definition ([`edit`]),
//! and shiftlab's ownership metadata ([`owner`]). Pure text; nothing here talks to
//! libvirt.

pub mod edit;
pub mod owner;
pub mod parse;
pub mod write;

pub use owner::{Owner, OWNER_NS};
pub use parse::{BootDevice, Cdrom, DomainView};

use roxmltree::Node;

/// Escape text for an XML attribute or element.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&apos;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// The first child element `name` in no namespace (libvirt's own elements).
fn child<'a, 'i>(n: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    n.children().find(|c| {
        c.is_element() && c.tag_name().name() == name && c.tag_name().namespace().is_none()
    })
}

/// Every child element `name` in no namespace.
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

/// The boot class of a device element, if it can boot.
fn device_class(n: &Node) -> Option<BootDevice> {
    if n.tag_name().name() == "interface" {
        Some(BootDevice::Network)
    } else if is_cdrom(n) {
        Some(BootDevice::Cdrom)
    } else if is_disk(n) {
        Some(BootDevice::Disk)
    } else {
        None
    }
}

/// A device's `<boot order=…>`.
fn boot_order(n: &Node) -> Option<u32> {
    child(*n, "boot")
        .and_then(|b| b.attribute("order"))
        .and_then(|o| o.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(esc("a'b<c>&\""), "a&apos;b&lt;c&gt;&amp;&quot;");
    }
}
