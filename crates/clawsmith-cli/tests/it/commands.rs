use serde_json::json;

use crate::{Fixture, run_binary};

#[test]
fn tools_lists_the_frozen_table() {
    let f = Fixture::new();
    let ws = f.ws();
    let run = f.run(
        &["--json", "tools", "--workspace", ws.to_str().unwrap()],
        "",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let table = run.json();
    let tools = table["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for name in [
        "read_file",
        "search_files",
        "glob_files",
        "write_file",
        "edit_file",
        "rename_file",
        "delete_file",
        "run_command",
        "todo_write",
        "todo_list",
        "read_artifact",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let run_command = tools.iter().find(|t| t["name"] == "run_command").unwrap();
    assert_eq!(run_command["risk"], "execute");
    assert_eq!(run_command["concurrencySafe"], false);
    assert_eq!(run_command["deferred"], false);
    assert_eq!(run_command["inputSchema"]["type"], "object");
    let read_file = tools.iter().find(|t| t["name"] == "read_file").unwrap();
    assert_eq!(read_file["capabilities"], json!(["filesystem.read"]));
    assert_eq!(table["toolSchemaSha256"].as_str().unwrap().len(), 64);
    let people = f.run(&["tools", "--workspace", ws.to_str().unwrap()], "");
    assert!(people.stdout.contains("run_command") && people.stdout.contains("execute"));
}

#[test]
fn call_prints_one_result_and_exits_zero_whatever_the_status() {
    let f = Fixture::new();
    // (extra flags, tool, arguments, status, code)
    type Case<'a> = (&'a [&'a str], &'a str, &'a str, &'a str, Option<&'a str>);
    let table: &[Case<'_>] = &[
        (&[], "read_file", r#"{"path":"a.txt"}"#, "success", None),
        (
            &[],
            "read_file",
            r#"{"path":"../outside.txt"}"#,
            "error",
            Some("tool_failed"),
        ),
        (
            &[],
            "read_file",
            r#"{"path":"#,
            "error",
            Some("invalid_json"),
        ),
        (
            &[],
            "read_file",
            r#"{"file":"a.txt"}"#,
            "error",
            Some("invalid_arguments"),
        ),
        (&[], "no_such_tool", "{}", "error", Some("unknown_tool")),
        (
            &[],
            "write_file",
            r#"{"path":"new.txt","content":"x"}"#,
            "denied",
            Some("permission_denied"),
        ),
        (
            &["--mode", "read-only", "--yes"],
            "write_file",
            r#"{"path":"new.txt","content":"x"}"#,
            "denied",
            Some("permission_denied"),
        ),
        (
            &["--mode", "full"],
            "run_command",
            r#"{"command":"sudo true"}"#,
            "denied",
            Some("command_blocked"),
        ),
        (
            &["--yes"],
            "write_file",
            r#"{"path":"new.txt","content":"x"}"#,
            "success",
            None,
        ),
        (
            &["--mode", "accept-edits"],
            "edit_file",
            r#"{"path":"a.txt","oldText":"beta","newText":"BETA"}"#,
            "success",
            None,
        ),
    ];
    for (extra, tool, arguments, status, code) in table {
        let result = f.call(extra, tool, arguments);
        assert_eq!(result["status"], *status, "{tool} {arguments}: {result}");
        assert_eq!(
            result["code"].as_str(),
            *code,
            "{tool} {arguments}: {result}"
        );
        assert_eq!(result["version"], 1);
    }
    assert_eq!(crate::read(&f.ws().join("new.txt")), "x");
    assert_eq!(crate::read(&f.ws().join("a.txt")), "alpha\nBETA\n");
}

#[test]
fn outside_paths_leave_no_trace_outside() {
    let f = Fixture::new();
    std::fs::write(f.dir.path().join("secret.txt"), "top secret").unwrap();
    let result = f.call(&["--yes"], "read_file", r#"{"path":"../secret.txt"}"#);
    assert!(!result.to_string().contains("top secret"));
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("Path is outside the workspace: ../secret.txt")
    );
    let result = f.call(
        &["--yes"],
        "write_file",
        r#"{"path":"../evil.txt","content":"x"}"#,
    );
    assert_eq!(result["status"], "error");
    assert!(!f.dir.path().join("evil.txt").exists());
}

#[test]
fn a_state_dir_inside_the_workspace_is_refused() {
    let f = Fixture::new();
    let ws = f.ws();
    let inside = ws.join(".clawsmith-state");
    let run = run_binary(
        &[
            "--state-dir",
            inside.to_str().unwrap(),
            "call",
            "--workspace",
            ws.to_str().unwrap(),
            "read_file",
            r#"{"path":"a.txt"}"#,
        ],
        "",
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("is inside the workspace"),
        "{}",
        run.stderr
    );
    assert!(
        !inside.exists(),
        "nothing may be created inside the workspace"
    );
    // The workspace itself as the state dir is refused too.
    let run = run_binary(
        &[
            "--state-dir",
            ws.to_str().unwrap(),
            "tools",
            "--workspace",
            ws.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(run.code, 1);
}

#[test]
fn turn_streams_events_and_shows_a_parallel_batch() {
    let f = Fixture::new();
    let ws = f.ws();
    let calls = json!([
        {"id": "c1", "name": "read_file", "arguments": "{\"path\":\"a.txt\"}"},
        {"id": "c2", "name": "read_file", "arguments": "{\"path\":\"b.txt\"}"},
        {"id": "c3", "name": "search_files", "arguments": "{\"query\":\"gamma\"}"}
    ]);
    let run = f.run(
        &["turn", "--workspace", ws.to_str().unwrap()],
        &calls.to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = run.lines();
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "turn.result");
    assert!(
        run.stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("{\"type\":\"turn.result\"")
    );
    let results = last["results"].as_array().unwrap();
    assert_eq!(
        results
            .iter()
            .map(|r| r["toolCallId"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["c1", "c2", "c3"]
    );
    assert!(results.iter().all(|r| r["result"]["status"] == "success"));
    let started: Vec<_> = lines
        .iter()
        .filter(|e| e["type"] == "tool.started")
        .collect();
    assert_eq!(started.len(), 3);
    for event in &started {
        assert_eq!(
            event["batch"],
            json!({"index": 0, "size": 3, "parallel": true})
        );
    }
    // Sequences are gap-free from 1.
    let events: Vec<_> = lines
        .iter()
        .filter(|e| e.get("sequence").is_some())
        .collect();
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["sequence"], index as u64 + 1);
        assert_eq!(event["sessionId"], last["sessionId"]);
    }
    let completed = lines
        .iter()
        .filter(|e| e["type"] == "tool.completed")
        .count();
    assert_eq!(completed, 3);
    // A batch with a write runs serially.
    let calls = json!([
        {"id": "w1", "name": "read_file", "arguments": "{\"path\":\"a.txt\"}"},
        {"id": "w2", "name": "write_file", "arguments": "{\"path\":\"c.txt\",\"content\":\"c\"}"}
    ]);
    let run = f.run(
        &[
            "turn",
            "--workspace",
            ws.to_str().unwrap(),
            "--mode",
            "full",
        ],
        &calls.to_string(),
    );
    let serial: Vec<_> = run
        .lines()
        .into_iter()
        .filter(|e| e["type"] == "tool.started")
        .collect();
    assert!(
        serial.iter().all(|e| e["batch"]["parallel"] == false),
        "{serial:?}"
    );
    // Bad stdin is a clear error.
    let run = f.run(&["turn", "--workspace", ws.to_str().unwrap()], "{not json");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("JSON array of tool calls"),
        "{}",
        run.stderr
    );
}

#[test]
fn sessions_continue_fork_and_show() {
    let f = Fixture::new();
    f.call(&["--session", "s1"], "read_file", r#"{"path":"a.txt"}"#);
    f.call(&["--session", "s1"], "read_file", r#"{"path":"b.txt"}"#);
    let list = f.run(&["--json", "session", "list"], "").json();
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["s1"]);
    let show = f.run(&["--json", "session", "show", "s1"], "").json();
    let messages = show["messages"].as_array().unwrap();
    // Each call stores the assistant message and one tool result.
    let tool_messages: Vec<_> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 2);
    assert!(
        tool_messages
            .iter()
            .all(|m| m["toolResult"]["status"] == "success")
    );
    let fork = f
        .run(&["--json", "session", "fork", "s1", "--as", "s2"], "")
        .json();
    assert_eq!(fork["parentId"], "s1");
    let people = f.run(&["session", "list"], "");
    assert!(
        people.stdout.contains("s2") && people.stdout.contains("fork of s1"),
        "{}",
        people.stdout
    );
    let missing = f.run(&["session", "show", "nope"], "");
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("no session \"nope\""));
}

/// `undo session` rewinds the history, and `session show` still shows what was taken out,
/// marked undone, in both forms.
#[test]
fn session_show_keeps_undone_turns_for_the_audit_trail() {
    let f = Fixture::new();
    std::fs::write(f.ws().join("a.txt"), "alpha\n").unwrap();
    f.call(&["--session", "s"], "read_file", r#"{"path":"a.txt"}"#);
    f.call(&["--session", "s"], "glob", r#"{"pattern":"*.txt"}"#);
    let before = f.run(&["--json", "session", "show", "s"], "").json();
    let turns: Vec<String> = before["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "turn.started")
        .map(|e| e["turnId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(turns.len(), 2, "{before}");
    let second_start = before["events"]
        .as_array()
        .unwrap()
        .iter()
        .position(|e| e["turnId"] == turns[1].as_str())
        .unwrap();
    let undo = f.undo(true, &["session", &turns[1], "--session", "s"]);
    assert_eq!(undo.code, 0, "{}{}", undo.stdout, undo.stderr);
    let after = f.run(&["--json", "session", "show", "s"], "").json();
    assert_eq!(
        after["events"],
        serde_json::Value::Array(before["events"].as_array().unwrap()[..second_start].to_vec())
    );
    let undone = after["undone"].as_array().unwrap();
    assert_eq!(undone.len(), 1, "{after}");
    assert_eq!(undone[0]["turnId"], turns[1].as_str());
    assert_eq!(undone[0]["scope"], "session");
    assert_eq!(
        undone[0]["events"],
        serde_json::Value::Array(before["events"].as_array().unwrap()[second_start..].to_vec())
    );
    let people = f.run(&["session", "show", "s"], "");
    assert!(
        people.stdout.contains("undone (kept for the audit trail)")
            && people
                .stdout
                .contains(&format!("`undo session` of turn {}", turns[1]))
            && people.stdout.contains("glob"),
        "{}",
        people.stdout
    );
    // A page after the first continues the live timeline only.
    let page = f
        .run(&["--json", "session", "show", "s", "--since", "1"], "")
        .json();
    assert!(page.get("undone").is_none(), "{page}");
}

#[test]
fn check_command_classifies_without_running() {
    let table = [
        ("sudo rm -rf /", "blocked"),
        ("rm -rf /", "blocked"),
        ("bash -c 'mkfs.ext4 /dev/sda1'", "blocked"),
        ("echo \"rm -rf /\"", "allowed"),
        ("rm -rf ./build target", "allowed"),
        ("git status", "allowed"),
    ];
    for (text, verdict) in table {
        let run = run_binary(&["check-command", text], "");
        let code = if verdict == "blocked" { 4 } else { 0 };
        assert_eq!(run.code, code, "{text}");
        let value = run.json();
        assert_eq!(value["verdict"], verdict, "{text}");
        if verdict == "blocked" {
            assert!(
                value["rule"].is_string() && value["reason"].is_string(),
                "{value}"
            );
        }
    }
}

#[test]
fn commands_over_missing_state_say_so() {
    let f = Fixture::new();
    for args in [&["undo", "list"][..], &["session", "list"], &["prune"]] {
        let run = f.run(args, "");
        assert_eq!(run.code, 1, "{args:?}");
        assert!(run.stderr.contains("no clawsmith state"), "{}", run.stderr);
        assert!(!f.state().exists(), "read commands must not create state");
    }
}

/// A command that fails on a path under the private /tmp is told why in its result.
#[test]
fn a_missing_path_under_the_private_tmp_gets_a_hint() {
    let f = Fixture::new();
    let ws = f.ws();
    let run = f.run(
        &[
            "--json",
            "call",
            "--yes",
            "--session",
            "new",
            "--workspace",
            ws.to_str().unwrap(),
            "run_command",
            r#"{"command":"cat /tmp/clawsmith-hint-probe.txt"}"#,
        ],
        "",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let result: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains(
            "[sandbox: /tmp is the command's own private, empty /tmp: the host's /tmp is not visible"
        ),
        "{content}"
    );
}
