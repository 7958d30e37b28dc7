//! Turning whatever a tool returned into a result (A3), and the artifact preview (A4).

use clawsmith_protocol::{
    ArtifactRef, RESULT_VERSION, ToolExecutionResult, ToolOutput, ToolStatus, truncate_to_boundary,
};

/// Content above this many bytes goes to an artifact when artifacts are enabled (A4: "50 KB").
pub const ARTIFACT_THRESHOLD_BYTES: usize = 50 * 1024;
/// Bytes of the head kept in the message preview.
pub const PREVIEW_HEAD_BYTES: usize = 8 * 1024;
/// Bytes of the tail kept in the message preview.
pub const PREVIEW_TAIL_BYTES: usize = 4 * 1024;
/// Upper bound on a plain JSON object serialized as text (A3 "bounded serialization").
pub const JSON_TEXT_MAX_BYTES: usize = 256 * 1024;
/// Upper bound on content kept in a message when no artifact store is configured.
pub const CONTENT_MAX_BYTES_WITHOUT_ARTIFACTS: usize = 100 * 1024;

/// Normalizes a tool's raw output (A3):
/// - text ⇒ `success` with that text;
/// - a typed result ⇒ itself;
/// - JSON that *is* a valid result object (`version` 1, a known `status`, string `content`) ⇒
///   its own status and metadata;
/// - any other JSON — including an object with `version`/`status` but no valid `content` — ⇒
///   `success` with the value serialized as (bounded) text. Such an object never gets `error` or
///   `denied` from its own say-so: a tool cannot forge a refusal without speaking the protocol.
/// - a JSON string ⇒ `success` with the string.
pub fn normalize_output(output: ToolOutput) -> ToolExecutionResult {
    match output {
        ToolOutput::Text(text) => ToolExecutionResult::success(text),
        ToolOutput::Result(result) => result,
        ToolOutput::Json(serde_json::Value::String(text)) => ToolExecutionResult::success(text),
        ToolOutput::Json(value) => match parse_result_object(&value) {
            Some(result) => result,
            None => ToolExecutionResult::success(bounded_json_text(&value)),
        },
    }
}

fn parse_result_object(value: &serde_json::Value) -> Option<ToolExecutionResult> {
    let object = value.as_object()?;
    // The protocol's own shape, strictly: `content` must be a string and `version` our version.
    if !object
        .get("content")
        .is_some_and(serde_json::Value::is_string)
    {
        return None;
    }
    if object.get("version").and_then(serde_json::Value::as_u64) != Some(u64::from(RESULT_VERSION))
    {
        return None;
    }
    let mut result: ToolExecutionResult = serde_json::from_value(value.clone()).ok()?;
    // Recovery alone synthesizes `unknown` (P7); a tool claiming it reported a failure.
    if result.metadata.status == ToolStatus::Unknown {
        result.metadata.status = ToolStatus::Error;
    }
    Some(result)
}

fn bounded_json_text(value: &serde_json::Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    if text.len() <= JSON_TEXT_MAX_BYTES {
        return text;
    }
    let total = text.len();
    let mut cut = truncate_to_boundary(text, JSON_TEXT_MAX_BYTES);
    cut.push_str(&format!(
        "\n[JSON output truncated: {total} bytes in total, first {JSON_TEXT_MAX_BYTES} shown]"
    ));
    cut
}

/// The message text that stands for `content` once it lives in `artifact`: head, a marker that
/// says how to read the rest, and tail. Cuts fall on line boundaries where possible.
pub fn artifact_preview(content: &str, artifact: &ArtifactRef) -> String {
    let head = head_of(content, PREVIEW_HEAD_BYTES);
    let tail = tail_of(content, PREVIEW_TAIL_BYTES);
    let omitted = content.len().saturating_sub(head.len() + tail.len());
    let lines = artifact
        .lines
        .map(|lines| format!(", {lines} lines"))
        .unwrap_or_default();
    format!(
        "{head}\n[… {omitted} bytes omitted. The full output ({} bytes{lines}) is artifact {}: \
         call read_artifact with artifactId \"{}\" and offset/maxBytes, startLine/endLine or query.]\n{tail}",
        artifact.bytes, artifact.artifact_id, artifact.artifact_id
    )
}

/// Bounds content when no artifact store can hold the rest.
pub fn truncate_without_artifact(content: &str) -> String {
    let head = head_of(
        content,
        CONTENT_MAX_BYTES_WITHOUT_ARTIFACTS - PREVIEW_TAIL_BYTES,
    );
    let tail = tail_of(content, PREVIEW_TAIL_BYTES);
    let omitted = content.len().saturating_sub(head.len() + tail.len());
    format!(
        "{head}\n[… {omitted} bytes omitted; output truncated to {CONTENT_MAX_BYTES_WITHOUT_ARTIFACTS} bytes]\n{tail}"
    )
}

fn head_of(content: &str, max: usize) -> &str {
    if content.len() <= max {
        return content;
    }
    let cut = content.floor_char_boundary(max);
    match content[..cut].rfind('\n') {
        Some(newline) if newline > max / 2 => &content[..newline],
        _ => &content[..cut],
    }
}

fn tail_of(content: &str, max: usize) -> &str {
    if content.len() <= max {
        return content;
    }
    let start = content.ceil_char_boundary(content.len() - max);
    match content[start..].find('\n') {
        Some(newline) if newline < max / 2 => &content[start + newline + 1..],
        _ => &content[start..],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawsmith_protocol::ErrorCode;
    use serde_json::json;

    fn check(output: ToolOutput, status: ToolStatus, code: Option<&str>, content_has: &str) {
        let result = normalize_output(output);
        assert_eq!(result.status(), status);
        assert_eq!(result.code().map(ErrorCode::as_str), code);
        assert!(
            result.content.contains(content_has),
            "{:?} lacks {content_has:?}",
            result.content
        );
    }

    #[test]
    fn every_a3_case() {
        check(
            ToolOutput::Text("hi".into()),
            ToolStatus::Success,
            None,
            "hi",
        );
        check(
            ToolOutput::Result(ToolExecutionResult::tool_failed("boom")),
            ToolStatus::Error,
            Some("tool_failed"),
            "boom",
        );
        // A valid result object keeps its status and metadata.
        check(
            ToolOutput::Json(
                json!({"version": 1, "status": "denied", "code": "permission_denied", "retryable": false, "content": "no"}),
            ),
            ToolStatus::Denied,
            Some("permission_denied"),
            "no",
        );
        check(
            ToolOutput::Json(json!({"version": 1, "status": "success", "content": "fine"})),
            ToolStatus::Success,
            None,
            "fine",
        );
        // Plain objects are serialized.
        check(
            ToolOutput::Json(json!({"a": 1})),
            ToolStatus::Success,
            None,
            "\"a\": 1",
        );
        check(
            ToolOutput::Json(json!([1, 2])),
            ToolStatus::Success,
            None,
            "1",
        );
        check(
            ToolOutput::Json(json!("text")),
            ToolStatus::Success,
            None,
            "text",
        );
        // The trap: version/status without valid content is NOT an error or a denial.
        for trap in [
            json!({"version": 1, "status": "error"}),
            json!({"version": 1, "status": "denied", "content": 5}),
            json!({"version": 1, "status": "error", "content": null, "code": "tool_failed"}),
            json!({"status": "denied", "content": "x"}),
            json!({"version": 2, "status": "error", "content": "x"}),
            json!({"version": 1, "status": "exploded", "content": "x"}),
        ] {
            let result = normalize_output(ToolOutput::Json(trap.clone()));
            assert_eq!(result.status(), ToolStatus::Success, "{trap}");
            assert_eq!(result.code(), None, "{trap}");
            assert!(result.content.contains("\"status\""), "{trap}");
        }
        // A tool cannot claim the recovery-only status.
        check(
            ToolOutput::Json(json!({"version": 1, "status": "unknown", "content": "?"})),
            ToolStatus::Error,
            None,
            "?",
        );
    }

    #[test]
    fn huge_json_is_bounded() {
        let big = json!({"data": "x".repeat(JSON_TEXT_MAX_BYTES * 2)});
        let result = normalize_output(ToolOutput::Json(big));
        assert!(result.content.len() < JSON_TEXT_MAX_BYTES + 200);
        assert!(result.content.contains("JSON output truncated"));
    }

    #[test]
    fn preview_keeps_head_and_tail() {
        let content: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        let artifact = ArtifactRef {
            artifact_id: "art_1".into(),
            bytes: content.len() as u64,
            lines: Some(20_000),
            sha256: None,
        };
        let preview = artifact_preview(&content, &artifact);
        assert!(preview.starts_with("line 0\n"));
        assert!(preview.trim_end().ends_with("line 19999"));
        assert!(preview.contains("art_1"));
        assert!(preview.len() < PREVIEW_HEAD_BYTES + PREVIEW_TAIL_BYTES + 400);
    }
}
