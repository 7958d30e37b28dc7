//! The state every session of one core shares, built once by [`crate::AgentCore::new`]: what
//! the sessions, the pipeline and the command capture read. It sits apart from `core.rs`, which
//! uses every other module to build the core, so that the modules reading the state do not
//! depend on that one. It holds the command capture's state ([`Captures`]) while the capture's
//! entry points read it: the one pair of modules that use each other.

use std::sync::Arc;
use std::time::Duration;

use clawsmith_fs::{ChangeRecorder, Workspace};
use clawsmith_security::PermissionPolicy;
use clawsmith_store::SessionStore;

use crate::approval::Approver;
use crate::capture::Captures;
use crate::execute::ExecutionLimits;
use crate::hooks::Hook;
use crate::search::Activations;
use crate::table::ToolTable;

/// State shared by every session of one core.
pub(crate) struct Shared {
    pub table: ToolTable,
    pub store: Arc<dyn SessionStore>,
    pub workspace: Arc<Workspace>,
    pub workspace_root_text: String,
    pub policy: PermissionPolicy,
    pub approver: Option<Arc<dyn Approver>>,
    pub hooks: Vec<Arc<dyn Hook>>,
    pub artifacts_enabled: bool,
    pub max_parallel: usize,
    pub execution: ExecutionLimits,
    /// [`crate::CoreConfig::read_record_window`].
    pub read_record_window: Duration,
    pub activations: Arc<Activations>,
    pub record_tool_schemas: bool,
    /// The recorder of the file tools, which also records what commands change.
    pub recorder: Arc<dyn ChangeRecorder>,
    /// The per-session workspace manifests taken around commands.
    pub captures: Captures,
    /// [`crate::CoreConfig::capture_commands`].
    pub capture_commands: bool,
    /// [`crate::CoreConfig::tracer`].
    pub tracer: clawsmith_trace::Tracer,
    /// [`crate::CoreConfig::trace_parent`].
    pub trace_parent: Option<clawsmith_trace::SpanContext>,
}

impl Shared {
    /// Whether the parallel path is possible at all (A6): with hooks configured, each call must
    /// get its own hook decision and audit record in order, so no. An approver does not count:
    /// a parallel batch needs every call allowed outright, so it is never consulted there.
    pub fn parallel_allowed(&self) -> bool {
        self.hooks.is_empty()
    }
}
