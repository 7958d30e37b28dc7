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

/// One external MCP server: a program spawned over stdio (`command`), or a remote server over
/// Streamable HTTP (`url`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Short name: `[A-Za-z0-9-]` and single `_`, at most 32 bytes. Tools are named
    /// `mcp__<name>__<tool>`.
    pub name: String,
    /// The program to run (absolute, or found on the `PATH` *passed to it*, see `env`). Empty
    /// for a remote server (`url`); exactly one of the two is set.
    #[serde(default)]
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
    /// The endpoint of a remote server over MCP's Streamable HTTP transport, instead of
    /// `command`: `https://…`, or `http://…` to a loopback host only (a token is never sent in
    /// the clear over a network). The keys that shape a spawned process (`args`, `env`,
    /// `network`, `workspace`, `writable`, `unconfined`) do not apply to it and are refused.
    #[serde(default)]
    pub url: Option<String>,
    /// For `url`: the name of an environment variable whose value is sent as
    /// `Authorization: Bearer <value>`. The value is read when the server connects and never
    /// written anywhere.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// For `url`: OAuth 2.1 authorization against the server's authorization server, found
    /// from its protected-resource metadata.
    #[serde(default)]
    pub oauth: Option<OAuthSettings>,
}

/// `[mcp_servers.oauth]`: how clawsmith obtains and refreshes tokens for a remote server.
///
/// Tokens (and the client registration) are kept in the state directory, one file per server,
/// readable by the user only (0600); they are never written to sessions, logs or traces.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthSettings {
    /// A client id registered with the authorization server. Absent ⇒ the client registers
    /// itself where the authorization server allows it (`clawsmith mcp login`).
    #[serde(default)]
    pub client_id: Option<String>,
    /// The name of an environment variable holding the client's secret. Set ⇒ the client
    /// credentials grant: clawsmith obtains a token at connect and again whenever the server
    /// refuses the one it has, with no person involved. Absent ⇒ the tokens come from
    /// `clawsmith mcp login NAME` (authorization code with PKCE) and are refreshed with their
    /// refresh token.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// The scopes to ask for; empty ⇒ those the server's metadata advertises.
    #[serde(default)]
    pub scopes: Vec<String>,
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
            validate_transport(server)?;
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

/// Exactly one of `command` and `url`, and only the keys that apply to it.
fn validate_transport(server: &McpServerConfig) -> Result<(), String> {
    let name = &server.name;
    let Some(url) = &server.url else {
        if server.command.is_empty() {
            return Err(format!(
                "MCP server `{name}` needs a `command` (a program to spawn) or a `url` (a \
                 remote server)"
            ));
        }
        if server.command.trim().is_empty() {
            return Err(format!("MCP server `{name}` has an empty command"));
        }
        if server.bearer_token_env.is_some() || server.oauth.is_some() {
            return Err(format!(
                "MCP server `{name}`: `bearer_token_env` and `oauth` apply to a `url` server, \
                 not to a spawned `command`"
            ));
        }
        return Ok(());
    };
    if !server.command.is_empty() {
        return Err(format!(
            "MCP server `{name}` has both a `command` and a `url`; it is one or the other"
        ));
    }
    let process_keys = [
        ("args", !server.args.is_empty()),
        ("env", !server.env.is_empty()),
        ("network", server.network),
        ("workspace", server.workspace != WorkspaceAccess::Read),
        ("writable", !server.writable.is_empty()),
        ("unconfined", server.unconfined),
    ];
    if let Some((key, _)) = process_keys.iter().find(|(_, set)| *set) {
        return Err(format!(
            "MCP server `{name}`: `{key}` shapes a spawned process and does not apply to a \
             `url` server"
        ));
    }
    if server.bearer_token_env.is_some() && server.oauth.is_some() {
        return Err(format!(
            "MCP server `{name}` has both `bearer_token_env` and `oauth`; it is one or the other"
        ));
    }
    if let Some(variable) = &server.bearer_token_env
        && variable.trim().is_empty()
    {
        return Err(format!("MCP server `{name}`: `bearer_token_env` is empty"));
    }
    check_url(url).map_err(|reason| format!("MCP server `{name}`: url {url:?} {reason}"))
}

/// `https://host…`, or `http://` to a loopback host; no credentials in the URL.
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "is not an absolute http(s) URL".to_owned())?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err("has no host".to_owned());
    }
    if authority.contains('@') {
        return Err("carries credentials; use `bearer_token_env` or `oauth`".to_owned());
    }
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Ok(()),
        "http" if is_loopback_authority(authority) => Ok(()),
        "http" => Err(
            "is plain HTTP to a host that is not loopback; use https:// (tokens and tool \
             arguments would cross the network in the clear)"
                .to_owned(),
        ),
        _ => Err("is not an http(s) URL".to_owned()),
    }
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
fn is_loopback_authority(authority: &str) -> bool {
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
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

    #[test]
    fn remote_urls() {
        // (url, accepted)
        let table = [
            ("https://mcp.example.com/mcp", true),
            ("HTTPS://mcp.example.com", true),
            ("http://127.0.0.1:8000/mcp", true),
            ("http://127.9.9.9/mcp", true),
            ("http://localhost:8000/mcp", true),
            ("http://[::1]:8000/mcp", true),
            ("http://mcp.example.com/mcp", false),
            ("http://10.0.0.1/mcp", false),
            ("http://[::ffff:10.0.0.1]/mcp", false),
            ("http://localhost.evil.example/mcp", false),
            ("http://127.0.0.1.evil.example/mcp", false),
            ("https://user:pass@mcp.example.com/mcp", false),
            ("ftp://mcp.example.com", false),
            ("mcp.example.com/mcp", false),
            ("https:///mcp", false),
        ];
        for (url, accepted) in table {
            assert_eq!(
                check_url(url).is_ok(),
                accepted,
                "{url}: {:?}",
                check_url(url)
            );
        }
    }

    #[test]
    fn a_server_is_a_command_or_a_url_with_only_its_own_keys() {
        let refused = [
            ("name = \"a\"", "needs a `command`"),
            (
                "name = \"a\"\ncommand = \"x\"\nurl = \"https://h/mcp\"",
                "both a `command` and a `url`",
            ),
            (
                "name = \"a\"\ncommand = \"x\"\nbearer_token_env = \"T\"",
                "apply to a `url` server",
            ),
            (
                "name = \"a\"\nurl = \"https://h/mcp\"\nargs = [\"-v\"]",
                "`args` shapes a spawned process",
            ),
            (
                "name = \"a\"\nurl = \"https://h/mcp\"\nunconfined = true",
                "`unconfined` shapes a spawned process",
            ),
            (
                "name = \"a\"\nurl = \"https://h/mcp\"\nworkspace = \"write\"",
                "`workspace` shapes a spawned process",
            ),
            (
                "name = \"a\"\nurl = \"https://h/mcp\"\nbearer_token_env = \"T\"\n\
                 [mcp_servers.oauth]\nclient_id = \"c\"",
                "both `bearer_token_env` and `oauth`",
            ),
            (
                "name = \"a\"\nurl = \"http://h.example/mcp\"",
                "plain HTTP to a host that is not loopback",
            ),
            (
                "name = \"a\"\nurl = \"https://h/mcp\"\n[mcp_servers.oauth]\nclient = \"c\"",
                "unknown field `client`",
            ),
        ];
        for (entry, expected) in refused {
            let text = format!("[[mcp_servers]]\n{entry}\n");
            let error = McpConfig::from_toml_str(&text).unwrap_err().to_string();
            assert!(error.contains(expected), "{entry}: {error}");
        }
        let remote = McpConfig::from_toml_str(
            "[[mcp_servers]]\nname = \"r\"\nurl = \"https://h/mcp\"\n[mcp_servers.oauth]\n\
             client_id = \"c\"\nclient_secret_env = \"S\"\nscopes = [\"mcp\"]\n",
        )
        .unwrap();
        let server = &remote.mcp_servers[0];
        assert_eq!(server.url.as_deref(), Some("https://h/mcp"));
        assert!(server.command.is_empty());
        let oauth = server.oauth.as_ref().unwrap();
        assert_eq!(oauth.client_id.as_deref(), Some("c"));
        assert_eq!(oauth.client_secret_env.as_deref(), Some("S"));
        assert_eq!(oauth.scopes, ["mcp"]);
    }
}
