//! The human surface (issue 17): a closed pipe, exit codes, error messages, paths people type.

use std::process::{Command, Stdio};

use serde_json::json;

use crate::{Fixture, run_binary};

/// A turn that writes `a.txt` and creates `new.txt`; its id.
fn turn_writing(f: &Fixture) -> String {
    let calls = json!([
        {"id": "c1", "name": "write_file", "arguments": json!({"path": "a.txt", "content": "A\n"}).to_string()},
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
