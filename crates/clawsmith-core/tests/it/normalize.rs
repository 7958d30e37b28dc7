//! A3 through the pipeline: whatever an extension returns, the call is closed with the right
//! status, and the version/status trap does not produce error or denied.

use clawsmith_core::ExtensionTool;
use clawsmith_protocol::{ToolExecutionResult, ToolOutput, ToolStatus};
use serde_json::json;

use crate::support::*;

async fn through_pipeline(output: ToolOutput) -> ToolExecutionResult {
    let fixture = Fixture::new();
    let tool = TestTool::answering("ext", output);
    let session = fixture
        .core(|config| {
            config.extension_tools.push(ExtensionTool {
                source: "plugin".into(),
                tool: tool.shared(),
                deferred: false,
            });
        })
        .open_session(None)
        .unwrap();
    let result = one(&session, "ext", "{}").await;
    let messages = session.messages().unwrap();
    assert_history_paired(&messages);
    assert_eq!(
        messages.last().unwrap().tool_status(),
        Some(result.status())
    );
    result
}

#[tokio::test]
async fn text_is_success() {
    let result = through_pipeline(ToolOutput::Text("plain".into())).await;
    assert_status(&result, ToolStatus::Success, None);
    assert_eq!(result.content, "plain");
}

#[tokio::test]
async fn a_valid_result_object_keeps_its_status_and_metadata() {
    let result = through_pipeline(ToolOutput::Json(json!({
        "version": 1, "status": "error", "code": "remote_failed", "retryable": false,
        "content": "Error: the server said no",
        "display": {"kind": "text", "title": "remote"}
    })))
    .await;
    assert_status(&result, ToolStatus::Error, Some("remote_failed"));
    assert_eq!(result.content, "Error: the server said no");
    assert_eq!(
        result.metadata.display.unwrap().title.as_deref(),
        Some("remote")
    );
    let result = through_pipeline(ToolOutput::Result(ToolExecutionResult::success("typed"))).await;
    assert_status(&result, ToolStatus::Success, None);
}

#[tokio::test]
async fn a_plain_object_is_bounded_text() {
    let result = through_pipeline(ToolOutput::Json(json!({"rows": [1, 2, 3]}))).await;
    assert_status(&result, ToolStatus::Success, None);
    assert!(result.content.contains("\"rows\""));
}

#[tokio::test]
async fn version_and_status_without_valid_content_is_not_an_error() {
    for trap in [
        json!({"version": 1, "status": "error"}),
        json!({"version": 1, "status": "denied", "code": "permission_denied"}),
        json!({"version": 1, "status": "denied", "content": {"text": "x"}}),
        json!({"version": 1, "status": "cancelled", "content": null}),
    ] {
        let result = through_pipeline(ToolOutput::Json(trap.clone())).await;
        assert_status(&result, ToolStatus::Success, None);
        assert!(result.content.contains("\"status\""), "{trap}");
    }
}

#[tokio::test]
async fn display_is_redacted_and_bounded() {
    let display = clawsmith_protocol::Display {
        kind: clawsmith_protocol::DisplayKind::Command,
        title: Some("deploy --token=abcdef123456".into()),
        body: Some(format!("password: hunter2\n{}", "x".repeat(100_000))),
        fields: vec![clawsmith_protocol::DisplayField {
            label: "API_KEY".into(),
            value: "k".into(),
        }],
    };
    let mut typed = ToolExecutionResult::success("done");
    typed.metadata.display = Some(display);
    let result = through_pipeline(ToolOutput::Result(typed)).await;
    let display = result.metadata.display.unwrap();
    assert_eq!(display.title.as_deref(), Some("deploy --token=[REDACTED]"));
    let body = display.body.unwrap();
    assert!(body.starts_with("password: [REDACTED]"));
    assert!(body.len() <= clawsmith_protocol::DISPLAY_BODY_MAX_BYTES);
    assert_eq!(display.fields[0].value, "[REDACTED]");
    // The model text is not redacted: the model needs what the tool returned.
    assert_eq!(result.content, "done");
}
