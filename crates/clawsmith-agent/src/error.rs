//! Errors of providers, configuration and the loop.

use std::path::PathBuf;

use clawsmith_core::CoreError;

/// A model request that did not produce an assistant message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The configured key variable is not set.
    #[error(
        "the provider's API key variable {variable} is not set; export it or remove `api_key_env` \
         for a local server"
    )]
    MissingApiKey {
        /// The variable's name.
        variable: String,
    },
    /// The provider refused the request (a 4xx other than 429): not retried.
    #[error("{provider} refused the request (HTTP {status}): {message}")]
    Refused {
        /// `kind:model`.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The provider's own message (redacted).
        message: String,
    },
    /// Every attempt failed with a retryable error (429, 5xx, connection, timeout, cut stream).
    #[error("{provider} failed after {attempts} attempt(s): {last}")]
    Exhausted {
        /// `kind:model`.
        provider: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure (redacted).
        last: String,
    },
    /// The provider answered 2xx with a body that is not the protocol's shape.
    #[error("{provider} sent a malformed answer: {message}")]
    Malformed {
        /// `kind:model`.
        provider: String,
        /// What was wrong, with a bounded, redacted excerpt.
        message: String,
    },
    /// The HTTP client could not be built.
    #[error("building the HTTP client: {0}")]
    Client(String),
}

/// A `[provider]` section that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (quoted in the message, so not also the source).
        cause: std::io::Error,
    },
    /// The section is invalid (TOML errors carry line and column).
    #[error("{}invalid [provider] configuration: {message}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    Invalid {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// What is wrong.
        message: String,
    },
}

/// Why a run stopped without its loop finishing normally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The core (store) failed.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The provider failed; the history up to here is stored and sendable.
    #[error(transparent)]
    Provider(#[from] ProviderError),
}
