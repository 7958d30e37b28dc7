//! Several `clawsmith` processes on one state dir at once: an MCP server, turns, single
//! calls, undo, prune and history reads race for about three seconds. No caller may see `database is locked`
//! (or any other store failure), every call gets exactly one result, and every session's event
//! sequence stays gap-free with each `tool.started` closed by a `tool.completed`.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Fixture, Run};

/// How long the processes race (a loop bound, not an assertion).
const RACE: Duration = Duration::from_secs(3);

/// Fails on any sign of a store failure surfacing to a caller.
fn assert_clean(what: &str, run: &Run) {
    let text = format!("{}\n{}", run.stdout, run.stderr).to_lowercase();
    for needle in [
        "database is locked",
        "database busy",
        "database error",
        "sqlite",
    ] {
        assert!(
            !text.contains(needle),
            "{what}: {needle:?} surfaced:\n{text}"
        );
    }
}

fn call_arguments(value: Value) -> String {
    value.to_string()
}

/// One turn of a writer: a new file, an edit of its own file, a read and a search in a batch.
fn writer_turn(f: &Fixture, session: &str, index: usize) -> Vec<Value> {
    let own = format!("{session}.txt");
    let calls = json!([
        {"id": format!("w{index}"), "name": "write_file", "arguments": call_arguments(json!({"path": format!("{session}/{index}.txt"), "content": format!("{session} {index}\n")}))},
        {"id": format!("e{index}"), "name": "edit_file", "arguments": call_arguments(json!({"path": own, "oldText": format!("v{index}\n"), "newText": format!("v{}\n", index + 1)}))},
        {"id": format!("r{index}"), "name": "read_file", "arguments": call_arguments(json!({"path": "a.txt"}))},
        {"id": format!("s{index}"), "name": "search_files", "arguments": call_arguments(json!({"query": "alpha"}))},
    ]);
    let ws = f.ws();
    let run = f.run(
        &[
            "turn",
            "--workspace",
            ws.to_str().unwrap(),
            "--mode",
            "full",
            "--session",
            session,
        ],
        &calls.to_string(),
    );
    assert_clean(&format!("turn {session}#{index}"), &run);
    assert_eq!(run.code, 0, "turn {session}#{index}: {}", run.stderr);
    let last = run.lines().pop().unwrap();
    let results = last["results"].as_array().unwrap().clone();
    let ids: Vec<&str> = results
        .iter()
        .map(|result| {
            result["toolCallId"]
                .as_str()
                .or(result["id"].as_str())
                .unwrap_or("")
        })
        .collect();
    assert_eq!(results.len(), 4, "every call gets one result: {last}");
    for result in &results {
        assert_eq!(
            result["result"]["status"], "success",
            "{session}#{index} {ids:?}: {result}"
        );
    }
    results
}

/// A `clawsmith mcp` process that writes and reads until `deadline`, one request at a time.
fn mcp_server_loop(f: &Fixture, deadline: Instant) -> usize {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clawsmith"))
        .arg("--state-dir")
        .arg(f.state())
        .args(["mcp", "--workspace"])
        .arg(f.ws())
        .env_remove("CLAWSMITH_STATE_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut request = |id: u64, method: &str, params: Value| -> Value {
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "the MCP server closed stdout"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    };
    let init = request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "clawsmith-concurrency-test", "version": "0"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "clawsmith", "{init}");
    let mut calls = 0;
    let mut id = 2;
    while Instant::now() < deadline {
        let (name, arguments) = if id % 2 == 0 {
            (
                "write_file",
                json!({"path": format!("mcp/{id}.txt"), "content": "m\n"}),
            )
        } else {
            ("read_file", json!({"path": "a.txt"}))
        };
        let response = request(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        );
        let text = response.to_string().to_lowercase();
        assert!(!text.contains("database is locked"), "mcp {name}: {text}");
        assert_eq!(
            response["result"]["isError"], false,
            "mcp {name}: {response}"
        );
        calls += 1;
        id += 1;
    }
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_lowercase();
    assert!(
        !stderr.contains("database is locked"),
        "mcp stderr: {stderr}"
    );
    calls
}

#[test]
fn processes_sharing_a_state_dir_never_surface_locks_or_lose_events() {
    let f = Arc::new(Fixture::new());
    let deadline = Instant::now() + RACE;
    let writers = ["w1", "w2"];
    for session in writers {
        std::fs::write(f.ws().join(format!("{session}.txt")), "v0\n").unwrap();
    }
    std::fs::write(f.ws().join("undo-me.txt"), "start\n").unwrap();
    // `write_file` does not create parent directories.
    for directory in ["w1", "w2", "calls", "mcp"] {
        std::fs::create_dir(f.ws().join(directory)).unwrap();
    }
    // Create the state dir and the database before the race, so every process opens one file.
    assert_clean(
        "seed",
        &f.run(
            &["--json", "tools", "--workspace", f.ws().to_str().unwrap()],
            "",
        ),
    );
    let counts = Arc::new(Mutex::new(BTreeMap::<&'static str, usize>::new()));
    let count = |counts: &Arc<Mutex<BTreeMap<&'static str, usize>>>, what: &'static str| {
        *counts.lock().unwrap().entry(what).or_default() += 1;
    };
    std::thread::scope(|scope| {
        for session in writers {
            let (f, counts) = (f.clone(), counts.clone());
            scope.spawn(move || {
                let mut index = 0;
                while Instant::now() < deadline {
                    writer_turn(&f, session, index);
                    count(&counts, "turns");
                    index += 1;
                }
            });
        }
        // An MCP server: a long-lived process holding the database open the whole time.
        let (server, counts_server) = (f.clone(), counts.clone());
        scope.spawn(move || {
            let calls = mcp_server_loop(&server, deadline);
            *counts_server
                .lock()
                .unwrap()
                .entry("mcp calls")
                .or_default() += calls;
        });
        // Single calls in one session, read and write.
        let (caller, counts_caller) = (f.clone(), counts.clone());
        scope.spawn(move || {
            let mut index = 0;
            while Instant::now() < deadline {
                let ws = caller.ws();
                let (tool, arguments) = if index % 2 == 0 {
                    ("read_file", json!({"path": "b.txt"}))
                } else {
                    (
                        "write_file",
                        json!({"path": format!("calls/{index}.txt"), "content": "c\n"}),
                    )
                };
                let run = caller.run(
                    &[
                        "call",
                        "--workspace",
                        ws.to_str().unwrap(),
                        "--mode",
                        "full",
                        "--session",
                        "calls",
                        tool,
                        &arguments.to_string(),
                    ],
                    "",
                );
                assert_clean(&format!("call {index}"), &run);
                assert_eq!(run.code, 0, "call {index}: {}", run.stderr);
                assert_eq!(
                    run.json()["status"],
                    "success",
                    "call {index}: {}",
                    run.stdout
                );
                count(&counts_caller, "calls");
                index += 1;
            }
        });
        // A turn that edits, then an undo of it, over and over in its own session.
        let (undoer, counts_undo) = (f.clone(), counts.clone());
        scope.spawn(move || {
            let mut index = 0;
            while Instant::now() < deadline {
                let ws = undoer.ws();
                let calls = json!([{"id": format!("u{index}"), "name": "edit_file", "arguments": call_arguments(json!({"path": "undo-me.txt", "oldText": "start\n", "newText": format!("edit {index}\n")}))}]);
                let run = undoer.run(
                    &["turn", "--workspace", ws.to_str().unwrap(), "--mode", "full", "--session", "undo"],
                    &calls.to_string(),
                );
                assert_clean(&format!("undo turn {index}"), &run);
                assert_eq!(run.code, 0, "{}", run.stderr);
                let last = run.lines().pop().unwrap();
                assert_eq!(last["results"][0]["result"]["status"], "success", "{last}");
                let turn = last["turnId"].as_str().unwrap().to_owned();
                let undo = undoer.undo(true, &["all", &turn, "--session", "undo"]);
                assert_clean(&format!("undo {turn}"), &undo);
                assert_eq!(undo.code, 0, "{}", undo.stderr);
                assert_eq!(undo.json()["outcome"], "undone", "{}", undo.stdout);
                assert_eq!(std::fs::read_to_string(ws.join("undo-me.txt")).unwrap(), "start\n");
                count(&counts_undo, "undos");
                index += 1;
            }
        });
        // Retention and history readers.
        let (reader, counts_reader) = (f.clone(), counts.clone());
        scope.spawn(move || {
            let mut index = 0;
            while Instant::now() < deadline {
                let args: &[&str] = match index % 4 {
                    0 => &["--json", "prune"],
                    1 => &["--json", "session", "list"],
                    2 => &["--json", "undo", "list"],
                    _ => &["--json", "prune", "--dry-run"],
                };
                let run = reader.run(args, "");
                assert_clean(&format!("{args:?}"), &run);
                assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
                count(&counts_reader, "readers");
                index += 1;
            }
        });
    });
    let counts = counts.lock().unwrap().clone();
    eprintln!("processes run: {counts:?}");
    for what in ["turns", "calls", "undos", "readers", "mcp calls"] {
        assert!(
            counts.get(what).copied().unwrap_or(0) > 0,
            "no {what} ran: {counts:?}"
        );
    }
    // Every session: events numbered 1..n without a gap, every started call completed once.
    let listed = f.run(&["--json", "session", "list"], "").json();
    let sessions: Vec<String> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    for expected in ["w1", "w2", "calls", "undo"] {
        assert!(
            sessions.iter().any(|s| s == expected),
            "{expected} missing: {sessions:?}"
        );
    }
    assert!(
        sessions.len() >= 5,
        "the MCP server's session is missing: {sessions:?}"
    );
    for session in sessions.iter().map(String::as_str) {
        let show = f.run(&["--json", "session", "show", session], "");
        assert_clean(&format!("session show {session}"), &show);
        assert_eq!(show.code, 0, "{}", show.stderr);
        let shown = show.json();
        let events = shown["events"].as_array().unwrap();
        // `undo all` rewinds the "undo" session to before its only turn each time.
        assert!(
            !events.is_empty() || session == "undo",
            "{session} has no events"
        );
        let mut started = HashSet::new();
        let mut completed = HashSet::new();
        for (index, event) in events.iter().enumerate() {
            assert_eq!(
                event["sequence"],
                index as u64 + 1,
                "{session}: gap at {index}"
            );
            let key = (
                event["turnId"].clone().to_string(),
                event["toolCallId"].clone().to_string(),
            );
            match event["type"].as_str().unwrap() {
                "tool.started" => assert!(started.insert(key), "{session}: started twice {event}"),
                "tool.completed" => {
                    assert!(completed.insert(key), "{session}: completed twice {event}")
                }
                _ => {}
            }
        }
        assert_eq!(
            started, completed,
            "{session}: a started call was not closed"
        );
    }
    // The writers' files hold their last edit: nothing was lost or torn.
    for session in writers {
        let text = std::fs::read_to_string(f.ws().join(format!("{session}.txt"))).unwrap();
        assert!(
            text.starts_with('v') && text.ends_with('\n'),
            "{session}: {text:?}"
        );
    }
}

/// A `call` that waits for a busy session says so on stderr, then runs.
#[test]
fn a_call_waiting_for_a_busy_session_says_so() {
    use std::process::{Command, Stdio};

    let f = crate::Fixture::new();
    let ws = f.ws();
    let state = f.state();
    let mut holder = Command::new(env!("CARGO_BIN_EXE_clawsmith"))
        .arg("--state-dir")
        .arg(&state)
        .args(["call", "--session", "ses_busy", "--yes", "--workspace"])
        .arg(&ws)
        .args(["run_command", r#"{"command":"touch started; sleep 2"}"#])
        .env_remove("CLAWSMITH_STATE_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The holder has its lease once its command runs.
    while !ws.join("started").exists() {
        assert!(
            holder.try_wait().unwrap().is_none(),
            "the holder ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let waiting = f.run(
        &[
            "--wait",
            "--json",
            "call",
            "--session",
            "ses_busy",
            "--workspace",
            ws.to_str().unwrap(),
            "read_file",
            r#"{"path":"a.txt"}"#,
        ],
        "",
    );
    assert!(holder.wait().unwrap().success());
    assert_eq!(waiting.code, 0, "{}", waiting.stderr);
    assert!(
        waiting.stderr.contains(
            "note: session ses_busy is in use by another clawsmith process; waiting for it"
        ),
        "{}",
        waiting.stderr
    );
    assert!(waiting.stdout.contains("alpha"), "{}", waiting.stdout);
}
