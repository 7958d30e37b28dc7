//! Background commands through the eight tools: pipes, PTYs, tokens, resize, cancel, logs.

use std::sync::Arc;
use std::time::Duration;

use clawsmith_protocol::{Tool, ToolExecutionContext, ToolExecutionResult, ToolStatus};
use clawsmith_sandbox::{CommandExecutionService, SandboxPolicy, ServiceConfig, command_tools};
use serde_json::{Value, json};

use crate::Fixture;
use crate::run::processes_in_group;
use crate::tool::{authorized, call};

struct Harness {
    _fixture: Fixture,
    tools: Vec<Arc<dyn Tool>>,
}

impl Harness {
    fn new(configure: impl FnOnce(&mut ServiceConfig)) -> Harness {
        let fixture = Fixture::new();
        let mut sandbox = fixture.config();
        sandbox.policy = SandboxPolicy::BestEffort;
        let mut config = ServiceConfig::new(sandbox, fixture.dir.path().join("logs"));
        configure(&mut config);
        let service = Arc::new(CommandExecutionService::new(config).unwrap());
        Harness {
            tools: command_tools(service),
            _fixture: fixture,
        }
    }

    fn tool(&self, name: &str) -> &dyn Tool {
        self.tools
            .iter()
            .find(|t| t.name() == name)
            .unwrap()
            .as_ref()
    }

    async fn call(&self, name: &str, input: Value) -> ToolExecutionResult {
        call(self.tool(name), input, authorized()).await
    }

    async fn ok(&self, name: &str, input: Value) -> Value {
        let result = self.call(name, input.clone()).await;
        assert_eq!(
            result.status(),
            ToolStatus::Success,
            "{name} {input}: {}",
            result.content
        );
        serde_json::from_str(&result.content).unwrap()
    }

    /// Reads the whole log until it contains `needle` (bounded polling, not a timing assertion).
    async fn wait_for(&self, id: &str, needle: &str) -> String {
        let mut text = String::new();
        for _ in 0..1000 {
            let chunk = self
                .ok(
                    "command_output",
                    json!({"commandId": id, "offset": 0, "maxBytes": 1048576}),
                )
                .await;
            text = chunk["data"].as_str().unwrap().to_owned();
            if text.contains(needle) {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{id}: {needle:?} never appeared in {text:?}");
    }

    async fn wait_done(&self, id: &str) -> Value {
        for _ in 0..1000 {
            let status = self.ok("command_status", json!({"commandId": id})).await;
            if status["state"] != "running" {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{id} never finished");
    }
}

#[test]
fn eight_tools_with_exact_names() {
    let harness = Harness::new(|_| {});
    let names: Vec<&str> = harness.tools.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "start_command",
            "list_commands",
            "command_terminal_capabilities",
            "command_status",
            "command_output",
            "command_input",
            "resize_command_pty",
            "cancel_command"
        ]
    );
    for tool in &harness.tools {
        let read = matches!(
            tool.name(),
            "list_commands" | "command_terminal_capabilities" | "command_status" | "command_output"
        );
        assert_eq!(
            tool.risk().as_str(),
            if read { "read" } else { "execute" },
            "{}",
            tool.name()
        );
        assert_eq!(tool.concurrency_safe(), read, "{}", tool.name());
        assert_eq!(
            tool.input_schema()["additionalProperties"],
            json!(false),
            "{}",
            tool.name()
        );
    }
    let start = harness.tool("start_command").input_schema();
    for property in ["command", "cwd", "pty", "cols", "rows"] {
        assert!(start["properties"][property].is_object(), "{property}");
    }
}

#[tokio::test]
async fn refusals() {
    let harness = Harness::new(|_| {});
    let unauthorized = ToolExecutionContext::new("s", "t", "c");
    for (name, input) in [
        ("start_command", json!({"command": "true"})),
        ("command_input", json!({"commandId": "cmd-1", "data": "x"})),
        (
            "resize_command_pty",
            json!({"commandId": "cmd-1", "cols": 1, "rows": 1, "token": "t"}),
        ),
        ("cancel_command", json!({"commandId": "cmd-1"})),
    ] {
        let result = call(harness.tool(name), input, unauthorized.clone()).await;
        assert_eq!(
            result.code().unwrap().as_str(),
            "permission_denied",
            "{name}"
        );
    }
    let result = harness
        .call("start_command", json!({"command": "sudo id"}))
        .await;
    assert_eq!(result.code().unwrap().as_str(), "command_blocked");
    let result = harness
        .call("command_status", json!({"commandId": "cmd-99"}))
        .await;
    assert_eq!(result.code().unwrap().as_str(), "invalid_arguments");
    let result = harness
        .call(
            "start_command",
            json!({"command": "true", "cwd": "../outside"}),
        )
        .await;
    assert_eq!(
        result.content,
        "Error: Path is outside the workspace: ../outside"
    );
    let listed = harness.ok("list_commands", json!({})).await;
    assert_eq!(listed["commands"], json!([]));
}

#[tokio::test]
async fn pipe_input_and_incremental_output() {
    let harness = Harness::new(|_| {});
    let started = harness
        .ok(
            "start_command",
            json!({"command": "printf abcdef; read x; echo \" got $x\""}),
        )
        .await;
    let id = started["commandId"].as_str().unwrap().to_owned();
    assert!(started.get("token").is_none());
    harness.wait_for(&id, "abcdef").await;
    let first = harness
        .ok(
            "command_output",
            json!({"commandId": id, "offset": 0, "maxBytes": 3}),
        )
        .await;
    assert_eq!(first["data"], "abc");
    assert_eq!(first["nextOffset"], 3);
    let second = harness
        .ok(
            "command_output",
            json!({"commandId": id, "offset": 3, "maxBytes": 3}),
        )
        .await;
    assert_eq!(second["data"], "def");
    harness
        .ok("command_input", json!({"commandId": id, "data": "abc\n"}))
        .await;
    harness.wait_for(&id, "got abc").await;
    let status = harness.wait_done(&id).await;
    assert_eq!(status["state"], "exited");
    assert_eq!(status["exitCode"], 0);
    assert_eq!(status["log"]["artifactId"], format!("command-log/{id}"));
    let last = harness
        .ok("command_output", json!({"commandId": id, "offset": 6}))
        .await;
    assert_eq!(last["data"], " got abc\n");
    assert_eq!(last["complete"], true);
    let listed = harness.ok("list_commands", json!({})).await;
    assert_eq!(listed["commands"][0]["commandId"], id);
    let result = harness
        .call("command_input", json!({"commandId": id, "data": "late\n"}))
        .await;
    assert_eq!(result.status(), ToolStatus::Error, "{}", result.content);
}

#[tokio::test]
async fn pty_program_answers_input_with_the_token_only() {
    let harness = Harness::new(|_| {});
    let started = harness
        .ok(
            "start_command",
            json!({"command": "read -p 'name? ' name; echo \"hello $name\"", "pty": true}),
        )
        .await;
    let id = started["commandId"].as_str().unwrap().to_owned();
    let token = started["token"].as_str().unwrap().to_owned();
    assert_eq!(token.len(), 32);
    harness.wait_for(&id, "name? ").await;

    let result = harness
        .call(
            "command_input",
            json!({"commandId": id, "data": "mallory\n"}),
        )
        .await;
    assert_eq!(result.status(), ToolStatus::Denied, "{}", result.content);
    assert_eq!(result.code().unwrap().as_str(), "permission_denied");
    let result = harness
        .call(
            "command_input",
            json!({"commandId": id, "data": "mallory\n", "token": "0".repeat(32)}),
        )
        .await;
    assert_eq!(result.code().unwrap().as_str(), "permission_denied");

    harness
        .ok(
            "command_input",
            json!({"commandId": id, "data": "world\n", "token": token}),
        )
        .await;
    let text = harness.wait_for(&id, "hello world").await;
    assert!(!text.contains("mallory"), "{text}");
    let status = harness.wait_done(&id).await;
    assert_eq!(status["exitCode"], 0);
    let started = harness
        .ok(
            "start_command",
            json!({"command": "echo \"term=$TERM tty=$(tty)\"", "pty": true}),
        )
        .await;
    let text = harness
        .wait_for(
            started["commandId"].as_str().unwrap(),
            "term=xterm-256color tty=/dev/pts/",
        )
        .await;
    assert!(text.contains("term=xterm-256color"), "{text}");
    let capabilities = harness
        .ok("command_terminal_capabilities", json!({"commandId": id}))
        .await;
    assert_eq!(capabilities["pty"], true);
    assert_eq!(capabilities["takeover"], false);
}

#[tokio::test]
async fn stty_size_follows_resize() {
    let harness = Harness::new(|_| {});
    let started = harness
        .ok(
            "start_command",
            json!({"command": "read a; stty size; read b; stty size", "pty": true, "cols": 80, "rows": 24}),
        )
        .await;
    let id = started["commandId"].as_str().unwrap().to_owned();
    let token = started["token"].as_str().unwrap().to_owned();
    harness
        .ok(
            "command_input",
            json!({"commandId": id, "data": "\n", "token": token}),
        )
        .await;
    harness.wait_for(&id, "24 80").await;

    let result = harness
        .call(
            "resize_command_pty",
            json!({"commandId": id, "cols": 100, "rows": 30, "token": "nope"}),
        )
        .await;
    assert_eq!(result.code().unwrap().as_str(), "permission_denied");
    let result = harness
        .call(
            "resize_command_pty",
            json!({"commandId": id, "cols": 100, "rows": 30}),
        )
        .await;
    assert_eq!(result.code().unwrap().as_str(), "invalid_arguments");

    harness
        .ok(
            "resize_command_pty",
            json!({"commandId": id, "cols": 100, "rows": 30, "token": token}),
        )
        .await;
    harness
        .ok(
            "command_input",
            json!({"commandId": id, "data": "\n", "token": token}),
        )
        .await;
    harness.wait_for(&id, "30 100").await;
    harness.wait_done(&id).await;
}

#[tokio::test]
async fn cancel_kills_the_tree() {
    let harness = Harness::new(|_| {});
    let started = harness
        .ok("start_command", json!({"command": "sleep 100 & sleep 100"}))
        .await;
    let id = started["commandId"].as_str().unwrap().to_owned();
    let status = harness.ok("cancel_command", json!({"commandId": id})).await;
    assert_eq!(status["state"], "cancelled", "{status}");
    let group = i32::try_from(status["processGroup"].as_i64().unwrap()).unwrap();
    assert_eq!(processes_in_group(group), Vec::<String>::new());
}

#[tokio::test]
async fn logs_are_bounded() {
    let harness = Harness::new(|config| config.max_log_bytes = 1000);
    let started = harness
        .ok(
            "start_command",
            json!({"command": "head -c 5000 /dev/zero | tr '\\0' x"}),
        )
        .await;
    let id = started["commandId"].as_str().unwrap().to_owned();
    let status = harness.wait_done(&id).await;
    assert_eq!(status["outputBytes"], 5000);
    assert_eq!(status["logTruncated"], true);
    let bytes = status["log"]["bytes"].as_u64().unwrap();
    assert!(bytes > 1000 && bytes < 1200, "{bytes}");
    let text = harness.wait_for(&id, "log truncated at 1000 bytes").await;
    assert!(text.starts_with(&"x".repeat(1000)));
}

/// A background command gets the host's one configuration, state directory included: it cannot
/// read the session database (other files' checkpointed contents) any more than `run_command`.
#[tokio::test]
async fn a_background_command_is_kept_from_the_state_directory() {
    if !crate::landlock_or_skip("a_background_command_is_kept_from_the_state_directory") {
        return;
    }
    let fixture = Fixture::new();
    let state = fixture.dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("clawsmith.db"), "SQLite format 3 state-attack").unwrap();
    let mut sandbox = clawsmith_sandbox::SandboxConfig::new(
        &fixture.workspace,
        clawsmith_sandbox::StateDir::At(state.clone()),
    );
    sandbox.temp_root = Some(fixture.dir.path().join("tmp"));
    let service = Arc::new(
        CommandExecutionService::new(ServiceConfig::new(sandbox, fixture.dir.path().join("logs")))
            .unwrap(),
    );
    let harness = Harness {
        tools: command_tools(service),
        _fixture: fixture,
    };
    let started = harness
        .ok(
            "start_command",
            json!({"command": format!("cat {0}/clawsmith.db; ls -a {0}; echo end", state.display())}),
        )
        .await;
    let id = started["commandId"].as_str().unwrap().to_owned();
    let output = harness.wait_for(&id, "end").await;
    assert!(!output.contains("state-attack"), "{output}");
    assert!(!output.contains("clawsmith.db\n"), "{output}");
}
