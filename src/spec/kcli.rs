//! kcli parameter files: the one table of kcli's flat keys that shiftlab reads, and
//! of those it knows but ignores (with a warning) because they describe kcli
//! features shiftlab does differently or not at all. `parse.rs` asks this table for
//! the kcli spellings of each field it reads; docs/cluster-file.md lists the same.
//!
//! A kcli key with the same name and meaning as one of shiftlab's own top-level
//! keys (`cluster`, `domain`, `version`, `workers`, `memory`, …) needs no entry.

/// What shiftlab does with one kcli key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// The value of a shiftlab field under another name: setting both is an error.
    Alias(&'static str),
    /// Adds to a shiftlab list field rather than setting it.
    Adds(&'static str),
    /// A boolean choosing a value of a shiftlab field: `(field, if true, if false)`;
    /// `None` when `false` says nothing.
    Flag(&'static str, &'static str, Option<&'static str>),
    /// kcli's own meaning, read by its own rule in `parse.rs`/`resolve.rs`.
    Own(&'static str),
    /// Recognised and ignored; the reason goes into the warning.
    Ignored(&'static str),
}

use Key::*;

/// Every kcli key shiftlab knows, with what it does.
pub const KEYS: &[(&str, Key)] = &[
    ("masters", Alias("ctlplanes")),
    ("ctlplane_memory", Alias("ctlplane.memory")),
    ("master_memory", Alias("ctlplane.memory")),
    ("ctlplane_numcpus", Alias("ctlplane.numcpus")),
    ("master_numcpus", Alias("ctlplane.numcpus")),
    ("worker_memory", Alias("worker.memory")),
    ("worker_numcpus", Alias("worker.numcpus")),
    ("bootstrap_memory", Alias("bootstrap.memory")),
    ("bootstrap_numcpus", Alias("bootstrap.numcpus")),
    ("extra_ctlplane_disks", Alias("ctlplane.extra_disks")),
    ("extra_master_disks", Alias("ctlplane.extra_disks")),
    ("extra_worker_disks", Alias("worker.extra_disks")),
    ("api_ip", Alias("network.api_ip")),
    ("ingress_ip", Alias("network.ingress_ip")),
    ("pub_key", Alias("ssh_keys")),
    ("keys", Adds("ssh_keys")),
    ("okd", Flag("distribution", "okd", Some("ocp"))),
    (
        "tag",
        Own("a minor or exact release on the channel `version` names"),
    ),
    ("pool", Alias("libvirt.pool")),
    ("uefi", Flag("libvirt.firmware", "uefi", Some("bios"))),
    ("sno", Flag("method", "sno", None)),
    ("cluster_network_ipv4", Alias("cluster_network")),
    ("service_network_ipv4", Alias("service_network")),
    (
        "async",
        Ignored("shiftlab always drives the install to completion"),
    ),
    (
        "apps",
        Ignored("kcli day-2 apps are not installed by shiftlab"),
    ),
    ("notify", Ignored("kcli notifications are not supported")),
    ("dualstack", Ignored("IPv6 is not supported yet")),
    ("ipv6", Ignored("IPv6 is not supported yet")),
    ("metal3", Ignored("use method: ipi")),
    ("sslip", Ignored("shiftlab serves the cluster's DNS itself")),
    (
        "ctlplane_macs",
        Ignored("MACs are derived per node by shiftlab"),
    ),
    (
        "worker_macs",
        Ignored("MACs are derived per node by shiftlab"),
    ),
    ("ctlplane_ips", Ignored("addresses are planned by shiftlab")),
    ("worker_ips", Ignored("addresses are planned by shiftlab")),
    ("disconnected_url", Ignored("use image_digest_sources")),
    ("disconnected_user", Ignored("use image_digest_sources")),
    ("disconnected_password", Ignored("use image_digest_sources")),
    ("imageregistry", Ignored("the lab registry uses emptyDir")),
    ("autoscale", Ignored("autoscaling is not supported")),
    ("threaded", Ignored("not applicable")),
    ("flavor", Ignored("sizes are set per role")),
    ("flavor_bootstrap", Ignored("sizes are set per role")),
    ("flavor_ctlplane", Ignored("sizes are set per role")),
    ("flavor_worker", Ignored("sizes are set per role")),
    ("numa", Ignored("not supported")),
    ("cpupinning", Ignored("not supported")),
    (
        "virtual_router_id",
        Ignored("not used: shiftlab's load balancer runs on the host"),
    ),
    (
        "localhost_fix",
        Ignored("shiftlab hands hostnames out by DHCP and PTR"),
    ),
    (
        "wait_timeout",
        Ignored("shiftlab uses the installer's timeouts"),
    ),
    ("tpm", Ignored("not supported")),
    ("nested", Ignored("not supported")),
    ("kubevirt_api_service", Ignored("not applicable")),
];

/// The kcli keys that set `field` (`Alias`), in table order.
pub fn aliases(field: &str) -> impl Iterator<Item = &'static str> + '_ {
    KEYS.iter()
        .filter(move |(_, k)| matches!(k, Alias(f) if *f == field))
        .map(|(key, _)| *key)
}

/// The kcli keys that add to the list `field` (`Adds`), in table order.
pub fn additions(field: &str) -> impl Iterator<Item = &'static str> + '_ {
    KEYS.iter()
        .filter(move |(_, k)| matches!(k, Adds(f) if *f == field))
        .map(|(key, _)| *key)
}

/// The kcli booleans that choose a value of `field`: `(key, if true, if false)`.
pub fn flags(
    field: &str,
) -> impl Iterator<Item = (&'static str, &'static str, Option<&'static str>)> + '_ {
    KEYS.iter().filter_map(move |(key, k)| match k {
        Flag(f, yes, no) if *f == field => Some((*key, *yes, *no)),
        _ => None,
    })
}

/// The kcli keys shiftlab reads (everything but `Ignored`).
pub fn read() -> impl Iterator<Item = &'static str> {
    KEYS.iter()
        .filter(|(_, k)| !matches!(k, Ignored(_)))
        .map(|(key, _)| *key)
}

/// The kcli keys shiftlab ignores, with the reason.
pub fn ignored() -> impl Iterator<Item = (&'static str, &'static str)> {
    KEYS.iter().filter_map(|(key, k)| match k {
        Ignored(why) => Some((*key, *why)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_one_meaning() {
        for (i, (key, _)) in KEYS.iter().enumerate() {
            assert!(
                !KEYS[..i].iter().any(|(k, _)| k == key),
                "{key} is listed twice"
            );
            // A kcli key spelled like one of shiftlab's own keys means that key.
            assert!(
                !super::super::parse::top_keys().any(|k| k == *key),
                "{key} is also shiftlab's own key"
            );
        }
    }

    #[test]
    fn the_docs_list_every_kcli_key() {
        let docs = include_str!("../../docs/cluster-file.md");
        let section = docs
            .split("## kcli parameter files")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("docs/cluster-file.md has a kcli section");
        for (key, _) in KEYS {
            assert!(
                section.contains(&format!("`{key}`")) || section.contains(&format!("`{key}: ")),
                "docs/cluster-file.md's kcli section does not name `{key}`"
            );
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(
            aliases("ctlplane.memory").collect::<Vec<_>>(),
            ["ctlplane_memory", "master_memory"]
        );
        assert_eq!(additions("ssh_keys").collect::<Vec<_>>(), ["keys"]);
        assert_eq!(
            flags("distribution").collect::<Vec<_>>(),
            [("okd", "okd", Some("ocp"))]
        );
        assert!(read().any(|k| k == "tag"));
        assert!(ignored().any(|(k, _)| k == "async"));
        assert!(!read()
            .chain(ignored().map(|(k, _)| k))
            .any(|k| k == "cluster"));
    }
}
