//! Capability normalization and the risk floor (S1, S2).

use std::collections::BTreeSet;

use clawsmith_protocol::{Capability, CapabilityDeclaration, Risk};
use serde::Serialize;

/// A tool's capabilities after normalization: a set of known capabilities, or — when the
/// declaration could not be trusted — all of them, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NormalizedCapabilities {
    set: BTreeSet<Capability>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_closed: Option<String>,
}

impl NormalizedCapabilities {
    /// Every capability, because the declaration was missing or malformed.
    pub fn fail_closed(reason: impl Into<String>) -> NormalizedCapabilities {
        NormalizedCapabilities {
            set: Capability::ALL.into_iter().collect(),
            failed_closed: Some(reason.into()),
        }
    }

    /// Exactly `capabilities`.
    pub fn of(capabilities: impl IntoIterator<Item = Capability>) -> NormalizedCapabilities {
        NormalizedCapabilities {
            set: capabilities.into_iter().collect(),
            failed_closed: None,
        }
    }

    /// Whether `capability` is in the set.
    pub fn contains(&self, capability: Capability) -> bool {
        self.set.contains(&capability)
    }

    /// The capabilities, in wire order.
    pub fn iter(&self) -> impl Iterator<Item = Capability> + '_ {
        self.set.iter().copied()
    }

    /// The capabilities as a vector, in wire order.
    pub fn to_vec(&self) -> Vec<Capability> {
        self.iter().collect()
    }

    /// Why the declaration was not trusted, if it was not.
    pub fn failed_closed(&self) -> Option<&str> {
        self.failed_closed.as_deref()
    }

    /// The lowest risk these capabilities allow (S1).
    pub fn floor(&self) -> Risk {
        risk_floor(self.iter())
    }
}

/// Normalizes a declaration (S2): a typed list is taken as is; raw JSON must be an array of exact
/// capability strings, and anything else — absent, `null`, another type, a non-string element, an
/// unknown or misspelled string — yields *all* capabilities.
pub fn normalize_capabilities(declaration: &CapabilityDeclaration) -> NormalizedCapabilities {
    match declaration {
        CapabilityDeclaration::Declared(list) => NormalizedCapabilities::of(list.iter().copied()),
        CapabilityDeclaration::Missing => {
            NormalizedCapabilities::fail_closed("capabilities are missing")
        }
        CapabilityDeclaration::Raw(value) => normalize_raw(value),
    }
}

fn normalize_raw(value: &serde_json::Value) -> NormalizedCapabilities {
    let Some(items) = value.as_array() else {
        return NormalizedCapabilities::fail_closed(format!(
            "capabilities must be an array of strings, found {}",
            json_type_name(value)
        ));
    };
    let mut set = BTreeSet::new();
    for item in items {
        let Some(text) = item.as_str() else {
            return NormalizedCapabilities::fail_closed(format!(
                "capability entries must be strings, found {}",
                json_type_name(item)
            ));
        };
        match Capability::parse(text) {
            Some(capability) => {
                set.insert(capability);
            }
            None => {
                // Keep the echo short: the string came from an untrusted declaration.
                let shown: String = text.chars().take(64).collect();
                return NormalizedCapabilities::fail_closed(format!(
                    "unknown capability {shown:?}"
                ));
            }
        }
    }
    NormalizedCapabilities {
        set,
        failed_closed: None,
    }
}

fn json_type_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The risk floor of a capability set (S1): `filesystem.write` ⇒ `workspace-write`;
/// `process.execute`, `network`, `credentials`, `external.side-effect` ⇒ `execute`.
pub fn risk_floor(capabilities: impl IntoIterator<Item = Capability>) -> Risk {
    capabilities
        .into_iter()
        .map(capability_floor)
        .max()
        .unwrap_or(Risk::Read)
}

/// The floor one capability imposes on its own.
pub fn capability_floor(capability: Capability) -> Risk {
    match capability {
        Capability::FilesystemWrite => Risk::WorkspaceWrite,
        Capability::ProcessExecute
        | Capability::Network
        | Capability::Credentials
        | Capability::ExternalSideEffect => Risk::Execute,
        Capability::FilesystemRead
        | Capability::SessionRead
        | Capability::SessionWrite
        | Capability::AgentDelegate => Risk::Read,
    }
}

/// Effective risk = max(declared, floor) (S1). A fail-closed set has every capability, so its
/// floor is `execute`.
pub fn effective_risk(declared: Risk, capabilities: &NormalizedCapabilities) -> Risk {
    declared.max(capabilities.floor())
}

/// The normalized facts about a tool that permission rules and hooks match on (S3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolFacts {
    /// The tool's name.
    pub name: String,
    /// What the tool declared.
    pub declared_risk: Risk,
    /// Effective risk after the floor.
    pub effective_risk: Risk,
    /// Normalized capabilities.
    pub capabilities: NormalizedCapabilities,
}

impl ToolFacts {
    /// Computes the facts of a tool from its declarations.
    pub fn of(tool: &dyn clawsmith_protocol::Tool) -> ToolFacts {
        ToolFacts::from_declaration(tool.name(), tool.risk(), &tool.capabilities())
    }

    /// Computes the facts from a name, declared risk and capability declaration.
    pub fn from_declaration(
        name: impl Into<String>,
        declared_risk: Risk,
        declaration: &CapabilityDeclaration,
    ) -> ToolFacts {
        let capabilities = normalize_capabilities(declaration);
        ToolFacts {
            name: name.into(),
            declared_risk,
            effective_risk: effective_risk(declared_risk, &capabilities),
            capabilities,
        }
    }

    /// Whether the call can change anything (effective risk above `read`).
    pub fn side_effect(&self) -> bool {
        self.effective_risk > Risk::Read
    }
}
