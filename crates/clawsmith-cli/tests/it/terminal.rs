//! Colour and progress on a terminal, none through a pipe: `turn --pretty` and
//! `prune` run once under a pseudo-terminal (`script`, from util-linux) and once piped.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::Fixture;

/// Runs `command` (shell text) with stdout and stderr on a pseudo-terminal; what the terminal
/// showed. `None` when `script` is missing (it says so).
fn on_a_terminal(command: &str) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: `script` (util-linux) is not installed");
        return None;
    }
    let output = plain_environment(Command::new("script").args([
        "--quiet",
        "--return",
        "--command",
        command,
        "/dev/null",
    ]))
    .output()
    .unwrap();
    assert!(output.status.success(), "{output:?}");
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs the same shell text with stdout and stderr piped; (stdout, stderr).
fn piped(command: &str) -> (String, String) {
    let output = plain_environment(Command::new("sh").args(["-c", command]))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A colour-capable terminal type and none of the caller's colour or state settings.
fn plain_environment(command: &mut Command) -> &mut Command {
    command
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLAWSMITH_STATE_DIR")
}

fn quoted(path: &Path) -> String {
    format!("'{}'", path.to_str().unwrap().replace('\'', r"'\''"))
}

#[test]
fn turn_pretty_and_prune_show_colour_and_progress_on_a_terminal_only() {
    let f = Fixture::new();
    let calls = json!([
        {"id": "c1", "name": "read_file", "arguments": json!({"path": "a.txt"}).to_string()},
        {"id": "c2", "name": "write_file", "arguments": json!({"path": "c.txt", "content": "c\n"}).to_string()},
    ]);
    let input = f.dir.path().join("calls.json");
    std::fs::write(&input, calls.to_string()).unwrap();
    let binary = quoted(Path::new(env!("CARGO_BIN_EXE_clawsmith")));
    let state = quoted(&f.state());
    let turn = format!(
        "{binary} --state-dir {state} turn --workspace {} --yes --sandbox off --pretty < {}",
        quoted(&f.ws()),
        quoted(&input)
    );
    let prune = format!("{binary} --state-dir {state} prune --dry-run");
    // (command, what its progress line says)
    let table = [(turn, "⋯ running"), (prune, "pruning (dry run)…")];
    for (command, progress) in &table {
        let (stdout, stderr) = piped(command);
        assert!(
            !stdout.contains('\x1b') && !stderr.contains('\x1b'),
            "{stdout}{stderr}"
        );
        assert!(!stderr.contains(progress), "{stderr}");
        let Some(shown) = on_a_terminal(command) else {
            return;
        };
        assert!(
            shown.contains("\x1b[1m"),
            "no colour on a terminal: {shown}"
        );
        assert!(
            shown.contains(progress),
            "no progress on a terminal: {shown}"
        );
        // The progress line is erased: nothing of it stays on screen.
        assert!(shown.contains("\r\x1b[2K"), "{shown}");
    }
    // `--color never` wins over the terminal.
    let Some(shown) = on_a_terminal(&format!("{} --color never", table[1].0)) else {
        return;
    };
    assert!(!shown.contains('\x1b'), "{shown}");
}

/// `call` prints its readable form on a terminal and JSON through a pipe.
#[test]
fn call_is_readable_on_a_terminal_and_json_through_a_pipe() {
    let f = Fixture::new();
    let binary = quoted(Path::new(env!("CARGO_BIN_EXE_clawsmith")));
    let command = format!(
        "{binary} --state-dir {} call --session new --workspace {} read_file '{{\"path\":\"a.txt\"}}'",
        quoted(&f.state()),
        quoted(&f.ws())
    );
    let (stdout, _) = piped(&command);
    let result: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["content"], "alpha\nbeta\n");
    let Some(shown) = on_a_terminal(&command) else {
        return;
    };
    assert!(shown.contains("read_file"), "{shown}");
    assert!(shown.contains("success"), "{shown}");
    assert!(!shown.contains("\"version\""), "{shown}");
}
