//! # clawsmith-agent
//!
//! The model side of clawsmith: a [`Provider`] interface with two real providers over HTTP(S),
//! the loop that turns a task into model requests and tool batches through the core
//! ([`run_task`]), and the sub-agent tools that run that loop again in child sessions
//! ([`subagent`]).
//!
//! ## Main types
//! - [`Provider`]: one [`ProviderRequest`] (history, the shown tools' schemas, the core's
//!   `requestId`) → one [`AssistantReply`] (text, tool calls with arguments as a JSON string,
//!   [`Usage`], the provider's stop reason); with a [`TextSink`] the answer is streamed.
//! - [`HttpProvider`]: OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`)
//!   or Anthropic Messages (`POST {base_url}/messages`), configured by [`ProviderConfig`] (the
//!   `[provider]` table of `clawsmith.toml`).
//! - [`run_task`] with [`RunOptions`] → [`RunOutcome`] (answer, requests made, [`StopReason`],
//!   usage).
//! - [`fixture::ScriptedServer`]: a real HTTP server on 127.0.0.1 speaking both protocols and
//!   replaying scripted answers and failures; the tests of this crate and of the CLI use it.
//!
//! ## Decisions and why
//! - **The core stays the only path for calls.** The loop only asks the core:
//!   [`clawsmith_core::Turn::model_request`] records the `model.request` evidence (`requestId`,
//!   `toolNames`, `toolSchemaSha256`, `composition.activatedTools`) and returns exactly the tool
//!   list to send, so what the store says was shown is what the provider got, and tools
//!   activated by `search_tools` appear in the next request. The model's calls go to
//!   [`clawsmith_core::Turn::run_batch`]: parallel reads, hooks, permissions, journal,
//!   checkpoints and artifacts all apply, and every call gets exactly one result.
//! - **One run = one turn.** A run is one checkpoint, so `clawsmith undo` takes back everything
//!   the run changed. The task is stored as a user message before the turn begins and the final
//!   answer as an assistant message, so a continued session (`--session ID`) sends the stored
//!   history as it is.
//! - **Cancellation closes, never abandons.** The caller's signal is forwarded to the turn's: a
//!   running batch closes its calls `cancelled` through the core, a request in flight is dropped,
//!   and the turn is finished. The history stays sendable (every call has its result).
//! - **Retries are bounded and honest.** 429, 5xx, connection errors, timeouts and a stream cut
//!   before its final event are retried `max_retries` times with doubling backoff, a server's
//!   `Retry-After` winning (both capped at 60 s); a 4xx is not retried and becomes an error
//!   quoting the provider's own message; a 2xx body that is not the protocol's shape is an
//!   error naming what is missing.
//! - **The API key never leaves the provider.** It is read once from the variable the
//!   configuration names, sent only as a header, masked in `Debug`, and replaced by
//!   `[REDACTED]` in every error and in replies (a server echoing it cannot get it into the
//!   store); errors are also passed through the protocol's secret scanner.
//! - **A hand-written HTTP/1.1 fixture** rather than a framework: the failures worth testing
//!   (a stream cut mid-way, a lying body) are easiest to produce on a raw socket.
//!
//! ## What this crate does not do
//! It does not run tools or decide permissions (the core does), does not store anything itself
//! (the core's store does), does not keep the text that accompanies tool calls (the core stores
//! the assistant message of a batch with empty text; the text is shown while streaming), and
//! speaks no provider protocol beyond the two above.

mod agent_loop;
mod config;
mod error;
pub mod fixture;
mod http;
mod provider;
pub mod subagent;
mod wire;

pub use crate::agent_loop::{
    DEFAULT_MAX_TURNS, Inbox, RunOptions, RunOutcome, StopReason, run_task,
};
pub use crate::config::{
    DEFAULT_MAX_RETRIES, DEFAULT_MAX_TOKENS, DEFAULT_REQUEST_TIMEOUT_SECS, DEFAULT_RETRY_BASE_MS,
    MAX_BACKOFF, ProviderConfig, ProviderKind,
};
pub use crate::error::{AgentError, ConfigError, ProviderError};
pub use crate::http::HttpProvider;
pub use crate::provider::{
    AssistantReply, Provider, ProviderFuture, ProviderRequest, TextSink, Usage,
};
