//! The gateway: one listener speaking HTTP proxy (CONNECT and absolute-URI requests) and SOCKS5
//! (told apart by the first byte), every destination decided by the policy, resolved once here,
//! checked by address, dialled at the address that was checked, and every tunnel's TLS server
//! name compared with the name that was allowed.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::address;
use crate::dns::NameMap;
use crate::policy::EgressPolicy;
use crate::sni::{Hello, client_hello};

/// How long resolving a name, dialling an address or a client's first bytes may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// The most a client may send before its ClientHello is complete.
const MAX_HELLO_BYTES: usize = 16 * 1024;
/// The default number of client connections served at once: each holds descriptors and
/// memory of the host process, which a command must not be able to exhaust.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// The default time a tunnel may carry no byte either way before it is closed.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(300);

/// A future the gateway's pluggable parts return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Turns a name into addresses. The gateway resolves every name itself, once, and dials only
/// an address it checked.
pub trait Resolve: Send + Sync + 'static {
    /// The addresses of `host`.
    fn resolve<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>>;
}

/// The system's resolver.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let found = tokio::net::lookup_host((host, 0)).await?;
            Ok(found.map(|address| address.ip()).collect())
        })
    }
}

/// Opens a TCP connection to a checked address.
pub trait Connect: Send + Sync + 'static {
    /// A connection to `address`.
    fn connect(&self, address: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>>;
}

/// Dials the address itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectConnect;

impl Connect for DirectConnect {
    fn connect(&self, address: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>> {
        Box::pin(TcpStream::connect(address))
    }
}

/// One connection the gateway allowed or refused, with a reason a model can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressEvent {
    /// The name the client asked for (an address literal as written, when it asked for one).
    pub host: String,
    /// The port.
    pub port: u16,
    /// How it asked: `http-connect`, `http` (an absolute-URI request), `socks5` or
    /// `transparent` (a connection to a stand-in address of the DNS stub).
    pub protocol: &'static str,
    /// Whether the connection went through.
    pub allowed: bool,
    /// Which rule allowed it, or why it was refused.
    pub reason: String,
    /// The address dialled, when one was.
    pub address: Option<SocketAddr>,
}

/// Why a destination was not reached.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    /// The policy or the address check refused it.
    Refused(String),
    /// It could not be resolved or dialled.
    Unreachable(String),
}

impl Refusal {
    fn reason(&self) -> &str {
        match self {
            Refusal::Refused(reason) | Refusal::Unreachable(reason) => reason,
        }
    }
}

type Events = Arc<dyn Fn(&EgressEvent) + Send + Sync>;

/// A destination a client asked for.
struct Destination {
    host: String,
    port: u16,
    protocol: &'static str,
}

/// A connection to a checked address of an allowed destination.
struct Opened {
    upstream: TcpStream,
    target: SocketAddr,
    /// The rule that allowed it.
    allowed_by: String,
}

/// The gateway of one network policy.
pub struct Gateway {
    policy: EgressPolicy,
    resolver: Arc<dyn Resolve>,
    connector: Arc<dyn Connect>,
    own: Vec<IpAddr>,
    events: Events,
    connections: Arc<Semaphore>,
    max_connections: usize,
    idle: Duration,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Gateway")
            .field("policy", &self.policy)
            .field("own", &self.own)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway for `policy` with the system's resolver, direct connections, this machine's
    /// addresses refused, and no event sink.
    pub fn new(policy: EgressPolicy) -> Gateway {
        Gateway {
            policy,
            resolver: Arc::new(SystemResolver),
            connector: Arc::new(DirectConnect),
            own: address::own_addresses(),
            events: Arc::new(|_| {}),
            connections: Arc::new(Semaphore::new(DEFAULT_MAX_CONNECTIONS)),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle: DEFAULT_IDLE,
        }
    }

    /// Serves at most `max_connections` client connections at once (one more is closed at
    /// once and reported) and closes a tunnel that carried no byte for `idle`.
    pub fn with_limits(mut self, max_connections: usize, idle: Duration) -> Gateway {
        self.max_connections = max_connections.max(1);
        self.connections = Arc::new(Semaphore::new(self.max_connections));
        self.idle = idle;
        self
    }

    /// A slot for one more client connection, or `None` (reported) when all are taken.
    fn admit(&self, stream: &TcpStream, protocol: &'static str) -> Option<OwnedSemaphorePermit> {
        let permit = Arc::clone(&self.connections).try_acquire_owned().ok();
        if permit.is_none() {
            let local = stream.local_addr().ok();
            let to = Destination {
                host: local
                    .map(|address| address.ip().to_string())
                    .unwrap_or_default(),
                port: local.map_or(0, |address| address.port()),
                protocol,
            };
            let reason = format!(
                "{} connections through the gateway are open; this one was closed",
                self.max_connections
            );
            self.report(&to, Err(&reason), &reason);
        }
        permit
    }

    /// Resolves names with `resolver` instead of the system's.
    pub fn with_resolver(mut self, resolver: Arc<dyn Resolve>) -> Gateway {
        self.resolver = resolver;
        self
    }

    /// Opens connections with `connector` instead of dialling directly.
    pub fn with_connector(mut self, connector: Arc<dyn Connect>) -> Gateway {
        self.connector = connector;
        self
    }

    /// Reports every connection allowed or refused to `events`.
    pub fn with_events(mut self, events: impl Fn(&EgressEvent) + Send + Sync + 'static) -> Gateway {
        self.events = Arc::new(events);
        self
    }

    /// Serves every connection `listener` accepts until the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) -> io::Result<()> {
        loop {
            let (stream, _) = listener.accept().await?;
            let gateway = Arc::clone(&self);
            tokio::spawn(async move { gateway.handle(stream).await });
        }
    }

    /// Serves connections that `listener` accepts for stand-in addresses of the DNS stub
    /// ([`NameMap`]): each is for the name its address stands for, on the port it was made to,
    /// and goes through every check a CONNECT does (protocol `transparent`). A connection to an
    /// address the stub never gave out is closed and reported.
    pub async fn serve_transparent(
        self: Arc<Self>,
        listener: TcpListener,
        names: Arc<NameMap>,
    ) -> io::Result<()> {
        loop {
            let (stream, _) = listener.accept().await?;
            let Some(permit) = self.admit(&stream, "transparent") else {
                continue;
            };
            let gateway = Arc::clone(&self);
            let names = Arc::clone(&names);
            tokio::spawn(async move {
                gateway.transparent(stream, &names).await;
                drop(permit);
            });
        }
    }

    async fn transparent(&self, stream: TcpStream, names: &NameMap) {
        let Ok(local) = stream.local_addr() else {
            return;
        };
        let host = match local.ip() {
            IpAddr::V4(v4) => names.name_of(v4),
            IpAddr::V6(_) => None,
        };
        let Some(host) = host else {
            let to = Destination {
                host: local.ip().to_string(),
                port: local.port(),
                protocol: "transparent",
            };
            let reason = format!(
                "{} is not an address the DNS stub gave out: connections go to allowed names",
                local.ip()
            );
            self.report(&to, Err(&reason), &reason);
            return;
        };
        let _ = stream.set_nodelay(true);
        let to = Destination {
            host,
            port: local.port(),
            protocol: "transparent",
        };
        if let Ok(opened) = self.open(&to).await {
            self.tunnel(stream, opened, &to).await;
        }
    }

    /// Serves one client connection: SOCKS5 when its first byte is 5, HTTP otherwise. It
    /// counts against the connection limit until it and every tunnel it opened have ended.
    pub async fn handle(self: Arc<Self>, stream: TcpStream) {
        let Some(permit) = self.admit(&stream, "proxy") else {
            return;
        };
        let _ = stream.set_nodelay(true);
        let mut first = [0_u8; 1];
        match tokio::time::timeout(STEP_TIMEOUT, stream.peek(&mut first)).await {
            Ok(Ok(1)) if first[0] == 0x05 => self.socks5(stream).await,
            Ok(Ok(1)) => self.http(stream, Arc::new(permit)).await,
            _ => {}
        }
    }

    fn report(&self, to: &Destination, outcome: Result<SocketAddr, &str>, reason: &str) {
        let event = EgressEvent {
            host: to.host.clone(),
            port: to.port,
            protocol: to.protocol,
            allowed: outcome.is_ok(),
            reason: reason.to_owned(),
            address: outcome.ok(),
        };
        tracing::debug!(?event, "egress");
        (self.events)(&event);
    }

    /// Decides, resolves, checks and dials `host:port`; reports a refusal (an allowed
    /// connection is reported by the caller once its first bytes pass).
    async fn open(&self, to: &Destination) -> Result<Opened, Refusal> {
        let (host, port) = (to.host.as_str(), to.port);
        let refuse = |refusal: Refusal| {
            self.report(to, Err(refusal.reason()), refusal.reason());
            refusal
        };
        let decision = self.policy.decide(host, port);
        if !decision.allowed {
            return Err(refuse(Refusal::Refused(decision.reason)));
        }
        let addresses = match tokio::time::timeout(STEP_TIMEOUT, self.resolver.resolve(host)).await
        {
            Ok(Ok(addresses)) if !addresses.is_empty() => addresses,
            Ok(Ok(_)) => {
                return Err(refuse(Refusal::Unreachable(format!(
                    "{host} has no address"
                ))));
            }
            Ok(Err(error)) => {
                return Err(refuse(Refusal::Unreachable(format!(
                    "{host} does not resolve: {error}"
                ))));
            }
            Err(_) => {
                return Err(refuse(Refusal::Unreachable(format!(
                    "resolving {host} timed out"
                ))));
            }
        };
        let mut last = None;
        for ip in &addresses {
            if let Some(why) = address::refused(*ip, &self.own, self.policy.allow_private) {
                last = Some(Refusal::Refused(format!(
                    "{host} resolves to {ip}, which is refused: {why}"
                )));
                continue;
            }
            let target = SocketAddr::new(*ip, port);
            match tokio::time::timeout(STEP_TIMEOUT, self.connector.connect(target)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(Opened {
                        upstream: stream,
                        target,
                        allowed_by: decision.reason,
                    });
                }
                Ok(Err(error)) => {
                    last = Some(Refusal::Unreachable(format!(
                        "connecting to {host} ({target}) failed: {error}"
                    )));
                }
                Err(_) => {
                    last = Some(Refusal::Unreachable(format!(
                        "connecting to {host} ({target}) timed out"
                    )));
                }
            }
        }
        Err(refuse(last.unwrap_or_else(|| {
            Refusal::Unreachable(format!("{host} has no address"))
        })))
    }

    /// Relays between `client` and `upstream` once the client's first bytes pass: a TLS
    /// ClientHello must name `host`. The server's bytes flow from the start (SSH speaks first).
    async fn tunnel<C>(&self, client: C, opened: Opened, to: &Destination)
    where
        C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let host = to.host.as_str();
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let (mut upstream_read, mut upstream_write) = opened.upstream.into_split();
        let activity = Arc::new(Activity::new());
        let seen = Arc::clone(&activity);
        let mut down = tokio::spawn(async move {
            let _ = relay(&mut upstream_read, &mut client_write, &seen).await;
            let _ = client_write.shutdown().await;
        });
        let mut first = Vec::new();
        let verdict = loop {
            let mut buffer = [0_u8; 4096];
            let read = match tokio::time::timeout(STEP_TIMEOUT, client_read.read(&mut buffer)).await
            {
                Ok(Ok(read)) => read,
                Ok(Err(_)) | Err(_) => {
                    break Err("the client sent nothing it could be checked by".to_owned());
                }
            };
            if read == 0 {
                break Err("the client closed before sending anything".to_owned());
            }
            first.extend_from_slice(&buffer[..read]);
            match client_hello(&first) {
                Hello::NotTls => break Ok(()),
                Hello::Tls(Some(name))
                    if name == host.trim_end_matches('.').to_ascii_lowercase() =>
                {
                    break Ok(());
                }
                Hello::Tls(Some(name)) => {
                    break Err(format!(
                        "the TLS handshake names {name}, not {host} (one name per tunnel: no fronting)"
                    ));
                }
                Hello::Tls(None) => {
                    break Err(format!(
                        "the TLS handshake names no server, so it cannot be checked against {host}"
                    ));
                }
                Hello::Malformed(error) => {
                    break Err(format!("the TLS handshake does not parse: {error}"));
                }
                Hello::Incomplete if first.len() > MAX_HELLO_BYTES => {
                    break Err("the TLS ClientHello is over 16 KiB".to_owned());
                }
                Hello::Incomplete => {}
            }
        };
        match verdict {
            Ok(()) => {
                self.report(to, Ok(opened.target), &opened.allowed_by);
                activity.touch();
                let carried = async {
                    if upstream_write.write_all(&first).await.is_ok() {
                        let _ = relay(&mut client_read, &mut upstream_write, &activity).await;
                    }
                    let _ = upstream_write.shutdown().await;
                };
                tokio::select! {
                    _ = async { tokio::join!(carried, &mut down) } => {}
                    () = activity.idle_for(self.idle) => {
                        tracing::debug!(host, "an idle tunnel was closed");
                    }
                }
                down.abort();
            }
            Err(reason) => {
                self.report(to, Err(&reason), &reason);
                down.abort();
            }
        }
    }

    async fn http(self: Arc<Self>, stream: TcpStream, permit: Arc<OwnedSemaphorePermit>) {
        let gateway = Arc::clone(&self);
        let service = hyper::service::service_fn(move |request| {
            let gateway = Arc::clone(&gateway);
            let permit = Arc::clone(&permit);
            async move { Ok::<_, Infallible>(gateway.http_request(request, permit).await) }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades()
            .await;
    }

    async fn http_request(
        self: Arc<Self>,
        request: Request<Incoming>,
        permit: Arc<OwnedSemaphorePermit>,
    ) -> Response<BoxBody<Bytes, hyper::Error>> {
        if request.method() == Method::CONNECT {
            return self.connect(request, permit).await;
        }
        let uri = request.uri().clone();
        match (uri.scheme_str(), uri.host()) {
            (Some("http"), Some(host)) => {
                let host = host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned();
                self.forward(request, &host, uri.port_u16().unwrap_or(80))
                    .await
            }
            (Some(_), Some(_)) => answer(
                StatusCode::BAD_REQUEST,
                "only http:// URIs are forwarded; https goes through CONNECT",
            ),
            _ => answer(
                StatusCode::BAD_REQUEST,
                "this is a proxy: send CONNECT host:port, or a request with an absolute http:// URI",
            ),
        }
    }

    async fn connect(
        self: Arc<Self>,
        request: Request<Incoming>,
        permit: Arc<OwnedSemaphorePermit>,
    ) -> Response<BoxBody<Bytes, hyper::Error>> {
        let Some(authority) = request.uri().authority().cloned() else {
            return answer(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
        };
        let Some(port) = authority.port_u16() else {
            return answer(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
        };
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let to = Destination {
            host,
            port,
            protocol: "http-connect",
        };
        let opened = match self.open(&to).await {
            Ok(opened) => opened,
            Err(refusal) => return refused(&refusal),
        };
        // The tunnel outlives the HTTP connection it was asked on, and holds its slot.
        tokio::spawn(async move {
            if let Ok(upgraded) = hyper::upgrade::on(request).await {
                self.tunnel(TokioIo::new(upgraded), opened, &to).await;
            }
            drop(permit);
        });
        Response::new(empty())
    }

    async fn forward(
        &self,
        mut request: Request<Incoming>,
        host: &str,
        port: u16,
    ) -> Response<BoxBody<Bytes, hyper::Error>> {
        let to = Destination {
            host: host.to_owned(),
            port,
            protocol: "http",
        };
        let opened = match self.open(&to).await {
            Ok(opened) => opened,
            Err(refusal) => return refused(&refusal),
        };
        self.report(&to, Ok(opened.target), &opened.allowed_by);
        let Ok((mut sender, connection)) =
            hyper::client::conn::http1::handshake(TokioIo::new(opened.upstream)).await
        else {
            return answer(
                StatusCode::BAD_GATEWAY,
                &format!("{host} did not speak HTTP"),
            );
        };
        tokio::spawn(connection);
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |path| path.as_str())
            .to_owned();
        if let Ok(uri) = path.parse() {
            *request.uri_mut() = uri;
        }
        let headers = request.headers_mut();
        for hop in [
            "proxy-connection",
            "proxy-authorization",
            "connection",
            "keep-alive",
        ] {
            headers.remove(hop);
        }
        let authority = if port == 80 {
            host.to_owned()
        } else {
            format!("{host}:{port}")
        };
        if let Ok(value) = authority.parse() {
            headers.insert(hyper::header::HOST, value);
        }
        match sender.send_request(request).await {
            Ok(response) => response.map(BodyExt::boxed),
            Err(error) => answer(StatusCode::BAD_GATEWAY, &format!("{host}: {error}")),
        }
    }

    async fn socks5(self: Arc<Self>, mut stream: TcpStream) {
        // Greeting: version, methods; only "no authentication" is offered.
        let mut head = [0_u8; 2];
        if stream.read_exact(&mut head).await.is_err() {
            return;
        }
        let mut methods = vec![0_u8; usize::from(head[1])];
        if stream.read_exact(&mut methods).await.is_err() {
            return;
        }
        if !methods.contains(&0x00) {
            let _ = stream.write_all(&[0x05, 0xff]).await;
            return;
        }
        if stream.write_all(&[0x05, 0x00]).await.is_err() {
            return;
        }
        let mut request = [0_u8; 4];
        if stream.read_exact(&mut request).await.is_err() {
            return;
        }
        let [_, command, _, kind] = request;
        let host = match kind {
            0x03 => {
                let mut length = [0_u8; 1];
                if stream.read_exact(&mut length).await.is_err() {
                    return;
                }
                let mut name = vec![0_u8; usize::from(length[0])];
                if stream.read_exact(&mut name).await.is_err() {
                    return;
                }
                String::from_utf8_lossy(&name).into_owned()
            }
            0x01 => {
                let mut octets = [0_u8; 4];
                if stream.read_exact(&mut octets).await.is_err() {
                    return;
                }
                std::net::Ipv4Addr::from(octets).to_string()
            }
            0x04 => {
                let mut octets = [0_u8; 16];
                if stream.read_exact(&mut octets).await.is_err() {
                    return;
                }
                std::net::Ipv6Addr::from(octets).to_string()
            }
            _ => {
                let _ = stream.write_all(&socks_reply(0x08)).await;
                return;
            }
        };
        let mut port = [0_u8; 2];
        if stream.read_exact(&mut port).await.is_err() {
            return;
        }
        let to = Destination {
            host,
            port: u16::from_be_bytes(port),
            protocol: "socks5",
        };
        if command != 0x01 {
            let reason = "only CONNECT is relayed (no UDP, no BIND)";
            self.report(&to, Err(reason), reason);
            let _ = stream.write_all(&socks_reply(0x07)).await;
            return;
        }
        match self.open(&to).await {
            Ok(opened) => {
                if stream.write_all(&socks_reply(0x00)).await.is_ok() {
                    self.tunnel(stream, opened, &to).await;
                }
            }
            Err(Refusal::Refused(_)) => {
                let _ = stream.write_all(&socks_reply(0x02)).await;
            }
            Err(Refusal::Unreachable(_)) => {
                let _ = stream.write_all(&socks_reply(0x04)).await;
            }
        }
    }
}

/// When a tunnel last carried a byte.
struct Activity(std::sync::Mutex<tokio::time::Instant>);

impl Activity {
    fn new() -> Activity {
        Activity(std::sync::Mutex::new(tokio::time::Instant::now()))
    }

    fn touch(&self) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = tokio::time::Instant::now();
    }

    fn last(&self) -> tokio::time::Instant {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Ends once `idle` has passed without a byte.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let deadline = self.last() + idle;
            if tokio::time::Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// Copies `from` to `to` until `from` ends, noting each chunk in `activity`.
async fn relay(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    activity: &Activity,
) -> io::Result<()> {
    let mut buffer = vec![0_u8; 16 * 1024];
    loop {
        let read = from.read(&mut buffer).await?;
        if read == 0 {
            return Ok(());
        }
        activity.touch();
        to.write_all(&buffer[..read]).await?;
    }
}

/// A SOCKS5 reply with `code` and an unspecified bound address.
fn socks_reply(code: u8) -> [u8; 10] {
    [0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0]
}

fn empty() -> BoxBody<Bytes, hyper::Error> {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

/// A plain-text answer of the gateway itself.
fn answer(status: StatusCode, message: &str) -> Response<BoxBody<Bytes, hyper::Error>> {
    let body = Full::new(Bytes::from(format!("clawsmith egress: {message}\n")))
        .map_err(|never| match never {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    // The gateway's own answers end the client's connection: a refused client has nothing
    // more to ask on it.
    response.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    response
}

fn refused(refusal: &Refusal) -> Response<BoxBody<Bytes, hyper::Error>> {
    match refusal {
        Refusal::Refused(reason) => answer(StatusCode::FORBIDDEN, reason),
        Refusal::Unreachable(reason) => answer(StatusCode::BAD_GATEWAY, reason),
    }
}
