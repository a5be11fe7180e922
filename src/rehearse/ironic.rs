//! `shiftlab ironic-standin`: the rehearsal's Ironic. The stand-in installer
//! runs it where the real bootstrap runs metal3's Ironic; it drives each
//! host's BMC through the Redfish sequence real Ironic 39 sends shiftlab's BMC
//! for a BareMetalHost deployed from a live ISO (manage, out-of-band inspect,
//! ramdisk deploy over virtual media), recorded in tests/fixtures/ironic-39/,
//! without Python or Ironic.
//!
//! Protocol (that of the tests' ironic.sh it replaces): JSON on stdin, so the
//! BMC passwords never show in a process listing,
//! `{"state": DIR, "iso_dir": DIR, "ca": PATH|null, "timeout": SECONDS,
//!   "hosts": [{"name", "iso", "address", "username", "password",
//!              "disableCertificateVerification", "bootMode", "report"}]}`;
//! logrus-style lines on stderr; `DIR/deployed/NAME` once a host runs from its
//! disk; a rerun leaves those hosts alone. The first failure ends the run
//! (`level=error`, naming the host and the BMC's message) and is kept in
//! `DIR/failed/NAME` (the message alone) for the rehearsal report, until a
//! rerun deploys that host again.

mod media;
mod redfish;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use serde_json::{json, Value};

pub use media::ensure_ca;
use redfish::{link, members, Client, Verify};

/// The stand-in's state directory in an install directory, as the stand-in
/// installer names it (`$dir/.ironic`).
pub fn state_dir(install_dir: &Path) -> PathBuf {
    install_dir.join(".ironic")
}

/// Where the stand-in whose state is `state` keeps why a host failed (the
/// message of its `level=error` line), one file per host name.
pub fn failed_path(state: &Path, host: &str) -> PathBuf {
    state.join("failed").join(host)
}

/// The CA of the image server of a stand-in whose state is `state`: what a
/// rehearsal's lab BMC verifies the media's server with ([`ensure_ca`] makes
/// it).
pub fn ca_path(state: &Path) -> PathBuf {
    state.join("tls/ca.crt")
}

/// What the stand-in installer hands over on stdin.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub state: PathBuf,
    pub iso_dir: PathBuf,
    #[serde(default)]
    pub ca: Option<PathBuf>,
    #[serde(default = "default_timeout")]
    pub timeout: u64,
    pub hosts: Vec<Host>,
}

fn default_timeout() -> u64 {
    600
}

/// One BareMetalHost, as install-config's `platform.baremetal.hosts` has it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Host {
    pub name: String,
    pub iso: String,
    pub address: String,
    pub username: String,
    pub password: String,
    #[serde(default)]
    pub disable_certificate_verification: bool,
    #[serde(default)]
    pub boot_mode: Option<String>,
    pub report: String,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("name", &self.name)
            .field("address", &self.address)
            .field("password", &crate::redact::REDACTED)
            .finish_non_exhaustive()
    }
}

/// A BMC address split as Ironic's redfish driver takes it: the base URL
/// (`redfish_address`) and the system's path (`redfish_system_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BmcAddress {
    pub base: String,
    pub system: String,
}

/// Parses `redfish-virtualmedia+https://host:port/redfish/v1/Systems/<id>`
/// (also `redfish+…`, or a bare http(s) URL), as baremetal-operator's
/// pkg/hardwareutils/bmc/redfish.go does. Pure.
pub fn parse_address(address: &str) -> Result<BmcAddress> {
    let url = address
        .strip_prefix("redfish-virtualmedia+")
        .or_else(|| address.strip_prefix("redfish+"))
        .unwrap_or(address);
    let bad = || {
        anyhow!(
            "address {address:?}: not a Redfish virtual media address; \
             valid: redfish-virtualmedia+https://HOST:PORT/redfish/v1/Systems/ID"
        )
    };
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(bad)?;
    let (host, path) = rest.split_once('/').ok_or_else(bad)?;
    let id = path.strip_prefix("redfish/v1/Systems/").ok_or_else(bad)?;
    if host.is_empty()
        || id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(bad());
    }
    Ok(BmcAddress {
        base: url[..url.len() - path.len() - 1].to_string(),
        system: format!("/{path}"),
    })
}

/// Whether `name` may name a file of the state directory. Pure.
fn file_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Checks what names files before anything is touched. Pure.
pub fn validate(input: &Input) -> Result<()> {
    if input.hosts.is_empty() {
        bail!("hosts: empty; valid: one or more hosts");
    }
    let mut seen = std::collections::HashSet::new();
    for (i, h) in input.hosts.iter().enumerate() {
        if !file_name_ok(&h.name) {
            bail!(
                "hosts[{i}].name {:?}: not a host name; valid: letters, digits, '-', '_', '.', not starting with '.'",
                h.name
            );
        }
        if !seen.insert(h.name.as_str()) {
            bail!("hosts[{i}].name {:?}: given twice", h.name);
        }
        if !file_name_ok(&h.iso) {
            bail!(
                "hosts[{i}].iso {:?}: not a file name of iso_dir; valid: letters, digits, '-', '_', '.'",
                h.iso
            );
        }
        parse_address(&h.address).with_context(|| format!("hosts[{i}]"))?;
        if let Some(m) = &h.boot_mode {
            if !["UEFI", "UEFISecureBoot", "legacy"].contains(&m.as_str()) {
                bail!("hosts[{i}].bootMode {m:?}: valid: UEFI, UEFISecureBoot, legacy");
            }
        }
        if !(h.report.starts_with("http://") || h.report.starts_with("https://")) {
            bail!(
                "hosts[{i}].report {:?}: valid: an http(s) URL of the node's report",
                h.report
            );
        }
    }
    Ok(())
}

/// A logrus-style line, as the installer's own log has them. Pure.
pub fn log_line(level: &str, msg: &str) -> String {
    format!("level={level} msg=\"{}\"", msg.replace('"', "'"))
}

fn log(level: &str, msg: &str) {
    eprintln!("{}", log_line(level, msg));
}

/// A random UUID (version 4), as Ironic gives a node at enrollment.
fn node_uuid() -> Result<String> {
    let mut b = crate::files::random_bytes(16)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

/// Reads the input, deploys every host not deployed yet.
pub fn run(input: &Input) -> Result<()> {
    validate(input)?;
    let deployed = input.state.join("deployed");
    std::fs::create_dir_all(&deployed)
        .with_context(|| format!("creating {}", deployed.display()))?;
    let todo: Vec<&Host> = input
        .hosts
        .iter()
        .filter(|h| !deployed.join(&h.name).exists())
        .collect();
    if todo.is_empty() {
        log("info", &format!("all {} hosts active", input.hosts.len()));
        return Ok(());
    }
    // This run's outcome replaces the last one's.
    for h in &todo {
        let old = failed_path(&input.state, &h.name);
        if old.exists() {
            std::fs::remove_file(&old).with_context(|| format!("removing {}", old.display()))?;
        }
    }
    let mut files = BTreeMap::new();
    let mut nodes = Vec::new();
    for h in &todo {
        let iso = input.iso_dir.join(&h.iso);
        if !iso.is_file() {
            bail!("{}: no ISO {}", h.name, iso.display());
        }
        let uuid = node_uuid()?;
        files.insert(media::published_path(&uuid), iso);
        nodes.push((*h, uuid));
    }
    let rt = crate::runtime::daemon()?;
    let images = rt.block_on(media::Images::start(&input.state, files))?;
    log(
        "info",
        &format!(
            "Ironic stand-in, images at {} (CA {})",
            images.base,
            ca_path(&input.state).display()
        ),
    );
    let result = deploy_all(input, &nodes, &images.base);
    rt.block_on(images.stop());
    result?;
    log("info", &format!("all {} hosts active", input.hosts.len()));
    Ok(())
}

fn deploy_all(input: &Input, nodes: &[(&Host, String)], images: &str) -> Result<()> {
    let host_error = |h: &Host, e: anyhow::Error| failed(&input.state, h, e);
    let deadline = Instant::now() + Duration::from_secs(input.timeout);
    // Ironic keeps one sushy connection (so one session) per BMC and
    // credentials (drivers/modules/redfish/utils.py SessionCache).
    let mut sessions: HashMap<(String, String, Verify), Rc<Client>> = HashMap::new();
    let mut started = Vec::new();
    for (h, uuid) in nodes {
        let addr = parse_address(&h.address)?;
        let verify = if h.disable_certificate_verification {
            Verify::Off
        } else if let Some(ca) = &input.ca {
            Verify::Ca(ca.clone())
        } else {
            Verify::System
        };
        let key = (addr.base.clone(), h.username.clone(), verify.clone());
        let client = match sessions.get(&key) {
            Some(c) => c.clone(),
            None => {
                log("info", &format!("{}: enrolling {}", h.name, h.address));
                let c = Rc::new(
                    Client::login(&addr.base, &verify, &h.username, &h.password)
                        .map_err(|e| host_error(h, e))?,
                );
                sessions.insert(key, c.clone());
                c
            }
        };
        let node = Node::new(client, &addr.system).map_err(|e| host_error(h, e))?;
        log("info", &format!("{}: manage", h.name));
        node.manage().map_err(|e| host_error(h, e))?;
        log("info", &format!("{}: inspecting out of band", h.name));
        let found = node.inspect().map_err(|e| host_error(h, e))?;
        log("info", &format!("{}: provide ({found})", h.name));
        let url = format!("{images}{}", media::published_path(uuid));
        log(
            "info",
            &format!(
                "{}: deploying {} (virtual media, ramdisk deploy)",
                h.name, h.iso
            ),
        );
        node.deploy(&url).map_err(|e| host_error(h, e))?;
        started.push((*h, node));
    }
    let report = report_agent();
    let mut waiting = started;
    while !waiting.is_empty() {
        let mut left = Vec::new();
        for (h, node) in waiting {
            if booted_from(&report, &h.report).as_deref() != Some("disk") {
                left.push((h, node));
                continue;
            }
            log(
                "info",
                &format!("{}: runs from its disk; ejecting the media", h.name),
            );
            node.finish().map_err(|e| host_error(h, e))?;
            let done = input.state.join("deployed").join(&h.name);
            crate::files::write_atomic(&done, b"active\n")?;
            log("info", &format!("{}: active", h.name));
        }
        waiting = left;
        if waiting.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            let names: Vec<&str> = waiting.iter().map(|(h, _)| h.name.as_str()).collect();
            bail!(
                "hosts not deployed in time ({} s): {} still not running from disk",
                input.timeout,
                names.join(", ")
            );
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    Ok(())
}

/// A host's failure, named, and kept in `failed/NAME` for the report (a
/// record that cannot be written is said on the log: the failure still ends
/// the run).
fn failed(state: &Path, h: &Host, e: anyhow::Error) -> anyhow::Error {
    let message = format!("{e:#}");
    let path = failed_path(state, &h.name);
    let kept = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .map_err(anyhow::Error::from)
        .and_then(|()| {
            crate::files::write_atomic_mode(&path, format!("{message}\n").as_bytes(), 0o600)
        });
    if let Err(w) = kept {
        log(
            "warning",
            &format!(
                "{}: keeping the failure in {}: {w:#}",
                h.name,
                path.display()
            ),
        );
    }
    anyhow!("{}: {message}", h.name)
}

fn report_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(3)))
        .proxy(None)
        .build()
        .into()
}

/// The node's report's `boot` ("iso", "disk"), if it answers.
fn booted_from(agent: &ureq::Agent, url: &str) -> Option<String> {
    let text = agent
        .get(url)
        .call()
        .ok()?
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_string()
        .ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v["boot"].as_str().map(str::to_string)
}

/// One node as Ironic's redfish interfaces drive it.
struct Node {
    bmc: Rc<Client>,
    system: String,
    manager: String,
    chassis: String,
}

impl Node {
    /// The system and what it links to (redfish/utils.py get_system).
    fn new(bmc: Rc<Client>, system: &str) -> Result<Node> {
        let s = bmc.get(system)?;
        let manager =
            link(&s["Links"], "ManagedBy").ok_or_else(|| anyhow!("{system}: no ManagedBy"))?;
        let chassis =
            link(&s["Links"], "Chassis").ok_or_else(|| anyhow!("{system}: no Chassis"))?;
        Ok(Node {
            bmc,
            system: system.to_string(),
            manager,
            chassis,
        })
    }

    fn system(&self) -> Result<Value> {
        self.bmc.get(&self.system)
    }

    /// manage: the conductor's verify steps (redfish/power.py get_power_state,
    /// management.py get_boot_mode and get_secure_boot_state, bios.py
    /// cache_bios_settings, management.py detect_vendor through the manager
    /// and the chassis). `new` made the first read of the system.
    fn manage(&self) -> Result<()> {
        self.system()?;
        let s = self.system()?;
        if let Some(sb) = link(&s, "SecureBoot") {
            self.bmc.get(&sb)?;
        }
        let s = self.system()?;
        if let Some(bios) = link(&s, "Bios") {
            self.bmc.get(&bios)?;
        }
        self.system()?;
        self.bmc.get(&self.manager)?;
        self.bmc.get(&self.chassis)?;
        Ok(())
    }

    /// Out-of-band inspection (redfish/inspect.py inspect_hardware): CPUs,
    /// local disks (SimpleStorage and Storage with its drives), each NIC's
    /// MAC, the chassis. What it found, for the log.
    fn inspect(&self) -> Result<String> {
        let s = self.system()?;
        let mut cpus = 0u64;
        if let Some(p) = link(&s, "Processors") {
            for m in members(&self.bmc.get(&p)?) {
                cpus += self.bmc.get(&m)?["TotalThreads"].as_u64().unwrap_or(1);
            }
        }
        let mut disk_bytes = 0u64;
        if let Some(p) = link(&s, "SimpleStorage") {
            for m in members(&self.bmc.get(&p)?) {
                let v = self.bmc.get(&m)?;
                for d in v["Devices"].as_array().into_iter().flatten() {
                    disk_bytes = disk_bytes.max(d["CapacityBytes"].as_u64().unwrap_or(0));
                }
            }
        }
        if let Some(p) = link(&s, "Storage") {
            for m in members(&self.bmc.get(&p)?) {
                let v = self.bmc.get(&m)?;
                for d in v["Drives"].as_array().into_iter().flatten() {
                    if let Some(d) = d["@odata.id"].as_str() {
                        let drive = self.bmc.get(d)?;
                        disk_bytes = disk_bytes.max(drive["CapacityBytes"].as_u64().unwrap_or(0));
                    }
                }
            }
        }
        let mut macs = Vec::new();
        if let Some(p) = link(&s, "EthernetInterfaces") {
            for m in members(&self.bmc.get(&p)?) {
                if let Some(mac) = self.bmc.get(&m)?["MACAddress"].as_str() {
                    macs.push(mac.to_string());
                }
            }
        }
        self.bmc.get(&self.chassis)?;
        let memory_mb = (s["MemorySummary"]["TotalSystemMemoryGiB"]
            .as_f64()
            .unwrap_or(0.0)
            * 1024.0) as u64;
        Ok(format!(
            "cpus {cpus}, memory_mb {memory_mb}, local_gb {}, nics {}",
            disk_bytes >> 30,
            macs.join(" ")
        ))
    }

    /// The virtual media devices `owner` (a system or a manager) links to,
    /// each read.
    fn vmedia_of(&self, owner: &Value) -> Result<Vec<(String, Value)>> {
        let Some(c) = link(owner, "VirtualMedia") else {
            return Ok(Vec::new());
        };
        members(&self.bmc.get(&c)?)
            .into_iter()
            .map(|m| Ok((m.clone(), self.bmc.get(&m)?)))
            .collect()
    }

    /// redfish/boot.py `_eject_vmedia`: the system and its manager read,
    /// then every device of `kind`, the system's then the manager's,
    /// ejected if it holds a medium.
    fn eject(&self, kind: &str) -> Result<()> {
        self.system()?;
        let m = self.bmc.get(&self.manager)?;
        let s = self.system()?;
        self.eject_from(&self.vmedia_of(&s)?, kind)?;
        self.eject_from(&self.vmedia_of(&m)?, kind)
    }

    /// Ramdisk deploy of a live ISO (ironic drivers/modules/ramdisk.py with
    /// redfish/boot.py's virtual media boot): anything left ejected, the ISO
    /// inserted into the system's CD, the next boot from it, power on.
    fn deploy(&self, url: &str) -> Result<()> {
        // The conductor's power state, the boot interface's validation.
        self.system()?;
        self.system()?;
        // clean_up_instance before the deploy: a CD left inserted goes.
        self.eject("CD")?;
        // The boot mode (management.py get_boot_mode).
        self.system()?;
        // boot.py `_has_vmedia_via_systems`: does the system itself have
        // virtual media (Ironic 39 prefers it to the manager's)?
        self.system()?;
        let m = self.bmc.get(&self.manager)?;
        let s = self.system()?;
        let own = !self.vmedia_of(&s)?.is_empty();
        // `_insert_vmedia` ejects first, wherever the CD is.
        let s = self.system()?;
        self.eject_from(&self.vmedia_of(&s)?, "CD")?;
        self.eject_from(&self.vmedia_of(&m)?, "CD")?;
        // Then inserts into the first free CD device.
        let s = self.system()?;
        let devices = if own {
            self.vmedia_of(&s)?
        } else {
            self.vmedia_of(&m)?
        };
        let (path, device) = devices
            .iter()
            .find(|(_, d)| is_kind(d, "CD") && d["Inserted"] != true)
            .ok_or_else(|| anyhow!("no free virtual media CD device on the BMC"))?;
        let insert = action(
            device,
            "#VirtualMedia.InsertMedia",
            path,
            "VirtualMedia.InsertMedia",
        );
        // The image alone, as Ironic 39 sent it to this BMC.
        self.bmc
            .act("POST", &insert, Some(json!({"Image": url})))
            .context("InsertMedia")?;
        // management.py set_boot_device(CDROM): reads the system, then sends
        // the target, and the enablement only where the system's differs from
        // the one wanted (`_set_boot_device`). Hosts enrolled with
        // force_persistent_boot_device Never, as the tests' real Ironic
        // enrolls them (fake-openshift-install/ironic.sh): wanted is Once, so
        // the host boots the ISO once and then its disk. The recording
        // (tests/fixtures/ironic-39) enrolled with Default: Continuous, which
        // the BMC already had, so it holds the target alone.
        self.system()?;
        let s = self.system()?;
        let mut boot = json!({"BootSourceOverrideTarget": "Cd"});
        if s["Boot"]["BootSourceOverrideEnabled"] != "Once" {
            boot["BootSourceOverrideEnabled"] = json!("Once");
        }
        self.bmc
            .act("PATCH", &self.system, Some(json!({ "Boot": boot })))
            .context("setting the boot device")?;
        self.set_power("On", "On")
    }

    /// Once the node runs from its disk: power off, the media ejected as
    /// undeploy's clean-up ejects them (the boot ISO's CD, then the
    /// configuration's USB device), power on from the disk.
    fn finish(&self) -> Result<()> {
        self.set_power("ForceOff", "Off")?;
        self.eject("CD")?;
        self.eject("USBStick")?;
        self.system()?;
        self.set_power("On", "On")
    }

    /// redfish/power.py set_power_state: the conductor's read, the driver's
    /// read, the reset if the state differs, then `_wait_for_power_state`.
    fn set_power(&self, reset: &str, want: &str) -> Result<()> {
        self.system()?;
        let s = self.system()?;
        if s["PowerState"] != want {
            let target = s["Actions"]["#ComputerSystem.Reset"]["target"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{}/Actions/ComputerSystem.Reset", self.system));
            self.bmc
                .act("POST", &target, Some(json!({"ResetType": reset})))
                .with_context(|| format!("power {reset}"))?;
        }
        let deadline = Instant::now() + POWER_WAIT;
        loop {
            let s = self.system()?;
            if s["PowerState"] == want {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "power {reset}: still {} after {} s",
                    s["PowerState"],
                    POWER_WAIT.as_secs()
                );
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    fn eject_from(&self, devices: &[(String, Value)], kind: &str) -> Result<()> {
        for (path, d) in devices {
            if is_kind(d, kind) && d["Inserted"] == true {
                let eject = action(
                    d,
                    "#VirtualMedia.EjectMedia",
                    path,
                    "VirtualMedia.EjectMedia",
                );
                self.bmc.act("POST", &eject, None).context("EjectMedia")?;
            }
        }
        Ok(())
    }
}

/// How long a power action may take to show (Ironic's
/// `[conductor]power_state_change_timeout`, 60 s by default).
const POWER_WAIT: Duration = Duration::from_secs(60);

/// Whether a virtual media device takes `kind` (sushy's media types: a CD
/// device also takes DVDs). Pure.
fn is_kind(device: &Value, kind: &str) -> bool {
    device["MediaTypes"]
        .as_array()
        .is_some_and(|t| t.iter().any(|m| m == kind || (kind == "CD" && m == "DVD")))
}

/// An action's target as the resource lists it, else where Redfish puts it.
fn action(resource: &Value, name: &str, path: &str, fallback: &str) -> String {
    resource["Actions"][name]["target"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("{path}/Actions/{fallback}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bmc_address_splits_as_ironic_takes_it() {
        let a = parse_address(
            "redfish-virtualmedia+https://192.168.130.1:8443/redfish/v1/Systems/5b0d7c1e-8f43",
        )
        .unwrap();
        assert_eq!(a.base, "https://192.168.130.1:8443");
        assert_eq!(a.system, "/redfish/v1/Systems/5b0d7c1e-8f43");
        let a = parse_address("redfish+http://[::1]:8000/redfish/v1/Systems/vm1").unwrap();
        assert_eq!(a.base, "http://[::1]:8000");
        for bad in [
            "ipmi://10.0.0.1",
            "redfish-virtualmedia+https://h:1/redfish/v1/Managers/x",
            "redfish-virtualmedia+https://h:1/redfish/v1/Systems/",
            "redfish-virtualmedia+https://h:1/redfish/v1/Systems/../x/y",
            "https:///redfish/v1/Systems/x",
        ] {
            let e = parse_address(bad).unwrap_err().to_string();
            assert!(
                e.contains("redfish-virtualmedia+https://HOST:PORT"),
                "{bad}: {e}"
            );
        }
    }

    fn one(name: &str, iso: &str) -> Input {
        serde_json::from_value(json!({"state": "/s", "iso_dir": "/i", "hosts": [{
            "name": name, "iso": iso, "username": "admin", "password": "pw",
            "address": "redfish-virtualmedia+https://127.0.0.1:8443/redfish/v1/Systems/u",
            "report": "http://127.0.0.1:8000/report"}]}))
        .unwrap()
    }

    #[test]
    fn names_that_reach_the_filesystem_are_checked() {
        assert!(validate(&one("lab1-master-0", "master.iso")).is_ok());
        for (name, iso, field) in [
            ("../x", "m.iso", "hosts[0].name"),
            (".hidden", "m.iso", "hosts[0].name"),
            ("", "m.iso", "hosts[0].name"),
            ("ok", "../../etc/passwd", "hosts[0].iso"),
            ("ok", "a/b.iso", "hosts[0].iso"),
        ] {
            let e = validate(&one(name, iso)).unwrap_err().to_string();
            assert!(e.starts_with(field), "{name} {iso}: {e}");
        }
        let mut twice = one("a", "m.iso");
        twice.hosts.push(one("a", "m.iso").hosts.remove(0));
        assert!(validate(&twice)
            .unwrap_err()
            .to_string()
            .contains("given twice"));
        let e = serde_json::from_value::<Input>(json!({"state": "/s", "iso_dir": "/i",
            "hosts": [], "extra": 1}))
        .unwrap_err()
        .to_string();
        assert!(e.contains("extra"), "{e}");
    }

    #[test]
    fn a_hosts_failure_is_kept_for_the_report_until_a_rerun() {
        let dir = tempfile::tempdir().unwrap();
        let mut input = one("lab1-ctlplane-0", "master.iso");
        input.state = dir.path().join(".ironic");
        input.iso_dir = dir.path().join("iso");
        let e = failed(
            &input.state,
            &input.hosts[0],
            anyhow!("400 the image source is refused").context("InsertMedia"),
        );
        assert_eq!(
            e.to_string(),
            "lab1-ctlplane-0: InsertMedia: 400 the image source is refused"
        );
        let kept = failed_path(&input.state, "lab1-ctlplane-0");
        assert_eq!(
            std::fs::read_to_string(&kept).unwrap(),
            "InsertMedia: 400 the image source is refused\n"
        );
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // A rerun that deploys the host again forgets it (here it stops at
        // the missing ISO, after the clean-up).
        let e = run(&input).unwrap_err().to_string();
        assert!(e.contains("no ISO"), "{e}");
        assert!(!kept.exists());
    }

    #[test]
    fn log_lines_are_logrus_style_and_quote_safe() {
        assert_eq!(
            log_line("error", r#"h: 400 "bad""#),
            r#"level=error msg="h: 400 'bad'""#
        );
    }

    #[test]
    fn a_hosts_debug_form_hides_its_password() {
        let i = one("a", "m.iso");
        let shown = format!("{:?}", i.hosts[0]);
        assert!(!shown.contains("pw\""), "{shown}");
        assert!(
            shown.contains("<redacted>") || shown.contains("redacted"),
            "{shown}"
        );
    }
}
