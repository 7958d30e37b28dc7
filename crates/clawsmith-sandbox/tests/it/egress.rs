//! An allowlisted network end to end: a command in the sandbox reaches an allowed name through
//! clawsmith's gateway — curl through the proxy variables and SOCKS5, git over HTTP, Python
//! with proxies turned off and Node's `fetch` through the DNS stub and a transparent listener
//! — and nothing else (the attack rows: unlisted names, address literals, the host's
//! services, UDP, raw sockets). Each connection decided is an event of the command's outcome.
//! The allowed name resolves (for the gateway) to a documentation address, dialled as an
//! origin on the host's 127.0.0.1. The table runs as the test's user and again as uid 65534;
//! a gateway that cannot start leaves the command without network, and says so.

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

/// An HTTP origin on the host's 127.0.0.1: the files under `root` by path (a bare repository
/// there is served the way git's "dumb" HTTP transport reads it), one line for any other path.
fn origin(root: Option<std::path::PathBuf>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else {
                return;
            };
            let root = root.clone();
            std::thread::spawn(move || {
                let mut request = [0_u8; 4096];
                let read = stream.read(&mut request).unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..read]).into_owned();
                let path = request
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("/")
                    .split('?')
                    .next()
                    .unwrap_or("/")
                    .to_owned();
                let file = root.as_ref().and_then(|root| {
                    (!path.contains(".."))
                        .then(|| std::fs::read(root.join(path.trim_start_matches('/'))).ok())
                        .flatten()
                });
                let (status, body) = match file {
                    Some(bytes) => ("200 OK", bytes),
                    None if path.starts_with("/repo.git/") => {
                        ("404 Not Found", b"no such file\n".to_vec())
                    }
                    None => ("200 OK", b"hello from allowed.test\n".to_vec()),
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(&body);
            });
        }
    });
    port
}

/// The allowlist of `allowed.test:PORT` for each of `ports`, through [`Table`] to origins on
/// the host.
fn allowlist(ports: &[u16]) -> Egress {
    let rules: Vec<String> = ports
        .iter()
        .map(|port| format!("allowed.test:{port}"))
        .collect();
    let policy = EgressPolicy::parse(&rules, &[] as &[&str]).unwrap();
    Egress::new(policy).through(
        Arc::new(Table),
        Arc::new(ToOrigin(HashMap::from([(
            PUBLIC.parse().unwrap(),
            ports[0],
        )]))),
    )
}

/// A bare repository with one commit under `root/repo.git`, ready for the dumb HTTP transport.
#[allow(clippy::disallowed_methods)]
fn served_repository(root: &std::path::Path) {
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("README"), "served over the allowlist\n").unwrap();
    let git = |dir: &std::path::Path, args: &[&str]| {
        let status = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}: {status:?}");
    };
    git(&work, &["init", "-q"]);
    git(&work, &["add", "README"]);
    git(&work, &["commit", "-q", "-m", "one"]);
    git(root, &["clone", "-q", "--bare", "work", "repo.git"]);
    git(&root.join("repo.git"), &["update-server-info"]);
}

/// What a row expects of the command's network events: none, or some whose host, verdict and
/// protocol are these (and none with the other verdict).
type Expected = Option<(&'static str, bool, &'static str)>;

#[tokio::test]
async fn an_allowlisted_command_reaches_allowed_names_and_nothing_else() {
    if !landlock_or_skip("an_allowlisted_command_reaches_allowed_names_and_nothing_else") {
        return;
    }
    let has = |program: &str| std::path::Path::new(program).exists();
    if !has("/usr/bin/curl") || !has("/usr/bin/python3") || !has("/usr/bin/git") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have curl, python3 and git"
        );
        eprintln!("SKIP: needs /usr/bin/curl, /usr/bin/python3 and /usr/bin/git");
        return;
    }
    let fixture = Fixture::new();
    let served = fixture.dir.path().join("served");
    served_repository(&served);
    let port = origin(Some(served));
    // A service of the host's on its loopback, which no rule names.
    let host_service = origin(None);
    let mut config = fixture.config();
    config.egress = Some(allowlist(&[port]));
    let python = |code: &str| format!("python3 -c \"{code}\"");
    let python_get = |url: &str| {
        python(&format!(
            "import urllib.request as u; \
             u.install_opener(u.build_opener(u.ProxyHandler({{}}))); \
             print(u.urlopen('{url}', timeout=10).read().decode(), end='')"
        ))
    };
    let curl = "curl -sS --max-time 20";
    let hello = "hello from allowed.test";
    // (command, exit 0, what the output contains, the events)
    let mut table: Vec<(String, bool, &str, Expected)> = vec![
        (
            format!("{curl} http://allowed.test:{port}/"),
            true,
            hello,
            Some(("allowed.test", true, "http")),
        ),
        (
            format!("{curl} http://unlisted.test:{port}/"),
            true,
            "not in the network allowlist",
            Some(("unlisted.test", false, "http")),
        ),
        (
            format!("{curl} -p http://allowed.test:{}/", port + 1),
            false,
            "403",
            Some(("allowed.test", false, "http-connect")),
        ),
        // Address literals, through the proxy and around it.
        (
            format!("{curl} --noproxy '' http://2130706433:{port}/"),
            true,
            "is an address, not a name",
            Some(("127.0.0.1", false, "http")),
        ),
        (
            format!("{curl} -p 'http://[::ffff:127.0.0.1]:{port}/'"),
            false,
            "403",
            Some(("::ffff:127.0.0.1", false, "http-connect")),
        ),
        (
            format!("{curl} --noproxy '*' http://{PUBLIC}:{port}/"),
            false,
            "",
            None,
        ),
        // The namespace's loopback is its own: the gateway's listener answers there, and the
        // host's services are out of reach.
        (
            format!("{curl} --noproxy '*' http://127.0.0.1:{port}/"),
            false,
            "",
            Some(("127.0.0.1", false, "transparent")),
        ),
        (
            format!("{curl} --noproxy '*' http://127.0.0.1:{host_service}/"),
            false,
            "",
            None,
        ),
        // SOCKS5 for TCP that is not HTTP: by name only.
        (
            format!("{curl} --socks5-hostname 127.0.0.1:3128 http://allowed.test:{port}/"),
            true,
            hello,
            Some(("allowed.test", true, "socks5")),
        ),
        (
            format!("{curl} --socks5 127.0.0.1:3128 http://{PUBLIC}:{port}/"),
            false,
            "",
            Some((PUBLIC, false, "socks5")),
        ),
        // Tools that ignore the proxy: the DNS stub and a transparent listener.
        (
            python_get(&format!("http://allowed.test:{port}/")),
            true,
            hello,
            Some(("allowed.test", true, "transparent")),
        ),
        (
            python("import socket; socket.getaddrinfo('c2VjcmV0.unlisted.test', 80)"),
            false,
            "gaierror",
            Some(("c2vjcmv0.unlisted.test", false, "dns")),
        ),
        // UDP (QUIC) and raw sockets have no way out.
        (
            python(&format!(
                "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
                 s.sendto(b'quic', ('{PUBLIC}', 443))"
            )),
            false,
            "Network is unreachable",
            None,
        ),
        (
            python(
                "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)",
            ),
            false,
            "Operation not permitted",
            None,
        ),
        (
            "echo $HTTPS_PROXY $ALL_PROXY".to_owned(),
            true,
            "http://127.0.0.1:3128 socks5h://127.0.0.1:3128",
            None,
        ),
        // git over HTTP, through the proxy variables.
        (
            format!(
                "GIT_TERMINAL_PROMPT=0 git clone -q http://allowed.test:{port}/repo.git clone \
                 && cat clone/README"
            ),
            true,
            "served over the allowlist",
            Some(("allowed.test", true, "http")),
        ),
    ];
    // Node's fetch ignores the proxy variables: it goes through the DNS stub and a
    // transparent listener.
    if has("/usr/bin/node") {
        table.push((
            format!(
                "/usr/bin/node -e \"fetch('http://allowed.test:{port}/')\
                 .then(r => r.text()).then(t => process.stdout.write(t))\""
            ),
            true,
            hello,
            Some(("allowed.test", true, "transparent")),
        ));
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have /usr/bin/node"
        );
        eprintln!("SKIP the Node fetch row: no /usr/bin/node");
    }
    for (index, (command, succeeds, contains, expected)) in table.iter().enumerate() {
        let outcome = run_command(
            &config,
            &CommandRequest::new(command.as_str()),
            &CancellationSignal::new(),
        )
        .await
        .unwrap();
        let events: Vec<String> = outcome.network.iter().map(ToString::to_string).collect();
        assert_eq!(
            outcome.exit == ExitKind::Code(0),
            *succeeds,
            "{command}: {:?} {} {events:?}",
            outcome.exit,
            outcome.output
        );
        assert!(
            outcome.output.contains(contains),
            "{command}: {} {events:?}",
            outcome.output
        );
        match expected {
            None => assert!(events.is_empty(), "{command}: {events:?}"),
            Some((host, allowed, protocol)) => {
                assert!(
                    outcome.network.iter().any(|event| event.host == *host
                        && event.allowed == *allowed
                        && event.protocol == *protocol),
                    "{command}: {events:?}"
                );
                assert!(
                    outcome
                        .network
                        .iter()
                        .all(|event| event.allowed == *allowed),
                    "{command}: {events:?}"
                );
            }
        }
        assert!(!outcome.network_shared, "{command}");
        if index == 0 {
            assert!(
                outcome.sandbox.network.starts_with("allowlist"),
                "{:?}",
                outcome.sandbox
            );
        }
    }
    println!(
        "egress rows ran: {} as uid {}",
        table.len(),
        nix::unistd::geteuid()
    );
    let Some(stdout) = crate::rerun_unprivileged(
        "egress::an_allowlisted_command_reaches_allowed_names_and_nothing_else",
        &[],
    ) else {
        return;
    };
    assert!(
        stdout.contains(&format!("egress rows ran: {} as uid 65534", table.len())),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_gateway_that_cannot_start_leaves_the_command_without_network_and_says_why() {
    if !landlock_or_skip(
        "a_gateway_that_cannot_start_leaves_the_command_without_network_and_says_why",
    ) {
        return;
    }
    if !std::path::Path::new("/usr/bin/curl").exists() {
        assert!(std::env::var_os("CI").is_none(), "CI must have curl");
        eprintln!("SKIP: needs /usr/bin/curl");
        return;
    }
    let port = origin(None);
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.egress = Some(allowlist(&[port]).with_unopenable_exit());
    for _ in 0..2 {
        let outcome = run_command(
            &config,
            &CommandRequest::new(format!(
                "curl -sS --max-time 5 http://allowed.test:{port}/; \
                 curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:{port}/"
            )),
            &CancellationSignal::new(),
        )
        .await
        .unwrap();
        assert_ne!(outcome.exit, ExitKind::Code(0), "{}", outcome.output);
        assert!(!outcome.output.contains("hello"), "{}", outcome.output);
        assert!(
            outcome
                .sandbox
                .network
                .starts_with("blocked (the network allowlist's gateway did not start"),
            "{}",
            outcome.sandbox.network
        );
        assert!(
            outcome
                .sandbox
                .network
                .contains("could not open the namespace's exits")
                && outcome.sandbox.network.contains("in use"),
            "{}",
            outcome.sandbox.network
        );
        assert!(outcome.network.is_empty(), "{:?}", outcome.network);
    }
}
