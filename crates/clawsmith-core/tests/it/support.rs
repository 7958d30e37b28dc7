//! Fixtures: a temp workspace and database, small in-test tools, call builders.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clawsmith_checkpoint::Store;
use clawsmith_core::{AgentCore, CollectingSink, CoreConfig, SessionHandle};
use clawsmith_protocol::{
    Capability, CapabilityDeclaration, Event, EventPayload, ModelMessage, Risk, Role,
    SearchMetadata, Tool, ToolCall, ToolCompleted, ToolExecutionContext, ToolExecutionResult,
    ToolFuture, ToolOutput, ToolStatus,
};
use tempfile::TempDir;

pub type Behaviour =
    Arc<dyn Fn(serde_json::Value, ToolExecutionContext) -> ToolFuture<'static> + Send + Sync>;

/// A tool whose declarations and behaviour are data.
pub struct TestTool {
    pub name: String,
    pub risk: Risk,
    pub capabilities: CapabilityDeclaration,
    pub concurrency_safe: bool,
    pub schema: serde_json::Value,
    pub description: String,
    pub deferred: Option<SearchMetadata>,
    pub behaviour: Behaviour,
}

impl TestTool {
    /// A read-only, concurrency-safe tool taking any object.
    pub fn read(name: &str, behaviour: Behaviour) -> TestTool {
        TestTool {
            name: name.to_owned(),
            risk: Risk::Read,
            capabilities: CapabilityDeclaration::Declared(vec![Capability::FilesystemRead]),
            concurrency_safe: true,
            schema: serde_json::json!({"type": "object"}),
            description: format!("test tool {name}"),
            deferred: None,
            behaviour,
        }
    }

    /// A read tool answering `output` every time.
    pub fn answering(name: &str, output: ToolOutput) -> TestTool {
        TestTool::read(
            name,
            Arc::new(move |_, _| {
                let output = output.clone();
                Box::pin(async move { output })
            }),
        )
    }

    pub fn shared(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl Tool for TestTool {
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
        self.concurrency_safe
    }
    fn input_schema(&self) -> serde_json::Value {
        self.schema.clone()
    }
    fn summarize(&self, input: &serde_json::Value) -> String {
        format!("{} {input}", self.name)
    }
    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        (self.behaviour)(input, context)
    }
    fn deferred(&self) -> Option<SearchMetadata> {
        self.deferred.clone()
    }
}

/// Start and finish instants of tool executions, recorded by the tools themselves.
#[derive(Default, Clone)]
pub struct Timeline {
    spans: Arc<Mutex<Vec<(String, Instant, Instant)>>>,
}

impl Timeline {
    pub fn record(&self, name: &str, start: Instant, end: Instant) {
        self.spans
            .lock()
            .unwrap()
            .push((name.to_owned(), start, end));
    }
    pub fn spans(&self) -> Vec<(String, Instant, Instant)> {
        self.spans.lock().unwrap().clone()
    }
    /// Whether every pair of spans overlaps in time.
    pub fn all_overlap(&self) -> bool {
        let spans = self.spans();
        spans.iter().all(|(_, a_start, a_end)| {
            spans
                .iter()
                .all(|(_, b_start, b_end)| a_start < b_end && b_start < a_end)
        })
    }
    /// Whether no two spans overlap.
    pub fn none_overlap(&self) -> bool {
        let spans = self.spans();
        spans.iter().enumerate().all(|(i, (_, a_start, a_end))| {
            spans
                .iter()
                .enumerate()
                .all(|(j, (_, b_start, b_end))| i == j || a_end <= b_start || b_end <= a_start)
        })
    }
}

/// A read tool that waits `millis` (or until a file appears) and records its span.
pub fn slow_read(name: &str, timeline: &Timeline, millis: u64) -> TestTool {
    let timeline = timeline.clone();
    let tool_name = name.to_owned();
    TestTool::read(
        name,
        Arc::new(move |input, _| {
            let timeline = timeline.clone();
            let tool_name = tool_name.clone();
            Box::pin(async move {
                let start = Instant::now();
                tokio::time::sleep(std::time::Duration::from_millis(millis)).await;
                timeline.record(&tool_name, start, Instant::now());
                ToolOutput::Text(format!("{tool_name} read {input}"))
            })
        }),
    )
}

pub struct Fixture {
    pub dir: TempDir,
    pub workspace: PathBuf,
    #[allow(dead_code)]
    pub db: PathBuf,
    pub store: Arc<Store>,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        let db = dir.path().join("state.db");
        let store = Arc::new(Store::open(&db).unwrap());
        Fixture {
            dir,
            workspace,
            db,
            store,
        }
    }

    pub fn config(&self) -> CoreConfig {
        CoreConfig::new(&self.workspace, self.store.clone())
    }

    pub fn core(&self, adjust: impl FnOnce(&mut CoreConfig)) -> AgentCore {
        let mut config = self.config();
        adjust(&mut config);
        AgentCore::new(config).unwrap()
    }

    pub fn write(&self, path: &str, content: &str) {
        let full = self.workspace.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(full, content).unwrap();
    }

    pub fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.workspace.join(path)).unwrap()
    }

    /// A session of a core in `full` mode, where commands run without asking.
    #[allow(dead_code)]
    pub fn full_session(&self) -> SessionHandle {
        self.core(|config| {
            config.policy =
                clawsmith_security::PermissionPolicy::new(clawsmith_security::PermissionMode::Full)
        })
        .open_session(None)
        .unwrap()
    }
}

/// Runs `command` as one turn, asserting it succeeded; returns the turn id and the command's
/// result content.
#[allow(dead_code)]
pub async fn command_turn(session: &SessionHandle, command: &str) -> (String, String) {
    let arguments = serde_json::json!({ "command": command }).to_string();
    let sink = CollectingSink::new();
    let outcome = session
        .run_turn(vec![call("c1", "run_command", &arguments)], &sink)
        .await
        .unwrap();
    let result = &outcome.results[0].1;
    assert_eq!(
        result.status(),
        ToolStatus::Success,
        "{command}: {}",
        result.content
    );
    (outcome.turn_id.clone(), result.content.clone())
}

pub fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }
}

/// Runs one turn of `calls` and returns the results with the collected events.
pub async fn turn(
    session: &SessionHandle,
    calls: Vec<ToolCall>,
) -> (Vec<(String, ToolExecutionResult)>, Vec<Event>) {
    let sink = CollectingSink::new();
    let outcome = session.run_turn(calls, &sink).await.unwrap();
    (outcome.results, sink.events())
}

/// Runs one call and returns its result.
pub async fn one(session: &SessionHandle, name: &str, arguments: &str) -> ToolExecutionResult {
    let (mut results, _) = turn(session, vec![call("c1", name, arguments)]).await;
    assert_eq!(results.len(), 1);
    results.remove(0).1
}

pub fn completed(events: &[Event]) -> Vec<&ToolCompleted> {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::ToolCompleted(done) => Some(done),
            _ => None,
        })
        .collect()
}

pub fn started_ids(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::ToolStarted(started) => Some(started.tool_call_id.clone()),
            _ => None,
        })
        .collect()
}

/// Every assistant tool call is answered by exactly one tool message, and every tool message
/// answers a call (P10).
pub fn assert_history_paired(messages: &[ModelMessage]) {
    let mut calls: Vec<&str> = Vec::new();
    let mut answers: Vec<&str> = Vec::new();
    for message in messages {
        match message.role {
            Role::Assistant => calls.extend(message.tool_calls.iter().map(|c| c.id.as_str())),
            Role::Tool => {
                assert!(
                    message.tool_result.is_some(),
                    "tool message without toolResult"
                );
                answers.push(message.tool_call_id.as_deref().unwrap());
            }
            _ => {}
        }
    }
    calls.sort_unstable();
    answers.sort_unstable();
    assert_eq!(
        calls, answers,
        "calls and results are not paired one to one"
    );
}

/// Checks the sequence numbers of a session's stored events: 1, 2, 3, …
pub fn assert_sequences(events: &[Event]) {
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event.sequence, index as u64 + 1);
    }
}

pub fn assert_status(result: &ToolExecutionResult, status: ToolStatus, code: Option<&str>) {
    assert_eq!(result.status(), status, "{}", result.content);
    assert_eq!(
        result.code().map(|code| code.as_str()),
        code,
        "{}",
        result.content
    );
}
