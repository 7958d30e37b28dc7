//! Fixtures: a temp workspace with a core, an rmcp test client connected over a duplex pipe.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use clawsmith_checkpoint::Store;
use clawsmith_core::{AgentCore, CoreConfig, ExtensionTool};
use clawsmith_mcp::{ClawsmithServer, ElicitingApprover, ServerOptions};
use clawsmith_sandbox::SandboxPolicy;
use clawsmith_security::{PermissionMode, PermissionPolicy};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use tempfile::TempDir;
use tokio::sync::Notify;

/// A workspace, its core and the pieces a test inspects.
pub struct Setup {
    pub workspace: TempDir,
    pub core: Arc<AgentCore>,
    pub approver: Option<Arc<ElicitingApprover>>,
}

/// How a test core is built.
pub struct CoreSpec {
    pub mode: PermissionMode,
    pub extensions: Vec<ExtensionTool>,
    pub approver: bool,
    pub tracer: clawsmith_trace::Tracer,
}

impl CoreSpec {
    pub fn mode(mode: PermissionMode) -> CoreSpec {
        CoreSpec {
            mode,
            extensions: Vec::new(),
            approver: false,
            tracer: clawsmith_trace::Tracer::noop(),
        }
    }
}

pub fn setup(spec: CoreSpec) -> Setup {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    std::fs::create_dir(workspace.path().join("src")).unwrap();
    std::fs::write(workspace.path().join("src/lib.rs"), "fn main() {}\n").unwrap();
    let store = Arc::new(Store::open_in_memory().unwrap());
    let mut config = CoreConfig::new(workspace.path(), store);
    config.policy = PermissionPolicy::new(spec.mode);
    // The tests check the MCP plumbing, not the kernel: run unconfined where Landlock is missing.
    config.sandbox.policy = SandboxPolicy::BestEffort;
    config.extension_tools = spec.extensions;
    config.tracer = spec.tracer;
    let approver = spec.approver.then(ElicitingApprover::new);
    config.approver = approver
        .clone()
        .map(|approver| approver as Arc<dyn clawsmith_core::Approver>);
    let core = Arc::new(AgentCore::new(config).unwrap());
    Setup {
        workspace,
        core,
        approver,
    }
}

/// The client side of a test: counts `tools/list_changed` and answers elicitation as told.
#[derive(Clone, Default)]
pub struct TestClient {
    /// `None`: the elicitation capability is not declared.
    pub elicitation: Option<ElicitationAction>,
    pub list_changed: Arc<AtomicUsize>,
    pub list_changed_notify: Arc<Notify>,
    pub elicitations: Arc<AtomicUsize>,
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        if self.elicitation.is_some() {
            info.capabilities.elicitation = Some(ElicitationCapability::new());
        }
        info
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.elicitations.fetch_add(1, Ordering::SeqCst);
        Ok(ElicitResult::new(
            self.elicitation
                .clone()
                .unwrap_or(ElicitationAction::Decline),
        ))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
        self.list_changed_notify.notify_one();
    }
}

/// A connected client and the server's session id.
pub struct Connection {
    pub client: RunningService<RoleClient, TestClient>,
    pub handler: TestClient,
    pub session_id: String,
}

/// Starts the server for `setup` on a duplex pipe and connects `handler` to it.
pub async fn connect(setup: &Setup, handler: TestClient) -> Connection {
    connect_with(setup, handler, ServerOptions::default()).await
}

/// [`connect`] with options (the setup's approver is filled in).
pub async fn connect_with(
    setup: &Setup,
    handler: TestClient,
    mut options: ServerOptions,
) -> Connection {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    options.approver = setup.approver.clone();
    let server = ClawsmithServer::new(setup.core.clone(), options).unwrap();
    let session_id = server.session_id().to_owned();
    // Through the guarded line transport `clawsmith mcp` uses.
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(server.serve_lines(read, write));
    let client = handler.clone().serve(client_io).await.unwrap();
    Connection {
        client,
        handler,
        session_id,
    }
}

impl Connection {
    pub async fn call(&self, name: &str, arguments: serde_json::Value) -> CallToolResult {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let serde_json::Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        self.client.peer().call_tool(params).await.unwrap()
    }

    pub async fn tool_names(&self) -> Vec<String> {
        self.client
            .peer()
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|tool| tool.name.to_string())
            .collect()
    }
}

/// The model text of a result.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `structuredContent[key]`.
pub fn structured<'a>(result: &'a CallToolResult, key: &str) -> &'a serde_json::Value {
    result
        .structured_content
        .as_ref()
        .and_then(|value| value.get(key))
        .unwrap_or(&serde_json::Value::Null)
}

/// Asserts a result's `isError`, status and code in one line.
#[track_caller]
pub fn assert_outcome(result: &CallToolResult, is_error: bool, status: &str, code: Option<&str>) {
    assert_eq!(result.is_error, Some(is_error), "isError of {result:?}");
    assert_eq!(structured(result, "status"), status, "status of {result:?}");
    match code {
        Some(code) => assert_eq!(structured(result, "code"), code, "code of {result:?}"),
        None => assert!(structured(result, "code").is_null(), "code of {result:?}"),
    }
}

/// VmRSS of process `pid`, in bytes.
pub fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .unwrap();
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|kib| kib.parse().ok())
        .unwrap();
    kib * 1024
}

/// An execution context whose call the permission layer allowed.
pub fn authorized() -> clawsmith_protocol::ToolExecutionContext {
    let decision = clawsmith_protocol::PermissionDecision {
        verdict: clawsmith_protocol::Verdict::Allow,
        reason: "test".to_owned(),
        rule: None,
    };
    clawsmith_protocol::ToolExecutionContext::new("s", "t", "c")
        .with_authorization(clawsmith_protocol::Authorization::from_decision(&decision).unwrap())
}

/// Runs `tool` directly (past the pipeline) and returns its typed result.
pub async fn run(
    tool: &dyn clawsmith_protocol::Tool,
    input: serde_json::Value,
    context: clawsmith_protocol::ToolExecutionContext,
) -> clawsmith_protocol::ToolExecutionResult {
    match tool.execute(input, context).await {
        clawsmith_protocol::ToolOutput::Result(result) => result,
        other => panic!("a typed result, not {other:?}"),
    }
}

/// The tool named `name` among `tools`.
pub fn tool(tools: &[ExtensionTool], name: &str) -> Arc<dyn clawsmith_protocol::Tool> {
    tools
        .iter()
        .find(|tool| tool.tool.name() == name)
        .unwrap()
        .tool
        .clone()
}
