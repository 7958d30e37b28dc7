//! The `Tool` trait and the context a call executes in (P1, S5).

use std::future::Future;
use std::pin::Pin;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cancel::CancellationSignal;
use crate::result::{ErrorCode, ToolExecutionResult};
use crate::risk::{CapabilityDeclaration, Risk};

/// The boxed future a tool's `execute` returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolOutput> + Send + 'a>>;

/// A tool the model can call (P1).
///
/// The model sees `name`, `description` and `input_schema`; the runtime checks every call
/// against the same schema before `execute` runs, computes the effective risk from `risk` and
/// `capabilities`, and decides parallelism from `concurrency_safe`. The check is the compiled
/// schema, except for a call a tool clawsmith ships vouches for ([`Tool::vouches_for_input`]):
/// that call is accepted without compiling the schema, and every call the tool does not vouch
/// for is validated against the schema, so a refusal always names what the schema refuses.
pub trait Tool: Send + Sync {
    /// Unique name in the frozen table, e.g. `read_file`.
    fn name(&self) -> &str;
    /// What the model reads to decide when to call it.
    fn description(&self) -> &str;
    /// Declared risk; the capability floor can only raise it.
    fn risk(&self) -> Risk;
    /// Declared capabilities, normalized (failing closed) by `clawsmith-security`.
    fn capabilities(&self) -> CapabilityDeclaration;
    /// Whether calls may run in parallel with other concurrency-safe reads.
    fn concurrency_safe(&self) -> bool;
    /// JSON Schema of the input: what the model is shown and what calls are validated against.
    fn input_schema(&self) -> serde_json::Value;
    /// One line describing a call, for UIs and approval prompts. Must not fail on bad input.
    fn summarize(&self, input: &serde_json::Value) -> String;
    /// Runs the call. Failures the model should read are results, not panics.
    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a>;
    /// Search metadata for a deferred tool (A9); `None` means the tool is always shown.
    fn deferred(&self) -> Option<SearchMetadata> {
        None
    }
    /// Whether the tool vouches that `input` is valid against [`Tool::input_schema`]: `true`
    /// only when the tool's own parser accepts `input` and every constraint of the schema is one
    /// that parser (or this check) enforces, so the schema accepts it too. `false` means "not
    /// known" (the parser refuses it, or the tool cannot say): the runtime then validates the
    /// call against the schema as usual. The default says `false` for every input.
    ///
    /// The runtime takes a `true` only from the tools clawsmith ships (its built-in tools and
    /// its own crates' extensions), whose tests prove for each of them that the parser accepts
    /// nothing the schema refuses; a tool from elsewhere (MCP, plugins, host code) is always
    /// validated against its schema. It spares a short process compiling a schema validator
    /// for a well-formed call.
    fn vouches_for_input(&self, input: &serde_json::Value) -> bool {
        let _ = input;
        false
    }
}

/// What a tool returned, before the core normalizes it (A3).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    /// A typed result (built-in tools).
    Result(ToolExecutionResult),
    /// Plain text: becomes a success.
    Text(String),
    /// Arbitrary JSON from an extension: a valid result object keeps its status; anything else
    /// is serialized (bounded) as text.
    Json(serde_json::Value),
}

impl From<ToolExecutionResult> for ToolOutput {
    fn from(result: ToolExecutionResult) -> Self {
        ToolOutput::Result(result)
    }
}

/// How a deferred tool is found by `search_tools` (A9).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchMetadata {
    /// Other names people use for it.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Topic words.
    #[serde(default)]
    pub tags: Vec<String>,
    /// When to use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_hint: Option<String>,
}

/// The verdict of a permission check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Ask a person first.
    Ask,
    /// Refuse.
    Deny,
}

/// A permission or hook decision with its reason, as recorded for audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionDecision {
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in a sentence a person can read.
    pub reason: String,
    /// The rule that decided, when a rule did (e.g. `deny run_command(git push*)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// Proof that a permission decision allowed this call (S5).
///
/// It can only be obtained from an `allow` [`PermissionDecision`], so code that instantiates a
/// tool directly has to go through a decision to get one; the fields are private.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    reason: String,
}

impl Authorization {
    /// Turns an `allow` decision into the token; `ask` and `deny` give nothing.
    pub fn from_decision(decision: &PermissionDecision) -> Option<Authorization> {
        (decision.verdict == Verdict::Allow).then(|| Authorization {
            reason: decision.reason.clone(),
        })
    }

    /// Why the call was allowed.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Everything a call executes with (P1, S5).
#[derive(Debug, Clone)]
pub struct ToolExecutionContext {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The call.
    pub tool_call_id: String,
    /// Fires when the user or host cancels the call.
    pub cancellation: CancellationSignal,
    /// The call's W3C trace context (its `execute_tool` span), handed to the processes and
    /// servers the call reaches; `None` when the call is not traced.
    pub trace: Option<TraceHeaders>,
    authorization: Option<Authorization>,
}

/// W3C Trace Context as text, ready for a `TRACEPARENT` variable or an MCP `_meta` entry
/// (clawsmith-trace parses and formats it; the wire layer only carries it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceHeaders {
    /// `00-<trace id>-<span id>-<flags>`.
    pub traceparent: String,
    /// The caller's vendor entries, passed along unchanged.
    pub tracestate: Option<String>,
}

impl ToolExecutionContext {
    /// An unauthorized context: read tools run, side-effecting tools refuse (S5).
    pub fn new(
        session_id: impl Into<String>,
        turn_id: impl Into<String>,
        tool_call_id: impl Into<String>,
    ) -> ToolExecutionContext {
        ToolExecutionContext {
            session_id: session_id.into(),
            turn_id: turn_id.into(),
            tool_call_id: tool_call_id.into(),
            cancellation: CancellationSignal::new(),
            trace: None,
            authorization: None,
        }
    }

    /// Carries `trace` to the call's processes and servers.
    pub fn with_trace(mut self, trace: Option<TraceHeaders>) -> ToolExecutionContext {
        self.trace = trace;
        self
    }

    /// Attaches the proof of an `allow` decision.
    pub fn with_authorization(mut self, authorization: Authorization) -> ToolExecutionContext {
        self.authorization = Some(authorization);
        self
    }

    /// Uses `cancellation` instead of a fresh signal.
    pub fn with_cancellation(mut self, cancellation: CancellationSignal) -> ToolExecutionContext {
        self.cancellation = cancellation;
        self
    }

    /// The spec's `authorized: true`.
    pub fn authorized(&self) -> bool {
        self.authorization.is_some()
    }

    /// The second authorization at the tool layer (S5): `Err` carries the mission's exact refusal,
    /// `Tool <action> requires explicit authorization`, as a `permission_denied` result.
    #[allow(clippy::result_large_err)]
    pub fn require_authorization(&self, action: &str) -> Result<(), ToolExecutionResult> {
        if self.authorized() {
            Ok(())
        } else {
            Err(ToolExecutionResult::failure(
                ErrorCode::PERMISSION_DENIED,
                format!("Tool {action} requires explicit authorization"),
            ))
        }
    }
}
