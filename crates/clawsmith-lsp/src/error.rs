//! Why a language-server call failed, and the protocol code each failure reports.

use std::path::PathBuf;

use clawsmith_fs::FsError;
use clawsmith_protocol::ErrorCode;

/// A failure of configuration, of a server, or of a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LspError {
    /// `clawsmith.toml` could not be read.
    #[error("cannot read {}: {cause}", path.display())]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// What the filesystem said (quoted in the message, so not also the source).
        cause: std::io::Error,
    },
    /// `[[lsp_servers]]` is malformed.
    #[error("invalid [[lsp_servers]] configuration{}: {message}",
        path.as_ref().map(|p| format!(" in {}", p.display())).unwrap_or_default())]
    InvalidConfig {
        /// The file, when it came from one.
        path: Option<PathBuf>,
        /// What is wrong, with line and column from the parser.
        message: String,
    },
    /// No server serves this kind of file.
    #[error(
        "no language server for {language} files (`.{extension}`): none is configured and none of \
         the usual servers for it is on PATH; add one under [[lsp_servers]] in clawsmith.toml \
         with extensions = [\"{extension}\"]"
    )]
    NoServer {
        /// The language, e.g. `python`.
        language: String,
        /// The file extension.
        extension: String,
    },
    /// The file has no extension to choose a server by.
    #[error(
        "{path} has no file extension, so no language server can be chosen for it (servers are \
         chosen by the `extensions` of [[lsp_servers]] in clawsmith.toml)"
    )]
    NoExtension {
        /// The file.
        path: String,
    },
    /// The server could not be spawned.
    #[error("language server `{server}` could not be started: {message}")]
    Start {
        /// The server's name.
        server: String,
        /// Why.
        message: String,
        /// The protocol code (e.g. `sandbox_unavailable`).
        code: ErrorCode,
    },
    /// A request (or the wait for diagnostics) ran past its deadline.
    #[error("language server `{server}` did not answer {what} within {ms} ms")]
    Timeout {
        /// The server's name.
        server: String,
        /// What was asked.
        what: String,
        /// The deadline.
        ms: u128,
    },
    /// The server exited while a call was waiting.
    #[error(
        "language server `{server}` exited while answering {what}{}",
        stderr_note(stderr)
    )]
    Exited {
        /// The server's name.
        server: String,
        /// What was asked.
        what: String,
        /// The tail of its stderr.
        stderr: String,
    },
    /// The server crashed more often than `max_restarts` allows.
    #[error(
        "language server `{server}` crashed {crashes} times and is not restarted again \
         (max_restarts = {max_restarts} in [[lsp_servers]]){}",
        stderr_note(stderr)
    )]
    GaveUp {
        /// The server's name.
        server: String,
        /// Crashes so far.
        crashes: u32,
        /// The configured limit.
        max_restarts: u32,
        /// The tail of its stderr.
        stderr: String,
    },
    /// The server answered with an error.
    #[error("language server `{server}` refused {what}: {message} (code {code})")]
    Rpc {
        /// The server's name.
        server: String,
        /// What was asked.
        what: String,
        /// JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// The server does not offer the feature.
    #[error("language server `{server}` does not support {feature}")]
    Unsupported {
        /// The server's name.
        server: String,
        /// The feature, e.g. `workspace symbols`.
        feature: String,
    },
    /// No server is running to ask (workspace symbols).
    #[error(
        "no language server is running yet: servers start on the first lsp_ call for a file of \
         their language (e.g. lsp_document_symbols on one of its files); then ask again"
    )]
    NoneRunning,
    /// The answer could not be read.
    #[error("language server `{server}` sent a malformed answer to {what}: {message}")]
    Malformed {
        /// The server's name.
        server: String,
        /// What was asked.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// A position outside the file.
    #[error("{path} has {lines} lines; line {line} does not exist")]
    BadLine {
        /// The file.
        path: String,
        /// Its line count.
        lines: usize,
        /// As requested.
        line: u32,
    },
    /// The file is not UTF-8 text.
    #[error("{path} is not UTF-8 text; language servers read text files")]
    NotText {
        /// The file.
        path: String,
    },
    /// Reading the file through the workspace failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// The service was shut down.
    #[error("the language-server service was shut down")]
    ShutDown,
}

fn stderr_note(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!("; the end of its stderr:\n{}", stderr.trim_end())
    }
}

impl LspError {
    /// The protocol code a tool reports for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            LspError::Timeout { .. } => ErrorCode::TIMEOUT,
            LspError::NoExtension { .. } | LspError::BadLine { .. } | LspError::NotText { .. } => {
                ErrorCode::INVALID_ARGUMENTS
            }
            LspError::Fs(error) => match error {
                FsError::OutsideWorkspace { .. }
                | FsError::NulByte
                | FsError::EmptyPath
                | FsError::NotFound { .. }
                | FsError::NotRegularFile { .. }
                | FsError::NotADirectory { .. }
                | FsError::TooLarge { .. } => ErrorCode::INVALID_ARGUMENTS,
                _ => ErrorCode::TOOL_FAILED,
            },
            LspError::Start { code, .. } => code.clone(),
            LspError::ReadConfig { .. }
            | LspError::InvalidConfig { .. }
            | LspError::NoServer { .. }
            | LspError::Exited { .. }
            | LspError::GaveUp { .. }
            | LspError::Rpc { .. }
            | LspError::Unsupported { .. }
            | LspError::NoneRunning
            | LspError::Malformed { .. }
            | LspError::ShutDown => ErrorCode::TOOL_FAILED,
        }
    }
}
