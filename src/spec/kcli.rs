//! kcli parameter files: which of kcli's flat keys shiftlab understands, and which it
//! knows but ignores (with a warning) because they describe kcli features shiftlab
//! does differently or not at all.

/// kcli keys shiftlab maps onto its own fields, with the field they become.
pub const MAPPED: &[(&str, &str)] = &[
    ("masters", "ctlplanes"),
    ("ctlplane_memory", "ctlplane.memory"),
    ("master_memory", "ctlplane.memory"),
    ("ctlplane_numcpus", "ctlplane.numcpus"),
    ("master_numcpus", "ctlplane.numcpus"),
    ("worker_memory", "worker.memory"),
    ("worker_numcpus", "worker.numcpus"),
    ("bootstrap_memory", "bootstrap.memory"),
    ("bootstrap_numcpus", "bootstrap.numcpus"),
    ("extra_ctlplane_disks", "ctlplane.extra_disks"),
    ("extra_master_disks", "ctlplane.extra_disks"),
    ("extra_worker_disks", "worker.extra_disks"),
    ("api_ip", "network.api_ip"),
    ("ingress_ip", "network.ingress_ip"),
    ("pub_key", "ssh_keys"),
    ("keys", "ssh_keys"),
    ("okd", "distribution"),
    ("tag", "version"),
    ("pool", "libvirt.pool"),
    ("uefi", "libvirt.firmware"),
    ("sno", "method"),
    ("cluster_network_ipv4", "cluster_network"),
    ("service_network_ipv4", "service_network"),
];

/// kcli keys with the same name and meaning as shiftlab's own top-level keys
/// (`network` is a name there; shiftlab also takes a mapping).
pub const SHARED: &[&str] = &[
    "cluster",
    "domain",
    "version",
    "pull_secret",
    "ctlplanes",
    "workers",
    "numcpus",
    "memory",
    "disk_size",
    "extra_disks",
    "network",
    "network_type",
    "fips",
];

/// kcli keys recognised but ignored; each use gets a warning naming why.
pub const IGNORED: &[(&str, &str)] = &[
    (
        "image",
        "a kcli template name; shiftlab takes a CoreOS image path in `image`",
    ),
    ("async", "shiftlab always drives the install to completion"),
    ("apps", "kcli day-2 apps are not installed by shiftlab"),
    ("notify", "kcli notifications are not supported"),
    ("dualstack", "IPv6 is not supported yet"),
    ("ipv6", "IPv6 is not supported yet"),
    ("metal3", "use method: ipi"),
    ("sslip", "shiftlab serves the cluster's DNS itself"),
    ("ctlplane_macs", "MACs are derived per node by shiftlab"),
    ("worker_macs", "MACs are derived per node by shiftlab"),
    ("ctlplane_ips", "addresses are planned by shiftlab"),
    ("worker_ips", "addresses are planned by shiftlab"),
    ("disconnected_url", "use image_digest_sources"),
    ("disconnected_user", "use image_digest_sources"),
    ("disconnected_password", "use image_digest_sources"),
    ("imageregistry", "the lab registry uses emptyDir"),
    ("autoscale", "autoscaling is not supported"),
    ("threaded", "not applicable"),
    ("flavor", "sizes are set per role"),
    ("flavor_bootstrap", "sizes are set per role"),
    ("flavor_ctlplane", "sizes are set per role"),
    ("flavor_worker", "sizes are set per role"),
    ("numa", "not supported"),
    ("cpupinning", "not supported"),
    (
        "virtual_router_id",
        "not used: shiftlab's load balancer runs on the host",
    ),
    (
        "localhost_fix",
        "shiftlab hands hostnames out by DHCP and PTR",
    ),
    ("wait_timeout", "shiftlab uses the installer's timeouts"),
    ("tpm", "not supported"),
    ("nested", "not supported"),
    ("kubevirt_api_service", "not applicable"),
];

pub fn is_known(key: &str) -> bool {
    MAPPED.iter().any(|(k, _)| *k == key)
        || SHARED.contains(&key)
        || IGNORED.iter().any(|(k, _)| *k == key)
}
