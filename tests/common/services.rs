//! Loopback doubles for the host-services tests: a plan whose addresses are
//! all on 127.77.0.0/16, stand-in backends answering HTTP with their node
//! name, and a tiny HTTP client. Traffic stays on loopback.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shiftlab::plan::Plan;

/// Frontend port on the LB address for each plan port.
pub fn front_port(plan_port: u16, base: u16) -> u16 {
    base + match plan_port {
        6443 => 1,
        22623 => 2,
        443 => 3,
        80 => 4,
        _ => 9,
    }
}

/// The golden UPI plan moved onto loopback: gateway 127.77.<net>.1, LB
/// 127.77.<net>.2, nodes 127.77.<net+1>.<n>; frontend ports `base+1..4`,
/// backend ports `base+11..14`.
pub fn loopback_plan(name: &str, net: u8, base: u16, rehearsal: bool) -> Plan {
    let text =
        std::fs::read_to_string(crate::common::repo().join("tests/golden/upi.plan.json")).unwrap();
    let mut plan: Plan = serde_json::from_str(&text).unwrap();
    plan.cluster = name.into();
    plan.cluster_domain = format!("{name}.lab.test");
    plan.network.domain = plan.cluster_domain.clone();
    plan.rehearsal = rehearsal;
    let lb = Ipv4Addr::new(127, 77, net, 2);
    plan.network.gateway = Some(Ipv4Addr::new(127, 77, net, 1));
    plan.network.host_addresses = vec![lb];
    plan.vips.api = Some(lb);
    plan.vips.ingress = Some(lb);
    let last = |ip: std::net::IpAddr| match ip {
        std::net::IpAddr::V4(a) => a.octets()[3],
        std::net::IpAddr::V6(a) => panic!("{a}: the golden UPI plan is IPv4"),
    };
    for n in &mut plan.nodes {
        n.ip = Ipv4Addr::new(127, 77, net + 1, last(n.ip)).into();
    }
    let lbp = plan.load_balancer.as_mut().unwrap();
    for f in &mut lbp.frontends {
        f.address = Some(lb);
        let p = f.port;
        f.port = front_port(p, base);
        for b in &mut f.backends {
            b.ip = Ipv4Addr::new(127, 77, net + 1, last(b.ip)).into();
            b.port = front_port(p, base) + 10;
        }
    }
    plan
}

/// Record `plan` as the infra target does.
pub fn write_plan(state: &Path, plan: &Plan) {
    shiftlab::state::StateDir {
        root: state.to_path_buf(),
    }
    .cluster(&plan.cluster)
    .write_plan(plan)
    .unwrap();
}

/// A stand-in backend: answers every request with its node name; `/readyz`
/// answers 500 while `failing` is set.
pub struct Backend {
    pub node: String,
    pub addr: SocketAddr,
    pub failing: Arc<AtomicBool>,
}

pub fn start_backend(node: &str, addr: SocketAddr) -> Backend {
    let listener = TcpListener::bind(addr).unwrap_or_else(|e| panic!("binding {addr}: {e}"));
    let failing = Arc::new(AtomicBool::new(false));
    let (f, name) = (failing.clone(), node.to_string());
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let (f, name) = (f.clone(), name.clone());
            std::thread::spawn(move || {
                let mut s = s;
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 2048];
                let n = s.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    return; // a TCP check
                }
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                let path = req.split_whitespace().nth(1).unwrap_or("/").to_string();
                let status = if path == "/readyz" && f.load(Ordering::SeqCst) {
                    "500 Internal Server Error"
                } else {
                    "200 OK"
                };
                let body = format!("{name}\n");
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    Backend {
        node: node.into(),
        addr,
        failing,
    }
}

/// Start a backend for every server of the plan's load balancer.
pub fn start_backends(plan: &Plan) -> Vec<Backend> {
    let mut out = Vec::new();
    for f in &plan.load_balancer.as_ref().unwrap().frontends {
        for b in &f.backends {
            out.push(start_backend(&b.node, SocketAddr::from((b.ip, b.port))));
        }
    }
    out
}

/// Minimal HTTP/1.0 GET: (status, headers, body).
pub fn get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Option<(u16, String, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    req += "\r\n";
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, head, raw[split + 4..].to_vec()))
}

/// The body of a GET that succeeded, trimmed.
pub fn get_body(addr: SocketAddr, path: &str) -> Option<String> {
    match get(addr, path, &[])? {
        (200, _, b) => Some(String::from_utf8_lossy(&b).trim().to_string()),
        _ => None,
    }
}

pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}
