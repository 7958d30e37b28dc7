//! Traces through the binary: `call` under a caller's TRACEPARENT exports its spans as OTLP
//! http/json and over gRPC to receivers on 127.0.0.1; `clawsmith mcp` takes `_meta.traceparent`
//! per call; bad settings stop the start.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::Server;
use crate::{Fixture, Run, run_binary_with};

const INCOMING: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Accepts connections on 127.0.0.1 and sends each request body on the channel.
fn receiver() -> (String, mpsc::Receiver<Vec<u8>>) {
    receiver_answering(Duration::ZERO)
}

/// [`receiver`] that answers each request `delay` after reading it.
fn receiver_answering(delay: Duration) -> (String, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (sender, bodies) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let sender = sender.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        let mut body = vec![0; length];
                        reader.read_exact(&mut body).unwrap();
                        let _ = sender.send(body);
                        std::thread::sleep(delay);
                        let _ = reader
                            .get_mut()
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                        length = 0;
                    }
                }
            });
        }
    });
    (url, bodies)
}

/// The spans of every http/json request received so far (waiting up to 5 s for each next
/// request until `expected` spans came).
fn spans_received(bodies: &mpsc::Receiver<Vec<u8>>, expected: usize) -> Vec<Value> {
    let mut spans: Vec<Value> = Vec::new();
    while spans.len() < expected {
        let Ok(body) = bodies.recv_timeout(Duration::from_secs(5)) else {
            break;
        };
        let request: Value = serde_json::from_slice(&body).unwrap();
        for resource in request["resourceSpans"].as_array().unwrap() {
            for scope in resource["scopeSpans"].as_array().unwrap() {
                spans.extend(scope["spans"].as_array().unwrap().iter().cloned());
            }
        }
    }
    spans
}

/// The spans of the requests received so far, without waiting (the process has exited).
fn spans_already_received(bodies: &mpsc::Receiver<Vec<u8>>) -> Vec<Value> {
    bodies
        .try_iter()
        .flat_map(|body| {
            let request: Value = serde_json::from_slice(&body).unwrap();
            request["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .unwrap()
                .clone()
        })
        .collect()
}

fn span<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans
        .iter()
        .find(|span| span["name"] == name)
        .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
}

fn attribute<'a>(span: &'a Value, key: &str) -> &'a Value {
    span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|attribute| attribute["key"] == key)
        .map_or(&Value::Null, |attribute| &attribute["value"])
}

/// `clawsmith call [FLAGS] TOOL ARGUMENTS` in the fixture's workspace, with only the trace
/// variables of `env` (the test process's own TRACEPARENT/TRACESTATE are removed).
fn call(fixture: &Fixture, call: &[&str], env: &[(&str, &str)]) -> Run {
    let state = fixture.state();
    let ws = fixture.ws();
    let mut args = vec![
        "--state-dir",
        state.to_str().unwrap(),
        "call",
        "--workspace",
        ws.to_str().unwrap(),
    ];
    args.extend_from_slice(call);
    run_binary_with(&args, "", |command| {
        command.env_remove("TRACEPARENT").env_remove("TRACESTATE");
        command.envs(env.iter().copied());
    })
}

#[test]
fn call_exports_its_turn_and_call_spans_under_the_callers_traceparent() {
    let fixture = Fixture::new();
    let (url, bodies) = receiver();
    let run = call(
        &fixture,
        &["read_file", r#"{"path": "a.txt"}"#],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &url),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("TRACEPARENT", INCOMING),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let spans = spans_received(&bodies, 2);
    let names: Vec<&str> = spans
        .iter()
        .map(|span| span["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"clawsmith.turn") && names.contains(&"execute_tool read_file"),
        "{names:?}"
    );
    let turn = span(&spans, "clawsmith.turn");
    let call = span(&spans, "execute_tool read_file");
    assert_eq!(turn["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(turn["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(call["traceId"], turn["traceId"]);
    assert_eq!(call["parentSpanId"], turn["spanId"]);
}

/// A gRPC OTLP receiver (tonic's server, on a runtime the test keeps): each Export request is
/// sent on the channel with its `x-api-key` metadata.
type GrpcExport = (
    Option<String>,
    opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
);

struct GrpcReceiver(mpsc::Sender<GrpcExport>);

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService
    for GrpcReceiver
{
    async fn export(
        &self,
        request: tonic::Request<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
        >,
    ) -> Result<
        tonic::Response<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse,
        >,
        tonic::Status,
    > {
        let key = request
            .metadata()
            .get("x-api-key")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let _ = self.0.send((key, request.into_inner()));
        Ok(tonic::Response::new(Default::default()))
    }
}

fn grpc_receiver() -> (String, mpsc::Receiver<GrpcExport>, tokio::runtime::Runtime) {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (sender, exports) = mpsc::channel();
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        tonic::transport::Server::builder()
            .serve_with_incoming(
                TraceServiceServer::new(GrpcReceiver(sender)),
                tonic::transport::server::TcpIncoming::from(listener),
            )
            .await
            .unwrap();
    });
    (url, exports, runtime)
}

#[test]
fn call_exports_over_grpc_when_asked() {
    let fixture = Fixture::new();
    let (url, exports, _runtime) = grpc_receiver();
    let run = call(
        &fixture,
        &["read_file", r#"{"path": "a.txt"}"#],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &url),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret"),
            ("TRACEPARENT", INCOMING),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("not exported"), "{}", run.stderr);
    // The exit flush returned, so every export was answered: they are all on the channel.
    let mut spans = Vec::new();
    for (key, request) in exports.try_iter() {
        assert_eq!(key.as_deref(), Some("s3cret"));
        for resource in request.resource_spans {
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
    }
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let turn = spans
        .iter()
        .find(|span| span.name == "clawsmith.turn")
        .unwrap_or_else(|| panic!("{names:?}"));
    let call = spans
        .iter()
        .find(|span| span.name == "execute_tool read_file")
        .unwrap_or_else(|| panic!("{names:?}"));
    let hex = |bytes: &[u8]| -> String { bytes.iter().map(|b| format!("{b:02x}")).collect() };
    assert_eq!(hex(&turn.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(hex(&turn.parent_span_id), "00f067aa0ba902b7");
    assert_eq!(call.trace_id, turn.trace_id);
    assert_eq!(call.parent_span_id, turn.span_id);
    let tool = call
        .attributes
        .iter()
        .find(|kv| kv.key == "gen_ai.tool.name")
        .and_then(|kv| kv.value.clone()?.value);
    assert_eq!(
        tool,
        Some(
            opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(
                "read_file".into()
            )
        )
    );
}

/// `clawsmith call run_command` printing the command's `TRACEPARENT`, with `env` set.
fn command_traceparent(fixture: &Fixture, env: &[(&str, &str)]) -> String {
    let run = call(
        fixture,
        &[
            "--mode",
            "full",
            "run_command",
            r#"{"command": "echo \"${TRACEPARENT:-unset}\""}"#,
        ],
        env,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let result: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(result["status"], "success", "{result}");
    let content = result["content"].as_str().unwrap();
    content
        .lines()
        .find(|line| line.starts_with("00-") || *line == "unset")
        .unwrap_or_else(|| panic!("no TRACEPARENT line in {content}"))
        .to_owned()
}

#[test]
fn a_command_sees_its_calls_span_as_traceparent() {
    let fixture = Fixture::new();
    let (url, bodies) = receiver();
    let seen = command_traceparent(
        &fixture,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &url),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("TRACEPARENT", INCOMING),
        ],
    );
    let spans = spans_received(&bodies, 2);
    let call = span(&spans, "execute_tool run_command");
    let expected = format!(
        "00-{}-{}-01",
        call["traceId"].as_str().unwrap(),
        call["spanId"].as_str().unwrap()
    );
    assert_eq!(seen, expected);
    assert_eq!(call["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");

    // Not recording, a caller's TRACEPARENT is handed on unchanged (W3C: a participant that
    // does not trace forwards its parent); with neither, the command gets none, even though
    // clawsmith's own environment is passed down to the sandbox.
    assert_eq!(
        command_traceparent(&fixture, &[("TRACEPARENT", INCOMING)]),
        INCOMING
    );
    assert_eq!(command_traceparent(&fixture, &[]), "unset");
}

#[test]
fn the_traceparent_flag_wins_over_the_variable() {
    let fixture = Fixture::new();
    let (url, bodies) = receiver();
    let flag = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let run = call(
        &fixture,
        &["--traceparent", flag, "read_file", r#"{"path": "a.txt"}"#],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &url),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("TRACEPARENT", INCOMING),
            ("TRACESTATE", "rojo=1"),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let spans = spans_received(&bodies, 2);
    let turn = span(&spans, "clawsmith.turn");
    assert_eq!(turn["traceId"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(turn["parentSpanId"], "b7ad6b7169203331");
    // The variable's tracestate went with the variable's trace.
    assert!(
        turn["traceState"].as_str().unwrap_or_default().is_empty(),
        "{turn}"
    );
}

#[test]
fn a_malformed_traceparent_flag_is_a_usage_error() {
    let fixture = Fixture::new();
    for value in [
        "00-xyz",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
    ] {
        let run = call(
            &fixture,
            &["--traceparent", value, "read_file", r#"{"path": "a.txt"}"#],
            &[],
        );
        assert_eq!(run.code, 2, "{value}: {}", run.stderr);
        for expected in [
            "--traceparent",
            "a W3C traceparent is 00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>",
        ] {
            assert!(run.stderr.contains(expected), "{value}: {}", run.stderr);
        }
        assert!(run.stdout.is_empty(), "no call ran: {}", run.stdout);
    }
}

#[test]
fn spans_are_flushed_at_exit_to_a_slow_collector() {
    let fixture = Fixture::new();
    // Each export is answered a second after it arrived: `call` waits for the answers.
    let (url, bodies) = receiver_answering(Duration::from_secs(1));
    let run = call(
        &fixture,
        &["read_file", r#"{"path": "a.txt"}"#],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &url),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("not exported"), "{}", run.stderr);
    let spans = spans_already_received(&bodies);
    let mut names: Vec<&str> = spans
        .iter()
        .map(|span| span["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["clawsmith.turn", "execute_tool read_file"]);
}

#[test]
fn turn_flushes_every_span_of_its_batch_at_exit() {
    let fixture = Fixture::new();
    let (url, bodies) = receiver_answering(Duration::from_millis(500));
    let state = fixture.state();
    let ws = fixture.ws();
    let calls = json!([
        {"id": "c1", "name": "read_file", "arguments": "{\"path\": \"a.txt\"}"},
        {"id": "c2", "name": "read_file", "arguments": "{\"path\": \"b.txt\"}"},
    ]);
    let run = run_binary_with(
        &[
            "--state-dir",
            state.to_str().unwrap(),
            "turn",
            "--workspace",
            ws.to_str().unwrap(),
        ],
        &calls.to_string(),
        |command| {
            command
                .env_remove("TRACEPARENT")
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", &url)
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
        },
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("not exported"), "{}", run.stderr);
    // Everything arrived before the process ended: nothing is waited for here.
    let spans = spans_already_received(&bodies);
    let turn = span(&spans, "clawsmith.turn");
    let calls: Vec<&Value> = spans
        .iter()
        .filter(|span| span["name"] == "execute_tool read_file")
        .collect();
    assert_eq!(calls.len(), 2, "{spans:#?}");
    for call in calls {
        assert_eq!(call["parentSpanId"], turn["spanId"]);
    }
}

#[test]
fn a_dead_collector_never_fails_the_call_and_the_loss_is_logged() {
    let fixture = Fixture::new();
    // Accepts connections (the kernel's backlog) and never answers.
    let hanging = TcpListener::bind("127.0.0.1:0").unwrap();
    let hanging_url = format!("http://{}", hanging.local_addr().unwrap());
    // Nothing listens here.
    let refused_url = {
        let free = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", free.local_addr().unwrap())
    };
    let cases = ["http/protobuf", "grpc"]
        .into_iter()
        .flat_map(|protocol| [(protocol, &hanging_url), (protocol, &refused_url)]);
    for (protocol, url) in cases {
        let run = call(
            &fixture,
            &["read_file", r#"{"path": "a.txt"}"#],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", url),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
            ],
        );
        assert_eq!(run.code, 0, "{protocol} {url}: {}", run.stderr);
        let result: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(result["status"], "success", "{protocol} {url}: {result}");
        assert!(
            run.stderr.contains("2 of 2 spans were not exported"),
            "{protocol} {url}: {}",
            run.stderr
        );
    }
}

#[test]
fn unsupported_trace_settings_stop_the_start() {
    let fixture = Fixture::new();
    let table: [(&str, &str, &str); 4] = [
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "grpc/tls",
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc/tls is not supported: use http/protobuf (the default), http/json or grpc",
        ),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "ftp://collector.example:4317",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=ftp://collector.example:4317 is not supported: only http:// and https:// endpoints",
        ),
        (
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
            "/nonexistent/ca.pem",
            "OTEL_EXPORTER_OTLP_CERTIFICATE: TLS files are set but the endpoint http://127.0.0.1:9/v1/traces is not https://: spans would not be encrypted",
        ),
        ("TRACEPARENT", "00-xyz", "TRACEPARENT"),
    ];
    for (name, value, expected) in table {
        let run = call(
            &fixture,
            &["read_file", r#"{"path": "a.txt"}"#],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
                (name, value),
            ],
        );
        assert_ne!(run.code, 0, "{name}={value}");
        assert!(
            run.stderr.contains(expected),
            "{name}={value}: {}",
            run.stderr
        );
    }
}

#[test]
fn mcp_calls_meta_traceparent_parents_that_calls_turn() {
    let fixture = Fixture::new();
    let (url, bodies) = receiver();
    let mut server = Server::start_with_env(
        &fixture,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &url),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    let traced = server.request(
        "tools/call",
        json!({"name": "read_file", "arguments": {"path": "a.txt"},
               "_meta": {"traceparent": INCOMING, "tracestate": "rojo=1"}}),
    );
    assert_eq!(traced["result"]["isError"], false, "{traced}");
    // The next call carries no context: it starts a trace of its own.
    let untraced = server.call("read_file", json!({"path": "b.txt"}));
    assert_eq!(untraced["isError"], false, "{untraced}");
    assert!(server.close().success());

    let spans = spans_received(&bodies, 4);
    let turns: Vec<&Value> = spans
        .iter()
        .filter(|span| span["name"] == "clawsmith.turn")
        .collect();
    let calls: Vec<&Value> = spans
        .iter()
        .filter(|span| span["name"] == "execute_tool read_file")
        .collect();
    assert_eq!((turns.len(), calls.len()), (2, 2), "{spans:#?}");
    let traced_turn = turns
        .iter()
        .find(|turn| turn["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736")
        .unwrap_or_else(|| panic!("no turn in the caller's trace: {turns:#?}"));
    assert_eq!(traced_turn["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(traced_turn["traceState"], "rojo=1");
    let traced_call = calls
        .iter()
        .find(|call| call["parentSpanId"] == traced_turn["spanId"])
        .unwrap();
    assert_eq!(traced_call["traceId"], traced_turn["traceId"]);
    assert_eq!(
        attribute(traced_call, "gen_ai.tool.name")["stringValue"],
        "read_file"
    );
    let other_turn = turns
        .iter()
        .find(|turn| turn["spanId"] != traced_turn["spanId"])
        .unwrap();
    assert_ne!(other_turn["traceId"], traced_turn["traceId"]);
    assert!(
        other_turn["parentSpanId"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{other_turn}"
    );
}
