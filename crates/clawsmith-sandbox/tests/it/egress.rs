//! An allowlisted network end to end: a command in the sandbox reaches an allowed name through
//! clawsmith's gateway — curl through the proxy variables, Python with proxies turned off
//! through the DNS stub and a transparent listener — and nothing else. The allowed name
//! resolves (for the gateway) to a documentation address, dialled as an origin on the host's
//! 127.0.0.1.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use clawsmith_egress::{BoxFuture, Connect, EgressPolicy, Resolve};
use clawsmith_protocol::CancellationSignal;
use clawsmith_sandbox::{CommandRequest, Egress, ExitKind, run_command};

use crate::{Fixture, landlock_or_skip};

const PUBLIC: &str = "203.0.113.7";

struct Table;

impl Resolve for Table {
    fn resolve<'a>(&'a self, host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        let found = (host == "allowed.test").then(|| vec![PUBLIC.parse().unwrap()]);
        Box::pin(async move {
            found.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such name"))
        })
    }
}

/// Dials the origin on the host's 127.0.0.1 for the public address, and nothing else.
struct ToOrigin(HashMap<IpAddr, u16>);

impl Connect for ToOrigin {
    fn connect(
        &self,
        address: SocketAddr,
    ) -> BoxFuture<'_, std::io::Result<tokio::net::TcpStream>> {
        let port = self.0.get(&address.ip()).copied();
        Box::pin(async move {
            let port = port.unwrap_or_else(|| panic!("the gateway dialled {address}"));
            tokio::net::TcpStream::connect(("127.0.0.1", port)).await
        })
    }
}

/// An HTTP origin on the host's 127.0.0.1 answering every request with one line.
fn origin() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else {
                return;
            };
            std::thread::spawn(move || {
                let mut request = [0_u8; 4096];
                let _ = stream.read(&mut request);
                let body = "hello from allowed.test\n";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

#[tokio::test]
async fn an_allowlisted_command_reaches_allowed_names_and_nothing_else() {
    if !landlock_or_skip("an_allowlisted_command_reaches_allowed_names_and_nothing_else") {
        return;
    }
    let has = |program: &str| std::path::Path::new(program).exists();
    if !has("/usr/bin/curl") || !has("/usr/bin/python3") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have curl and python3"
        );
        eprintln!("SKIP: needs /usr/bin/curl and /usr/bin/python3");
        return;
    }
    let port = origin();
    let policy = EgressPolicy::parse(&[format!("allowed.test:{port}")], &[] as &[&str]).unwrap();
    let egress = Egress::new(policy).through(
        Arc::new(Table),
        Arc::new(ToOrigin(HashMap::from([(PUBLIC.parse().unwrap(), port)]))),
    );
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.egress = Some(egress);
    let python_get = |url: &str| {
        format!(
            "python3 -c \"import urllib.request as u; \
             u.install_opener(u.build_opener(u.ProxyHandler({{}}))); \
             print(u.urlopen('{url}', timeout=10).read().decode(), end='')\""
        )
    };
    // (command, exit 0, what the output contains)
    let table = [
        (
            format!("curl -sS --max-time 20 http://allowed.test:{port}/"),
            true,
            "hello from allowed.test".to_owned(),
        ),
        (
            format!("curl -sS --max-time 20 http://unlisted.test:{port}/"),
            true,
            "not in the network allowlist".to_owned(),
        ),
        (
            format!("curl -sS --max-time 20 --noproxy '*' http://{PUBLIC}:{port}/"),
            false,
            String::new(),
        ),
        (
            format!("curl -sS --max-time 20 --noproxy '*' http://127.0.0.1:{port}/"),
            false,
            String::new(),
        ),
        (
            python_get(&format!("http://allowed.test:{port}/")),
            true,
            "hello from allowed.test".to_owned(),
        ),
        (
            "python3 -c \"import socket; socket.getaddrinfo('unlisted.test', 80)\"".to_owned(),
            false,
            "gaierror".to_owned(),
        ),
        (
            "echo $HTTPS_PROXY $ALL_PROXY".to_owned(),
            true,
            "http://127.0.0.1:3128 socks5h://127.0.0.1:3128".to_owned(),
        ),
    ];
    // Node's fetch ignores the proxy variables: it goes through the DNS stub and a
    // transparent listener.
    let mut table = table.to_vec();
    if has("/usr/bin/node") {
        table.push((
            format!(
                "/usr/bin/node -e \"fetch('http://allowed.test:{port}/')\
                 .then(r => r.text()).then(t => process.stdout.write(t))\""
            ),
            true,
            "hello from allowed.test".to_owned(),
        ));
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have /usr/bin/node"
        );
        eprintln!("SKIP the Node fetch row: no /usr/bin/node");
    }
    for (index, (command, succeeds, contains)) in table.iter().enumerate() {
        let outcome = run_command(
            &config,
            &CommandRequest::new(command.as_str()),
            &CancellationSignal::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            outcome.exit == ExitKind::Code(0),
            *succeeds,
            "{command}: {:?} {}",
            outcome.exit,
            outcome.output
        );
        assert!(
            outcome.output.contains(contains.as_str()),
            "{command}: {}",
            outcome.output
        );
        if index == 0 {
            assert!(
                outcome.sandbox.network.starts_with("allowlist"),
                "{:?}",
                outcome.sandbox
            );
        }
    }
}
