//! End-to-end tests: the built `clawsmith` binary against temp workspaces and state dirs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod call_exit;
mod command_undo;
mod commands;
mod concurrency;
mod confinement;
mod demo;
mod hostile_state;
mod http_client;
mod human;
mod lsp;
mod mcp;
mod mcp_http;
mod plugins;
mod policy;
mod run_agent;
mod sessions;
mod signals;
mod skills;
mod snapshots;
mod state;
mod store;
mod terminal;
mod traces;
mod undo;
mod web;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// A workspace and a state dir side by side in one temp dir.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    /// The uid (and gid) the binary runs as; `None`: the tests' own.
    pub user: Option<u32>,
}

impl Default for Fixture {
    fn default() -> Fixture {
        Fixture::new()
    }
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        std::fs::write(dir.path().join("ws/a.txt"), "alpha\nbeta\n").unwrap();
        std::fs::write(dir.path().join("ws/b.txt"), "gamma\n").unwrap();
        Fixture { dir, user: None }
    }

    /// A fixture whose files belong to the unprivileged uid 65534, which the binary then runs
    /// as (with `HOME=/nonexistent`, as that user has); `None` unless the tests run as root.
    pub fn unprivileged() -> Option<Fixture> {
        if !rustix::process::geteuid().is_root() {
            eprintln!("ran as uid {} only", rustix::process::geteuid().as_raw());
            return None;
        }
        let mut fixture = Fixture::new();
        fixture.user = Some(65534);
        fixture.give_to_user();
        Some(fixture)
    }

    /// Hands every entry of the fixture to [`Fixture::user`] (after the test wrote its files).
    pub fn give_to_user(&self) {
        let Some(uid) = self.user else {
            return;
        };
        let mut stack = vec![self.dir.path().to_path_buf()];
        while let Some(path) = stack.pop() {
            std::os::unix::fs::lchown(&path, Some(uid), Some(uid)).unwrap();
            if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                for entry in std::fs::read_dir(&path).unwrap() {
                    stack.push(entry.unwrap().path());
                }
            }
        }
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// Runs `clawsmith --state-dir <state> ARGS` with `stdin`.
    pub fn run(&self, args: &[&str], stdin: &str) -> Run {
        let state = self.state();
        let mut full = vec!["--state-dir", state.to_str().unwrap()];
        full.extend_from_slice(args);
        run_binary_with(&full, stdin, |command| {
            if let Some(uid) = self.user {
                // As root, std drops the supplementary groups before it sets the ids.
                std::os::unix::process::CommandExt::uid(command, uid);
                std::os::unix::process::CommandExt::gid(command, uid);
                command.env("HOME", "/nonexistent");
            }
        })
    }

    /// `clawsmith [--json] undo ARGS --workspace <ws>`: undo writes only in the workspace it is
    /// given.
    pub fn undo(&self, json: bool, args: &[&str]) -> Run {
        let ws = self.ws();
        let mut full = if json {
            vec!["--json", "undo"]
        } else {
            vec!["undo"]
        };
        full.extend_from_slice(args);
        full.extend_from_slice(&["--workspace", ws.to_str().unwrap()]);
        self.run(&full, "")
    }

    /// `clawsmith turn --workspace <ws> EXTRA...` with `calls` (JSON) on stdin.
    pub fn turn(&self, extra: &[&str], calls: &Value) -> Run {
        let ws = self.ws();
        let mut args = vec!["turn", "--workspace", ws.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.run(&args, &calls.to_string())
    }

    /// `clawsmith call --workspace <ws> EXTRA... TOOL ARGS`, whatever it answers.
    pub fn try_call(&self, extra: &[&str], tool: &str, arguments: &str) -> Run {
        let ws = self.ws();
        let mut args = vec!["call", "--workspace", ws.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[tool, arguments]);
        self.run(&args, "")
    }

    /// `clawsmith call --workspace <ws> EXTRA... TOOL ARGS` parsed as the result JSON.
    pub fn call(&self, extra: &[&str], tool: &str, arguments: &str) -> Value {
        let run = self.try_call(extra, tool, arguments);
        assert_eq!(run.code, 0, "{}", run.stderr);
        serde_json::from_str(run.stdout.trim()).unwrap()
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }

    pub fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

pub fn run_binary(args: &[&str], stdin: &str) -> Run {
    run_binary_with(args, stdin, |_| {})
}

/// [`run_binary`] with the command adjusted first (environment variables).
pub fn run_binary_with(args: &[&str], stdin: &str, adjust: impl FnOnce(&mut Command)) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_clawsmith"));
    command.args(args).env_remove("CLAWSMITH_STATE_DIR");
    adjust(&mut command);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command refused before it reads stdin (a session in use, a bad flag) closes it early.
    let written = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    if let Err(error) = written {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// The smallest MCP server over stdio, as Python: `initialize` and `tools/list`, nothing else.
/// Its one tool is named by `name_python` (lines that set `name`, run once at start, with `json`,
/// `os` and `sys` imported), so a server can report what it could see by its tool's name.
pub fn one_tool_mcp_server(name_python: &str) -> String {
    format!(
        r#"import json, os, sys
{name_python}
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {{"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {{"tools": {{}}}},
                  "serverInfo": {{"name": "fixture", "version": "1"}}}}
    elif method == "tools/list":
        result = {{"tools": [{{"name": name, "description": "A fixture tool",
                             "inputSchema": {{"type": "object"}}}}]}}
    else:
        print(json.dumps({{"jsonrpc": "2.0", "id": message["id"],
                          "error": {{"code": -32601, "message": "no"}}}}), flush=True)
        continue
    print(json.dumps({{"jsonrpc": "2.0", "id": message["id"], "result": result}}), flush=True)
"#
    )
}
