//! The `[provider]` section of `clawsmith.toml`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::ConfigError;

/// Which wire protocol the provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions: OpenAI, vLLM, llama.cpp's server, Ollama, OpenRouter.
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

impl ProviderKind {
    /// `openai` / `anthropic`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

/// Default `max_tokens` per answer.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;
/// Default time for one HTTP attempt, connection to last byte.
pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 600;
/// Default number of retries after the first attempt.
pub const DEFAULT_MAX_RETRIES: u32 = 4;
/// Default first backoff; doubled per retry, at most [`MAX_BACKOFF`].
pub const DEFAULT_RETRY_BASE_MS: u64 = 500;
/// The longest wait between attempts, also the cap on a server's `Retry-After`.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The model provider.
///
/// Inside `[provider]` unknown keys are errors: a misspelled `api_key_env` would otherwise send
/// requests without a key and fail later with a less helpful message.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// `openai` or `anthropic`.
    pub kind: ProviderKind,
    /// e.g. `http://127.0.0.1:11434/v1` or `https://api.anthropic.com/v1`.
    pub base_url: String,
    /// The model name the server knows.
    pub model: String,
    /// The environment variable holding the API key; absent for local servers.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Most tokens per answer.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Time for one attempt, in seconds.
    #[serde(default = "default_timeout")]
    pub request_timeout_secs: u64,
    /// Retries after the first attempt on 429, 5xx, connection errors and cut streams.
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// First backoff in milliseconds (doubled per retry); a `Retry-After` answer wins.
    #[serde(default = "default_retry_base")]
    pub retry_base_ms: u64,
}

fn default_max_tokens() -> u32 {
    DEFAULT_MAX_TOKENS
}
fn default_timeout() -> u64 {
    DEFAULT_REQUEST_TIMEOUT_SECS
}
fn default_retries() -> u32 {
    DEFAULT_MAX_RETRIES
}
fn default_retry_base() -> u64 {
    DEFAULT_RETRY_BASE_MS
}

impl ProviderConfig {
    /// A configuration with the defaults.
    pub fn new(kind: ProviderKind, base_url: &str, model: &str) -> ProviderConfig {
        ProviderConfig {
            kind,
            base_url: base_url.to_owned(),
            model: model.to_owned(),
            api_key_env: None,
            max_tokens: DEFAULT_MAX_TOKENS,
            request_timeout_secs: DEFAULT_REQUEST_TIMEOUT_SECS,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_base_ms: DEFAULT_RETRY_BASE_MS,
        }
    }

    /// The `[provider]` section of the file at `path`; `None` when it has none. Other tables
    /// belong to other readers and are ignored.
    pub fn load(path: &Path) -> Result<Option<ProviderConfig>, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        ProviderConfig::parse(&text, Some(path.to_path_buf()))
    }

    /// The `[provider]` section of TOML text.
    pub fn from_toml_str(text: &str) -> Result<Option<ProviderConfig>, ConfigError> {
        ProviderConfig::parse(text, None)
    }

    fn parse(text: &str, path: Option<PathBuf>) -> Result<Option<ProviderConfig>, ConfigError> {
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            provider: Option<ProviderConfig>,
        }
        let file: File = toml::from_str(text).map_err(|error| ConfigError::Invalid {
            path: path.clone(),
            message: error.to_string(),
        })?;
        let Some(config) = file.provider else {
            return Ok(None);
        };
        config
            .validate()
            .map_err(|message| ConfigError::Invalid { path, message })?;
        Ok(Some(config))
    }

    fn validate(&self) -> Result<(), String> {
        let url = self.base_url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "base_url {:?} must start with http:// or https://",
                self.base_url
            ));
        }
        if self.model.trim().is_empty() {
            return Err("model must not be empty".to_owned());
        }
        if let Some(variable) = &self.api_key_env
            && (variable.is_empty() || variable.contains('='))
        {
            return Err(format!(
                "api_key_env {variable:?} must name an environment variable"
            ));
        }
        for (key, value) in [
            ("max_tokens", u64::from(self.max_tokens)),
            ("request_timeout_secs", self.request_timeout_secs),
        ] {
            if value == 0 {
                return Err(format!("{key} must be at least 1"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<Option<(&str, &str)>, &str>) {
        let parsed = ProviderConfig::from_toml_str(text);
        match (parsed, expected) {
            (Ok(Some(config)), Ok(Some((kind, model)))) => {
                assert_eq!(config.kind.as_str(), kind, "{text}");
                assert_eq!(config.model, model, "{text}");
            }
            (Ok(None), Ok(None)) => {}
            (Err(error), Err(fragment)) => {
                assert!(error.to_string().contains(fragment), "{text}: {error}");
            }
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn sections() {
        check("", Ok(None));
        check("[[mcp_servers]]\nname = \"x\"\ncommand = \"y\"\n", Ok(None));
        check(
            "[provider]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"qwen3-coder\"\n",
            Ok(Some(("openai", "qwen3-coder"))),
        );
        check(
            "[provider]\nkind = \"anthropic\"\nbase_url = \"https://api.anthropic.com/v1\"\nmodel = \"m\"\napi_key_env = \"ANTHROPIC_API_KEY\"\nmax_tokens = 100\n",
            Ok(Some(("anthropic", "m"))),
        );
        check(
            "[provider]\nkind = \"gemini\"\nbase_url = \"http://x\"\nmodel = \"m\"\n",
            Err("line 2, column 8"),
        );
        check(
            "[provider]\nkind = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\napi_key = \"sk-1\"\n",
            Err("unknown field `api_key`"),
        );
        check(
            "[provider]\nkind = \"openai\"\nbase_url = \"ftp://x\"\nmodel = \"m\"\n",
            Err("must start with http:// or https://"),
        );
        check(
            "[provider]\nkind = \"openai\"\nbase_url = \"http://x\"\nmodel = \" \"\n",
            Err("model must not be empty"),
        );
        check(
            "[provider]\nkind = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\nmax_tokens = 0\n",
            Err("max_tokens must be at least 1"),
        );
    }
}
