//! The MCP client (A9, A10): external MCP servers' tools as deferred extension tools.

use std::sync::Arc;

use clawsmith_core::ExtensionTool;
use clawsmith_protocol::{
    CapabilityDeclaration, ErrorCode, Risk, SearchMetadata, Tool, ToolExecutionContext,
    ToolExecutionResult, ToolFuture, ToolOutput, truncate_to_boundary,
};
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ResourceContents};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ServiceError, ServiceExt};

use crate::config::{McpConfig, McpServerConfig};
use crate::error::McpError;

/// The prefix of every MCP tool name: `mcp__<server>__<tool>`.
pub const MCP_TOOL_PREFIX: &str = "mcp__";
/// Longest tool name the core accepts.
const MAX_TOOL_NAME_BYTES: usize = 128;
/// Longest description (and search hint) taken from a server: they are untrusted text that
/// lands in every model request once the tool is active.
pub const MAX_DESCRIPTION_BYTES: usize = 2048;
/// The `source` of the extension tools: `mcp:<server>` (table origin `extension:mcp:<server>`).
pub const MCP_SOURCE_PREFIX: &str = "mcp:";

/// A live connection to one external MCP server. The child process lives as long as the
/// connection, and the connection as long as the last of its tools (they hold it in an `Arc`).
pub struct McpConnection {
    server: String,
    service: RunningService<RoleClient, ()>,
}

impl std::fmt::Debug for McpConnection {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("McpConnection")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl McpConnection {
    /// The configured server name.
    pub fn server(&self) -> &str {
        &self.server
    }
}

/// Starts every configured server (in order), lists its tools and wraps each one as a deferred
/// extension tool `mcp__<server>__<tool>`. Fails on the first server that cannot be started or
/// does not answer the handshake and `tools/list`: a configured server that silently vanished
/// would leave the model without tools the user expects.
pub async fn connect_servers(config: &McpConfig) -> Result<Vec<ExtensionTool>, McpError> {
    let mut tools = Vec::new();
    for server in &config.mcp_servers {
        tools.extend(connect_server(server).await?);
    }
    Ok(tools)
}

/// [`connect_servers`] for one server.
pub async fn connect_server(server: &McpServerConfig) -> Result<Vec<ExtensionTool>, McpError> {
    let connection = Arc::new(spawn(server).await?);
    let listed = connection
        .service
        .peer()
        .list_all_tools()
        .await
        .map_err(|error| McpError::Connect {
            server: server.name.clone(),
            message: format!("tools/list failed: {error}"),
        })?;
    let capabilities = match &server.capabilities {
        Some(list) => CapabilityDeclaration::Raw(serde_json::json!(list)),
        None => CapabilityDeclaration::Missing,
    };
    let risk = server.risk.unwrap_or(Risk::Execute);
    let tools = listed
        .into_iter()
        .map(|remote| {
            let tool = McpTool::new(Arc::clone(&connection), remote, capabilities.clone(), risk);
            ExtensionTool {
                source: format!("{MCP_SOURCE_PREFIX}{}", server.name),
                tool: Arc::new(tool),
                deferred: true,
            }
        })
        .collect();
    Ok(tools)
}

/// Spawns the server with an environment made only of the allow-listed variables.
async fn spawn(server: &McpServerConfig) -> Result<McpConnection, McpError> {
    // The MCP client is the one place outside the sandbox crate that starts a process: the
    // server is a program the *user* configured, run like the user's own MCP hosts run it
    // (stdio, no sandbox), but with an environment reduced to the allow-list.
    let mut command = tokio::process::Command::new(&server.command);
    command.args(&server.args).env_clear().kill_on_drop(true);
    for name in &server.env {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    let transport = TokioChildProcess::new(command).map_err(|source| McpError::Spawn {
        server: server.name.clone(),
        command: server.command.clone(),
        source,
    })?;
    let service =
        ().serve(transport)
            .await
            .map_err(|error| McpError::Connect {
                server: server.name.clone(),
                message: format!("handshake failed: {error}"),
            })?;
    Ok(McpConnection {
        server: server.name.clone(),
        service,
    })
}

/// One tool of an external MCP server, as a deferred clawsmith tool.
pub struct McpTool {
    connection: Arc<McpConnection>,
    name: String,
    remote_name: String,
    description: String,
    schema: serde_json::Value,
    capabilities: CapabilityDeclaration,
    risk: Risk,
    search: SearchMetadata,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("McpTool")
            .field("name", &self.name)
            .field("server", &self.connection.server)
            .field("remote_name", &self.remote_name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    fn new(
        connection: Arc<McpConnection>,
        remote: rmcp::model::Tool,
        capabilities: CapabilityDeclaration,
        risk: Risk,
    ) -> McpTool {
        let remote_name = remote.name.to_string();
        let name = tool_name(&connection.server, &remote_name);
        let title = remote
            .title
            .clone()
            .or_else(|| remote.annotations.as_ref().and_then(|a| a.title.clone()));
        let remote_description = remote
            .description
            .as_deref()
            .unwrap_or("")
            .trim()
            .to_owned();
        let description = if remote_description.is_empty() {
            title.clone().unwrap_or_else(|| {
                format!(
                    "Tool `{remote_name}` of the MCP server `{}`.",
                    connection.server
                )
            })
        } else {
            remote_description.clone()
        };
        let description = truncate_to_boundary(description, MAX_DESCRIPTION_BYTES);
        let search = SearchMetadata {
            aliases: std::iter::once(remote_name.clone())
                .chain(title.clone())
                .collect(),
            tags: vec!["mcp".to_owned(), connection.server.clone()],
            search_hint: Some(truncate_to_boundary(
                match (&title, remote_description.is_empty()) {
                    (Some(title), false) => format!("{title}: {remote_description}"),
                    (Some(title), true) => title.clone(),
                    (None, _) => description.clone(),
                },
                MAX_DESCRIPTION_BYTES,
            )),
        };
        McpTool {
            name,
            remote_name,
            description,
            schema: serde_json::Value::Object(remote.input_schema.as_ref().clone()),
            capabilities,
            risk,
            search,
            connection,
        }
    }

    /// The tool's name on its server.
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }

    async fn forward(
        &self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolExecutionResult {
        if let Err(refusal) = context.require_authorization(&self.name) {
            return refusal;
        }
        let mut params = CallToolRequestParams::new(self.remote_name.clone());
        match input {
            serde_json::Value::Object(arguments) => params = params.with_arguments(arguments),
            serde_json::Value::Null => {}
            other => {
                return ToolExecutionResult::failure(
                    ErrorCode::INVALID_ARGUMENTS,
                    format!("{} takes an object, not {other}", self.name),
                );
            }
        }
        let peer = self.connection.service.peer();
        // Dropping the request on cancellation sends `notifications/cancelled` to the server.
        let answer = tokio::select! {
            answer = peer.call_tool(params) => answer,
            () = context.cancellation.cancelled() => {
                return ToolExecutionResult::failure(
                    ErrorCode::CANCELLED,
                    format!("{} was cancelled while the MCP server worked on it.", self.name),
                );
            }
        };
        map_answer(&self.name, &self.connection.server, answer)
    }
}

/// `mcp__<server>__<tool>`, the tool part reduced to the characters provider APIs accept.
pub fn tool_name(server: &str, remote_name: &str) -> String {
    let tool: String = remote_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{MCP_TOOL_PREFIX}{server}__{tool}");
    name.truncate(MAX_TOOL_NAME_BYTES);
    name
}

/// The MCP answer as a clawsmith result: `isError` ⇒ `tool_failed`; text content ⇒ the text;
/// other content is named, never inlined (images, blobs).
fn map_answer(
    name: &str,
    server: &str,
    answer: Result<CallToolResult, ServiceError>,
) -> ToolExecutionResult {
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            return ToolExecutionResult::tool_failed(format!(
                "{name}: the MCP server `{server}` failed: {error}"
            ));
        }
    };
    let mut parts: Vec<String> = answer.content.iter().map(content_text).collect();
    if parts.iter().all(String::is_empty)
        && let Some(structured) = &answer.structured_content
    {
        parts = vec![structured.to_string()];
    }
    let text = parts.join("\n");
    if answer.is_error == Some(true) {
        let message = if text.trim().is_empty() {
            format!("{name}: the MCP server `{server}` reported an error without a message")
        } else {
            text
        };
        ToolExecutionResult::tool_failed(message)
    } else {
        ToolExecutionResult::success(text)
    }
}

fn content_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!("[image: {}]", image.mime_type),
        ContentBlock::Audio(audio) => format!("[audio: {}]", audio.mime_type),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => text.clone(),
            ResourceContents::BlobResourceContents { uri, .. } => format!("[resource: {uri}]"),
            _ => "[resource]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
        _ => "[unsupported content]".to_owned(),
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn risk(&self) -> Risk {
        self.risk
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        self.capabilities.clone()
    }

    fn concurrency_safe(&self) -> bool {
        // Nothing is known about the server's internals; run its calls one at a time.
        false
    }

    fn input_schema(&self) -> serde_json::Value {
        self.schema.clone()
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        let arguments = truncate_to_boundary(input.to_string(), 160);
        format!(
            "MCP {}/{} {arguments}",
            self.connection.server, self.remote_name
        )
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move { ToolOutput::Result(self.forward(input, context).await) })
    }

    fn deferred(&self) -> Option<SearchMetadata> {
        Some(self.search.clone())
    }
}
