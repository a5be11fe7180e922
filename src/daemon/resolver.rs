//! `--host-dns local`: a small authoritative DNS responder for the zones of the
//! clusters serve runs, on [`crate::host::dns::LOCAL_DNS_ADDR`] port 53, that the
//! host's resolver asks first (`host::dns`, the resolv.conf block).
//!
//! It answers what the cluster network's dnsmasq answers the nodes (the plan's
//! records: api, api-int, the nodes, `*.apps` as dnsmasq's `address=/apps.<zone>/`
//! does — the name itself and every name below it — and the PTRs of the plan;
//! a dual-stack plan's AAAA, IPv6 wildcard and `ip6.arpa` PTRs too) and
//! nothing else: a name outside every zone gets REFUSED, which glibc and Go's
//! resolver take as "ask the next nameserver" (sources in `host::dns`). It never
//! forwards, recurses or caches. Messages are parsed and built with
//! `hickory-proto`; the decision is the pure [`lookup`].

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{Context, Result};
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, PTR};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, UdpSocket};
use tokio::task::JoinHandle;

use crate::plan::{Plan, RecordType as PlanRecord};

/// Seconds a resolver may keep an answer: short, a plan may change.
const TTL: u32 = 5;

/// One cluster's zone, from its plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zone {
    /// `<cluster>.<domain>`, lower case.
    pub domain: String,
    pub a: BTreeMap<String, Ipv4Addr>,
    /// `apps.<cluster>.<domain>` and the address of everything at and below it.
    pub wildcards: Vec<(String, Ipv4Addr)>,
    /// A dual-stack plan's AAAA records and IPv6 wildcard.
    pub aaaa: BTreeMap<String, Ipv6Addr>,
    pub wildcards6: Vec<(String, Ipv6Addr)>,
    /// `<reversed ip>.in-addr.arpa` and `<reversed nibbles>.ip6.arpa` → name.
    pub ptr: BTreeMap<String, String>,
}

fn norm(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl Zone {
    pub fn from_plan(plan: &Plan) -> Self {
        let mut z = Zone {
            domain: norm(&plan.cluster_domain),
            ..Zone::default()
        };
        for r in &plan.dns {
            match r.kind {
                PlanRecord::A => {
                    if let Ok(ip) = r.value.parse() {
                        z.a.insert(norm(&r.name), ip);
                    }
                }
                PlanRecord::Wildcard => {
                    if let (Some(base), Ok(ip)) = (r.name.strip_prefix("*."), r.value.parse()) {
                        z.wildcards.push((norm(base), ip));
                    }
                }
                PlanRecord::PTR => {
                    z.ptr.insert(norm(&r.name), norm(&r.value));
                }
                PlanRecord::AAAA => {
                    if let Ok(ip) = r.value.parse() {
                        z.aaaa.insert(norm(&r.name), ip);
                    }
                }
                PlanRecord::Wildcard6 => {
                    if let (Some(base), Ok(ip)) = (r.name.strip_prefix("*."), r.value.parse()) {
                        z.wildcards6.push((norm(base), ip));
                    }
                }
            }
        }
        z
    }
}

/// What to answer for one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Ptr(String),
    /// The name exists, not with this type.
    NoData,
    /// In a zone of ours, no such name.
    NxDomain,
    /// Not ours: the resolver asks its next nameserver.
    Refused,
}

fn within(name: &str, base: &str) -> bool {
    name == base || name.strip_suffix(base).is_some_and(|p| p.ends_with('.'))
}

/// `name`'s address of one family: its own record, else the wildcard it is at
/// or below.
fn address<T: Copy>(
    name: &str,
    records: &BTreeMap<String, T>,
    wildcards: &[(String, T)],
) -> Option<T> {
    records.get(name).copied().or_else(|| {
        wildcards
            .iter()
            .find(|(base, _)| within(name, base))
            .map(|(_, ip)| *ip)
    })
}

/// The answer to `name`/`qtype` from the zones.
pub fn lookup<'z>(
    zones: impl IntoIterator<Item = &'z Zone> + Clone,
    name: &str,
    qtype: RecordType,
) -> Lookup {
    let name = norm(name);
    if name.ends_with(".in-addr.arpa") || name.ends_with(".ip6.arpa") {
        return match zones.into_iter().find_map(|z| z.ptr.get(&name)) {
            Some(target) if qtype == RecordType::PTR => Lookup::Ptr(target.clone()),
            Some(_) => Lookup::NoData,
            None => Lookup::Refused,
        };
    }
    let Some(zone) = zones
        .into_iter()
        .filter(|z| within(&name, &z.domain))
        .max_by_key(|z| z.domain.len())
    else {
        return Lookup::Refused;
    };
    let v4 = address(&name, &zone.a, &zone.wildcards);
    let v6 = address(&name, &zone.aaaa, &zone.wildcards6);
    match (v4, v6) {
        (Some(ip), _) if matches!(qtype, RecordType::A | RecordType::ANY) => Lookup::A(ip),
        (_, Some(ip)) if matches!(qtype, RecordType::AAAA | RecordType::ANY) => Lookup::Aaaa(ip),
        (Some(_), _) | (_, Some(_)) => Lookup::NoData,
        // The apex and names above a record exist (empty non-terminals).
        (None, None)
            if zone
                .a
                .keys()
                .chain(zone.aaaa.keys())
                .chain(zone.wildcards.iter().map(|(b, _)| b))
                .chain(zone.wildcards6.iter().map(|(b, _)| b))
                .any(|n| n == &name || within(n, &name)) =>
        {
            Lookup::NoData
        }
        (None, None) => Lookup::NxDomain,
    }
}

/// The response to one query message, or `None` for something that is not a
/// query (a response, garbage): dropped, as servers do.
pub fn answer<'z>(
    zones: impl IntoIterator<Item = &'z Zone> + Clone,
    query: &[u8],
) -> Option<Vec<u8>> {
    let q = Message::from_vec(query).ok()?;
    if q.metadata.message_type != MessageType::Query {
        return None;
    }
    let mut r = Message::response(q.metadata.id, q.metadata.op_code);
    r.metadata.recursion_desired = q.metadata.recursion_desired;
    r.metadata.recursion_available = false;
    r.add_queries(q.queries.iter().cloned());
    if q.metadata.op_code != OpCode::Query {
        r.metadata.response_code = ResponseCode::NotImp;
        return r.to_vec().ok();
    }
    let [question] = q.queries.as_slice() else {
        r.metadata.response_code = ResponseCode::Refused;
        return r.to_vec().ok();
    };
    let name = question.name().to_ascii();
    match lookup(zones, &name, question.query_type()) {
        Lookup::Refused => {
            r.metadata.response_code = ResponseCode::Refused;
        }
        found => {
            r.metadata.authoritative = true;
            let owner: Name = question.name().clone();
            match found {
                Lookup::A(ip) => {
                    r.add_answer(Record::from_rdata(owner, TTL, RData::A(A(ip))));
                }
                Lookup::Aaaa(ip) => {
                    r.add_answer(Record::from_rdata(owner, TTL, RData::AAAA(AAAA(ip))));
                }
                Lookup::Ptr(target) => {
                    let target = Name::from_ascii(format!("{target}.")).ok()?;
                    r.add_answer(Record::from_rdata(owner, TTL, RData::PTR(PTR(target))));
                }
                Lookup::NxDomain => {
                    r.metadata.response_code = ResponseCode::NXDomain;
                }
                _ => {}
            }
        }
    }
    r.to_vec().ok()
}

/// The zones served, by cluster.
pub type Zones = Arc<RwLock<BTreeMap<String, Zone>>>;

fn answer_from(zones: &Zones, query: &[u8]) -> Option<Vec<u8>> {
    let z = zones.read().ok()?;
    answer(z.values(), query)
}

/// The running responder: UDP and TCP on one address.
pub struct Responder {
    pub addr: SocketAddr,
    zones: Zones,
    tasks: Vec<JoinHandle<()>>,
}

impl Responder {
    /// Bind UDP and TCP on `addr` and answer from the (initially empty) zones.
    pub async fn start(addr: SocketAddr) -> Result<Self> {
        let udp = UdpSocket::bind(addr)
            .await
            .with_context(|| format!("binding {addr}/udp"))?;
        let addr = udp.local_addr()?;
        let tcp = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}/tcp"))?;
        let zones: Zones = Arc::default();
        let z = zones.clone();
        let udp_task = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let Ok((n, peer)) = udp.recv_from(&mut buf).await else {
                    // An error that persists must not become a busy loop.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if let Some(resp) = answer_from(&z, &buf[..n]) {
                    let _ = udp.send_to(&resp, peer).await;
                }
            }
        });
        let z = zones.clone();
        let tcp_task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = tcp.accept().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let z = z.clone();
                tokio::spawn(async move {
                    // RFC 1035 4.2.2: two-byte length, then the message; several
                    // queries may follow on one connection.
                    let serve = async {
                        loop {
                            let len = stream.read_u16().await? as usize;
                            let mut msg = vec![0u8; len];
                            stream.read_exact(&mut msg).await?;
                            let Some(resp) = answer_from(&z, &msg) else {
                                return Ok::<(), std::io::Error>(());
                            };
                            stream.write_u16(resp.len() as u16).await?;
                            stream.write_all(&resp).await?;
                        }
                    };
                    let _ = tokio::time::timeout(Duration::from_secs(10), serve).await;
                });
            }
        });
        tracing::info!(%addr, "local dns responder for the cluster zones");
        Ok(Responder {
            addr,
            zones,
            tasks: vec![udp_task, tcp_task],
        })
    }

    /// Serve `zone` for `cluster`, or stop serving it.
    pub fn set(&self, cluster: &str, zone: Option<Zone>) {
        if let Ok(mut z) = self.zones.write() {
            match zone {
                Some(zone) => z.insert(cluster.to_string(), zone),
                None => z.remove(cluster),
            };
        }
    }

    pub fn is_empty(&self) -> bool {
        self.zones.read().map(|z| z.is_empty()).unwrap_or(true)
    }

    pub fn stop(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone() -> Zone {
        let plan: Plan =
            serde_json::from_str(include_str!("../../tests/golden/upi.plan.json")).unwrap();
        Zone::from_plan(&plan)
    }

    #[test]
    fn the_plan_s_names_wildcard_and_ptrs_and_nothing_else() {
        let z = [zone()];
        let a = |n: &str| lookup(&z, n, RecordType::A);
        let lb: Ipv4Addr = "192.168.126.2".parse().unwrap();
        assert_eq!(a("api.lab1.lab.test"), Lookup::A(lb));
        assert_eq!(a("API-INT.lab1.lab.test."), Lookup::A(lb));
        assert_eq!(
            a("lab1-worker-1.lab1.lab.test"),
            Lookup::A("192.168.126.21".parse().unwrap())
        );
        // *.apps as dnsmasq's address=/apps.<zone>/: any depth, and apps itself.
        assert_eq!(a("myroute-myns.apps.lab1.lab.test"), Lookup::A(lb));
        assert_eq!(a("a.b.apps.lab1.lab.test"), Lookup::A(lb));
        assert_eq!(a("apps.lab1.lab.test"), Lookup::A(lb));
        // Other types of an existing name: no data (authoritative, so glibc stops).
        assert_eq!(
            lookup(&z, "api.lab1.lab.test", RecordType::AAAA),
            Lookup::NoData
        );
        // The apex exists; an unknown name in the zone does not.
        assert_eq!(a("lab1.lab.test"), Lookup::NoData);
        assert_eq!(a("nope.lab1.lab.test"), Lookup::NxDomain);
        // Not ours: refused, the resolver asks the next nameserver.
        assert_eq!(a("lab.test"), Lookup::Refused);
        assert_eq!(a("example.com"), Lookup::Refused);
        assert_eq!(a("xlab1.lab.test"), Lookup::Refused);
        assert_eq!(
            lookup(&z, "11.126.168.192.in-addr.arpa", RecordType::PTR),
            Lookup::Ptr("lab1-ctlplane-0.lab1.lab.test".into())
        );
        assert_eq!(
            lookup(&z, "1.1.1.1.in-addr.arpa", RecordType::PTR),
            Lookup::Refused
        );
    }

    /// A dual-stack plan: AAAA beside A for the same names, the IPv6 `*.apps`,
    /// `ip6.arpa` PTRs; a type the name lacks is no data, never NXDOMAIN.
    #[test]
    fn a_dual_stack_zone_answers_aaaa_and_ip6_arpa() {
        let plan: Plan =
            serde_json::from_str(include_str!("../../tests/golden/ipv6/upi.plan.json")).unwrap();
        let z = [Zone::from_plan(&plan)];
        let api4: Ipv4Addr = "192.168.140.2".parse().unwrap();
        let api6: Ipv6Addr = "fd00:5:140::2".parse().unwrap();
        let q = |n: &str, t| lookup(&z, n, t);
        assert_eq!(q("api.ds-upi.lab.test", RecordType::A), Lookup::A(api4));
        assert_eq!(
            q("api.ds-upi.lab.test", RecordType::AAAA),
            Lookup::Aaaa(api6)
        );
        assert_eq!(
            q("api-int.ds-upi.lab.test", RecordType::AAAA),
            Lookup::Aaaa(api6)
        );
        assert_eq!(
            q("ds-upi-worker-1.ds-upi.lab.test", RecordType::AAAA),
            Lookup::Aaaa("fd00:5:140::15".parse().unwrap())
        );
        assert_eq!(
            q(
                "console-openshift-console.apps.ds-upi.lab.test",
                RecordType::AAAA
            ),
            Lookup::Aaaa(api6)
        );
        assert_eq!(q("api.ds-upi.lab.test", RecordType::MX), Lookup::NoData);
        assert_eq!(
            q(
                "5.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.4.1.0.5.0.0.0.0.0.d.f.ip6.arpa",
                RecordType::PTR
            ),
            Lookup::Ptr("ds-upi-worker-1.ds-upi.lab.test".into())
        );
        let other6 =
            "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa";
        assert_eq!(q(other6, RecordType::PTR), Lookup::Refused);
        let r = Message::from_vec(
            &answer(&z, &query("api.ds-upi.lab.test.", RecordType::AAAA)).unwrap(),
        )
        .unwrap();
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        assert_eq!(r.answers.len(), 1);
        assert_eq!(&r.answers[0].data, &RData::AAAA(AAAA(api6)));
    }

    fn query(name: &str, t: RecordType) -> Vec<u8> {
        let mut m = Message::query();
        m.metadata.id = 4242;
        m.metadata.recursion_desired = true;
        m.add_query(hickory_proto::op::Query::query(
            Name::from_ascii(name).unwrap(),
            t,
        ));
        m.to_vec().unwrap()
    }

    #[test]
    fn responses_carry_the_id_question_and_codes_resolvers_act_on() {
        let z = [zone()];
        let r =
            Message::from_vec(&answer(&z, &query("api.lab1.lab.test.", RecordType::A)).unwrap())
                .unwrap();
        assert_eq!(r.metadata.id, 4242);
        assert_eq!(r.metadata.message_type, MessageType::Response);
        assert!(r.metadata.authoritative);
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        assert_eq!(r.queries.len(), 1);
        assert_eq!(r.answers.len(), 1);
        assert_eq!(
            &r.answers[0].data,
            &RData::A(A("192.168.126.2".parse().unwrap()))
        );
        let r =
            Message::from_vec(&answer(&z, &query("example.com.", RecordType::A)).unwrap()).unwrap();
        assert_eq!(r.metadata.response_code, ResponseCode::Refused);
        assert!(!r.metadata.authoritative);
        let r =
            Message::from_vec(&answer(&z, &query("nope.lab1.lab.test.", RecordType::A)).unwrap())
                .unwrap();
        assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
        assert!(r.metadata.authoritative);
        // Not a query: dropped.
        let mut resp = Message::from_vec(&query("x.", RecordType::A)).unwrap();
        resp.metadata.message_type = MessageType::Response;
        assert!(answer(&z, &resp.to_vec().unwrap()).is_none());
        assert!(answer(&z, b"\x00\x01garbage").is_none());
    }
}
