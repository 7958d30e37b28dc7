//! # clawsmith-core
//!
//! The agent core: it owns the one frozen tool table and runs every tool call through the same
//! pipeline, so that a call from a model, from the CLI or from an MCP client gets the same
//! validation, the same permission and hook decisions, the same journal, events and artifacts,
//! and always exactly one result. Front ends stay thin: they build a [`CoreConfig`], call
//! [`AgentCore::new`], [`AgentCore::open_session`], and then [`SessionHandle::run_turn`] (or
//! [`SessionHandle::begin_turn`] → [`Turn::model_request`] / [`Turn::run_batch`] →
//! [`Turn::finish`] for a multi-request agent loop).
//!
//! ## Main types
//! - [`CoreConfig`] / [`AgentCore`]: workspace, the session store (an
//!   `Arc<dyn` [`clawsmith_store::SessionStore`]`>`: this machine's SQLite file or a fleet's
//!   PostgreSQL database), permission
//!   policy, optional [`Approver`], [`Hook`]s, sandbox configuration, optional background
//!   command service, artifacts on/off, [`ExtensionTool`]s, bounded parallelism.
//! - [`ToolTable`] (A1): built once, in a fixed order — file tools (`builtin:fs`),
//!   `run_command` (`builtin:command`), `todo_write` / `todo_list` (`session`), `read_artifact`
//!   (`service:artifacts`), the eight background-command tools (`service:commands`), extension
//!   tools (`extension:<source>`), and `search_tools` when anything is deferred. A duplicate
//!   name fails construction with both origins in the message. Each entry carries its
//!   normalized facts (effective risk, capabilities) and its JSON Schema validator: compiled at
//!   construction for a schema from elsewhere (MCP, plugins, host code), on first need for a
//!   shipped one, and never for a call a shipped tool vouches for
//!   (`Tool::vouches_for_input`: the file tools' typed parse, proven by tests to accept nothing
//!   the schema refuses); [`ToolTable::shown`] and [`schema_list_sha256`] say exactly what a
//!   model request shows.
//! - [`SessionHandle`] (open = create or continue, then recovery) and [`Turn`] (one checkpoint,
//!   any number of model requests and batches). Results come back as
//!   `(toolCallId, ToolExecutionResult)` in call order; [`TurnOutcome`] adds the turn's manifest.
//! - The lower layers are re-exported as [`checkpoint`], [`security`], [`sandbox`] and [`fs`], so
//!   a front end that depends on this crate alone can build a [`CoreConfig`].
//! - [`EventSink`]: every event is first stored with the session's next `sequence`, then handed
//!   to the sink, so what a UI shows is what the store holds. (A record whose commit is deferred,
//!   below, reaches the sink when a commit has stored it, before any event stored after it.)
//!
//! ## The pipeline (A7), in order
//! unknown tool (`unknown_tool`) → deferred tool not active (`inactive_tool`) → JSON parse
//! (`invalid_json`; empty arguments mean `{}`) → JSON Schema validation with the tool's own
//! schema (`invalid_arguments`, naming fields as `todos[0].status`) → duplicate in the turn,
//! by `toolCallId` or by tool + canonical arguments (`duplicate_call`) → hooks (`hook_denied`) →
//! permission on *effective* risk and normalized capabilities, each path argument checked as
//! spelled and where its parent's symlinks lead, so `link/config` with `link -> .git` is a
//! protected write (`permission_denied`; `ask` goes to the approver, and without one it is a
//! denial) → journal start, committed before anything
//! runs, for side-effecting calls (effective risk above `read`) → `tool.started` (with `batch`)
//! → execute in its own task with an authorized context → normalize (A3) → artifact (A4) →
//! redact and bound the display (A5) → journal close → `tool.completed` → the tool message with
//! `toolResult`. A refusal at any step still produces `tool.completed` and the message; the
//! assistant message carrying the calls is stored first, so history is always sendable.
//!
//! Commits: a side-effecting call's journal entry and `tool.started` (with the batch's assistant
//! message) commit before it runs. A call that guards no side effect (effective risk `read`,
//! concurrency-safe, not delegating to a sub-agent — a child's session is written while the call
//! runs and must never exist without its parent's call on record: `agent.delegate` calls commit
//! their start before they run) is recorded after it ran, start and close in one commit (its start
//! is committed meanwhile once it runs past [`CoreConfig::read_record_window`]); a turn's start
//! rides on its first write, and a batch run as the turn's last ([`BatchOptions::last`]) lets the
//! turn's finish carry its reads, so an MCP turn or a `clawsmith call` of one read is one commit.
//! A process killed mid-read leaves a history without that read (or with it started and then
//! closed `interrupted`), never half of one.
//!
//! ## Decisions and why
//! - **Failures are data.** Every refusal is a `ToolExecutionResult` built with
//!   `ToolExecutionResult::failure(ErrorCode::…)`, so status and `retryable` come from the
//!   protocol's table (P6, P8). `Err(CoreError)` means the runtime broke (bad configuration, the
//!   store failed).
//! - **Panics and hangs.** Each execution runs in a tokio task: a panic becomes `tool_failed`
//!   (from the `JoinError`), a call timeout becomes `tool_failed`, and turn cancellation is passed
//!   to the tool through its context; a tool that ignores it is abandoned after `cancel_grace`
//!   (its task aborted) and the call ends `cancelled`. The core keeps serving.
//! - **Parallel batches (A6), precisely.** A batch (the calls of one assistant message) runs in
//!   parallel only if it has ≥ 2 calls, every call passed the steps before hooks (known, active,
//!   valid JSON and arguments, no duplicate), every tool is `concurrency_safe` with effective
//!   risk `read`, *no hooks are configured* (with hooks, each call needs its own decision and
//!   audit record in order), and the policy allows every call outright (a deny/ask rule on one
//!   read makes the batch serial). A configured approver (`--yes`, MCP elicitation) does not
//!   make a batch serial: it is only consulted for an `ask`, and such a batch is serial anyway.
//!   Otherwise the whole batch is serial. Parallel calls are bounded by `max_parallel`;
//!   `tool.started` events are stored in call order before execution and `tool.completed` events
//!   and messages in call order afterwards.
//! - **A3 normalization is strict about the protocol shape.** Only an object with `version: 1`,
//!   a known status and a *string* `content` keeps its own status; anything else with
//!   `version`/`status` is serialized as text with status `success`, so a tool cannot forge a
//!   refusal by accident. A tool claiming `unknown` (recovery's status) is turned into `error`.
//! - **Artifacts (A4).** Content above 50 KiB goes to the session's artifact store; the message
//!   keeps an 8 KiB head and 4 KiB tail with a pointer to `read_artifact`; the same
//!   `ArtifactRef` is put on the result, so it appears in `tool.completed.artifact`,
//!   `tool.completed.result.artifact` and the message's `toolResult.artifact`. The display body
//!   is dropped rather than copied. `read_artifact` takes an id (never a path), reads only the
//!   current session's artifacts, and returns at most 32 KiB per call (so reading never makes
//!   another artifact).
//! - **Redaction (A5)** is a small scanner (secret-named keys, `Authorization` credentials,
//!   well-known token prefixes, URL passwords, PEM private keys; `clawsmith_protocol::redact`)
//!   applied to display title, body, field labels and values, followed by the protocol's bounds.
//!   The live `content` is not redacted: the model must see what the tool returned. What is
//!   stored (messages, events, journal arguments) the store masks with the same scanner.
//! - **Deferred tools (A9).** Activation is per session and takes effect at the *next* model
//!   request: `search_tools` marks hits pending, [`Turn::model_request`] promotes them and stores
//!   the `model.request` evidence (`requestId`, `toolNames`, `toolSchemaSha256`,
//!   `composition.activatedTools`). Until then a call is `inactive_tool` (retryable). Reopening a
//!   session restores the activations of its last request. The hash is SHA-256 over canonical
//!   JSON (sorted keys, no whitespace) of the shown list.
//! - **One writer per session.** Opening takes the session's lease (the store's `flock`) before
//!   recovery, and each turn holds it for its life; a second process gets
//!   `session … is in use by pid N` (or waits). A lease taken fresh means any open call's owner
//!   is dead, so only then does recovery run; a handle that finds the session changed since it
//!   last wrote it recovers before its next turn.
//! - **Recovery (A8)** runs on open (by index when nothing was left open): each assistant tool
//!   call without a result gets one —
//!   `unknown`/`interrupted` if it had started (open journal entry or `tool.started`),
//!   `cancelled` if it never started; open journal entries are closed `unknown`, unanswered
//!   approvals are dropped, open turn checkpoints are finished. Nothing is ever re-run.
//! - **Checkpoints (K1, K7).** A turn begins its checkpoint before `turn.started`, the file
//!   tools get the store's `CheckpointRecorder` (replaceable through
//!   [`CoreConfig::change_recorder`]), and [`Turn::finish`] closes it and returns the manifest.
//! - **Commands are checkpointed too.** Around each foreground `run_command` (and each
//!   extension tool that may execute processes) the core brings the session's workspace
//!   manifest up to date (`capture.rs`: every regular file the
//!   search walk visits and every symlink in the folders it enters, with its stamp and SHA-256 of
//!   content or link target, contents up to [`CAPTURE_CONTENT_LIMIT`] put
//!   in the store's blobs *before* the command starts), walks again when the command ends, and
//!   reports each difference — created, modified, deleted, mode or link changed — to the same
//!   `ChangeRecorder` as the file tools (prior content from the blob store, post hash), so undo
//!   restores it with the same precheck. The manifest is kept per session in memory and only
//!   files whose stamp moved are read again. A link travels as a file whose content is its
//!   target and whose mode is `SYMLINK_MODE`. What cannot be restored (ignored paths, files over
//!   [`CoreConfig::capture_content_limit`], special files) is named in the command's result as
//!   `[not captured for undo: <path>: <why>]` and stored, so undo names it too. The walks run on
//!   the blocking pool. From a core's second command on, an inotify watch of the workspace kept
//!   across commands (`clawsmith_fs::WorkspaceWatch`) replaces the walks: only what its events
//!   name is looked at, with a full walk wherever the events cannot be trusted (the soundness
//!   argument is in `capture.rs`); [`AgentCore::capture_passes`] counts both kinds and the
//!   files read. A session's first command in a process starts from the workspace's last
//!   manifest in the store (`SessionStore::workspace_manifest`), so a one-shot `clawsmith call` reads
//!   only the files that moved since. Before the command starts, the manifest (encoded, as a
//!   blob; stored again only when it changed) and a note naming the call are committed: a process killed
//!   mid-command leaves them, and the next open of the session records the differences as the
//!   interrupted command's changes before it finishes the turn (`recover_interrupted`).
//! - **Hooks.** [`Hook`] is in-process; [`CommandHook`] runs a program with the `HookInput` JSON
//!   on stdin and reads a `HookDecision` from stdout; a non-zero exit, invalid output, a failure
//!   to start or the timeout deny, and the refusal says which. The core runs each command hook
//!   only confined, through `clawsmith_sandbox::spawn_piped_argv` under the hook profile of its
//!   sandbox configuration (workspace read-only, no network, the state directory and `$HOME`
//!   outside its allowlist out of sight, the command environment); the timeout kills its tree.
//! - **Store calls are synchronous** on the pipeline's task: each is one short SQLite
//!   transaction, and keeping them in order is what makes sequences and history ordering simple.
//!
//! ## What this crate does not do
//! It does not talk to model providers (a front end sends [`RequestEvidence::tools`] and feeds
//! the assistant's calls back), does not decide permissions itself (clawsmith-security), does
//! not open or change workspace files except through clawsmith-fs tools and the workspace handle
//! (the permission check only resolves the symlinks of a path argument's parent, `real_paths.rs`;
//! that lookup belongs in clawsmith-fs once it offers one), does not spawn model commands
//! (clawsmith-sandbox), and does not speak SQL (clawsmith-checkpoint). It does not replay
//! interrupted calls, ever. Its command capture covers the foreground `run_command`, extension
//! tools with `process.execute` and background commands (what changed while one ran is recorded
//! at the session's next capture point, as the oldest pending command's change; `capture.rs`
//! says what cannot be told apart), and restores files and symlinks (not empty directories). It
//! does not serialize two handles of one session inside one process (they share the lease); the
//! host does, as the MCP server serializes a connection's turns.

mod approval;
mod capture;
mod core;
mod error;
mod execute;
pub mod front_matter;
mod hook_entry;
mod hooks;
mod normalize;
mod pipeline;
mod real_paths;
mod redact;
mod search;
mod session;
mod session_tools;
mod shared;
mod spans;
mod table;
pub mod time;

// The layers a front end needs to configure the core, so that `clawsmith-mcp` (which depends on
// protocol and core only) stays thin: `clawsmith_core::checkpoint::Store`,
// `clawsmith_core::store::SessionStore`,
// `clawsmith_core::security::PermissionPolicy`, `clawsmith_core::sandbox::SandboxConfig`.
pub use clawsmith_checkpoint as checkpoint;
pub use clawsmith_fs as fs;
pub use clawsmith_sandbox as sandbox;
pub use clawsmith_security as security;
pub use clawsmith_store as store;

pub use crate::approval::{
    ApprovalAnswer, ApprovalFuture, ApprovalRequest, Approver, CollectingSink, EventSink, NullSink,
    needs_an_approver,
};
pub use crate::capture::{CAPTURE_CONTENT_LIMIT, COMMAND_ORIGIN, CapturePasses};
pub use crate::core::{
    AgentCore, CoreConfig, DEFAULT_CANCEL_GRACE, DEFAULT_MAX_PARALLEL, HiddenGlobMatches,
};
pub use crate::error::CoreError;
pub use crate::hook_entry::{HookEntry, HookEntryError, MAX_HOOK_TIMEOUT_MS};
pub use crate::hooks::{CommandHook, DEFAULT_HOOK_TIMEOUT, Hook, HookFuture};
pub use crate::normalize::{
    ARTIFACT_THRESHOLD_BYTES, PREVIEW_HEAD_BYTES, PREVIEW_TAIL_BYTES, artifact_preview,
    normalize_output,
};
pub use crate::pipeline::{CallResult, READ_RECORD_WINDOW};
pub use crate::redact::{REDACTED, redact_display, redact_json, redact_text};
pub use crate::search::{SearchDocument, SearchHit, rank};
pub use crate::session::{
    BatchOptions, OpeningRequest, RecoveryReport, RequestEvidence, SessionHandle, Turn,
    TurnOptions, TurnOutcome,
};
pub use crate::session_tools::{ARTIFACT_NOT_FOUND, READ_ARTIFACT_MAX_BYTES};
pub use crate::table::{
    ExtensionTool, IN_TREE_SOURCES, Origin, ShownTool, ToolEntry, ToolTable, canonical_json,
    prepare_schema_compiler, schema_list_sha256,
};
