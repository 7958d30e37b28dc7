//! The MCP server (X1): the core's frozen table over `tools/list`, the whole core pipeline behind
//! `tools/call`, one long-lived session per connection.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use clawsmith_core::{
    AgentCore, BatchOptions, EventSink, NullSink, OpeningRequest, SessionHandle, ShownTool,
    TurnOptions, TurnOutcome,
};
use clawsmith_protocol::{CancellationSignal, Risk, ToolCall, ToolExecutionResult, ToolStatus};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    ElicitRequest, ElicitResult, ElicitationAction, GetTaskParams, GetTaskResult, Implementation,
    InputRequest, InputRequests, InputRequiredResult, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::IntoTransport;
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::approval::{ElicitingApprover, approval_form};
use crate::error::McpError;
use crate::jsonrpc::ServerTransport;

/// The name the server gives in `serverInfo`.
pub const SERVER_NAME: &str = "clawsmith";
/// The version the server gives in `serverInfo`: this crate's version.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The name of the core's deferred-tool search, after which the server announces
/// `notifications/tools/list_changed`.
pub const SEARCH_TOOLS: &str = "search_tools";

/// The key of the approval question in an `input_required` result (and of its answer in the
/// retried request's `inputResponses`).
pub const APPROVAL_INPUT: &str = "clawsmith_approval";
/// How long the connection keeps its session's lease after a call: calls that follow
/// sooner reuse it; after this long without one it is let go of, so `clawsmith undo` and other
/// processes find the session free (one that comes sooner is let in at the next call, or waits
/// this long: [`clawsmith_core::checkpoint::LINGERING_HOLDER`]).
pub const LEASE_IDLE: std::time::Duration = std::time::Duration::from_millis(50);

/// Approval questions waiting for their retry; beyond this many, the oldest are forgotten (their
/// retry is simply asked again).
const MAX_PENDING_APPROVALS: usize = 64;

const INSTRUCTIONS: &str = "clawsmith exposes workspace file tools, commands, todos and artifacts \
     with the same permission mode, limits, checkpoints and audit events as its command line. \
     Every tools/call is one turn of one long-lived session; `clawsmith undo` reverts it. A result \
     with isError carries its status and code in structuredContent. Tools hidden behind \
     `search_tools` appear in tools/list once a search finds them.";

/// How [`serve`] runs. The permission mode, rules, sandbox and table come from the core itself.
#[derive(Clone, Default)]
pub struct ServerOptions {
    /// Continue this session (created under this id when new); `None` starts a fresh session.
    pub session_id: Option<String>,
    /// The approver the core was built with (`CoreConfig::approver`), so that `ask` decisions can
    /// be put to the client through MCP elicitation. `None`: nobody is asked, and the core's mode
    /// decides alone (`ask` becomes `permission_denied`).
    pub approver: Option<Arc<ElicitingApprover>>,
    /// Receives every stored event (e.g. a log on stderr); `None` drops them.
    pub event_sink: Option<Arc<dyn EventSink>>,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ServerOptions")
            .field("session_id", &self.session_id)
            .field("approver", &self.approver.is_some())
            .field("event_sink", &self.event_sink.is_some())
            .finish()
    }
}

/// The MCP server over one core and one session. Cheap to clone (shared state).
#[derive(Clone)]
pub struct ClawsmithServer {
    inner: Arc<Inner>,
}

struct Inner {
    core: Arc<AgentCore>,
    session: SessionHandle,
    /// Turns of one session run one at a time: each has its own checkpoint, and undo reverts
    /// whole turns, so two interleaved turns would each claim the other's edits.
    turn_lock: tokio::sync::Mutex<()>,
    approver: Option<Arc<ElicitingApprover>>,
    sink: Arc<dyn EventSink>,
    calls: AtomicU64,
    /// `requestState` token ⇒ the call (name and arguments) its approval question was about.
    pending_approvals: Mutex<HashMap<String, (u64, String)>>,
    /// Fired once the connection ends (client gone, signal): the running turn is cancelled and
    /// no new one starts. Every `tools/call` task awaits it; a wait dropped with its finished
    /// call takes its waker out (otherwise each call's ~13 KB future would stay reachable
    /// until the connection closed).
    shutdown: CancellationSignal,
    /// Turns finished so far: the idle watcher lets go of the lease after [`LEASE_IDLE`] without
    /// a new one.
    turns_done: AtomicU64,
    /// Calls that became tasks (`tasks.rs`).
    tasks: crate::tasks::Tasks,
    /// Wakes the idle watcher when a turn left the lease kept.
    lease_kept: tokio::sync::Notify,
}

impl std::fmt::Debug for ClawsmithServer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ClawsmithServer")
            .field("session", &self.inner.session.id())
            .field("core", &self.inner.core)
            .finish_non_exhaustive()
    }
}

/// Serves `core` over `transport` until the client disconnects: opens the connection's session,
/// answers the handshake, then `tools/list` and `tools/call`. Over byte pipes prefer
/// [`serve_io`], which adds the line cap, the JSON-RPC error answers and backpressure.
pub async fn serve<T, E, A>(
    core: Arc<AgentCore>,
    options: ServerOptions,
    transport: T,
) -> Result<(), McpError>
where
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    ClawsmithServer::new(core, options)?
        .serve_transport(transport)
        .await
}

/// Serves `core` over a pair of byte pipes (newline-delimited JSON-RPC) until the client closes
/// `read`: every line capped at [`crate::MAX_REQUEST_LINE_BYTES`], malformed messages answered
/// per JSON-RPC 2.0, and at most [`crate::MAX_UNANSWERED_REQUESTS`] requests read and not yet
/// answered (a client that does not read its answers stops being read).
pub async fn serve_io<R, W>(
    core: Arc<AgentCore>,
    options: ServerOptions,
    read: R,
    write: W,
) -> Result<(), McpError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    ClawsmithServer::new(core, options)?
        .serve_lines(read, write)
        .await
}

/// [`serve_io`] over this process's stdin and stdout (what `clawsmith mcp` runs), until the
/// client disconnects or SIGTERM, SIGHUP or SIGINT arrives; either way the running call is
/// cancelled and its turn finished before this returns. Nothing else may write to stdout.
/// Run it on [`stdio_runtime`]; it also tunes the process's allocator for a long-lived server
/// (see `keep_freed_memory`).
pub async fn serve_stdio(core: Arc<AgentCore>, options: ServerOptions) -> Result<(), McpError> {
    keep_freed_memory();
    let stop = termination_signals()?;
    let (read, write) = stdio_pipes();
    ClawsmithServer::new(core, options)?
        .serve_lines_until(read, write, stop)
        .await
}

/// The runtime [`serve_stdio`] runs on in `clawsmith mcp`: a worker per core, and at least two.
///
/// The file tools work synchronously inside their task, within their own limits (a search stops
/// after 2,000 files or 2 MiB read, a glob after 20,000 files) — but a read on a hung network
/// mount has no limit of its own. With a second worker the call's timeout, a
/// `notifications/cancelled`, a signal and the other requests are still acted on while one
/// tool holds a thread. One thread was measured (☉ in docs/benchmarks.md): ~1.2
/// fewer context switches and ~8% less processor time a `read_file` call (the idle worker is
/// woken at the hand-offs between the connection's tasks), and not taken for that reason.
pub fn stdio_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores.max(2))
        .enable_all()
        .build()
}

/// How much freed memory glibc keeps for reuse instead of returning it to the kernel, per arena.
const KEEP_FREED_BYTES: usize = 4 * 1024 * 1024;

/// Keeps up to ~8 MiB of freed memory with the allocator (glibc) instead of handing it back to
/// the kernel at every `free`.
///
/// glibc trims an arena as soon as its free top exceeds 128 KiB: the 10 KB results, their
/// JSON and SQLite's page-cache chunks of each `read_file` call were allocated, freed, trimmed
/// (`madvise`, ~3 a call) and faulted in again at the next call (~27 of ~30 page faults a call,
/// ~10% of the server's processor time). glibc raises its trim threshold to twice the size of
/// a freed block that was `mmap`ped (its "dynamic mmap threshold", mallopt(3)): freeing one
/// such block of [`KEEP_FREED_BYTES`] sets it to 8 MiB, without the `unsafe` call to
/// `mallopt`. Blocks under 4 MiB then come from the arenas. With another allocator than glibc's
/// this is one allocation and nothing else.
fn keep_freed_memory() {
    let block: Vec<u8> = Vec::with_capacity(KEEP_FREED_BYTES);
    drop(std::hint::black_box(block));
}

/// Resolves at the first SIGTERM, SIGHUP or SIGINT. The handlers are installed now, before the
/// returned future is first polled, so no signal is missed during the handshake.
fn termination_signals() -> Result<impl Future<Output = ()>, McpError> {
    use tokio::signal::unix::{SignalKind, signal};
    let install = |kind: SignalKind| {
        signal(kind).map_err(|error| McpError::Serve(format!("cannot handle signals: {error}")))
    };
    let mut terminate = install(SignalKind::terminate())?;
    let mut hangup = install(SignalKind::hangup())?;
    let mut interrupt = install(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = hangup.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// Stdin and stdout as non-blocking pipes when they are pipes (what MCP clients give): tokio's
/// own `stdin()`/`stdout()` read and write on blocking threads, and a read waiting for a client
/// that keeps stdin open (or a write to a client that stopped reading) would keep the runtime,
/// and so the process, from ending after a signal. Anything else (a file, a terminal) falls back
/// to tokio's handles.
fn stdio_pipes() -> (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let read: Box<dyn AsyncRead + Unpin + Send> = match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd)
    {
        Ok(receiver) => Box::new(receiver),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let write: Box<dyn AsyncWrite + Unpin + Send> = match std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Sender::from_owned_fd)
    {
        Ok(sender) => Box::new(sender),
        Err(_) => Box::new(tokio::io::stdout()),
    };
    (read, write)
}

impl ClawsmithServer {
    /// Opens the session (continuing `options.session_id` when it exists; recovery runs first).
    pub fn new(core: Arc<AgentCore>, options: ServerOptions) -> Result<ClawsmithServer, McpError> {
        let session = core.open_session(options.session_id)?;
        Ok(ClawsmithServer {
            inner: Arc::new(Inner {
                core,
                session,
                turn_lock: tokio::sync::Mutex::new(()),
                approver: options.approver,
                sink: options.event_sink.unwrap_or_else(|| Arc::new(NullSink)),
                calls: AtomicU64::new(0),
                pending_approvals: Mutex::new(HashMap::new()),
                shutdown: CancellationSignal::new(),
                turns_done: AtomicU64::new(0),
                tasks: crate::tasks::Tasks::default(),
                lease_kept: tokio::sync::Notify::new(),
            }),
        })
    }

    /// The connection's session id (what `clawsmith undo list --session` takes).
    pub fn session_id(&self) -> &str {
        self.inner.session.id()
    }

    /// Serves over `transport` until the client disconnects.
    pub async fn serve_transport<T, E, A>(self, transport: T) -> Result<(), McpError>
    where
        T: IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.serve_until(transport, std::future::pending()).await
    }

    /// [`serve_io`] for this server: serves over a pair of byte pipes until the client closes
    /// `read`.
    pub async fn serve_lines<R, W>(self, read: R, write: W) -> Result<(), McpError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        self.serve_lines_until(read, write, std::future::pending())
            .await
    }

    /// [`ClawsmithServer::serve_lines`] until `stop` resolves too. The client closing `read`
    /// cancels the running call at once.
    async fn serve_lines_until<R, W>(
        self,
        read: R,
        write: W,
        stop: impl Future<Output = ()>,
    ) -> Result<(), McpError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let transport = ServerTransport::new(read, write, self.inner.shutdown.clone());
        self.serve_until(transport, stop).await
    }

    /// Serves over `transport` until the client disconnects or `stop` resolves. Either way the
    /// connection ends like a clean exit: the running call is cancelled (`cancelled`), its turn
    /// and checkpoint are finished, and no other turn starts.
    pub async fn serve_until<T, E, A>(
        self,
        transport: T,
        stop: impl Future<Output = ()>,
    ) -> Result<(), McpError>
    where
        T: IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let server = self.clone();
        // The lease stays with the connection while calls keep coming (see `LEASE_IDLE`).
        self.inner.session.keep_lease_between_turns();
        let watcher = tokio::spawn(release_when_idle(Arc::clone(&self.inner)));
        tokio::pin!(stop);
        let served = async {
            let running = tokio::select! {
                running = ServiceExt::serve(self, transport) => {
                    running.map_err(|error| McpError::Handshake(error.to_string()))?
                }
                () = &mut stop => return Ok(()),
            };
            let cancel = running.cancellation_token();
            let waiting = running.waiting();
            tokio::pin!(waiting);
            tokio::select! {
                quit = &mut waiting => quit,
                () = &mut stop => {
                    cancel.cancel();
                    waiting.await
                }
            }
            .map(drop)
            .map_err(|error| McpError::Serve(error.to_string()))
        }
        .await;
        server.shut_down().await;
        watcher.abort();
        served
    }

    /// Cancels the running turn, waits until it is finished, refuses later ones, and lets go
    /// of the session's lease.
    async fn shut_down(&self) {
        self.inner.shutdown.cancel();
        // A turn holds the lock from its start to its finish: once we hold it, none runs.
        let idle = self.inner.turn_lock.lock().await;
        self.inner.session.release_lease();
        drop(idle);
    }

    /// What `tools/list` answers: the tools shown to the next request (pending `search_tools`
    /// activations become active now, recorded as a `model.request` event).
    pub fn list(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let evidence = self.inner.session.model_request(self.inner.sink.as_ref())?;
        Ok(evidence
            .tools
            .iter()
            .map(|shown| self.mcp_tool(shown))
            .collect())
    }

    fn mcp_tool(&self, shown: &ShownTool) -> rmcp::model::Tool {
        let effective_risk = self
            .inner
            .core
            .tools()
            .get(&shown.name)
            .map_or(Risk::Execute, |entry| entry.facts().effective_risk);
        let schema = match &shown.input_schema {
            serde_json::Value::Object(map) => map.clone(),
            // MCP requires an object schema; a tool accepting anything is shown as "any object".
            _ => {
                let mut map = JsonObject::new();
                map.insert("type".to_owned(), serde_json::json!("object"));
                map
            }
        };
        rmcp::model::Tool::new(
            shown.name.clone(),
            shown.description.clone(),
            Arc::new(schema),
        )
        .annotate(annotations(effective_risk))
    }

    /// Runs one call as its own turn and maps the result to MCP (or, when a stateless client
    /// must be asked first, to an `input_required` result carrying the question).
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
        let name = request.name.to_string();
        let fingerprint = format!("{name}\n{arguments}");
        let round_trip = asks_by_round_trip(context);
        let answer = if round_trip {
            self.take_answer(&request, &fingerprint)
        } else {
            None
        };
        let call = ToolCall {
            id: self.next_call_id(),
            name: name.clone(),
            arguments: arguments.to_string(),
        };
        let (outcome, question) = {
            let _turn = tokio::select! {
                turn = self.inner.turn_lock.lock() => turn,
                () = context.ct.cancelled() => {
                    return Err(McpError::Serve(format!("`{name}` was cancelled before it started")));
                }
            };
            if self.inner.shutdown.is_cancelled() {
                return Err(McpError::Serve(format!(
                    "`{name}` was not started: the server is shutting down"
                )));
            }
            if let Some(approver) = &self.inner.approver {
                if round_trip {
                    approver.bind_round_trip(answer);
                } else if has_handshake(context) {
                    approver.bind_peer(context.peer.clone());
                } else {
                    approver.unbind();
                }
            }
            let outcome = self.run_turn(call, context).await;
            self.inner.turns_done.fetch_add(1, Ordering::SeqCst);
            // Wakes the watcher when it sleeps; while it counts, this only leaves a permit.
            self.inner.lease_kept.notify_one();
            let outcome = outcome?;
            let question = self
                .inner
                .approver
                .as_ref()
                .and_then(|approver| approver.take_question());
            (outcome, question)
        };
        if let Some(question) = question {
            let token = self.remember_question(fingerprint);
            let mut requests = InputRequests::new();
            requests.insert(
                APPROVAL_INPUT.to_owned(),
                InputRequest::Elicitation(ElicitRequest::new(approval_form(question))),
            );
            return Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                Some(requests),
                Some(token),
            )));
        }
        let TurnOutcome {
            session_id,
            turn_id,
            results,
            ..
        } = outcome;
        let Some((tool_call_id, result)) = results.into_iter().next() else {
            return Err(McpError::Serve(format!(
                "the core closed the turn of `{name}` without a result"
            )));
        };
        if name == SEARCH_TOOLS && result.status() == ToolStatus::Success {
            // The hits become visible from the next request; tell the client to list again.
            // A client that ignores it still gets them on its next call's turn.
            if let Err(error) = context.peer.notify_tool_list_changed().await {
                tracing::warn!(%error, "the client could not be told that the tool list changed");
            }
        }
        Ok(CallToolResponse::Complete(mcp_result(
            result,
            session_id,
            turn_id,
            tool_call_id,
        )))
    }

    /// The person's answer carried by a retried request: only for a `requestState` this server
    /// issued for the very same call (name and arguments), and only once.
    fn take_answer(&self, request: &CallToolRequestParams, fingerprint: &str) -> Option<bool> {
        let token = request.request_state.as_deref()?;
        let (_, asked_about) = self
            .inner
            .pending_approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(token)?;
        if asked_about != fingerprint {
            return None;
        }
        let answer = request.input_responses.as_ref()?.get(APPROVAL_INPUT)?;
        let accepted = serde_json::from_value::<ElicitResult>(answer.clone())
            .is_ok_and(|answer| answer.action == ElicitationAction::Accept);
        Some(accepted)
    }

    fn remember_question(&self, fingerprint: String) -> String {
        let number = self.inner.calls.fetch_add(1, Ordering::Relaxed);
        let token = format!("{}-approval-{number}", self.session_id());
        let mut pending = self
            .inner
            .pending_approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if pending.len() >= MAX_PENDING_APPROVALS
            && let Some(oldest) = pending
                .iter()
                .min_by_key(|(_, (number, _))| *number)
                .map(|(token, _)| token.clone())
        {
            pending.remove(&oldest);
        }
        pending.insert(token.clone(), (number, fingerprint));
        token
    }

    async fn run_turn(
        &self,
        call: ToolCall,
        context: &RequestContext<RoleServer>,
    ) -> Result<TurnOutcome, McpError> {
        let sink = self.inner.sink.as_ref();
        // The client's `_meta.traceparent` parents this call's turn.
        let parent = crate::trace::incoming_parent(&context.meta);
        // The turn's start, its one model request, a read's records and the turn's end commit
        // together, at the finish; a side-effecting call commits its start (with the
        // turn's) before it runs.
        let mut turn = self.inner.session.begin_turn(
            sink,
            TurnOptions {
                parent: parent.as_ref(),
                request: OpeningRequest::NamesOnly,
            },
        )?;
        let cancellation = turn.cancellation();
        let results = {
            let batch = turn.run_batch(
                vec![call],
                sink,
                BatchOptions {
                    last: true,
                    ..BatchOptions::default()
                },
            );
            tokio::pin!(batch);
            tokio::select! {
                results = &mut batch => results,
                () = context.ct.cancelled() => {
                    // `notifications/cancelled`: the pipeline closes the call as `cancelled`.
                    cancellation.cancel();
                    batch.await
                }
                () = self.inner.shutdown.cancelled() => {
                    // The client left or a signal arrived: close the call as a clean exit would.
                    cancellation.cancel();
                    batch.await
                }
            }
        }?;
        let turn_id = turn.id().to_owned();
        let manifest = turn.finish(sink)?;
        Ok(TurnOutcome {
            session_id: self.session_id().to_owned(),
            turn_id,
            results,
            manifest,
        })
    }

    fn next_call_id(&self) -> String {
        // Unique within the session even when a later `clawsmith mcp --session` continues it.
        clawsmith_protocol::id::new_id(clawsmith_protocol::id::IdKind::Call)
    }
}

/// Lets go of the session's lease once no turn finished for [`LEASE_IDLE`]; sleeps while the
/// lease is let go of, until a turn finishes again.
async fn release_when_idle(inner: Arc<Inner>) {
    loop {
        inner.lease_kept.notified().await;
        loop {
            let seen = inner.turns_done.load(Ordering::SeqCst);
            tokio::select! {
                () = tokio::time::sleep(LEASE_IDLE) => {}
                () = inner.shutdown.cancelled() => return,
            }
            if inner.turns_done.load(Ordering::SeqCst) == seen {
                // A turn running now has the lease itself: nothing is let go of then.
                inner.session.release_lease();
                break;
            }
        }
    }
}

/// Whether the request came over a revision with an `initialize` handshake, where the server
/// may send requests to the client.
fn has_handshake(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_none_or(|version| version.has_initialize())
}

/// A stateless revision (no server-to-client requests) whose request declares elicitation:
/// questions travel in `input_required` results.
fn asks_by_round_trip(context: &RequestContext<RoleServer>) -> bool {
    !has_handshake(context)
        && context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some())
}

/// `readOnlyHint` for `read`, `destructiveHint` for writes and commands, from *effective* risk.
fn annotations(effective_risk: Risk) -> ToolAnnotations {
    match effective_risk {
        Risk::Read => ToolAnnotations::new().read_only(true).destructive(false),
        Risk::WorkspaceWrite => ToolAnnotations::new().read_only(false).destructive(true),
        Risk::Execute => ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .open_world(true),
    }
}

/// `content` = the model text; `isError` = status other than success; `structuredContent` =
/// the result metadata (`version`, `status`, `code`, `retryable`, `artifact`) plus the ids that
/// locate the call (`sessionId`, `turnId`, `toolCallId`). The result's text moves into the
/// answer (a `read_file` result is the whole file: no copy of it).
fn mcp_result(
    result: ToolExecutionResult,
    session_id: String,
    turn_id: String,
    tool_call_id: String,
) -> CallToolResult {
    let summary = result.summary();
    let success = result.status() == ToolStatus::Success;
    let content = vec![ContentBlock::text(result.content)];
    let mut mcp = if success {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    let mut structured = serde_json::to_value(summary)
        .ok()
        .and_then(|value| match value {
            serde_json::Value::Object(map) => Some(map),
            _ => None,
        })
        .unwrap_or_default();
    structured.insert("sessionId".to_owned(), session_id.into());
    structured.insert("turnId".to_owned(), turn_id.into());
    structured.insert("toolCallId".to_owned(), tool_call_id.into());
    mcp.structured_content = Some(serde_json::Value::Object(structured));
    mcp
}

/// The error for the client: the message and each cause once (`a: b: c`).
fn internal(error: McpError) -> ErrorData {
    let mut message = error.to_string();
    let mut cause = std::error::Error::source(&error);
    while let Some(next) = cause {
        message.push_str(": ");
        message.push_str(&next.to_string());
        cause = next.source();
    }
    ErrorData::internal_error(message, None)
}

impl ServerHandler for ClawsmithServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build(),
        )
        .with_server_info(
            Implementation::new(SERVER_NAME, SERVER_VERSION)
                .with_title("clawsmith tool runtime")
                .with_description("Workspace file tools, sandboxed commands, checkpoints and undo"),
        )
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.list().map_err(internal)?;
        Ok(ListToolsResult {
            tools,
            ..ListToolsResult::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Boxed: the call's future holds a whole turn's state machine (~9 KB), and
        // rmcp's per-request task, which embeds this one, was moved and rewritten whole at its
        // spawn, each poll hand-off and its completion - memcpy of futures was ~19% of the
        // server's user-space instructions (callgrind). On the heap it is written once.
        let long = crate::tasks::TASK_TOOLS.contains(&request.name.as_ref());
        let tasks_declared = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        if long && tasks_declared {
            return self.call_as_task(request, context).await;
        }
        let _progress = progress_ticker(&context);
        Box::pin(self.call(request, &context))
            .await
            .map_err(internal)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.inner.tasks.get(&request.task_id)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.inner.tasks.cancel(&request.task_id)
    }
}

/// How often a call whose request carries a `progressToken` reports that it still runs.
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Stops its ticker when dropped.
struct Ticker(tokio::task::JoinHandle<()>);

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// For a request with `_meta.progressToken`: `notifications/progress` every [`PROGRESS_EVERY`]
/// while the call runs (the seconds so far, and a message saying so), from a task of its own so a
/// slow client never holds the call back. It stops when the returned guard drops.
fn progress_ticker(context: &RequestContext<RoleServer>) -> Option<Ticker> {
    let token = context.meta.get_progress_token()?;
    let peer = context.peer.clone();
    Some(Ticker(tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let mut ticks = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
        loop {
            ticks.tick().await;
            let seconds = started.elapsed().as_secs();
            let progress = ProgressNotificationParam::new(token.clone(), seconds as f64)
                .with_message(format!("still running after {seconds} s"));
            if peer.notify_progress(progress).await.is_err() {
                return;
            }
        }
    })))
}

impl ClawsmithServer {
    /// A long call for a client that declared the tasks extension: answered as usual when it
    /// ends within [`crate::tasks::TASK_AFTER`], else as a task it goes on under (`tasks.rs`).
    async fn call_as_task(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The call runs with a cancellation of its own: the request's until it is a task, then
        // `tasks/cancel`'s (the request is answered, and its token may end with it).
        let cancel = tokio_util::sync::CancellationToken::new();
        let mut detached = context.clone();
        detached.ct = cancel.clone();
        let server = self.clone();
        let mut running =
            tokio::spawn(async move { Box::pin(server.call(request, &detached)).await });
        let joined =
            |joined: Result<Result<CallToolResponse, McpError>, tokio::task::JoinError>| {
                joined
                    .map_err(|error| {
                        ErrorData::internal_error(format!("the call failed: {error}"), None)
                    })?
                    .map_err(internal)
            };
        tokio::select! {
            outcome = &mut running => return joined(outcome),
            () = context.ct.cancelled() => {
                cancel.cancel();
                return joined(running.await);
            }
            () = tokio::time::sleep(crate::tasks::TASK_AFTER) => {}
        }
        let id = clawsmith_protocol::id::new_id(clawsmith_protocol::id::IdKind::Call);
        let handle = self.inner.tasks.start(&id, cancel);
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            let outcome = joined(running.await);
            inner.tasks.finish(&id, outcome);
        });
        Ok(CallToolResponse::Task(handle))
    }
}
