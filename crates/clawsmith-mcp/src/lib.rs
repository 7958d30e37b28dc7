//! # clawsmith-mcp
//!
//! clawsmith speaking the Model Context Protocol, both ways (SPEC X1, A9, A10):
//!
//! - **Server.** [`serve`] / [`serve_stdio`] put an [`clawsmith_core::AgentCore`] behind an MCP
//!   connection, so that existing agents and MCP clients use clawsmith's tools with the same
//!   permission mode, command limits, checkpoints and audit events as `clawsmith call`.
//! - **Client.** [`connect_servers`] starts the external MCP servers listed in `clawsmith.toml`
//!   ([`McpConfig`]) and turns each of their tools into a *deferred* extension tool
//!   `mcp__<server>__<tool>` ([`McpTool`]) that the core finds through `search_tools`.
//!
//! ## Main types
//! - [`ClawsmithServer`]: the rmcp `ServerHandler` over one core and one session;
//!   [`ServerOptions`] (session to continue, approver, event sink).
//! - [`ElicitingApprover`]: the core's `Approver` that asks the person behind the MCP client.
//! - [`McpConfig`] / [`McpServerConfig`]: the `[[mcp_servers]]` tables.
//! - [`McpTool`] and [`McpConnection`]: one remote tool, and the live connection (child process)
//!   its tools share.
//! - [`McpError`]: the plumbing broke. Tool failures are results, never `Err`.
//!
//! ## Decisions
//! - **One long-lived session per connection, one turn per `tools/call`.** Background commands,
//!   artifacts, todos and activations need a session that outlives a call; undo works on turns,
//!   so each request gets its own turn (checkpoint) and `clawsmith undo` can revert any of them.
//!   Turns of the connection run one at a time: two interleaved turns would each record the
//!   other's edits in their checkpoints.
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
//!
//! ## What this crate does not do
//! It does not build the core (the CLI does: permission mode, sandbox, store, the approver), does
//! not sandbox external MCP servers (they are programs the user configured, started over stdio
//! as other MCP hosts start them; this crate is the one place besides `clawsmith-sandbox` that
//! spawns a process, through rmcp's child-process transport), does not speak HTTP transports,
//! resources, prompts or MRTR, and does not reconnect to a server that died (its tools then
//! answer `tool_failed`).

mod approval;
mod client;
mod config;
mod error;
mod server;

pub use crate::approval::{APPROVAL_REQUESTED, ElicitingApprover, NO_ELICITATION};
pub use crate::client::{
    MAX_DESCRIPTION_BYTES, MCP_SOURCE_PREFIX, MCP_TOOL_PREFIX, McpConnection, McpTool,
    connect_server, connect_servers, tool_name,
};
pub use crate::config::{MAX_SERVER_NAME_BYTES, McpConfig, McpServerConfig};
pub use crate::error::McpError;
pub use crate::server::{
    APPROVAL_INPUT, ClawsmithServer, SEARCH_TOOLS, SERVER_NAME, SERVER_VERSION, ServerOptions,
    serve, serve_stdio,
};
