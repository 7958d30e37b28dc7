//! Declared risk and capabilities (P2, P3).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How much a tool call can change the world, ordered `read` < `workspace-write` < `execute`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Risk {
    /// Observes the workspace or the session; changes nothing.
    Read,
    /// Changes files inside the workspace (undoable through checkpoints).
    WorkspaceWrite,
    /// Runs processes, reaches the network or has other effects outside the workspace.
    Execute,
}

impl Risk {
    /// Every risk, lowest first.
    pub const ALL: [Risk; 3] = [Risk::Read, Risk::WorkspaceWrite, Risk::Execute];

    /// The exact wire string (`read`, `workspace-write`, `execute`).
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Read => "read",
            Risk::WorkspaceWrite => "workspace-write",
            Risk::Execute => "execute",
        }
    }
}

impl std::fmt::Display for Risk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a tool can touch. The strings are part of the contract (P3).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum Capability {
    /// Reads files.
    #[serde(rename = "filesystem.read")]
    FilesystemRead,
    /// Writes, renames or deletes files.
    #[serde(rename = "filesystem.write")]
    FilesystemWrite,
    /// Spawns processes.
    #[serde(rename = "process.execute")]
    ProcessExecute,
    /// Opens network connections.
    #[serde(rename = "network")]
    Network,
    /// Reads or uses credentials.
    #[serde(rename = "credentials")]
    Credentials,
    /// Has effects outside this machine's workspace (sends mail, pushes, pays…).
    #[serde(rename = "external.side-effect")]
    ExternalSideEffect,
    /// Reads session state (todos, artifacts, history).
    #[serde(rename = "session.read")]
    SessionRead,
    /// Writes session state.
    #[serde(rename = "session.write")]
    SessionWrite,
    /// Hands work to another agent.
    #[serde(rename = "agent.delegate")]
    AgentDelegate,
}

impl Capability {
    /// Every capability, in wire order.
    pub const ALL: [Capability; 9] = [
        Capability::FilesystemRead,
        Capability::FilesystemWrite,
        Capability::ProcessExecute,
        Capability::Network,
        Capability::Credentials,
        Capability::ExternalSideEffect,
        Capability::SessionRead,
        Capability::SessionWrite,
        Capability::AgentDelegate,
    ];

    /// The exact wire string, e.g. `filesystem.read`.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::FilesystemRead => "filesystem.read",
            Capability::FilesystemWrite => "filesystem.write",
            Capability::ProcessExecute => "process.execute",
            Capability::Network => "network",
            Capability::Credentials => "credentials",
            Capability::ExternalSideEffect => "external.side-effect",
            Capability::SessionRead => "session.read",
            Capability::SessionWrite => "session.write",
            Capability::AgentDelegate => "agent.delegate",
        }
    }

    /// Parses the exact wire string; anything else (other case, whitespace) is `None`.
    pub fn parse(text: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool's capability declaration as it arrived.
///
/// Built-in tools declare a typed list. Extension tools (MCP servers, plugins, configuration
/// files) hand over whatever JSON they were given, and `clawsmith-security` normalizes it, failing
/// closed on anything it does not fully understand (S2).
#[derive(Debug, Clone, PartialEq)]
pub enum CapabilityDeclaration {
    /// A typed list from Rust code.
    Declared(Vec<Capability>),
    /// Untrusted JSON (expected: an array of capability strings).
    Raw(serde_json::Value),
    /// The declaration is absent.
    Missing,
}

impl From<&[Capability]> for CapabilityDeclaration {
    fn from(list: &[Capability]) -> Self {
        CapabilityDeclaration::Declared(list.to_vec())
    }
}
