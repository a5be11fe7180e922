//! Is the cluster's load balancer serving before the install waits on it?
//!
//! `openshift-install wait-for bootstrap-complete` reaches the API through
//! `api.<cluster domain>:6443`, and the nodes fetch their configs through
//! `api-int:22623` (OpenShift's "Load balancing requirements for user-provisioned infrastructure"): both are the load balancer
//! `shiftlab serve` runs. Without serve the wait runs its full 20 + 30 minutes and
//! fails. So the install checks first: serve answers on its control socket, has
//! picked the cluster up, and HAProxy accepts connections on every frontend. The
//! decision is [`decide`], pure, over the facts [`gather`] reads.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::{control, status};
use crate::state::StateDir;

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// serve answered on its control socket.
    pub serve_running: bool,
    /// The plan has a load balancer (UPI, agent without VIPs).
    pub has_load_balancer: bool,
    /// HAProxy's pid when it runs.
    pub haproxy_pid: Option<i32>,
    /// Each frontend (name, bind address) and whether a TCP connection to it was
    /// accepted.
    pub frontends: Vec<(String, SocketAddr, bool)>,
}

/// How to start serve, for the errors.
pub const HOW_TO_SERVE: &str = "start it with `sudo shiftlab serve --install-unit` (a systemd unit) or run `shiftlab serve` in another terminal and leave it running (docs/install.md, \"Run shiftlab serve\"), then run the same create again: it resumes here";

/// Ready, still starting (worth waiting), or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ready,
    /// serve runs but HAProxy is not (yet) listening everywhere.
    Starting(String),
    Refused(String),
}

/// The decision, pure.
pub fn decide(cluster: &str, f: &Facts) -> Verdict {
    if !f.has_load_balancer {
        return Verdict::Ready;
    }
    if !f.serve_running {
        return Verdict::Refused(format!(
            "shiftlab serve is not running, so {cluster} has no load balancer: the nodes cannot reach api-int:22623 and the installer cannot reach api:6443; {HOW_TO_SERVE}"
        ));
    }
    if f.haproxy_pid.is_none() {
        return Verdict::Starting(format!(
            "shiftlab serve runs but has no HAProxy for {cluster} yet"
        ));
    }
    let unbound: Vec<String> = f
        .frontends
        .iter()
        .filter(|(_, _, ok)| !ok)
        .map(|(n, a, _)| format!("{n} ({a})"))
        .collect();
    if unbound.is_empty() {
        Verdict::Ready
    } else {
        Verdict::Starting(format!(
            "the load balancer of {cluster} does not accept connections on {}",
            unbound.join(", ")
        ))
    }
}

/// Read the facts: serve's control socket, HAProxy's pid file, a TCP connect to
/// each frontend (on the host's own lab address).
pub fn gather(state: &StateDir, cluster: &str) -> Result<Facts> {
    let serve_running = matches!(
        control::request(state, &control::Request::Ping),
        Ok(Some(_))
    );
    let st = status::services_status(state, cluster)?;
    let (has_load_balancer, haproxy_pid, frontends) = match &st.load_balancer {
        None => (false, None, Vec::new()),
        Some(lb) => (
            true,
            lb.pid,
            lb.frontends
                .iter()
                .map(|f| {
                    let ok = TcpStream::connect_timeout(&f.bind, Duration::from_secs(2)).is_ok();
                    (f.name.clone(), f.bind, ok)
                })
                .collect(),
        ),
    };
    Ok(Facts {
        serve_running,
        has_load_balancer,
        haproxy_pid,
        frontends,
    })
}

/// Before a wait on the load balancer: ask serve to look at the cluster now, then
/// give it up to `grace` to bind; refuse with what is missing and how to fix it.
pub fn ensure(state: &StateDir, cluster: &str, grace: Duration) -> Result<()> {
    let _ = super::notify(state, Some(cluster));
    let deadline = Instant::now() + grace;
    loop {
        let facts = gather(state, cluster)?;
        match decide(cluster, &facts) {
            Verdict::Ready => return Ok(()),
            Verdict::Refused(why) => bail!("{why}"),
            Verdict::Starting(why) if Instant::now() >= deadline => bail!(
                "{why} after {} s; `shiftlab serve status {cluster}` and serve's log say why",
                grace.as_secs()
            ),
            Verdict::Starting(why) => {
                tracing::info!("waiting for the load balancer: {why}");
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            serve_running: true,
            has_load_balancer: true,
            haproxy_pid: Some(42),
            frontends: vec![
                ("api".into(), "192.168.1.2:6443".parse().unwrap(), true),
                ("mcs".into(), "192.168.1.2:22623".parse().unwrap(), true),
            ],
        }
    }

    #[test]
    fn no_serve_is_refused_with_how_to_run_it() {
        let f = Facts {
            serve_running: false,
            haproxy_pid: None,
            ..facts()
        };
        match decide("lab1", &f) {
            Verdict::Refused(w) => {
                assert!(w.contains("shiftlab serve is not running"), "{w}");
                assert!(w.contains("--install-unit"), "{w}");
                assert!(w.contains("docs/install.md"), "{w}");
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn an_unbound_frontend_is_waited_for_and_named() {
        let mut f = facts();
        f.frontends[1].2 = false;
        match decide("lab1", &f) {
            Verdict::Starting(w) => assert!(w.contains("mcs (192.168.1.2:22623)"), "{w}"),
            v => panic!("{v:?}"),
        }
        f.haproxy_pid = None;
        assert!(matches!(decide("lab1", &f), Verdict::Starting(_)));
    }

    #[test]
    fn ready_when_every_frontend_accepts_or_there_is_no_load_balancer() {
        assert_eq!(decide("lab1", &facts()), Verdict::Ready);
        let f = Facts {
            serve_running: false,
            has_load_balancer: false,
            haproxy_pid: None,
            frontends: vec![],
        };
        assert_eq!(decide("lab1", &f), Verdict::Ready);
    }
}
