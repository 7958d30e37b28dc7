//! Span and attribute names: the OpenTelemetry GenAI semantic conventions, plus clawsmith's own.
//! Everything that names a span or an attribute uses these constants, never a literal.

/// `gen_ai.operation.name` of a tool call, and the first word of its span name.
pub const EXECUTE_TOOL: &str = "execute_tool";
/// The span name of a turn (clawsmith's own: a turn is the unit the core closes and undoes).
pub const TURN_SPAN: &str = "clawsmith.turn";
/// The operation (`execute_tool`).
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// The tool's name.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// The model's call id.
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `function` for built-in tools, `extension` for MCP, plugin and other extension tools.
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
/// The session id.
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// On failure: the error code (or `refused`/`_OTHER`).
pub const ERROR_TYPE: &str = "error.type";
/// The call's effective risk (`read`, `write`, `execute`, …).
pub const CLAWSMITH_RISK: &str = "clawsmith.risk";
/// The result's status (`success`, `error`, `denied`, …).
pub const CLAWSMITH_STATUS: &str = "clawsmith.status";
/// The result's error code, when there is one.
pub const CLAWSMITH_CODE: &str = "clawsmith.code";
/// The turn the call belongs to.
pub const CLAWSMITH_TURN_ID: &str = "clawsmith.turn.id";

/// Span event: the arguments passed (or failed) schema validation.
pub const EVENT_VALIDATION: &str = "clawsmith.validation";
/// Span event: a hook answered.
pub const EVENT_HOOK: &str = "clawsmith.hook";
/// Span event: the permission check decided.
pub const EVENT_PERMISSION: &str = "clawsmith.permission";

/// `gen_ai.operation.name` of an agent's model loop (clawsmith-agent: a run, a sub-agent), and
/// the first word of its span name.
pub const INVOKE_AGENT: &str = "invoke_agent";
/// The agent's name (`clawsmith`, a sub-agent tool's name, an agent definition's name).
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
/// Prompt tokens over the loop's requests.
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// Generated tokens over the loop's requests.
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// Why an agent's loop ended (`answered`, `max_turns`, `cancelled`, `error`).
pub const CLAWSMITH_STOP_REASON: &str = "clawsmith.stop_reason";
/// Model requests an agent's loop made.
pub const CLAWSMITH_REQUESTS: &str = "clawsmith.requests";

/// The span name of an agent's model loop: `invoke_agent {gen_ai.agent.name}`.
pub fn invoke_agent_span_name(agent: &str) -> String {
    format!("{INVOKE_AGENT} {agent}")
}

/// The span name of a tool call: `execute_tool {gen_ai.tool.name}`.
pub fn execute_tool_span_name(tool: &str) -> String {
    format!("{EXECUTE_TOOL} {tool}")
}
