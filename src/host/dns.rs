//! Host DNS integration: make this host resolve `api.<cluster>.<domain>` and
//! `*.apps.<cluster>.<domain>`, and undo it exactly.
//!
//! Three mechanisms, picked by [`HostDns::detect`]:
//! - NetworkManager with its dnsmasq plugin: a drop-in
//!   `/etc/NetworkManager/dnsmasq.d/shiftlab-<cluster>.conf` with
//!   `server=/<cluster>.<domain>/<gateway>` (split DNS towards the cluster
//!   network's dnsmasq), then `nmcli general reload dns-full`;
//! - systemd-resolved: per-link DNS on the cluster bridge
//!   (`resolvectl dns <bridge> <gateway>`, `resolvectl domain <bridge>
//!   ~<cluster>.<domain>`), undone by `resolvectl revert <bridge>`; no file;
//! - neither: a marked block in `/etc/hosts` naming api and the usual routes.
//!
//! And one only when asked (`--host-dns local`), for hosts with neither
//! NetworkManager's dnsmasq nor systemd-resolved where `*.apps` must resolve:
//! serve answers every cluster's zone itself on [`LOCAL_DNS_ADDR`] (port 53,
//! `daemon::resolver`) and refuses every other name; a marked block at the top of
//! `/etc/resolv.conf` puts that address first. glibc goes on to the next
//! nameserver when a server answers REFUSED (`resolv/res_send.c` `send_dg`: `if
//! (anhp->rcode == SERVFAIL || anhp->rcode == NOTIMP || anhp->rcode == REFUSED)`
//! … `next_ns`, bminor/glibc@04130e53ba685dd7138e3e928708e17923f795b5) and
//! without waiting when nothing listens (the connected UDP socket gets
//! ECONNREFUSED, same file); Go's resolver does the same (`src/net/dnsclient_unix.go`
//! `tryOneName`: a `checkHeader` error other than NXDOMAIN `continue`s to the next
//! server, golang/go@44a0f15bd58d096559bddf370b84e9e979c32747). So other names
//! resolve as before, through the host's own nameservers. Refused where it could
//! not be undone exactly or would change other lookups: a symlinked resolv.conf
//! (another program owns it), `options rotate` (the cluster names would go
//! upstream half the time), three nameservers already (glibc reads three,
//! `MAXNS`: the third would be hidden), or none (glibc's implicit 127.0.0.1 would
//! be hidden).
//!
//! The first two change how the host resolves through a link (the bridge, the
//! DNS server on it). shiftlab does that only on the bridge of a NAT network it
//! created: in `mode: bridge` the bridge is the user's LAN and no cluster DNS runs
//! at its gateway, so [`choose`] always picks the hosts file there.
//!
//! Every file change is atomic (temporary file, fsync, rename; the original
//! mode and owner kept) and serialized by a lock file; removing a block gives
//! back the rest of the file byte for byte.

use std::fs;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::plan::Plan;

/// Routes a cluster serves under `*.apps` that a host most often opens.
pub const USUAL_ROUTES: &[&str] = &[
    "console-openshift-console",
    "oauth-openshift",
    "downloads-openshift-console",
    "prometheus-k8s-openshift-monitoring",
    "grafana-openshift-monitoring",
    "alertmanager-main-openshift-monitoring",
    "thanos-querier-openshift-monitoring",
    "canary-openshift-ingress-canary",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// NetworkManager's dnsmasq plugin: split DNS to the cluster's dnsmasq.
    #[value(name = "networkmanager")]
    NetworkManagerDnsmasq,
    /// systemd-resolved per-link DNS on the cluster bridge.
    #[value(name = "resolved")]
    SystemdResolved,
    /// A marked block in the hosts file.
    #[value(name = "hosts")]
    HostsFile,
    /// serve's own responder for the cluster zones, first in /etc/resolv.conf.
    #[value(name = "local")]
    LocalDns,
}

impl Mechanism {
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::NetworkManagerDnsmasq => "networkmanager-dnsmasq",
            Mechanism::SystemdResolved => "systemd-resolved",
            Mechanism::HostsFile => "hosts-file",
            Mechanism::LocalDns => "local-dns",
        }
    }
}

/// What the host must resolve for one cluster, taken from its plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterDns {
    pub cluster: String,
    /// `<cluster>.<domain>`
    pub cluster_domain: String,
    /// The cluster network's dnsmasq (the bridge's gateway address).
    pub server: IpAddr,
    /// The cluster bridge, for per-link DNS.
    pub link: String,
    pub api: IpAddr,
    pub ingress: IpAddr,
    /// Whether `link` is a bridge shiftlab's libvirt network created (NAT mode),
    /// with the cluster's dnsmasq at `server`. A user's bridge is never touched.
    #[serde(default)]
    pub link_owned: bool,
}

impl ClusterDns {
    pub fn from_plan(plan: &Plan) -> Self {
        ClusterDns {
            cluster: plan.cluster.clone(),
            cluster_domain: plan.cluster_domain.clone(),
            server: plan.network.host_ip(),
            link: plan.network.bridge.clone(),
            api: plan.vips.api_ip(),
            ingress: plan.vips.ingress_ip(),
            link_owned: plan.network.mode == crate::spec::NetworkMode::Nat,
        }
    }

    /// Names the hosts-file fallback maps: api and the usual routes.
    pub fn names(&self) -> Vec<(IpAddr, String)> {
        let mut v = vec![(self.api, format!("api.{}", self.cluster_domain))];
        v.extend(
            USUAL_ROUTES
                .iter()
                .map(|r| (self.ingress, format!("{r}.apps.{}", self.cluster_domain))),
        );
        v
    }
}

/// What was done for a cluster, kept in its state so it can be undone exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub mechanism: Mechanism,
    pub cluster_domain: String,
    /// The file changed (hosts file or NetworkManager drop-in); none for resolved.
    pub file: Option<PathBuf>,
    /// The link configured (systemd-resolved).
    pub link: Option<String>,
    /// Whether that link was shiftlab's own bridge. Only then is it reverted:
    /// a record without it (older shiftlab) never reverts a link.
    #[serde(default)]
    pub link_owned: bool,
    /// Why the mechanism differs from the host's best one, for `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The mechanism for a cluster: the one asked for (`requested`), else the host's
/// best (`detect`); but on a link shiftlab did not create, only the hosts file —
/// NetworkManager's split DNS and resolved's per-link DNS would send the host's
/// queries (or replace a LAN link's settings) towards an address where no
/// cluster DNS runs. Returns the note to show when that overrode the choice.
pub fn choose(
    requested: Option<Mechanism>,
    detect: impl FnOnce() -> Mechanism,
    link_owned: bool,
    link: &str,
) -> (Mechanism, Option<String>) {
    let wanted = requested.unwrap_or_else(detect);
    // The hosts file and the local responder touch no link.
    if link_owned || matches!(wanted, Mechanism::HostsFile | Mechanism::LocalDns) {
        return (wanted, None);
    }
    (
        Mechanism::HostsFile,
        Some(format!(
            "{link} is not a bridge shiftlab created (mode: bridge): host DNS uses the hosts file, never {}",
            wanted.as_str()
        )),
    )
}

/// Where the host's DNS configuration lives; every path injectable for tests.
#[derive(Debug, Clone)]
pub struct HostDns {
    pub hosts_file: PathBuf,
    /// `/etc/NetworkManager`
    pub nm_dir: PathBuf,
    /// `/run`, to tell which services run.
    pub run_dir: PathBuf,
    /// `/etc/resolv.conf`
    pub resolv_conf: PathBuf,
    /// Serializes changes by concurrent shiftlab processes.
    pub lock_file: PathBuf,
    /// Run `nmcli`/`resolvectl`; off in tests of the file mechanics.
    pub run_commands: bool,
}

impl HostDns {
    /// The real host, serialised by `lock_file` (in shiftlab's state directory).
    /// `SHIFTLAB_HOSTS_FILE` points the hosts-file mechanism elsewhere.
    pub fn system(lock_file: PathBuf) -> Self {
        HostDns {
            hosts_file: std::env::var_os("SHIFTLAB_HOSTS_FILE")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| "/etc/hosts".into()),
            nm_dir: "/etc/NetworkManager".into(),
            run_dir: "/run".into(),
            resolv_conf: "/etc/resolv.conf".into(),
            lock_file,
            run_commands: true,
        }
    }

    /// Which mechanism this host supports, best first.
    pub fn detect(&self) -> Mechanism {
        if self.run_dir.join("NetworkManager").is_dir() && nm_uses_dnsmasq(&self.nm_dir) {
            return Mechanism::NetworkManagerDnsmasq;
        }
        let stub = fs::read_to_string(&self.resolv_conf).unwrap_or_default();
        if self.run_dir.join("systemd/resolve").is_dir()
            && stub
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["nameserver", "127.0.0.53"])
        {
            return Mechanism::SystemdResolved;
        }
        Mechanism::HostsFile
    }

    fn nm_dropin(&self, cluster: &str) -> PathBuf {
        self.nm_dir
            .join("dnsmasq.d")
            .join(format!("shiftlab-{cluster}.conf"))
    }

    /// Configure the host for the cluster with `mechanism`. Idempotent.
    pub fn apply(&self, c: &ClusterDns, mechanism: Mechanism) -> Result<Record> {
        if !matches!(mechanism, Mechanism::HostsFile | Mechanism::LocalDns) && !c.link_owned {
            bail!(
                "{} is not a bridge shiftlab created: refusing to change its DNS with {}",
                c.link,
                mechanism.as_str()
            );
        }
        let _lock = crate::files::lock_blocking(&self.lock_file)?;
        match mechanism {
            Mechanism::HostsFile => {
                let text = read_or_empty(&self.hosts_file)?;
                let new = insert_block(&text, &c.cluster_domain, &hosts_entries(c));
                if new != text {
                    replace_file(&self.hosts_file, new.as_bytes())?;
                }
                Ok(Record {
                    mechanism,
                    cluster_domain: c.cluster_domain.clone(),
                    file: Some(self.hosts_file.clone()),
                    link: None,
                    link_owned: c.link_owned,
                    note: None,
                })
            }
            Mechanism::NetworkManagerDnsmasq => {
                let path = self.nm_dropin(&c.cluster);
                let text = nm_dropin_text(c);
                if read_or_empty(&path)? != text {
                    replace_file(&path, text.as_bytes())?;
                    self.run(&["nmcli", "general", "reload", "dns-full"])?;
                }
                Ok(Record {
                    mechanism,
                    cluster_domain: c.cluster_domain.clone(),
                    file: Some(path),
                    link: None,
                    link_owned: c.link_owned,
                    note: None,
                })
            }
            Mechanism::LocalDns => {
                let path = &self.resolv_conf;
                let meta = fs::symlink_metadata(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let text = read_or_empty(path)?;
                if let Some(why) = local_dns_refusal(&text, meta.file_type().is_symlink()) {
                    bail!("--host-dns local: {}: {why}", path.display());
                }
                let new = with_local_zone(&text, &c.cluster_domain, true);
                if new != text {
                    replace_file(path, new.as_bytes())?;
                }
                Ok(Record {
                    mechanism,
                    cluster_domain: c.cluster_domain.clone(),
                    file: Some(path.clone()),
                    link: None,
                    link_owned: c.link_owned,
                    note: None,
                })
            }
            Mechanism::SystemdResolved => {
                self.run(&["resolvectl", "dns", &c.link, &c.server.to_string()])?;
                self.run(&[
                    "resolvectl",
                    "domain",
                    &c.link,
                    &format!("~{}", c.cluster_domain),
                ])?;
                Ok(Record {
                    mechanism,
                    cluster_domain: c.cluster_domain.clone(),
                    file: None,
                    link: Some(c.link.clone()),
                    link_owned: c.link_owned,
                    note: None,
                })
            }
        }
    }

    /// Undo what `record` says was done. Idempotent.
    pub fn remove(&self, record: &Record) -> Result<()> {
        let _lock = crate::files::lock_blocking(&self.lock_file)?;
        match record.mechanism {
            Mechanism::LocalDns => {
                let path = record.file.as_deref().unwrap_or(&self.resolv_conf);
                let text = read_or_empty(path)?;
                let new = with_local_zone(&text, &record.cluster_domain, false);
                if new != text {
                    replace_file(path, new.as_bytes())?;
                }
            }
            Mechanism::HostsFile => {
                let path = record.file.as_deref().unwrap_or(&self.hosts_file);
                let text = read_or_empty(path)?;
                let new = remove_block(&text, &record.cluster_domain);
                if new != text {
                    replace_file(path, new.as_bytes())?;
                }
            }
            Mechanism::NetworkManagerDnsmasq => {
                if let Some(path) = &record.file {
                    match fs::remove_file(path) {
                        Ok(()) => self.run(&["nmcli", "general", "reload", "dns-full"])?,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            return Err(e).with_context(|| format!("removing {}", path.display()))
                        }
                    }
                }
            }
            Mechanism::SystemdResolved => {
                if let Some(link) = record.link.as_ref().filter(|_| record.link_owned) {
                    // The link may be gone with its network already: nothing to revert.
                    // `revert` drops every per-link setting: only ever on our bridge.
                    if Path::new("/sys/class/net").join(link).exists() {
                        self.run(&["resolvectl", "revert", link])?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Take the local responder out of resolv.conf for every cluster (serve
    /// stops: nothing answers there any more). Records stay: serve puts the block
    /// back when it serves the clusters again.
    pub fn withdraw_local(&self) -> Result<()> {
        let _lock = crate::files::lock_blocking(&self.lock_file)?;
        let text = read_or_empty(&self.resolv_conf)?;
        let new = remove_block(&text, LOCAL_DNS_KEY);
        if new != text {
            replace_file(&self.resolv_conf, new.as_bytes())?;
        }
        Ok(())
    }

    /// Whether what `record` describes is in place.
    pub fn is_configured(&self, record: &Record) -> bool {
        match record.mechanism {
            Mechanism::LocalDns => {
                let path = record.file.as_deref().unwrap_or(&self.resolv_conf);
                fs::read_to_string(path)
                    .map(|t| local_zones(&t).contains(&record.cluster_domain))
                    .unwrap_or(false)
            }
            Mechanism::HostsFile => {
                let path = record.file.as_deref().unwrap_or(&self.hosts_file);
                fs::read_to_string(path)
                    .map(|t| find_block(&t, &record.cluster_domain).is_some())
                    .unwrap_or(false)
            }
            Mechanism::NetworkManagerDnsmasq => record.file.as_deref().is_some_and(Path::exists),
            Mechanism::SystemdResolved => record.link.as_deref().is_some_and(|l| {
                Command::new("resolvectl")
                    .args(["domain", l])
                    .output()
                    .map(|o| {
                        String::from_utf8_lossy(&o.stdout)
                            .contains(&format!("~{}", record.cluster_domain))
                    })
                    .unwrap_or(false)
            }),
        }
    }

    fn run(&self, argv: &[&str]) -> Result<()> {
        if !self.run_commands {
            return Ok(());
        }
        let out = Command::new(argv[0])
            .args(&argv[1..])
            .output()
            .with_context(|| format!("running {}", argv.join(" ")))?;
        if !out.status.success() {
            bail!(
                "{} failed: {}",
                argv.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

fn nm_uses_dnsmasq(nm_dir: &Path) -> bool {
    let mut files = vec![nm_dir.join("NetworkManager.conf")];
    if let Ok(rd) = fs::read_dir(nm_dir.join("conf.d")) {
        let mut extra: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect();
        extra.sort();
        files.extend(extra);
    }
    // The last `dns=` of the [main] sections wins, as in NetworkManager.
    let mut dns = None;
    for f in files {
        let Ok(text) = fs::read_to_string(&f) else {
            continue;
        };
        let mut in_main = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_main = line == "[main]";
            } else if in_main {
                if let Some(v) = line.strip_prefix("dns") {
                    if let Some(v) = v.trim_start().strip_prefix('=') {
                        dns = Some(v.trim().to_string());
                    }
                }
            }
        }
    }
    dns.as_deref() == Some("dnsmasq")
}

/// Where serve's responder answers the cluster zones (`--host-dns local`): port
/// 53 (a resolv.conf `nameserver` has no port) on a loopback address of its own,
/// not systemd-resolved's 127.0.0.53 nor Debian's hostname address 127.0.1.1.
pub const LOCAL_DNS_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 1, 53);

/// The marker key of the resolv.conf block.
const LOCAL_DNS_KEY: &str = "local-dns";
const ZONES_PREFIX: &str =
    "# zones answered by shiftlab serve (other names: REFUSED, the next nameserver is asked):";

/// Why resolv.conf cannot take the local responder, if it cannot.
pub fn local_dns_refusal(text: &str, is_symlink: bool) -> Option<String> {
    if is_symlink {
        return Some(
            "a symbolic link: another program (systemd-resolved, resolvconf, NetworkManager) manages it; use --host-dns resolved or networkmanager, or hosts".into(),
        );
    }
    let outside = remove_block(text, LOCAL_DNS_KEY);
    let words = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let lines: Vec<Vec<String>> = outside
        .lines()
        .map(words)
        .filter(|w| !w.is_empty() && !w[0].starts_with('#') && !w[0].starts_with(';'))
        .collect();
    let servers = lines.iter().filter(|w| w[0] == "nameserver").count();
    if lines
        .iter()
        .any(|w| w[0] == "options" && w.iter().any(|o| o == "rotate"))
    {
        return Some("`options rotate` would send cluster names to the other nameservers too; use --host-dns hosts".into());
    }
    if servers == 0 {
        return Some("no nameserver line (glibc then asks 127.0.0.1, which a first nameserver would hide); add your nameserver first".into());
    }
    if servers >= 3 {
        return Some(format!("{servers} nameservers already; glibc reads only three, so another one would hide the last; use --host-dns hosts"));
    }
    None
}

/// The zones listed in the local-dns block of resolv.conf.
pub fn local_zones(text: &str) -> Vec<String> {
    let Some((s, e, _)) = find_block(text, LOCAL_DNS_KEY) else {
        return Vec::new();
    };
    text[s..e]
        .lines()
        .find_map(|l| l.strip_prefix(ZONES_PREFIX))
        .map(|z| z.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// resolv.conf with `zone` added to (or taken from) the local-dns block at its
/// top; the block goes when its last zone does, giving back the file byte for byte.
pub fn with_local_zone(text: &str, zone: &str, add: bool) -> String {
    let mut zones = local_zones(text);
    zones.retain(|z| z != zone);
    if add {
        zones.push(zone.to_string());
        zones.sort();
    }
    if zones.is_empty() {
        return remove_block(text, LOCAL_DNS_KEY);
    }
    let entries = format!(
        "{ZONES_PREFIX} {}
nameserver {LOCAL_DNS_ADDR}
",
        zones.join(" ")
    );
    if find_block(text, LOCAL_DNS_KEY).is_some() {
        return insert_block(text, LOCAL_DNS_KEY, &entries);
    }
    // First in the file: glibc asks nameservers in their order.
    format!(
        "{}
{entries}{}
{text}",
        begin_marker(LOCAL_DNS_KEY),
        end_marker(LOCAL_DNS_KEY)
    )
}

/// The NetworkManager dnsmasq drop-in for a cluster.
pub fn nm_dropin_text(c: &ClusterDns) -> String {
    format!(
        "# shiftlab: split DNS for cluster {}; removed by shiftlab destroy\nserver=/{}/{}\n",
        c.cluster, c.cluster_domain, c.server
    )
}

/// The hosts-file lines for a cluster (without markers).
pub fn hosts_entries(c: &ClusterDns) -> String {
    c.names()
        .iter()
        .map(|(ip, name)| format!("{ip} {name}\n"))
        .collect()
}

fn begin_marker(domain: &str) -> String {
    format!("# shiftlab begin {domain}")
}

const NEWLINE_ADDED: &str = " (newline added)";

fn end_marker(domain: &str) -> String {
    format!("# shiftlab end {domain}")
}

/// Byte range of the block for `domain` (whole lines), and whether its begin
/// marker says a newline was added before it.
fn find_block(text: &str, domain: &str) -> Option<(usize, usize, bool)> {
    let begin = begin_marker(domain);
    let end = end_marker(domain);
    let mut offset = 0;
    let mut start: Option<(usize, bool)> = None;
    for line in text.split_inclusive('\n') {
        let content = line.strip_suffix('\n').unwrap_or(line);
        match start {
            None if content == begin => start = Some((offset, false)),
            None if content == format!("{begin}{NEWLINE_ADDED}") => start = Some((offset, true)),
            Some((s, added)) if content == end => return Some((s, offset + line.len(), added)),
            _ => {}
        }
        offset += line.len();
    }
    None
}

/// `text` with the block for `domain` holding `entries`: replaced in place if
/// there is one, else appended. Everything else is kept byte for byte.
pub fn insert_block(text: &str, domain: &str, entries: &str) -> String {
    let body = |added: bool| {
        format!(
            "{}{}\n{entries}{}\n",
            begin_marker(domain),
            if added { NEWLINE_ADDED } else { "" },
            end_marker(domain)
        )
    };
    if let Some((s, e, added)) = find_block(text, domain) {
        return format!("{}{}{}", &text[..s], body(added), &text[e..]);
    }
    if text.is_empty() || text.ends_with('\n') {
        format!("{text}{}", body(false))
    } else {
        format!("{text}\n{}", body(true))
    }
}

/// `text` without the block for `domain`: exactly the text it was inserted into.
pub fn remove_block(text: &str, domain: &str) -> String {
    let Some((mut s, e, added)) = find_block(text, domain) else {
        return text.to_string();
    };
    let rest = &text[e..];
    if added {
        // The newline added before the block goes with it if nothing follows;
        // another cluster's block that follows inherits the debt instead.
        if rest.is_empty() && s > 0 && text.as_bytes()[s - 1] == b'\n' {
            s -= 1;
        } else if let Some(line) = rest.split_inclusive('\n').next() {
            let content = line.strip_suffix('\n').unwrap_or(line);
            if content.starts_with("# shiftlab begin ") && !content.ends_with(NEWLINE_ADDED) {
                return format!(
                    "{}{content}{NEWLINE_ADDED}\n{}",
                    &text[..s],
                    &rest[line.len()..]
                );
            }
        }
    }
    format!("{}{rest}", &text[..s])
}

fn read_or_empty(path: &Path) -> Result<String> {
    match fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Replace a host file atomically, keeping its mode and owner. A file that is
/// a mount point (a container's or sandbox's bind-mounted `/etc/hosts`) cannot
/// be renamed over: it is then rewritten in place with one write.
pub fn replace_file(path: &Path, data: &[u8]) -> Result<()> {
    let meta = fs::metadata(path).ok();
    let mode = meta.as_ref().map(|m| m.permissions().mode() & 0o7777);
    let mut f = crate::files::AtomicFile::create(path, mode.unwrap_or(0o644))?;
    if let Some(m) = &meta {
        std::os::unix::fs::fchown(f.file(), Some(m.uid()), Some(m.gid()))
            .with_context(|| format!("keeping the owner of {}", path.display()))?;
        f.file()
            .set_permissions(m.permissions())
            .with_context(|| format!("keeping the mode of {}", path.display()))?;
    }
    f.file()
        .write_all(data)
        .with_context(|| format!("writing {}", f.temp_path().display()))?;
    match f.commit() {
        Ok(()) => Ok(()),
        Err(e)
            if e.raw_os_error() == Some(libc::EBUSY) || e.raw_os_error() == Some(libc::EXDEV) =>
        {
            tracing::warn!(path = %path.display(), "a mount point: rewriting it in place");
            let mut f = fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            f.write_all(data)
                .with_context(|| format!("writing {}", path.display()))?;
            f.sync_all()
                .with_context(|| format!("syncing {}", path.display()))
        }
        Err(e) => Err(e).with_context(|| format!("renaming into {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str, third: u8) -> ClusterDns {
        ClusterDns {
            cluster: name.into(),
            cluster_domain: format!("{name}.lab.test"),
            server: Ipv4Addr::new(192, 168, third, 1).into(),
            link: format!("sl-{name}"),
            api: Ipv4Addr::new(192, 168, third, 2).into(),
            ingress: Ipv4Addr::new(192, 168, third, 3).into(),
            link_owned: true,
        }
    }

    #[test]
    fn a_bridge_shiftlab_did_not_create_gets_the_hosts_file_only() {
        use Mechanism::*;
        for requested in [
            None,
            Some(NetworkManagerDnsmasq),
            Some(SystemdResolved),
            Some(HostsFile),
        ] {
            for detected in [NetworkManagerDnsmasq, SystemdResolved, HostsFile] {
                let (m, note) = choose(requested, || detected, false, "br0");
                assert_eq!(m, HostsFile, "{requested:?}/{detected:?}");
                let wanted = requested.unwrap_or(detected);
                assert_eq!(
                    note.is_some(),
                    wanted != HostsFile,
                    "{requested:?}/{detected:?}"
                );
                if let Some(n) = note {
                    assert!(n.contains("br0 is not a bridge shiftlab created"), "{n}");
                }
                // Our own NAT bridge: what was asked for, else the host's best.
                let (m, note) = choose(requested, || detected, true, "sl-lab1");
                assert_eq!(m, wanted);
                assert!(note.is_none());
            }
        }
    }

    #[test]
    fn link_mechanisms_are_refused_on_a_foreign_link() {
        let dir = tempfile::tempdir().unwrap();
        let h = env(dir.path());
        let c = ClusterDns {
            link: "br0".into(),
            link_owned: false,
            ..cluster("lab1", 50)
        };
        for m in [Mechanism::SystemdResolved, Mechanism::NetworkManagerDnsmasq] {
            let e = h.apply(&c, m).unwrap_err();
            assert!(
                e.to_string()
                    .contains("br0 is not a bridge shiftlab created"),
                "{e}"
            );
        }
        assert!(!h.nm_dropin("lab1").exists());
        // The hosts file is fine.
        h.apply(&c, Mechanism::HostsFile).unwrap();
    }

    #[test]
    fn only_an_owned_link_is_reverted() {
        // A record of an older shiftlab (no `link_owned`) must never revert a link.
        let old: Record = serde_json::from_str(
            r#"{"mechanism":"systemd-resolved","cluster_domain":"lab1.lab.test","file":null,"link":"lo"}"#,
        )
        .unwrap();
        assert!(!old.link_owned);
        let dir = tempfile::tempdir().unwrap();
        let h = HostDns {
            run_commands: true,
            ..env(dir.path())
        };
        // `lo` exists: were it reverted, `resolvectl` would run (and fail here, where
        // resolved does not run); not running it is the point.
        h.remove(&old).unwrap();
    }

    const ORIGINALS: &[&str] = &[
        "",
        "127.0.0.1 localhost\n",
        "127.0.0.1 localhost",
        "127.0.0.1 localhost\n\n# comment\n::1 localhost ip6-localhost\n",
        "127.0.0.1\tlocalhost\r\n10.0.0.1 a\r\n",
        "# shiftlab begin other.test\n1.2.3.4 x\n",
    ];

    #[test]
    fn insert_then_remove_is_identity() {
        let a = cluster("a", 10);
        let b = cluster("b", 11);
        for orig in ORIGINALS {
            let one = insert_block(orig, &a.cluster_domain, &hosts_entries(&a));
            assert!(one.contains("192.168.10.2 api.a.lab.test\n"));
            assert!(one.starts_with(orig.trim_end_matches('\n')));
            assert_eq!(remove_block(&one, &a.cluster_domain), *orig, "{orig:?}");
            // Two clusters, removed in either order.
            let two = insert_block(&one, &b.cluster_domain, &hosts_entries(&b));
            let rm_a = remove_block(&two, &a.cluster_domain);
            assert_eq!(remove_block(&rm_a, &b.cluster_domain), *orig, "{orig:?}");
            let rm_b = remove_block(&two, &b.cluster_domain);
            assert_eq!(rm_b, one);
            assert_eq!(remove_block(&rm_b, &a.cluster_domain), *orig);
        }
    }

    #[test]
    fn insert_is_idempotent_and_replaces_in_place() {
        let a = cluster("a", 10);
        let orig = "127.0.0.1 localhost\n";
        let one = insert_block(orig, &a.cluster_domain, &hosts_entries(&a));
        assert_eq!(
            insert_block(&one, &a.cluster_domain, &hosts_entries(&a)),
            one
        );
        // A user line after the block stays where it is when the block changes.
        let edited = format!("{one}10.9.9.9 mine\n");
        let changed = insert_block(&edited, &a.cluster_domain, "1.1.1.1 api.a.lab.test\n");
        assert!(changed.ends_with("# shiftlab end a.lab.test\n10.9.9.9 mine\n"));
        assert_eq!(
            remove_block(&changed, &a.cluster_domain),
            format!("{orig}10.9.9.9 mine\n")
        );
    }

    #[test]
    fn hosts_block_names_api_and_usual_routes() {
        let a = cluster("a", 10);
        let text = hosts_entries(&a);
        assert!(text.starts_with("192.168.10.2 api.a.lab.test\n"));
        for r in [
            "console-openshift-console",
            "oauth-openshift",
            "downloads-openshift-console",
        ] {
            assert!(text.contains(&format!("192.168.10.3 {r}.apps.a.lab.test\n")));
        }
        assert!(text.contains("prometheus-k8s-openshift-monitoring.apps.a.lab.test"));
        assert!(text.contains("grafana-openshift-monitoring.apps.a.lab.test"));
    }

    fn env(dir: &Path) -> HostDns {
        HostDns {
            hosts_file: dir.join("hosts"),
            nm_dir: dir.join("NetworkManager"),
            run_dir: dir.join("run"),
            resolv_conf: dir.join("resolv.conf"),
            lock_file: dir.join("state/host-dns.lock"),
            run_commands: false,
        }
    }

    #[test]
    fn hosts_file_apply_and_remove_restore_bytes_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let h = env(dir.path());
        let orig = b"127.0.0.1 localhost\n# keep me\n::1 ip6-localhost";
        fs::write(&h.hosts_file, orig).unwrap();
        fs::set_permissions(&h.hosts_file, fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(h.detect(), Mechanism::HostsFile);
        let a = cluster("a", 10);
        let rec = h.apply(&a, Mechanism::HostsFile).unwrap();
        assert!(h.is_configured(&rec));
        let mode = fs::metadata(&h.hosts_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        h.apply(&a, Mechanism::HostsFile).unwrap();
        h.remove(&rec).unwrap();
        assert_eq!(fs::read(&h.hosts_file).unwrap(), orig);
        assert!(!h.is_configured(&rec));
        h.remove(&rec).unwrap();
        assert_eq!(fs::read(&h.hosts_file).unwrap(), orig);
        // No temporary file left behind.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn detects_networkmanager_dnsmasq_and_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let h = env(dir.path());
        fs::create_dir_all(h.run_dir.join("systemd/resolve")).unwrap();
        fs::write(&h.resolv_conf, "nameserver 127.0.0.53\noptions edns0\n").unwrap();
        assert_eq!(h.detect(), Mechanism::SystemdResolved);
        fs::create_dir_all(h.run_dir.join("NetworkManager")).unwrap();
        fs::create_dir_all(h.nm_dir.join("conf.d")).unwrap();
        fs::write(
            h.nm_dir.join("NetworkManager.conf"),
            "[main]\nplugins=ifupdown\n",
        )
        .unwrap();
        assert_eq!(h.detect(), Mechanism::SystemdResolved);
        fs::write(
            h.nm_dir.join("conf.d/50-dns.conf"),
            "[main]\ndns = dnsmasq\n",
        )
        .unwrap();
        assert_eq!(h.detect(), Mechanism::NetworkManagerDnsmasq);
        fs::write(h.nm_dir.join("conf.d/90-dns.conf"), "[main]\ndns=default\n").unwrap();
        assert_eq!(h.detect(), Mechanism::SystemdResolved);
    }

    const RESOLV: &str = "# Generated by dhclient\nsearch lab.example\nnameserver 10.0.0.2\n";

    #[test]
    fn local_dns_block_goes_first_and_leaves_the_file_byte_for_byte() {
        let one = with_local_zone(RESOLV, "a.lab.test", true);
        let lines: Vec<&str> = one.lines().collect();
        assert_eq!(lines[0], "# shiftlab begin local-dns");
        assert!(lines[1].ends_with(" a.lab.test"), "{one}");
        assert_eq!(lines[2], "nameserver 127.0.1.53");
        assert_eq!(lines[3], "# shiftlab end local-dns");
        assert!(one.ends_with(RESOLV));
        assert_eq!(local_zones(&one), ["a.lab.test"]);
        // Idempotent; a second cluster shares the block.
        assert_eq!(with_local_zone(&one, "a.lab.test", true), one);
        let two = with_local_zone(&one, "b.lab.test", true);
        assert_eq!(local_zones(&two), ["a.lab.test", "b.lab.test"]);
        assert_eq!(two.matches("nameserver 127.0.1.53").count(), 1);
        // Removed in either order: the original, byte for byte.
        let rm_a = with_local_zone(&two, "a.lab.test", false);
        assert_eq!(local_zones(&rm_a), ["b.lab.test"]);
        assert_eq!(with_local_zone(&rm_a, "b.lab.test", false), RESOLV);
        let rm_b = with_local_zone(&two, "b.lab.test", false);
        assert_eq!(rm_b, one);
        assert_eq!(with_local_zone(&rm_b, "a.lab.test", false), RESOLV);
        // A file without a final newline.
        let bare = "nameserver 10.0.0.2";
        let t = with_local_zone(bare, "a.lab.test", true);
        assert_eq!(with_local_zone(&t, "a.lab.test", false), bare);
    }

    #[test]
    fn local_dns_is_refused_where_it_could_hide_or_not_be_undone() {
        assert_eq!(local_dns_refusal(RESOLV, false), None);
        assert!(local_dns_refusal(RESOLV, true)
            .unwrap()
            .contains("symbolic link"));
        let rotate = format!("{RESOLV}options rotate timeout:1\n");
        assert!(local_dns_refusal(&rotate, false)
            .unwrap()
            .contains("rotate"));
        let three = "nameserver 10.0.0.2\nnameserver 10.0.0.3\n; x\nnameserver 10.0.0.4\n";
        assert!(local_dns_refusal(three, false)
            .unwrap()
            .contains("3 nameservers"));
        assert!(local_dns_refusal("search x\n# nameserver 1.1.1.1\n", false)
            .unwrap()
            .contains("no nameserver line"));
        // Our own line is not counted: two of the user's plus ours is fine.
        let two = with_local_zone(
            "nameserver 10.0.0.2\nnameserver 10.0.0.3\n",
            "a.lab.test",
            true,
        );
        assert_eq!(local_dns_refusal(&two, false), None);
    }

    #[test]
    fn local_dns_apply_remove_and_withdraw() {
        let dir = tempfile::tempdir().unwrap();
        let h = env(dir.path());
        fs::write(&h.resolv_conf, RESOLV).unwrap();
        // Local DNS never touches a link: fine on a bridge shiftlab did not create.
        let (m, note) = choose(
            Some(Mechanism::LocalDns),
            || Mechanism::HostsFile,
            false,
            "br0",
        );
        assert_eq!((m, note), (Mechanism::LocalDns, None));
        let a = ClusterDns {
            link_owned: false,
            ..cluster("a", 10)
        };
        let rec = h.apply(&a, Mechanism::LocalDns).unwrap();
        assert!(h.is_configured(&rec));
        assert!(fs::read_to_string(&h.resolv_conf)
            .unwrap()
            .starts_with("# shiftlab begin local-dns\n"));
        h.withdraw_local().unwrap();
        assert_eq!(fs::read_to_string(&h.resolv_conf).unwrap(), RESOLV);
        assert!(!h.is_configured(&rec));
        h.apply(&a, Mechanism::LocalDns).unwrap();
        h.remove(&rec).unwrap();
        assert_eq!(fs::read_to_string(&h.resolv_conf).unwrap(), RESOLV);
        // A symlinked resolv.conf is refused and left alone.
        fs::remove_file(&h.resolv_conf).unwrap();
        fs::write(dir.path().join("stub"), RESOLV).unwrap();
        std::os::unix::fs::symlink(dir.path().join("stub"), &h.resolv_conf).unwrap();
        let e = h.apply(&a, Mechanism::LocalDns).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(fs::read_to_string(dir.path().join("stub")).unwrap(), RESOLV);
    }

    #[test]
    fn networkmanager_dropin_is_written_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let h = env(dir.path());
        let a = cluster("a", 10);
        let rec = h.apply(&a, Mechanism::NetworkManagerDnsmasq).unwrap();
        let path = rec.file.clone().unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "# shiftlab: split DNS for cluster a; removed by shiftlab destroy\nserver=/a.lab.test/192.168.10.1\n"
        );
        assert!(h.is_configured(&rec));
        h.remove(&rec).unwrap();
        assert!(!path.exists());
        h.remove(&rec).unwrap();
    }
}
