//! # clawsmith-core
//!
//! (essay: see the end of the work)

mod approval;
mod core;
mod error;
mod hooks;
mod normalize;
mod pipeline;
mod redact;
mod search;
mod session;
mod session_tools;
mod table;

pub use crate::approval::{
    ApprovalAnswer, ApprovalFuture, ApprovalRequest, Approver, CollectingSink, EventSink, NullSink,
};
pub use crate::core::{AgentCore, CoreConfig, DEFAULT_CANCEL_GRACE, DEFAULT_MAX_PARALLEL};
pub use crate::error::CoreError;
pub use crate::hooks::{CommandHook, DEFAULT_HOOK_TIMEOUT, Hook, HookFuture};
pub use crate::normalize::{
    ARTIFACT_THRESHOLD_BYTES, PREVIEW_HEAD_BYTES, PREVIEW_TAIL_BYTES, artifact_preview,
    normalize_output,
};
pub use crate::pipeline::CallResult;
pub use crate::redact::{REDACTED, redact_display, redact_text};
pub use crate::search::{SearchDocument, SearchHit, rank};
pub use crate::session::{RecoveryReport, RequestEvidence, SessionHandle, Turn, TurnOutcome};
pub use crate::session_tools::{ARTIFACT_NOT_FOUND, READ_ARTIFACT_MAX_BYTES};
pub use crate::table::{
    ExtensionTool, ShownTool, ToolEntry, ToolTable, canonical_json, schema_list_sha256,
};
