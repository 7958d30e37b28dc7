//! One writer per session and the session-id rules, through real
//! processes: while a `turn` holds a session, `call`, `turn`, `mcp`, `undo` and `session fork` on
//! it are refused with the holder's pid (or wait, with `--wait`), and the running call is closed
//! exactly once, by its own process.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Fixture, Run};

/// A `turn --session s` that runs a command for a while, as a child process.
// The child is handed to the caller, which waits for it.
#[allow(clippy::zombie_processes)]
fn holding_turn(f: &Fixture, seconds: u32) -> Child {
    let calls = json!([{"id": "slow", "name": "run_command", "arguments": json!({"command": format!("sleep {seconds}; echo slept")}).to_string()}]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_clawsmith"))
        .arg("--state-dir")
        .arg(f.state())
        .args([
            "turn",
            "--mode",
            "full",
            "--sandbox",
            "best-effort",
            "--session",
            "s",
            "--workspace",
        ])
        .arg(f.ws())
        .env_remove("CLAWSMITH_STATE_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(calls.to_string().as_bytes()).unwrap();
    }
    // Wait (bounded) until the command has started: its `tool.started` is stored.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let show = f.run(&["--json", "session", "show", "s"], "");
        if show.code == 0
            && show.json()["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|event| event["type"] == "tool.started" && event["toolCallId"] == "slow")
        {
            return child;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the holding turn never started: {}", show.stderr);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every `tool.started` of the session closed by exactly one `tool.completed`, and every call
/// answered by exactly one tool message.
fn assert_each_call_closed_once(f: &Fixture, session: &str) -> Value {
    let show = f.run(&["--json", "session", "show", session], "").json();
    let events = show["events"].as_array().unwrap();
    for started in events.iter().filter(|e| e["type"] == "tool.started") {
        let id = &started["toolCallId"];
        let completions = events
            .iter()
            .filter(|e| e["type"] == "tool.completed" && &e["toolCallId"] == id)
            .count();
        assert_eq!(completions, 1, "{id}: {completions} completions in {show}");
    }
    let messages = show["messages"].as_array().unwrap();
    for call in messages
        .iter()
        .filter_map(|m| m["toolCalls"].as_array())
        .flatten()
    {
        let answers = messages
            .iter()
            .filter(|m| m["role"] == "tool" && m["toolCallId"] == call["id"])
            .count();
        assert_eq!(answers, 1, "{}: {answers} results", call["id"]);
    }
    show
}

/// An MCP client on session `s` that makes one call and hangs up once it is answered (or once
/// the server is gone); the whole exchange.
fn mcp_on_session(f: &Fixture, extra: &[&str]) -> Run {
    use std::io::{BufRead, BufReader, Read, Write};
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}),
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_clawsmith"))
        .arg("--state-dir")
        .arg(f.state())
        .args(["mcp", "--session", "s", "--workspace"])
        .arg(f.ws())
        .args(extra)
        .env_remove("CLAWSMITH_STATE_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for request in &requests {
        // A server that refused to start has closed its end already.
        let _ = writeln!(stdin, "{request}");
    }
    let mut stdout = String::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while lines.read_line(&mut line).unwrap_or(0) > 0 {
        stdout.push_str(&line);
        let answered = serde_json::from_str::<Value>(&line).is_ok_and(|m| m["id"] == 2);
        line.clear();
        if answered {
            break;
        }
    }
    drop(stdin);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    Run {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    }
}

#[test]
fn a_second_writer_of_a_running_session_is_refused_with_the_holders_pid() {
    let f = Fixture::new();
    // An earlier, finished turn of the session, for undo to aim at.
    let earlier = f.turn(&["--mode", "full", "--session", "s"], &json!([{"id": "w", "name": "write_file", "arguments": json!({"path": "new.txt", "content": "x\n"}).to_string()}]));
    assert_eq!(earlier.code, 0, "{}", earlier.stderr);
    let earlier_turn = earlier.lines().pop().unwrap()["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let holder = holding_turn(&f, 5);
    let in_use = format!("session s is in use by pid {}", holder.id());
    let read = r#"{"path":"a.txt"}"#;
    let one_read = json!([{"id": "r", "name": "read_file", "arguments": read}]);
    let contenders: Vec<(&str, Run)> = vec![
        ("call", f.try_call(&["--session", "s"], "read_file", read)),
        ("turn", f.turn(&["--session", "s"], &one_read)),
        ("mcp", mcp_on_session(&f, &[])),
        (
            "undo",
            f.undo(false, &["all", &earlier_turn, "--session", "s"]),
        ),
        (
            "session fork",
            f.run(&["session", "fork", "s", "--as", "child"], ""),
        ),
    ];
    for (what, run) in &contenders {
        assert_eq!(run.code, 1, "{what}: {}", run.stdout);
        assert!(
            run.stderr.contains(&in_use),
            "{what}: {in_use:?} not in {}",
            run.stderr
        );
    }
    assert!(
        f.ws().join("new.txt").exists(),
        "the refused undo changed nothing"
    );
    let output = holder.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last: Value = serde_json::from_str(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["results"][0]["result"]["status"], "success", "{last}");
    let show = assert_each_call_closed_once(&f, "s");
    let statuses: Vec<&Value> = show["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "tool.completed")
        .map(|e| &e["status"])
        .collect();
    assert!(statuses.iter().all(|s| *s == "success"), "{statuses:?}");
}

#[test]
fn with_wait_a_second_writer_runs_after_the_first() {
    let f = Fixture::new();
    let holder = holding_turn(&f, 2);
    let read = r#"{"path":"a.txt"}"#;
    let waiters: Vec<(&str, Run)> = vec![
        (
            "call",
            f.try_call(&["--wait", "--session", "s"], "read_file", read),
        ),
        ("mcp", mcp_on_session(&f, &["--wait"])),
    ];
    for (what, run) in &waiters {
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        assert!(run.stdout.contains("alpha"), "{what}: {}", run.stdout);
    }
    assert!(holder.wait_with_output().unwrap().status.success());
    assert_each_call_closed_once(&f, "s");
}

#[test]
fn racing_writers_on_one_session_never_close_a_live_call() {
    let f = Fixture::new();
    let ws = f.ws();
    let ws = ws.to_str().unwrap().to_owned();
    std::fs::write(f.ws().join("undo-me.txt"), "start\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let outcomes = std::sync::Mutex::new(Vec::<String>::new());
    std::thread::scope(|scope| {
        for writer in 0..4 {
            let (f, ws, outcomes) = (&f, &ws, &outcomes);
            scope.spawn(move || {
                let mut index = 0;
                while Instant::now() < deadline {
                    let id = format!("w{writer}-{index}");
                    let run = match writer {
                        0 => f.turn(
                            &["--mode", "full", "--sandbox", "best-effort", "--session", "s"],
                            &json!([{"id": id, "name": "run_command", "arguments": json!({"command": "sleep 0.05"}).to_string()}]),
                        ),
                        1 => f.run(&["call", "--workspace", ws, "--session", "s", "read_file", r#"{"path":"a.txt"}"#], ""),
                        2 => mcp_on_session(f, &[]),
                        _ => {
                            let turn = f.turn(&["--mode", "full", "--session", "s"], &json!([{"id": id, "name": "write_file", "arguments": json!({"path": format!("{id}.txt"), "content": "x"}).to_string()}]));
                            match turn.lines().pop().and_then(|l| l["turnId"].as_str().map(str::to_owned)) {
                                Some(turn_id) if turn.code == 0 => f.undo(false, &["files", &turn_id, "--session", "s"]),
                                _ => turn,
                            }
                        }
                    };
                    let text = format!("{}\n{}", run.stdout, run.stderr);
                    assert!(
                        run.code == 0 || text.contains("session s is in use by pid"),
                        "writer {writer}: {text}"
                    );
                    assert!(
                        !text.contains("Store::") && !text.contains("database is locked"),
                        "{text}"
                    );
                    outcomes.lock().unwrap().push(format!("{writer}:{}", run.code));
                    index += 1;
                }
            });
        }
    });
    let outcomes = outcomes.into_inner().unwrap();
    for writer in 0..4 {
        assert!(
            outcomes.iter().any(|o| o == &format!("{writer}:0")),
            "writer {writer} never got the session: {outcomes:?}"
        );
    }
    let show = assert_each_call_closed_once(&f, "s");
    let interrupted: Vec<&Value> = show["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "tool.completed" && e["status"] != "success")
        .collect();
    assert!(
        interrupted.is_empty(),
        "a live call was closed by another process: {interrupted:?}"
    );
}

#[test]
fn two_undos_of_one_turn_one_wins_the_other_says_why() {
    let f = Fixture::new();
    for round in 0..4 {
        let turn = f.turn(&["--mode", "full", "--session", "s"], &json!([{"id": format!("e{round}"), "name": "write_file", "arguments": json!({"path": format!("r{round}.txt"), "content": "x"}).to_string()}]));
        assert_eq!(turn.code, 0, "{}", turn.stderr);
        let turn_id = turn.lines().pop().unwrap()["turnId"]
            .as_str()
            .unwrap()
            .to_owned();
        let runs: Vec<Run> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|_| scope.spawn(|| f.undo(false, &["files", &turn_id])))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let undone = runs
            .iter()
            .filter(|r| r.code == 0 && r.stdout.contains("undid"))
            .count();
        assert_eq!(
            undone,
            1,
            "{:?}",
            runs.iter()
                .map(|r| (&r.stdout, &r.stderr))
                .collect::<Vec<_>>()
        );
        for run in runs.iter().filter(|r| !r.stdout.contains("undid")) {
            let text = format!("{}{}", run.stdout, run.stderr);
            assert!(
                text.contains("already undone") || text.contains("is in use by pid"),
                "{text}"
            );
            assert!(
                !text.contains("Store::") && !text.contains("recover_restores"),
                "{text}"
            );
        }
        assert!(!f.ws().join(format!("r{round}.txt")).exists());
    }
}

#[test]
fn session_ids_that_are_empty_or_read_as_paths_are_refused() {
    let f = Fixture::new();
    let ws = f.ws();
    let ws = ws.to_str().unwrap();
    let seed = f.run(
        &[
            "call",
            "--workspace",
            ws,
            "--session",
            "s",
            "read_file",
            r#"{"path":"a.txt"}"#,
        ],
        "",
    );
    assert_eq!(seed.code, 0, "{}", seed.stderr);
    // (command, the id it was given, the words of the refusal)
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "call",
                "--workspace",
                ws,
                "--session",
                "",
                "read_file",
                "{}",
            ],
            "it is empty",
        ),
        (
            vec![
                "call",
                "--workspace",
                ws,
                "--session",
                "a\nb",
                "read_file",
                "{}",
            ],
            "control character",
        ),
        (
            vec!["turn", "--workspace", ws, "--session", "x\ty"],
            "control character",
        ),
        (
            vec!["mcp", "--workspace", ws, "--session", ""],
            "it is empty",
        ),
        (vec!["session", "fork", "s", "--as", ""], "it is empty"),
        (
            vec!["session", "fork", "s", "--as", "../../x"],
            "reads as a path",
        ),
        (
            vec!["session", "fork", "s", "--as", ".."],
            "reads as a path",
        ),
        (vec!["session", "show", "a\nb"], "control character"),
    ];
    for (args, words) in &cases {
        let run = f.run(args, "");
        // A bad value is a usage error: clap's exit 2.
        assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains(words), "{args:?}: {}", run.stderr);
    }
    let listed = f.run(&["--json", "session", "list"], "").json();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");
}

#[test]
fn sessions_left_by_single_calls_are_pruned_whole_once_expired() {
    let f = Fixture::new();
    // `--session new`: without it, calls share the workspace's session of the day.
    for _ in 0..3 {
        f.call(
            &["--mode", "full", "--session", "new"],
            "write_file",
            r#"{"path":"new.txt","content":"x"}"#,
        );
    }
    let recent = f.run(
        &[
            "call",
            "--workspace",
            f.ws().to_str().unwrap(),
            "--session",
            "recent",
            "read_file",
            r#"{"path":"a.txt"}"#,
        ],
        "",
    );
    assert_eq!(recent.code, 0, "{}", recent.stderr);
    // Sixty days pass for every session but "recent" (the store's timestamps, moved back).
    let sixty_days: u64 = 60 * 86_400_000;
    let aged = Command::new("sqlite3")
        .arg(f.state().join("clawsmith.db"))
        .arg(format!(
            "UPDATE sessions SET created_at = created_at - {sixty_days} WHERE id != 'recent';
             UPDATE events SET timestamp_ms = timestamp_ms - {sixty_days} WHERE session_id != 'recent';
             UPDATE checkpoints SET created_at = created_at - {sixty_days},
                 finished_at = finished_at - {sixty_days} WHERE session_id != 'recent';"
        ))
        .status()
        .unwrap();
    assert!(aged.success());
    let report = f.run(&["--json", "prune"], "").json();
    assert_eq!(report["sessionsRemoved"], 3, "{report}");
    let listed = f.run(&["--json", "session", "list"], "").json();
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["recent"]);
    let people = f.run(&["prune", "--dry-run"], "");
    assert!(
        people.stdout.contains("would remove 0 expired session(s)"),
        "{}",
        people.stdout
    );
}

#[test]
fn opening_a_long_session_reads_only_what_it_needs() {
    let f = Fixture::new();
    let read = r#"{"path":"a.txt"}"#;
    assert_eq!(
        f.try_call(&["--session", "long"], "read_file", read).code,
        0
    );
    // 200,000 more events and messages the session's open has no business reading: each row is
    // garbage, so a full scan (the old `restore_activations` and recovery) fails on the first.
    let filled = Command::new("sqlite3")
        .arg(f.state().join("clawsmith.db"))
        .arg(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
             INSERT INTO events (session_id, sequence, type, timestamp_ms, event_json)
                 SELECT 'long', 1000 + i, 'tool.completed', 0, 'not json' FROM n;
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
             INSERT INTO messages (session_id, idx, message_json)
                 SELECT 'long', 1000 + i, 'not json' FROM n;",
        )
        .status()
        .unwrap();
    assert!(filled.success());
    for _ in 0..2 {
        let run = f.try_call(&["--session", "long"], "read_file", read);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.json()["status"], "success", "{}", run.stdout);
    }
    let turn = f.turn(
        &["--session", "long"],
        &json!([{"id": "r", "name": "read_file", "arguments": read}]),
    );
    assert_eq!(turn.code, 0, "{}", turn.stderr);
}

#[test]
fn session_show_pages_through_events() {
    let f = Fixture::new();
    for _ in 0..3 {
        let run = f.try_call(&["--session", "s"], "read_file", r#"{"path":"a.txt"}"#);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let all = f.run(&["--json", "session", "show", "s"], "").json();
    let total = all["events"].as_array().unwrap().len() as u64;
    assert!(total >= 6, "{all}");
    assert_eq!(all["messages"].as_array().unwrap().len(), 6, "{all}");
    let end = total.to_string();
    // (--since, --limit, sequences shown, nextSince)
    let cases = [
        ("0", "2", vec![1, 2], Some(2)),
        ("2", "2", vec![3, 4], Some(4)),
        ("4", "1000", (5..=total).collect(), None),
        (end.as_str(), "5", vec![], None),
    ];
    for (since, limit, sequences, next) in cases {
        let page = f
            .run(
                &[
                    "--json", "session", "show", "s", "--since", since, "--limit", limit,
                ],
                "",
            )
            .json();
        let shown: Vec<u64> = page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["sequence"].as_u64().unwrap())
            .collect();
        assert_eq!(shown, sequences, "--since {since} --limit {limit}");
        assert_eq!(
            page["nextSince"].as_u64(),
            next,
            "--since {since} --limit {limit}"
        );
    }
    let people = f.run(&["session", "show", "s", "--limit", "2"], "");
    assert!(
        people.stdout.contains("more events: --since 2"),
        "{}",
        people.stdout
    );
}

/// The smallest MCP server: one tool, `shout`, that answers its word in capitals.
const SHOUTING_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                  "serverInfo": {"name": "shouter", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "shout", "description": "Shout a word back in capitals",
                             "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}},
                                             "required": ["word"]}}]}
    elif method == "tools/call":
        word = params.get("arguments", {}).get("word", "")
        result = {"content": [{"type": "text", "text": word.upper()}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                          "error": {"code": -32601, "message": "no such method"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"#;

#[test]
fn tools_found_by_search_tools_are_callable_in_the_sessions_next_call_and_turn() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let server = f.dir.path().join("shouter.py");
    std::fs::write(&server, SHOUTING_SERVER).unwrap();
    std::fs::create_dir(f.state()).unwrap();
    let config = f.state().join("clawsmith.toml");
    std::fs::write(
        &config,
        format!(
            "[[mcp_servers]]\nname = \"py\"\ncommand = \"python3\"\nargs = [{:?}]\nenv = [\"PATH\"]\ncapabilities = []\n",
            server.display().to_string()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let shout = r#"{"word":"hi"}"#;
    let before = f.try_call(&["--session", "d"], "mcp__py__shout", shout);
    assert_eq!(before.code, 0, "{}", before.stderr);
    assert_eq!(before.json()["code"], "inactive_tool", "{}", before.stdout);
    let search = f.try_call(
        &["--session", "d"],
        "search_tools",
        r#"{"query":"shout capitals"}"#,
    );
    assert!(
        search.json()["status"] == "success" && search.stdout.contains("mcp__py__shout"),
        "{}",
        search.stdout
    );
    // (how the next request of the session comes: another `call`, or a turn)
    let after = f.try_call(&["--session", "d", "--yes"], "mcp__py__shout", shout);
    assert_eq!(after.json()["status"], "success", "{}", after.stdout);
    assert!(after.stdout.contains("HI"), "{}", after.stdout);
    let turn = f.turn(
        &["--session", "d", "--yes"],
        &json!([{"id": "s", "name": "mcp__py__shout", "arguments": shout}]),
    );
    let last = turn.lines().pop().unwrap();
    assert_eq!(last["results"][0]["result"]["status"], "success", "{last}");
    // Every turn records the request it stands for.
    let requests = turn
        .lines()
        .into_iter()
        .filter(|event| event["type"] == "model.request")
        .count();
    assert_eq!(requests, 1, "{}", turn.stdout);
}
