//! Issue 22 through the binary: `call` under a caller's TRACEPARENT exports its spans as OTLP
//! http/json to a receiver on 127.0.0.1; bad settings stop the start.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;

use serde_json::Value;

use crate::{Fixture, run_binary_with};

const INCOMING: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Accepts connections on 127.0.0.1 and sends each request body on the channel.
fn receiver() -> (String, mpsc::Receiver<Vec<u8>>) {
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

#[test]
fn call_exports_its_turn_and_call_spans_under_the_callers_traceparent() {
    let fixture = Fixture::new();
    let (url, bodies) = receiver();
    let state = fixture.state();
    let ws = fixture.ws();
    let run = run_binary_with(
        &[
            "--state-dir",
            state.to_str().unwrap(),
            "call",
            "--workspace",
            ws.to_str().unwrap(),
            "read_file",
            r#"{"path": "a.txt"}"#,
        ],
        "",
        |command| {
            command
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", &url)
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
                .env("TRACEPARENT", INCOMING);
        },
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut spans: Vec<Value> = Vec::new();
    while let Ok(body) = bodies.recv_timeout(std::time::Duration::from_secs(5)) {
        let request: Value = serde_json::from_slice(&body).unwrap();
        for resource in request["resourceSpans"].as_array().unwrap() {
            for scope in resource["scopeSpans"].as_array().unwrap() {
                spans.extend(scope["spans"].as_array().unwrap().iter().cloned());
            }
        }
        if spans.len() >= 2 {
            break;
        }
    }
    let names: Vec<&str> = spans
        .iter()
        .map(|span| span["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"clawsmith.turn") && names.contains(&"execute_tool read_file"),
        "{names:?}"
    );
    let turn = spans
        .iter()
        .find(|span| span["name"] == "clawsmith.turn")
        .unwrap();
    let call = spans
        .iter()
        .find(|span| span["name"] == "execute_tool read_file")
        .unwrap();
    assert_eq!(turn["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(turn["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(call["traceId"], turn["traceId"]);
    assert_eq!(call["parentSpanId"], turn["spanId"]);
}

#[test]
fn unsupported_trace_settings_stop_the_start() {
    let fixture = Fixture::new();
    let state = fixture.state();
    let ws = fixture.ws();
    let table: [(&str, &str, &str); 2] = [
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "grpc",
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: use http/protobuf (the default) or http/json",
        ),
        ("TRACEPARENT", "00-xyz", "TRACEPARENT"),
    ];
    for (name, value, expected) in table {
        let run = run_binary_with(
            &[
                "--state-dir",
                state.to_str().unwrap(),
                "call",
                "--workspace",
                ws.to_str().unwrap(),
                "read_file",
                r#"{"path": "a.txt"}"#,
            ],
            "",
            |command| {
                command
                    .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
                    .env(name, value);
            },
        );
        assert_ne!(run.code, 0, "{name}={value}");
        assert!(
            run.stderr.contains(expected),
            "{name}={value}: {}",
            run.stderr
        );
    }
}
