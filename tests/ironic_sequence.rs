//! The Redfish sequence real Ironic 39 (sushy) sends shiftlab's BMC, recorded
//! with the BMC's request trace (tests/fixtures/ironic-39/, README.md there):
//! what a stand-in for Ironic must do as Ironic does. Assertions on the
//! recording only: nothing here runs shiftlab.

use serde_json::Value;

const FIXTURE: &str = include_str!("fixtures/ironic-39/redfish-sequence.jsonl");

fn sequence() -> Vec<Value> {
    FIXTURE
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn s<'a>(e: &'a Value, k: &str) -> &'a str {
    e[k].as_str().unwrap_or("")
}

/// The index of the first request of `phase` with `method` and a target
/// ending with `suffix`, from `from` on.
fn find(seq: &[Value], phase: &str, method: &str, suffix: &str, from: usize) -> Option<usize> {
    (from..seq.len()).find(|&i| {
        let e = &seq[i];
        s(e, "phase") == phase && s(e, "method") == method && s(e, "target").ends_with(suffix)
    })
}

fn reset(seq: &[Value], phase: &str, kind: &str, from: usize) -> Option<usize> {
    (from..seq.len()).find(|&i| {
        let e = &seq[i];
        s(e, "phase") == phase
            && s(e, "target").ends_with("/Actions/ComputerSystem.Reset")
            && e["body"]["ResetType"] == kind
    })
}

#[test]
fn every_phase_is_recorded_in_order_and_numbered() {
    let seq = sequence();
    let mut phases: Vec<&str> = seq.iter().map(|e| s(e, "phase")).collect();
    phases.dedup();
    assert_eq!(
        phases,
        [
            "manage",
            "inspect",
            "deploy",
            "power-off",
            "power-on",
            "undeploy"
        ]
    );
    for (i, e) in seq.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "{e}");
        assert!(s(e, "target").starts_with("/redfish/v1/"), "{e}");
        // The real sequence met no refusal: a stand-in's must not either.
        let status = e["status"].as_u64().unwrap();
        assert!((200..300).contains(&status), "{e}");
    }
}

#[test]
fn ironic_logs_in_once_and_then_uses_its_session() {
    let seq = sequence();
    assert_eq!(
        (s(&seq[0], "method"), s(&seq[0], "target")),
        ("GET", "/redfish/v1/")
    );
    assert!(
        seq[0]["headers"].get("x-auth-token").is_none(),
        "{}",
        seq[0]
    );
    let logins: Vec<usize> = (0..seq.len())
        .filter(|&i| s(&seq[i], "target") == "/redfish/v1/SessionService/Sessions")
        .collect();
    assert_eq!(logins, [1], "one session, right after the service root");
    let login = &seq[1];
    assert_eq!(login["method"], "POST");
    assert_eq!(login["body"]["UserName"], "admin");
    assert_eq!(login["body"]["Password"], "<redacted>");
    assert_eq!(login["status"], 201);
    assert!(s(&login["response_headers"], "location")
        .starts_with("/redfish/v1/SessionService/Sessions/"));
    for e in &seq {
        let h = &e["headers"];
        assert_eq!(h["user-agent"], "python-requests", "{e}");
        assert_eq!(h["odata-version"], "4.0", "{e}");
        assert_eq!(h["accept"], "*/*", "{e}");
        // Never Basic: once it has a session, Ironic sends its token only.
        assert!(h.get("authorization").is_none(), "{e}");
        if e.get("body").is_some() {
            assert_eq!(h["content-type"], "application/json", "{e}");
        }
    }
    for e in &seq[2..] {
        assert_eq!(e["headers"]["x-auth-token"], "<redacted>", "{e}");
    }
}

#[test]
fn inspection_reads_processors_storage_and_each_nic() {
    let seq = sequence();
    for suffix in [
        "/Processors",
        "/SimpleStorage",
        "/Storage",
        "/EthernetInterfaces",
    ] {
        assert!(
            find(&seq, "inspect", "GET", suffix, 0).is_some(),
            "no GET …{suffix}"
        );
    }
    let nics = seq
        .iter()
        .filter(|e| s(e, "phase") == "inspect" && s(e, "target").contains("/EthernetInterfaces/"))
        .count();
    assert_eq!(nics, 2, "one GET per NIC of the recorded domain");
    assert!(seq
        .iter()
        .filter(|e| s(e, "phase") == "inspect")
        .all(|e| e["method"] == "GET"));
}

#[test]
fn deploy_inserts_https_media_then_sets_the_boot_then_powers_on() {
    let seq = sequence();
    let listed = find(&seq, "deploy", "GET", "/VirtualMedia/Cd", 0).expect("the Cd slot read");
    let insert = find(
        &seq,
        "deploy",
        "POST",
        "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia",
        0,
    )
    .expect("InsertMedia");
    let body = seq[insert]["body"].as_object().unwrap();
    assert_eq!(body.keys().collect::<Vec<_>>(), ["Image"], "{body:?}");
    let image = body["Image"].as_str().unwrap();
    assert!(
        image.starts_with("https://") && image.ends_with(".iso"),
        "{image}"
    );
    let boot = find(&seq, "deploy", "PATCH", "", 0).expect("a boot override PATCH");
    assert_eq!(seq[boot]["body"]["Boot"]["BootSourceOverrideTarget"], "Cd");
    assert!(seq[boot]["target"]
        .as_str()
        .unwrap()
        .starts_with("/redfish/v1/Systems/"));
    let on = reset(&seq, "deploy", "On", 0).expect("power on");
    assert!(
        listed < insert && insert < boot && boot < on,
        "{listed} {insert} {boot} {on}"
    );
    // Nothing changes the machine after the power on until the next phase.
    assert!(seq[on + 1..]
        .iter()
        .take_while(|e| s(e, "phase") == "deploy")
        .all(|e| e["method"] == "GET"));
}

#[test]
fn power_actions_are_force_off_and_on() {
    let seq = sequence();
    assert!(reset(&seq, "power-off", "ForceOff", 0).is_some());
    assert!(reset(&seq, "power-on", "On", 0).is_some());
    let kinds: Vec<&str> = seq
        .iter()
        .filter_map(|e| e["body"]["ResetType"].as_str())
        .collect();
    assert_eq!(kinds, ["On", "ForceOff", "On", "ForceOff"]);
}

#[test]
fn undeploy_powers_off_before_it_ejects() {
    let seq = sequence();
    let off = reset(&seq, "undeploy", "ForceOff", 0).expect("power off");
    let eject = find(
        &seq,
        "undeploy",
        "POST",
        "/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia",
        0,
    )
    .expect("EjectMedia");
    assert!(off < eject, "{off} {eject}");
    assert!(
        seq[eject].get("body").is_none(),
        "EjectMedia has no body: {}",
        seq[eject]
    );
    assert!(
        find(&seq, "undeploy", "PATCH", "", 0).is_none(),
        "no boot override on the way down"
    );
}
