//! Model messages and the pairing of tool calls with tool results (P10, P11).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::result::{ToolResultSummary, ToolStatus};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The person.
    User,
    /// The model (may carry tool calls).
    Assistant,
    /// A tool result answering one tool call.
    Tool,
}

/// One tool call as a provider sends it: `arguments` is a JSON *string*.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The provider's call id (`toolCallId` everywhere else).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as raw JSON text; it may be malformed, which the core reports as
    /// `invalid_json`.
    pub arguments: String,
}

/// A message of the conversation history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelMessage {
    /// Who wrote it.
    pub role: Role,
    /// The full text (for a tool message: exactly what the model sees).
    pub content: String,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a tool message: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// For a tool message: light result metadata. Absent on messages written before v15.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResultSummary>,
}

impl ModelMessage {
    /// A plain message without tool data.
    pub fn text(role: Role, content: impl Into<String>) -> ModelMessage {
        ModelMessage {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            tool_result: None,
        }
    }

    /// An assistant message carrying tool calls.
    pub fn assistant_with_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> ModelMessage {
        ModelMessage {
            tool_calls: calls,
            ..ModelMessage::text(Role::Assistant, content)
        }
    }

    /// The tool message answering `tool_call_id`.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        tool_name: impl Into<String>,
        content: impl Into<String>,
        summary: ToolResultSummary,
    ) -> ModelMessage {
        ModelMessage {
            tool_call_id: Some(tool_call_id.into()),
            tool_name: Some(tool_name.into()),
            tool_result: Some(summary),
            ..ModelMessage::text(Role::Tool, content)
        }
    }

    /// The status of a tool message: the structured `toolResult` when present, otherwise
    /// inferred from the content's prefix (P11). `None` for messages that are not tool results.
    pub fn tool_status(&self) -> Option<ToolStatus> {
        if self.role != Role::Tool {
            return None;
        }
        Some(match &self.tool_result {
            Some(summary) => summary.status,
            None => infer_status_from_content(&self.content),
        })
    }
}

/// Infers a tool message's status from its text, for history written before `toolResult` existed
/// (P11). The prefixes are the ones [`crate::status_prefix`] writes, plus the spellings older
/// clients used; anything else is a successful observation.
pub fn infer_status_from_content(content: &str) -> ToolStatus {
    let head = content.trim_start();
    let starts = |prefixes: &[&str]| {
        prefixes.iter().any(|prefix| {
            head.len() >= prefix.len()
                && head.is_char_boundary(prefix.len())
                && head[..prefix.len()].eq_ignore_ascii_case(prefix)
        })
    };
    if starts(&["Interrupted:", "Interrupted "]) {
        ToolStatus::Unknown
    } else if starts(&["Denied:", "Permission denied", "Hook denied"]) {
        ToolStatus::Denied
    } else if starts(&["Cancelled:", "Canceled:", "Cancelled ", "Canceled "]) {
        ToolStatus::Cancelled
    } else if starts(&["Error:", "Error ", "Tool failed"]) {
        ToolStatus::Error
    } else {
        ToolStatus::Success
    }
}
