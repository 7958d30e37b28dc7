//! clawsmith-trace against real OTLP/HTTP and OTLP/gRPC receivers on 127.0.0.1 (feature `otlp`).
#![cfg(feature = "otlp")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod grpc;
mod receiver;
mod tls;

use clawsmith_trace::otlp::{OtlpConfig, install};
use std::time::Duration;

use clawsmith_trace::{SpanContext, TraceParent, TraceState, Tracer, semconv};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span as ProtoSpan;

use receiver::Receiver;

pub(crate) fn attribute(span: &ProtoSpan, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(text) => Some(text.clone()),
            Value::IntValue(number) => Some(number.to_string()),
            Value::BoolValue(flag) => Some(flag.to_string()),
            _ => None,
        })
}

#[test]
fn spans_reach_the_collector_as_protobuf_with_parents_attributes_and_events() {
    let receiver = Receiver::start();
    let environment = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base_url()),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret".to_owned()),
        ("OTEL_SERVICE_NAME", "clawsmith-test".to_owned()),
    ];
    let config = OtlpConfig::from_env(|name| {
        environment
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
    })
    .unwrap()
    .unwrap();
    let tracer = install(&config).unwrap();
    let incoming = SpanContext::from_parent(
        TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap(),
        Some(TraceState::parse("rojo=00f067aa0ba902b7").unwrap()),
    );
    let mut turn = tracer.start(Some(&incoming), || semconv::TURN_SPAN.to_owned());
    turn.set_attribute(semconv::CLAWSMITH_TURN_ID, "turn_1".to_owned());
    let mut call = tracer.start(turn.context(), || {
        semconv::execute_tool_span_name("run_command")
    });
    call.set_attribute(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL);
    call.set_attribute(semconv::GEN_AI_TOOL_NAME, "run_command");
    call.add_event(semconv::EVENT_PERMISSION, vec![("decision", "deny".into())]);
    call.set_attribute(semconv::ERROR_TYPE, "permission_denied");
    call.set_error("permission_denied");
    call.end();
    turn.end();
    tracer.flush();

    let requests = receiver.requests();
    assert!(!requests.is_empty(), "the flush posted the spans");
    for request in &requests {
        assert_eq!(request.path, "/v1/traces");
        assert_eq!(
            request.header("content-type").as_deref(),
            Some("application/x-protobuf")
        );
        assert_eq!(request.header("x-api-key").as_deref(), Some("s3cret"));
    }
    let exported = receiver::decode_protobuf(&requests);
    let service = exported.resource_attribute("service.name");
    assert_eq!(service.as_deref(), Some("clawsmith-test"));
    let spans = exported.spans;
    assert_eq!(spans.len(), 2, "{spans:?}");
    let turn = spans
        .iter()
        .find(|span| span.name == "clawsmith.turn")
        .unwrap();
    let call = spans
        .iter()
        .find(|span| span.name == "execute_tool run_command")
        .unwrap();
    assert_eq!(hex(&turn.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(hex(&turn.parent_span_id), "00f067aa0ba902b7");
    assert_eq!(turn.trace_state, "rojo=00f067aa0ba902b7");
    assert_eq!(call.trace_id, turn.trace_id);
    assert_eq!(call.parent_span_id, turn.span_id);
    assert_eq!(
        attribute(turn, semconv::CLAWSMITH_TURN_ID).as_deref(),
        Some("turn_1")
    );
    assert_eq!(
        attribute(call, semconv::GEN_AI_OPERATION_NAME).as_deref(),
        Some("execute_tool")
    );
    assert_eq!(
        attribute(call, semconv::GEN_AI_TOOL_NAME).as_deref(),
        Some("run_command")
    );
    assert_eq!(
        attribute(call, semconv::ERROR_TYPE).as_deref(),
        Some("permission_denied")
    );
    assert_eq!(call.events.len(), 1);
    assert_eq!(call.events[0].name, semconv::EVENT_PERMISSION);
    let status = call.status.as_ref().unwrap();
    assert_eq!(status.code, 2, "STATUS_CODE_ERROR");
    assert_eq!(status.message, "permission_denied");
    assert!(call.end_time_unix_nano >= call.start_time_unix_nano);
}

#[test]
fn http_json_posts_json() {
    let receiver = Receiver::start();
    let config = OtlpConfig::from_env(|name| match name {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => {
            Some(format!("{}/custom/traces", receiver.base_url()))
        }
        "OTEL_EXPORTER_OTLP_PROTOCOL" => Some("http/json".to_owned()),
        _ => None,
    })
    .unwrap()
    .unwrap();
    let tracer = install(&config).unwrap();
    let span = tracer.start(None, || semconv::execute_tool_span_name("read_file"));
    let trace_id = span.context().unwrap().trace_id.to_hex();
    span.end();
    let tally = tracer.finish(Duration::from_secs(5)).unwrap();
    assert_eq!((tally.finished, tally.exported, tally.lost()), (1, 1, 0));
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/custom/traces");
    assert_eq!(
        requests[0].header("content-type").as_deref(),
        Some("application/json")
    );
    let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    let span = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
    assert_eq!(span["name"], "execute_tool read_file");
    assert_eq!(span["traceId"], trace_id.as_str());
    let resource = &body["resourceSpans"][0]["resource"]["attributes"][0];
    assert_eq!(resource["key"], "service.name");
    assert_eq!(resource["value"]["stringValue"], "clawsmith");
}

#[test]
fn an_unreachable_collector_neither_blocks_nor_fails_the_span() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = OtlpConfig::from_env(|name| {
        (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| format!("http://127.0.0.1:{port}"))
    })
    .unwrap()
    .unwrap();
    let tracer = install(&config).unwrap();
    for _ in 0..10 {
        tracer.start(None, || "lost".to_owned()).end();
    }
    tracer.flush();
    assert!(tracer.is_enabled());
    let tally = tracer.finish(Duration::from_secs(5)).unwrap();
    assert_eq!((tally.finished, tally.lost()), (10, 10));
    assert_eq!(Tracer::noop().finish(Duration::from_secs(5)), None);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
