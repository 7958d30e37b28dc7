//! Every wire type survives serialize → deserialize unchanged; old messages infer status (P11).

use clawsmith_protocol::*;
use serde::{Serialize, de::DeserializeOwned};

fn check<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: T) {
    let text = serde_json::to_string(&value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(back, value, "{text}");
}

fn full_result() -> ToolExecutionResult {
    let mut result = ToolExecutionResult::failure(ErrorCode::new("custom_code"), "custom")
        .with_display(
            Display::new(DisplayKind::Json)
                .with_title("t")
                .with_body("{}")
                .with_field("k", "v"),
        );
    result.metadata.artifact = Some(ArtifactRef {
        artifact_id: "a".into(),
        bytes: 1,
        lines: None,
        sha256: Some("00".into()),
    });
    result
}

#[test]
fn results_round_trip() {
    check(ToolExecutionResult::success(""));
    check(full_result());
    check(full_result().summary());
    check(full_result().metadata);
    for kind in [
        DisplayKind::Text,
        DisplayKind::Command,
        DisplayKind::Search,
        DisplayKind::Diff,
        DisplayKind::Artifact,
        DisplayKind::Json,
    ] {
        check(Display::new(kind));
    }
    for status in [
        ToolStatus::Success,
        ToolStatus::Error,
        ToolStatus::Denied,
        ToolStatus::Cancelled,
        ToolStatus::Unknown,
    ] {
        check(status);
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            serde_json::json!(status.as_str())
        );
    }
}

#[test]
fn events_round_trip() {
    let result = full_result();
    let payloads = vec![
        EventPayload::TurnStarted(TurnStarted {
            turn_id: "t".into(),
        }),
        EventPayload::TurnCompleted(TurnCompleted {
            turn_id: "t".into(),
            tool_calls: 3,
        }),
        EventPayload::ModelRequest(ModelRequest {
            request_id: "r".into(),
            turn_id: Some("t".into()),
            tool_names: vec!["read_file".into()],
            tool_schema_sha256: "ab".into(),
            composition: RequestComposition {
                activated_tools: vec!["mcp__x__y".into()],
            },
        }),
        EventPayload::ToolStarted(ToolStarted {
            tool_call_id: "c".into(),
            turn_id: "t".into(),
            tool_name: "n".into(),
            risk: Risk::Execute,
            capabilities: Capability::ALL.to_vec(),
            side_effect: true,
            summary: None,
            tool_schema: Some(serde_json::json!({"type": "object"})),
            batch: None,
            trace_id: None,
            span_id: None,
        }),
        EventPayload::ToolCompleted(ToolCompleted::new("c", "t", "n", &result)),
    ];
    for (index, payload) in payloads.into_iter().enumerate() {
        let kind = payload.kind();
        let event = Event {
            session_id: "s".into(),
            sequence: index as u64 + 1,
            timestamp_ms: 9,
            payload,
        };
        assert_eq!(serde_json::to_value(&event).unwrap()["type"], kind);
        check(event);
    }
}

#[test]
fn messages_round_trip() {
    check(ModelMessage::text(Role::User, "hi"));
    check(ModelMessage::text(Role::System, "sys"));
    check(ModelMessage::assistant_with_calls(
        "",
        vec![ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: "{\"path\":".into(),
        }],
    ));
    check(ModelMessage::tool_result(
        "c1",
        "read_file",
        "x",
        full_result().summary(),
    ));
    check(PermissionDecision {
        verdict: Verdict::Ask,
        reason: "r".into(),
        rule: None,
    });
    check(SearchMetadata {
        aliases: vec!["a".into()],
        tags: vec![],
        search_hint: Some("h".into()),
    });
}

#[test]
fn old_messages_infer_status_from_prefix() {
    // (content, inferred status) — messages without `toolResult` (P11).
    let table = [
        ("file contents", ToolStatus::Success),
        ("", ToolStatus::Success),
        (
            "Error: Path is outside the workspace: ../x",
            ToolStatus::Error,
        ),
        ("error: lowercase too", ToolStatus::Error),
        ("Tool failed: boom", ToolStatus::Error),
        ("Denied: read-only mode", ToolStatus::Denied),
        ("Permission denied by rule", ToolStatus::Denied),
        ("Hook denied: policy", ToolStatus::Denied),
        ("Cancelled: by user", ToolStatus::Cancelled),
        ("Canceled by user", ToolStatus::Cancelled),
        ("Interrupted: process exited", ToolStatus::Unknown),
        ("The Error: is mid-text", ToolStatus::Success),
        ("é", ToolStatus::Success),
    ];
    for (content, expected) in table {
        let old: ModelMessage = serde_json::from_value(serde_json::json!({
            "role": "tool", "content": content, "toolCallId": "c"
        }))
        .unwrap();
        assert_eq!(old.tool_status(), Some(expected), "{content:?}");
    }
    // A structured status wins over the text.
    let new = ModelMessage::tool_result(
        "c",
        "t",
        "Error: looks bad",
        ToolExecutionResult::success("").summary(),
    );
    assert_eq!(new.tool_status(), Some(ToolStatus::Success));
    assert_eq!(
        ModelMessage::text(Role::User, "Error: x").tool_status(),
        None
    );
}

#[test]
fn displays_are_bounded() {
    let display = Display::new(DisplayKind::Text)
        .with_title("t".repeat(10_000))
        .with_body("é".repeat(DISPLAY_BODY_MAX_BYTES))
        .with_field("l".repeat(10_000), "v".repeat(10_000));
    assert!(display.title.as_ref().unwrap().len() <= DISPLAY_TITLE_MAX_BYTES);
    assert!(display.body.as_ref().unwrap().len() <= DISPLAY_BODY_MAX_BYTES);
    assert!(display.body.as_ref().unwrap().ends_with('…'));
    assert!(display.fields[0].label.len() <= DISPLAY_FIELD_MAX_BYTES);
    let mut many = Display::new(DisplayKind::Json);
    for index in 0..100 {
        many = many.with_field("k", index);
    }
    assert_eq!(many.fields.len(), DISPLAY_FIELDS_MAX);
}

#[test]
fn authorization_only_from_allow() {
    let allow = PermissionDecision {
        verdict: Verdict::Allow,
        reason: "full mode".into(),
        rule: None,
    };
    let ask = PermissionDecision {
        verdict: Verdict::Ask,
        ..allow.clone()
    };
    let deny = PermissionDecision {
        verdict: Verdict::Deny,
        ..allow.clone()
    };
    assert!(Authorization::from_decision(&ask).is_none());
    assert!(Authorization::from_decision(&deny).is_none());
    let context = ToolExecutionContext::new("s", "t", "c");
    let refused = context.require_authorization("write_file").unwrap_err();
    assert_eq!(refused.code(), Some(&ErrorCode::PERMISSION_DENIED));
    assert!(
        refused
            .content
            .contains("Tool write_file requires explicit authorization")
    );
    let token = Authorization::from_decision(&allow).unwrap();
    assert_eq!(token.reason(), "full mode");
    assert!(
        context
            .with_authorization(token)
            .require_authorization("write_file")
            .is_ok()
    );
}

#[test]
fn cancellation_wakes_waiters() {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let flag = Arc::new(Flag(Default::default()));
    let waker = Waker::from(flag.clone());
    let signal = CancellationSignal::new();
    let clone = signal.clone();
    let mut future = Box::pin(clone.cancelled());
    assert_eq!(
        future.as_mut().poll(&mut Context::from_waker(&waker)),
        Poll::Pending
    );
    assert!(!signal.is_cancelled());
    signal.cancel();
    assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(
        future.as_mut().poll(&mut Context::from_waker(&waker)),
        Poll::Ready(())
    );
    assert!(clone.is_cancelled());
}

#[test]
fn protocol_schema_names_every_type() {
    let schema = schema::protocol_schema();
    let defs = schema["$defs"].as_object().unwrap();
    for name in [
        "ToolExecutionResult",
        "Event",
        "ModelMessage",
        "Display",
        "ErrorCode",
    ] {
        assert!(
            defs.contains_key(name),
            "missing {name}: {:?}",
            defs.keys().collect::<Vec<_>>()
        );
    }
}
