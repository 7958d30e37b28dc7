//! Golden JSON: the exact shapes clients depend on.

use clawsmith_protocol::*;
use serde_json::json;

fn check(value: impl serde::Serialize, expected: serde_json::Value) {
    let actual = serde_json::to_value(value).unwrap();
    assert_eq!(
        actual, expected,
        "\nactual:   {actual}\nexpected: {expected}"
    );
}

#[test]
fn success_with_diff_display() {
    let result = ToolExecutionResult::success("Edited src/a.rs (1 replacement).").with_display(
        Display::new(DisplayKind::Diff)
            .with_title("src/a.rs")
            .with_body("--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-old\n+new\n")
            .with_field("added", 1)
            .with_field("removed", 1),
    );
    check(
        result,
        json!({
            "version": 1,
            "status": "success",
            "display": {
                "kind": "diff",
                "title": "src/a.rs",
                "body": "--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-old\n+new\n",
                "fields": [{"label": "added", "value": "1"}, {"label": "removed", "value": "1"}]
            },
            "content": "Edited src/a.rs (1 replacement)."
        }),
    );
}

#[test]
fn invalid_json_is_retryable_error() {
    check(
        ToolExecutionResult::failure(ErrorCode::INVALID_JSON, "arguments are not valid JSON"),
        json!({
            "version": 1, "status": "error", "code": "invalid_json", "retryable": true,
            "content": "Error: arguments are not valid JSON"
        }),
    );
}

#[test]
fn permission_denied_is_denied_not_retryable() {
    check(
        ToolExecutionResult::failure(ErrorCode::PERMISSION_DENIED, "read-only mode"),
        json!({
            "version": 1, "status": "denied", "code": "permission_denied", "retryable": false,
            "content": "Denied: read-only mode"
        }),
    );
}

#[test]
fn interrupted_is_unknown() {
    check(
        ToolExecutionResult::failure(
            ErrorCode::INTERRUPTED,
            "the runtime stopped during the call",
        ),
        json!({
            "version": 1, "status": "unknown", "code": "interrupted", "retryable": false,
            "content": "Interrupted: the runtime stopped during the call"
        }),
    );
}

#[test]
fn every_protocol_code_has_its_status_and_retryability() {
    // (code, status, retryable) — P6 and P8.
    let table = [
        (ErrorCode::UNKNOWN_TOOL, "error", false),
        (ErrorCode::INACTIVE_TOOL, "error", true),
        (ErrorCode::DUPLICATE_CALL, "error", false),
        (ErrorCode::INVALID_JSON, "error", true),
        (ErrorCode::INVALID_ARGUMENTS, "error", true),
        (ErrorCode::HOOK_DENIED, "denied", false),
        (ErrorCode::PERMISSION_DENIED, "denied", false),
        (ErrorCode::CANCELLED, "cancelled", false),
        (ErrorCode::TOOL_FAILED, "error", false),
        (ErrorCode::INTERRUPTED, "unknown", false),
        (ErrorCode::COMMAND_BLOCKED, "denied", false),
        (ErrorCode::SANDBOX_UNAVAILABLE, "error", false),
    ];
    for (code, status, retryable) in table {
        let result = ToolExecutionResult::failure(code.clone(), "x");
        assert_eq!(result.status().as_str(), status, "{code}");
        assert_eq!(result.metadata.retryable, Some(retryable), "{code}");
        // Old readers infer the same status from the text (P11).
        assert_eq!(
            infer_status_from_content(&result.content).as_str(),
            status,
            "{code}"
        );
    }
}

#[test]
fn tool_started_event() {
    let event = Event {
        session_id: "s1".into(),
        sequence: 7,
        timestamp_ms: 1_700_000_000_000,
        payload: EventPayload::ToolStarted(ToolStarted {
            tool_call_id: "c1".into(),
            turn_id: "t1".into(),
            tool_name: "edit_file".into(),
            risk: Risk::WorkspaceWrite,
            capabilities: vec![Capability::FilesystemRead, Capability::FilesystemWrite],
            side_effect: true,
            summary: Some("edit src/a.rs".into()),
            tool_schema: None,
            batch: Some(BatchInfo {
                index: 0,
                size: 1,
                parallel: false,
            }),
            trace_id: None,
            span_id: None,
        }),
    };
    check(
        event,
        json!({
            "sessionId": "s1", "sequence": 7, "timestampMs": 1_700_000_000_000u64,
            "type": "tool.started", "toolCallId": "c1", "turnId": "t1", "toolName": "edit_file",
            "risk": "workspace-write", "capabilities": ["filesystem.read", "filesystem.write"],
            "sideEffect": true, "summary": "edit src/a.rs",
            "batch": {"index": 0, "size": 1, "parallel": false}
        }),
    );
}

#[test]
fn tool_completed_event_with_legacy_fields() {
    let mut result = ToolExecutionResult::success("head…tail");
    result.metadata.artifact = Some(ArtifactRef {
        artifact_id: "a1".into(),
        bytes: 200_000,
        lines: Some(4000),
        sha256: None,
    });
    let event = Event {
        session_id: "s1".into(),
        sequence: 8,
        timestamp_ms: 5,
        payload: EventPayload::ToolCompleted(ToolCompleted::new(
            "c1",
            "t1",
            "run_command",
            &result,
        )),
    };
    let artifact = json!({"artifactId": "a1", "bytes": 200_000, "lines": 4000});
    check(
        event,
        json!({
            "sessionId": "s1", "sequence": 8, "timestampMs": 5,
            "type": "tool.completed", "toolCallId": "c1", "turnId": "t1", "toolName": "run_command",
            "result": {"version": 1, "status": "success", "artifact": artifact},
            "status": "success", "output": "head…tail", "artifact": artifact
        }),
    );
}

#[test]
fn tool_message_carries_light_metadata() {
    let result = ToolExecutionResult::failure(ErrorCode::HOOK_DENIED, "blocked by policy hook")
        .with_display(Display::new(DisplayKind::Text).with_body("not for the model"));
    let message =
        ModelMessage::tool_result("c1", "write_file", result.content.clone(), result.summary());
    check(
        message,
        json!({
            "role": "tool", "content": "Denied: blocked by policy hook", "toolCallId": "c1",
            "toolName": "write_file",
            "toolResult": {"version": 1, "status": "denied", "code": "hook_denied", "retryable": false}
        }),
    );
}

#[test]
fn wire_strings_of_risk_and_capabilities() {
    check(Risk::ALL, json!(["read", "workspace-write", "execute"]));
    check(
        Capability::ALL,
        json!([
            "filesystem.read",
            "filesystem.write",
            "process.execute",
            "network",
            "credentials",
            "external.side-effect",
            "session.read",
            "session.write",
            "agent.delegate"
        ]),
    );
    assert!(Risk::Read < Risk::WorkspaceWrite && Risk::WorkspaceWrite < Risk::Execute);
    for capability in Capability::ALL {
        assert_eq!(Capability::parse(capability.as_str()), Some(capability));
        assert_eq!(
            serde_json::to_value(capability).unwrap(),
            json!(capability.as_str())
        );
    }
    for bad in ["Network", " network", "filesystem", "filesystem_read", ""] {
        assert_eq!(Capability::parse(bad), None, "{bad:?}");
    }
}
