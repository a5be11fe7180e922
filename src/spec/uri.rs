//! Which libvirt URI a cluster uses when its file names none: decided here, in
//! the spec, so that resolving a cluster file needs nothing of the libvirt
//! module; `libvirt::uri` reads the same rule.

/// The hypervisor shiftlab drives when nothing else is said: the local system daemon.
pub const SYSTEM_URI: &str = "qemu:///system";
/// The variable libvirt's own clients read for their default URI.
const URI_ENV: &str = "LIBVIRT_DEFAULT_URI";

/// `$LIBVIRT_DEFAULT_URI`, when set and not empty.
pub fn env_uri() -> Option<String> {
    std::env::var(URI_ENV).ok().filter(|s| !s.is_empty())
}

/// The URI: the one given (a flag, the cluster file, the ledger), else `env`
/// (`$LIBVIRT_DEFAULT_URI`), else [`SYSTEM_URI`].
pub fn choose_uri(given: Option<&str>, env: Option<&str>) -> String {
    given
        .or(env.filter(|s| !s.is_empty()))
        .unwrap_or(SYSTEM_URI)
        .to_string()
}
