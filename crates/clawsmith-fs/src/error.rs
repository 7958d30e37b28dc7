//! The error type of the workspace handle.

use std::path::PathBuf;

/// Why a workspace operation failed.
///
/// Every message names the path as the model gave it (`requested`) or in its normalized
/// workspace-relative form; none ever quotes file content, and none describes anything outside the
/// workspace beyond "it is outside".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// F1: the path leaves the workspace (lexically, or through a symlink found when opening).
    #[error("Path is outside the workspace: {requested}")]
    OutsideWorkspace { requested: String },
    /// The path contains a NUL byte (it would be cut short by the kernel).
    #[error("Path contains a NUL byte")]
    NulByte,
    /// The path is the empty string.
    #[error("Path is empty")]
    EmptyPath,
    /// The workspace root itself cannot be used.
    #[error("Workspace root {root} cannot be opened: {source}")]
    Root {
        root: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Nothing exists at the path.
    #[error("File not found: {path}")]
    NotFound { path: String },
    /// The path exists but is not a regular file (a directory, symlink, FIFO, socket or device).
    #[error("Not a regular file: {path}")]
    NotRegularFile { path: String },
    /// The path exists but is not a directory.
    #[error("Not a directory: {path}")]
    NotADirectory { path: String },
    /// Create-only or no-clobber refused an existing target.
    #[error("File already exists: {path}")]
    AlreadyExists { path: String },
    /// The parent directory is missing.
    #[error("Parent directory does not exist: {path}")]
    ParentMissing { path: String },
    /// The file is larger than the operation accepts.
    #[error("File is too large ({size} bytes; limit {limit} bytes): {path}")]
    TooLarge { path: String, size: u64, limit: u64 },
    /// Any other system error, with the operation and path it happened on.
    #[error("Cannot {operation} {path}: {source}")]
    Io {
        operation: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}
