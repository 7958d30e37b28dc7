//! Sub-agent tools: `delegate_task` (a read-only child, at most four at once), background
//! children (`delegate_background`, `background_task_list`, `background_task_cancel`), and with
//! a [`WorktreeConfig`] the writing child of [`crate::worktree`] (`delegate_worktree`,
//! `worktree_apply`).
//!
//! A child is the same loop ([`crate::run_task`]) in a session of its own whose parent link is
//! stored, run by a *child core*: a core over the same store and workspace built with
//! `read_only_tools`, so its table holds only tools of effective risk `read` and no delegate
//! tools (depth 1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clawsmith_core::front_matter::parse_front_matter;
use clawsmith_core::fs::Workspace;
use clawsmith_core::{AgentCore, CoreConfig, ExtensionTool, NullSink};
use clawsmith_protocol::schema::{input_schema, parse_input};
use clawsmith_protocol::{
    BackgroundTaskCompleted, CancellationSignal, Capability, CapabilityDeclaration, ErrorCode,
    Risk, Tool, ToolExecutionContext, ToolExecutionResult, ToolFuture, ToolOutput,
};
use clawsmith_trace::{SpanContext, TraceParent, TraceState};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};

use crate::agent_loop::{Inbox, RunOptions, RunOutcome, StopReason, run_task};
use crate::provider::Provider;
use crate::worktree::{DelegateWorktree, Patches, WorktreeApply, WorktreeConfig};

/// Children running at once, over every delegate tool of one host.
pub const MAX_CONCURRENT_CHILDREN: usize = 4;
/// Default model requests of a child.
pub const DEFAULT_CHILD_MAX_TURNS: u32 = 20;
/// Default time a child may run before it is cancelled.
pub const DEFAULT_CHILD_DEADLINE: Duration = Duration::from_secs(600);

/// What the sub-agent tools need.
#[derive(Clone)]
pub struct SubagentConfig {
    /// The provider children talk to.
    pub provider: Arc<dyn Provider>,
    /// The core children run in: built with `read_only_tools` over the parent's store and
    /// workspace, without extension tools.
    pub child_core: AgentCore,
    /// Model requests per child (an agent definition's `max_turns` overrides it).
    pub max_turns: u32,
    /// Time per child; past it the child is cancelled and its last text returned.
    pub deadline: Duration,
    /// Children running at once; the rest wait (none is refused).
    pub max_concurrent: usize,
    /// With it, `delegate_worktree` and `worktree_apply` join the tools.
    pub worktree: Option<WorktreeConfig>,
    /// Makes the configuration `child_core` was built from, so that an agent definition's
    /// `tools` can narrow a child's table: a core is built per such child with `only_tools` set
    /// (and `read_only_tools` forced on). Without it a definition that lists `tools` is refused.
    pub child_config: Option<ChildConfigFn>,
}

/// Makes a child core's configuration (see [`SubagentConfig::child_config`]).
pub type ChildConfigFn = Arc<dyn Fn() -> CoreConfig + Send + Sync>;

impl SubagentConfig {
    /// The defaults: [`DEFAULT_CHILD_MAX_TURNS`], [`DEFAULT_CHILD_DEADLINE`],
    /// [`MAX_CONCURRENT_CHILDREN`].
    pub fn new(provider: Arc<dyn Provider>, child_core: AgentCore) -> SubagentConfig {
        SubagentConfig {
            provider,
            child_core,
            max_turns: DEFAULT_CHILD_MAX_TURNS,
            deadline: DEFAULT_CHILD_DEADLINE,
            max_concurrent: MAX_CONCURRENT_CHILDREN,
            worktree: None,
            child_config: None,
        }
    }
}

/// The shared state of one host's sub-agents: the concurrency bound and the background tasks.
pub struct Subagents {
    config: SubagentConfig,
    permits: Arc<Semaphore>,
    background: Mutex<BTreeMap<String, BackgroundTask>>,
    inboxes: Mutex<BTreeMap<String, Arc<Inbox>>>,
    changed: Notify,
    counter: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Subagents {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Subagents")
            .field("max_concurrent", &self.config.max_concurrent)
            .finish_non_exhaustive()
    }
}

/// The state of a background task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    /// Running or waiting for a slot.
    Running,
    /// The child answered (or stopped at its limits).
    Completed,
    /// The child's provider failed.
    Failed,
    /// Cancelled by `background_task_cancel` or its parent.
    Cancelled,
}

/// One background task as `background_task_list` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundTask {
    /// `bg_N`.
    pub task_id: String,
    /// The parent session.
    pub parent_session_id: String,
    /// The task text.
    pub task: String,
    /// Its state.
    pub state: TaskState,
    /// Start, ms since the epoch.
    pub started_at_ms: u64,
    /// End, ms since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    /// The child session, once opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child_session_id: Option<String>,
    #[serde(skip)]
    cancellation: CancellationSignal,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}

/// How one child runs: the core it runs in, its instructions, its model requests.
pub(crate) struct ChildRun {
    pub core: AgentCore,
    pub system: String,
    pub max_turns: u32,
    /// Overrides the provider's model (an agent definition's `model`).
    pub model: Option<String>,
    /// `gen_ai.agent.name` of its `invoke_agent` span: the definition's name, else the tool's.
    pub agent_name: String,
    /// The parent of that span: the delegating call's `execute_tool` span.
    pub trace_parent: Option<SpanContext>,
}

/// The span context of the call `context` belongs to (its `execute_tool` span), when traced.
pub(crate) fn call_span(context: &ToolExecutionContext) -> Option<SpanContext> {
    let headers = context.trace.as_ref()?;
    let parent = TraceParent::parse(&headers.traceparent).ok()?;
    let state = headers
        .tracestate
        .as_deref()
        .and_then(|state| TraceState::parse(state).ok());
    Some(SpanContext::from_parent(parent, state))
}

/// What a child returns to its parent.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChildReport {
    pub session_id: String,
    pub answer: String,
    pub stop_reason: StopReason,
    pub turns: u32,
}

impl Subagents {
    /// Shared state for `config`.
    pub fn new(config: SubagentConfig) -> Arc<Subagents> {
        Arc::new(Subagents {
            permits: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
            config,
            background: Mutex::new(BTreeMap::new()),
            inboxes: Mutex::new(BTreeMap::new()),
            changed: Notify::new(),
            counter: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The tools, to add to the parent core's `extension_tools` (source `agent`).
    pub fn tools(self: &Arc<Self>, workspace: &Path) -> Vec<ExtensionTool> {
        let tools: Vec<Arc<dyn Tool>> = vec![
            Arc::new(DelegateTask {
                subagents: Arc::clone(self),
                workspace: workspace.to_path_buf(),
            }),
            Arc::new(DelegateBackground {
                subagents: Arc::clone(self),
            }),
            Arc::new(BackgroundList {
                subagents: Arc::clone(self),
            }),
            Arc::new(BackgroundCancel {
                subagents: Arc::clone(self),
            }),
        ];
        let mut tools = tools;
        if let Some(worktree) = &self.config.worktree {
            let patches = Arc::new(Patches::default());
            tools.push(Arc::new(DelegateWorktree {
                subagents: Arc::clone(self),
                config: worktree.clone(),
                patches: Arc::clone(&patches),
            }));
            tools.push(Arc::new(WorktreeApply {
                workspace: worktree.workspace.clone(),
                store: Arc::clone(&worktree.store),
                patches,
                policy: worktree.policy.clone(),
            }));
        }
        tools
            .into_iter()
            .map(|tool| ExtensionTool {
                source: "agent".to_owned(),
                tool,
                deferred: false,
            })
            .collect()
    }

    /// Where the parent's run picks up the notices of `session_id`'s background tasks.
    pub fn inbox(&self, session_id: &str) -> Arc<Inbox> {
        Arc::clone(
            self.inboxes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(session_id.to_owned())
                .or_default(),
        )
    }

    /// Background tasks of `session_id`, oldest first.
    pub fn background_tasks(&self, session_id: &str) -> Vec<BackgroundTask> {
        self.background
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|task| task.parent_session_id == session_id)
            .cloned()
            .collect()
    }

    /// Waits until no background task of `session_id` is running.
    pub async fn wait_background(&self, session_id: &str) {
        loop {
            let notified = self.changed.notified();
            if !self
                .background_tasks(session_id)
                .iter()
                .any(|task| task.state == TaskState::Running)
            {
                return;
            }
            notified.await;
        }
    }

    /// Cancels every running background task of `session_id` (the parent is going away).
    pub fn cancel_background(&self, session_id: &str) {
        for task in self.background_tasks(session_id) {
            if task.state == TaskState::Running {
                task.cancellation.cancel();
            }
        }
    }

    /// Runs one child to its end: waits for a slot, opens a child session of `parent`, runs
    /// the loop with the child's limits, cancelled by `cancellation` or the deadline.
    pub(crate) async fn run_child(
        &self,
        parent: &str,
        task: &str,
        child: ChildRun,
        cancellation: CancellationSignal,
        on_session: impl FnOnce(&str),
    ) -> Result<ChildReport, String> {
        let _permit = tokio::select! {
            permit = Arc::clone(&self.permits).acquire_owned() => {
                permit.map_err(|_| "the sub-agent pool is closed".to_owned())?
            }
            () = cancellation.cancelled() => return Err("cancelled before it started".to_owned()),
        };
        let session = child
            .core
            .open_child_session(parent)
            .map_err(|error| format!("opening the child session: {error}"))?;
        on_session(session.id());
        let child_cancel = CancellationSignal::new();
        let deadline = self.config.deadline;
        let watcher = {
            let child_cancel = child_cancel.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = tokio::time::sleep(deadline) => {}
                    () = cancellation.cancelled() => {}
                }
                child_cancel.cancel();
            })
        };
        let mut options = RunOptions::new();
        options.max_turns = child.max_turns;
        options.system = Some(child.system);
        options.model = child.model;
        options.agent_name = child.agent_name;
        options.trace_parent = child.trace_parent;
        options.cancellation = child_cancel;
        let outcome = run_task(
            &session,
            self.config.provider.as_ref(),
            task,
            options,
            &NullSink,
        )
        .await;
        watcher.abort();
        let outcome: RunOutcome = outcome.map_err(|error| error.to_string())?;
        Ok(ChildReport {
            session_id: outcome.session_id,
            answer: outcome.answer,
            stop_reason: outcome.stop_reason,
            turns: outcome.turns,
        })
    }

    /// Model requests per child.
    pub(crate) fn child_max_turns(&self) -> u32 {
        self.config.max_turns
    }

    /// A read-only child: the configured child core (or, for a definition that lists `tools`,
    /// one holding only those of its tools), the definition's instructions, turns and model.
    fn read_only_child(&self, agent: Option<&AgentDefinition>) -> Result<ChildRun, String> {
        let core = match agent.and_then(|agent| agent.tools.as_ref().map(|tools| (agent, tools))) {
            None => self.config.child_core.clone(),
            Some((agent, tools)) => self.restricted_core(&agent.name, tools)?,
        };
        Ok(ChildRun {
            core,
            system: child_system_prompt(agent),
            max_turns: agent
                .and_then(|agent| agent.max_turns)
                .unwrap_or(self.config.max_turns),
            model: agent.and_then(|agent| agent.model.clone()),
            agent_name: agent
                .map_or_else(|| "delegate_task".to_owned(), |agent| agent.name.clone()),
            trace_parent: None,
        })
    }

    /// A read-only core holding only `tools`; refuses a list naming none of the read-only tools.
    fn restricted_core(&self, agent: &str, tools: &[String]) -> Result<AgentCore, String> {
        let Some(make) = &self.config.child_config else {
            return Err(format!(
                "agent {agent:?} lists its tools, but this host cannot narrow a sub-agent's tools"
            ));
        };
        let available = self.config.child_core.tools().names();
        if !tools.iter().any(|tool| available.contains(&tool.as_str())) {
            return Err(format!(
                "agent {agent:?} lists the tools {} but none of them is a read-only tool here                  (available: {})",
                tools.join(", "),
                available.join(", ")
            ));
        }
        let mut config = make();
        config.read_only_tools = true;
        config.only_tools = Some(tools.iter().cloned().collect());
        AgentCore::new(config).map_err(|error| format!("building agent {agent:?}'s core: {error}"))
    }

    fn finish_background(
        &self,
        task_id: &str,
        state: TaskState,
        notice: Option<BackgroundTaskCompleted>,
    ) {
        let (parent, child) = {
            let mut tasks = self
                .background
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let Some(task) = tasks.get_mut(task_id) else {
                return;
            };
            task.state = state;
            task.ended_at_ms = Some(now_ms());
            (
                task.parent_session_id.clone(),
                task.child_session_id.clone(),
            )
        };
        // Exactly one notice per finished task, none for a cancelled one: stored as a
        // `background_task.completed` event and shown as a user message by the parent's loop.
        if let Some(mut notice) = notice {
            if notice.child_session_id.is_none() {
                notice.child_session_id = child;
            }
            let mut shown = serde_json::to_value(&notice).unwrap_or_else(|_| json!({}));
            shown["type"] = json!("background_task.completed");
            self.inbox(&parent)
                .push_notice(format!("[background task notice] {shown}"), notice);
        }
        self.changed.notify_waiters();
    }
}

fn child_system_prompt(agent: Option<&AgentDefinition>) -> String {
    let base = "You are a sub-agent with read-only tools. Investigate the task with the tools, \
                then answer with a concise report; you cannot change files or run commands.";
    match agent {
        Some(agent) if !agent.prompt.trim().is_empty() => {
            format!("{base}\n\n{}", agent.prompt.trim())
        }
        _ => base.to_owned(),
    }
}

/// `delegate_task`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DelegateTaskInput {
    /// What the sub-agent should find out.
    task: String,
    /// An agent definition's name.
    #[serde(default)]
    agent: Option<String>,
}

/// `delegate_background`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BackgroundTaskInput {
    /// What the sub-agent should find out.
    task: String,
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoInput {}

/// A background task's id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TaskIdInput {
    /// The `taskId` the background delegation answered with.
    task_id: String,
}

/// A task argument, trimmed; refused when nothing is left.
#[allow(clippy::result_large_err)] // the refusal is the tool's result, returned as is
pub(crate) fn non_empty_task(task: String) -> Result<String, ToolExecutionResult> {
    match task.trim() {
        "" => Err(ToolExecutionResult::failure(
            ErrorCode::INVALID_ARGUMENTS,
            "argument `task` must be a non-empty string",
        )),
        task => Ok(task.to_owned()),
    }
}

pub(crate) fn summary_of(input: &Value) -> String {
    let task = input.get("task").and_then(Value::as_str).unwrap_or("");
    clawsmith_protocol::text::clip(task, 80)
}

/// `delegate_task {task, agent?}`.
struct DelegateTask {
    subagents: Arc<Subagents>,
    workspace: PathBuf,
}

impl Tool for DelegateTask {
    fn name(&self) -> &str {
        "delegate_task"
    }

    fn description(&self) -> &str {
        "Delegate a read-only investigation to a sub-agent with its own context (read tools only). \
         Several delegate_task calls in one message run in parallel (at most four at once). \
         Returns the sub-agent's final answer and its session id. `agent` names a definition \
         from .clawsmith/agents/ or .claude/agents/."
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::AgentDelegate, Capability::FilesystemRead])
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    fn input_schema(&self) -> Value {
        input_schema::<DelegateTaskInput>()
    }

    fn summarize(&self, input: &Value) -> String {
        summary_of(input)
    }

    fn execute<'a>(&'a self, input: Value, context: ToolExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input = match parse_input::<DelegateTaskInput>(self.name(), input) {
                Ok(input) => input,
                Err(refusal) => return ToolOutput::Result(refusal),
            };
            let task = match non_empty_task(input.task) {
                Ok(task) => task,
                Err(refusal) => return ToolOutput::Result(refusal),
            };
            let agent = match input.agent.as_deref() {
                Some(name) => match find_agent(&self.workspace, name) {
                    Ok(agent) => Some(agent),
                    Err(message) => {
                        return ToolOutput::Result(ToolExecutionResult::failure(
                            ErrorCode::INVALID_ARGUMENTS,
                            message,
                        ));
                    }
                },
                None => None,
            };
            let child = match self.subagents.read_only_child(agent.as_ref()) {
                Ok(child) => ChildRun {
                    trace_parent: call_span(&context),
                    ..child
                },
                Err(message) => {
                    return ToolOutput::Result(ToolExecutionResult::failure(
                        ErrorCode::INVALID_ARGUMENTS,
                        message,
                    ));
                }
            };
            let report = self
                .subagents
                .run_child(
                    &context.session_id,
                    &task,
                    child,
                    context.cancellation.clone(),
                    |_| {},
                )
                .await;
            match report {
                Ok(report)
                    if report.stop_reason == StopReason::Cancelled
                        && context.cancellation.is_cancelled() =>
                {
                    ToolOutput::Result(ToolExecutionResult::failure(
                        ErrorCode::CANCELLED,
                        format!(
                            "the sub-agent (session {}) was cancelled",
                            report.session_id
                        ),
                    ))
                }
                Ok(report) => ToolOutput::Text(
                    serde_json::to_string(&report).unwrap_or_else(|_| report.answer.clone()),
                ),
                Err(message) if context.cancellation.is_cancelled() => {
                    ToolOutput::Result(ToolExecutionResult::failure(ErrorCode::CANCELLED, message))
                }
                Err(message) => ToolOutput::Result(ToolExecutionResult::failure(
                    ErrorCode::TOOL_FAILED,
                    format!("the sub-agent failed: {message}"),
                )),
            }
        })
    }
}

/// `delegate_background {task}`.
struct DelegateBackground {
    subagents: Arc<Subagents>,
}

impl Tool for DelegateBackground {
    fn name(&self) -> &str {
        "delegate_background"
    }

    fn description(&self) -> &str {
        "Start a read-only sub-agent in the background and return its task id at once. When it \
         finishes you receive one message with its answer; list tasks with background_task_list, \
         stop one with background_task_cancel."
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::AgentDelegate, Capability::FilesystemRead])
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    fn input_schema(&self) -> Value {
        input_schema::<BackgroundTaskInput>()
    }

    fn summarize(&self, input: &Value) -> String {
        summary_of(input)
    }

    fn execute<'a>(&'a self, input: Value, context: ToolExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let task = match parse_input::<BackgroundTaskInput>(self.name(), input)
                .map(|input| input.task)
            {
                Ok(task) => task,
                Err(refusal) => return ToolOutput::Result(refusal),
            };
            let task = match non_empty_task(task) {
                Ok(task) => task,
                Err(refusal) => return ToolOutput::Result(refusal),
            };
            let subagents = Arc::clone(&self.subagents);
            let number = subagents
                .counter
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            let task_id = format!("bg_{number}");
            let cancellation = CancellationSignal::new();
            subagents
                .background
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(
                    task_id.clone(),
                    BackgroundTask {
                        task_id: task_id.clone(),
                        parent_session_id: context.session_id.clone(),
                        task: task.clone(),
                        state: TaskState::Running,
                        started_at_ms: now_ms(),
                        ended_at_ms: None,
                        child_session_id: None,
                        cancellation: cancellation.clone(),
                    },
                );
            let parent = context.session_id.clone();
            let id = task_id.clone();
            let trace_parent = call_span(&context);
            tokio::spawn(async move {
                let record = |child: &str| {
                    if let Some(task) = subagents
                        .background
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get_mut(&id)
                    {
                        task.child_session_id = Some(child.to_owned());
                    }
                };
                let report = subagents
                    .run_child(
                        &parent,
                        &task,
                        ChildRun {
                            core: subagents.config.child_core.clone(),
                            system: child_system_prompt(None),
                            max_turns: subagents.config.max_turns,
                            model: None,
                            agent_name: "delegate_background".to_owned(),
                            trace_parent,
                        },
                        cancellation.clone(),
                        record,
                    )
                    .await;
                let (state, notice) = if cancellation.is_cancelled() {
                    (TaskState::Cancelled, None)
                } else {
                    let mut notice = BackgroundTaskCompleted {
                        task_id: id.clone(),
                        state: String::new(),
                        child_session_id: None,
                        stop_reason: None,
                        answer: None,
                        error: None,
                    };
                    match report {
                        Ok(report) => {
                            notice.state = "completed".to_owned();
                            notice.child_session_id = Some(report.session_id);
                            notice.stop_reason = Some(report.stop_reason.as_str().to_owned());
                            notice.answer = Some(report.answer);
                            (TaskState::Completed, Some(notice))
                        }
                        Err(message) => {
                            notice.state = "failed".to_owned();
                            notice.error = Some(message);
                            (TaskState::Failed, Some(notice))
                        }
                    }
                };
                subagents.finish_background(&id, state, notice);
            });
            ToolOutput::Text(json!({"taskId": task_id, "state": "running"}).to_string())
        })
    }
}

/// `background_task_list {}`.
struct BackgroundList {
    subagents: Arc<Subagents>,
}

impl Tool for BackgroundList {
    fn name(&self) -> &str {
        "background_task_list"
    }

    fn description(&self) -> &str {
        "List this session's background sub-agent tasks: id, task, state (running, completed, \
         failed, cancelled) and times."
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::SessionRead])
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    fn input_schema(&self) -> Value {
        input_schema::<NoInput>()
    }

    fn summarize(&self, _input: &Value) -> String {
        "background tasks".to_owned()
    }

    fn execute<'a>(&'a self, _input: Value, context: ToolExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let tasks = self.subagents.background_tasks(&context.session_id);
            ToolOutput::Text(json!({"tasks": tasks}).to_string())
        })
    }
}

/// `background_task_cancel {taskId}`.
struct BackgroundCancel {
    subagents: Arc<Subagents>,
}

impl Tool for BackgroundCancel {
    fn name(&self) -> &str {
        "background_task_cancel"
    }

    fn description(&self) -> &str {
        "Cancel a running background task of this session; a cancelled task sends no notice."
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::AgentDelegate])
    }

    fn concurrency_safe(&self) -> bool {
        false
    }

    fn input_schema(&self) -> Value {
        input_schema::<TaskIdInput>()
    }

    fn summarize(&self, input: &Value) -> String {
        input["taskId"].as_str().unwrap_or("").to_owned()
    }

    fn execute<'a>(&'a self, input: Value, context: ToolExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let id = match parse_input::<TaskIdInput>(self.name(), input) {
                Ok(input) => input.task_id,
                Err(refusal) => return ToolOutput::Result(refusal),
            };
            let id = id.as_str();
            let task = self
                .subagents
                .background_tasks(&context.session_id)
                .into_iter()
                .find(|task| task.task_id == id);
            match task {
                Some(task) if task.state == TaskState::Running => {
                    task.cancellation.cancel();
                    ToolOutput::Text(json!({"taskId": id, "state": "cancelled"}).to_string())
                }
                Some(task) => ToolOutput::Result(ToolExecutionResult::failure(
                    ErrorCode::INVALID_ARGUMENTS,
                    format!("background task {id} is already {}", json!(task.state)),
                )),
                None => ToolOutput::Result(ToolExecutionResult::failure(
                    ErrorCode::INVALID_ARGUMENTS,
                    format!("no background task {id} in this session"),
                )),
            }
        })
    }
}

/// An agent definition: Markdown with front matter (`name`, `description`, `tools`, `model`,
/// `max_turns`); the body is added to the child's instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    /// Its name (front matter `name`, else the file stem).
    pub name: String,
    /// One line about it.
    pub description: String,
    /// Model requests for its children.
    pub max_turns: Option<u32>,
    /// The only tools its children get (intersected with the read-only tools); `None`: all of
    /// those.
    pub tools: Option<Vec<String>>,
    /// The model its children's requests name instead of the provider's.
    pub model: Option<String>,
    /// The body.
    pub prompt: String,
}

/// The definitions in `<ws>/.clawsmith/agents/` and `<ws>/.claude/agents/` (the first wins on a
/// name clash), sorted by name; unreadable or invalid files are skipped.
pub fn agent_definitions(workspace: &Path) -> Vec<AgentDefinition> {
    let mut found: BTreeMap<String, AgentDefinition> = BTreeMap::new();
    // Read through the workspace handle, like every workspace file: a definition that is a
    // symlink, or sits under one, is not followed out of the workspace.
    let Ok(handle) = Workspace::open(workspace) else {
        return Vec::new();
    };
    for folder in [".clawsmith/agents", ".claude/agents"] {
        let Some((files, _)) = handle
            .resolve(folder)
            .ok()
            .and_then(|dir| handle.regular_files_beneath(&dir, AGENT_FILES_MAX))
        else {
            continue;
        };
        // Sorted by `regular_files_beneath`; only the folder's own `.md` files count.
        for relative in files.iter().filter(|relative| {
            relative
                .strip_prefix(folder)
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|name| !name.contains('/') && name.ends_with(".md"))
        }) {
            let Some(text) = read_definition(&handle, relative) else {
                continue;
            };
            let stem = Path::new(relative)
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Some(definition) = parse_agent(&stem, &text) {
                found.entry(definition.name.clone()).or_insert(definition);
            }
        }
    }
    found.into_values().collect()
}

/// Files looked at in one definitions folder, and the bytes read of one definition.
const AGENT_FILES_MAX: usize = 1000;
const AGENT_FILE_MAX_BYTES: u64 = 256 * 1024;

/// A definition's text, read beneath the workspace root; `None` when it cannot be opened as a
/// regular file, is larger than [`AGENT_FILE_MAX_BYTES`] or is not UTF-8.
fn read_definition(workspace: &Workspace, relative: &str) -> Option<String> {
    use std::io::Read;
    let path = workspace.resolve(relative).ok()?;
    let (file, size) = workspace.open_for_read(&path).ok()?;
    if size > AGENT_FILE_MAX_BYTES {
        return None;
    }
    let mut text = String::new();
    file.take(AGENT_FILE_MAX_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

fn find_agent(workspace: &Path, name: &str) -> Result<AgentDefinition, String> {
    let definitions = agent_definitions(workspace);
    let names: Vec<&str> = definitions
        .iter()
        .map(|agent| agent.name.as_str())
        .collect();
    definitions
        .iter()
        .find(|agent| agent.name == name)
        .cloned()
        .ok_or_else(|| {
            format!(
                "no agent definition named {name:?} in .clawsmith/agents/ or .claude/agents/ \
                 (known: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            )
        })
}

/// The YAML front matter (the one reader of `clawsmith_core::front_matter`); the body after it,
/// without its leading blank lines, is the prompt. `None`: not a valid definition (no or invalid
/// front matter, a list or map where a single value belongs, `max_turns` not a positive number).
fn parse_agent(stem: &str, text: &str) -> Option<AgentDefinition> {
    let front = parse_front_matter(text, "an agent definition").ok()?;
    let mut definition = AgentDefinition {
        name: stem.to_owned(),
        description: String::new(),
        max_turns: None,
        tools: None,
        model: None,
        prompt: front.body.trim_start_matches(['\r', '\n']).to_owned(),
    };
    let fields = match front.fields {
        Value::Object(fields) => fields,
        Value::Null => serde_json::Map::new(),
        _ => return None,
    };
    for (key, value) in fields {
        if key == "tools" {
            definition.tools = tool_names(value)?;
            continue;
        }
        let value = single_value(value)?;
        match key.as_str() {
            "name" if !value.is_empty() => definition.name = value,
            "description" => definition.description = value,
            "max_turns" => definition.max_turns = Some(value.parse().ok().filter(|n| *n > 0)?),
            "model" if !value.is_empty() => definition.model = Some(value),
            _ => {}
        }
    }
    Some(definition)
}

/// A scalar of the front matter as text (`""` for an empty value); `None` for a list or map.
fn single_value(value: Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.trim().to_owned()),
        Value::Null => Some(String::new()),
        Value::Bool(_) | Value::Number(_) => Some(value.to_string()),
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// `tools`: `Read, Grep` or `[read_file, search_files]`; `Some(None)` when it names none.
fn tool_names(value: Value) -> Option<Option<Vec<String>>> {
    let names: Vec<String> = match value {
        Value::Array(items) => items
            .into_iter()
            .map(single_value)
            .collect::<Option<Vec<_>>>()?,
        // A quoted `"[a, b]"` is a list too.
        value => single_value(value)?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(|name| name.trim().trim_matches(['"', '\'']).to_owned())
            .collect(),
    };
    let names: Vec<String> = names.into_iter().filter(|name| !name.is_empty()).collect();
    Some((!names.is_empty()).then_some(names))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_argument_types_refuse_what_their_schemas_refuse() {
        // (input, accepted by delegate_task's parser)
        let table = [
            (json!({"task": "look"}), true),
            (json!({"task": "look", "agent": "reviewer"}), true),
            (json!({}), false),
            (json!({"task": 5}), false),
            (json!({"task": "look", "extra": 1}), false),
            (json!({"task": "look", "agent": 1}), false),
        ];
        for (input, accepted) in table {
            let parsed = parse_input::<DelegateTaskInput>("delegate_task", input.clone());
            assert_eq!(parsed.is_ok(), accepted, "{input}");
        }
        let schema = input_schema::<DelegateTaskInput>();
        assert_eq!(schema["required"], json!(["task"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        let schema = input_schema::<TaskIdInput>();
        assert_eq!(schema["required"], json!(["taskId"]));
        assert!(parse_input::<TaskIdInput>("t", json!({"taskId": "bg_1"})).is_ok());
        assert!(parse_input::<NoInput>("t", json!({"x": 1})).is_err());
        // A task of blanks is refused after the parse.
        assert!(non_empty_task("  \n".to_owned()).is_err());
        assert_eq!(non_empty_task(" look ".to_owned()).unwrap(), "look");
    }

    #[test]
    fn agent_front_matter() {
        // (text, expected (name, max_turns, tools, model, prompt))
        type Expected<'a> = Option<(
            &'a str,
            Option<u32>,
            Option<Vec<&'a str>>,
            Option<&'a str>,
            &'a str,
        )>;
        let table: [(&str, Expected<'_>); 9] = [
            (
                "---\nname: reviewer\ndescription: reads code\nmax_turns: 3\ntools: read_file\n---\nBe strict.\n",
                Some((
                    "reviewer",
                    Some(3),
                    Some(vec!["read_file"]),
                    None,
                    "Be strict.\n",
                )),
            ),
            (
                "---\ndescription: x\n---\nbody",
                Some(("stem", None, None, None, "body")),
            ),
            (
                "---\ntools: [read_file, \"search_files\"]\nmodel: small-model\n---\n",
                Some((
                    "stem",
                    None,
                    Some(vec!["read_file", "search_files"]),
                    Some("small-model"),
                    "",
                )),
            ),
            (
                "---\ntools: Read, Grep\nmodel:\n---\n",
                Some(("stem", None, Some(vec!["Read", "Grep"]), None, "")),
            ),
            ("no front matter", None),
            ("---\nmax_turns: zero\n---\n", None),
            (
                "---\nname: \"quoted: name\"\nmax_turns: \"2\"\n---\n\n\nPrompt",
                Some(("quoted: name", Some(2), None, None, "Prompt")),
            ),
            // Front matter that is not YAML (an unquoted `: ` inside a value) is no definition.
            ("---\ndescription: use it: now\n---\n", None),
            ("---\nname: [a, b]\n---\n", None),
        ];
        for (text, expected) in table {
            let parsed = parse_agent("stem", text);
            let got = parsed.as_ref().map(|agent| {
                (
                    agent.name.as_str(),
                    agent.max_turns,
                    agent
                        .tools
                        .as_ref()
                        .map(|tools| tools.iter().map(String::as_str).collect::<Vec<_>>()),
                    agent.model.as_deref(),
                    agent.prompt.as_str(),
                )
            });
            assert_eq!(got, expected, "{text}");
        }
    }
}
