//! A stopped `clawsmith` stops its commands: `SIGKILL`, `SIGTERM`, `SIGHUP` and `SIGINT` to
//! `clawsmith call`, and `SIGTERM` to `clawsmith mcp` (how MCP clients stop servers), while a
//! command runs that started detached processes, leave no process of it alive and no temp dir
//! behind. Deadlines here are harness bounds, not timing assertions.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::Fixture;

/// Live (non-zombie) processes whose command line contains `marker`.
fn survivors(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if text.contains(marker) && !zombie {
            found.push(format!("{}: {text}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

fn wait_until(mut condition: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The script every case runs: a detached session, a double fork, and a foreground sleep.
fn script(marker: &str) -> String {
    format!("setsid sleep {marker} & (sleep {marker} &) ; sleep {marker}")
}

fn spawn(fixture: &Fixture, tmp: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_clawsmith"))
        .arg("--state-dir")
        .arg(fixture.state())
        .args(args)
        .env_remove("CLAWSMITH_STATE_DIR")
        .env("TMPDIR", tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Sends `signal` (a name: `KILL`, `TERM`, …) with the system's `kill`.
fn send(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args(["-s", signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -s {signal}");
}

fn stop_and_check(mut child: Child, signal: &str, marker: &str, tmp: &Path) {
    assert!(
        wait_until(|| survivors(&format!("sleep {marker}")).len() >= 3),
        "SIG{signal}: the command never started"
    );
    send(&child, signal);
    let _ = child.wait();
    assert!(
        wait_until(|| survivors(&format!("sleep {marker}")).is_empty()),
        "SIG{signal} to clawsmith left {:?}",
        survivors(&format!("sleep {marker}"))
    );
    let left: Vec<_> = std::fs::read_dir(tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "SIG{signal}: temp entries left: {left:?}");
}

#[test]
fn a_stopped_call_stops_its_command() {
    for (index, signal) in ["KILL", "TERM", "HUP", "INT"].into_iter().enumerate() {
        let fixture = Fixture::new();
        let tmp = fixture.dir.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let marker = format!("2020.{index}{}", std::process::id() % 1000);
        let ws = fixture.ws();
        let arguments = json!({"command": script(&marker)}).to_string();
        let child = spawn(
            &fixture,
            &tmp,
            &[
                "call",
                "--workspace",
                ws.to_str().unwrap(),
                "--mode",
                "full",
                "run_command",
                &arguments,
            ],
        );
        stop_and_check(child, signal, &marker, &tmp);
    }
}

#[test]
fn a_terminated_mcp_server_stops_its_command() {
    let fixture = Fixture::new();
    let tmp = fixture.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let marker = format!("2030.{}", std::process::id() % 1000);
    let ws = fixture.ws();
    let mut child = spawn(
        &fixture,
        &tmp,
        &["mcp", "--workspace", ws.to_str().unwrap(), "--mode", "full"],
    );
    let mut stdin = child.stdin.take().unwrap();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "signals-test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_command", "arguments": {"command": script(&marker)}}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    stop_and_check(child, "TERM", &marker, &tmp);
    drop(stdin);
}
