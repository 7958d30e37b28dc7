//! The core's spans: one per turn, `execute_tool {tool}` per call as its child, with
//! the GenAI attributes and the pipeline's steps as events. Names come from
//! `clawsmith_trace::semconv`; with the default no-op tracer nothing here allocates.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use clawsmith_protocol::{ToolCall, ToolExecutionResult, ToolStatus, TraceHeaders};
use clawsmith_trace::{Attribute, Span, SpanContext, Tracer, semconv};

use crate::table::ToolEntry;

/// The open call spans of one batch, by call id.
pub(crate) struct CallSpans<'a> {
    tracer: &'a Tracer,
    parent: Option<&'a SpanContext>,
    session_id: &'a str,
    turn_id: &'a str,
    spans: Mutex<HashMap<String, Span>>,
}

impl<'a> CallSpans<'a> {
    pub fn new(
        tracer: &'a Tracer,
        parent: Option<&'a SpanContext>,
        (session_id, turn_id): (&'a str, &'a str),
    ) -> CallSpans<'a> {
        CallSpans {
            tracer,
            parent,
            session_id,
            turn_id,
            spans: Mutex::new(HashMap::new()),
        }
    }

    /// No tracer and no incoming context: no span exists, so nothing to look up.
    fn is_idle(&self) -> bool {
        self.parent.is_none() && !self.tracer.is_enabled()
    }

    /// Opens the call's span after steps 1–5; `prepared` is the tool when they passed, else the
    /// refusal (recorded as a failed validation event).
    pub fn start(&self, call: &ToolCall, prepared: Result<&ToolEntry, &ToolExecutionResult>) {
        if self.is_idle() {
            return;
        }
        let mut span = self
            .tracer
            .start(self.parent, || semconv::execute_tool_span_name(&call.name));
        if span.is_recording() {
            span.set_attribute(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL);
            span.set_attribute(semconv::GEN_AI_TOOL_NAME, call.name.clone());
            span.set_attribute(semconv::GEN_AI_TOOL_CALL_ID, call.id.clone());
            span.set_attribute(semconv::GEN_AI_CONVERSATION_ID, self.session_id.to_owned());
            span.set_attribute(semconv::CLAWSMITH_TURN_ID, self.turn_id.to_owned());
            let validation: Vec<Attribute> = match prepared {
                Ok(entry) => {
                    let facts = entry.facts();
                    let builtin = entry.origin().is_core();
                    span.set_attribute(
                        semconv::GEN_AI_TOOL_TYPE,
                        if builtin { "function" } else { "extension" },
                    );
                    span.set_attribute(semconv::CLAWSMITH_RISK, facts.effective_risk.as_str());
                    vec![("outcome", "passed".into())]
                }
                Err(refusal) => vec![
                    ("outcome", "refused".into()),
                    (
                        "code",
                        refusal
                            .metadata
                            .code
                            .clone()
                            .map(|code| code.as_str().to_owned())
                            .unwrap_or_default()
                            .into(),
                    ),
                ],
            };
            span.add_event(semconv::EVENT_VALIDATION, validation);
        }
        self.spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(call.id.clone(), span);
    }

    /// An event on the call's span (hook, permission).
    pub fn event(
        &self,
        call_id: &str,
        name: &'static str,
        attributes: impl FnOnce() -> Vec<Attribute>,
    ) {
        if !self.tracer.is_enabled() {
            return;
        }
        if let Some(span) = self
            .spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(call_id)
        {
            span.add_event(name, attributes());
        }
    }

    /// The call's trace and span id (hex), for its `tool.started` and `tool.completed`.
    pub fn ids(&self, call_id: &str) -> (Option<String>, Option<String>) {
        if self.is_idle() {
            return (None, None);
        }
        let spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        match spans.get(call_id).and_then(Span::context) {
            Some(context) => (
                Some(context.trace_id.to_hex()),
                Some(context.span_id.to_hex()),
            ),
            None => (None, None),
        }
    }

    /// The call's span as W3C headers for the processes and servers it reaches (`TRACEPARENT`,
    /// MCP `_meta.traceparent`).
    pub fn headers(&self, call_id: &str) -> Option<TraceHeaders> {
        if self.is_idle() {
            return None;
        }
        let spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        let context = spans.get(call_id).and_then(Span::context)?;
        Some(TraceHeaders {
            traceparent: context.traceparent().to_string(),
            tracestate: context
                .trace_state
                .as_ref()
                .filter(|state| !state.is_empty())
                .map(ToString::to_string),
        })
    }

    /// Records the outcome and ends the span.
    pub fn close(&self, call_id: &str, result: &ToolExecutionResult) {
        if self.is_idle() {
            return;
        }
        let Some(mut span) = self
            .spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(call_id)
        else {
            return;
        };
        let status = result.status();
        span.set_attribute(semconv::CLAWSMITH_STATUS, status.as_str());
        if let Some(code) = &result.metadata.code {
            span.set_attribute(semconv::CLAWSMITH_CODE, code.as_str().to_owned());
        }
        if status != ToolStatus::Success {
            let error_type = result.metadata.code.as_ref().map_or_else(
                || status.as_str().to_owned(),
                |code| code.as_str().to_owned(),
            );
            span.set_attribute(semconv::ERROR_TYPE, error_type.clone());
            span.set_error(error_type);
        }
        span.end();
    }
}
