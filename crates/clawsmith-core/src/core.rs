//! Construction of the core (A1): configuration, the frozen table, the shared state sessions use.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clawsmith_fs::{ChangeRecorder, HiddenPaths, Workspace};
use clawsmith_protocol::Tool;
use clawsmith_sandbox::{
    CommandExecutionService, HiddenPathSource, ProcessKind, RunCommandTool, SandboxConfig,
    command_tools,
};
use clawsmith_security::PermissionPolicy;
use clawsmith_store::{SessionStore, TurnRecorder};

use crate::approval::Approver;
use crate::capture::Captures;
use crate::error::CoreError;
use crate::execute::ExecutionLimits;
use crate::hooks::{CommandHook, Hook};
use crate::search::{Activations, SearchDocument, SearchToolsTool};
use crate::session::SessionHandle;
use crate::session_tools::{ReadArtifactTool, TodoListTool, TodoWriteTool};
use crate::shared::Shared;
use crate::table::{Candidate, ExtensionTool, Origin, ToolTable};

/// Default bound on calls of one parallel read batch running at once.
pub const DEFAULT_MAX_PARALLEL: usize = 4;
/// How long a cancelled (or timed-out) tool may take to return its own result before the core
/// abandons it.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Everything a host decides about the core. Build with [`CoreConfig::new`] and set fields.
pub struct CoreConfig {
    /// The workspace the file tools work in (canonicalized once).
    pub workspace_root: PathBuf,
    /// The session store (sessions, events, journal, checkpoints, artifacts, todos).
    pub store: Arc<dyn SessionStore>,
    /// Permission mode and rules (S4). Its `workspace_root` is filled in when unset.
    pub policy: PermissionPolicy,
    /// Answers `ask`; `None` turns every `ask` into `permission_denied`.
    pub approver: Option<Arc<dyn Approver>>,
    /// In-process hooks consulted before the permission check, in order.
    pub hooks: Vec<Arc<dyn Hook>>,
    /// External hooks (policy and plugin hooks), consulted after `hooks`, in order. The core
    /// runs each confined by the hook profile of `sandbox` (workspace read-only, no network,
    /// the state directory out of sight): a hook cannot be run any other way.
    pub command_hooks: Vec<CommandHook>,
    /// How `run_command` runs commands (C1–C3). Its `workspace_root` is replaced by the core's
    /// canonical root, and the store's database file is added to its protected paths.
    pub sandbox: SandboxConfig,
    /// A background command service: when set, its eight tools (C4) join the table under
    /// origin `service:commands`.
    pub command_service: Option<Arc<CommandExecutionService>>,
    /// Whether large outputs go to artifacts and `read_artifact` exists (A2, A4).
    pub artifacts_enabled: bool,
    /// Extension tools (MCP, LSP, plugins), possibly deferred.
    pub extension_tools: Vec<ExtensionTool>,
    /// Bound on concurrently running calls of a parallel batch (at least 1).
    pub max_parallel: usize,
    /// Time limit per call; `None` = no limit (cancellation still works).
    pub call_timeout: Option<Duration>,
    /// Grace period for a cancelled or timed-out tool.
    pub cancel_grace: Duration,
    /// How long a call that guards no side effect may run with its start not yet committed
    /// (its start and close are then one commit); a longer one gets its start committed while it
    /// runs. [`READ_RECORD_WINDOW`](crate::READ_RECORD_WINDOW) (50 ms) by default.
    pub read_record_window: Duration,
    /// Whether `tool.started` events carry the tool's (redacted) input schema (P9). Off by
    /// default: the schema is the same for every call and `model.request` already hashes it.
    pub record_tool_schemas: bool,
    /// Replaces the checkpoint recorder handed to the file tools. `None` (the default) records
    /// into `store`; hosts and tests that wrap the recorder set it.
    pub change_recorder: Option<Arc<dyn ChangeRecorder>>,
    /// Files larger than this are tracked by hash only by the command capture: undo cannot give
    /// them back and names them "not captured". [`CAPTURE_CONTENT_LIMIT`](crate::CAPTURE_CONTENT_LIMIT)
    /// (8 MiB) by default.
    pub capture_content_limit: u64,
    /// Whether the workspace is captured around each foreground `run_command` so undo restores
    /// what it changed. On by default; off only to measure what it costs.
    pub capture_commands: bool,
    /// Whether only tools of effective risk `read` join the table (a sub-agent's core,
    /// clawsmith-agent). Off by default.
    pub read_only_tools: bool,
    /// When set, only the tools named here join the table (a sub-agent whose definition lists
    /// its `tools`, clawsmith-agent); names the table does not have are ignored. `None` (every
    /// tool) by default.
    pub only_tools: Option<BTreeSet<String>>,
    /// Where turn and call spans go; the default records nothing.
    pub tracer: clawsmith_trace::Tracer,
    /// The parent of every turn's span: the caller's `traceparent` (CLI `--traceparent` or
    /// `TRACEPARENT`). `None` starts a new trace per turn.
    pub trace_parent: Option<clawsmith_trace::SpanContext>,
}

impl CoreConfig {
    /// A configuration with the defaults: `ask` mode, no approver, no hooks, the default
    /// sandbox, no background command service, artifacts on, no extensions,
    /// [`DEFAULT_MAX_PARALLEL`], no call timeout.
    pub fn new(workspace_root: impl Into<PathBuf>, store: Arc<dyn SessionStore>) -> CoreConfig {
        let workspace_root = workspace_root.into();
        let state_dir = match store.database_path().and_then(Path::parent) {
            Some(dir) => clawsmith_sandbox::StateDir::At(dir.to_path_buf()),
            None => clawsmith_sandbox::StateDir::NotKept,
        };
        CoreConfig {
            sandbox: SandboxConfig::new(&workspace_root, state_dir),
            workspace_root,
            store,
            policy: PermissionPolicy::default(),
            approver: None,
            hooks: Vec::new(),
            command_hooks: Vec::new(),
            command_service: None,
            artifacts_enabled: true,
            extension_tools: Vec::new(),
            max_parallel: DEFAULT_MAX_PARALLEL,
            call_timeout: None,
            cancel_grace: DEFAULT_CANCEL_GRACE,
            read_record_window: crate::pipeline::READ_RECORD_WINDOW,
            record_tool_schemas: false,
            change_recorder: None,
            capture_content_limit: crate::capture::CAPTURE_CONTENT_LIMIT,
            capture_commands: true,
            read_only_tools: false,
            only_tools: None,
            tracer: clawsmith_trace::Tracer::noop(),
            trace_parent: None,
        }
    }
}

/// The hidden paths as a command's view must cover them when it starts (the literal entries,
/// and the files the glob entries match then): the [`HiddenPathSource`] for
/// [`SandboxConfig::hidden_path_source`].
#[derive(Debug)]
pub struct HiddenGlobMatches(pub Arc<HiddenPaths>);

impl HiddenPathSource for HiddenGlobMatches {
    fn hidden_paths(&self) -> Vec<PathBuf> {
        self.0.command_paths()
    }
}

/// The agent core: a frozen tool table plus the pipeline every call goes through. Cloning is
/// cheap and shares everything (table, store, activations).
#[derive(Clone)]
pub struct AgentCore {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for AgentCore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AgentCore")
            .field("tools", &self.shared.table.names())
            .field("workspace", &self.shared.workspace_root_text)
            .finish_non_exhaustive()
    }
}

impl AgentCore {
    /// Builds the frozen table (A1) in this order: built-in file tools (`builtin:fs`),
    /// `run_command` (`builtin:command`), session tools `todo_write`/`todo_list` (`session`),
    /// `read_artifact` when artifacts are enabled (`service:artifacts`), background command tools
    /// (`service:commands`), extension tools (`extension:<source>`), and `search_tools`
    /// (`session`) when at least one tool is deferred. A duplicate name fails with both origins.
    pub fn new(config: CoreConfig) -> Result<AgentCore, CoreError> {
        let CoreConfig {
            workspace_root,
            store,
            mut policy,
            approver,
            mut hooks,
            command_hooks,
            mut sandbox,
            command_service,
            artifacts_enabled,
            extension_tools,
            max_parallel,
            call_timeout,
            cancel_grace,
            read_record_window,
            record_tool_schemas,
            change_recorder,
            capture_commands,
            capture_content_limit,
            read_only_tools,
            only_tools,
            tracer,
            trace_parent,
        } = config;
        let workspace_error = |error: clawsmith_fs::FsError| CoreError::Workspace {
            path: workspace_root.display().to_string(),
            message: error.to_string(),
        };
        // Hidden paths hold by identity in every file tool, and their glob matches are hidden
        // from each command's view as they are when it starts.
        let hidden = Arc::new(
            HiddenPaths::new(&workspace_root, policy.hidden_paths.patterns())
                .map_err(workspace_error)?,
        );
        let workspace = Arc::new(
            Workspace::open(&workspace_root)
                .map_err(workspace_error)?
                .with_hidden(hidden.clone()),
        );
        if sandbox.hidden_path_source.is_none() {
            sandbox.hidden_path_source = Some(Arc::new(HiddenGlobMatches(hidden)));
        }
        if policy.workspace_root.is_none() {
            policy.workspace_root = Some(workspace.root().to_path_buf());
        }
        sandbox.workspace_root = workspace.root().to_path_buf();
        let hook_sandbox = sandbox.for_process(ProcessKind::Hook);
        hooks.extend(
            command_hooks
                .into_iter()
                .map(|hook| Arc::new(hook.confined(hook_sandbox.clone())) as Arc<dyn Hook>),
        );
        let recorder: Arc<dyn ChangeRecorder> = match change_recorder {
            Some(recorder) => recorder,
            None => Arc::new(TurnRecorder::new(store.clone())),
        };
        let mut candidates = Vec::new();
        let mut push = |origin: Origin, tool: Arc<dyn Tool>, deferred: bool| {
            if read_only_tools
                && clawsmith_security::ToolFacts::of(tool.as_ref()).effective_risk
                    != clawsmith_protocol::Risk::Read
            {
                return;
            }
            if only_tools
                .as_ref()
                .is_some_and(|only| !only.contains(tool.name()))
            {
                return;
            }
            candidates.push(Candidate {
                origin,
                tool,
                deferred,
            });
        };
        for tool in clawsmith_fs::builtin_tools(workspace.clone(), recorder.clone()) {
            push(Origin::Files, tool, false);
        }
        sandbox.workspace_root = workspace.root().to_path_buf();
        // The root the file tools opened: a command refuses to run once the path names
        // anything else (the root swapped for a symlink between calls).
        sandbox.workspace_identity = std::fs::metadata(workspace.root())
            .ok()
            .map(|meta| (meta.dev(), meta.ino()));
        if let Some(database) = store.database_path() {
            // Commands must neither read nor rewrite the audit trail (every workspace's history
            // and file contents), even when the database sits inside the workspace: hidden in
            // the command's view, and read-only where it cannot be hidden.
            if let Some(state_dir) = database.parent() {
                sandbox.hidden_paths.push(state_dir.to_path_buf());
            }
            for suffix in ["", "-wal", "-shm"] {
                let mut path = database.as_os_str().to_owned();
                path.push(suffix);
                sandbox.hidden_paths.push(PathBuf::from(&path));
                sandbox.protected_paths.push(PathBuf::from(path));
            }
        }
        push(
            Origin::Command,
            Arc::new(RunCommandTool::new(sandbox)),
            false,
        );
        push(
            Origin::Session,
            Arc::new(TodoWriteTool::new(store.clone())),
            false,
        );
        push(
            Origin::Session,
            Arc::new(TodoListTool::new(store.clone())),
            false,
        );
        if artifacts_enabled {
            push(
                Origin::Artifacts,
                Arc::new(ReadArtifactTool::new(store.clone())),
                false,
            );
        }
        // The capture takes full passes while a background command runs.
        let background_service = command_service.clone();
        if let Some(service) = command_service {
            for tool in command_tools(service) {
                push(Origin::Commands, tool, false);
            }
        }
        for extension in extension_tools {
            push(
                Origin::Extension(extension.source),
                extension.tool,
                extension.deferred,
            );
        }
        // Build once without search_tools to learn which tools are deferred, then add it.
        let activations = Arc::new(Activations::default());
        let mut table = ToolTable::build(candidates)?;
        let documents: Vec<SearchDocument> = table
            .entries()
            .iter()
            .filter(|entry| entry.is_deferred())
            .map(SearchDocument::of)
            .collect();
        if !documents.is_empty() {
            table = table.with(Candidate {
                origin: Origin::Session,
                tool: Arc::new(SearchToolsTool::new(documents, activations.clone())),
                deferred: false,
            })?;
        }
        Ok(AgentCore {
            shared: Arc::new(Shared {
                table,
                store,
                workspace_root_text: workspace.root().display().to_string(),
                workspace,
                policy,
                approver,
                hooks,
                artifacts_enabled,
                max_parallel: max_parallel.max(1),
                execution: ExecutionLimits {
                    call_timeout,
                    cancel_grace,
                },
                read_record_window,
                activations,
                record_tool_schemas,
                recorder,
                captures: Captures::with_content_limit(capture_content_limit)
                    .with_background(background_service),
                capture_commands,
                tracer,
                trace_parent,
            }),
        })
    }

    /// How the permission policy decides `tool` with `input` and what decided it, without
    /// running anything (no hooks, no approver): `clawsmith policy check`. `None` for a tool
    /// not in the table.
    pub fn explain_call(
        &self,
        tool: &str,
        input: &serde_json::Value,
    ) -> Option<clawsmith_security::Explanation> {
        let entry = self.shared.table.get(tool)?;
        Some(crate::pipeline::explain(&self.shared, entry, input))
    }

    /// The frozen table.
    pub fn tools(&self) -> &ToolTable {
        &self.shared.table
    }

    /// The canonical workspace root.
    pub fn workspace_root(&self) -> &std::path::Path {
        self.shared.workspace.root()
    }

    /// How the command capture refreshed its manifests so far: full passes over the tree, and
    /// refreshes from the workspace watch's events (benchmarks and tests read it).
    pub fn capture_passes(&self) -> crate::capture::CapturePasses {
        self.shared.captures.passes()
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.shared.store
    }

    /// What a session with no activated deferred tools is shown.
    pub fn initial_tool_schema_sha256(&self) -> String {
        self.shared.table.tool_schema_sha256(&BTreeSet::new())
    }

    /// Opens a session: continues `session_id` when it exists (it must belong to this
    /// workspace), creates it otherwise (a fresh id when `None`). Recovery (A8) runs before this
    /// returns; its report is [`SessionHandle::recovery`].
    pub fn open_session(&self, session_id: Option<String>) -> Result<SessionHandle, CoreError> {
        SessionHandle::open(self.shared.clone(), session_id)
    }

    /// Opens a new session linked to `parent_id` (stored as its parent): a sub-agent's session.
    /// The parent may belong to another core over the same store (the sub-agent's core has
    /// fewer tools).
    pub fn open_child_session(&self, parent_id: &str) -> Result<SessionHandle, CoreError> {
        let id = clawsmith_protocol::id::new_id(clawsmith_protocol::id::IdKind::Session);
        self.shared
            .store
            .create_child_session(&id, parent_id, &self.shared.workspace_root_text)?;
        SessionHandle::open(self.shared.clone(), Some(id))
    }
}
