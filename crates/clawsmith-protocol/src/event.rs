//! Session events (P9). Every event carries the session's next `sequence`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::result::{ArtifactRef, ToolResultMetadata, ToolStatus};
use crate::risk::{Capability, Risk};

/// One persisted event: envelope plus payload, flattened so `type` sits at the top level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// The session the event belongs to.
    pub session_id: String,
    /// Per-session, strictly increasing, gap-free from 1.
    pub sequence: u64,
    /// Milliseconds since the Unix epoch, as recorded by the writer.
    pub timestamp_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub payload: EventPayload,
}

/// The kinds of event. `type` is the tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum EventPayload {
    /// A turn began.
    #[serde(rename = "turn.started")]
    TurnStarted(TurnStarted),
    /// The tool list shown to the model for one request (A9 evidence).
    #[serde(rename = "model.request")]
    ModelRequest(ModelRequest),
    /// A call passed schema, hook and permission and is about to run.
    #[serde(rename = "tool.started")]
    ToolStarted(ToolStarted),
    /// A call is closed, whatever happened to it.
    #[serde(rename = "tool.completed")]
    ToolCompleted(ToolCompleted),
    /// A turn ended.
    #[serde(rename = "turn.completed")]
    TurnCompleted(TurnCompleted),
    /// A model loop ended (clawsmith-agent): why, after how many requests, what it cost.
    #[serde(rename = "agent.stopped")]
    AgentStopped(AgentStopped),
    /// A background sub-agent finished; stored once, with the notice its parent's model sees.
    #[serde(rename = "background_task.completed")]
    BackgroundTaskCompleted(BackgroundTaskCompleted),
}

impl EventPayload {
    /// The `type` string.
    pub fn kind(&self) -> &'static str {
        match self {
            EventPayload::TurnStarted(_) => "turn.started",
            EventPayload::ModelRequest(_) => "model.request",
            EventPayload::ToolStarted(_) => "tool.started",
            EventPayload::ToolCompleted(_) => "tool.completed",
            EventPayload::TurnCompleted(_) => "turn.completed",
            EventPayload::AgentStopped(_) => "agent.stopped",
            EventPayload::BackgroundTaskCompleted(_) => "background_task.completed",
        }
    }
}

/// `turn.started`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStarted {
    /// The turn.
    pub turn_id: String,
}

/// `turn.completed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnCompleted {
    /// The turn.
    pub turn_id: String,
    /// Number of tool calls closed in the turn.
    pub tool_calls: u64,
}

/// `agent.stopped`: the end of a model loop (a `clawsmith run`, a sub-agent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentStopped {
    /// The loop's turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// `answered` (the model answered without calls), `max_turns`, `cancelled`, or `error` (the
    /// provider failed).
    pub stop_reason: String,
    /// Model requests made.
    pub turns: u32,
    /// Tokens over all requests, as the provider reported them.
    pub usage: TokenUsage,
    /// The provider's error, for `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Token counts of a model loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// `background_task.completed`: a background sub-agent's one notice to its parent (a cancelled
/// task has none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundTaskCompleted {
    /// `bg_N`.
    pub task_id: String,
    /// `completed` or `failed`.
    pub state: String,
    /// The child session, when one was opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_session_id: Option<String>,
    /// The child's stop reason, when it ran to an end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The child's answer (`completed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Why it failed (`failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Which schemas a model request exposed (A9 request evidence).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
    /// Identifies the request.
    pub request_id: String,
    /// The turn it belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Names of the tools shown, in order.
    pub tool_names: Vec<String>,
    /// SHA-256 (hex) of the exact schema list shown.
    pub tool_schema_sha256: String,
    /// How the list was composed.
    pub composition: RequestComposition,
}

/// The composition part of request evidence.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestComposition {
    /// Deferred tools activated by `search_tools` and therefore shown.
    pub activated_tools: Vec<String>,
}

/// Where a call sat in its turn's batches (A6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BatchInfo {
    /// The batch's position in the turn, from 0.
    pub index: u32,
    /// Number of calls in the batch.
    pub size: u32,
    /// Whether the batch ran in parallel.
    pub parallel: bool,
}

/// `tool.started`: emitted only after schema, hook and permission all passed (P9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolStarted {
    /// The call.
    pub tool_call_id: String,
    /// The turn.
    pub turn_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// Effective risk (after the capability floor).
    pub risk: Risk,
    /// Normalized capabilities.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Whether the call can change anything (effective risk above `read`).
    pub side_effect: bool,
    /// One-line summary of the call (`Tool::summarize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The tool's input schema, redacted, when the host records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_schema: Option<serde_json::Value>,
    /// The batch the call ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchInfo>,
    /// The W3C trace id (32 hex digits) of the call's `execute_tool` span, when the call was
    /// traced (clawsmith-trace): links the history to the trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The span id (16 hex digits) of the call's `execute_tool` span, when traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
}

/// `tool.completed`: closes a call (P9). `status`, `output` and `artifact` duplicate `result` for
/// clients that predate it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCompleted {
    /// The call (same id as its `tool.started`, when there was one).
    pub tool_call_id: String,
    /// The turn.
    pub turn_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The result metadata.
    pub result: ToolResultMetadata,
    /// Legacy: the status.
    pub status: ToolStatus,
    /// Legacy: the model text (or its preview when an artifact holds the full text).
    pub output: String,
    /// Legacy: the artifact reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactRef>,
    /// The W3C trace id (32 hex digits) of the call's `execute_tool` span, when the call was
    /// traced (clawsmith-trace): links the history to the trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The span id (16 hex digits) of the call's `execute_tool` span, when traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
}

impl ToolCompleted {
    /// Builds the event from a result, filling the legacy fields from the same data.
    pub fn new(
        tool_call_id: impl Into<String>,
        turn_id: impl Into<String>,
        tool_name: impl Into<String>,
        result: &crate::ToolExecutionResult,
    ) -> ToolCompleted {
        ToolCompleted {
            tool_call_id: tool_call_id.into(),
            turn_id: turn_id.into(),
            tool_name: tool_name.into(),
            status: result.metadata.status,
            artifact: result.metadata.artifact.clone(),
            output: result.content.clone(),
            result: result.metadata.clone(),
            trace_id: None,
            span_id: None,
        }
    }

    /// [`ToolCompleted::new`] that takes the result's text and metadata instead of copying them
    /// (the text and the display body are a read file each, otherwise copied at every call),
    /// leaving `result` its status, code and `retryable`; [`ToolCompleted::give_back`] returns
    /// them once the event is stored and sent.
    pub fn taking(
        tool_call_id: impl Into<String>,
        turn_id: impl Into<String>,
        tool_name: impl Into<String>,
        result: &mut crate::ToolExecutionResult,
    ) -> ToolCompleted {
        let left = crate::ToolResultMetadata {
            version: result.metadata.version,
            status: result.metadata.status,
            code: result.metadata.code.clone(),
            retryable: result.metadata.retryable,
            display: None,
            artifact: None,
        };
        let metadata = std::mem::replace(&mut result.metadata, left);
        ToolCompleted {
            tool_call_id: tool_call_id.into(),
            turn_id: turn_id.into(),
            tool_name: tool_name.into(),
            status: metadata.status,
            artifact: metadata.artifact.clone(),
            output: std::mem::take(&mut result.content),
            result: metadata,
            trace_id: None,
            span_id: None,
        }
    }

    /// Gives `result` back the text and metadata [`ToolCompleted::taking`] took (this event's
    /// `output` and `result`, which are left empty and as `result`'s were).
    pub fn give_back(&mut self, result: &mut crate::ToolExecutionResult) {
        result.content = std::mem::take(&mut self.output);
        std::mem::swap(&mut result.metadata, &mut self.result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Display, DisplayKind, ErrorCode, ToolExecutionResult};

    #[test]
    fn a_completion_taking_the_result_is_the_copy_and_gives_it_back_whole() {
        let results = [
            ToolExecutionResult::success("fn main() {}\n".repeat(300)).with_display(
                Display::new(DisplayKind::Text)
                    .with_title("main.rs")
                    .with_body("fn main() {}\n")
                    .with_field("lines", 300),
            ),
            ToolExecutionResult::failure(ErrorCode::TIMEOUT, "slow"),
            ToolExecutionResult::success(""),
        ];
        for original in results {
            let copied = ToolCompleted::new("c1", "t1", "read_file", &original);
            let mut result = original.clone();
            let mut taken = ToolCompleted::taking("c1", "t1", "read_file", &mut result);
            assert_eq!(taken, copied);
            // What the result keeps meanwhile: its status, code and whether a retry is safe.
            assert_eq!(result.status(), original.status());
            assert_eq!(result.code(), original.code());
            assert_eq!(result.metadata.retryable, original.metadata.retryable);
            assert!(result.content.is_empty() && result.metadata.display.is_none());
            taken.give_back(&mut result);
            assert_eq!(result, original);
        }
    }
}
