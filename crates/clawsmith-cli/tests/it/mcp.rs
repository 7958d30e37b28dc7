//! `clawsmith mcp` as a real process, spoken to over stdio with newline-delimited JSON-RPC, and
//! undone through the CLI against the same state dir while the server keeps running.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use crate::{Fixture, read};

pub(crate) struct Server {
    pub(crate) child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    pub(crate) fn start(f: &Fixture, extra: &[&str]) -> Server {
        Server::start_with_env(f, extra, &[])
    }

    /// [`Server::start`] with extra environment variables (the OTLP exporter's, in traces.rs).
    pub(crate) fn start_with_env(f: &Fixture, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_clawsmith"))
            .arg("--state-dir")
            .arg(f.state())
            .args(["mcp", "--workspace"])
            .arg(f.ws())
            .args(extra)
            .env_remove("CLAWSMITH_STATE_DIR")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut server = Server {
            child,
            stdin: Some(stdin),
            stdout,
            next_id: 1,
        };
        let init = server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "clawsmith-cli-test", "version": "0"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "clawsmith", "{init}");
        writeln!(
            server.stdin.as_mut().unwrap(),
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        server
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let stdin = self.stdin.as_mut().unwrap();
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
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    pub(crate) fn call(&mut self, name: &str, arguments: Value) -> Value {
        let response = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        response["result"].clone()
    }
}

impl Server {
    /// Closes stdin (the client goes away) and waits for the server to exit on its own.
    pub(crate) fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn mcp_server_lists_calls_and_its_turns_undo_from_the_cli() {
    let f = Fixture::new();
    let mut server = Server::start(&f, &[]);
    let list = server.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let read_file = tools.iter().find(|t| t["name"] == "read_file").unwrap();
    assert_eq!(read_file["annotations"]["readOnlyHint"], true);
    assert_eq!(read_file["inputSchema"]["type"], "object");
    let edit = tools.iter().find(|t| t["name"] == "edit_file").unwrap();
    assert_eq!(edit["annotations"]["destructiveHint"], true);
    assert!(
        tools.iter().any(|t| t["name"] == "start_command"),
        "background commands in a long-lived server"
    );

    let first = server.call("read_file", json!({"path": "a.txt"}));
    assert_eq!(first["isError"], false, "{first}");
    assert!(
        first["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("alpha")
    );
    assert_eq!(first["structuredContent"]["status"], "success");

    // Errors carry isError and the structured code.
    let unknown = server.call("no_such_tool", json!({}));
    assert_eq!(unknown["isError"], true);
    assert_eq!(unknown["structuredContent"]["code"], "unknown_tool");
    let outside = server.call("read_file", json!({"path": "../x"}));
    assert_eq!(outside["isError"], true);
    // `mcp` defaults to accept-edits: commands need --mode full (or a rule).
    let command = server.call("run_command", json!({"command": "true"}));
    assert_eq!(
        command["structuredContent"]["code"], "permission_denied",
        "{command}"
    );

    // An MCP-made edit is undone by the CLI while the server keeps running.
    let edit = server.call(
        "edit_file",
        json!({"path": "a.txt", "oldText": "beta", "newText": "BETA"}),
    );
    assert_eq!(edit["isError"], false, "{edit}");
    assert_eq!(read(&f.ws().join("a.txt")), "alpha\nBETA\n");
    let turn = edit["structuredContent"]["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let undo = f.undo(true, &["files", &turn]);
    assert_eq!(undo.code, 0, "{} {}", undo.stdout, undo.stderr);
    assert_eq!(undo.json()["outcome"], "undone");
    assert_eq!(read(&f.ws().join("a.txt")), "alpha\nbeta\n");
    let again = server.call("read_file", json!({"path": "a.txt"}));
    assert_eq!(again["isError"], false);
    assert!(
        again["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("beta")
    );
}

#[test]
fn mcp_server_in_full_mode_runs_sandboxed_commands() {
    let f = Fixture::new();
    let mut server = Server::start(&f, &["--mode", "full"]);
    let result = server.call("run_command", json!({"command": "echo hello-from-mcp"}));
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello-from-mcp")
    );
    let blocked = server.call("run_command", json!({"command": "sudo true"}));
    assert_eq!(blocked["isError"], true);
    assert_eq!(blocked["structuredContent"]["code"], "command_blocked");
}

/// `clawsmith tools` (what `call` and `turn` run) and the MCP server list the same tools: one
/// table, background commands included.
#[test]
fn the_cli_and_the_mcp_server_list_the_same_tools() {
    let f = Fixture::new();
    let mut server = Server::start(&f, &[]);
    let list = server.request("tools/list", json!({}));
    let mut over_mcp: Vec<String> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect();
    over_mcp.sort();
    let ws = f.ws();
    let listed = f.run(
        &["--json", "tools", "--workspace", ws.to_str().unwrap()],
        "",
    );
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    // Deferred tools (lsp_*) are listed by `tools` with `deferred: true`; over MCP they are
    // found with search_tools, as the model finds them.
    let mut over_cli: Vec<String> = listed.lines()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|tool| tool["deferred"] == false)
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect();
    over_cli.sort();
    assert_eq!(over_cli, over_mcp);
    assert!(
        over_cli.contains(&"start_command".to_owned()),
        "{over_cli:?}"
    );
}

/// `turn` can start a background command and see it in a later request of the same turn; the
/// process says on stderr that its background commands end with it.
#[test]
fn turn_starts_a_background_command_and_says_it_ends_with_the_process() {
    let f = Fixture::new();
    let ws = f.ws();
    let stdin = r#"[
        [{"id":"c1","name":"start_command","arguments":{"command":"echo started-in-turn"}}],
        [{"id":"c2","name":"list_commands","arguments":{}}]
    ]"#;
    let run = f.run(
        &[
            "--json",
            "turn",
            "--yes",
            "--workspace",
            ws.to_str().unwrap(),
        ],
        stdin,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = run.lines();
    let results = &lines.last().unwrap()["results"];
    assert_eq!(results[0]["result"]["status"], "success", "{results}");
    let listed = results[1]["result"]["content"].as_str().unwrap();
    assert!(
        listed.contains("cmd-1") && listed.contains("echo started-in-turn"),
        "{listed}"
    );
    assert!(
        run.stderr
            .contains("note: background commands end with this process"),
        "{}",
        run.stderr
    );
}
