//! # clawsmith-mcp
//!
//! clawsmith speaking the Model Context Protocol, both ways (X1, A9, A10):
//!
//! - **Server.** [`serve_stdio`] / [`serve_io`] (and [`serve`] over any rmcp transport) put an
//!   [`clawsmith_core::AgentCore`] behind an MCP connection, so that existing agents and MCP
//!   clients use clawsmith's tools with the same permission mode, command limits, checkpoints
//!   and audit events as `clawsmith call`. [`HttpServer`] serves the same over Streamable HTTP
//!   behind a guard (bearer token, `Host` and `Origin` checks, body and concurrency limits; see
//!   the `http` module), one session shared by its clients. For clients that declared the tasks
//!   extension, a long call ([`TASK_TOOLS`]) still running after [`TASK_AFTER`] becomes a task
//!   (`tasks/get`, `tasks/cancel`; the `tasks` module). A call whose request carries a
//!   `progressToken` reports `notifications/progress` every [`PROGRESS_EVERY`] while it runs.
//! - **Client.** [`connect_servers`] starts the external MCP servers listed in `clawsmith.toml`
//!   ([`McpConfig`]), or connects to remote ones over Streamable HTTP (an entry with a `url`),
//!   and turns each of their tools into a *deferred* extension tool `mcp__<server>__<tool>`
//!   ([`McpTool`]) that the core finds through `search_tools`; what went wrong comes back in
//!   [`McpStartup`] for the front end to print. [`login`] authorizes clawsmith at a remote
//!   server with OAuth (the authorization code flow with PKCE); the tokens are kept by
//!   [`FileCredentialStore`].
//!
//! ## Main types
//! - [`ClawsmithServer`]: the rmcp `ServerHandler` over one core and one session;
//!   [`ServerOptions`] (session to continue, approver, event sink).
//! - [`ElicitingApprover`]: the core's `Approver` that asks the person behind the MCP client.
//! - [`McpConfig`] / [`McpServerConfig`]: the `[[mcp_servers]]` tables.
//! - [`McpTool`] and [`McpConnection`]: one remote tool, and the live connection (child process
//!   or HTTP session) its tools share.
//! - [`McpStartup`]: the tools that loaded and one [`McpError`] per server or tool left out.
//! - [`McpError`]: the plumbing broke. Tool failures are results, never `Err`.
//!
//! ## Decisions
//! - **One long-lived session per connection, one turn per `tools/call`.** Background commands,
//!   artifacts, todos and activations need a session that outlives a call; undo works on turns,
//!   so each request gets its own turn (checkpoint) and `clawsmith undo` can revert any of them.
//!   Turns of the connection run one at a time: two interleaved turns would each record the
//!   other's edits in their checkpoints.
//! - **The session's lease stays with the connection while calls keep coming** (taking it
//!   per turn was an `open`, `flock`, `ftruncate`, `write` and `close` a call, ~8% of a
//!   `read_file` call's processor time). It is let go of after [`LEASE_IDLE`] (50 ms) without a
//!   call, and yielded at the next call when another process announced that it waits
//!   (`clawsmith undo`, a CLI `call` on the same session): that process gets the session between
//!   two calls, as when the lease was taken per turn, and the connection's next call waits for
//!   it, then runs recovery if the session changed meanwhile.
//! - **`clawsmith mcp` keeps a second worker** ([`stdio_runtime`]): one thread would save ~8% of
//!   a `read_file` call's processor time, but a file tool works synchronously, and a
//!   read stuck on a hung mount would then hold back the call's timeout, cancellations, signals
//!   and every other request. [`serve_stdio`] keeps freed memory with glibc instead of trimming
//!   it at every call (page faults 30 → 3 a call).
//! - **The wire mirrors the result protocol.** `isError` is "status other than success";
//!   `content` is one text block with exactly the text the model would see; `structuredContent`
//!   is the light result metadata (`version`, `status`, `code`, `retryable`, `artifact`, as in
//!   the stored `toolResult`) plus `sessionId`, `turnId` and `toolCallId` so a client can find
//!   the turn to undo. Display projections stay out: they are for clawsmith's own front ends.
//! - **Annotations come from effective risk**, the one computed by `clawsmith-security` after
//!   the capability floor: `readOnlyHint` for `read`, `destructiveHint` for `workspace-write` and
//!   `execute` (and `openWorldHint` for `execute`). A tool's own claim never shows through.
//! - **`tools/list` is a model request.** It records the request evidence and promotes pending
//!   `search_tools` activations, exactly as the core does before a provider request; after a
//!   successful `search_tools` call the server sends `notifications/tools/list_changed`. Each
//!   `tools/call` turn also starts with a model request, so a client that ignores the
//!   notification still reaches an activated tool on its next call.
//! - **Elicitation for `ask`.** With an [`ElicitingApprover`] configured and a client that
//!   declared the elicitation capability, an `ask` becomes a form with no fields: accept
//!   approves, decline or cancel refuse. Revisions with an `initialize` handshake (up to
//!   2025-11-25) are asked with an `elicitation/create` request while the call waits. The
//!   stateless revision 2026-07-28 forbids server-to-client requests, so there the question
//!   travels as a multi-round-trip `input_required` result: the first round's call is closed
//!   `permission_denied` ([`APPROVAL_REQUESTED`]; the audit keeps it), and the retried request,
//!   carrying the answer and the one-time `requestState` issued for that exact call (same name
//!   and arguments), runs as a new turn. Without elicitation the mode decides alone and `ask`
//!   is `permission_denied` with a message saying how to allow it.
//! - **MCP tools are deferred and fail closed.** Their risk comes from the capabilities the
//!   *user* writes in the config (`CapabilityDeclaration::Raw`, normalized by
//!   `clawsmith-security`), `Missing` when absent, so the effective risk is `execute` until the
//!   user says otherwise; the declared `risk` defaults to `execute` as well. The server's
//!   annotations (`readOnlyHint`…) are untrusted and never read. Calls are not concurrency-safe
//!   and need an authorized context like every side-effecting tool.
//! - **The environment of a server is an allow-list.** The child starts with an empty
//!   environment plus the variables named in `env`; not even `PATH` is inherited unless listed.
//! - **Trace context in `_meta`** (the keys SEP-414 reserves): a `tools/call`'s
//!   `_meta.traceparent`/`tracestate` parents that call's turn; a call to an external server
//!   carries its `execute_tool` span the same way. A malformed incoming value is ignored.
//!
//! ## Both peers are untrusted: the limits
//! rmcp's stdio transport drops oversized lines and unparsable input silently (the peer then
//! waits forever) and reads and executes whatever arrives. Both sides therefore run over this
//! crate's own line transport (`transport`, `jsonrpc`): a line is written by its sender with one
//! `write` when nothing waits before it, else queued for one writer task behind a bounded queue
//! (no hand-off per answer); lines capped while they are read.
//!
//! Server (`clawsmith mcp`):
//! - **Backpressure.** At most [`MAX_UNANSWERED_REQUESTS`] (32) requests are read and not yet
//!   answered; a slot frees once its answer is *written*. A client that never reads stdout
//!   stalls the server's reading, so memory stays bounded instead of growing per request. While
//!   the server waits for the client's answer to an elicitation question, a request finding
//!   every slot taken is refused with -32000 ("Server busy") instead: the answer that would free
//!   a slot may be queued behind it.
//! - **JSON-RPC errors per the spec.** A line over [`MAX_REQUEST_LINE_BYTES`] (4 MiB) is -32600
//!   and skipped; an unparsable line or nesting deeper than serde_json's 128 levels is -32700
//!   (no stack overflow); a batch (MCP removed them), a non-object, a wrong `jsonrpc`, a bad
//!   `id` or a second request with an id still in flight is -32600; parameters of the wrong type
//!   for `initialize`, `tools/list` or `tools/call` are -32602; a second `initialize` is -32600.
//!   Answers carry the request's id when it could be read, `null` otherwise.
//! - **Disconnects and signals.** EOF on stdin, SIGTERM, SIGHUP and SIGINT end the connection
//!   the same way: the running call is cancelled through the turn's cancellation signal
//!   (`cancelled`), its turn and checkpoint are finished, no other turn starts, and only then
//!   does [`serve_stdio`] return: the store is left as after a clean exit. EOF cancels at once
//!   (rmcp would first wait up to 5 s for answers nobody is left to read). Stdin and stdout are
//!   non-blocking pipes, so a client holding them open cannot keep the process alive.
//!
//! Client (external servers):
//! - **Deadlines.** Spawn, `initialize` and every `tools/list` page share
//!   `startup_timeout_ms` (default [`DEFAULT_STARTUP_TIMEOUT_MS`], 10 s); each call may go
//!   `call_timeout_ms` (default [`DEFAULT_CALL_TIMEOUT_MS`], 60 s) without its answer or a
//!   `notifications/progress` for it (each one starts the wait again), and runs `call_max_ms`
//!   at most (default [`DEFAULT_CALL_MAX_MS`], 30 min); past either it ends with code
//!   [`TIMEOUT`] (`timeout`), the request cancelled on the server from a task of its own (a
//!   server that stopped reading cannot hold the result back).
//! - **Requests from the server** (pings, sampling…) take one of 32 slots until our answer is
//!   written, as a client's do on the server side: a server that floods requests and never reads
//!   our answers stalls its own connection (its calls time out), not this process.
//! - **Size.** A line over [`MAX_ANSWER_LINE_BYTES`] (16 MiB) fails the waiting request with an
//!   error naming the cap, never a silent drop: a call becomes `tool_failed`, a listing leaves
//!   the server out. The connection stays usable.
//! - **Listing budget.** At most [`MAX_LIST_PAGES`] pages and [`MAX_SERVER_TOOLS`] tools; a
//!   repeated cursor stops the loop. What was listed is kept, and the cut is reported. A tool
//!   whose definition is over [`MAX_TOOL_DEFINITION_BYTES`] (64 KiB) is dropped as its page
//!   arrives (reported), so what one server's listing keeps is bounded too.
//! - **Names.** Sanitising (`a.b`, `a/b` → `a_b`) or truncating to 128 bytes can make names
//!   collide; every tool of a colliding group gets `_` and 8 hex digits of FNV-1a of its own
//!   remote name, so the names do not depend on listing order. A name still taken (a duplicate)
//!   or an input schema that does not compile is left out and reported: one server never fails
//!   the table build.
//! - **Stderr** is piped and drained; only the last [`STDERR_TAIL_BYTES`] (4 KiB) are kept, and
//!   reports about the server (timeouts, failed handshakes) quote them.
//! - **Status prefixes.** A successful answer whose text would read as a clawsmith status
//!   (`Error: `, `Denied: `, …, per `infer_status_from_content`) is prefixed with
//!   `[MCP server `x` answered]`, so it cannot pass for a failure clawsmith reported.
//! - **Remote servers** (the `remote` module). rmcp's Streamable HTTP client over reqwest with
//!   rustls (ring, the webpki roots): https, or http to a loopback address; no redirects
//!   followed (they would carry the token elsewhere); the answer caps of a stdio line. A static
//!   bearer token comes from the variable the entry names. OAuth is rmcp's: discovery from the
//!   server's RFC 9728 metadata, the RFC 8707 resource on every token request, a refresh before
//!   a token expires or when the server refuses it; a client credentials token that cannot be
//!   refreshed is asked for again. OAuth requests to hosts other than the server's reach no
//!   link-local address, and loopback or private ones only when the server's own host is one
//!   (the metadata names those hosts, so a hostile server could aim them at this machine's
//!   services). Credentials live in `<state dir>/mcp-credentials/<server>.json`
//!   ([`CREDENTIALS_DIR`]), 0600 in a 0700 folder, replaced atomically (a crash mid-refresh
//!   leaves the old token or the new one); tokens never enter tool results, sessions or traces.
//! - **Reported and left out.** A server that cannot be spawned, fails its handshake, times out
//!   or whose listing fails is one entry of [`McpStartup::problems`]; the other servers load.
//!   Servers start together, so start-up waits for the slowest, not the sum of their timeouts.
//!
//! ## What this crate does not do
//! It does not build the core (the CLI does: permission mode, sandbox, store, the approver) and
//! does not choose how external MCP servers are confined: each runs under the MCP-server profile
//! of the sandbox configuration the host passes to [`connect_servers`] (through
//! `clawsmith-sandbox`), loosened only by its own entry; a server configured `unconfined = true`
//! is the one process this crate starts itself, with `tokio::process`, as other MCP hosts
//! start them. It does not read resources or prompts, does not speak MRTR or the legacy
//! HTTP+SSE transport, does not open a browser for [`login`] (the front end shows the URL), and
//! does not reconnect to a server that died (its tools then answer `tool_failed`).

mod approval;
mod client;
mod config;
mod error;
mod http;
mod jsonrpc;
mod remote;
mod server;
mod tasks;
mod trace;
mod transport;

pub use crate::approval::{APPROVAL_REQUESTED, ElicitingApprover, NO_ELICITATION};
pub use crate::client::{
    MAX_DESCRIPTION_BYTES, MAX_LIST_PAGES, MAX_SERVER_TOOLS, MAX_TOOL_DEFINITION_BYTES,
    MCP_SOURCE_PREFIX, MCP_TOOL_PREFIX, McpConnection, McpStartup, McpTool, STDERR_TAIL_BYTES,
    TIMEOUT, connect_server, connect_servers, tool_name,
};
pub use crate::config::{
    DEFAULT_CALL_MAX_MS, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_STARTUP_TIMEOUT_MS,
    MAX_SERVER_NAME_BYTES, McpConfig, McpServerConfig, OAuthSettings, WorkspaceAccess,
};
pub use crate::error::McpError;
pub use crate::http::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONCURRENT_REQUESTS, DEFAULT_MAX_STREAMS,
    DEFAULT_STREAM_IDLE, HttpOptions, HttpServer, MCP_PATH,
};
pub use crate::jsonrpc::{MAX_REQUEST_LINE_BYTES, MAX_UNANSWERED_REQUESTS};
pub use crate::remote::{CREDENTIALS_DIR, FileCredentialStore, LOGIN_TIMEOUT, login};
pub use crate::server::{
    APPROVAL_INPUT, ClawsmithServer, LEASE_IDLE, PROGRESS_EVERY, SEARCH_TOOLS, SERVER_NAME,
    SERVER_VERSION, ServerOptions, serve, serve_io, serve_stdio, stdio_runtime,
};
pub use crate::tasks::{MAX_TASKS, TASK_AFTER, TASK_TOOLS, TASK_TTL};
pub use crate::transport::MAX_ANSWER_LINE_BYTES;
