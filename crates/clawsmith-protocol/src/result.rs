//! Tool results: status, error codes, display projections and artifact references (P4–P8).

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::text::truncate_to_boundary;

/// The result protocol version this crate writes.
pub const RESULT_VERSION: u32 = 1;

/// Upper bound on a display body in bytes; the core bounds it again after redaction.
pub const DISPLAY_BODY_MAX_BYTES: usize = 16 * 1024;
/// Upper bound on a display title in bytes.
pub const DISPLAY_TITLE_MAX_BYTES: usize = 200;
/// Upper bound on the number of display fields.
pub const DISPLAY_FIELDS_MAX: usize = 32;
/// Upper bound on a display field label or value in bytes.
pub const DISPLAY_FIELD_MAX_BYTES: usize = 512;

/// How a call ended (P7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// The call completed and returned an observation (a command's non-zero exit included).
    Success,
    /// A reportable failure of the arguments, the tool or storage.
    Error,
    /// A hook or the permission layer refused; the tool never ran.
    Denied,
    /// Cancellation was observed at the tool boundary.
    Cancelled,
    /// Synthesized by recovery: the call started and has no trusted completion.
    Unknown,
}

impl ToolStatus {
    /// The exact wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Success => "success",
            ToolStatus::Error => "error",
            ToolStatus::Denied => "denied",
            ToolStatus::Cancelled => "cancelled",
            ToolStatus::Unknown => "unknown",
        }
    }
}

/// A machine-readable reason for a non-success status (P6).
///
/// On the wire it is a plain string, as in the mission (`code?: string`), so tools and extensions can
/// add codes; the ones the protocol defines are associated constants.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct ErrorCode(Cow<'static, str>);

impl ErrorCode {
    /// No tool of that name is in the frozen table.
    pub const UNKNOWN_TOOL: ErrorCode = ErrorCode::from_static("unknown_tool");
    /// A deferred tool that `search_tools` has not activated yet.
    pub const INACTIVE_TOOL: ErrorCode = ErrorCode::from_static("inactive_tool");
    /// The same tool call id (or identical call) was already made in this turn.
    pub const DUPLICATE_CALL: ErrorCode = ErrorCode::from_static("duplicate_call");
    /// The arguments string is not valid JSON.
    pub const INVALID_JSON: ErrorCode = ErrorCode::from_static("invalid_json");
    /// The arguments do not match the tool's input schema.
    pub const INVALID_ARGUMENTS: ErrorCode = ErrorCode::from_static("invalid_arguments");
    /// A hook refused the call.
    pub const HOOK_DENIED: ErrorCode = ErrorCode::from_static("hook_denied");
    /// The permission mode or a rule refused the call.
    pub const PERMISSION_DENIED: ErrorCode = ErrorCode::from_static("permission_denied");
    /// The user or the host cancelled the call.
    pub const CANCELLED: ErrorCode = ErrorCode::from_static("cancelled");
    /// The tool itself failed (including a panic).
    pub const TOOL_FAILED: ErrorCode = ErrorCode::from_static("tool_failed");
    /// Recovery closed a call that started and never completed.
    pub const INTERRUPTED: ErrorCode = ErrorCode::from_static("interrupted");
    /// [+] The disaster check refused a command; no approval overrides it.
    pub const COMMAND_BLOCKED: ErrorCode = ErrorCode::from_static("command_blocked");
    /// [+] The platform sandbox is required but the kernel cannot provide it.
    pub const SANDBOX_UNAVAILABLE: ErrorCode = ErrorCode::from_static("sandbox_unavailable");
    /// The call ran past its time limit and was stopped (a command's timeout, an external
    /// tool's deadline); status `error`.
    pub const TIMEOUT: ErrorCode = ErrorCode::from_static("timeout");

    /// A code known at compile time.
    pub const fn from_static(code: &'static str) -> ErrorCode {
        ErrorCode(Cow::Borrowed(code))
    }

    /// A code made at run time (e.g. received from an extension).
    pub fn new(code: impl Into<String>) -> ErrorCode {
        ErrorCode(Cow::Owned(code.into()))
    }

    /// The code's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The status the protocol pairs with this code (P6): `denied` for the two refusals,
    /// `cancelled` for cancellation, `unknown` for interruption, `error` otherwise.
    pub fn status(&self) -> ToolStatus {
        match self.as_str() {
            "hook_denied" | "permission_denied" | "command_blocked" => ToolStatus::Denied,
            "cancelled" => ToolStatus::Cancelled,
            "interrupted" => ToolStatus::Unknown,
            _ => ToolStatus::Error,
        }
    }

    /// Whether the protocol allows a safe retry (P8): only input the model can fix and a deferred
    /// tool it can activate.
    pub fn retryable(&self) -> bool {
        matches!(
            self.as_str(),
            "invalid_json" | "invalid_arguments" | "inactive_tool"
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of UI projection a display is (P5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DisplayKind {
    /// Plain text.
    Text,
    /// A command and its output.
    Command,
    /// Search or glob hits.
    Search,
    /// A unified diff.
    Diff,
    /// A pointer to an artifact (never its body).
    Artifact,
    /// Structured data.
    Json,
}

/// One key/value row of a display.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DisplayField {
    /// Short label, e.g. `exit code`.
    pub label: String,
    /// The value as text.
    pub value: String,
}

/// A projection for CLI and web clients. Never sent to the model (P5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Display {
    /// Which renderer fits.
    pub kind: DisplayKind,
    /// One-line title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Bounded body (see [`DISPLAY_BODY_MAX_BYTES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Key/value facts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<DisplayField>,
}

impl Display {
    /// A display of `kind` with nothing in it yet.
    pub fn new(kind: DisplayKind) -> Display {
        Display {
            kind,
            title: None,
            body: None,
            fields: Vec::new(),
        }
    }

    /// Sets the title (bounded).
    pub fn with_title(mut self, title: impl Into<String>) -> Display {
        self.title = Some(truncate_to_boundary(title.into(), DISPLAY_TITLE_MAX_BYTES));
        self
    }

    /// Sets the body (bounded).
    pub fn with_body(mut self, body: impl Into<String>) -> Display {
        self.body = Some(truncate_to_boundary(body.into(), DISPLAY_BODY_MAX_BYTES));
        self
    }

    /// Adds a key/value row (bounded).
    pub fn with_field(mut self, label: impl Into<String>, value: impl ToString) -> Display {
        if self.fields.len() < DISPLAY_FIELDS_MAX {
            self.fields.push(DisplayField {
                label: truncate_to_boundary(label.into(), DISPLAY_FIELD_MAX_BYTES),
                value: truncate_to_boundary(value.to_string(), DISPLAY_FIELD_MAX_BYTES),
            });
        }
        self
    }

    /// Applies every bound again, e.g. after a field was edited in place.
    pub fn bounded(mut self) -> Display {
        self.title = self
            .title
            .map(|t| truncate_to_boundary(t, DISPLAY_TITLE_MAX_BYTES));
        self.body = self
            .body
            .map(|b| truncate_to_boundary(b, DISPLAY_BODY_MAX_BYTES));
        self.fields.truncate(DISPLAY_FIELDS_MAX);
        for field in &mut self.fields {
            field.label =
                truncate_to_boundary(std::mem::take(&mut field.label), DISPLAY_FIELD_MAX_BYTES);
            field.value =
                truncate_to_boundary(std::mem::take(&mut field.value), DISPLAY_FIELD_MAX_BYTES);
        }
        self
    }
}

/// A reference to content stored outside the message (A4). The body is never copied here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRef {
    /// Opaque id, valid within its session only.
    pub artifact_id: String,
    /// Size of the full content in bytes.
    pub bytes: u64,
    /// Number of lines of the full content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
    /// SHA-256 of the full content, lowercase hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Everything about a result except the model text (P4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMetadata {
    /// Always [`RESULT_VERSION`].
    pub version: u32,
    /// How the call ended.
    pub status: ToolStatus,
    /// Why, when it did not succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    /// Whether a retry is safe (P8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// UI projection, never for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<Display>,
    /// Where the full content went when it was too large for the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactRef>,
}

/// A complete tool result: metadata plus `content`, the text the model sees (P4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecutionResult {
    /// Status, code and projections.
    #[serde(flatten)]
    pub metadata: ToolResultMetadata,
    /// The text the model sees.
    pub content: String,
}

impl ToolExecutionResult {
    /// A successful observation.
    pub fn success(content: impl Into<String>) -> ToolExecutionResult {
        ToolExecutionResult {
            metadata: ToolResultMetadata {
                version: RESULT_VERSION,
                status: ToolStatus::Success,
                code: None,
                retryable: None,
                display: None,
                artifact: None,
            },
            content: content.into(),
        }
    }

    /// A failure with `code`; status and `retryable` follow from the code (P6, P8). The content
    /// is prefixed so that old readers inferring status from text (P11) agree.
    pub fn failure(code: ErrorCode, message: impl AsRef<str>) -> ToolExecutionResult {
        let status = code.status();
        let retryable = code.retryable();
        let content = format!("{}{}", status_prefix(status), message.as_ref());
        ToolExecutionResult {
            metadata: ToolResultMetadata {
                version: RESULT_VERSION,
                status,
                code: Some(code),
                retryable: Some(retryable),
                display: None,
                artifact: None,
            },
            content,
        }
    }

    /// `tool_failed`: the tool ran and reported a failure.
    pub fn tool_failed(message: impl AsRef<str>) -> ToolExecutionResult {
        ToolExecutionResult::failure(ErrorCode::TOOL_FAILED, message)
    }

    /// Attaches a display projection (bounded).
    pub fn with_display(mut self, display: Display) -> ToolExecutionResult {
        self.metadata.display = Some(display.bounded());
        self
    }

    /// The result's status.
    pub fn status(&self) -> ToolStatus {
        self.metadata.status
    }

    /// The result's code, if any.
    pub fn code(&self) -> Option<&ErrorCode> {
        self.metadata.code.as_ref()
    }

    /// The light metadata persisted on the tool message (P10).
    pub fn summary(&self) -> ToolResultSummary {
        ToolResultSummary {
            version: self.metadata.version,
            status: self.metadata.status,
            code: self.metadata.code.clone(),
            retryable: self.metadata.retryable,
            artifact: self.metadata.artifact.clone(),
        }
    }
}

/// The light metadata stored on a tool message as `toolResult` (P10): no display, no content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultSummary {
    /// Always [`RESULT_VERSION`].
    pub version: u32,
    /// How the call ended.
    pub status: ToolStatus,
    /// Why, when it did not succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    /// Whether a retry is safe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// The artifact holding the full content, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactRef>,
}

/// The text prefix a non-success result's content starts with. [`crate::infer_status_from_content`]
/// reads the same prefixes back for messages that predate `toolResult` (P11).
pub fn status_prefix(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Success => "",
        ToolStatus::Error => "Error: ",
        ToolStatus::Denied => "Denied: ",
        ToolStatus::Cancelled => "Cancelled: ",
        ToolStatus::Unknown => "Interrupted: ",
    }
}
