//! Answers to `ask` decisions (S4) and the sink that receives events as they are stored.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

use clawsmith_protocol::{
    Capability, Display, DisplayKind, ErrorCode, Event, Risk, ToolExecutionResult,
};
use serde::Serialize;

/// What a person is asked to approve.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// One line describing the call (redacted).
    pub summary: String,
    /// Effective risk.
    pub risk: Risk,
    /// Normalized capabilities.
    pub capabilities: Vec<Capability>,
    /// Why the policy (or a hook) asks.
    pub reason: String,
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Run it.
    Approve,
    /// Do not run it; the reason is shown to the model.
    Decline(String),
}

/// The future an approver returns.
pub type ApprovalFuture<'a> = Pin<Box<dyn Future<Output = ApprovalAnswer> + Send + 'a>>;

/// The display field, and its value, of a call refused because its rules say `ask` and no
/// approver is configured where it ran; [`needs_an_approver`] reads them, so a front end tells
/// that case apart without reading the message.
const APPROVER_FIELD: &str = "approver";
const NO_APPROVER: &str = "none here";

/// The result of a call whose rules say `ask` when no one can approve it here: denied, with the
/// reason, and marked for [`needs_an_approver`].
pub(crate) fn refused_without_approver(tool: &str, reason: &str) -> ToolExecutionResult {
    ToolExecutionResult::failure(
        ErrorCode::PERMISSION_DENIED,
        format!("{tool} needs approval ({reason}) and no one can approve it here."),
    )
    .with_display(
        Display::new(DisplayKind::Text)
            .with_title(format!("{tool} needs approval"))
            .with_field("decision", "ask")
            .with_field("reason", reason)
            .with_field(APPROVER_FIELD, NO_APPROVER),
    )
}

/// Whether `result` is a refusal for want of an approver (the rules said `ask`, and nothing
/// where the call ran could answer), as opposed to a rule that denies.
pub fn needs_an_approver(result: &ToolExecutionResult) -> bool {
    result.code() == Some(&ErrorCode::PERMISSION_DENIED)
        && result.metadata.display.as_ref().is_some_and(|display| {
            display
                .fields
                .iter()
                .any(|field| field.label == APPROVER_FIELD && field.value == NO_APPROVER)
        })
}

/// Answers `ask` decisions. Without one, `ask` becomes `permission_denied` (non-interactive front
/// ends, S4).
pub trait Approver: Send + Sync {
    /// Asks about one call.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a>;
}

/// Receives every event right after it was stored, in sequence order. Called on the pipeline's
/// task: keep it quick.
pub trait EventSink: Send + Sync {
    /// One stored event.
    fn event(&self, event: &Event);
}

/// A sink that drops everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn event(&self, _event: &Event) {}
}

/// A sink that keeps every event (tests, batch front ends).
#[derive(Debug, Default)]
pub struct CollectingSink {
    events: Mutex<Vec<Event>>,
}

impl CollectingSink {
    /// An empty sink.
    pub fn new() -> Self {
        CollectingSink::default()
    }

    /// The events received so far.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl EventSink for CollectingSink {
    fn event(&self, event: &Event) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
    }
}
