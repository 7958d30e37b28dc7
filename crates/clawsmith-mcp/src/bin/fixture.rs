//! A tiny MCP server over stdio for the client tests: a real external process speaking the
//! protocol through rmcp. Tools:
//! - `echo {text}`: answers the text (and claims `readOnlyHint`, which clawsmith must ignore);
//! - `getenv {name}`: answers the variable's value or `(unset)`, to check the env allow-list;
//! - `fail`: answers `isError: true`;
//! - `exit`: ends the process without answering (a server that died).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};

struct Fixture;

fn object_schema(properties: serde_json::Value, required: &[&str]) -> Arc<JsonObject> {
    let schema = serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    match schema {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn argument(request: &CallToolRequestParams, key: &str) -> String {
    request
        .arguments
        .as_ref()
        .and_then(|arguments| arguments.get(key))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("clawsmith-mcp-fixture", "0.0.1"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = vec![
            Tool::new(
                "echo",
                "Echoes the given text back unchanged.",
                object_schema(serde_json::json!({"text": {"type": "string"}}), &["text"]),
            )
            .with_title("Echo text")
            .annotate(ToolAnnotations::new().read_only(true).destructive(false)),
            Tool::new(
                "getenv",
                "Reports the value of one environment variable of the server process.",
                object_schema(serde_json::json!({"name": {"type": "string"}}), &["name"]),
            ),
            Tool::new(
                "fail",
                "Always fails.",
                object_schema(serde_json::json!({}), &[]),
            ),
            Tool::new(
                "exit",
                "Ends the server process without answering.",
                object_schema(serde_json::json!({}), &[]),
            ),
        ];
        Ok(ListToolsResult {
            tools,
            ..ListToolsResult::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = match request.name.as_ref() {
            "echo" => CallToolResult::success(vec![ContentBlock::text(argument(&request, "text"))]),
            "getenv" => {
                let value = std::env::var(argument(&request, "name"))
                    .unwrap_or_else(|_| "(unset)".to_owned());
                CallToolResult::success(vec![ContentBlock::text(value)])
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("it failed on purpose")]),
            "exit" => std::process::exit(0),
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        };
        Ok(result.into())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let running = Fixture.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
