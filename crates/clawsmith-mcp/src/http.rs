//! `clawsmith mcp --http`: the same guarded table over MCP's Streamable HTTP transport.
//!
//! rmcp's `StreamableHttpService` speaks the transport (POST of JSON-RPC messages answered as
//! JSON or an event stream, GET for the server's stream, `Mcp-Session-Id`, the stateless
//! 2026-07-28 revision); every request passes this module's guard first:
//! - **Host.** Bound to a loopback address, the `Host` must name that address or `localhost`
//!   with the bound port, so a page whose name a rebinding DNS points at 127.0.0.1 is refused
//!   (`421 host_refused`) before anything reads its body.
//! - **Origin.** A request that carries an `Origin` (a browser's) is refused unless that origin
//!   is allowlisted (`403 origin_refused`); clients that are not browsers send none.
//! - **Bearer token.** `Authorization: Bearer <token>`, compared in constant time; anything
//!   else is `401 unauthorized` with `WWW-Authenticate: Bearer`, whose `resource_metadata`
//!   names the server's OAuth protected-resource metadata (RFC 9728, which MCP's authorization
//!   asks a server to publish): `GET /.well-known/oauth-protected-resource[/mcp]`, the one path
//!   served without the token, says which resource this is and that the token goes in the
//!   header. It lists no authorization server: the token is the one the server was started
//!   with, not one an authorization server issues. There is no unauthenticated mode.
//! - **Size.** A body over the cap is `413 body_too_large` when its `Content-Length` says so,
//!   and refused by rmcp while it is read otherwise.
//! - **Concurrency.** At most [`HttpOptions::max_concurrent_requests`] requests are served at
//!   once, each counted until its whole answer (an event stream included) has been sent; one
//!   more is `503 busy` at once rather than queued, so a flood cannot hold memory.
//! - **Server streams.** A `GET` opens the stream on which the server may send what no request
//!   asked for. At most [`HttpOptions::max_streams`] are open at once, counted apart from the
//!   requests (open streams cannot starve calls; one more is `503 busy`), and a stream that goes
//!   [`HttpOptions::stream_idle`] without an event is closed (the keep-alive comments do not
//!   count); a client that still wants one opens another.
//!
//! **One session per server.** Every MCP client of one `clawsmith mcp --http` shares its
//! clawsmith session (the one named with `--session`, or a new one): each `tools/call` is a
//! turn of it, turns run one at a time whoever sent them, and `clawsmith undo` sees them in one
//! history, as with a stdio server. The stateless revision has no connection to hang a session
//! on, and a session per legacy `Mcp-Session-Id` would leave the agents behind one endpoint
//! with histories that undo could not order.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use clawsmith_core::AgentCore;
use clawsmith_core::fs::secret::constant_time_eq;
use futures_util::StreamExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::McpError;
use crate::server::{ClawsmithServer, ServerOptions};

/// The path the transport is served at.
pub const MCP_PATH: &str = "/mcp";

/// Where the OAuth protected-resource metadata is served (RFC 9728), also with the resource's
/// path appended (`…/mcp`), as clients derive it from the endpoint's URL.
pub const PROTECTED_RESOURCE_PATH: &str = "/.well-known/oauth-protected-resource";

/// The default cap on a request body: the stdio server's line cap.
pub const DEFAULT_MAX_BODY_BYTES: usize = crate::MAX_REQUEST_LINE_BYTES;

/// The default number of requests served at once: the stdio server's unanswered requests.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = crate::MAX_UNANSWERED_REQUESTS;

/// The default number of server streams (`GET`) open at once.
pub const DEFAULT_MAX_STREAMS: usize = 4;

/// The default time a server stream may go without an event before it is closed.
pub const DEFAULT_STREAM_IDLE: Duration = Duration::from_secs(300);

/// How an HTTP server admits requests.
#[derive(Clone)]
pub struct HttpOptions {
    /// The bearer token every request must carry.
    pub token: String,
    /// Browser origins allowed to call (`http://localhost:3000`); empty refuses every request
    /// that carries an `Origin`.
    pub allowed_origins: Vec<String>,
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Requests served at once; one more is refused with `503 busy`.
    pub max_concurrent_requests: usize,
    /// Server streams (`GET`) open at once, apart from the requests; one more is refused with
    /// `503 busy`.
    pub max_streams: usize,
    /// How long a server stream may go without an event (keep-alive comments do not count)
    /// before it is closed.
    pub stream_idle: Duration,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HttpOptions")
            .field("token", &"<hidden>")
            .field("allowed_origins", &self.allowed_origins)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_concurrent_requests", &self.max_concurrent_requests)
            .field("max_streams", &self.max_streams)
            .field("stream_idle", &self.stream_idle)
            .finish()
    }
}

impl HttpOptions {
    /// The defaults with `token`.
    pub fn new(token: impl Into<String>) -> HttpOptions {
        HttpOptions {
            token: token.into(),
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
            max_streams: DEFAULT_MAX_STREAMS,
            stream_idle: DEFAULT_STREAM_IDLE,
        }
    }
}

/// A bound MCP HTTP server; [`HttpServer::serve_until`] runs it.
pub struct HttpServer {
    listener: tokio::net::TcpListener,
    address: SocketAddr,
    router: Router,
    stop: tokio_util::sync::CancellationToken,
    session_id: String,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HttpServer")
            .field("address", &self.address)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

/// What the guard needs to know.
struct Admission {
    options: HttpOptions,
    /// `Host` values a loopback server answers to; `None` when bound elsewhere.
    hosts: Option<Vec<String>>,
    slots: Arc<Semaphore>,
    streams: Arc<Semaphore>,
}

impl HttpServer {
    /// Binds `address` (port 0 picks one) and opens the server's session.
    pub async fn bind(
        address: SocketAddr,
        core: Arc<AgentCore>,
        options: ServerOptions,
        http: HttpOptions,
    ) -> Result<HttpServer, McpError> {
        if http.token.is_empty() {
            return Err(McpError::Serve(
                "the HTTP server needs a bearer token".into(),
            ));
        }
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|error| McpError::Serve(format!("cannot listen on {address}: {error}")))?;
        let address = listener
            .local_addr()
            .map_err(|error| McpError::Serve(format!("cannot read the bound address: {error}")))?;
        let server = ClawsmithServer::new(core, options)?;
        let session_id = server.session_id().to_owned();
        let stop = tokio_util::sync::CancellationToken::new();
        // The guard checks Host and Origin itself (with the port, and before any body is read).
        let config = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .disable_allowed_origins()
            .with_max_request_body_bytes(http.max_body_bytes)
            .with_cancellation_token(stop.clone());
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let hosts = address.ip().is_loopback().then(|| {
            let port = address.port();
            let mut hosts = vec![format!("localhost:{port}"), format!("{address}")];
            if address.is_ipv4() {
                hosts.push(format!("127.0.0.1:{port}"));
            } else {
                hosts.push(format!("[::1]:{port}"));
            }
            hosts
        });
        let admission = Arc::new(Admission {
            slots: Arc::new(Semaphore::new(http.max_concurrent_requests.max(1))),
            streams: Arc::new(Semaphore::new(http.max_streams.max(1))),
            options: http,
            hosts,
        });
        let metadata = axum::routing::get(protected_resource);
        let router = Router::new()
            .route_service(MCP_PATH, service)
            .route(PROTECTED_RESOURCE_PATH, metadata.clone())
            .route(&format!("{PROTECTED_RESOURCE_PATH}{MCP_PATH}"), metadata)
            .fallback(|| async {
                refuse(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("the MCP endpoint is {MCP_PATH}"),
                )
            })
            .layer(axum::middleware::from_fn_with_state(admission, guard));
        Ok(HttpServer {
            listener,
            address,
            router,
            stop,
            session_id,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// `http://ADDRESS/mcp`: what a client connects to.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.address)
    }

    /// The clawsmith session every client's calls are turns of.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Serves until `stop` resolves; then the open streams end and no request is accepted.
    pub async fn serve_until(
        self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), McpError> {
        use axum::serve::ListenerExt;
        let token = self.stop.clone();
        // An answer's event stream is written in small pieces (its events, then the end): with
        // Nagle's algorithm each would wait for the client's delayed acknowledgement.
        let listener = self.listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        axum::serve(listener, self.router)
            .with_graceful_shutdown(async move {
                stop.await;
                token.cancel();
            })
            .await
            .map_err(|error| McpError::Serve(format!("serving HTTP: {error}")))
    }
}

/// The origin a request names (`http://` and its `Host`): where this server's resource and
/// metadata are, as the client reached them.
fn request_origin(headers: &axum::http::HeaderMap) -> String {
    // Only what a host and port are made of: the value is quoted into a header and a URL.
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .filter(|host| {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || b".-:[]_".contains(&byte))
        })
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// `GET /.well-known/oauth-protected-resource`: the RFC 9728 metadata of the MCP endpoint.
async fn protected_resource(headers: axum::http::HeaderMap) -> Response {
    let origin = request_origin(&headers);
    let metadata = serde_json::json!({
        "resource": format!("{origin}{MCP_PATH}"),
        "bearer_methods_supported": ["header"],
        "resource_name": "clawsmith",
    });
    let mut response = axum::Json(metadata).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A refusal: the status and a JSON body naming the reason.
fn refuse(status: StatusCode, code: &str, message: String) -> Response {
    let body = serde_json::json!({ "error": { "code": code, "message": message } });
    (status, axum::Json(body)).into_response()
}

/// Every request passes here before the transport (see the module docs).
async fn guard(State(admission): State<Arc<Admission>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if let Some(hosts) = &admission.hosts {
        let host = headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        if !hosts
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(host))
        {
            return refuse(
                StatusCode::MISDIRECTED_REQUEST,
                "host_refused",
                format!("Host {host:?} is not this server's address"),
            );
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !admission
            .options
            .allowed_origins
            .iter()
            .any(|allowed| allowed == origin)
        {
            return refuse(
                StatusCode::FORBIDDEN,
                "origin_refused",
                format!("Origin {origin:?} is not allowed (clawsmith mcp --http-allow-origin)"),
            );
        }
    }
    // The metadata tells a client how to authenticate, so it is read without the token.
    let path = request.uri().path();
    if request.method() == axum::http::Method::GET
        && (path == PROTECTED_RESOURCE_PATH
            || path == format!("{PROTECTED_RESOURCE_PATH}{MCP_PATH}"))
    {
        return next.run(request).await;
    }
    // The scheme's name is case-insensitive (RFC 9110); the token is compared whole.
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or("", |(_, token)| token);
    if !constant_time_eq(presented.as_bytes(), admission.options.token.as_bytes()) {
        let mut response = refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a bearer token is required (Authorization: Bearer <token>)".into(),
        );
        let challenge = format!(
            "Bearer realm=\"clawsmith\", resource_metadata=\"{}{PROTECTED_RESOURCE_PATH}{MCP_PATH}\"",
            request_origin(headers)
        );
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        return response;
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > admission.options.max_body_bytes as u64) {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "the body is over {} bytes",
                admission.options.max_body_bytes
            ),
        );
    }
    if request.method() == axum::http::Method::GET {
        let Ok(stream) = Arc::clone(&admission.streams).try_acquire_owned() else {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                format!(
                    "{} server streams are open; try again when one ends",
                    admission.options.max_streams
                ),
            );
        };
        let response = next.run(request).await;
        return closed_when_idle(response, stream, admission.options.stream_idle);
    }
    let Ok(slot) = Arc::clone(&admission.slots).try_acquire_owned() else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!(
                "{} requests are being served; try again when one ends",
                admission.options.max_concurrent_requests
            ),
        );
    };
    let response = next.run(request).await;
    // The slot is held until the whole answer is sent: an event stream carries a call's result
    // after its headers.
    let (parts, body) = response.into_parts();
    let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _held = &slot;
        chunk
    }));
    Response::from_parts(parts, body)
}

/// `response` with its body ended once `idle` passes without an event, holding `permit` until
/// the body ends.
fn closed_when_idle(response: Response, permit: OwnedSemaphorePermit, idle: Duration) -> Response {
    let (parts, body) = response.into_parts();
    let state = (
        body.into_data_stream(),
        tokio::time::Instant::now() + idle,
        permit,
    );
    let body =
        futures_util::stream::unfold(state, move |(mut chunks, deadline, permit)| async move {
            let chunk = tokio::time::timeout_at(deadline, chunks.next())
                .await
                .ok()??;
            let deadline = match &chunk {
                Ok(bytes) if carries_an_event(bytes) => tokio::time::Instant::now() + idle,
                _ => deadline,
            };
            Some((chunk, (chunks, deadline, permit)))
        });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Whether a piece of an event stream holds more than comments (`:` lines, rmcp's keep-alive)
/// and blank lines.
fn carries_an_event(bytes: &[u8]) -> bool {
    bytes
        .split(|byte| *byte == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .any(|line| !line.is_empty() && !line.starts_with(b":"))
}

#[cfg(test)]
mod tests {
    use super::carries_an_event;

    #[test]
    fn keep_alive_comments_are_not_events() {
        // (bytes of the stream, whether they carry an event)
        let table: [(&[u8], bool); 7] = [
            (b":ping\n\n", false),
            (b": keep-alive\r\n\r\n", false),
            (b"\n", false),
            (b"", false),
            (b"data: {}\n\n", true),
            (b":ping\n\nid: 3\ndata: {}\n\n", true),
            (b"event: message\r\n", true),
        ];
        for (bytes, event) in table {
            assert_eq!(
                carries_an_event(bytes),
                event,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}
