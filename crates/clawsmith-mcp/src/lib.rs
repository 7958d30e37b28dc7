//! # clawsmith-mcp
//!
//! (essay: written at the end)

mod approval;
mod client;
mod config;
mod error;
mod server;

pub use crate::approval::{ElicitingApprover, NO_ELICITATION};
pub use crate::client::{
    MCP_SOURCE_PREFIX, MCP_TOOL_PREFIX, McpConnection, McpTool, connect_server, connect_servers,
    tool_name,
};
pub use crate::config::{MAX_SERVER_NAME_BYTES, McpConfig, McpServerConfig};
pub use crate::error::McpError;
pub use crate::server::{
    ClawsmithServer, SEARCH_TOOLS, SERVER_NAME, SERVER_VERSION, ServerOptions, serve, serve_stdio,
};
