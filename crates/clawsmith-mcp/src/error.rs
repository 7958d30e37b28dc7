//! The crate's one error type: the MCP plumbing itself broke (a session could not be opened, a
//! transport failed, a configured server could not be started). A tool failure the model should
//! read is never an `Err`; it is a `ToolExecutionResult` (and, on the wire, `isError: true`).

use std::path::PathBuf;

/// Why serving, loading the configuration or connecting to an MCP server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The core could not open the connection's session (the why is the `source()`).
    #[error("cannot open the MCP session")]
    Session(#[from] clawsmith_core::CoreError),
    /// The MCP handshake with the client failed.
    #[error("MCP handshake with the client failed: {0}")]
    Handshake(String),
    /// The server task ended abnormally.
    #[error("MCP server task failed: {0}")]
    Serve(String),
    /// The configuration file could not be read. Causes quoted in a message are not also
    /// returned as `source()`, so a chain of causes prints them once.
    #[error("cannot read the configuration {}: {cause}", path.display())]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// The configuration is not valid TOML of the expected shape.
    #[error("invalid configuration{}: {message}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    InvalidConfig {
        /// The file, when it came from one.
        path: Option<PathBuf>,
        /// What is wrong, as the parser or validator says it.
        message: String,
    },
    /// A configured MCP server could not be started.
    #[error("cannot start MCP server `{server}` ({command}): {cause}")]
    Spawn {
        /// The configured server name.
        server: String,
        /// The command as configured.
        command: String,
        /// Why.
        cause: std::io::Error,
    },
    /// A configured MCP server started but the handshake or `tools/list` failed.
    #[error("MCP server `{server}` did not answer: {message}")]
    Connect {
        /// The configured server name.
        server: String,
        /// What failed.
        message: String,
    },
    /// A remote MCP server (`url`) could not be reached as configured: a token or secret is
    /// missing, OAuth failed, or the HTTP client could not be built.
    #[error("MCP server `{server}` ({url}): {message}")]
    Remote {
        /// The configured server name.
        server: String,
        /// Its URL.
        url: String,
        /// What is missing or failed.
        message: String,
    },
    /// A configured MCP server did not answer a start-up step within `startup_timeout_ms`.
    #[error(
        "MCP server `{server}` did not answer {step} within {after_ms} ms (raise \
         `startup_timeout_ms` in clawsmith.toml if it needs longer){stderr}"
    )]
    Timeout {
        /// The configured server name.
        server: String,
        /// `initialize` or `tools/list`.
        step: &'static str,
        /// The budget that ran out.
        after_ms: u128,
        /// `"; its stderr ended with: …"` or empty.
        stderr: String,
    },
    /// The server's listing broke a limit or named tools the table cannot take: the listing was
    /// cut short or those tools were left out; the rest of the server's tools are loaded.
    #[error("MCP server `{server}`: {message}")]
    Listing {
        /// The configured server name.
        server: String,
        /// What was cut or left out, and why.
        message: String,
    },
}
