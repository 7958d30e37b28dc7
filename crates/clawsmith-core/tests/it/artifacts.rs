//! A4 and `read_artifact`: a 200 KB output is stored once, previewed, readable by byte range,
//! line range and keyword, and unreadable from another session.

use clawsmith_core::ExtensionTool;
use clawsmith_protocol::{EventPayload, ToolOutput, ToolStatus};

use crate::support::*;

fn big_output() -> String {
    // 200 KB of numbered lines, with a needle in the middle.
    let mut text = String::new();
    let mut line = 0;
    while text.len() < 200 * 1024 {
        line += 1;
        if line == 1500 {
            text.push_str("line 1500: the NEEDLE is here\n");
        } else {
            text.push_str(&format!(
                "line {line}: {}\n",
                "lorem ipsum dolor sit amet ".repeat(4)
            ));
        }
    }
    text
}

#[tokio::test]
async fn large_output_goes_to_one_artifact_referenced_three_times() {
    let fixture = Fixture::new();
    let output = big_output();
    let tool = TestTool::answering("dump", ToolOutput::Text(output.clone()));
    let core = fixture.core(|config| {
        config.extension_tools.push(ExtensionTool {
            source: "test".into(),
            tool: tool.shared(),
            deferred: false,
        });
    });
    let session = core.open_session(None).unwrap();
    let (results, events) = turn(&session, vec![call("c1", "dump", "{}")]).await;
    let result = &results[0].1;
    assert_status(result, ToolStatus::Success, None);
    let artifact = result.metadata.artifact.clone().expect("artifact");
    assert_eq!(artifact.bytes, output.len() as u64);
    // Preview: head and tail, far smaller than the output.
    assert!(result.content.len() < 16 * 1024);
    assert!(result.content.starts_with("line 1: "));
    assert!(
        result
            .content
            .trim_end()
            .ends_with(output.trim_end().lines().last().unwrap())
    );
    assert!(result.content.contains(&artifact.artifact_id));
    // The same reference in the three places (A4).
    let done = completed(&events)[0];
    assert_eq!(done.artifact.as_ref(), Some(&artifact));
    assert_eq!(done.result.artifact.as_ref(), Some(&artifact));
    let message = session.messages().unwrap().pop().unwrap();
    assert_eq!(
        message.tool_result.unwrap().artifact.as_ref(),
        Some(&artifact)
    );
    assert_eq!(message.content, result.content);
    // Display never carries the body.
    let display = done.result.display.clone().unwrap();
    assert!(display.body.is_none());
    // Stored once, whole.
    let stored = fixture
        .store
        .read_artifact(session.id(), &artifact.artifact_id)
        .unwrap()
        .unwrap();
    assert_eq!(stored, output.as_bytes());
    let id = artifact.artifact_id.clone();

    // Byte range.
    let read = one(
        &session,
        "read_artifact",
        &format!(r#"{{"artifactId": "{id}", "offset": 100000, "maxBytes": 1000}}"#),
    )
    .await;
    assert_status(&read, ToolStatus::Success, None);
    let body = read.content.split_once('\n').unwrap().1;
    assert_eq!(body, &output[100_000..101_000]);
    // Line range.
    let read = one(
        &session,
        "read_artifact",
        &format!(r#"{{"artifactId": "{id}", "startLine": 10, "endLine": 12}}"#),
    )
    .await;
    let lines: Vec<&str> = read.content.lines().skip(1).collect();
    assert_eq!(lines, output.lines().skip(9).take(3).collect::<Vec<_>>());
    // Keyword.
    let read = one(
        &session,
        "read_artifact",
        &format!(r#"{{"artifactId": "{id}", "query": "needle"}}"#),
    )
    .await;
    assert!(
        read.content.contains("1500: line 1500: the NEEDLE is here"),
        "{}",
        read.content
    );
    assert!(read.content.starts_with("1 matching lines"));
    // Bad input is refused by the schema: no host paths, bounded sizes.
    let read = one(
        &session,
        "read_artifact",
        r#"{"artifactId": "x", "path": "/etc/passwd"}"#,
    )
    .await;
    assert_status(&read, ToolStatus::Error, Some("invalid_arguments"));
    let read = one(
        &session,
        "read_artifact",
        &format!(r#"{{"artifactId": "{id}", "maxBytes": 10000000}}"#),
    )
    .await;
    assert_status(&read, ToolStatus::Error, Some("invalid_arguments"));

    // Another session of the same store cannot read it.
    let other = core.open_session(None).unwrap();
    let read = one(
        &other,
        "read_artifact",
        &format!(r#"{{"artifactId": "{id}"}}"#),
    )
    .await;
    assert_status(&read, ToolStatus::Error, Some("artifact_not_found"));
    assert!(!read.content.contains("NEEDLE"));
    let kinds = events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::ToolCompleted(_)))
        .count();
    assert_eq!(kinds, 1);
}

#[tokio::test]
async fn small_output_has_no_artifact_and_without_store_large_output_is_truncated() {
    let fixture = Fixture::new();
    let tool = TestTool::answering("dump", ToolOutput::Text(big_output()));
    let small = TestTool::answering("small", ToolOutput::Text("short".into()));
    let core = fixture.core(|config| {
        config.artifacts_enabled = false;
        for tool in [tool, small] {
            config.extension_tools.push(ExtensionTool {
                source: "test".into(),
                tool: tool.shared(),
                deferred: false,
            });
        }
    });
    assert!(core.tools().get("read_artifact").is_none());
    let session = core.open_session(None).unwrap();
    let result = one(&session, "small", "{}").await;
    assert!(result.metadata.artifact.is_none());
    let result = one(&session, "dump", "{}").await;
    assert!(result.metadata.artifact.is_none());
    assert!(result.content.len() < 110 * 1024);
    assert!(result.content.contains("output truncated"));
}
