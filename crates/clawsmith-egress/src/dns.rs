//! The DNS stub of an allowlisted namespace: it answers the names the policy allows with
//! stand-in addresses of its own and refuses every other question. It never asks another
//! server, so no query leaves the namespace and DNS cannot carry data out; a connection to a
//! stand-in address is known to be for the name it was given to ([`NameMap`]), which is how
//! tools that ignore proxy variables (Node's `dns.lookup`, a plain `connect`) reach allowed
//! hosts through the gateway's transparent listeners.

use std::collections::HashMap;
use std::io;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, PoisonError};

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType, rdata::A};
use tokio::net::UdpSocket;

use crate::gateway::EgressEvent;
use crate::policy::EgressPolicy;

/// The first stand-in address; the stub gives out `127.77.0.1` to `127.77.255.254`.
const FIRST_STAND_IN: u32 = u32::from_be_bytes([127, 77, 0, 1]);
/// How many names one namespace can have stand-ins for.
const MAX_NAMES: u32 = 65_534;
/// How long a client may keep an answer (the mapping does not change while the namespace
/// lives, so the answer stays true).
const ANSWER_TTL: u32 = 300;
/// The largest DNS message over UDP this stub reads or writes.
const MAX_MESSAGE_BYTES: usize = 4096;

/// The stand-in addresses given out, both ways.
#[derive(Debug, Default)]
pub struct NameMap {
    maps: Mutex<Maps>,
}

#[derive(Debug, Default)]
struct Maps {
    by_name: HashMap<String, Ipv4Addr>,
    by_address: HashMap<Ipv4Addr, String>,
}

impl NameMap {
    /// An empty map.
    pub fn new() -> NameMap {
        NameMap::default()
    }

    /// The stand-in address of `name` (lower case, no trailing dot), given out now if it has
    /// none; `None` once every stand-in is taken.
    pub fn address_of(&self, name: &str) -> Option<Ipv4Addr> {
        let mut maps = self.maps.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(address) = maps.by_name.get(name) {
            return Some(*address);
        }
        let taken = u32::try_from(maps.by_name.len()).ok()?;
        if taken >= MAX_NAMES {
            return None;
        }
        let address = Ipv4Addr::from(FIRST_STAND_IN + taken);
        maps.by_name.insert(name.to_owned(), address);
        maps.by_address.insert(address, name.to_owned());
        Some(address)
    }

    /// The name `address` stands for, when the stub gave it out.
    pub fn name_of(&self, address: Ipv4Addr) -> Option<String> {
        let maps = self.maps.lock().unwrap_or_else(PoisonError::into_inner);
        maps.by_address.get(&address).cloned()
    }
}

/// The stub: the policy it answers by, the stand-ins it gives out and where its refusals are
/// reported.
pub struct DnsStub {
    policy: EgressPolicy,
    names: Arc<NameMap>,
    events: Arc<dyn Fn(&EgressEvent) + Send + Sync>,
}

impl std::fmt::Debug for DnsStub {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DnsStub")
            .field("policy", &self.policy)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl DnsStub {
    /// A stub answering by `policy`, giving out stand-ins from `names` (shared with the
    /// gateway's transparent listeners).
    pub fn new(policy: EgressPolicy, names: Arc<NameMap>) -> DnsStub {
        DnsStub {
            policy,
            names,
            events: Arc::new(|_| {}),
        }
    }

    /// Reports every refused question to `events` (protocol `dns`, port 53): a name no rule
    /// allows is where a command's connection ends when it ignores the proxy.
    pub fn with_events(mut self, events: impl Fn(&EgressEvent) + Send + Sync + 'static) -> DnsStub {
        self.events = Arc::new(events);
        self
    }

    /// The answer to the DNS message `query`, or `None` when it is not worth one (not a
    /// query, or too broken to name its id).
    ///
    /// - `A` for a name the policy allows: its stand-in address.
    /// - Any other type for an allowed name (`AAAA`, `TXT`, `MX`…): no records (`NOERROR`), so
    ///   clients fall back to `A`.
    /// - Any question about any other name: `REFUSED`.
    /// - Not a standard query with one question: `NOTIMP` or `FORMERR`.
    pub fn answer(&self, query: &[u8]) -> Option<Vec<u8>> {
        let Ok(request) = Message::from_vec(query) else {
            let id = u16::from_be_bytes([*query.first()?, *query.get(1)?]);
            return Message::error_msg(id, OpCode::Query, ResponseCode::FormErr)
                .to_vec()
                .ok();
        };
        if request.metadata.message_type != MessageType::Query {
            return None;
        }
        let mut response = Message::response(request.metadata.id, request.metadata.op_code);
        response.metadata.recursion_desired = request.metadata.recursion_desired;
        response.metadata.recursion_available = true;
        response.queries = request.queries.clone();
        let code = if request.metadata.op_code != OpCode::Query {
            ResponseCode::NotImp
        } else if let [question] = request.queries.as_slice() {
            let name = question
                .name()
                .to_ascii()
                .trim_end_matches('.')
                .to_ascii_lowercase();
            match self.policy.resolvable(&name) {
                false => {
                    (self.events)(&EgressEvent {
                        reason: format!(
                            "{name} is not a name the network allowlist allows: the DNS stub \
                             refused it (it asks no other server)"
                        ),
                        host: name,
                        port: 53,
                        protocol: "dns",
                        allowed: false,
                        address: None,
                    });
                    ResponseCode::Refused
                }
                true if question.query_type() == RecordType::A => {
                    match self.names.address_of(&name) {
                        Some(address) => {
                            response.answers.push(Record::from_rdata(
                                question.name().clone(),
                                ANSWER_TTL,
                                RData::A(A(address)),
                            ));
                            ResponseCode::NoError
                        }
                        None => ResponseCode::ServFail,
                    }
                }
                true => ResponseCode::NoError,
            }
        } else {
            ResponseCode::FormErr
        };
        response.metadata.response_code = code;
        response.to_vec().ok()
    }

    /// Answers every datagram `socket` receives, until the task is dropped.
    pub async fn serve(self: Arc<Self>, socket: UdpSocket) -> io::Result<()> {
        let mut buffer = vec![0_u8; MAX_MESSAGE_BYTES];
        loop {
            let (read, from) = socket.recv_from(&mut buffer).await?;
            if let Some(answer) = self.answer(&buffer[..read])
                && answer.len() <= MAX_MESSAGE_BYTES
            {
                let _ = socket.send_to(&answer, from).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use hickory_proto::op::Query;
    use hickory_proto::rr::Name;

    use super::*;

    fn query(name: &str, kind: RecordType) -> Vec<u8> {
        let mut message = Message::query();
        message.metadata.recursion_desired = true;
        message.add_query(Query::query(Name::from_ascii(name).unwrap(), kind));
        message.to_vec().unwrap()
    }

    fn stub() -> DnsStub {
        let policy = EgressPolicy::parse(
            &["allowed.test", "*.allowed.test", "ported.test:443"],
            &["denied.allowed.test", "*:25"],
        )
        .unwrap();
        DnsStub::new(policy, Arc::new(NameMap::new()))
    }

    #[test]
    fn allowed_names_get_stand_ins_and_every_other_question_is_refused() {
        let stub = stub();
        let long = format!("{}.unlisted.test", "a".repeat(63));
        // (name, type, response code, answered address)
        let table = [
            (
                "allowed.test",
                RecordType::A,
                ResponseCode::NoError,
                Some([127, 77, 0, 1]),
            ),
            (
                "ALLOWED.test.",
                RecordType::A,
                ResponseCode::NoError,
                Some([127, 77, 0, 1]),
            ),
            (
                "www.allowed.test",
                RecordType::A,
                ResponseCode::NoError,
                Some([127, 77, 0, 2]),
            ),
            (
                "ported.test",
                RecordType::A,
                ResponseCode::NoError,
                Some([127, 77, 0, 3]),
            ),
            (
                "allowed.test",
                RecordType::AAAA,
                ResponseCode::NoError,
                None,
            ),
            ("allowed.test", RecordType::TXT, ResponseCode::NoError, None),
            ("unlisted.test", RecordType::A, ResponseCode::Refused, None),
            (
                "c2VjcmV0.unlisted.test",
                RecordType::TXT,
                ResponseCode::Refused,
                None,
            ),
            (long.as_str(), RecordType::A, ResponseCode::Refused, None),
            (
                "denied.allowed.test",
                RecordType::A,
                ResponseCode::Refused,
                None,
            ),
            ("127.0.0.1", RecordType::A, ResponseCode::Refused, None),
        ];
        for (name, kind, code, address) in table {
            let answer = Message::from_vec(&stub.answer(&query(name, kind)).unwrap()).unwrap();
            assert_eq!(answer.metadata.response_code, code, "{name} {kind}");
            assert_eq!(answer.metadata.message_type, MessageType::Response);
            let answered: Vec<Ipv4Addr> = answer
                .answers
                .iter()
                .filter_map(|record| match &record.data {
                    RData::A(A(ip)) => Some(*ip),
                    _ => None,
                })
                .collect();
            assert_eq!(
                answered,
                address.map(Ipv4Addr::from).into_iter().collect::<Vec<_>>(),
                "{name} {kind}"
            );
        }
        assert_eq!(
            stub.names.name_of(Ipv4Addr::new(127, 77, 0, 2)).as_deref(),
            Some("www.allowed.test")
        );
        assert_eq!(stub.names.name_of(Ipv4Addr::new(127, 77, 0, 9)), None);
    }

    #[test]
    fn every_refused_question_is_reported_and_no_answered_one_is() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let stub = stub().with_events(move |event| {
            sink.lock().unwrap().push((
                event.host.clone(),
                event.port,
                event.protocol,
                event.allowed,
                event.reason.clone(),
            ));
        });
        for (name, kind) in [
            ("allowed.test", RecordType::A),
            ("allowed.test", RecordType::AAAA),
            ("c2VjcmV0.Unlisted.test.", RecordType::TXT),
            ("denied.allowed.test", RecordType::A),
        ] {
            stub.answer(&query(name, kind)).unwrap();
        }
        let seen = seen.lock().unwrap();
        let hosts: Vec<&str> = seen.iter().map(|event| event.0.as_str()).collect();
        assert_eq!(hosts, ["c2vjcmv0.unlisted.test", "denied.allowed.test"]);
        for (host, port, protocol, allowed, reason) in seen.iter() {
            assert_eq!((*port, *protocol, *allowed), (53, "dns", false));
            assert!(
                reason.starts_with(&format!(
                    "{host} is not a name the network allowlist allows"
                )),
                "{reason}"
            );
        }
    }

    #[test]
    fn what_is_not_one_plain_question_is_answered_as_such() {
        let stub = stub();
        let answer = |bytes: &[u8]| {
            stub.answer(bytes)
                .map(|answer| Message::from_vec(&answer).unwrap().metadata.response_code)
        };
        assert_eq!(answer(&[0x12, 0x34, 0xff]), Some(ResponseCode::FormErr));
        assert_eq!(answer(&[0x12]), None);
        let mut two = Message::query();
        two.add_query(Query::query(
            Name::from_ascii("allowed.test").unwrap(),
            RecordType::A,
        ));
        two.add_query(Query::query(
            Name::from_ascii("www.allowed.test").unwrap(),
            RecordType::A,
        ));
        assert_eq!(answer(&two.to_vec().unwrap()), Some(ResponseCode::FormErr));
        let mut update = Message::new(7, MessageType::Query, OpCode::Update);
        update.add_query(Query::query(
            Name::from_ascii("allowed.test").unwrap(),
            RecordType::A,
        ));
        assert_eq!(
            answer(&update.to_vec().unwrap()),
            Some(ResponseCode::NotImp)
        );
        let response = Message::response(9, OpCode::Query);
        assert_eq!(answer(&response.to_vec().unwrap()), None);
    }
}
