//! HAProxy configurations rendered from the golden cluster files: compared with
//! golden files (`UPDATE_GOLDEN=1` rewrites them) and accepted by `haproxy -c`.

mod common;

use std::path::Path;

use common::assert_haproxy_accepts;

use shiftlab::plan::Plan;
use shiftlab::render::haproxy::{render, Options};

fn plan_of(name: &str) -> Plan {
    let dir = common::repo().join("tests/golden");
    let text = std::fs::read_to_string(dir.join(name)).unwrap();
    common::plan_from_yaml(&text, name, Some(&dir))
}

fn check(plan: &Plan, removed: bool, golden: &str) {
    let opts = Options {
        stats_socket: Path::new("/var/lib/shiftlab/clusters/x/haproxy.sock"),
        bootstrap_removed: removed,
    };
    let text = render(plan, &opts).expect("a load balancer");
    assert_haproxy_accepts(&text);
    common::golden(&common::repo().join("tests/golden").join(golden), &text);
}

#[test]
fn upi_with_and_without_bootstrap() {
    let plan = plan_of("upi.cluster.yaml");
    check(&plan, false, "upi.haproxy.cfg");
    check(&plan, true, "upi-bootstrap-removed.haproxy.cfg");
}

#[test]
fn upi_rehearsal_checks_readyz_over_http() {
    let mut plan = plan_of("upi.cluster.yaml");
    plan.rehearsal = true;
    check(&plan, false, "upi-rehearsal.haproxy.cfg");
}

#[test]
fn compact_sends_ingress_to_control_planes() {
    let plan = plan_of("compact.cluster.yaml");
    check(&plan, false, "compact.haproxy.cfg");
}

#[test]
fn agent_has_no_bootstrap() {
    let plan = plan_of("agent.cluster.yaml");
    check(&plan, false, "agent.haproxy.cfg");
}

#[test]
fn single_node_and_ipi_have_no_load_balancer() {
    for name in ["sno.cluster.yaml", "ipi.cluster.yaml"] {
        let opts = Options {
            stats_socket: Path::new("/x"),
            bootstrap_removed: false,
        };
        assert!(render(&plan_of(name), &opts).is_none(), "{name}");
    }
}
