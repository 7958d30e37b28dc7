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
//! - [`subagent::Subagents`]: the sub-agent tools (`delegate_task`, `delegate_background`,
//!   `background_task_list`, `background_task_cancel`) over a child core built with
//!   `read_only_tools`, and [`subagent::agent_definitions`].
//! - [`worktree::WorktreeConfig`]: with it, `delegate_worktree` (a child with the full table in
//!   an isolated checkout, its changes returned as a patch) and `worktree_apply` (that patch
//!   applied to the workspace as undoable changes) join the sub-agent tools.
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
//! - **The loop's own facts are events of its turn.** The text a model writes beside its calls
//!   is stored with them ([`clawsmith_core::BatchOptions::text`]), so a continued session
//!   sends it back; `agent.stopped {stopReason, turns, usage, error?}` is the turn's last event
//!   before `turn.completed`, also when the provider failed (`error`); a background task's one
//!   notice is a `background_task.completed` event beside the user message carrying it.
//! - **A loop is a span, and its requests carry it.** [`run_task`] starts an
//!   `invoke_agent {name}` span with the core's tracer ([`clawsmith_core::SessionHandle::tracer`];
//!   parent: [`RunOptions::trace_parent`], else the core's), begins its turn under it
//!   ([`clawsmith_core::TurnOptions::parent`]) so every `execute_tool` span is
//!   beneath, and sends its context as `traceparent`/`tracestate` on each provider request; the
//!   stop reason, request count and token usage are its attributes. A sub-agent's parent is its
//!   delegating call's span (the call's `ToolExecutionContext::trace`). Without a tracer the
//!   span records nothing and its context is the parent's, so an incoming trace still reaches
//!   the provider.
//! - **Cancellation closes, never abandons.** The caller's signal is forwarded to the turn's: a
//!   running batch closes its calls `cancelled` through the core, a request in flight is dropped,
//!   and the turn is finished. The history stays sendable (every call has its result).
//! - **Retries are bounded and honest.** 429, 5xx, connection errors, timeouts and a stream cut
//!   before its final event are retried `max_retries` times with doubling backoff, a server's
//!   `Retry-After` winning (both capped at 60 s); a 4xx is not retried and becomes an error
//!   quoting the provider's own message; a 2xx body that is not the protocol's shape is an
//!   error naming what is missing.
//! - **The API key never leaves the provider.** It is read once from the variable the
//!   configuration names, sent only as a header, masked in `Debug`, replaced by `[REDACTED]`
//!   in every error and answer text, and handed to the protocol's secret detector
//!   (`clawsmith_protocol::redact::mask_known_secret`), which masks it in everything stored.
//!   A tool call's arguments are executed as the model wrote them, never masked first: a
//!   short key (`x`, `ollama`) is masked only where it stands as a whole token, and only in
//!   what is stored and shown.
//! - **Agent definitions narrow, never widen.** A definition's `tools` become the child core's
//!   `only_tools` on top of `read_only_tools` (a core built per such child from
//!   [`subagent::SubagentConfig::child_config`], the same recipe as the read-only child core),
//!   so what the request shows is the intersection and the `model.request` evidence says so;
//!   its `model` replaces the configured model in the child's requests
//!   ([`ProviderRequest::model`]).
//! - **Sub-agents are the same loop, one level down.** A child is [`run_task`] in a session
//!   opened with [`clawsmith_core::AgentCore::open_child_session`] (its parent stored); a
//!   `delegate_task` or background child's core holds only tools of effective risk `read`, so it
//!   cannot write or run commands, and no child core has delegate tools (depth 1). A semaphore over the host bounds children at four; the rest wait,
//!   none is refused. A background task's completion is pushed once to its parent's inbox and
//!   appended as a user message before the parent's next request; a cancelled task pushes
//!   nothing; a parent that answers while its background tasks run waits for them first.
//! - **A writing child works on a copy, and its work comes back as a patch.**
//!   `delegate_worktree` makes a `git clone --local --no-hardlinks` of the workspace under the
//!   state dir (outside the workspace), detached at `HEAD`, puts the workspace's uncommitted
//!   changes on top (the tracked diff and the untracked files git does not ignore) and commits
//!   that as a snapshot; the child runs in a core whose workspace is the checkout (file tools and
//!   `run_command` confined there, the parent's policy, hooks and approver) and whose sandbox
//!   lists the main `.git` as protected and hides the rest of the state dir (its configuration,
//!   logs and the other checkouts). A clone rather than `git worktree add`: a worktree's
//!   `.git` points into the main repository's. The patch is the diff against the snapshot
//!   (binary included), bounded in the result and stored whole as an artifact whose id is the
//!   `patchId`; the result also carries the base commit, the diffstat, the child's commands with
//!   their exit, and whether the patch applies to the workspace now. The checkout is removed on
//!   every way out (a drop guard: error, cancellation, an abandoned call).
//! - **Applying a patch is a workspace write the core captures.** `worktree_apply` declares
//!   `filesystem.write`, so the core takes its workspace manifest around the call (the same
//!   capture as for `run_command`) and records every file the patch changed in the turn's
//!   checkpoint: `clawsmith undo` restores it. A patch reaching a path the policy protects or
//!   hides is refused whole (`permission_denied`): the file tools would ask for each such path,
//!   and one approval of `worktree_apply` does not stand for that. It checks with
//!   `git apply --check` first and
//!   `git apply` is all or nothing, so a hunk that does not apply changes nothing and the
//!   refusal (`patch_conflict`) lists the conflicts. The exact patch is kept in memory; a later
//!   process of the session applies the stored artifact instead, unless secrets were masked in
//!   it at rest (`patch_masked`: applying the masks would corrupt files; delegate again).
//!   Git is the host's, run with fixed arguments,
//!   an environment of `PATH` only, no system or global configuration, hooks off, no external
//!   diff or text conversion (the one process this crate starts; ARCHITECTURE names it).
//! - **A hand-written HTTP/1.1 fixture** rather than a framework: the failures worth testing
//!   (a stream cut mid-way, a lying body) are easiest to produce on a raw socket.
//!
//! ## What this crate does not do
//! It does not run tools or decide permissions (the core does), does not store anything itself
//! (the core's store does), and speaks no provider protocol beyond the two above. A background
//! task's `background_task.completed` event is stored when its parent's loop picks the notice
//! up (with the user message the model sees), so a parent that is not running a loop then has
//! the notice waiting in memory, not yet in the store. An agent definition's `tools` can only
//! narrow a child's read-only table (a write tool it names is left out; a list naming no
//! read-only tool is refused), and its `model` is sent to the host's provider (one provider per
//! host: a definition cannot pick another server). `delegate_worktree` needs the workspace to be the top
//! level of a git repository with a commit (`not_a_git_repository` otherwise); a patch the
//! workspace's capture cannot record (a file over the capture's content limit, an ignored path)
//! is applied but named as not undoable in the result, as for commands. A patch is applied from
//! memory by the process that made it; after a restart it is read back from its artifact,
//! which is stored with secrets masked like every artifact (such a patch may then not apply).

mod agent_loop;
mod config;
mod error;
pub mod fixture;
mod http;
mod provider;
pub mod subagent;
mod wire;
pub mod worktree;

pub use crate::agent_loop::{
    DEFAULT_AGENT_NAME, DEFAULT_MAX_TURNS, Inbox, RunOptions, RunOutcome, StopReason, run_task,
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
