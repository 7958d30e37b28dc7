//! Test peers over stdio, one binary, the mode in the first argument:
//!
//! - no argument: a tiny well-behaved MCP server (through rmcp) for the client tests. Tools:
//!   `echo {text}` answers the text (and claims `readOnlyHint`, which clawsmith must ignore);
//!   `getenv {name}` answers the variable's value or `(unset)`, to check the env allow-list;
//!   `trace_meta` answers the `traceparent`/`tracestate` of the request's `_meta` as JSON;
//!   `fail` answers `isError: true`; `exit` ends the process without answering;
//!   `progress {ms, every_ms}` answers after `ms`, sending `notifications/progress` for the
//!   request's token every `every_ms` meanwhile (none when 0).
//! - `serve WORKSPACE DATABASE SESSION`: clawsmith's own MCP server (`serve_stdio`) over a core
//!   in full mode, as `clawsmith mcp` runs it, for the disconnect, signal and backpressure tests.
//! - a hostile mode ([`Hostile`]): a hand-written JSON-RPC loop that breaks one rule of the
//!   protocol or of good manners, for the client's limits.
//! - `lease DATABASE SESSION`: takes the session's lease as a second writer that fails when it
//!   cannot have it (`clawsmith undo` does), prints `leased` or `in use: …`, and exits (letting
//!   go): for the tests of a server that keeps its lease between calls.
//! - `rendezvous DIR SELF OTHER`: creates `DIR/SELF`, waits for `DIR/OTHER`, then serves as the
//!   well-behaved server: two of them only both start when they are started together.

use std::io::{BufRead, Write};
use std::sync::Arc;

use clawsmith_core::checkpoint::Store;
use clawsmith_core::sandbox::SandboxPolicy;
use clawsmith_core::security::{PermissionMode, PermissionPolicy};
use clawsmith_core::{AgentCore, CoreConfig};
use clawsmith_mcp::ServerOptions;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};

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
                "trace_meta",
                "Reports the W3C trace context of the request's _meta, as JSON.",
                object_schema(serde_json::json!({}), &[]),
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
            Tool::new(
                "progress",
                "Answers after `ms`, reporting progress every `every_ms` meanwhile.",
                object_schema(
                    serde_json::json!({"ms": {"type": "integer"}, "every_ms": {"type": "integer"}}),
                    &["ms", "every_ms"],
                ),
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
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = match request.name.as_ref() {
            "trace_meta" => {
                let seen = json!({
                    "traceparent": context.meta.get_traceparent(),
                    "tracestate": context.meta.get_tracestate(),
                });
                CallToolResult::success(vec![ContentBlock::text(seen.to_string())])
            }
            "echo" => CallToolResult::success(vec![ContentBlock::text(argument(&request, "text"))]),
            "getenv" => {
                let value = std::env::var(argument(&request, "name"))
                    .unwrap_or_else(|_| "(unset)".to_owned());
                CallToolResult::success(vec![ContentBlock::text(value)])
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("it failed on purpose")]),
            "progress" => {
                let number = |key: &str| {
                    request
                        .arguments
                        .as_ref()
                        .and_then(|arguments| arguments.get(key))
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(0)
                };
                let (ms, every) = (number("ms"), number("every_ms"));
                let until = tokio::time::Instant::now() + std::time::Duration::from_millis(ms);
                let token = context.meta.get_progress_token();
                let mut sent = 0u32;
                while tokio::time::Instant::now() < until {
                    match (&token, every) {
                        (Some(token), 1..) => {
                            tokio::time::sleep(std::time::Duration::from_millis(every)).await;
                            sent += 1;
                            let note = rmcp::model::ProgressNotificationParam::new(
                                token.clone(),
                                f64::from(sent),
                            );
                            let _ = context.peer.notify_progress(note).await;
                        }
                        _ => tokio::time::sleep_until(until).await,
                    }
                }
                CallToolResult::success(vec![ContentBlock::text(format!(
                    "done after {sent} progress notifications"
                ))])
            }
            "exit" => std::process::exit(0),
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        };
        Ok(result.into())
    }
}

/// The hostile servers: each answers like a server until the rule it breaks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hostile {
    /// Never answers `initialize`.
    Mute,
    /// Answers `initialize`, never `tools/list`.
    MuteList,
    /// Every `tools/list` page has a new `nextCursor`.
    EndlessCursor,
    /// Every `tools/list` page has the same `nextCursor`.
    RepeatedCursor,
    /// Answers `tools/list` with one line over 16 MiB.
    HugeList,
    /// Tools `big` (answer over 16 MiB), `slow` (never answers), `small`.
    HugeAnswer,
    /// Tool names that collide once sanitised or truncated, a duplicate, a broken schema, a
    /// definition over 64 KiB.
    Collisions,
    /// 64 MiB on stderr before answering `initialize`; tools `echo` and `slow` (never answers).
    StderrFlood,
    /// Tool `flood`: its call is answered by 200,000 `ping` requests to the client, and the
    /// server never reads again.
    RequestFlood,
}

const HOSTILE: &[(&str, Hostile)] = &[
    ("mute", Hostile::Mute),
    ("mute-list", Hostile::MuteList),
    ("endless-cursor", Hostile::EndlessCursor),
    ("repeated-cursor", Hostile::RepeatedCursor),
    ("huge-list", Hostile::HugeList),
    ("huge-answer", Hostile::HugeAnswer),
    ("collisions", Hostile::Collisions),
    ("stderr-flood", Hostile::StderrFlood),
    ("request-flood", Hostile::RequestFlood),
];

/// Over the 16 MiB line cap.
const HUGE: usize = 17 * 1024 * 1024;

fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("tool {name}"), "inputSchema": {"type": "object"}})
}

fn answer(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The answer to one request, or `None` to stay silent.
fn hostile_answer(
    mode: Hostile,
    method: &str,
    id: &Value,
    params: &Value,
    page: usize,
) -> Option<Value> {
    match method {
        "initialize" if mode == Hostile::Mute => None,
        "initialize" => Some(answer(
            id,
            json!({
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0.0.1"},
            }),
        )),
        "tools/list" => match mode {
            Hostile::MuteList => None,
            Hostile::EndlessCursor => Some(answer(
                id,
                json!({"tools": [tool(&format!("t{page}"))], "nextCursor": format!("c{page}")}),
            )),
            Hostile::RepeatedCursor => Some(answer(
                id,
                json!({"tools": [tool(&format!("t{page}"))], "nextCursor": "again"}),
            )),
            Hostile::HugeList => {
                let mut big = tool("big");
                big["description"] = Value::from("x".repeat(HUGE));
                Some(answer(id, json!({"tools": [big]})))
            }
            Hostile::HugeAnswer => Some(answer(
                id,
                json!({"tools": [tool("big"), tool("slow"), tool("small")]}),
            )),
            Hostile::Collisions => {
                let long = "x".repeat(130);
                let mut broken = tool("broken");
                broken["inputSchema"] = json!({"type": 5});
                let mut fat = tool("fat");
                fat["description"] = Value::from("f".repeat(100 * 1024));
                Some(answer(
                    id,
                    json!({"tools": [
                        tool("a.b"), tool("a/b"), tool("a_b"), tool("plain"),
                        tool(&format!("{long}1")), tool(&format!("{long}2")),
                        tool("same"), tool("same"), broken, fat,
                    ]}),
                ))
            }
            Hostile::StderrFlood => {
                Some(answer(id, json!({"tools": [tool("echo"), tool("slow")]})))
            }
            Hostile::RequestFlood => Some(answer(id, json!({"tools": [tool("flood")]}))),
            Hostile::Mute => None,
        },
        "tools/call" => {
            let text = match params["name"].as_str() {
                Some("big") => "y".repeat(HUGE),
                Some("slow") => return None,
                _ => "small answer".to_owned(),
            };
            Some(answer(
                id,
                json!({"content": [{"type": "text", "text": text}]}),
            ))
        }
        _ => Some(json!({
            "jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"},
        })),
    }
}

fn hostile(mode: Hostile) -> std::io::Result<()> {
    if mode == Hostile::StderrFlood {
        let chunk = vec![b'e'; 1024 * 1024];
        let mut stderr = std::io::stderr().lock();
        for _ in 0..64 {
            stderr.write_all(&chunk)?;
        }
        stderr.write_all(b"\nlast words of the flood\n")?;
    }
    let mut stdout = std::io::stdout().lock();
    let mut page = 0;
    for line in std::io::stdin().lock().lines() {
        let Ok(message) = serde_json::from_str::<Value>(&line?) else {
            continue;
        };
        let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) else {
            continue;
        };
        if method == "tools/list" {
            page += 1;
        }
        if mode == Hostile::RequestFlood && method == "tools/call" {
            for number in 0..200_000 {
                let ping =
                    json!({"jsonrpc": "2.0", "id": format!("ping-{number}"), "method": "ping"});
                serde_json::to_writer(&mut stdout, &ping)?;
                stdout.write_all(b"\n")?;
            }
            stdout.flush()?;
            // Never read the answers.
            loop {
                std::thread::park();
            }
        }
        if let Some(answer) = hostile_answer(mode, method, id, &message["params"], page) {
            serde_json::to_writer(&mut stdout, &answer)?;
            stdout.write_all(b"\n")?;
            stdout.flush()?;
        }
    }
    Ok(())
}

/// `serve WORKSPACE DATABASE SESSION`: what `clawsmith mcp --mode full` runs, in this process.
async fn serve(arguments: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let [workspace, database, session] = arguments else {
        return Err("usage: serve WORKSPACE DATABASE SESSION".into());
    };
    let store = Arc::new(Store::open(database)?);
    let mut config = CoreConfig::new(workspace, store);
    config.policy = PermissionPolicy::new(PermissionMode::Full);
    config.sandbox.policy = SandboxPolicy::BestEffort;
    let core = Arc::new(AgentCore::new(config)?);
    let options = ServerOptions {
        session_id: Some(session.clone()),
        ..ServerOptions::default()
    };
    clawsmith_mcp::serve_stdio(core, options).await?;
    Ok(())
}

/// The well-behaved server, through rmcp, until the client leaves.
fn well_behaved() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let running = Fixture.serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
        Ok(())
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    match arguments.first().map(String::as_str) {
        None => {
            well_behaved()?;
        }
        Some("rendezvous") => {
            let [dir, own, other] = &arguments[1..] else {
                return Err("usage: rendezvous DIR SELF OTHER".into());
            };
            let dir = std::path::Path::new(dir);
            std::fs::write(dir.join(own), "")?;
            while !dir.join(other).exists() {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            well_behaved()?;
        }
        Some("lease") => {
            let [database, session] = &arguments[1..] else {
                return Err("usage: lease DATABASE SESSION".into());
            };
            let store = Store::open(database)?;
            match store.lease_session(session) {
                Ok(_lease) => println!("leased"),
                Err(error) => println!("in use: {error}"),
            }
        }
        Some("serve") => {
            // The runtime `clawsmith mcp` uses, dropped as it drops it once serving returns.
            let runtime = clawsmith_mcp::stdio_runtime()?;
            runtime.block_on(serve(&arguments[1..]))?;
        }
        Some(mode) => {
            let Some((_, hostile_mode)) = HOSTILE.iter().find(|(name, _)| *name == mode) else {
                return Err(format!("unknown mode {mode}").into());
            };
            hostile(*hostile_mode)?;
        }
    }
    Ok(())
}
