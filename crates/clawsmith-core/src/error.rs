//! The one error type of the core: the runtime itself broke (configuration, storage). A failure
//! the model should read is never an `Err`; it is a `ToolExecutionResult`.

/// Why constructing the core, opening a session or persisting a turn failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// Two tools of the table share a name (A1).
    #[error("tool `{name}` is defined twice: by {first} and by {second}")]
    DuplicateTool {
        /// The shared name.
        name: String,
        /// Where the first definition came from (e.g. `builtin:fs`).
        first: String,
        /// Where the second definition came from (e.g. `extension:mcp:github`).
        second: String,
    },
    /// A tool's input schema does not compile as a JSON Schema.
    #[error("tool `{name}` from {origin} has an invalid input schema: {message}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// Where it came from.
        origin: String,
        /// What is wrong with it.
        message: String,
    },
    /// A tool name is empty or not printable ASCII without spaces.
    #[error("tool name {name:?} from {origin} is not a valid tool name")]
    InvalidToolName {
        /// The name as given.
        name: String,
        /// Where it came from.
        origin: String,
    },
    /// The workspace root could not be opened.
    #[error("cannot open the workspace {path}: {message}")]
    Workspace {
        /// The root as configured.
        path: String,
        /// Why.
        message: String,
    },
    /// A session exists but belongs to another workspace.
    #[error("session {session_id} belongs to workspace {found}, not {expected}")]
    WorkspaceMismatch {
        /// The session.
        session_id: String,
        /// The root recorded for the session.
        found: String,
        /// The root of this core.
        expected: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] clawsmith_checkpoint::StoreError),
}
