//! Traces: a span per turn, `execute_tool {tool}` per call as its child, refused calls
//! included, and the ids on `tool.started`/`tool.completed`.

use std::sync::Arc;

use clawsmith_core::{BatchOptions, CollectingSink, TurnOptions};
use clawsmith_protocol::EventPayload;
use clawsmith_trace::{
    FinishedSpan, MemorySink, SpanContext, SpanStatus, TraceParent, Tracer, semconv,
};

use crate::support::*;

const INCOMING: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn attribute(span: &FinishedSpan, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, value)| match value {
            clawsmith_trace::AttributeValue::String(text) => text.to_string(),
            other => format!("{other:?}"),
        })
}

fn event<'s>(span: &'s FinishedSpan, name: &str) -> Option<&'s clawsmith_trace::SpanEvent> {
    span.events.iter().find(|event| event.name == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_a_parallel_batch_and_refusals_gives_one_span_per_call_under_the_turn() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    fixture.write("b.txt", "beta\n");
    let sink = Arc::new(MemorySink::default());
    let core = fixture.core(|config| {
        config.tracer = Tracer::new(sink.clone());
        config.trace_parent = Some(SpanContext::from_parent(
            TraceParent::parse(INCOMING).unwrap(),
            None,
        ));
    });
    let session = core.open_session(None).unwrap();
    let events = CollectingSink::new();
    let mut turn = session.begin_turn(&events, TurnOptions::default()).unwrap();
    let turn_id = turn.id().to_owned();
    let reads = vec![
        call("r1", "read_file", r#"{"path": "a.txt"}"#),
        call("r2", "read_file", r#"{"path": "b.txt"}"#),
    ];
    turn.run_batch(reads, &events, BatchOptions::default())
        .await
        .unwrap();
    let refused = vec![
        // `ask` mode with no approver: a write is refused by the permission step.
        call("w1", "write_file", r#"{"path": "c.txt", "content": "x"}"#),
        call("u1", "no_such_tool", "{}"),
    ];
    turn.run_batch(refused, &events, BatchOptions::default())
        .await
        .unwrap();
    turn.finish(&events).unwrap();

    let spans = sink.spans();
    assert_eq!(spans.len(), 5, "{spans:#?}");
    let turn_span = spans
        .iter()
        .find(|span| span.name == semconv::TURN_SPAN)
        .unwrap();
    assert_eq!(
        turn_span.context.trace_id.to_hex(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(
        turn_span.parent_span_id.unwrap().to_hex(),
        "00f067aa0ba902b7"
    );
    assert_eq!(
        attribute(turn_span, semconv::CLAWSMITH_TURN_ID).as_deref(),
        Some(turn_id.as_str())
    );
    let by_call = |id: &str| {
        spans
            .iter()
            .find(|span| attribute(span, semconv::GEN_AI_TOOL_CALL_ID).as_deref() == Some(id))
            .unwrap()
    };
    for id in ["r1", "r2", "w1", "u1"] {
        let span = by_call(id);
        assert_eq!(
            span.parent_span_id,
            Some(turn_span.context.span_id),
            "{id} is a child of the turn"
        );
        assert_eq!(span.context.trace_id, turn_span.context.trace_id);
        assert_eq!(
            attribute(span, semconv::GEN_AI_OPERATION_NAME).as_deref(),
            Some("execute_tool")
        );
        assert_eq!(
            attribute(span, semconv::GEN_AI_CONVERSATION_ID).as_deref(),
            Some(session.id())
        );
        assert_eq!(
            attribute(span, semconv::CLAWSMITH_TURN_ID).as_deref(),
            Some(turn_id.as_str())
        );
    }
    let read = by_call("r1");
    assert_eq!(read.name, "execute_tool read_file");
    assert_eq!(
        attribute(read, semconv::GEN_AI_TOOL_NAME).as_deref(),
        Some("read_file")
    );
    assert_eq!(
        attribute(read, semconv::GEN_AI_TOOL_TYPE).as_deref(),
        Some("function")
    );
    assert_eq!(
        attribute(read, semconv::CLAWSMITH_RISK).as_deref(),
        Some("read")
    );
    assert_eq!(
        attribute(read, semconv::CLAWSMITH_STATUS).as_deref(),
        Some("success")
    );
    assert_eq!(attribute(read, semconv::ERROR_TYPE), None);
    assert_eq!(read.status, SpanStatus::Unset);
    let permission = event(read, semconv::EVENT_PERMISSION).unwrap();
    assert_eq!(
        permission.attributes,
        vec![("verdict", "allow".to_owned().into())]
    );

    let write = by_call("w1");
    assert_eq!(write.name, "execute_tool write_file");
    assert_eq!(
        attribute(write, semconv::CLAWSMITH_CODE).as_deref(),
        Some("permission_denied")
    );
    assert_eq!(
        attribute(write, semconv::ERROR_TYPE).as_deref(),
        Some("permission_denied")
    );
    assert_eq!(
        write.status,
        SpanStatus::Error("permission_denied".to_owned())
    );
    assert!(event(write, semconv::EVENT_VALIDATION).is_some());
    assert!(event(write, semconv::EVENT_PERMISSION).is_some());

    let unknown = by_call("u1");
    assert_eq!(unknown.name, "execute_tool no_such_tool");
    assert_eq!(
        attribute(unknown, semconv::ERROR_TYPE).as_deref(),
        Some("unknown_tool")
    );
    let validation = event(unknown, semconv::EVENT_VALIDATION).unwrap();
    assert_eq!(validation.attributes[0], ("outcome", "refused".into()));
    assert_eq!(
        validation.attributes[1],
        ("code", "unknown_tool".to_owned().into())
    );
    assert!(
        event(unknown, semconv::EVENT_PERMISSION).is_none(),
        "refused before the permission step"
    );

    // The stored history names the spans.
    for stored in events.events() {
        let (call_id, trace_id, span_id) = match &stored.payload {
            EventPayload::ToolStarted(started) => {
                (&started.tool_call_id, &started.trace_id, &started.span_id)
            }
            EventPayload::ToolCompleted(done) => {
                (&done.tool_call_id, &done.trace_id, &done.span_id)
            }
            _ => continue,
        };
        let span = by_call(call_id);
        assert_eq!(
            trace_id.as_deref(),
            Some(span.context.trace_id.to_hex().as_str()),
            "{call_id}"
        );
        assert_eq!(
            span_id.as_deref(),
            Some(span.context.span_id.to_hex().as_str()),
            "{call_id}"
        );
    }
    let json = serde_json::to_value(events.events()).unwrap();
    assert!(json.to_string().contains("\"traceId\""));
}

#[tokio::test]
async fn without_a_tracer_nothing_is_recorded_and_events_carry_no_ids() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    let core = fixture.core(|_| {});
    let session = core.open_session(None).unwrap();
    let (_, events) = turn(
        &session,
        vec![call("r1", "read_file", r#"{"path": "a.txt"}"#)],
    )
    .await;
    let json = serde_json::to_string(&events).unwrap();
    assert!(
        !json.contains("traceId") && !json.contains("spanId"),
        "{json}"
    );
}
