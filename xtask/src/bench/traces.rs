//! Traces: `read_file` calls per second through the whole pipeline of a real
//! `clawsmith mcp`, with OTLP export on (to a receiver this harness runs on 127.0.0.1) against
//! the same server with export off.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Result, bail};
use serde_json::json;

use super::{McpClient, Options, Row, Target, Unit, alternate, tempdir};

/// An OTLP/HTTP receiver that answers every request 200 and counts them.
fn receiver() -> Result<(String, Arc<AtomicU64>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    let requests = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = Arc::clone(&counted);
            std::thread::spawn(move || answer(stream, &counted));
        }
    });
    Ok((url, requests))
}

/// Reads requests off one keep-alive connection, answering each.
fn answer(stream: TcpStream, requests: &AtomicU64) {
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            requests.fetch_add(1, Ordering::Relaxed);
            let answered = reader
                .get_mut()
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
            if answered.is_err() {
                return;
            }
            length = 0;
        }
    }
}

fn server(bin: &Path, workspace: &Path, otlp: Option<&str>) -> Result<McpClient> {
    let state = tempdir(if otlp.is_some() {
        "traces-on-state"
    } else {
        "traces-off-state"
    })?;
    let mut command = Command::new(bin);
    command
        .arg("--state-dir")
        .arg(&state)
        .args(["mcp", "--workspace"])
        .arg(workspace)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("TRACEPARENT");
    if let Some(url) = otlp {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", url);
    }
    McpClient::spawn(command)
}

/// `read_file` calls per second on one connection.
fn rate(client: &mut McpClient, calls: u32) -> Result<f64> {
    let started = Instant::now();
    for _ in 0..calls {
        client.request(
            "tools/call",
            json!({"name": "read_file", "arguments": {"path": "ten-kb.txt"}}),
        )?;
    }
    Ok(f64::from(calls) / started.elapsed().as_secs_f64())
}

/// `read_file` per second with export on vs off.
pub fn export_pair(bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    let dir = data.join("traces");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("ten-kb.txt"),
        "0123456789abcdef\n".repeat(10 * 1024 / 17),
    )?;
    let (url, requests) = receiver()?;
    let mut on = server(bin, &dir, Some(&url))?;
    let mut off = server(bin, &dir, None)?;
    let calls: u32 = if options.quick { 200 } else { 1000 };
    let (with_export, without) = alternate(
        options.rounds(),
        || rate(&mut on, calls),
        || rate(&mut off, calls),
    )?;
    // Two spans per call: batches of 512 have been posted by now.
    if requests.load(Ordering::Relaxed) == 0 {
        bail!("no export reached the receiver at {url}");
    }
    Ok(vec![Row {
        name: format!("MCP read_file with OTLP export on vs off ({calls} calls)"),
        ours_label: "export on".into(),
        theirs_label: "export off".into(),
        ours: with_export,
        theirs: without,
        target: Target::RatioAtLeast(0.9),
        unit: Unit::PerSecond,
        note: "http/protobuf to a receiver on 127.0.0.1; a turn span and an execute_tool span per \
               call"
            .into(),
    }])
}
