//! Metal3's power management of the fake API's BareMetalHosts, through the
//! lab BMC's Redfish, as the real pair does it:
//!
//! - the baremetal-operator (metal3-io/baremetal-operator
//!   `controllers/metal3.io/baremetalhost_controller.go`, `manageHostPower`)
//!   wants each host's power to be its `spec.online` (a required field; the
//!   CRD: "its power state will be forced to match this value"); when Ironic
//!   reports otherwise it asks for power on, or for a soft
//!   power off first (Redfish `GracefulShutdown`), and it reports Ironic's power
//!   state in `status.poweredOn`;
//! - Ironic's conductor (openstack/ironic `ironic/conductor/manager.py`,
//!   `handle_sync_power_state`) with `[conductor]force_power_state_during_sync`
//!   (default true) sets a node whose hardware disagrees with its recorded
//!   state back to the recorded state: a host that is online and found off is
//!   powered on again through its BMC. Both are one rule here: each pass makes
//!   the BMC's `PowerState` what `spec.online` says.
//!
//! The BMC address is read from `spec.bmc.address` (`redfish-virtualmedia+http://
//! <host>:<port>/redfish/v1/Systems/<id>`, the driver prefix dropped as Ironic's
//! redfish driver does). A kubelet runs on every powered-on host: its Node is
//! Ready with a fresh heartbeat. Metal3 syncs only while [`Metal3::run`] says
//! so (its pods run on the control planes: down while they are off, back some
//! time after the API); the kubelets always. Nothing leaves 127.0.0.1.

#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use super::fake_kube::FakeKube;

pub struct Metal3 {
    running: Arc<AtomicBool>,
    passes: Arc<AtomicUsize>,
    done: Arc<AtomicBool>,
    /// What it did, in order: `<host> on|off`.
    pub actions: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Metal3 {
    /// Start syncing `fake`'s BareMetalHosts with `user`/`password` at the BMC.
    pub fn start(fake: &FakeKube, user: &str, password: &str) -> Metal3 {
        let m = Metal3 {
            running: Arc::new(AtomicBool::new(true)),
            passes: Arc::default(),
            done: Arc::default(),
            actions: Arc::default(),
        };
        let (fake, running, passes, done, actions) = (
            fake.clone(),
            m.running.clone(),
            m.passes.clone(),
            m.done.clone(),
            m.actions.clone(),
        );
        let auth = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(10)))
                .proxy(None)
                .build()
                .into();
            while !done.load(Ordering::SeqCst) {
                let up = running.load(Ordering::SeqCst);
                for (host, on) in pass(&fake, &agent, &auth, up) {
                    actions
                        .lock()
                        .unwrap()
                        .push(format!("{host} {}", if on { "on" } else { "off" }));
                }
                if up {
                    passes.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        m
    }

    /// Metal3's pods up (`true`) or down.
    pub fn run(&self, up: bool) {
        self.running.store(up, Ordering::SeqCst);
    }

    /// Wait (at most 60 s) until `n` more passes have run.
    pub fn passes(&self, n: usize) {
        let target = self.passes.load(Ordering::SeqCst) + n;
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.passes.load(Ordering::SeqCst) < target {
            assert!(Instant::now() < deadline, "metal3's passes stopped");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Metal3 {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
    }
}

/// One pass over the hosts: the kubelets of those powered on post their
/// Nodes; with metal3 `up`, power is synced and reported. Returns the power
/// actions taken.
fn pass(fake: &FakeKube, agent: &ureq::Agent, auth: &str, up: bool) -> Vec<(String, bool)> {
    let mut acted = Vec::new();
    let hosts: Vec<Value> = fake
        .objects()
        .into_values()
        .filter(|o| o["kind"] == "BareMetalHost")
        .collect();
    for h in hosts {
        let name = h["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ns = h["metadata"]["namespace"].as_str().unwrap_or_default();
        let Some(address) = h["spec"]["bmc"]["address"].as_str() else {
            continue;
        };
        let system = address
            .split_once('+')
            .map_or(address, |(_, rest)| rest)
            .to_string();
        let power = |agent: &ureq::Agent| -> Option<bool> {
            let mut r = agent
                .get(&system)
                .header("Authorization", auth)
                .call()
                .ok()?;
            let v: Value = serde_json::from_str(&r.body_mut().read_to_string().ok()?).ok()?;
            Some(v["PowerState"] == "On")
        };
        let Some(on) = power(agent) else { continue };
        if !up {
            if on {
                fake.insert(node(&name));
            }
            continue;
        }
        let Some(online) = h["spec"]["online"].as_bool() else {
            continue;
        };
        if on != online {
            let reset = if online { "On" } else { "GracefulShutdown" };
            let r = agent
                .post(&format!("{system}/Actions/ComputerSystem.Reset"))
                .header("Authorization", auth)
                .header("Content-Type", "application/json")
                .send(json!({ "ResetType": reset }).to_string());
            if r.is_ok() {
                acted.push((name.clone(), online));
            }
        }
        let Some(now_on) = power(agent) else { continue };
        let mut status = h["status"].clone();
        if !status.is_object() {
            status = json!({});
        }
        status["poweredOn"] = json!(now_on);
        fake.set_status("BareMetalHost", ns, &name, status);
        if now_on {
            fake.insert(node(&name));
        }
    }
    acted
}

/// The Node a running kubelet keeps posting.
fn node(name: &str) -> Value {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
}
