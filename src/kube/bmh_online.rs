//! Stop and start on IPI: the nodes' BareMetalHosts set offline before shiftlab
//! powers the nodes off, and back online when it starts them.
//!
//! Why: metal3 keeps a host's power as its `spec.online` says. The
//! baremetal-operator asks Ironic for that power state and reports what Ironic
//! sees in `status.poweredOn` (metal3-io/baremetal-operator
//! `controllers/metal3.io/baremetalhost_controller.go`, `manageHostPower`), and
//! Ironic's conductor puts a node back to the power state its database records
//! when the hardware disagrees (openstack/ironic `ironic/conductor/manager.py`,
//! `handle_sync_power_state`, under `[conductor]force_power_state_during_sync`,
//! true by default). So a node powered off behind metal3's back while its host
//! is online is powered on again. Metal3's users switch a host off with
//! `oc patch bmh <host> --type merge -p '{"spec":{"online":false}}'`: the operator
//! powers it off (soft first) and reports `poweredOn: false`; that is what this
//! does, through the same merge patch.

use std::time::{Duration, Instant};

use ::kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use ::kube::Client;
use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::baremetal::{bmh_resource, NAMESPACE};
use crate::progress::Beat;

fn hosts(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NAMESPACE, &bmh_resource())
}

/// The hosts among `names` whose `spec.online` is true, in the order of `names`.
pub fn online_among(list: &[Value], names: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter(|n| {
            list.iter().any(|h| {
                h.pointer("/metadata/name").and_then(Value::as_str) == Some(**n)
                    && h.pointer("/spec/online").and_then(Value::as_bool) == Some(true)
            })
        })
        .map(|n| n.to_string())
        .collect()
}

/// What metal3 last reported of a host's power (`status.poweredOn`); `None`
/// before its first report.
pub fn powered_on(host: &Value) -> Option<bool> {
    host.pointer("/status/poweredOn").and_then(Value::as_bool)
}

/// The BareMetalHosts of `names` (the plan's nodes) that are online.
pub async fn online(client: &Client, names: &[&str]) -> Result<Vec<String>> {
    let list = hosts(client)
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing the BareMetalHosts in {NAMESPACE}"))?;
    let values: Vec<Value> = list
        .items
        .into_iter()
        .map(|o| serde_json::to_value(o).unwrap_or_default())
        .collect();
    Ok(online_among(&values, names))
}

/// Set `spec.online` of each host (a merge patch, as `oc patch --type merge`).
pub async fn set_online(client: &Client, names: &[String], online: bool) -> Result<()> {
    let api = hosts(client);
    for n in names {
        api.patch(
            n,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"online": online}})),
        )
        .await
        .with_context(|| format!("setting BareMetalHost {NAMESPACE}/{n} online: {online}"))?;
        tracing::info!("BareMetalHost {n}: online: {online}");
    }
    Ok(())
}

/// Wait until metal3 reports each of `names` powered off, or `timeout` passed;
/// every `beat` a line to `say` names the hosts still on. Returns the hosts
/// still not reported off.
pub async fn wait_off(
    client: &Client,
    names: &[String],
    timeout: Duration,
    interval: Duration,
    (beat, say): (Duration, &dyn Fn(&str)),
) -> Result<Vec<String>> {
    let api = hosts(client);
    let deadline = Instant::now() + timeout;
    let mut beat = Beat::every(beat);
    loop {
        let mut on = Vec::new();
        for n in names {
            let h = api
                .get(n)
                .await
                .with_context(|| format!("reading BareMetalHost {NAMESPACE}/{n}"))?;
            if powered_on(&serde_json::to_value(h).unwrap_or_default()) != Some(false) {
                on.push(n.clone());
            }
        }
        if on.is_empty() {
            return Ok(on);
        }
        // Before the deadline's check: a wait that ends there has beaten.
        if let Some(line) = beat.due("metal3 to power the BareMetalHosts off", || {
            format!("{} still on", on.join(", "))
        }) {
            say(&line);
        }
        if Instant::now() + interval > deadline {
            return Ok(on);
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_hosts_that_are_online() {
        let list = [
            json!({"metadata": {"name": "a"}, "spec": {"online": true}}),
            json!({"metadata": {"name": "b"}, "spec": {"online": false}}),
            json!({"metadata": {"name": "c"}, "spec": {}}),
            json!({"metadata": {"name": "other"}, "spec": {"online": true}}),
        ];
        assert_eq!(online_among(&list, &["c", "b", "a", "gone"]), ["a"]);
        assert_eq!(
            powered_on(&json!({"status": {"poweredOn": false}})),
            Some(false)
        );
        assert_eq!(powered_on(&json!({"status": {}})), None);
    }
}
