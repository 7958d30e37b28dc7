//! The change-recorder seam between the write tools and checkpoints (K1, F5–F8).
//!
//! The contract is fixed with `clawsmith-checkpoint` (see `notes/recorder-contract.md`): a write
//! tool reports a path's prior state *before* it changes it and the post-operation state right
//! *after*. A `before_change` error stops the change; the tool then returns a `tool_failed` result.

/// Which call a change belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeOrigin {
    pub session_id: String,
    pub turn_id: String,
    pub tool_call_id: String,
}

impl ChangeOrigin {
    /// The origin of a call made with `context`.
    pub fn from_context(context: &clawsmith_protocol::ToolExecutionContext) -> ChangeOrigin {
        ChangeOrigin {
            session_id: context.session_id.clone(),
            turn_id: context.turn_id.clone(),
            tool_call_id: context.tool_call_id.clone(),
        }
    }
}

/// A file's state before a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorState {
    /// The path did not exist.
    Absent,
    /// A regular file with this content and permission bits (`st_mode & 0o7777`).
    File { content: Vec<u8>, mode: u32 },
}

/// A file's state right after a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostState {
    /// The path no longer exists.
    Absent,
    /// A regular file with this SHA-256, size and permission bits (`st_mode & 0o7777`).
    File {
        sha256: [u8; 32],
        size: u64,
        mode: u32,
    },
}

/// The recorder could not record a change.
#[derive(Debug, thiserror::Error)]
#[error("checkpoint recorder failed for {path}: {message}")]
pub struct RecorderError {
    pub path: String,
    pub message: String,
}

/// Receives every change a write tool makes.
///
/// Paths are workspace-relative, `/`-separated and normalized (no `.`/`..`, no leading `/`), e.g.
/// `src/main.rs`: exactly [`crate::WorkspacePath::as_str`].
///
/// Order per tool:
/// - `write_file`: before(path, Absent) → create → after(path, File)
/// - `edit_file`: before(path, File{old}) → replace → after(path, File{new})
/// - `rename_file`: before(from, File), before(to, Absent) → move → after(from, Absent),
///   after(to, File)
/// - `delete_file`: before(path, File) → delete → after(path, Absent)
///
/// A `before_change` without a matching `after_change` means the change did not happen (the
/// tool failed after reporting the prior state, e.g. because a concurrent creator won the race).
pub trait ChangeRecorder: Send + Sync {
    /// Called BEFORE the tool changes `path` (every time; the recorder keeps only the first prior
    /// state per turn). If this returns `Err` the tool does not make the change.
    fn before_change(
        &self,
        origin: &ChangeOrigin,
        path: &str,
        prior: &PriorState,
    ) -> Result<(), RecorderError>;
    /// Called right AFTER the change with the post-operation state.
    fn after_change(
        &self,
        origin: &ChangeOrigin,
        path: &str,
        post: &PostState,
    ) -> Result<(), RecorderError>;
}

/// A recorder that records nothing (for callers without checkpoints).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopRecorder;

impl ChangeRecorder for NoopRecorder {
    fn before_change(
        &self,
        _origin: &ChangeOrigin,
        _path: &str,
        _prior: &PriorState,
    ) -> Result<(), RecorderError> {
        Ok(())
    }

    fn after_change(
        &self,
        _origin: &ChangeOrigin,
        _path: &str,
        _post: &PostState,
    ) -> Result<(), RecorderError> {
        Ok(())
    }
}
