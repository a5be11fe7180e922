//! Ownership metadata: the element in a domain's or network's `<metadata>` that
//! names the cluster owning it. shiftlab reads it back before it ever changes or
//! deletes an object.

use crate::plan::{Node, Plan};
use crate::spec::Role;

use super::esc;

/// The XML namespace of shiftlab's ownership metadata.
pub const OWNER_NS: &str = "https://shiftlab.dev/xmlns/libvirt/1";
pub const OWNER_PREFIX: &str = "shiftlab";
/// The element's local name.
const OWNER_ELEMENT: &str = "owner";

/// Who owns a libvirt object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Owner {
    pub cluster: String,
    /// `network`, or a node role.
    pub role: String,
    /// The node name, for domains.
    pub node: Option<String>,
    pub version: String,
}

impl Owner {
    pub fn element(&self) -> String {
        let node = self
            .node
            .as_ref()
            .map(|n| format!(" node=\"{}\"", esc(n)))
            .unwrap_or_default();
        format!(
            "<{OWNER_PREFIX}:{OWNER_ELEMENT} xmlns:{OWNER_PREFIX}=\"{OWNER_NS}\" cluster=\"{}\" role=\"{}\"{node} version=\"{}\"/>",
            esc(&self.cluster),
            esc(&self.role),
            esc(&self.version)
        )
    }

    /// Read the owner from an object's XML (the element with any prefix).
    pub fn parse(xml: &str) -> Option<Owner> {
        let doc = roxmltree::Document::parse(xml).ok()?;
        let el = doc.descendants().find(|n| {
            n.tag_name().name() == OWNER_ELEMENT && n.tag_name().namespace() == Some(OWNER_NS)
        })?;
        Self::from_node(el)
    }

    /// Read the owner from the element alone, as libvirt's metadata API returns
    /// it for [`OWNER_NS`] (already chosen by namespace, and without one).
    pub fn parse_element(xml: &str) -> Option<Owner> {
        let doc = roxmltree::Document::parse(xml).ok()?;
        Self::from_node(doc.root_element())
    }

    pub(super) fn from_node(el: roxmltree::Node) -> Option<Owner> {
        Some(Owner {
            cluster: el.attribute("cluster")?.to_string(),
            role: el.attribute("role").unwrap_or_default().to_string(),
            node: el.attribute("node").map(str::to_string),
            version: el.attribute("version").unwrap_or_default().to_string(),
        })
    }
}

pub fn network_owner(plan: &Plan) -> Owner {
    Owner {
        cluster: plan.cluster.clone(),
        role: "network".into(),
        node: None,
        version: env!("CARGO_PKG_VERSION").into(),
    }
}

pub fn node_owner(plan: &Plan, node: &Node) -> Owner {
    Owner {
        cluster: plan.cluster.clone(),
        role: node.role.as_str().into(),
        node: Some(node.name.clone()),
        version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// The role a domain's owner metadata names, as a [`Role`].
pub fn role_of(owner: &Owner) -> Option<Role> {
    match owner.role.as_str() {
        "bootstrap" => Some(Role::Bootstrap),
        "ctlplane" => Some(Role::Ctlplane),
        "worker" => Some(Role::Worker),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_round_trips_through_libvirt_style_xml() {
        let o = Owner {
            cluster: "lab1".into(),
            role: "ctlplane".into(),
            node: Some("lab1-ctlplane-0".into()),
            version: "0.1.0".into(),
        };
        // libvirt hands the element back with its own namespace prefix.
        let back = format!(
            "<sl:owner xmlns:sl=\"{OWNER_NS}\" cluster=\"lab1\" role=\"ctlplane\" node=\"lab1-ctlplane-0\" version=\"0.1.0\"/>"
        );
        assert_eq!(Owner::parse(&back), Some(o.clone()));
        assert_eq!(Owner::parse(&o.element()), Some(o.clone()));
        assert_eq!(Owner::parse("<owner cluster='x'/>"), None);
        // The metadata API returns the element without its namespace.
        let bare = "<owner cluster=\"lab1\" role=\"ctlplane\" node=\"lab1-ctlplane-0\" version=\"0.1.0\"/>";
        assert_eq!(Owner::parse_element(bare), Some(o));
        assert_eq!(Owner::parse_element("<owner role='x'/>"), None);
    }
}
