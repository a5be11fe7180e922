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
    /// A kcli feature with no effect on what shiftlab builds: `(kcli's default,
    /// why)`. Off or at kcli's default it is accepted quietly ([`at_rest`]), else
    /// accepted with a warning.
    Ignored(&'static str, &'static str),
    /// A kcli feature shiftlab cannot honour: `(kcli's default, why)`. Off or at
    /// kcli's default it is accepted quietly, else an error "not supported by
    /// shiftlab because <why>".
    Refused(&'static str, &'static str),
}

use yaml_serde::Value;
use Key::*;

// Reasons shared by several keys.
const IPV6: &str =
    "kcli's IPv6 keys are not read: shiftlab's dual-stack is `network.cidr` as a pair of CIDRs (docs/ipv6.md)";
const ARBITER: &str = "it plans no arbiter nodes (control planes are 1, 3, 4 or 5)";
const MIRROR_VM: &str = "it deploys and fills no mirror registry (kcli's disconnected VM); point `disconnected_url` (or `image_digest_sources`) at a registry that already mirrors the release";
const BAREMETAL: &str = "its nodes are VMs only, each with its own BMC (`bmc:`), no physical hosts";
const CLOUD: &str = "it deploys onto libvirt or KubeVirt only, no cloud provider";
const PARTITIONING: &str = "it does not configure workload partitioning (CPU sets)";
const ONE_NIC: &str = "each node has one NIC, on the cluster's network";
const MANIFEST: &str =
    "it writes no such cluster configuration; add a manifest to the `manifests` directory";
const LB_ON_HOST: &str =
    "its load balancer and DNS run on the host (shiftlab serve), not as static pods on the nodes";
const DAY2_APPS: &str = "kcli day-2 apps are not installed by shiftlab";

/// Every kcli key shiftlab knows, with what it does: the keys of kcli's openshift
/// defaults (kcli kvirt/cluster/openshift/kcli_default.yml, kept as the fixture
/// tests/fixtures/kcli/kcli_default.yml, which a test compares with the defaults
/// written here) and a few older spellings.
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
    ("machine_cidr", Alias("network.cidr")),
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
    ("sno_disk", Alias("installation_disk")),
    ("cluster_network_ipv4", Alias("cluster_network")),
    ("service_network_ipv4", Alias("service_network")),
    ("http_proxy", Alias("proxy.http_proxy")),
    ("https_proxy", Alias("proxy.https_proxy")),
    ("no_proxy", Alias("proxy.no_proxy")),
    (
        "ca",
        Own("the PEM text of a trust bundle: `additional_trust_bundle`, inline"),
    ),
    (
        "disconnected_url",
        Own("a registry mirroring the release: kcli's `image_digest_sources` for it"),
    ),
    (
        "imagecontentsources",
        Own("a list of `{source, mirror}`: `image_digest_sources`"),
    ),
    ("info", Own("kcli's description of its plan: read by nobody")),
    ("async", Ignored("false", "shiftlab always drives the install to completion")),
    (
        "apps",
        Own("kcli day-2 apps: `nfs` is `storage: nfs`, the others are not installed (a warning)"),
    ),
    // The `nfs` app's own settings (kcli kvirt/cluster/openshift/apps/nfs/
    // kcli_default.yml): a parameter file passes them to the app.
    (
        "nfs_ip",
        Refused("~", "its NFS server is the host itself, on the cluster network's gateway (`storage: nfs`); it mounts no other server"),
    ),
    (
        "nfs_share",
        Refused("~", "the host exports a directory of its own per cluster (`storage: nfs`, docs/storage.md)"),
    ),
    (
        "nfs_network",
        Ignored("default", "the export is served on the cluster's own network"),
    ),
    (
        "nfs_namespace",
        Ignored("nfs", "the provisioner runs in the namespace shiftlab-nfs-provisioner"),
    ),
    (
        "nfs_default_storageclass",
        Own("`false` is refused: with `storage: nfs` its StorageClass is the default"),
    ),
    (
        "nfs_disconnected_registry",
        Refused("~", "the provisioner's image is pinned by digest on registry.k8s.io: mirror it with `image_digest_sources`"),
    ),
    ("apps_install_cr", Ignored("true", DAY2_APPS)),
    ("notify", Ignored("false", "kcli notifications are not supported")),
    ("dualstack", Refused("false", IPV6)),
    ("ipv6", Refused("false", IPV6)),
    ("forcestack", Refused("false", IPV6)),
    ("kvm_forcestack", Refused("false", IPV6)),
    ("cluster_network_ipv6", Refused("fd01::/48", IPV6)),
    ("service_network_ipv6", Refused("fd02::/112", IPV6)),
    (
        "cluster_networks",
        Refused("[]", "it takes one IPv4 pod network: use `cluster_network`"),
    ),
    (
        "service_networks",
        Refused("[]", "it takes one IPv4 service network: use `service_network`"),
    ),
    ("dual_api_ip", Refused("~", IPV6)),
    ("dual_ingress_ip", Refused("~", IPV6)),
    ("metal3", Ignored("false", "use method: ipi")),
    ("sslip", Ignored("false", "shiftlab serves the cluster's DNS itself")),
    (
        "ctlplane_macs",
        Ignored("[]", "MACs are derived per node by shiftlab"),
    ),
    (
        "worker_macs",
        Ignored("[]", "MACs are derived per node by shiftlab"),
    ),
    (
        "bootstrap_mac",
        Ignored("~", "MACs are derived per node by shiftlab"),
    ),
    ("ctlplane_ips", Ignored("[]", "addresses are planned by shiftlab")),
    ("worker_ips", Ignored("[]", "addresses are planned by shiftlab")),
    (
        "disconnected_user",
        Refused(
            "dummy",
            "it does not edit the pull secret: add the registry's credentials to the pull secret file",
        ),
    ),
    (
        "disconnected_password",
        Refused(
            "dummy",
            "it does not edit the pull secret: add the registry's credentials to the pull secret file",
        ),
    ),
    (
        "disconnected_prefix",
        Refused(
            "~",
            "`disconnected_url` mirrors kcli's default layout (openshift-release-dev); write `image_digest_sources` for another",
        ),
    ),
    ("disconnected", Refused("false", MIRROR_VM)),
    ("disconnected_vm", Refused("false", MIRROR_VM)),
    ("disconnected_deploy", Refused("false", MIRROR_VM)),
    ("disconnected_keep", Refused("false", MIRROR_VM)),
    ("disconnected_channel", Refused("~", MIRROR_VM)),
    ("disconnected_update", Refused("false", MIRROR_VM)),
    ("disconnected_haproxy", Refused("false", MIRROR_VM)),
    ("disconnected_reuse", Refused("false", MIRROR_VM)),
    ("disconnected_reuse_name", Refused("~", MIRROR_VM)),
    ("disconnected_fqdn", Refused("~", MIRROR_VM)),
    ("disconnected_default_network", Refused("default", MIRROR_VM)),
    ("disconnected_image", Refused("centos9stream", MIRROR_VM)),
    ("disconnected_disk_size", Refused("100", MIRROR_VM)),
    ("disconnected_operators_all", Refused("false", MIRROR_VM)),
    ("disconnected_operators", Refused("[]", MIRROR_VM)),
    ("disconnected_operators_version", Refused("~", MIRROR_VM)),
    ("disconnected_certified_operators_all", Refused("false", MIRROR_VM)),
    ("disconnected_certified_operators", Refused("[]", MIRROR_VM)),
    ("disconnected_certified_operators_version", Refused("~", MIRROR_VM)),
    ("disconnected_community_operators_all", Refused("false", MIRROR_VM)),
    ("disconnected_community_operators", Refused("[]", MIRROR_VM)),
    ("disconnected_community_operators_version", Refused("~", MIRROR_VM)),
    ("disconnected_marketplace_operators_all", Refused("false", MIRROR_VM)),
    ("disconnected_marketplace_operators", Refused("[]", MIRROR_VM)),
    ("disconnected_marketplace_operators_version", Refused("~", MIRROR_VM)),
    ("disconnected_ipv6_network", Refused("false", MIRROR_VM)),
    ("disconnected_sync", Refused("true", MIRROR_VM)),
    ("disconnected_mac", Refused("~", MIRROR_VM)),
    ("disconnected_extra_images", Refused("[]", MIRROR_VM)),
    ("disconnected_extra_catalogs", Refused("[]", MIRROR_VM)),
    ("disconnected_extra_release", Refused("~", MIRROR_VM)),
    ("mirror_dir", Refused("~", MIRROR_VM)),
    ("imageregistry", Ignored("false", "the lab registry uses emptyDir")),
    ("autoscale", Ignored("false", "autoscaling is not supported")),
    ("threaded", Ignored("false", "not applicable")),
    ("ctlplanes_threaded", Ignored("false", "not applicable")),
    ("workers_threaded", Ignored("false", "not applicable")),
    ("arbiters_threaded", Ignored("false", "not applicable")),
    ("flavor", Ignored("~", "sizes are set per role")),
    ("flavor_bootstrap", Ignored("~", "sizes are set per role")),
    ("flavor_ctlplane", Ignored("~", "sizes are set per role")),
    ("flavor_worker", Ignored("~", "sizes are set per role")),
    ("flavor_arbiter", Refused("~", ARBITER)),
    ("arbiters", Refused("0", ARBITER)),
    ("arbiter_numcpus", Refused("2", ARBITER)),
    ("arbiter_memory", Refused("8192", ARBITER)),
    ("arbiter_disk_size", Refused("~", ARBITER)),
    ("numa", Ignored("~", "not supported")),
    ("cpupinning", Ignored("~", "not supported")),
    (
        "virtual_router_id",
        Ignored("~", "not used: shiftlab's load balancer runs on the host"),
    ),
    ("keepalived", Refused("true", LB_ON_HOST)),
    ("coredns", Refused("true", LB_ON_HOST)),
    ("mdns", Refused("true", LB_ON_HOST)),
    (
        "coredns_nameserver",
        Refused("~", "the cluster network's dnsmasq forwards to the host's resolvers"),
    ),
    (
        "ignore_hosts",
        Refused("false", "the cluster network's DNS always answers the nodes' names"),
    ),
    (
        "localhost_fix",
        Ignored("false", "shiftlab hands hostnames out by DHCP and PTR"),
    ),
    (
        "ctlplane_localhost_fix",
        Ignored("false", "shiftlab hands hostnames out by DHCP and PTR"),
    ),
    (
        "worker_localhost_fix",
        Ignored("false", "shiftlab hands hostnames out by DHCP and PTR"),
    ),
    (
        "wait_timeout",
        Ignored("~", "shiftlab uses the installer's timeouts"),
    ),
    (
        "retries",
        Ignored("2", "a failed step is resumed by running the command again"),
    ),
    ("tpm", Ignored("false", "not supported")),
    ("nested", Ignored("true", "not supported")),
    ("kubevirt_api_service", Ignored("false", "not applicable")),
    (
        "kubevirt_disk_size",
        Refused("~", "on KubeVirt the disks are sized by `disk_size` (`backend: kubevirt`)"),
    ),
    (
        "kubevirt_ignore_node_port",
        Refused("false", "the API is exposed as `kubevirt.service_type` says"),
    ),
    (
        "worker_network",
        Refused("~", "workers join the cluster's one network (`network`)"),
    ),
    ("extra_networks", Refused("[]", ONE_NIC)),
    ("extra_ctlplane_networks", Refused("[]", ONE_NIC)),
    ("extra_worker_networks", Refused("[]", ONE_NIC)),
    ("sno_disable_nics", Refused("[]", ONE_NIC)),
    ("sno_nic", Refused("~", ONE_NIC)),
    (
        "ctlplane_schedulable",
        Refused(
            "false",
            "control planes run workloads exactly when there are no workers (the installer's rule)",
        ),
    ),
    ("ntp_server", Alias("ntp_servers")),
    (
        "autostart",
        Refused(
            "false",
            "it marks no domain to start with the host: `shiftlab start` starts a cluster",
        ),
    ),
    (
        "postscripts",
        Refused("[]", "it runs no scripts after the install; run them after `create cluster`"),
    ),
    ("bgp", Refused("false", LB_ON_HOST)),
    ("bgp_peers", Refused("[]", LB_ON_HOST)),
    ("bgp_extra_peers", Refused("[]", LB_ON_HOST)),
    ("cloud_tag", Refused("~", CLOUD)),
    ("cloud_internal", Refused("false", CLOUD)),
    ("cloud_lb", Refused("true", CLOUD)),
    ("cloud_storage", Refused("true", CLOUD)),
    ("sno_cloud_remove_lb", Refused("true", CLOUD)),
    ("public_api_ip", Refused("~", CLOUD)),
    (
        "sno_ctlplanes",
        Refused("false", "a single-node cluster does not grow into more control planes"),
    ),
    (
        "sno_workers",
        Refused("false", "a single-node cluster has no workers: use 3 control planes and `workers`"),
    ),
    ("sno_cpuset", Refused("~", PARTITIONING)),
    ("sno_telco", Refused("false", PARTITIONING)),
    ("cpu_partitioning", Refused("false", PARTITIONING)),
    ("sno_debug", Ignored("false", "kcli's own debugging")),
    (
        "sno_dns",
        Refused("~", "the cluster network's DNS serves the single node"),
    ),
    (
        "sno_extra_args",
        Refused("~", "it adds no kernel arguments to CoreOS"),
    ),
    (
        "sno_hostname",
        Refused("~", "node names are `<cluster>-ctlplane-0` and so on"),
    ),
    ("sno_vm", Ignored("false", "shiftlab's single node is always a VM")),
    ("sno_wait", Ignored("false", "shiftlab always waits for the install")),
    ("baremetal_hosts", Refused("[]", BAREMETAL)),
    ("baremetal_user", Refused("root", BAREMETAL)),
    ("baremetal_password", Refused("calvin", BAREMETAL)),
    ("baremetal_web", Refused("true", BAREMETAL)),
    ("baremetal_web_port", Refused("80", BAREMETAL)),
    ("baremetal_web_dir", Refused("/var/www/html", BAREMETAL)),
    ("baremetal_sub_dir", Refused("~", BAREMETAL)),
    ("baremetal_web_nic", Refused("default", BAREMETAL)),
    ("baremetal_cidr", Refused("~", BAREMETAL)),
    (
        "ksushy_ip",
        Refused("192.168.122.1", "it runs a BMC per VM itself: `bmc.address`"),
    ),
    (
        "ksushy_port",
        Refused("9000", "it runs a BMC per VM itself: `bmc.port`"),
    ),
    ("ipsec", Refused("false", MANIFEST)),
    ("ipsec_mode", Refused("~", MANIFEST)),
    ("mtu", Refused("1400", MANIFEST)),
    ("ovn_hostrouting", Refused("false", MANIFEST)),
    ("monitoring_retention", Alias("monitoring.retention")),
    ("dedicated_etcd", Refused("false", MANIFEST)),
    ("dedicated_etcd_size", Refused("100", MANIFEST)),
    ("techpreview", Refused("false", MANIFEST)),
    ("prega", Refused("false", MANIFEST)),
    ("virtualization_nightly", Refused("false", DAY2_APPS)),
    (
        "autologin",
        Refused("false", "it sets no console autologin: `shiftlab ssh` reaches a node"),
    ),
    (
        "calico_version",
        Refused("~", "its network types are OVNKubernetes and OpenShiftSDN (`network_type`)"),
    ),
    (
        "cilium_version",
        Refused("1.15.1", "its network types are OVNKubernetes and OpenShiftSDN (`network_type`)"),
    ),
    (
        "minimal_capability",
        Refused(
            "false",
            "capabilities are set by `capabilities: {baseline_capability_set: None}`",
        ),
    ),
    (
        "additional_capabilities",
        Refused(
            "[]",
            "capabilities are set by `capabilities: {additional_enabled_capabilities: [...]}`",
        ),
    ),
    (
        "kubeadmin_password",
        Refused("~", "the installer makes the kubeadmin password"),
    ),
    (
        "tempkey",
        Ignored("false", "shiftlab uses the SSH keys the file names"),
    ),
    (
        "kubetype",
        Refused("hypershift", "it deploys no hosted control planes"),
    ),
    (
        "macosx",
        Refused("false", "it runs on a Linux libvirt host, not macOS"),
    ),
    (
        "rhel10",
        Refused("false", "the nodes run the release's own CoreOS"),
    ),
];

/// kcli keys whose value is a secret: never shown in a message.
pub const SECRET: &[&str] = &[
    "disconnected_password",
    "baremetal_password",
    "kubeadmin_password",
];

/// Whether `v` leaves a kcli feature as it was: empty (null, false, an empty
/// list, mapping or string; YAML 1.1's `no`/`off` too) or kcli's own default for
/// it (`default`, YAML text).
pub fn at_rest(default: &str, v: &Value) -> bool {
    let off = match v {
        Value::Null | Value::Bool(false) => true,
        Value::Sequence(s) => s.is_empty(),
        Value::Mapping(m) => m.is_empty(),
        Value::String(s) => {
            s.is_empty() || matches!(s.as_str(), "no" | "No" | "NO" | "off" | "Off" | "OFF")
        }
        _ => false,
    };
    off || yaml_serde::from_str::<Value>(default).is_ok_and(|d| d == *v)
}

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

/// The kcli keys shiftlab reads (all but `Ignored` and `Refused`).
pub fn read() -> impl Iterator<Item = &'static str> {
    KEYS.iter()
        .filter(|(_, k)| !matches!(k, Ignored(..) | Refused(..)))
        .map(|(key, _)| *key)
}

/// The kcli keys shiftlab reads no value from: `Ignored` and `Refused`.
pub fn unread() -> impl Iterator<Item = (&'static str, Key)> {
    KEYS.iter()
        .filter(|(_, k)| matches!(k, Ignored(..) | Refused(..)))
        .copied()
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
        assert!(unread().any(|(k, _)| k == "async"));
        assert!(!read()
            .chain(unread().map(|(k, _)| k))
            .any(|k| k == "cluster"));
    }

    /// kcli's own defaults file: every key is shiftlab's own or in the table, and
    /// each key shiftlab does not read has kcli's default written as kcli has it.
    #[test]
    fn every_key_of_kcli_defaults_is_known_with_its_default() {
        let text = include_str!("../../tests/fixtures/kcli/kcli_default.yml");
        let defaults: yaml_serde::Mapping = yaml_serde::from_str(text).unwrap();
        for (k, v) in &defaults {
            let k = k.as_str().unwrap();
            let own = super::super::parse::top_keys().any(|t| t == k);
            let entry = KEYS.iter().find(|(key, _)| *key == k);
            assert!(
                own || entry.is_some(),
                "kcli's default `{k}` is not in the table"
            );
            if let Some((_, Ignored(default, _) | Refused(default, _))) = entry {
                assert!(
                    at_rest(default, v),
                    "`{k}`: kcli's default {v:?} is not at rest with {default:?}"
                );
            }
        }
        for (key, k) in KEYS {
            if let Ignored(default, _) | Refused(default, _) = k {
                assert!(
                    yaml_serde::from_str::<Value>(default).is_ok(),
                    "`{key}`: {default:?} is no YAML"
                );
            }
        }
    }

    #[test]
    fn at_rest_is_off_or_kcli_default() {
        let v = |t: &str| yaml_serde::from_str::<Value>(t).unwrap();
        assert!(at_rest("1400", &v("1400")));
        assert!(at_rest("1400", &v("~")));
        assert!(!at_rest("1400", &v("9000")));
        assert!(at_rest("true", &v("false")));
        assert!(at_rest("[]", &v("[]")));
        assert!(!at_rest("[]", &v("[eth1]")));
        assert!(at_rest("~", &v("off")));
        assert!(!at_rest("~", &v("pool.ntp.org")));
        assert!(!at_rest("false", &v("true")));
    }

    fn load(extra: &str) -> Result<crate::spec::Loaded, crate::spec::InvalidSpec> {
        let text = format!("cluster: kcli\ndomain: lab.test\nokd: true\n{extra}");
        crate::spec::from_str(&text, "kcli.yml", &crate::spec::Env::default())
    }

    #[test]
    fn a_refusal_names_key_value_and_reason_but_never_a_password() {
        let e = load("sno_hostname: one.lab.test\ndisconnected_password: s3cr3t-Pw\n").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("sno_hostname: \"one.lab.test\" is not supported by shiftlab because node names are"),
            "{text}"
        );
        assert!(
            text.contains("disconnected_password: a password (not shown) is not supported by shiftlab because"),
            "{text}"
        );
        assert!(!text.contains("s3cr3t"), "{text}");
    }

    #[test]
    fn kcli_keys_at_rest_are_quiet() {
        let l = load("ntp_server:\nautostart: false\nextra_networks: []\nmtu: 1400\nkeepalived: true\nasync: false\nhttp_proxy:\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !l.warnings.iter().any(|w| w.message.contains("kcli")),
            "{:?}",
            l.warnings
        );
        assert!(l.spec.proxy.is_none());
    }

    fn errors(e: &crate::spec::InvalidSpec) -> Vec<(String, String)> {
        e.errors
            .iter()
            .map(|d| (d.field.clone(), d.message.clone()))
            .collect()
    }

    /// kcli writes `monitoring_retention` as cluster-monitoring-config's
    /// prometheusK8s.retention (kcli customisation/99-monitoring.yaml):
    /// `monitoring.retention`, checked the same way.
    #[test]
    fn monitoring_retention_is_monitoring_retention() {
        let l = load("monitoring_retention: 7d\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.spec.monitoring.retention, "7d");
        let l = load("monitoring_retention: 24h\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.spec.monitoring.retention, "24h");
        let e = errors(&load("monitoring_retention: 2 days\n").unwrap_err());
        assert!(
            e.iter().any(|(f, m)| f == "monitoring_retention"
                && m.contains("\"2 days\" is not a Prometheus duration")),
            "{e:?}"
        );
        let e =
            errors(&load("monitoring:\n  retention: 3d\nmonitoring_retention: 7d\n").unwrap_err());
        assert!(
            e.iter().any(|(f, m)| f == "monitoring_retention"
                && m.contains("sets the same thing as `monitoring.retention`")),
            "{e:?}"
        );
    }

    /// kcli's `nfs` app (a host export, nfs-subdir-external-provisioner, its
    /// StorageClass the default) is `storage: nfs`; its settings that would make it
    /// something else are refused.
    #[test]
    fn the_nfs_app_is_storage_nfs() {
        for apps in ["[nfs, metallb-operator]", "[{name: nfs}, metallb-operator]"] {
            let l = load(&format!(
                "apps: {apps}\nnfs_namespace: nfs\nnfs_network: default\n"
            ))
            .unwrap_or_else(|e| panic!("{apps}: {e}"));
            assert_eq!(l.spec.storage, crate::spec::Storage::Nfs, "{apps}");
            let w: Vec<_> = l.warnings.iter().filter(|w| w.field == "apps").collect();
            assert!(
                w.len() == 1
                    && w[0].message.contains("(metallb-operator)")
                    && !w[0].message.contains("nfs"),
                "{apps}: {:?}",
                l.warnings
            );
        }
        let l = load("apps: [metallb-operator]\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.spec.storage, crate::spec::Storage::None);
        let l =
            load("apps: []\nnfs_default_storageclass: true\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !l.warnings.iter().any(|w| w.message.contains("kcli")),
            "{:?}",
            l.warnings
        );
        for (extra, field, says) in [
            (
                "apps: [nfs]\nnfs_ip: 10.9.8.7\n",
                "nfs_ip",
                "its NFS server is the host itself",
            ),
            (
                "apps: [nfs]\nnfs_share: /srv/x\n",
                "nfs_share",
                "exports a directory of its own",
            ),
            (
                "apps: [nfs]\nnfs_default_storageclass: false\n",
                "nfs_default_storageclass",
                "is the cluster's default",
            ),
            (
                "apps: [nfs]\nnfs_disconnected_registry: r.lab\n",
                "nfs_disconnected_registry",
                "`image_digest_sources`",
            ),
            (
                "apps: [{name: nfs, nfs_ip: 10.9.8.7}]\n",
                "apps",
                "at the top, where shiftlab checks them",
            ),
            (
                "storage: none\napps: [nfs]\n",
                "apps",
                "sets the same thing as `storage`",
            ),
            ("apps: nfs\n", "apps", "is not a list of kcli apps"),
        ] {
            let e = errors(&load(extra).unwrap_err());
            assert!(
                e.iter().any(|(f, m)| f == field && m.contains(says)),
                "{extra}: {e:?}"
            );
        }
    }

    #[test]
    fn kcli_spellings_of_disk_subnet_and_single_node() {
        let l = load("ctlplanes: 1\nworkers: 0\nsno_disk: /dev/sda\nmachine_cidr: 10.40.0.0/24\nrehearsal: true\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.spec.method, crate::spec::Method::Sno);
        assert_eq!(l.spec.installation_disk, "/dev/sda");
        assert_eq!(l.spec.network.cidr.unwrap().to_string(), "10.40.0.0/24");
        let e = load("ca: |\n  -----BEGIN CERTIFICATE-----\nadditional_trust_bundle: x.pem\n")
            .unwrap_err();
        assert!(
            e.errors.iter().any(|d| d.field == "ca"
                && d.message
                    .contains("sets the same thing as `additional_trust_bundle`")),
            "{e}"
        );
    }
}
