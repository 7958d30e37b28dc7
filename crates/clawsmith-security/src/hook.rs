//! What hooks see and what they answer (S3).

use clawsmith_protocol::{Capability, Risk};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capability::ToolFacts;

/// The input a hook receives (as JSON on stdin for command hooks): normalized facts, so a hook
/// can match on capabilities instead of a tool's self-declared label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookInput {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The call.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The validated input.
    pub input: serde_json::Value,
    /// Effective risk.
    pub risk: Risk,
    /// What the tool declared.
    pub declared_risk: Risk,
    /// Normalized capabilities.
    pub capabilities: Vec<Capability>,
    /// Whether the call can change anything.
    pub side_effect: bool,
    /// One-line summary of the call.
    pub summary: String,
}

impl HookInput {
    /// Builds the input from the tool's facts and the call.
    pub fn new(
        facts: &ToolFacts,
        ids: (&str, &str, &str),
        input: serde_json::Value,
        summary: String,
    ) -> HookInput {
        let (session_id, turn_id, tool_call_id) = ids;
        HookInput {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            tool_name: facts.name.clone(),
            input,
            risk: facts.effective_risk,
            declared_risk: facts.declared_risk,
            capabilities: facts.capabilities.to_vec(),
            side_effect: facts.side_effect(),
            summary,
        }
    }
}

/// A hook's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HookVerdict {
    /// No objection; the permission layer still decides.
    Allow,
    /// Require a person's approval even where the mode would allow.
    Ask,
    /// Refuse: the call ends `denied` / `hook_denied`.
    Deny,
}

/// A hook's decision (stdout of a command hook).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookDecision {
    /// The verdict.
    pub decision: HookVerdict,
    /// Why; shown to the model and the person when the call is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
