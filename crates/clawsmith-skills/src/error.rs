//! The crate's one error type: configuration that cannot be used, or the memory index broke.
//! An invalid skill is not an error (it is listed with its reason), and a failure the model
//! should read is a `ToolExecutionResult`, never an `Err`.

use std::path::PathBuf;

/// Why loading the configuration or using the memory index failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillsError {
    /// The configuration file could not be read.
    #[error("cannot read the configuration {path}: {cause}")]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// Why (quoted in the message, so not also the source).
        cause: std::io::Error,
    },
    /// `[skills]` is not valid TOML of the expected shape (the message has line and column).
    #[error("invalid configuration{}: {message}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    InvalidConfig {
        /// The file, when it came from one.
        path: Option<PathBuf>,
        /// What is wrong, as the parser says it.
        message: String,
    },
    /// The memory index failed. The message quotes the store's error, so it is not also the
    /// source (a chain printer would say it twice).
    #[error("memory index: {0}")]
    Index(clawsmith_checkpoint::StoreError),
    /// A note argument was refused (empty text, a bad tag…).
    #[error("{0}")]
    InvalidNote(String),
}

impl From<clawsmith_checkpoint::StoreError> for SkillsError {
    fn from(error: clawsmith_checkpoint::StoreError) -> Self {
        SkillsError::Index(error)
    }
}
