//! The error type of the workspace handle.

use std::path::PathBuf;

use crate::escape::escape_control;

/// Why a workspace operation failed.
///
/// Every message names the path as the model gave it (`requested`) or in its normalized
/// workspace-relative form, with control characters escaped ([`crate::escape_control`]); none ever
/// quotes file content, and none describes anything outside the workspace beyond "it is outside".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// F1: the path leaves the workspace (lexically, or through a symlink found when opening).
    #[error("Path is outside the workspace: {}", escape_control(requested))]
    OutsideWorkspace { requested: String },
    /// The path contains a NUL byte (it would be cut short by the kernel).
    #[error("Path contains a NUL byte")]
    NulByte,
    /// The path is the empty string.
    #[error("Path is empty")]
    EmptyPath,
    /// The workspace root itself cannot be used.
    ///
    /// The cause is part of the message (models read only the message), so it is not also
    /// returned as `source()`: a chain of causes prints it once.
    #[error(
        "Workspace root {} cannot be opened: {cause}",
        escape_control(&root.to_string_lossy())
    )]
    Root {
        root: PathBuf,
        cause: std::io::Error,
    },
    /// Nothing exists at the path.
    #[error("File not found: {}", escape_control(path))]
    NotFound { path: String },
    /// The path exists but is not a regular file (a directory, symlink, FIFO, socket or device).
    #[error("Not a regular file: {}", escape_control(path))]
    NotRegularFile { path: String },
    /// The path exists but is not a directory.
    #[error("Not a directory: {}", escape_control(path))]
    NotADirectory { path: String },
    /// Create-only or no-clobber refused an existing target.
    #[error("File already exists: {}", escape_control(path))]
    AlreadyExists { path: String },
    /// The parent directory is missing.
    #[error("Parent directory does not exist: {}", escape_control(path))]
    ParentMissing { path: String },
    /// The file is larger than the operation accepts.
    #[error(
        "File is too large ({size} bytes; limit {limit} bytes): {}",
        escape_control(path)
    )]
    TooLarge { path: String, size: u64, limit: u64 },
    /// A read-modify-write found the file changed since it was read (another writer); nothing
    /// was written. Reading it again and redoing the change is safe.
    #[error("{} changed while editing; read it again", escape_control(path))]
    Changed { path: String },
    /// The file is in the workspace's hidden set (`hidden_paths`), reached by this name or by
    /// another one (a symlink, a hard link, a parent directory's link): it is never read or
    /// changed for the model. Names the matched entry, never the content.
    #[error(
        "`{}` is hidden (hidden_paths entry `{}`): it may not be read or written, by this or any other name",
        escape_control(path),
        escape_control(entry)
    )]
    Hidden { path: String, entry: String },
    /// A `hidden_paths` entry is not a valid glob.
    #[error(
        "hidden_paths entry `{}` is not a valid glob: {message}",
        escape_control(pattern)
    )]
    HiddenPattern { pattern: String, message: String },
    /// Any other system error, with the operation and path it happened on.
    /// The cause is in the message and not returned as `source()` (printed once).
    #[error("Cannot {operation} {}: {cause}", escape_control(path))]
    Io {
        operation: &'static str,
        path: String,
        cause: std::io::Error,
    },
}
