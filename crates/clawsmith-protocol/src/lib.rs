//! # clawsmith-protocol
//!
//! The wire of the clawsmith tool runtime: the types a model, a runtime and a client exchange when
//! a tool is called, and the [`Tool`] trait every tool implements. Everything else in clawsmith
//! speaks these types, and a downstream crate that only wants them pays for nothing else: no async
//! runtime, no I/O, no SQLite (`cargo tree -p clawsmith-protocol -e normal` shows serde,
//! serde_json, schemars and ulid only).
//!
//! ## Main types
//! - [`Risk`] (`read` < `workspace-write` < `execute`) and [`Capability`] (`filesystem.read`, …):
//!   what a tool declares. [`CapabilityDeclaration`] keeps untrusted declarations raw so that
//!   `clawsmith-security` can normalize them and fail closed.
//! - [`ToolExecutionResult`] = [`ToolResultMetadata`] (`version: 1`, `status`, `code`,
//!   `retryable`, `display`, `artifact`) + `content`, the only text the model sees. [`Display`] is
//!   the bounded projection for people; it never reaches the model. [`ErrorCode`] carries the
//!   codes of P6 and knows their status and retryability.
//! - [`Event`] with [`EventPayload`]: `tool.started`, `tool.completed` (with the legacy `status`,
//!   `output`, `artifact` fields), `model.request` evidence and turn boundaries, each with the
//!   session's `sequence`.
//! - [`ModelMessage`] with `toolResult` ([`ToolResultSummary`]) and
//!   [`infer_status_from_content`] for history that predates it.
//! - [`Tool`], [`ToolExecutionContext`] (ids, a [`CancellationSignal`], and an [`Authorization`]
//!   that only an `allow` [`PermissionDecision`] yields), and [`ToolOutput`], the raw return the
//!   core normalizes.
//! - [`id`]: the one id generator, `<prefix>_<ULID>` (`ses_`, `turn_`, `call_`, `art_`, …),
//!   time-ordered.
//! - [`redact`]: the one secret detector (`redact_text`, `redact_json`, and `to_redacted_json`,
//!   which masks a value while serde writes it as JSON), used by the core on displays and by the
//!   store on everything it writes to disk. Pure text processing.
//!
//! ## Decisions
//! - **One source of truth for schemas.** Every type derives `schemars::JsonSchema` next to serde,
//!   so the schema a client validates against is generated from the deserializer itself
//!   ([`schema::protocol_schema`], written to `docs/protocol.schema.json` by `cargo xtask codegen`).
//! - **Error codes are open strings.** The mission types `code` as a string; tools add codes such as
//!   `command_blocked`. The codes the protocol defines are constants with their status and
//!   retryability attached, so no caller has to remember the table.
//! - **Failures are data.** A tool answers with a result, never an `Err`; the content of a failure
//!   starts with a status prefix (`Error: `, `Denied: `…) so readers of old history agree with the
//!   structured status.
//! - **Cancellation without a runtime.** [`CancellationSignal`] is a flag plus wakers, usable from
//!   any executor.
//!
//! ## What this crate does not do
//! It does not decide permissions (`clawsmith-security`), touch files (`clawsmith-fs`), run
//! processes (`clawsmith-sandbox`), store anything (`clawsmith-checkpoint`), or run the pipeline
//! (`clawsmith-core`). The authorization token is a guard against accidental bypass, not a
//! cryptographic capability: Rust cannot stop a determined crate from building an `allow` decision.
#![deny(missing_docs)]

mod cancel;
mod event;
pub mod id;
mod message;
pub mod redact;
mod result;
mod risk;
pub mod schema;
pub mod text;
mod tool;

pub use cancel::{CancellationSignal, Cancelled};
pub use event::{
    AgentStopped, BackgroundTaskCompleted, BatchInfo, Event, EventPayload, ModelRequest,
    RequestComposition, TokenUsage, ToolCompleted, ToolStarted, TurnCompleted, TurnStarted,
};
pub use message::{ModelMessage, Role, ToolCall, infer_status_from_content};
pub use result::{
    ArtifactRef, DISPLAY_BODY_MAX_BYTES, DISPLAY_FIELD_MAX_BYTES, DISPLAY_FIELDS_MAX,
    DISPLAY_TITLE_MAX_BYTES, Display, DisplayField, DisplayKind, ErrorCode, RESULT_VERSION,
    ToolExecutionResult, ToolResultMetadata, ToolResultSummary, ToolStatus, status_prefix,
};
pub use risk::{Capability, CapabilityDeclaration, Risk};
pub use text::truncate_to_boundary;
pub use tool::{
    Authorization, PermissionDecision, SearchMetadata, Tool, ToolExecutionContext, ToolFuture,
    ToolOutput, TraceHeaders, Verdict,
};
