//! Snapshots of the text for people, with colour on and off: `tools`, `turn
//! --pretty`, `session show`, `undo list/diff/files`, `prune --dry-run` and the errors.
//!
//! Times, ids, temp paths and durations change from run to run; filters replace them with
//! placeholders (the zone is pinned with `TZ=UTC`). Escape bytes are shown as `␛` so a coloured
//! snapshot reads as text. `INSTA_UPDATE=always cargo nextest run -p clawsmith-cli snapshots`
//! rewrites the files after a deliberate change.

use std::process::Command;

use serde_json::json;

use crate::{Fixture, run_binary_with};

/// `clawsmith --state-dir <state> --color <color> ARGS` with `stdin`, in UTC, without the
/// caller's colour or log settings; (exit code, stdout, stderr).
fn human(f: &Fixture, color: &str, args: &[&str], stdin: &str) -> (i32, String, String) {
    human_with_state(&f.state(), color, args, stdin)
}

/// [`human`] with the state in `state`.
fn human_with_state(
    state: &std::path::Path,
    color: &str,
    args: &[&str],
    stdin: &str,
) -> (i32, String, String) {
    let state = state.to_str().unwrap();
    let mut full = vec!["--state-dir", state, "--color", color];
    full.extend_from_slice(args);
    let run = run_binary_with(&full, stdin, |command| {
        command
            .env("TZ", "UTC")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("RUST_LOG");
    });
    (run.code, run.stdout, run.stderr)
}

/// Asserts `text` against the snapshot `name`, with what changes between runs filtered out.
fn snapshot(f: &Fixture, name: &str, text: &str) {
    let root = f.dir.path().canonicalize().unwrap();
    let text = text
        .replace(root.to_str().unwrap(), "[tmp]")
        .replace(f.dir.path().to_str().unwrap(), "[tmp]")
        .replace('\x1b', "␛");
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("snapshots");
    for (pattern, replacement) in [
        (
            r"(ses|turn|call|art|req|apr)_[0-9A-HJKMNP-TV-Z]{26}",
            "${1}_[ULID]",
        ),
        (
            r"ses_calls_\d{8}_[0-9a-f]{12}",
            "ses_calls_[day]_[workspace]",
        ),
        (r"\d{2}:\d{2}:\d{2}", "[hh:mm:ss]"),
        (r"just now \(\d{2}:\d{2} UTC\)", "[when]"),
        (r"\d+ min ago \(\d{2}:\d{2} UTC\)", "[when]"),
        (r"\d+ ms\b", "[duration]"),
        (r"\d+\.\d s\b", "[duration]"),
        // Extension crates add tools to the list an unknown tool's error names.
        (r"Available tools: [^\n]*", "Available tools: […]"),
    ] {
        settings.add_filter(pattern, replacement);
    }
    settings.bind(|| insta::assert_snapshot!(name, text));
}

/// The state for every snapshot: one turn with a read, an edit, a command that exits 3, an
/// unknown tool and a search; one call that writes; one call denied for want of approval.
fn history(f: &Fixture) -> String {
    let ws = f.ws();
    let ws = ws.to_str().unwrap();
    let calls = json!([
        {"id": "c1", "name": "read_file", "arguments": json!({"path": "a.txt"}).to_string()},
        {"id": "c2", "name": "edit_file", "arguments": json!({"path": "a.txt", "oldText": "beta", "newText": "BETA"}).to_string()},
        {"id": "c3", "name": "run_command", "arguments": json!({"command": "echo hi; exit 3"}).to_string()},
        {"id": "c4", "name": "no_such_tool", "arguments": "{}"},
        {"id": "c5", "name": "search_files", "arguments": json!({"query": "gamma"}).to_string()},
    ]);
    let (code, stdout, stderr) = human(
        f,
        "always",
        &[
            "turn",
            "--workspace",
            ws,
            "--session",
            "s",
            "--yes",
            "--sandbox",
            "off",
            "--pretty",
        ],
        &calls.to_string(),
    );
    assert_eq!(code, 0, "{stderr}");
    let write = json!({"path": "new.txt", "content": "one\ntwo\n"}).to_string();
    // The same write approved, then denied for want of approval.
    for approval in [&["--yes"][..], &[]] {
        let mut args = vec!["call", "--workspace", ws, "--session", "s"];
        args.extend_from_slice(approval);
        args.extend_from_slice(&["write_file", &write]);
        let (code, _, stderr) = human(f, "never", &args, "");
        assert_eq!(code, 0, "{stderr}");
    }
    stdout
}

/// The id of the newest turn that changed files.
fn newest_changing_turn(f: &Fixture) -> String {
    let (_, stdout, _) = human(f, "never", &["--json", "undo", "list"], "");
    let list: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    list["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| !c["files"].as_array().unwrap().is_empty())
        .unwrap()["turnId"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn turn_pretty_is_a_timeline_with_colour() {
    let f = Fixture::new();
    let coloured = history(&f);
    assert!(coloured.contains("\x1b["), "{coloured}");
    snapshot(&f, "turn_pretty_colour", &coloured);
}

#[test]
fn turn_pretty_without_colour_and_without_json() {
    let f = Fixture::new();
    let ws = f.ws();
    let calls = json!([
        {"id": "c1", "name": "write_file", "arguments": json!({"path": "c.txt", "content": "c\n"}).to_string()},
        {"id": "c2", "name": "write_file", "arguments": json!({"path": "d.txt", "content": "d\n"}).to_string()},
    ]);
    let args = [
        "turn",
        "--workspace",
        ws.to_str().unwrap(),
        "--pretty",
        "--mode",
        "ask",
    ];
    let (code, stdout, stderr) = human(&f, "never", &args, &calls.to_string());
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains('\x1b'), "{stdout}");
    // JSON only with --json.
    assert!(!stdout.contains("turn.result"), "{stdout}");
    snapshot(&f, "turn_pretty_plain", &stdout);
    let mut with_json = args.to_vec();
    with_json.insert(0, "--json");
    let (code, stdout, _) = human(&f, "never", &with_json, &calls.to_string());
    assert_eq!(code, 0);
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "turn.result");
}

#[test]
fn session_show_undo_and_prune_for_people() {
    let f = Fixture::new();
    history(&f);
    let turn = newest_changing_turn(&f);
    for color in ["always", "never"] {
        let cases: [(&str, Vec<&str>); 5] = [
            ("session_show", vec!["session", "show", "s"]),
            ("session_list", vec!["session", "list"]),
            ("undo_list", vec!["undo", "list"]),
            ("undo_diff", vec!["undo", "diff", &turn, "./new.txt"]),
            ("prune_dry_run", vec!["prune", "--dry-run"]),
        ];
        for (name, args) in cases {
            let (code, stdout, stderr) = human(&f, color, &args, "");
            assert_eq!(code, 0, "{name}: {stderr}");
            assert_eq!(
                stdout.contains('\x1b'),
                color == "always",
                "{name}: {stdout}"
            );
            snapshot(&f, &format!("{name}_{color}"), &stdout);
        }
    }
    // Undo last: it changes what the listings show.
    let ws = f.ws();
    let (code, stdout, stderr) = human(
        &f,
        "always",
        &["undo", "files", &turn, "--workspace", ws.to_str().unwrap()],
        "",
    );
    assert_eq!(code, 0, "{stderr}");
    snapshot(&f, "undo_files_always", &stdout);
    assert!(!ws.join("new.txt").exists());
}

#[test]
fn tools_table_with_and_without_colour() {
    let f = Fixture::new();
    let ws = f.ws();
    for color in ["always", "never"] {
        let (code, stdout, stderr) = human(
            &f,
            color,
            &["tools", "--workspace", ws.to_str().unwrap()],
            "",
        );
        assert_eq!(code, 0, "{stderr}");
        // The built-in file tools and the header: extension crates add rows of their own.
        let shown: Vec<&str> = stdout
            .lines()
            .filter(|line| {
                ["tool ", "read_file ", "write_file ", "run_command "]
                    .iter()
                    .any(|start| line.contains(start))
            })
            .collect();
        snapshot(&f, &format!("tools_{color}"), &(shown.join("\n") + "\n"));
    }
}

#[test]
fn errors_in_one_style_with_and_without_colour() {
    let f = Fixture::new();
    history(&f);
    let ws = f.ws();
    let ws = ws.to_str().unwrap();
    let inside = format!("{ws}/state");
    let turn = newest_changing_turn(&f);
    // (snapshot name, arguments, stdin, exit code)
    let cases: [(&str, Vec<&str>, &str, i32); 6] = [
        (
            "error_turn_input",
            vec!["turn", "--workspace", ws],
            r#"[{"id":"c1","name":"read_file"}]"#,
            1,
        ),
        (
            "error_unknown_turn",
            vec!["undo", "files", "turn_nope", "--workspace", ws],
            "",
            1,
        ),
        (
            "error_not_changed",
            vec!["undo", "diff", &turn, "./b.txt"],
            "",
            1,
        ),
        (
            "error_denied_call",
            vec![
                "call",
                "--workspace",
                ws,
                "write_file",
                r#"{"path":"x","content":""}"#,
            ],
            "",
            0,
        ),
        ("error_no_session", vec!["session", "show", "nope"], "", 1),
        ("error_usage", vec!["tools", "--no-such-flag"], "", 2),
    ];
    for color in ["always", "never"] {
        for (name, args, stdin, code) in &cases {
            let (exit, _, stderr) = human(&f, color, args, stdin);
            assert_eq!(exit, *code, "{name}: {stderr}");
            snapshot(&f, &format!("{name}_{color}"), &stderr);
        }
        // A state directory inside the workspace.
        let (exit, _, stderr) = human_with_state(
            std::path::Path::new(&inside),
            color,
            &["tools", "--workspace", ws],
            "",
        );
        assert_eq!(exit, 1, "{stderr}");
        snapshot(&f, &format!("error_state_inside_{color}"), &stderr);
    }
}

#[test]
fn a_damaged_database_says_its_cause_once() {
    let f = Fixture::new();
    history(&f);
    let database = f.state().join("clawsmith.db");
    // The write-ahead log a closing process leaves in place goes into the file first.
    clawsmith_checkpoint::Store::open(&database)
        .unwrap()
        .checkpoint_wal()
        .unwrap();
    let bytes = std::fs::read(&database).unwrap();
    // `sessions` becomes `sessionz` everywhere: a valid database without the table.
    let patched: Vec<u8> = {
        let mut out = bytes.clone();
        let needle = b"sessions";
        let mut index = 0;
        while index + needle.len() <= out.len() {
            if &out[index..index + needle.len()] == needle {
                out[index + needle.len() - 1] = b'z';
            }
            index += 1;
        }
        out
    };
    std::fs::write(&database, patched).unwrap();
    for color in ["always", "never"] {
        let (code, _, stderr) = human(&f, color, &["session", "list"], "");
        assert_eq!(code, 1);
        assert_eq!(stderr.matches("no such table").count(), 1, "{stderr}");
        snapshot(&f, &format!("error_damaged_db_{color}"), &stderr);
    }
}

#[test]
fn no_color_turns_colour_off_in_auto_mode_only() {
    let f = Fixture::new();
    let ws = f.ws();
    let run = |color: &str, no_color: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_clawsmith"));
        command
            .arg("--state-dir")
            .arg(f.state())
            .args(["--color", color, "tools", "--workspace"])
            .arg(&ws)
            .env_remove("CLICOLOR_FORCE")
            .env_remove("NO_COLOR");
        if no_color {
            command.env("NO_COLOR", "1");
        }
        let output = command.output().unwrap();
        String::from_utf8_lossy(&output.stdout).contains('\x1b')
    };
    // (--color, NO_COLOR set, colour shown): a pipe is not a terminal, so auto is plain.
    let table = [
        ("auto", false, false),
        ("auto", true, false),
        ("always", false, true),
        ("always", true, true),
        ("never", false, false),
    ];
    for (color, no_color, coloured) in table {
        assert_eq!(
            run(color, no_color),
            coloured,
            "{color} NO_COLOR={no_color}"
        );
    }
}

#[test]
fn logs_go_to_stderr_as_the_flags_and_rust_log_say() {
    let f = Fixture::new();
    let ws = f.ws();
    let ws = ws.to_str().unwrap();
    let run = |flags: &[&str], rust_log: Option<&str>| {
        let state = f.state();
        let mut args = vec!["--state-dir", state.to_str().unwrap(), "--color", "never"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--json", "call", "--workspace", ws, "read_file"]);
        args.push(r#"{"path":"a.txt"}"#);
        run_binary_with(&args, "", |command| {
            command.env_remove("RUST_LOG");
            if let Some(filter) = rust_log {
                command.env("RUST_LOG", filter);
            }
        })
    };
    // (flags, RUST_LOG, lines stderr shows)
    let table: [(&[&str], Option<&str>, &[&str]); 5] = [
        (&[], None, &[]),
        (&["-q"], None, &[]),
        (&["-v"], None, &["INFO clawsmith::run: tool table frozen"]),
        (
            &["-vv"],
            None,
            &[
                "INFO clawsmith::run: tool table frozen",
                "DEBUG clawsmith::run: call session",
            ],
        ),
        (
            &["-q"],
            Some("clawsmith=debug"),
            &[
                "INFO clawsmith::run: tool table frozen",
                "DEBUG clawsmith::run: call session",
            ],
        ),
    ];
    for (flags, rust_log, shown) in table {
        let result = run(flags, rust_log);
        assert_eq!(result.code, 0, "{}", result.stderr);
        // The JSON contract on stdout is untouched by logging.
        assert_eq!(result.json()["status"], "success", "{}", result.stdout);
        let lines: Vec<&str> = result.stderr.lines().collect();
        assert_eq!(
            lines.len(),
            shown.len(),
            "{flags:?} {rust_log:?}: {}",
            result.stderr
        );
        for (line, start) in lines.iter().zip(shown) {
            assert!(line.trim_start().starts_with(start), "{line}");
        }
    }
}

/// `call --pretty`: a read (the whole text), an edit (its diff) and a refusal (the reason), in
/// colour and without.
#[test]
fn call_pretty_with_and_without_colour() {
    let f = Fixture::new();
    let ws = f.ws();
    let ws = ws.to_str().unwrap();
    for color in ["always", "never"] {
        let calls = [
            ("read_file", r#"{"path":"a.txt"}"#),
            (
                "edit_file",
                r#"{"path":"b.txt","oldText":"gamma","newText":"GAMMA"}"#,
            ),
            (
                "edit_file",
                r#"{"path":"b.txt","oldText":"gamma","newText":"GAMMA"}"#,
            ),
        ];
        let mut shown = String::new();
        for (tool, arguments) in calls {
            let (code, stdout, stderr) = human(
                &f,
                color,
                &[
                    "call",
                    "--pretty",
                    "--session",
                    "new",
                    "--mode",
                    "accept-edits",
                    "--workspace",
                    ws,
                    tool,
                    arguments,
                ],
                "",
            );
            assert_eq!(code, 0, "{stderr}");
            shown.push_str(&stdout);
        }
        // The edit is undone for the next colour's run.
        std::fs::write(f.ws().join("b.txt"), "gamma\n").unwrap();
        snapshot(&f, &format!("call_pretty_{color}"), &shown);
    }
}
