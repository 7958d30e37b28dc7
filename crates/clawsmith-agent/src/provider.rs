//! The provider interface: one request in, one assistant message out.

use std::future::Future;
use std::pin::Pin;

use clawsmith_core::ShownTool;
use clawsmith_protocol::{ModelMessage, ToolCall};
use serde::Serialize;

use crate::error::ProviderError;

/// One model request: the history to send, the tools shown (exactly the core's
/// [`clawsmith_core::RequestEvidence::tools`]) and the request's id.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRequest {
    /// The core's `requestId` (sent as a header so a server's logs can be matched to the store).
    pub request_id: String,
    /// Instructions sent before the history (not stored in the session).
    pub system: Option<String>,
    /// The session's messages, in order.
    pub messages: Vec<ModelMessage>,
    /// The tools shown, in table order.
    pub tools: Vec<ShownTool>,
    /// Overrides the configured model for this request (an agent definition's `model`).
    pub model: Option<String>,
    /// The W3C `traceparent` of the loop's `invoke_agent` span, sent as a header so a traced
    /// model server joins the trace; `None` when there is no trace.
    pub traceparent: Option<String>,
    /// The `tracestate` passed along with it.
    pub tracestate: Option<String>,
}

/// Token counts as the provider reported them (zero when it did not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Adds another request's counts.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// The assistant message of one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AssistantReply {
    /// The text (may be empty when the model only calls tools).
    pub text: String,
    /// The tool calls, arguments as raw JSON text (malformed JSON is the core's `invalid_json`).
    pub tool_calls: Vec<ToolCall>,
    /// Token counts.
    pub usage: Usage,
    /// The provider's own stop reason (`stop`, `tool_calls`, `end_turn`, `max_tokens`, …).
    pub stop_reason: String,
}

/// Receives the text of a streamed answer as it arrives.
pub trait TextSink: Send + Sync {
    /// A piece of the assistant's text.
    fn text(&self, delta: &str);
}

/// The future a provider returns.
pub type ProviderFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AssistantReply, ProviderError>> + Send + 'a>>;

/// A model provider.
pub trait Provider: Send + Sync {
    /// `kind:model`, for progress lines and errors.
    fn describe(&self) -> String;
    /// Sends one request and returns the assistant's message. With `stream`, the answer is
    /// requested as a stream and its text handed to the sink as it arrives; the reply is the
    /// same either way.
    fn complete<'a>(
        &'a self,
        request: &'a ProviderRequest,
        stream: Option<&'a dyn TextSink>,
    ) -> ProviderFuture<'a>;
}
