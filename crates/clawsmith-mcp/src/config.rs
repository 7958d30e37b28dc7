//! The `[[mcp_servers]]` part of `clawsmith.toml`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clawsmith_protocol::Risk;
use serde::Deserialize;

use crate::error::McpError;

/// The external MCP servers whose tools become deferred extension tools.
///
/// Other top-level tables of the file (permission rules, …) belong to other readers and are
/// ignored here; inside `[[mcp_servers]]` unknown keys are errors, because a misspelled
/// `capabilities` would otherwise silently fall back to `execute`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct McpConfig {
    /// The servers, in file order.
    #[serde(default)]
    pub mcp_servers: Vec<McpServerConfig>,
}

/// One external MCP server, spawned over stdio.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Short name: `[A-Za-z0-9-]` and single `_`, at most 32 bytes. Tools are named
    /// `mcp__<name>__<tool>`.
    pub name: String,
    /// The program to run (absolute, or found on the `PATH` *passed to it*, see `env`).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Names of the parent's environment variables passed to the server; nothing else is
    /// inherited (not even `PATH` or `HOME` unless listed).
    #[serde(default)]
    pub env: Vec<String>,
    /// The capabilities the *user* declares for every tool of this server (`network`,
    /// `filesystem.read`, …). Absent ⇒ the declaration is missing and the effective risk fails
    /// closed to `execute`. The server's own annotations are never consulted.
    #[serde(default)]
    pub capabilities: Option<Vec<String>>,
    /// Declared risk of the tools; the capability floor can only raise it. Absent ⇒ `execute`.
    #[serde(default)]
    pub risk: Option<Risk>,
    /// How long starting the server may take, from spawn through `initialize` and every
    /// `tools/list` page. Absent ⇒ [`DEFAULT_STARTUP_TIMEOUT_MS`]; past it the server is left out.
    #[serde(default)]
    pub startup_timeout_ms: Option<u64>,
    /// How long one call may wait without its answer or a `notifications/progress` for it (each
    /// progress notification starts the wait again). Absent ⇒ [`DEFAULT_CALL_TIMEOUT_MS`]; past
    /// it the call ends with code `timeout`.
    #[serde(default)]
    pub call_timeout_ms: Option<u64>,
    /// How long one call may run at most, progress or not. Absent ⇒ [`DEFAULT_CALL_MAX_MS`];
    /// past it the call ends with code `timeout`.
    #[serde(default)]
    pub call_max_ms: Option<u64>,
    /// Whether the server may reach the network. Absent ⇒ no: it runs in a network namespace
    /// with only a loopback.
    #[serde(default)]
    pub network: bool,
    /// `"read"` (absent) or `"write"`: whether the server may write the workspace.
    #[serde(default)]
    pub workspace: WorkspaceAccess,
    /// Folders the server may write besides its private `/tmp` (e.g. its cache).
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// Runs the server outside the sandbox, with the user's full view of the machine. Absent ⇒
    /// no: every server runs confined by the MCP-server profile of clawsmith's one sandbox
    /// policy (the state directory, hidden paths and `$HOME` outside its allowlist out of sight).
    #[serde(default)]
    pub unconfined: bool,
}

/// What an MCP server may do in the workspace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceAccess {
    /// Read it (the default).
    #[default]
    Read,
    /// Read and write it.
    Write,
}

/// Longest server name.
pub const MAX_SERVER_NAME_BYTES: usize = 32;
/// Start-up budget of a server when `startup_timeout_ms` is absent: 10 s.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 10_000;
/// Budget of one call when `call_timeout_ms` is absent: 60 s.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;
/// The most one call may run when `call_max_ms` is absent, progress or not: 30 minutes.
pub const DEFAULT_CALL_MAX_MS: u64 = 30 * 60 * 1000;

impl McpServerConfig {
    /// `startup_timeout_ms`, or its default.
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_millis(
            self.startup_timeout_ms
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT_MS),
        )
    }

    /// `call_timeout_ms`, or its default.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms.unwrap_or(DEFAULT_CALL_TIMEOUT_MS))
    }

    /// `call_max_ms`, or its default.
    pub fn call_max(&self) -> Duration {
        Duration::from_millis(self.call_max_ms.unwrap_or(DEFAULT_CALL_MAX_MS))
    }
}

impl McpConfig {
    /// Parses the TOML text of `clawsmith.toml` and validates the server entries.
    pub fn from_toml_str(text: &str) -> Result<McpConfig, McpError> {
        McpConfig::parse(text, None)
    }

    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<McpConfig, McpError> {
        let text = std::fs::read_to_string(path).map_err(|cause| McpError::ReadConfig {
            path: path.to_path_buf(),
            cause,
        })?;
        McpConfig::parse(&text, Some(path.to_path_buf()))
    }

    fn parse(text: &str, path: Option<PathBuf>) -> Result<McpConfig, McpError> {
        let config: McpConfig = toml::from_str(text).map_err(|error| McpError::InvalidConfig {
            path: path.clone(),
            message: error.to_string(),
        })?;
        config
            .validate()
            .map_err(|message| McpError::InvalidConfig { path, message })?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        let mut names = BTreeSet::new();
        for server in &self.mcp_servers {
            if !valid_server_name(&server.name) {
                return Err(format!(
                    "MCP server name {:?} must be 1–{MAX_SERVER_NAME_BYTES} bytes of letters, \
                     digits, `-` and single `_`",
                    server.name
                ));
            }
            if !names.insert(server.name.as_str()) {
                return Err(format!("MCP server `{}` is configured twice", server.name));
            }
            if server.command.trim().is_empty() {
                return Err(format!("MCP server `{}` has an empty command", server.name));
            }
            for (key, value) in [
                ("startup_timeout_ms", server.startup_timeout_ms),
                ("call_timeout_ms", server.call_timeout_ms),
            ] {
                if value == Some(0) {
                    return Err(format!(
                        "MCP server `{}`: {key} must be at least 1",
                        server.name
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `mcp__<server>__<tool>` must split back unambiguously, so no `__` inside the server name.
fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER_NAME_BYTES
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names() {
        // (name, valid)
        let table = [
            ("github", true),
            ("my-server_2", true),
            ("", false),
            ("a__b", false),
            ("_a", false),
            ("a_", false),
            ("a b", false),
            ("a.b", false),
            ("ü", false),
            ("abcdefghijabcdefghijabcdefghijab", true),
            ("abcdefghijabcdefghijabcdefghijabc", false),
        ];
        for (name, valid) in table {
            assert_eq!(valid_server_name(name), valid, "{name:?}");
        }
    }
}
