//! The stand-in's VIP model, its parsing half (assets/standin/init, "VIPs";
//! docs/standin.md): the functions run under busybox `sh`, as in the guest. Where
//! a node learns the VIPs (the Infrastructure manifest of bootstrap.ign, keepalived's
//! static pod in a served machine config) and what its machine config server hands
//! out. The election itself runs in the sandbox (tests/e2e/vip.sh).

mod common;

use std::path::PathBuf;
use std::process::Command;

fn busybox() -> PathBuf {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("busybox not found: install the Debian package busybox-static (scripts/setup)")
}

/// The init's helpers and its VIP section, as a sourceable script.
fn functions() -> String {
    let init = std::fs::read_to_string(common::repo().join("assets/standin/init")).unwrap();
    let between = |from: &str, to: &str| {
        let a = init
            .find(from)
            .unwrap_or_else(|| panic!("no {from:?} in init"));
        let b = a + init[a..]
            .find(to)
            .unwrap_or_else(|| panic!("no {to:?} in init"));
        init[a..b].to_string()
    };
    between(
        "# ---------------------------------------------------------------- helpers",
        "case \"${0##*/}\" in",
    ) + &between("HAVE_ARPING=no", "\nvip_start\n")
}

/// Run `body` after the functions with a fresh state dir; stdout.
fn run(body: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "S={}\n{}\nlog() {{ :; }}\n{body}\n",
        dir.path().display(),
        functions()
    );
    let out = Command::new(busybox())
        .args(["sh", "-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A node whose own Ignition carries the Infrastructure `manifest` (as the
/// bootstrap's does) learns its VIPs; then `after` runs.
fn learn_from_infrastructure(manifest: &str, after: &str) -> String {
    let ign = serde_json::json!({
        "ignition": {"version": "3.2.0"},
        "storage": {"files": [{
            "path": "/opt/openshift/manifests/cluster-infrastructure-02-config.yml",
            "contents": {"source": format!("data:;base64,{}", b64(manifest))}
        }]}
    });
    run(&format!(
        "printf '%s' '{ign}' >$S/ignition.json\nflatten_ignition $S/ignition.json >$S/ign.flat\n\
         learn_vips\n{after}"
    ))
}

#[test]
fn the_bootstrap_learns_the_vips_from_the_infrastructure_manifest() {
    // As openshift/installer pkg/asset/manifests/infrastructure.go writes it (lists,
    // and the older single fields).
    for manifest in [
        "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nstatus:\n  platformStatus:\n    baremetal:\n      apiServerInternalIPs:\n      - 192.168.129.2\n      ingressIPs:\n      - \"192.168.129.3\"\n    type: BareMetal\n",
        "status:\n  platformStatus:\n    baremetal:\n      apiServerInternalIP: 192.168.129.2\n      ingressIP: 192.168.129.3\n",
    ] {
        let out = learn_from_infrastructure(
            manifest,
            "cat $S/vip-api $S/vip-ingress\n\
             echo \"{\\\"ignition\\\":{\\\"version\\\":\\\"3.2.0\\\"},\\\"storage\\\":{\\\"files\\\":[{\\\"path\\\":\\\"/etc/shiftlab/served-by\\\",\\\"contents\\\":{\\\"source\\\":\\\"data:,n\\\"}}$(first_line $S/mcs-files)]}}\" >$S/served.json\n\
             cat $S/served.json\n\
             flatten_ignition $S/served.json >$S/pointer.flat\n\
             ign_file_all /etc/kubernetes/manifests/keepalived.yaml $S/pointer.flat | keepalived_vips",
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[..2], ["192.168.129.2", "192.168.129.3"], "{out}");
        // What its machine config server serves is valid JSON carrying the pod...
        let served: serde_json::Value = serde_json::from_str(lines[2]).expect(lines[2]);
        assert_eq!(
            served["storage"]["files"][1]["path"],
            "/etc/kubernetes/manifests/keepalived.yaml"
        );
        // ...from which a control plane reads the same VIPs back.
        assert_eq!(lines[3], "192.168.129.2 192.168.129.3", "{out}");
    }
}

#[test]
fn nodes_read_keepalived_s_arguments_in_every_spelling() {
    // machine-config-operator templates/common/on-prem/files/keepalived.yaml: a
    // YAML list (--api-vip / --ingress-vip, or the plural forms with a comma list).
    let out = run(
        "printf 'command:\\n- runtimecfg\\n- \"--api-vip\"\\n- \"10.1.1.2\"\\n- \"--ingress-vip\"\\n- \"10.1.1.3\"\\n' | keepalived_vips\n\
         printf 'command: [dynkeepalived, --api-vips, 10.2.0.2,fd00::2, --ingress-vips, 10.2.0.3]\\n' | keepalived_vips\n\
         printf 'command: [dynkeepalived]\\n' | keepalived_vips",
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["10.1.1.2 10.1.1.3", "10.2.0.2,fd00::2 10.2.0.3", " "]
    );
}

#[test]
fn a_dual_stack_node_learns_every_vip_in_the_installer_s_order() {
    // pkg/asset/manifests/infrastructure.go: the single fields hold the first VIP,
    // the lists every one (APIVIPs, IngressVIPs), IPv6 first in an IPv6-primary lab.
    let manifest = "status:\n  platformStatus:\n    baremetal:\n      apiServerInternalIP: fd00:1::2\n      apiServerInternalIPs:\n      - fd00:1::2\n      - 192.168.129.2\n      ingressIP: fd00:1::3\n      ingressIPs:\n      - fd00:1::3\n      - 192.168.129.3\n    type: BareMetal\n";
    let out = learn_from_infrastructure(
        manifest,
        "echo api; cat $S/vip-api; echo ingress; cat $S/vip-ingress\n\
         echo \"{\\\"ignition\\\":{\\\"version\\\":\\\"3.2.0\\\"},\\\"storage\\\":{\\\"files\\\":[$(first_line $S/mcs-files | cut -c2-)]}}\" >$S/served.json\n\
         flatten_ignition $S/served.json >$S/pointer.flat\n\
         ign_file_all /etc/kubernetes/manifests/keepalived.yaml $S/pointer.flat | keepalived_vips",
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "api",
            "fd00:1::2",
            "192.168.129.2",
            "ingress",
            "fd00:1::3",
            "192.168.129.3",
            // The served static pod carries both, comma-joined, as the real one.
            "fd00:1::2,192.168.129.2 fd00:1::3,192.168.129.3",
        ],
        "{out}"
    );
}

#[test]
fn a_pointer_url_s_host_may_be_an_ipv6_literal() {
    // The installer joins the API VIP and 22623 with net.JoinHostPort.
    let out = run(
        "for hp in '[fd00:1::2]:22623' '192.168.1.2:22623' 'api-int.c.test:22623' '[fd00::5]' host; do\n\
         url_host_port \"$hp\"; echo \"$_host|$_port\"; done",
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "fd00:1::2|:22623",
            "192.168.1.2|:22623",
            "api-int.c.test|:22623",
            "fd00::5|",
            "host|"
        ]
    );
}

#[test]
fn only_addresses_become_vips() {
    let out = run(
        "for v in 192.168.1.2 ../etc 1.2.3 '' '1.2.3.4;reboot' fd00:1::2 ::1 'fd00::2;reboot' fd00 '1:2:3:4:5:6:7:8:9:a:b:c:d:e'; do valid_vip \"$v\" && echo \"yes $v\" || echo \"no $v\"; done\n\
         echo \"[$(vip_list '192.168.1.2,fd00::2,10.0.0.2')]\" \"[$(vip_list 'x,fd00::2')]\" \"[$(vip_list '')]\"",
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "yes 192.168.1.2",
            "no ../etc",
            "no 1.2.3",
            "no ",
            "no 1.2.3.4;reboot",
            "yes fd00:1::2",
            "yes ::1",
            "no fd00::2;reboot",
            "no fd00",
            "no 1:2:3:4:5:6:7:8:9:a:b:c:d:e",
            // At most two (one per family), addresses only.
            "[192.168.1.2 fd00::2] [fd00::2] []",
        ]
    );
}
