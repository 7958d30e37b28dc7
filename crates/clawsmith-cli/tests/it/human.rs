//! The human surface: a closed pipe, exit codes, error messages, paths people type.

use std::process::{Command, Stdio};

use serde_json::json;

use crate::{Fixture, run_binary};

/// A turn that creates `new.txt` and `sub/c.txt`; its id.
fn turn_writing(f: &Fixture) -> String {
    std::fs::create_dir(f.ws().join("sub")).unwrap();
    let calls = json!([
        {"id": "c1", "name": "write_file", "arguments": json!({"path": "sub/c.txt", "content": "c\n"}).to_string()},
        {"id": "c2", "name": "write_file", "arguments": json!({"path": "new.txt", "content": "n\n"}).to_string()},
    ]);
    let run = f.turn(&["--yes", "--session", "s"], &calls);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let last = run.lines().pop().unwrap();
    last["turnId"].as_str().unwrap().to_owned()
}

/// Runs `clawsmith --state-dir <state> ARGS` with its stdout closed by the reader before
/// anything is written (as `| head -c 0` would); (exit code, stderr).
fn with_stdout_closed(f: &Fixture, args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clawsmith"))
        .arg("--state-dir")
        .arg(f.state())
        .args(args)
        .env_remove("CLAWSMITH_STATE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let f = Fixture::new();
    turn_writing(&f);
    let ws = f.ws();
    let ws = ws.to_str().unwrap();
    let commands: [&[&str]; 6] = [
        &["--json", "undo", "list"],
        &["undo", "list"],
        &["session", "list"],
        &["--json", "session", "show", "s"],
        &["tools", "--workspace", ws],
        &["check-command", "git status"],
    ];
    for args in commands {
        let (code, stderr) = with_stdout_closed(&f, args);
        assert_eq!((code, stderr.as_str()), (0, ""), "{args:?}");
    }
}

#[test]
fn exit_codes_have_one_meaning_each() {
    let f = Fixture::new();
    let ws = f.ws();
    let ws = ws.to_str().unwrap();
    let missing = r#"{"path":"missing.txt"}"#;
    let present = r#"{"path":"a.txt"}"#;
    // (arguments, exit code)
    let table: [(Vec<&str>, i32); 7] = [
        (vec!["tools", "--workspace", ws], 0),
        (vec!["tools", "--workspace", ws, "--no-such-flag"], 2),
        (
            vec![
                "call",
                "--workspace",
                ws,
                "--mode",
                "loud",
                "read_file",
                present,
            ],
            2,
        ),
        (vec!["call", "--workspace", ws, "read_file", missing], 0),
        (
            vec![
                "call",
                "--workspace",
                ws,
                "--exit-status",
                "read_file",
                missing,
            ],
            5,
        ),
        (
            vec![
                "call",
                "--workspace",
                ws,
                "--exit-status",
                "read_file",
                present,
            ],
            0,
        ),
        (vec!["session", "show", "nope"], 1),
    ];
    for (args, code) in table {
        let run = f.run(&args, "");
        assert_eq!(run.code, code, "{args:?}: {}", run.stderr);
        if code == 5 {
            assert_eq!(run.json()["status"], "error", "{}", run.stdout);
        }
        if code == 1 || code == 2 {
            assert!(run.stderr.starts_with("error:"), "{args:?}: {}", run.stderr);
        }
    }
    let blocked = run_binary(&["check-command", "rm -rf /"], "");
    assert_eq!(blocked.code, 4);
    assert_eq!(blocked.json()["verdict"], "blocked");
}

/// `haystack` with every `from` replaced by `to` (same length, so a database stays readable).
fn replace_bytes(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while !rest.is_empty() {
        if rest.starts_with(from) {
            out.extend_from_slice(to);
            rest = &rest[from.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

#[test]
fn a_missing_table_is_said_once() {
    let f = Fixture::new();
    let ws = f.ws();
    let seed = f.run(&["tools", "--workspace", ws.to_str().unwrap()], "");
    assert_eq!(seed.code, 0, "{}", seed.stderr);
    // Renaming the table everywhere in the file leaves a valid database without `sessions`
    // (once the write-ahead log, which a closing process leaves in place, is in the file).
    let database = f.state().join("clawsmith.db");
    clawsmith_checkpoint::Store::open(&database)
        .unwrap()
        .checkpoint_wal()
        .unwrap();
    let bytes = std::fs::read(&database).unwrap();
    std::fs::write(&database, replace_bytes(&bytes, b"sessions", b"sessionz")).unwrap();
    let run = f.run(&["session", "list"], "");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
    assert_eq!(
        run.stderr.matches("no such table: sessions").count(),
        1,
        "{}",
        run.stderr
    );
}

#[test]
fn turn_input_errors_say_what_is_wrong_and_where() {
    let f = Fixture::new();
    let ws = f.ws();
    // (stdin, what the error says)
    let table = [
        (
            r#"[{"id":"c1","name":"read_file"}]"#,
            "missing field `arguments` at line 1 column 31",
        ),
        (
            r#"[[{"id":"c1","arguments":"{}"}]]"#,
            "missing field `name` at line 1 column 30",
        ),
        ("[5]", "expected a tool call object at line 1 column 2"),
        (
            r#"[{"id":"c1","name":"read_file","arguments":5}]"#,
            "`arguments` must be a JSON object or a string holding one, not 5 at line 1",
        ),
        ("{not json", "key must be a string at line 1 column 2"),
    ];
    for (stdin, says) in table {
        let run = f.run(&["turn", "--workspace", ws.to_str().unwrap()], stdin);
        assert_eq!(run.code, 1, "{stdin}");
        assert!(
            run.stderr.starts_with("error: stdin is not a turn: ") && run.stderr.contains(says),
            "{stdin}: {}",
            run.stderr
        );
        assert!(
            run.stderr
                .contains("\nhelp: stdin must be a JSON array of tool calls"),
            "{}",
            run.stderr
        );
        assert!(!run.stderr.contains("TurnInput"), "{}", run.stderr);
    }
}

#[test]
fn a_call_denied_for_want_of_approval_says_how_to_allow_it() {
    let f = Fixture::new();
    let write = r#"{"path":"c.txt","content":"x"}"#;
    let asked = f.try_call(&[], "write_file", write);
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    assert_eq!(asked.json()["code"], "permission_denied");
    for words in ["--yes", "--mode accept-edits", "clawsmith.toml"] {
        assert!(asked.stderr.contains(words), "{words}: {}", asked.stderr);
    }
    // A refusal no flag of this kind would lift gets no such advice.
    let read_only = f.try_call(&["--mode", "read-only"], "write_file", write);
    assert_eq!(read_only.json()["code"], "permission_denied");
    assert_eq!(read_only.stderr, "");
}

#[test]
fn undo_diff_takes_paths_as_people_type_them() {
    let f = Fixture::new();
    let turn = turn_writing(&f);
    let absolute = f.ws().canonicalize().unwrap().join("sub/c.txt");
    // (path given, the path the diff is about)
    let found = [
        ("new.txt", "new.txt"),
        ("./new.txt", "new.txt"),
        ("sub//c.txt", "sub/c.txt"),
        ("./sub/../new.txt", "new.txt"),
        (absolute.to_str().unwrap(), "sub/c.txt"),
    ];
    for (given, path) in found {
        let run = f.run(&["--json", "undo", "diff", &turn, given], "");
        assert_eq!(run.code, 0, "{given}: {}", run.stderr);
        assert_eq!(run.json()["path"], path, "{given}");
    }
    // (path given, what the error says)
    let refused = [
        ("./b.txt", "error: turn"),
        ("./b.txt", "did not change b.txt\nhelp: it changed "),
        ("./b.txt", "new.txt"),
        ("./b.txt", "sub/c.txt"),
        ("../outside.txt", "outside the workspace"),
    ];
    for (given, says) in refused {
        let run = f.run(&["undo", "diff", &turn, given], "");
        assert_eq!(run.code, 1, "{given}: {}", run.stdout);
        assert!(run.stderr.contains(says), "{given}: {}", run.stderr);
    }
}

#[test]
fn completions_for_each_shell() {
    // (shell, a line only its script has)
    let table = [
        ("bash", "complete -F _clawsmith"),
        ("zsh", "#compdef clawsmith"),
        ("fish", "complete -c clawsmith"),
    ];
    for (shell, marker) in table {
        let run = run_binary(&["completions", shell], "");
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(run.stdout.contains(marker), "{shell}: {}", run.stdout);
        assert!(run.stdout.contains("check-command"), "{shell}");
    }
    assert_eq!(run_binary(&["completions", "tcsh"], "").code, 2);
}

#[test]
fn refusals_say_what_to_do_on_a_help_line() {
    let f = Fixture::new();
    turn_writing(&f);
    let ws = f.ws();
    let inside = ws.join("state");
    let inside = inside.to_str().unwrap();
    let ws = ws.to_str().unwrap();
    let state = f.state();
    let state = state.to_str().unwrap();
    // (arguments, the error line, the help line)
    let table: [(Vec<&str>, &str, &str); 2] = [
        (
            vec![
                "--state-dir",
                state,
                "undo",
                "files",
                "turn_nope",
                "--workspace",
                ws,
            ],
            "error: no checkpoint for turn \"turn_nope\"\n",
            "help: `clawsmith undo list` shows the turns\n",
        ),
        (
            vec!["--state-dir", inside, "tools", "--workspace", ws],
            "is inside the workspace",
            "help: choose a --state-dir outside the workspace\n",
        ),
    ];
    for (args, error, help) in table {
        let run = run_binary(&args, "");
        assert_eq!(run.code, 1, "{args:?}");
        let (first, second) = run.stderr.split_once('\n').unwrap();
        assert!(first.starts_with("error: "), "{}", run.stderr);
        assert!(format!("{first}\n").contains(error), "{}", run.stderr);
        assert_eq!(second, help, "{args:?}");
    }
}

/// `turn` takes a call's arguments as JSON text (OpenAI) or as the object itself (Anthropic's
/// `input`, under either name), and runs them alike.
#[test]
fn turn_takes_arguments_as_text_or_as_an_object() {
    let f = Fixture::new();
    let ws = f.ws();
    std::fs::write(ws.join("c.txt"), "delta\n").unwrap();
    let stdin = r#"[
        {"id":"c1","name":"read_file","arguments":"{\"path\":\"a.txt\"}"},
        {"id":"c2","name":"read_file","arguments":{"path":"b.txt"}},
        {"id":"c3","name":"read_file","input":{"path":"c.txt"}}
    ]"#;
    let run = f.run(
        &["--json", "turn", "--workspace", ws.to_str().unwrap()],
        stdin,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = run.lines();
    let results = lines.last().unwrap()["results"].as_array().unwrap().clone();
    let contents: Vec<(&str, &str, bool)> = results
        .iter()
        .map(|line| {
            let content = line["result"]["content"].as_str().unwrap();
            (
                line["toolCallId"].as_str().unwrap(),
                line["result"]["status"].as_str().unwrap(),
                ["alpha", "gamma", "delta"]
                    .iter()
                    .any(|text| content.contains(text)),
            )
        })
        .collect();
    assert_eq!(
        contents,
        [
            ("c1", "success", true),
            ("c2", "success", true),
            ("c3", "success", true)
        ]
    );
}
