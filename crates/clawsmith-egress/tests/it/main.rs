//! The gateway against real clients (curl, raw sockets) and origins on 127.0.0.1. Names
//! resolve through a table to documentation addresses (203.0.113.0/24), which the address
//! check lets through as any public address; the connector then dials the origin on 127.0.0.1
//! that stands for each. Names the table maps to loopback, link-local, private or this
//! machine's addresses stand for rebinding attacks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream as StdTcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawsmith_egress::{
    BoxFuture, Connect, DnsStub, EgressEvent, EgressPolicy, Gateway, NameMap, Resolve,
    client_hello_for,
};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType, rdata::A};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Names to addresses, as a DNS would answer.
struct Table(HashMap<&'static str, Vec<IpAddr>>);

impl Resolve for Table {
    fn resolve<'a>(&'a self, host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        let found = self.0.get(host).cloned();
        Box::pin(async move {
            found.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such name"))
        })
    }
}

/// Dials the origin on 127.0.0.1 that stands for a public address; any other address is a
/// test failure (the gateway must never dial it).
struct ToOrigins(HashMap<IpAddr, u16>);

impl Connect for ToOrigins {
    fn connect(&self, address: SocketAddr) -> BoxFuture<'_, std::io::Result<TcpStream>> {
        let port = self.0.get(&address.ip()).copied();
        Box::pin(async move {
            let port = port.unwrap_or_else(|| panic!("the gateway dialled {address}"));
            TcpStream::connect(("127.0.0.1", port)).await
        })
    }
}

/// An origin: answers every HTTP request with its name, and keeps the first bytes of every
/// connection.
async fn origin(name: &'static str, seen: Arc<Mutex<Vec<Vec<u8>>>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let mut buffer = vec![0_u8; 8192];
                let Ok(read) = stream.read(&mut buffer).await else {
                    return;
                };
                seen.lock().unwrap().push(buffer[..read].to_vec());
                if buffer.starts_with(b"HOLD") {
                    // Keeps the connection open and silent.
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                if buffer.starts_with(b"GET ") {
                    let body = format!("hello from {name}\n");
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                }
            });
        }
    });
    port
}

struct Setup {
    gateway: u16,
    gateway_handle: Arc<Gateway>,
    policy: EgressPolicy,
    names: Arc<NameMap>,
    origin: u16,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
    events: Arc<Mutex<Vec<EgressEvent>>>,
    _runtime: tokio::runtime::Runtime,
}

const PUBLIC: &str = "203.0.113.1";

fn setup() -> Setup {
    setup_with(None)
}

/// [`setup`] with the gateway's connection limit and idle time.
fn setup_with(limits: Option<(usize, Duration)>) -> Setup {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let events = Arc::new(Mutex::new(Vec::new()));
    let origin_port = runtime.block_on(origin("allowed.test", Arc::clone(&seen)));
    let own = clawsmith_egress::own_addresses()
        .into_iter()
        .find(|ip| !ip.is_loopback())
        .unwrap_or_else(|| "127.0.0.1".parse().unwrap());
    let ip = |text: &str| -> IpAddr { text.parse().unwrap() };
    let table = Table(HashMap::from([
        ("allowed.test", vec![ip(PUBLIC)]),
        ("www.allowed.test", vec![ip(PUBLIC)]),
        ("ported.test", vec![ip(PUBLIC)]),
        ("denied.allowed.test", vec![ip(PUBLIC)]),
        ("unlisted.test", vec![ip(PUBLIC)]),
        ("rebind.allowed.test", vec![ip("127.0.0.1")]),
        ("metadata.allowed.test", vec![ip("169.254.169.254")]),
        ("mapped.allowed.test", vec![ip("::ffff:127.0.0.1")]),
        ("nat64.allowed.test", vec![ip("64:ff9b::a9fe:a9fe")]),
        ("private.allowed.test", vec![ip("10.0.0.9")]),
        ("own.allowed.test", vec![own]),
        // One bad address and one good: only the checked good one is dialled.
        ("mixed.allowed.test", vec![ip("127.0.0.1"), ip(PUBLIC)]),
    ]));
    let policy = EgressPolicy::parse(
        &["allowed.test", "*.allowed.test", "ported.test:443"],
        &["denied.allowed.test"],
    )
    .unwrap();
    let recorded = Arc::clone(&events);
    let gateway = Gateway::new(policy.clone())
        .with_resolver(Arc::new(table))
        .with_connector(Arc::new(ToOrigins(HashMap::from([(
            ip(PUBLIC),
            origin_port,
        )]))))
        .with_events(move |event| recorded.lock().unwrap().push(event.clone()));
    let gateway = match limits {
        Some((connections, idle)) => gateway.with_limits(connections, idle),
        None => gateway,
    };
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let gateway = Arc::new(gateway);
    runtime.spawn(Arc::clone(&gateway).serve(listener));
    Setup {
        gateway: port,
        gateway_handle: gateway,
        policy,
        names: Arc::new(NameMap::new()),
        origin: origin_port,
        seen,
        events,
        _runtime: runtime,
    }
}

/// `CONNECT target`: the status code and the body of a refusal.
fn connect(gateway: u16, target: &str) -> (u16, String, StdTcpStream) {
    let mut stream = StdTcpStream::connect(("127.0.0.1", gateway)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let mut body = String::new();
    if status != 200 {
        let _ = stream.read_to_string(&mut body);
    }
    (status, body, stream)
}

#[test]
fn connect_reaches_allowed_names_and_refuses_every_other_route() {
    let setup = setup();
    let port = setup.origin;
    // (CONNECT target, status, a word of the reason)
    let table = [
        (format!("allowed.test:{port}"), 200, ""),
        (format!("www.allowed.test:{port}"), 200, ""),
        (format!("mixed.allowed.test:{port}"), 200, ""),
        (
            format!("unlisted.test:{port}"),
            403,
            "not in the network allowlist",
        ),
        (
            format!("denied.allowed.test:{port}"),
            403,
            "denied by the rule",
        ),
        (
            format!("ported.test:{port}"),
            403,
            "not in the network allowlist",
        ),
        (format!("127.0.0.1:{port}"), 403, "an address, not a name"),
        (format!("[::1]:{port}"), 403, "an address, not a name"),
        (
            format!("[::ffff:127.0.0.1]:{port}"),
            403,
            "an address, not a name",
        ),
        (format!("2130706433:{port}"), 403, "an address, not a name"),
        (format!("0x7f.1:{port}"), 403, "an address, not a name"),
        (format!("{PUBLIC}:{port}"), 403, "an address, not a name"),
        (format!("rebind.allowed.test:{port}"), 403, "loopback"),
        (format!("metadata.allowed.test:{port}"), 403, "link-local"),
        (format!("mapped.allowed.test:{port}"), 403, "loopback"),
        (format!("nat64.allowed.test:{port}"), 403, "link-local"),
        (format!("private.allowed.test:{port}"), 403, "private"),
        (format!("own.allowed.test:{port}"), 403, "this machine"),
        (
            format!("missing.allowed.test:{port}"),
            502,
            "does not resolve",
        ),
    ];
    for (target, status, word) in &table {
        let (got, body, _stream) = connect(setup.gateway, target);
        assert_eq!(got, *status, "{target}: {body}");
        assert!(body.contains(word), "{target}: {body}");
    }
    let events = setup.events.lock().unwrap();
    for (target, status, _) in &table {
        if *status == 200 {
            continue;
        }
        let host = target.rsplit_once(':').unwrap().0.trim_matches(['[', ']']);
        assert!(
            events
                .iter()
                .any(|event| event.host == host && !event.allowed),
            "no refusal event for {target}: {events:?}"
        );
    }
}

#[test]
fn a_tunnel_carries_only_a_tls_handshake_for_the_allowed_name() {
    let setup = setup();
    let target = format!("allowed.test:{}", setup.origin);
    // (the name the ClientHello asks for, whether it reaches the origin)
    let table = [
        ("allowed.test", true),
        ("evil.test", false),
        ("www.allowed.test", false),
    ];
    for (name, passes) in table {
        let before = setup.seen.lock().unwrap().len();
        let (status, _, mut stream) = connect(setup.gateway, &target);
        assert_eq!(status, 200);
        stream.write_all(&client_hello_for(name)).unwrap();
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
        std::thread::sleep(Duration::from_millis(200));
        let seen = setup.seen.lock().unwrap();
        let reached = seen.len() > before
            && seen[before..]
                .iter()
                .any(|bytes| bytes.first() == Some(&0x16));
        assert_eq!(reached, passes, "a hello for {name}");
    }
    let events = setup.events.lock().unwrap().clone();
    assert!(
        events
            .iter()
            .any(|event| !event.allowed
                && event.reason.contains("names evil.test, not allowed.test")),
        "{events:?}"
    );
    // Bytes that are not TLS pass, and the server may speak first.
    let (status, _, mut stream) = connect(setup.gateway, &target);
    assert_eq!(status, 200);
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.contains("hello from allowed.test"), "{answer}");
}

fn curl(args: &[&str]) -> (i32, String) {
    #[allow(clippy::disallowed_methods)] // curl is the client under test.
    let output = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "20"])
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

#[test]
fn curl_reaches_allowed_names_through_every_protocol_and_no_others() {
    #[allow(clippy::disallowed_methods)] // curl is the client under test.
    let curl_runs = Command::new("curl").arg("--version").output().is_ok();
    if !curl_runs {
        assert!(std::env::var_os("CI").is_none(), "CI must have curl");
        eprintln!("SKIP: no curl");
        return;
    }
    let setup = setup();
    let proxy = format!("http://127.0.0.1:{}", setup.gateway);
    let socks = format!("127.0.0.1:{}", setup.gateway);
    let allowed = format!("http://allowed.test:{}/", setup.origin);
    let unlisted = format!("http://unlisted.test:{}/", setup.origin);
    // (arguments, whether the origin answers)
    let table = [
        (vec!["--proxy", proxy.as_str(), allowed.as_str()], true),
        (
            vec!["--proxytunnel", "--proxy", proxy.as_str(), allowed.as_str()],
            true,
        ),
        (
            vec!["--socks5-hostname", socks.as_str(), allowed.as_str()],
            true,
        ),
        (vec!["--proxy", proxy.as_str(), unlisted.as_str()], false),
        (
            vec![
                "--proxytunnel",
                "--proxy",
                proxy.as_str(),
                unlisted.as_str(),
            ],
            false,
        ),
        (
            vec!["--socks5-hostname", socks.as_str(), unlisted.as_str()],
            false,
        ),
    ];
    for (args, answers) in table {
        let (code, output) = curl(&args);
        assert_eq!(
            output.contains("hello from allowed.test"),
            answers,
            "curl {args:?} exited {code}: {output}"
        );
    }
    // The absolute-URI refusal says why, in the body curl prints.
    let (_, output) = curl(&["--proxy", &proxy, &unlisted]);
    assert!(output.contains("not in the network allowlist"), "{output}");
}

#[test]
fn socks5_relays_named_tcp_only() {
    let setup = setup();
    // (request after the greeting, reply code)
    let origin = setup.origin.to_be_bytes();
    let mut named = vec![0x05, 0x01, 0x00, 0x03, 12];
    named.extend_from_slice(b"allowed.test");
    named.extend_from_slice(&origin);
    let mut address = vec![0x05, 0x01, 0x00, 0x01, 203, 0, 113, 1];
    address.extend_from_slice(&origin);
    let mut udp = vec![0x05, 0x03, 0x00, 0x03, 12];
    udp.extend_from_slice(b"allowed.test");
    udp.extend_from_slice(&origin);
    let mut unlisted = vec![0x05, 0x01, 0x00, 0x03, 13];
    unlisted.extend_from_slice(b"unlisted.test");
    unlisted.extend_from_slice(&origin);
    let table = [
        (named, 0x00),
        (address, 0x02),
        (udp, 0x07),
        (unlisted, 0x02),
    ];
    for (request, code) in table {
        let mut stream = StdTcpStream::connect(("127.0.0.1", setup.gateway)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream.write_all(&[0x05, 0x01, 0x00]).unwrap();
        let mut chosen = [0_u8; 2];
        stream.read_exact(&mut chosen).unwrap();
        assert_eq!(chosen, [0x05, 0x00]);
        stream.write_all(&request).unwrap();
        let mut reply = [0_u8; 10];
        stream.read_exact(&mut reply).unwrap();
        assert_eq!(reply[1], code, "{request:?}");
    }
    // A client offering only username/password is told no method is acceptable.
    let mut stream = StdTcpStream::connect(("127.0.0.1", setup.gateway)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(&[0x05, 0x01, 0x02]).unwrap();
    let mut chosen = [0_u8; 2];
    stream.read_exact(&mut chosen).unwrap();
    assert_eq!(chosen, [0x05, 0xff]);
}

/// A DNS question over UDP to the stub, and its answer.
fn ask(stub: SocketAddr, name: &str, kind: RecordType) -> Message {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut query = Message::query();
    query.add_query(Query::query(Name::from_ascii(name).unwrap(), kind));
    socket.send_to(&query.to_vec().unwrap(), stub).unwrap();
    let mut buffer = [0_u8; 4096];
    let (read, _) = socket.recv_from(&mut buffer).unwrap();
    Message::from_vec(&buffer[..read]).unwrap()
}

/// Tools that ignore proxy variables: the stub answers an allowed name with a stand-in
/// address, a connection to that address goes through the gateway to the name (with every
/// check a CONNECT gets), and an address the stub never gave out leads nowhere.
#[test]
fn names_from_the_dns_stub_lead_through_the_gateway_and_nothing_else_does() {
    let setup = setup();
    let runtime = &setup._runtime;
    let stub_socket = runtime
        .block_on(tokio::net::UdpSocket::bind("127.0.0.1:0"))
        .unwrap();
    let stub_address = stub_socket.local_addr().unwrap();
    let stub = DnsStub::new(setup.policy.clone(), Arc::clone(&setup.names));
    runtime.spawn(Arc::new(stub).serve(stub_socket));

    let answer = ask(stub_address, "allowed.test", RecordType::A);
    assert_eq!(answer.metadata.response_code, ResponseCode::NoError);
    let RData::A(A(stand_in)) = answer.answers[0].data else {
        panic!("{answer:?}");
    };
    let refused = ask(stub_address, "unlisted.test", RecordType::A);
    assert_eq!(refused.metadata.response_code, ResponseCode::Refused);
    assert!(refused.answers.is_empty());

    // The namespace's transparent listener on the stand-in address (any 127/8 address is
    // local here too), and one on an address nobody was given.
    let listen = |ip: Ipv4Addr| {
        let listener = runtime.block_on(TcpListener::bind((ip, 0))).unwrap();
        let port = listener.local_addr().unwrap().port();
        runtime.spawn(
            Arc::clone(&setup.gateway_handle).serve_transparent(listener, Arc::clone(&setup.names)),
        );
        port
    };
    let port = listen(stand_in);
    let mut stream = StdTcpStream::connect((stand_in, port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.contains("hello from allowed.test"), "{answer}");

    let stranger = Ipv4Addr::new(127, 77, 200, 1);
    let port = listen(stranger);
    let mut stream = StdTcpStream::connect((stranger, port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let _ = stream.write_all(b"GET / HTTP/1.1\r\n\r\n");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.is_empty(), "{answer}");
    let events = setup.events.lock().unwrap().clone();
    assert!(
        events.iter().any(|event| event.protocol == "transparent"
            && event.host == "allowed.test"
            && event.allowed),
        "{events:?}"
    );
    assert!(
        events.iter().any(|event| event.protocol == "transparent"
            && !event.allowed
            && event
                .reason
                .contains("not an address the DNS stub gave out")),
        "{events:?}"
    );
}

/// A command cannot exhaust the host process through the gateway: past the connection limit
/// one more is closed at once (and reported), and a tunnel that carries nothing is closed once
/// idle.
#[test]
fn connections_are_limited_and_idle_tunnels_closed() {
    let setup = setup_with(Some((2, Duration::from_secs(1))));
    let target = format!("allowed.test:{}", setup.origin);
    // Two tunnels held open before their first bytes.
    let held: Vec<_> = (0..2)
        .map(|_| {
            let (status, body, stream) = connect(setup.gateway, &target);
            assert_eq!(status, 200, "{body}");
            stream
        })
        .collect();
    let mut third = StdTcpStream::connect(("127.0.0.1", setup.gateway)).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let _ = write!(third, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    let mut answer = Vec::new();
    let _ = third.read_to_end(&mut answer);
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    let events = setup.events.lock().unwrap().clone();
    assert!(
        events.iter().any(|event| !event.allowed
            && event
                .reason
                .contains("2 connections through the gateway are open")),
        "{events:?}"
    );
    drop(held);

    // A tunnel whose server says nothing closes about a second after its last byte.
    std::thread::sleep(Duration::from_millis(300));
    let (status, _, mut stream) = connect(setup.gateway, &target);
    assert_eq!(status, 200);
    stream.write_all(b"HOLD").unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    let lasted = started.elapsed();
    assert!(
        lasted >= Duration::from_millis(900) && lasted < Duration::from_secs(20),
        "the idle tunnel lasted {lasted:?}"
    );
}
