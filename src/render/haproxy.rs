//! The HAProxy configuration of a cluster's load balancer, from its plan.
//!
//! Layer 4 (TCP passthrough) as OpenShift's "Load balancing requirements for
//! user-provisioned infrastructure" ask: 6443 and 22623 to the bootstrap and
//! the control planes, 443 and 80 to the nodes running routers.
//! Every frontend binds the cluster's load-balancer address only, never a
//! wildcard. Health checks: `GET /readyz` on 6443 (HTTPS without verification
//! for a real cluster, plain HTTP for a rehearsal's stand-in nodes), TCP
//! elsewhere; `inter 5s fall 3` takes a failing backend out within 15–20 s.
//!
//! The bootstrap is an ordinary server, not a `backup`: until the control
//! planes are up it is the only one that answers, and HAProxy would not send
//! to a backup while a non-backup server is merely untested. It is taken out
//! by rendering again with [`Options::bootstrap_removed`].

use std::fmt::Write as _;
use std::path::Path;

use crate::plan::{Backend, Frontend, HealthCheck, Plan};

/// Inputs besides the plan.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// The stats socket (admin level, mode 0600) in the cluster's directory.
    pub stats_socket: &'a Path,
    /// Leave the bootstrap out of every backend.
    pub bootstrap_removed: bool,
}

/// Check interval, consecutive failures to leave, successes to return.
pub const CHECK_INTER_S: u32 = 5;
pub const CHECK_FALL: u32 = 3;
pub const CHECK_RISE: u32 = 2;

/// The `defaults` section every HAProxy of shiftlab's starts from (the host's
/// and `network: pod`'s in-cluster one): TCP, the timeouts, and the health
/// checks' pace; `server_extra` ends the `default-server` line.
pub fn defaults(server_extra: &str) -> String {
    format!(
        "defaults\n\
         \x20   mode tcp\n\
         \x20   log global\n\
         \x20   option dontlognull\n\
         \x20   timeout connect 5s\n\
         \x20   timeout client 10m\n\
         \x20   timeout server 10m\n\
         \x20   timeout check 5s\n\
         \x20   default-server inter {CHECK_INTER_S}s fastinter 2s downinter {CHECK_INTER_S}s fall {CHECK_FALL} rise {CHECK_RISE}{server_extra}\n"
    )
}

/// How the 6443 backends are checked, after the rehearsal switch.
fn readyz_scheme(plan: &Plan) -> &'static str {
    if plan.rehearsal {
        "http"
    } else {
        "https"
    }
}

/// The backends a frontend sends to under these options.
pub fn active_backends<'p>(frontend: &'p Frontend, opts: &Options) -> Vec<&'p Backend> {
    frontend
        .backends
        .iter()
        .filter(|b| !(opts.bootstrap_removed && b.bootstrap))
        .collect()
}

/// The configuration text, or `None` when the plan has no load balancer
/// (single node, bare-metal IPI with VIPs).
pub fn render(plan: &Plan, opts: &Options) -> Option<String> {
    let lb = plan.load_balancer.as_ref()?;
    let mut out = String::new();
    let has_bootstrap = lb
        .frontends
        .iter()
        .any(|f| f.backends.iter().any(|b| b.bootstrap));
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        "# HAProxy for cluster {} ({}), rendered by shiftlab from the cluster's plan.\n\
         # shiftlab serve rewrites this file and reloads HAProxy: do not edit it.",
        plan.cluster, plan.cluster_domain
    );
    if has_bootstrap {
        let _ = writeln!(
            out,
            "# Bootstrap backends: {}.",
            if opts.bootstrap_removed {
                "removed (bootstrap complete)"
            } else {
                "present until bootstrap is complete"
            }
        );
    }
    let _ = write!(
        out,
        "\nglobal\n\
         \x20   # Foreground, master-worker mode (-W -db), run by shiftlab serve.\n\
         \x20   log stderr format raw local0 notice\n\
         \x20   maxconn 4000\n\
         \x20   stats socket {} mode 600 level admin\n\
         \x20   hard-stop-after 30s\n\
         \n",
        opts.stats_socket.display()
    );
    out.push_str(&defaults(""));
    for f in &lb.frontends {
        let _ = write!(
            out,
            "\nfrontend {name}\n\
             {bind4}\
             {bind6}\
             \x20   default_backend {name}\n\
             \nbackend {name}\n\
             \x20   balance roundrobin\n",
            name = f.name,
            bind4 = f
                .address
                .map(|a| format!("    bind {a}:{}\n", f.port))
                .unwrap_or_default(),
            // A dual-stack lab's IPv6 VIP: the same frontend, the backends
            // reached over the primary family (IPv4: docs/ipv6.md). Bound
            // `transparent` (IPV6_TRANSPARENT: a non-local bind; HAProxy 2.6
            // has no `freebind`): on a lab bridge without a running node the
            // address is tentative (no carrier, no duplicate address
            // detection), which a plain bind refuses, failing every frontend.
            bind6 = f
                .address6
                .map(|a| format!("    bind [{a}]:{} transparent\n", f.port))
                .unwrap_or_default(),
        );
        let server_opts = match f.check {
            HealthCheck::HttpsReadyz => {
                let _ = writeln!(out, "    option httpchk GET /readyz");
                let _ = writeln!(out, "    http-check expect status 200");
                if readyz_scheme(plan) == "https" {
                    "check check-ssl verify none"
                } else {
                    "check"
                }
            }
            HealthCheck::Tcp => "check",
        };
        for b in active_backends(f, opts) {
            // An IPv6 backend (IPv6 single-stack) in brackets: HAProxy's
            // address syntax, `[ipv6]:port`.
            let at = std::net::SocketAddr::new(b.ip, b.port);
            let _ = writeln!(out, "    server {} {at} {server_opts}", b.node);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Frontend, LoadBalancer};

    fn plan_with(rehearsal: bool) -> Plan {
        let text = include_str!("../../tests/golden/upi.plan.json");
        let mut plan: Plan = serde_json::from_str(text).unwrap();
        plan.rehearsal = rehearsal;
        plan
    }

    fn opts(removed: bool) -> Options<'static> {
        Options {
            stats_socket: Path::new("/s/haproxy.sock"),
            bootstrap_removed: removed,
        }
    }

    #[test]
    fn binds_only_the_load_balancer_address() {
        let plan = plan_with(false);
        let text = render(&plan, &opts(false)).unwrap();
        let binds: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with("bind"))
            .collect();
        assert_eq!(binds.len(), 4);
        for b in binds {
            assert!(b.contains("192.168.126.2:"), "{b}");
            assert!(!b.contains('*') && !b.contains("0.0.0.0"), "{b}");
        }
    }

    #[test]
    fn bootstrap_leaves_every_backend_when_removed() {
        let plan = plan_with(false);
        let with = render(&plan, &opts(false)).unwrap();
        assert_eq!(with.matches("server lab1-bootstrap ").count(), 2);
        let without = render(&plan, &opts(true)).unwrap();
        assert!(!without.contains("server lab1-bootstrap "));
        assert_eq!(without.matches("server lab1-ctlplane-0 ").count(), 2);
    }

    #[test]
    fn readyz_check_is_https_unless_rehearsal() {
        let real = render(&plan_with(false), &opts(false)).unwrap();
        assert!(real.contains(":6443 check check-ssl verify none"));
        let rehearsal = render(&plan_with(true), &opts(false)).unwrap();
        assert!(!rehearsal.contains("check-ssl"));
        assert!(rehearsal.contains("option httpchk GET /readyz"));
    }

    #[test]
    fn no_load_balancer_no_config() {
        let mut plan = plan_with(false);
        plan.load_balancer = None;
        assert!(render(&plan, &opts(false)).is_none());
        plan.load_balancer = Some(LoadBalancer {
            frontends: vec![Frontend {
                name: "api".into(),
                address: Some("10.0.0.2".parse().unwrap()),
                address6: None,
                port: 6443,
                check: HealthCheck::Tcp,
                backends: vec![],
            }],
        });
        let text = render(&plan, &opts(false)).unwrap();
        assert!(!text.contains("Bootstrap backends"));
    }
}
