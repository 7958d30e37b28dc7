//! Answers to `ask` decisions (S4) and the sink that receives events as they are stored.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

use clawsmith_protocol::{Capability, Event, Risk};
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
