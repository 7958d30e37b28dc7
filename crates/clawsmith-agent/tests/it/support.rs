//! A temp workspace with a store, cores over it, and providers pointed at the scripted server.

use std::path::PathBuf;
use std::sync::Arc;

use clawsmith_agent::fixture::ScriptedServer;
use clawsmith_agent::{HttpProvider, ProviderConfig, ProviderKind};
use clawsmith_core::checkpoint::Store;
use clawsmith_core::{AgentCore, CoreConfig, ExtensionTool};
use clawsmith_protocol::{
    Capability, CapabilityDeclaration, ModelMessage, Risk, Role, SearchMetadata, Tool,
    ToolExecutionContext, ToolExecutionResult, ToolFuture, ToolOutput,
};
use tempfile::TempDir;

pub const KEY: &str = "sk-test-4f9c2a7b1e8d6f3a0c5b9e2d7a1f4c8b";

pub struct Env {
    pub _dir: TempDir,
    pub workspace: PathBuf,
    pub state: PathBuf,
    pub store: Arc<Store>,
}

pub fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(workspace.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(workspace.join("b.txt"), "beta\n").unwrap();
    let store = Arc::new(Store::open(state.join("clawsmith.db")).unwrap());
    Env {
        _dir: dir,
        workspace,
        state,
        store,
    }
}

impl Env {
    pub fn config(&self) -> CoreConfig {
        CoreConfig::new(&self.workspace, self.store.clone())
    }

    pub fn core(&self, extensions: Vec<ExtensionTool>) -> AgentCore {
        let mut config = self.config();
        config.extension_tools = extensions;
        AgentCore::new(config).unwrap()
    }

    pub fn child_core(&self) -> AgentCore {
        let mut config = self.config();
        config.read_only_tools = true;
        AgentCore::new(config).unwrap()
    }
}

pub fn provider(server: &ScriptedServer, kind: ProviderKind) -> HttpProvider {
    let mut config = ProviderConfig::new(kind, &server.base_url(), "scripted-model");
    config.retry_base_ms = 5;
    HttpProvider::with_api_key(config, Some(KEY.to_owned())).unwrap()
}

/// A read tool for the loop's tests: `wait_for_cancel` waits for its cancellation, then
/// reports it; `deploy_preview` is deferred (found by `search_tools`) and answers at once.
pub struct TestTool {
    name: &'static str,
    waits: bool,
}

pub const WAIT_FOR_CANCEL: TestTool = TestTool {
    name: "wait_for_cancel",
    waits: true,
};
pub const DEPLOY_PREVIEW: TestTool = TestTool {
    name: "deploy_preview",
    waits: false,
};

impl Tool for TestTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        if self.waits {
            "waits until cancelled"
        } else {
            "Deploy a preview environment"
        }
    }
    fn risk(&self) -> Risk {
        Risk::Read
    }
    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::FilesystemRead])
    }
    fn concurrency_safe(&self) -> bool {
        true
    }
    fn input_schema(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn summarize(&self, _input: &serde_json::Value) -> String {
        self.name.to_owned()
    }
    fn execute<'a>(
        &'a self,
        _input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            if !self.waits {
                return ToolOutput::Text("deployed".to_owned());
            }
            context.cancellation.cancelled().await;
            ToolOutput::Result(ToolExecutionResult::failure(
                clawsmith_protocol::ErrorCode::CANCELLED,
                "stopped",
            ))
        })
    }
    fn deferred(&self) -> Option<SearchMetadata> {
        (!self.waits).then(|| SearchMetadata {
            aliases: vec!["deploy".to_owned()],
            tags: vec!["preview".to_owned()],
            search_hint: None,
        })
    }
}

pub fn extension(tool: impl Tool + 'static) -> ExtensionTool {
    ExtensionTool {
        source: "test".to_owned(),
        tool: Arc::new(tool),
        deferred: false,
    }
}

/// Every assistant call in `messages` has exactly one tool message answering it.
pub fn assert_sendable(messages: &[ModelMessage]) {
    let calls: Vec<&str> = messages
        .iter()
        .filter(|message| message.role == Role::Assistant)
        .flat_map(|message| message.tool_calls.iter().map(|call| call.id.as_str()))
        .collect();
    let answers: Vec<&str> = messages
        .iter()
        .filter(|message| message.role == Role::Tool)
        .filter_map(|message| message.tool_call_id.as_deref())
        .collect();
    assert_eq!(calls, answers, "every call answered once, in order");
}

/// Every byte of every file under `dir` (the store's database, WAL, blobs).
pub fn assert_absent_from_files(dir: &std::path::Path, needle: &str) {
    let mut stack = vec![dir.to_path_buf()];
    let mut scanned = 0;
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else if let Ok(bytes) = std::fs::read(&path) {
            scanned += 1;
            assert!(
                !bytes
                    .windows(needle.len())
                    .any(|window| window == needle.as_bytes()),
                "{} holds the secret",
                path.display()
            );
        }
    }
    assert!(scanned > 0, "nothing scanned under {}", dir.display());
}
