//! The MCP client (A9, A10): external MCP servers' tools as deferred extension tools.
//!
//! External servers are untrusted peers: every step has a deadline (start-up, each call), every
//! answer a size cap, the listing a page and tool budget, stderr a bounded tail, and names are
//! made unique deterministically. A server that breaks a rule is reported in [`McpStartup`] and
//! left out; the others still load.

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clawsmith_core::ExtensionTool;
use clawsmith_core::sandbox::{
    Argv, PipedIo, ProcessKind, SandboxConfig, StateDir, spawn_piped_argv,
};
use clawsmith_protocol::{
    CapabilityDeclaration, ErrorCode, Risk, SearchMetadata, Tool, ToolExecutionContext,
    ToolExecutionResult, ToolFuture, ToolOutput, ToolStatus, infer_status_from_content,
    truncate_to_boundary,
};
use futures_util::StreamExt;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, ContentBlock, PaginatedRequestParams, ProgressNotificationParam,
    ResourceContents, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, RunningService};
use rmcp::{ServiceError, ServiceExt};
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use crate::config::{McpConfig, McpServerConfig, WorkspaceAccess};
use crate::error::McpError;
use crate::remote::RemoteTransport;
use crate::transport::{ClientTransport, MAX_ANSWER_LINE_BYTES};

/// The prefix of every MCP tool name: `mcp__<server>__<tool>`.
pub const MCP_TOOL_PREFIX: &str = "mcp__";
/// Longest tool name the core accepts.
const MAX_TOOL_NAME_BYTES: usize = 128;
/// Longest description (and search hint) taken from a server: they are untrusted text that
/// lands in every model request once the tool is active.
pub const MAX_DESCRIPTION_BYTES: usize = 2048;
/// The `source` of the extension tools: `mcp:<server>` (table origin `extension:mcp:<server>`).
pub const MCP_SOURCE_PREFIX: &str = "mcp:";
/// Most `tools/list` pages read from one server; the listing stops there (reported).
pub const MAX_LIST_PAGES: usize = 64;
/// Most tools taken from one server; the rest are left out (reported).
pub const MAX_SERVER_TOOLS: usize = 512;
/// Largest definition (name, description, schemas… as JSON) of one tool; a larger tool is left
/// out (reported). With [`MAX_SERVER_TOOLS`] it bounds what one server's listing keeps (32 MiB).
pub const MAX_TOOL_DEFINITION_BYTES: usize = 64 * 1024;
/// How much of a server's stderr is kept (its tail) for the report; the rest is read and dropped.
pub const STDERR_TAIL_BYTES: usize = 4096;
/// The code of a call the server did not answer within its `call_timeout_ms`.
pub const TIMEOUT: ErrorCode = ErrorCode::from_static("timeout");

/// What connecting the configured servers gave: the tools of every server that answered, and
/// one entry per problem (a server left out, tools left out, a listing cut short), for the
/// front end to print.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct McpStartup {
    /// The deferred tools, server by server in configuration order.
    pub tools: Vec<ExtensionTool>,
    /// What went wrong, in the order it happened; each names its server.
    pub problems: Vec<McpError>,
}

/// A live connection to one external MCP server. The child process lives as long as the
/// connection (killed when it drops), and the connection as long as the last of its tools.
pub struct McpConnection {
    server: String,
    service: RunningService<RoleClient, ProgressListener>,
    progress: ProgressDispatcher,
    call_timeout: Duration,
    call_max: Duration,
    stderr: StderrTail,
    /// Held for its drop (the child's); a remote connection's faults.
    process: ServerProcess,
}

impl McpConnection {
    /// What broke a remote connection last, taken; `None` for a local server.
    fn fault(&self) -> Option<String> {
        match &self.process {
            ServerProcess::Remote(faults) => faults.take(),
            _ => None,
        }
    }
}

/// The client side of a connection: hands each `notifications/progress` to the call waiting on
/// its token; everything else as rmcp's default client.
#[derive(Clone, Default)]
struct ProgressListener {
    dispatcher: ProgressDispatcher,
}

impl rmcp::ClientHandler for ProgressListener {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.dispatcher.handle_notification(params).await;
    }
}

/// The server's process, killed with its whole tree when the connection drops.
enum ServerProcess {
    /// Confined by the MCP-server profile of the host's sandbox policy.
    Confined {
        /// Held for its drop, which kills the tree.
        _process: Box<clawsmith_core::sandbox::PipedProcess>,
    },
    /// `unconfined = true` in its configuration.
    Unconfined {
        /// Held for its drop (`kill_on_drop`).
        _child: tokio::process::Child,
    },
    /// A remote server (`url`): no process of ours; what broke its connection last.
    Remote(crate::remote::Faults),
}

impl std::fmt::Debug for McpConnection {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("McpConnection")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl McpConnection {
    /// The configured server name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The last [`STDERR_TAIL_BYTES`] the server wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr.text()
    }
}

/// The last bytes of a server's stderr; a task drains the pipe so the server never blocks on it.
#[derive(Clone, Default)]
struct StderrTail(Arc<Mutex<Vec<u8>>>);

impl StderrTail {
    fn drain(&self, mut stderr: impl tokio::io::AsyncRead + Unpin + Send + 'static) {
        let tail = self.clone();
        tokio::spawn(async move {
            let mut chunk = vec![0; 8192];
            while let Ok(read) = stderr.read(&mut chunk).await {
                if read == 0 {
                    break;
                }
                tail.push(&chunk[..read]);
            }
        });
    }

    fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        tail.extend_from_slice(bytes);
        if tail.len() > 2 * STDERR_TAIL_BYTES {
            let excess = tail.len() - STDERR_TAIL_BYTES;
            tail.drain(..excess);
        }
    }

    fn text(&self) -> String {
        let tail = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let start = tail.len().saturating_sub(STDERR_TAIL_BYTES);
        String::from_utf8_lossy(&tail[start..]).trim().to_owned()
    }

    /// `"; its stderr ended with: …"`, or nothing.
    fn suffix(&self) -> String {
        let text = self.text();
        if text.is_empty() {
            String::new()
        } else {
            format!("; its stderr ended with: {text}")
        }
    }
}

/// Starts every configured server, lists its tools and wraps each one as a deferred extension
/// tool `mcp__<server>__<tool>`. The servers start at the same time, so start-up waits for the
/// slowest one, not for the sum of their timeouts; tools and problems come back in
/// configuration order. A server that cannot be started, does not answer in time or breaks the
/// listing rules is left out and reported in [`McpStartup::problems`]; the other servers still
/// load. Nothing here fails the whole start-up.
///
/// Each server runs confined by the MCP-server profile of `sandbox` (the host's one policy):
/// the workspace read-only and no network unless its entry says `workspace = "write"`,
/// `network = true` or names `writable` folders, or runs it `unconfined = true`.
pub async fn connect_servers(config: &McpConfig, sandbox: &SandboxConfig) -> McpStartup {
    let mut connecting = tokio::task::JoinSet::new();
    let mut names = HashMap::new();
    for (index, server) in config.mcp_servers.iter().cloned().enumerate() {
        let name = server.name.clone();
        let sandbox = sandbox.clone();
        let task =
            connecting.spawn(async move { (index, connect_server(&server, &sandbox).await) });
        names.insert(task.id(), name);
    }
    let mut connected = Vec::new();
    while let Some(joined) = connecting.join_next_with_id().await {
        connected.push(match joined {
            Ok((_, indexed)) => indexed,
            // A bug, not a server's fault: reported like a server that broke, never a panic here.
            Err(error) => {
                let server = names.get(&error.id()).cloned().unwrap_or_default();
                let message = format!("connecting failed inside clawsmith: {error}");
                (usize::MAX, Err(McpError::Connect { server, message }))
            }
        });
    }
    connected.sort_by_key(|(index, _)| *index);
    let mut startup = McpStartup::default();
    for (_, result) in connected {
        match result {
            Ok(server) => {
                startup.tools.extend(server.tools);
                startup.problems.extend(server.problems);
            }
            Err(problem) => startup.problems.push(problem),
        }
    }
    startup
}

/// [`connect_servers`] for one server: `Err` when it is left out, otherwise its tools and the
/// problems of single tools (left out) or of the listing (cut short).
pub async fn connect_server(
    server: &McpServerConfig,
    sandbox: &SandboxConfig,
) -> Result<McpStartup, McpError> {
    let deadline = Instant::now() + server.startup_timeout();
    let (connection, stderr) = spawn(server, sandbox, deadline).await?;
    let timed_out = |step: &'static str| McpError::Timeout {
        server: server.name.clone(),
        step,
        after_ms: server.startup_timeout().as_millis(),
        stderr: stderr.suffix(),
    };
    let listed = tokio::time::timeout_at(deadline, list_tools(connection.service.peer(), server))
        .await
        .map_err(|_| timed_out("tools/list"))??;
    let mut problems: Vec<McpError> = listed
        .cut
        .map(|message| McpError::Listing {
            server: server.name.clone(),
            message,
        })
        .into_iter()
        .collect();
    let mut left_out: Vec<String> = listed
        .oversized
        .iter()
        .map(|name| {
            format!(
                "`{name}` (its definition is over {} KiB)",
                MAX_TOOL_DEFINITION_BYTES / 1024
            )
        })
        .collect();
    let connection = Arc::new(connection);
    let capabilities = match &server.capabilities {
        Some(list) => CapabilityDeclaration::Raw(serde_json::json!(list)),
        None => CapabilityDeclaration::Missing,
    };
    let risk = server.risk.unwrap_or(Risk::Execute);
    let remote_names: Vec<&str> = listed.tools.iter().map(|tool| tool.name.as_ref()).collect();
    let names = assign_names(&server.name, &remote_names);
    let mut tools = Vec::new();
    for (remote, name) in listed.tools.into_iter().zip(names) {
        // The core refuses a schema that does not compile: check it here, per tool.
        let schema = serde_json::Value::Object(remote.input_schema.as_ref().clone());
        let checked = name.and_then(|name| match jsonschema::validator_for(&schema) {
            Ok(_) => Ok(name),
            Err(error) => Err(format!("its input schema is invalid: {error}")),
        });
        let name = match checked {
            Ok(name) => name,
            Err(reason) => {
                left_out.push(format!("`{}` ({reason})", remote.name));
                continue;
            }
        };
        let tool = McpTool::new(
            Arc::clone(&connection),
            name,
            remote,
            capabilities.clone(),
            risk,
        );
        tools.push(ExtensionTool {
            source: format!("{MCP_SOURCE_PREFIX}{}", server.name),
            tool: Arc::new(tool),
            deferred: true,
        });
    }
    if !left_out.is_empty() {
        problems.push(McpError::Listing {
            server: server.name.clone(),
            message: format!("tools left out: {}", left_out.join(", ")),
        });
    }
    Ok(McpStartup { tools, problems })
}

/// Spawns the server — confined by the MCP-server profile of `sandbox`, or as configured
/// `unconfined` — and answers its handshake before `deadline`.
async fn spawn(
    server: &McpServerConfig,
    sandbox: &SandboxConfig,
    deadline: Instant,
) -> Result<(McpConnection, StderrTail), McpError> {
    let spawn_error = |cause| McpError::Spawn {
        server: server.name.clone(),
        command: server.command.clone(),
        cause,
    };
    let stderr = StderrTail::default();
    if let Some(url) = &server.url {
        let credentials = match sandbox.state_dir() {
            StateDir::At(dir) => Some(dir.join(crate::remote::CREDENTIALS_DIR)),
            StateDir::NotKept => None,
        };
        let remote = |message| McpError::Remote {
            server: server.name.clone(),
            url: url.clone(),
            message,
        };
        let faults = crate::remote::Faults::default();
        let built = tokio::time::timeout_at(
            deadline,
            crate::remote::transport(server, url, credentials.as_deref(), &faults),
        )
        .await
        .map_err(|_| McpError::Timeout {
            server: server.name.clone(),
            step: "OAuth",
            after_ms: server.startup_timeout().as_millis(),
            stderr: String::new(),
        })?
        .map_err(remote)?;
        let process = ServerProcess::Remote(faults);
        return match built {
            RemoteTransport::Plain(transport) => {
                handshake(server, transport, process, stderr, deadline).await
            }
            RemoteTransport::OAuth(transport) => {
                handshake(server, transport, process, stderr, deadline).await
            }
        };
    }
    if server.unconfined {
        let mut child = spawn_unconfined(server).map_err(spawn_error)?;
        let pipes = (child.stdin.take(), child.stdout.take());
        let (Some(stdin), Some(stdout)) = pipes else {
            return Err(spawn_error(std::io::Error::other("no stdio pipes")));
        };
        if let Some(pipe) = child.stderr.take() {
            stderr.drain(pipe);
        }
        let transport = ClientTransport::new(&server.name, stdout, stdin, MAX_ANSWER_LINE_BYTES);
        return handshake(
            server,
            transport,
            ServerProcess::Unconfined { _child: child },
            stderr,
            deadline,
        )
        .await;
    }
    // The shell the sandbox starts would report a missing program only as exit 127 after the
    // handshake failed: say it here, as an unconfined spawn would.
    if !program_exists(&server.command) {
        return Err(spawn_error(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such program (an absolute path, or a name found on PATH)",
        )));
    }
    let mut profile = sandbox.for_process(ProcessKind::McpServer {
        writes: server.workspace == WorkspaceAccess::Write,
        network: server.network,
        writable: server.writable.clone(),
    });
    profile.env_exact = server.env.clone();
    let words: Vec<String> = std::iter::once(server.command.clone())
        .chain(server.args.iter().cloned())
        .collect();
    let profile = profile.seeing_code_of(&words);
    let (process, io) = spawn_piped_argv(&profile, &Argv::new(&server.command, &server.args), None)
        .map_err(|error| spawn_error(std::io::Error::other(error.to_string())))?;
    let PipedIo {
        stdin,
        stdout,
        stderr: stderr_pipe,
    } = io;
    stderr.drain(stderr_pipe);
    let transport = ClientTransport::new(&server.name, stdout, stdin, MAX_ANSWER_LINE_BYTES);
    handshake(
        server,
        transport,
        ServerProcess::Confined {
            _process: Box::new(process),
        },
        stderr,
        deadline,
    )
    .await
}

/// Whether `command` names an executable file: as a path when it has a `/`, else on `PATH`.
fn program_exists(command: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &std::path::Path| {
        std::fs::metadata(path)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        return executable(std::path::Path::new(command));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(command))))
}

/// The server as the user's own MCP hosts start it: outside the sandbox, with an environment
/// made only of the variables its entry lists.
fn spawn_unconfined(server: &McpServerConfig) -> std::io::Result<tokio::process::Child> {
    // The documented exception to "only the sandbox spawns" (ARCHITECTURE): a server the user
    // configured `unconfined = true`, started with an empty environment plus the variables
    // they listed.
    #[allow(clippy::disallowed_methods)]
    let mut command = tokio::process::Command::new(&server.command);
    command
        .args(&server.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // A withheld variable (a credential this process read, such as the fleet store's
    // connection string) is never passed on, even when the entry lists it.
    for name in server
        .env
        .iter()
        .filter(|name| !clawsmith_core::sandbox::is_withheld(name.as_ref()))
    {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.spawn()
}

/// What a confined server's failed start adds to its error: the keys that loosen it.
fn confinement_hint(server: &McpServerConfig) -> String {
    if server.unconfined {
        return String::new();
    }
    format!(
        " (it runs confined: workspace {}, network {}{}; if it needs more, set `network = \
         true`, `workspace = \"write\"`, `writable = [...]` or `unconfined = true` in its \
         [[mcp_servers]] entry)",
        if server.workspace == WorkspaceAccess::Write {
            "writable"
        } else {
            "read-only"
        },
        if server.network { "on" } else { "off" },
        if server.writable.is_empty() {
            String::new()
        } else {
            format!(", writable: {}", server.writable.len())
        }
    )
}

/// The `initialize` exchange over `transport`, before `deadline`.
async fn handshake<T, E, A>(
    server: &McpServerConfig,
    transport: T,
    process: ServerProcess,
    stderr: StderrTail,
    deadline: Instant,
) -> Result<(McpConnection, StderrTail), McpError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let listener = ProgressListener::default();
    let progress = listener.dispatcher.clone();
    let service = match tokio::time::timeout_at(deadline, listener.serve(transport)).await {
        Ok(Ok(service)) => service,
        Ok(Err(error)) => {
            return Err(McpError::Connect {
                server: server.name.clone(),
                message: format!(
                    "handshake failed: {error}{}{}",
                    stderr.suffix(),
                    confinement_hint(server)
                ),
            });
        }
        Err(_) => {
            return Err(McpError::Timeout {
                server: server.name.clone(),
                step: "initialize",
                after_ms: server.startup_timeout().as_millis(),
                stderr: format!("{}{}", stderr.suffix(), confinement_hint(server)),
            });
        }
    };
    let connection = McpConnection {
        server: server.name.clone(),
        service,
        progress,
        call_timeout: server.call_timeout(),
        call_max: server.call_max(),
        stderr: stderr.clone(),
        process,
    };
    Ok((connection, stderr))
}

/// What a bounded `tools/list` gave.
#[derive(Default)]
struct Listed {
    tools: Vec<rmcp::model::Tool>,
    /// Names of tools whose definition was over [`MAX_TOOL_DEFINITION_BYTES`] (dropped at once).
    oversized: Vec<String>,
    /// Why the listing stopped early, if it did.
    cut: Option<String>,
}

/// Every page of `tools/list`, within [`MAX_LIST_PAGES`] and [`MAX_SERVER_TOOLS`]; a repeated
/// cursor ends the listing. Going over a limit keeps what was listed and says so in `cut`.
async fn list_tools(peer: &Peer<RoleClient>, server: &McpServerConfig) -> Result<Listed, McpError> {
    let mut listed = Listed::default();
    let mut cursors = HashSet::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|error| McpError::Connect {
                server: server.name.clone(),
                message: format!("tools/list failed: {error}"),
            })?;
        for tool in page.tools {
            // Kept definitions are bounded one by one, so the whole listing is too.
            let bytes = serde_json::to_vec(&tool).map_or(usize::MAX, |json| json.len());
            if bytes > MAX_TOOL_DEFINITION_BYTES {
                listed.oversized.push(tool.name.to_string());
            } else {
                listed.tools.push(tool);
            }
        }
        if listed.tools.len() > MAX_SERVER_TOOLS {
            listed.tools.truncate(MAX_SERVER_TOOLS);
            listed.cut = Some(format!(
                "more than {MAX_SERVER_TOOLS} tools; kept the first ones"
            ));
            return Ok(listed);
        }
        let Some(next) = page.next_cursor else {
            return Ok(listed);
        };
        if !cursors.insert(next.clone()) {
            listed.cut = Some(format!(
                "tools/list repeated the cursor {next:?}; listing stopped"
            ));
            return Ok(listed);
        }
        cursor = Some(next);
    }
    listed.cut = Some(format!(
        "tools/list went on past {MAX_LIST_PAGES} pages; listing stopped"
    ));
    Ok(listed)
}

/// The table names of a server's tools, in order: [`tool_name`] when it is unique among them;
/// when sanitising or truncating made names collide, each colliding tool gets a suffix hashed
/// from its own remote name (`_` and 8 hex digits), so the result does not depend on listing
/// order. A name still taken (the same remote name twice: the first keeps it) is `Err` with
/// the reason.
fn assign_names(server: &str, remote_names: &[&str]) -> Vec<Result<String, String>> {
    let plain: Vec<String> = remote_names
        .iter()
        .map(|remote| tool_name(server, remote))
        .collect();
    // Plain name ⇒ the distinct remote names that reduce to it.
    let mut sources: HashMap<&str, HashSet<&str>> = HashMap::new();
    for (remote, name) in remote_names.iter().zip(&plain) {
        sources.entry(name.as_str()).or_default().insert(remote);
    }
    let mut taken = HashSet::new();
    remote_names
        .iter()
        .zip(&plain)
        .map(|(remote, name)| {
            let name = if sources
                .get(name.as_str())
                .is_some_and(|remotes| remotes.len() > 1)
            {
                let suffix = format!("_{:08x}", fnv1a(remote.as_bytes()) as u32);
                let mut base = name.clone();
                base.truncate(MAX_TOOL_NAME_BYTES - suffix.len());
                base + &suffix
            } else {
                name.clone()
            };
            if taken.insert(name.clone()) {
                Ok(name)
            } else {
                Err(format!(
                    "its name `{name}` is already taken by another tool"
                ))
            }
        })
        .collect()
}

/// FNV-1a, 64 bits: a stable, dependency-free hash for name suffixes (not for security: the
/// server chooses its names anyway).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One tool of an external MCP server, as a deferred clawsmith tool.
pub struct McpTool {
    connection: Arc<McpConnection>,
    name: String,
    remote_name: String,
    description: String,
    schema: serde_json::Value,
    capabilities: CapabilityDeclaration,
    risk: Risk,
    search: SearchMetadata,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("McpTool")
            .field("name", &self.name)
            .field("server", &self.connection.server)
            .field("remote_name", &self.remote_name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    fn new(
        connection: Arc<McpConnection>,
        name: String,
        remote: rmcp::model::Tool,
        capabilities: CapabilityDeclaration,
        risk: Risk,
    ) -> McpTool {
        let remote_name = remote.name.to_string();
        let title = remote
            .title
            .clone()
            .or_else(|| remote.annotations.as_ref().and_then(|a| a.title.clone()));
        let remote_description = remote
            .description
            .as_deref()
            .unwrap_or("")
            .trim()
            .to_owned();
        let description = if remote_description.is_empty() {
            title.clone().unwrap_or_else(|| {
                format!(
                    "Tool `{remote_name}` of the MCP server `{}`.",
                    connection.server
                )
            })
        } else {
            remote_description.clone()
        };
        let description = truncate_to_boundary(description, MAX_DESCRIPTION_BYTES);
        let search = SearchMetadata {
            aliases: std::iter::once(remote_name.clone())
                .chain(title.clone())
                .collect(),
            tags: vec!["mcp".to_owned(), connection.server.clone()],
            search_hint: Some(truncate_to_boundary(
                match (&title, remote_description.is_empty()) {
                    (Some(title), false) => format!("{title}: {remote_description}"),
                    (Some(title), true) => title.clone(),
                    (None, _) => description.clone(),
                },
                MAX_DESCRIPTION_BYTES,
            )),
        };
        McpTool {
            name,
            remote_name,
            description,
            schema: serde_json::Value::Object(remote.input_schema.as_ref().clone()),
            capabilities,
            risk,
            search,
            connection,
        }
    }

    /// The tool's name on its server.
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }

    async fn forward(
        &self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolExecutionResult {
        if let Err(refusal) = context.require_authorization(&self.name) {
            return refusal;
        }
        let mut params = CallToolRequestParams::new(self.remote_name.clone());
        match input {
            serde_json::Value::Object(arguments) => params = params.with_arguments(arguments),
            serde_json::Value::Null => {}
            other => {
                return ToolExecutionResult::failure(
                    ErrorCode::INVALID_ARGUMENTS,
                    format!("{} takes an object, not {other}", self.name),
                );
            }
        }
        if let Some(trace) = &context.trace {
            // The server sees this call's execute_tool span as its parent.
            params.meta = Some(crate::trace::outgoing_meta(trace));
        }
        let peer = self.connection.service.peer();
        let (call_timeout, call_max) = (self.connection.call_timeout, self.connection.call_max);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => return map_answer(&self.name, &self.connection, Err(error)),
        };
        // rmcp gave the request a progress token: each `notifications/progress` for it starts
        // the idle wait again; the total is capped whatever the progress.
        let mut progress = self
            .connection
            .progress
            .subscribe(handle.progress_token.clone())
            .await;
        let id = handle.id.clone();
        // A request given up on is cancelled from a task of its own: a server that stopped
        // reading must not hold the answer to the model back.
        let give_up = |reason: &str| {
            let peer = peer.clone();
            let cancelled =
                CancelledNotificationParam::new(Some(id.clone()), Some(reason.to_owned()));
            tokio::spawn(async move {
                let _ = peer.notify_cancelled(cancelled).await;
            });
        };
        let timed_out = |what: String, key: &str| {
            ToolExecutionResult::failure(
                TIMEOUT,
                format!(
                    "{}: the MCP server `{}` {what} (raise `{key}` in clawsmith.toml if it needs \
                     longer){}",
                    self.name,
                    self.connection.server,
                    self.connection.stderr.suffix(),
                ),
            )
        };
        let response = handle.await_response();
        let idle = tokio::time::sleep(call_timeout);
        let hard = tokio::time::sleep(call_max);
        tokio::pin!(response, idle, hard);
        let answer = loop {
            tokio::select! {
                answer = &mut response => break answer,
                Some(_) = progress.next() => {
                    idle.as_mut().reset(Instant::now() + call_timeout);
                }
                () = context.cancellation.cancelled() => {
                    give_up("cancelled by the client");
                    return ToolExecutionResult::failure(
                        ErrorCode::CANCELLED,
                        format!("{} was cancelled while the MCP server worked on it.", self.name),
                    );
                }
                () = &mut idle => {
                    give_up("request timeout");
                    return timed_out(
                        format!(
                            "neither answered nor reported progress for {} ms",
                            call_timeout.as_millis()
                        ),
                        "call_timeout_ms",
                    );
                }
                () = &mut hard => {
                    give_up("maximum total timeout exceeded");
                    return timed_out(
                        format!("did not answer within {} ms", call_max.as_millis()),
                        "call_max_ms",
                    );
                }
            }
        };
        let answer = match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(_) => Err(ServiceError::UnexpectedResponse),
            Err(error) => Err(error),
        };
        map_answer(&self.name, &self.connection, answer)
    }
}

/// `mcp__<server>__<tool>`, the tool part reduced to the characters provider APIs accept.
pub fn tool_name(server: &str, remote_name: &str) -> String {
    let tool: String = remote_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{MCP_TOOL_PREFIX}{server}__{tool}");
    name.truncate(MAX_TOOL_NAME_BYTES);
    name
}

/// The MCP answer as a clawsmith result: `isError` ⇒ `tool_failed`; text content ⇒ the text;
/// other content is named, never inlined (images, blobs).
fn map_answer(
    name: &str,
    connection: &McpConnection,
    answer: Result<CallToolResult, ServiceError>,
) -> ToolExecutionResult {
    let server = connection.server.as_str();
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            let fault = connection
                .fault()
                .map(|fault| format!(" ({fault})"))
                .unwrap_or_default();
            return ToolExecutionResult::tool_failed(format!(
                "{name}: the MCP server `{server}` failed: {error}{fault}"
            ));
        }
    };
    let mut parts: Vec<String> = answer.content.iter().map(content_text).collect();
    if parts.iter().all(String::is_empty)
        && let Some(structured) = &answer.structured_content
    {
        parts = vec![structured.to_string()];
    }
    let text = parts.join("\n");
    if answer.is_error == Some(true) {
        let message = if text.trim().is_empty() {
            format!("{name}: the MCP server `{server}` reported an error without a message")
        } else {
            text
        };
        ToolExecutionResult::tool_failed(message)
    } else {
        ToolExecutionResult::success(neutralize_status_prefix(server, text))
    }
}

/// A successful answer whose text starts like a clawsmith status (`Error: `, `Denied: `, …)
/// would read, to anything that infers status from text (P11), as a failure clawsmith never
/// reported: such text is put behind a prefix naming the server.
fn neutralize_status_prefix(server: &str, text: String) -> String {
    if infer_status_from_content(&text) == ToolStatus::Success {
        text
    } else {
        format!("[MCP server `{server}` answered] {text}")
    }
}

fn content_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!("[image: {}]", image.mime_type),
        ContentBlock::Audio(audio) => format!("[audio: {}]", audio.mime_type),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => text.clone(),
            ResourceContents::BlobResourceContents { uri, .. } => format!("[resource: {uri}]"),
            _ => "[resource]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
        _ => "[unsupported content]".to_owned(),
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn risk(&self) -> Risk {
        self.risk
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        self.capabilities.clone()
    }

    fn concurrency_safe(&self) -> bool {
        // Nothing is known about the server's internals; run its calls one at a time.
        false
    }

    fn input_schema(&self) -> serde_json::Value {
        self.schema.clone()
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        let arguments = truncate_to_boundary(input.to_string(), 160);
        format!(
            "MCP {}/{} {arguments}",
            self.connection.server, self.remote_name
        )
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move { ToolOutput::Result(self.forward(input, context).await) })
    }

    fn deferred(&self) -> Option<SearchMetadata> {
        Some(self.search.clone())
    }
}
