//! Remote MCP servers over Streamable HTTP: the HTTP client, how a request is authorized (a
//! static bearer token or OAuth 2.1), and where OAuth credentials are kept.
//!
//! The transport is rmcp's Streamable HTTP client over a reqwest client of this module: rustls
//! with ring and the webpki roots (the stack the model providers use), no redirects followed
//! (a redirect would carry the session and token to wherever the server points), and the same
//! answer cap as a stdio server's line. OAuth is rmcp's: discovery from the server's
//! protected-resource metadata, the token endpoint, and a silent refresh when a token expires or
//! the server refuses it. Its HTTP requests go through [`OAuthHttp`], the same client stack with
//! a body cap and a deadline.
//!
//! Credentials live in `<state dir>/mcp-credentials/<server>.json`, created 0600 in a 0700
//! folder and replaced atomically (a new file renamed over the old one), so a crash mid-refresh
//! leaves the old token or the new one, never half of either. The state directory is out of
//! sight of every process clawsmith starts, so a command cannot read them, and tokens are never
//! written to sessions, logs or traces. Without a state directory they are kept in memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    ClientCredentialsConfig, CredentialStore, InMemoryCredentialStore, OAuthHttpClient,
    OAuthHttpClientError, OAuthHttpClientFuture, OAuthHttpRedirectPolicy, OAuthHttpRequest,
    StoredCredentials,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use crate::config::{McpServerConfig, OAuthSettings};
use crate::error::McpError;
use crate::transport::MAX_ANSWER_LINE_BYTES;

/// The folder of the state directory that holds OAuth credentials, one file per server.
pub const CREDENTIALS_DIR: &str = "mcp-credentials";
/// Largest answer to one OAuth request (metadata, a token): they are small documents.
const MAX_OAUTH_BODY_BYTES: usize = 1024 * 1024;
/// How long one OAuth request may take.
const OAUTH_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to a remote server may take before its first byte (the call deadlines
/// bound the rest).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client of remote MCP servers and their OAuth requests.
pub(crate) fn http_client(
    redirects: reqwest_rmcp::redirect::Policy,
) -> Result<reqwest_rmcp::Client, String> {
    client_builder(redirects)?
        .build()
        .map_err(|error| format!("HTTP client: {error}"))
}

/// [`http_client`]'s settings, before the OAuth client adds its resolver.
fn client_builder(
    redirects: reqwest_rmcp::redirect::Policy,
) -> Result<reqwest_rmcp::ClientBuilder, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS configuration: {error}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(reqwest_rmcp::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(redirects)
        .connect_timeout(CONNECT_TIMEOUT)
        // An idle pooled connection whose previous answer was not read to the end stalls the
        // next request; a fresh connection per request avoids it.
        .pool_max_idle_per_host(0))
}

/// Where an OAuth request may go. The authorization server and the endpoints are named by the
/// remote server's metadata, so a hostile server could point them at this machine's or this
/// network's own services (a cloud metadata service at 169.254.169.254, an admin page on
/// 127.0.0.1). The server's own host is reachable as configured; any other host only at a
/// public address, or a loopback (private) one when the server's own host is loopback
/// (private) too. Link-local, unspecified, multicast and broadcast addresses never.
#[derive(Debug, Clone)]
pub(crate) struct Reach {
    server_host: String,
    loopback: bool,
    private: bool,
}

impl Reach {
    /// The reach of the OAuth requests of the server at `url`.
    pub(crate) fn of(url: &str) -> Reach {
        let host = reqwest_rmcp::Url::parse(url)
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
            .unwrap_or_default();
        let literal = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        let loopback =
            host.eq_ignore_ascii_case("localhost") || literal.is_some_and(|ip| ip.is_loopback());
        let private = loopback || literal.is_some_and(is_private);
        Reach {
            server_host: host.to_ascii_lowercase(),
            loopback,
            private,
        }
    }

    /// Whether a host other than the server's may be reached at `ip`.
    pub(crate) fn permits(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        let never = match ip {
            IpAddr::V4(v4) => {
                v4.is_link_local() || v4.is_unspecified() || v4.is_multicast() || v4.is_broadcast()
            }
            IpAddr::V6(v6) => {
                v6.is_unicast_link_local() || v6.is_unspecified() || v6.is_multicast()
            }
        };
        if never {
            return false;
        }
        if ip.is_loopback() {
            return self.loopback;
        }
        !is_private(ip) || self.private
    }

    /// Whether `host` (a name or an address literal, as in a URL) may be reached; a name is
    /// checked again at each address it resolves to.
    fn permits_host(&self, host: &str) -> bool {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if bare.eq_ignore_ascii_case(&self.server_host) {
            return true;
        }
        match bare.parse::<IpAddr>() {
            Ok(ip) => self.permits(ip),
            Err(_) => !bare.eq_ignore_ascii_case("localhost") || self.loopback,
        }
    }
}

/// RFC 1918, the shared space of RFC 6598 and IPv6 unique-local addresses.
fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_private() || (v4.octets()[0] == 100 && v4.octets()[1] & 0xc0 == 64),
        IpAddr::V6(v6) => v6.segments()[0] & 0xfe00 == 0xfc00,
    }
}

/// The OAuth client's resolver: the system's, keeping only the addresses [`Reach`] permits
/// (every address for the server's own host).
struct ReachResolver(Reach);

impl reqwest_rmcp::dns::Resolve for ReachResolver {
    fn resolve(&self, name: reqwest_rmcp::dns::Name) -> reqwest_rmcp::dns::Resolving {
        let reach = self.0.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let own = host.eq_ignore_ascii_case(&reach.server_host);
            let kept: Vec<SocketAddr> = found
                .filter(|address| own || reach.permits(address.ip()))
                .collect();
            if kept.is_empty() {
                return Err(format!(
                    "`{host}` resolves only to addresses an OAuth request of this server may not \
                     reach (link-local, or loopback or private while the server's own host is not)"
                )
                .into());
            }
            Ok(Box::new(kept.into_iter()) as reqwest_rmcp::dns::Addrs)
        })
    }
}

/// The OAuth client: [`client_builder`] with the [`Reach`] resolver, and a redirect policy
/// that follows at most `follow` redirects, each to a host [`Reach`] permits.
fn oauth_client(reach: &Reach, follow: usize) -> Result<reqwest_rmcp::Client, String> {
    let checked = reach.clone();
    let redirects = reqwest_rmcp::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > follow {
            return attempt.stop();
        }
        let host = attempt.url().host_str().unwrap_or_default().to_owned();
        if checked.permits_host(&host) {
            attempt.follow()
        } else {
            attempt.error(format!(
                "a redirect to `{host}`, which OAuth requests may not reach"
            ))
        }
    });
    client_builder(redirects)?
        .dns_resolver(Arc::new(ReachResolver(reach.clone())))
        .build()
        .map_err(|error| format!("HTTP client: {error}"))
}

/// The transport's settings: the server's URL and the stdio answer cap for every answer.
fn transport_config(url: &str, bearer: Option<String>) -> StreamableHttpClientTransportConfig {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    config.auth_header = bearer;
    config.max_sse_event_size = MAX_ANSWER_LINE_BYTES;
    config.max_json_response_size = MAX_ANSWER_LINE_BYTES;
    config
}

/// The transport to a remote server, authorized as its entry says.
pub(crate) enum RemoteTransport {
    /// No authorization, or a static bearer token.
    Plain(StreamableHttpClientTransport<Guarded<reqwest_rmcp::Client>>),
    /// OAuth: rmcp's [`AuthClient`] adds the token and refreshes it; [`Guarded`] asks the
    /// client credentials grant again when no refresh can replace a refused token.
    OAuth(StreamableHttpClientTransport<Guarded<AuthClient<reqwest_rmcp::Client>>>),
}

/// Builds the transport to `server` (a `url` entry): reads its bearer token's variable, or
/// prepares OAuth (credentials from `credentials`, a client-credentials exchange when none
/// are stored and a secret is configured), with the connection's [`Faults`]. `Err` is a
/// message naming what is missing.
pub(crate) async fn transport(
    server: &McpServerConfig,
    url: &str,
    credentials: Option<&Path>,
    faults: &Faults,
) -> Result<RemoteTransport, String> {
    let client = http_client(reqwest_rmcp::redirect::Policy::none())?;
    if let Some(settings) = &server.oauth {
        let (manager, grant) = authorize(server, url, settings, credentials).await?;
        let inner = AuthClient::new(client, manager);
        let client = Guarded {
            grant: grant.map(|config| Grant {
                manager: Arc::clone(&inner.auth_manager),
                config: Arc::new(config),
            }),
            inner,
            faults: faults.clone(),
        };
        let transport =
            StreamableHttpClientTransport::with_client(client, transport_config(url, None));
        return Ok(RemoteTransport::OAuth(transport));
    }
    let bearer =
        match &server.bearer_token_env {
            Some(variable) => Some(clawsmith_core::sandbox::credential(variable).ok_or_else(
                || format!("its bearer token variable `{variable}` is not set (bearer_token_env)"),
            )?),
            None => None,
        };
    let client = Guarded {
        inner: client,
        grant: None,
        faults: faults.clone(),
    };
    Ok(RemoteTransport::Plain(
        StreamableHttpClientTransport::with_client(client, transport_config(url, bearer)),
    ))
}

/// An OAuth manager for `url` holding a usable token: the stored one (refreshed by rmcp when
/// it expires), or one from the client credentials grant when a secret is configured; with
/// the grant's settings when there are some, for asking it again.
async fn authorize(
    server: &McpServerConfig,
    url: &str,
    settings: &OAuthSettings,
    credentials: Option<&Path>,
) -> Result<(AuthorizationManager, Option<ClientCredentialsConfig>), String> {
    let mut manager = oauth_manager(url).await?;
    match credentials {
        Some(dir) => manager.set_credential_store(FileCredentialStore::new(dir, &server.name)),
        None => manager.set_credential_store(InMemoryCredentialStore::new()),
    }
    if !settings.scopes.is_empty() {
        manager.set_refresh_scopes(settings.scopes.iter().map(String::as_str));
    }
    // Reads the stored token and, when there is one, the authorization server's metadata.
    let stored = manager
        .initialize_from_store()
        .await
        .map_err(|error| format!("reading its stored OAuth credentials failed: {error}"))?;
    let Some(config) = client_credentials(server, url, settings)? else {
        if !stored {
            return Err(format!(
                "it needs OAuth authorization and no token is stored: run `clawsmith mcp-login {}`",
                server.name
            ));
        }
        return Ok((manager, None));
    };
    let failed = |error: AuthError| format!("the OAuth client credentials grant failed: {error}");
    if !stored {
        let resolution = manager.resolve_metadata().await.map_err(failed)?;
        manager.set_metadata(resolution.metadata);
    }
    manager
        .validate_client_credentials_metadata(&config)
        .map_err(failed)?;
    // The client authenticates with its secret, for a refresh as for the grant.
    manager
        .configure_client_credentials(&config)
        .map_err(failed)?;
    if !stored {
        manager
            .exchange_client_credentials(&config)
            .await
            .map_err(failed)?;
    }
    Ok((manager, Some(config)))
}

/// How long [`login`] waits for the browser to come back by default.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest request the login's redirect listener reads.
const MAX_CALLBACK_BYTES: usize = 16 * 1024;

/// Authorizes clawsmith at the remote server `server` (an entry with `url` and an `oauth`
/// table without a client secret) with the authorization code flow and PKCE: discovers the
/// authorization server, registers clawsmith there unless the entry names a client id
/// (dynamic client registration), listens on 127.0.0.1 for the redirect, hands the
/// authorization URL to `show` for the person to open, and stores the tokens it gets in
/// `credentials_dir` (`<state dir>/mcp-credentials`), where [`crate::connect_servers`] uses
/// and refreshes them. Gives up after `timeout` without a redirect.
pub async fn login(
    server: &McpServerConfig,
    credentials_dir: &Path,
    show: impl FnOnce(&str),
    timeout: Duration,
) -> Result<(), McpError> {
    let url = server
        .url
        .as_deref()
        .ok_or_else(|| McpError::InvalidConfig {
            path: None,
            message: format!(
                "MCP server `{}` is not a remote server (it has no `url`): there is nothing to log in to",
                server.name
            ),
        })?;
    let failed = |message: String| McpError::Remote {
        server: server.name.clone(),
        url: url.to_owned(),
        message,
    };
    let Some(settings) = &server.oauth else {
        return Err(failed(
            "it has no `[mcp_servers.oauth]` table: it is not authorized with OAuth".to_owned(),
        ));
    };
    if settings.client_secret_env.is_some() {
        return Err(failed(
            "it authorizes with the client credentials grant (`client_secret_env`), \
             which needs no login"
                .to_owned(),
        ));
    }
    let oauth = |step: &str, error: AuthError| failed(format!("OAuth login, {step}: {error}"));
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(|error| failed(format!("listening for the redirect on 127.0.0.1: {error}")))?;
    let port = listener
        .local_addr()
        .map_err(|error| failed(format!("listening for the redirect: {error}")))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let mut manager = oauth_manager(url).await.map_err(failed)?;
    manager.set_credential_store(FileCredentialStore::new(credentials_dir, &server.name));
    let resolution = manager
        .resolve_metadata()
        .await
        .map_err(|error| oauth("discovery", error))?;
    manager.set_metadata(resolution.metadata);
    let mut request = AuthorizationRequest::new(&redirect_uri).with_client_name("clawsmith");
    if !settings.scopes.is_empty() {
        request = request.with_scopes(settings.scopes.iter().map(String::as_str));
    }
    if let Some(client_id) = &settings.client_id {
        request = request.with_preregistered_client(client_id);
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, error)| oauth("registration", error))?;
    show(session.get_authorization_url());
    let callback = tokio::time::timeout(timeout, redirect(&listener, port))
        .await
        .map_err(|_| {
            failed(format!(
                "no redirect came back within {} s; run the login again",
                timeout.as_secs()
            ))
        })?
        .map_err(failed)?;
    session
        .handle_callback_url(&callback)
        .await
        .map_err(|error| oauth("token exchange", error))?;
    Ok(())
}

/// Waits for the browser's redirect to `/callback` on `listener` and answers it with a page
/// saying so; other requests (a favicon) get 404. The callback's full URL, or why the
/// authorization server sent the person back without a code.
async fn redirect(listener: &tokio::net::TcpListener, port: u16) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|error| format!("accepting the redirect: {error}"))?;
        let mut request = Vec::new();
        let mut buffer = [0_u8; 2048];
        while !request.windows(4).any(|end| end == b"\r\n\r\n") {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => request.extend_from_slice(&buffer[..read]),
            }
            if request.len() > MAX_CALLBACK_BYTES {
                break;
            }
        }
        let line = String::from_utf8_lossy(&request);
        let target = line
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_default()
            .to_owned();
        if !target.starts_with("/callback?") {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let callback = format!("http://127.0.0.1:{port}{target}");
        let refused = reqwest_rmcp::Url::parse(&callback).ok().and_then(|url| {
            let pairs: HashMap<_, _> = url.query_pairs().into_owned().collect();
            let error = pairs.get("error")?;
            Some(match pairs.get("error_description") {
                Some(description) => format!("{error} ({description})"),
                None => error.clone(),
            })
        });
        let page = match &refused {
            Some(_) => "clawsmith: the authorization was refused. You can close this tab.",
            None => "clawsmith: authorized. You can close this tab.",
        };
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        return match refused {
            Some(error) => Err(format!("the authorization server refused: {error}")),
            None => Ok(callback),
        };
    }
}

/// A manager for `url` whose OAuth requests go through [`OAuthHttp`].
pub(crate) async fn oauth_manager(url: &str) -> Result<AuthorizationManager, String> {
    let http = OAuthHttp::new(url)?;
    AuthorizationManager::new_with_oauth_http_client(url, Arc::new(http))
        .await
        .map_err(|error| format!("OAuth set-up failed: {error}"))
}

/// The client credentials grant's settings, when the entry names a secret.
fn client_credentials(
    server: &McpServerConfig,
    url: &str,
    settings: &OAuthSettings,
) -> Result<Option<ClientCredentialsConfig>, String> {
    let Some(variable) = &settings.client_secret_env else {
        return Ok(None);
    };
    let client_id = settings.client_id.clone().ok_or_else(|| {
        format!(
            "MCP server `{}`: `oauth.client_secret_env` needs `oauth.client_id`",
            server.name
        )
    })?;
    let client_secret = clawsmith_core::sandbox::credential(variable).ok_or_else(|| {
        format!("its OAuth client secret variable `{variable}` is not set (client_secret_env)")
    })?;
    Ok(Some(ClientCredentialsConfig::ClientSecret {
        client_id,
        client_secret,
        scopes: settings.scopes.clone(),
        resource: Some(url.to_owned()),
    }))
}

/// What went wrong on a remote connection last, for the report of the call it broke: rmcp
/// fails such a call with "Transport closed", which does not say that, for instance, the
/// answer was over the size cap.
#[derive(Debug, Clone, Default)]
pub(crate) struct Faults(Arc<std::sync::Mutex<Option<String>>>);

impl Faults {
    fn record(&self, fault: String) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fault);
    }

    /// The last fault recorded, taken.
    pub(crate) fn take(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// `stream` with its errors recorded as they pass.
    fn watch(
        &self,
        stream: BoxStream<'static, Result<Sse, SseError>>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let faults = self.clone();
        stream
            .inspect(move |item| {
                if let Err(error) = item {
                    faults.record(format!("its event stream broke: {error}"));
                }
            })
            .boxed()
    }

    /// `answer` with its error, or its event stream's errors, recorded.
    fn watch_answer<T>(
        &self,
        answer: Result<T, HttpError>,
        stream: impl FnOnce(T, &Faults) -> T,
    ) -> Result<T, HttpError> {
        match answer {
            Ok(answer) => Ok(stream(answer, self)),
            Err(error) => {
                self.record(error.to_string());
                Err(error)
            }
        }
    }
}

/// The client credentials grant a refused token is replaced by.
#[derive(Clone)]
pub(crate) struct Grant {
    manager: Arc<tokio::sync::Mutex<AuthorizationManager>>,
    config: Arc<ClientCredentialsConfig>,
}

/// The HTTP client of a remote connection: `inner` (reqwest, or rmcp's [`AuthClient`] over
/// it), with the connection's [`Faults`] recorded and, for OAuth with client credentials, one
/// more recovery: when the server refuses a request's token and rmcp could not refresh it (a
/// client credentials token usually comes without a refresh token), the grant is asked again
/// once and the request retried with the new token.
#[derive(Clone)]
pub(crate) struct Guarded<C> {
    inner: C,
    grant: Option<Grant>,
    faults: Faults,
}

type HttpError = StreamableHttpError<reqwest_rmcp::Error>;

impl<C> Guarded<C> {
    /// Runs `call` with `token`; on a refused token with a grant configured, asks the grant
    /// again and runs `call` once more with the new token.
    async fn regranting<T, F, Fut>(&self, token: Option<String>, call: F) -> Result<T, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, HttpError>>,
    {
        let refused = match call(token).await {
            Err(StreamableHttpError::AuthRequired(challenge)) => challenge,
            answer => return answer,
        };
        let Some(grant) = &self.grant else {
            return Err(StreamableHttpError::AuthRequired(refused));
        };
        let fresh = {
            let manager = grant.manager.lock().await;
            manager.exchange_client_credentials(&grant.config).await?;
            manager.get_access_token().await?
        };
        call(Some(fresh)).await
    }

    /// [`regranting`](Self::regranting) for a POST, its faults recorded.
    async fn post<F, Fut>(
        &self,
        token: Option<String>,
        call: F,
    ) -> Result<StreamableHttpPostResponse, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<StreamableHttpPostResponse, HttpError>>,
    {
        let answer = self.regranting(token, call).await;
        self.faults
            .watch_answer(answer, |answer, faults| match answer {
                StreamableHttpPostResponse::Sse(stream, session) => {
                    StreamableHttpPostResponse::Sse(faults.watch(stream), session)
                }
                other => other,
            })
    }

    /// [`regranting`](Self::regranting) for a GET stream, its faults recorded.
    async fn stream<F, Fut>(
        &self,
        token: Option<String>,
        call: F,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<BoxStream<'static, Result<Sse, SseError>>, HttpError>>,
    {
        let answer = self.regranting(token, call).await;
        self.faults
            .watch_answer(answer, |stream, faults| faults.watch(stream))
    }
}

impl<C> StreamableHttpClient for Guarded<C>
where
    C: StreamableHttpClient<Error = reqwest_rmcp::Error> + Sync,
{
    type Error = reqwest_rmcp::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post(auth_header, |token| {
            self.inner.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post(auth_header, |token| {
            self.inner.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post(auth_header, |token| {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.regranting(auth_header, |token| {
            self.inner.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.stream(auth_header, |token| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.stream(auth_header, |token| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}

/// The OAuth requests' HTTP client: each request's redirect policy, a deadline, a body cap and
/// the addresses [`Reach`] permits.
pub(crate) struct OAuthHttp {
    follow: reqwest_rmcp::Client,
    stop: reqwest_rmcp::Client,
}

impl OAuthHttp {
    /// The client of the OAuth requests of the server at `url`.
    pub(crate) fn new(url: &str) -> Result<OAuthHttp, String> {
        let reach = Reach::of(url);
        Ok(OAuthHttp {
            follow: oauth_client(&reach, 5)?,
            stop: oauth_client(&reach, 0)?,
        })
    }
}

impl OAuthHttpClient for OAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let client = match request.redirect_policy {
                OAuthHttpRedirectPolicy::Stop => &self.stop,
                _ => &self.follow,
            };
            let timeout = request
                .timeout
                .unwrap_or(OAUTH_REQUEST_TIMEOUT)
                .min(OAUTH_REQUEST_TIMEOUT);
            let mut outgoing = reqwest_rmcp::Request::try_from(request.request)
                .map_err(|error| Box::new(error) as OAuthHttpClientError)?;
            *outgoing.timeout_mut() = Some(timeout);
            let response = client
                .execute(outgoing)
                .await
                .map_err(|error| Box::new(error) as OAuthHttpClientError)?;
            let mut answer = http::Response::builder()
                .status(response.status())
                .version(response.version());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let mut body = Vec::new();
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|error| Box::new(error) as OAuthHttpClientError)?;
                if body.len() + chunk.len() > MAX_OAUTH_BODY_BYTES {
                    return Err(format!(
                        "an OAuth answer was over {} KiB",
                        MAX_OAUTH_BODY_BYTES / 1024
                    )
                    .into());
                }
                body.extend_from_slice(&chunk);
            }
            answer
                .body(body)
                .map_err(|error| Box::new(error) as OAuthHttpClientError)
        })
    }
}

/// One server's OAuth credentials in a file of the state directory: 0600 in a 0700 folder,
/// replaced atomically.
#[derive(Debug, Clone)]
pub struct FileCredentialStore {
    path: PathBuf,
}

impl FileCredentialStore {
    /// The store of server `server` under `dir` (`<state dir>/mcp-credentials`).
    pub fn new(dir: &Path, server: &str) -> FileCredentialStore {
        FileCredentialStore {
            path: dir.join(format!("{server}.json")),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> std::io::Result<Option<StoredCredentials>> {
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error))
    }

    fn write(&self, credentials: &StoredCredentials) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        let dir = self
            .path
            .parent()
            .ok_or_else(|| std::io::Error::other("the credentials file has no folder"))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        let json = serde_json::to_vec(credentials).map_err(std::io::Error::other)?;
        let temporary = dir.join(format!(
            ".{}.{}.tmp",
            self.path
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        let written = file.write_all(&json).and_then(|()| file.sync_all());
        if let Err(error) = written.and_then(|()| std::fs::rename(&temporary, &self.path)) {
            let _ = std::fs::remove_file(&temporary);
            return Err(error);
        }
        std::fs::File::open(dir)?.sync_all()
    }
}

fn store_error(error: std::io::Error) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

#[async_trait::async_trait]
impl CredentialStore for FileCredentialStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.read())
            .await
            .map_err(|error| AuthError::CredentialStoreError(error.to_string()))?
            .map_err(store_error)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.write(&credentials))
            .await
            .map_err(|error| AuthError::CredentialStoreError(error.to_string()))?
            .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(store_error(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oauth_requests_reach_only_what_the_servers_own_host_allows() {
        // (server URL, address of another host, permitted)
        let table = [
            ("https://mcp.example.com/mcp", "93.184.216.34", true),
            ("https://mcp.example.com/mcp", "2606:2800:220:1::1", true),
            ("https://mcp.example.com/mcp", "169.254.169.254", false),
            ("https://mcp.example.com/mcp", "fe80::1", false),
            (
                "https://mcp.example.com/mcp",
                "::ffff:169.254.169.254",
                false,
            ),
            ("https://mcp.example.com/mcp", "127.0.0.1", false),
            ("https://mcp.example.com/mcp", "::1", false),
            ("https://mcp.example.com/mcp", "::ffff:127.0.0.1", false),
            ("https://mcp.example.com/mcp", "10.0.0.9", false),
            ("https://mcp.example.com/mcp", "172.16.5.4", false),
            ("https://mcp.example.com/mcp", "192.168.1.1", false),
            ("https://mcp.example.com/mcp", "100.64.0.1", false),
            ("https://mcp.example.com/mcp", "fd00::1", false),
            ("https://mcp.example.com/mcp", "0.0.0.0", false),
            ("https://mcp.example.com/mcp", "::", false),
            ("https://mcp.example.com/mcp", "224.0.0.1", false),
            ("https://mcp.example.com/mcp", "255.255.255.255", false),
            ("https://10.1.2.3/mcp", "10.0.0.9", true),
            ("https://10.1.2.3/mcp", "127.0.0.1", false),
            ("https://10.1.2.3/mcp", "169.254.169.254", false),
            ("http://127.0.0.1:8080/mcp", "127.0.0.1", true),
            ("http://127.0.0.1:8080/mcp", "10.0.0.9", true),
            ("http://localhost:8080/mcp", "::1", true),
            ("http://[::1]:8080/mcp", "127.0.0.2", true),
            ("http://[::1]:8080/mcp", "169.254.169.254", false),
        ];
        for (server, address, permitted) in table {
            let ip: IpAddr = address.parse().unwrap();
            assert_eq!(
                Reach::of(server).permits(ip),
                permitted,
                "{server} -> {address}"
            );
        }
    }

    #[test]
    fn redirects_and_names_are_checked_by_host() {
        let reach = Reach::of("https://mcp.example.com/mcp");
        // (host as in a URL, permitted)
        let table = [
            ("mcp.example.com", true),
            ("MCP.example.com", true),
            ("auth.example.com", true),
            ("169.254.169.254", false),
            ("[fe80::1]", false),
            ("127.0.0.1", false),
            ("localhost", false),
            ("LOCALHOST", false),
        ];
        for (host, permitted) in table {
            assert_eq!(reach.permits_host(host), permitted, "{host}");
        }
        let local = Reach::of("https://10.0.0.5/mcp");
        assert!(local.permits_host("10.0.0.5"));
        assert!(!local.permits_host("localhost"));
        assert!(Reach::of("http://localhost:1/mcp").permits_host("localhost"));
    }

    #[tokio::test]
    async fn a_name_resolving_only_to_loopback_is_refused_for_a_public_server() {
        use reqwest_rmcp::dns::Resolve;
        let name = |host: &str| host.parse::<reqwest_rmcp::dns::Name>().unwrap();
        let public = ReachResolver(Reach::of("https://mcp.example.com/mcp"));
        let refused = match public.resolve(name("localhost")).await {
            Ok(addresses) => panic!("resolved to {:?}", addresses.collect::<Vec<_>>()),
            Err(error) => error.to_string(),
        };
        assert!(
            refused.contains("`localhost` resolves only to"),
            "{refused}"
        );
        let local = ReachResolver(Reach::of("http://127.0.0.1:9/mcp"));
        let found: Vec<SocketAddr> = local.resolve(name("localhost")).await.unwrap().collect();
        assert!(
            found.iter().all(|address| address.ip().is_loopback()),
            "{found:?}"
        );
        assert!(!found.is_empty());
    }
}
