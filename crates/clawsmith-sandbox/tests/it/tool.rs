//! The `run_command` tool: authorization, disaster check, results and display.

use std::time::Duration;

use clawsmith_protocol::{
    Authorization, CancellationSignal, Capability, CapabilityDeclaration, PermissionDecision, Tool,
    ToolExecutionContext, ToolExecutionResult, ToolOutput, ToolStatus, Verdict,
};
use clawsmith_sandbox::{KernelSupport, RunCommandTool, SandboxPolicy};
use serde_json::json;

use crate::Fixture;

pub fn authorized() -> ToolExecutionContext {
    let decision = PermissionDecision {
        verdict: Verdict::Allow,
        reason: "test".to_owned(),
        rule: None,
    };
    ToolExecutionContext::new("s", "t", "c")
        .with_authorization(Authorization::from_decision(&decision).unwrap())
}

pub async fn call(
    tool: &dyn Tool,
    input: serde_json::Value,
    context: ToolExecutionContext,
) -> ToolExecutionResult {
    match tool.execute(input, context).await {
        ToolOutput::Result(result) => result,
        other => panic!("expected a typed result, got {other:?}"),
    }
}

fn field<'a>(result: &'a ToolExecutionResult, label: &str) -> Option<&'a str> {
    result
        .metadata
        .display
        .as_ref()?
        .fields
        .iter()
        .find(|f| f.label == label)
        .map(|f| f.value.as_str())
}

fn best_effort(fixture: &Fixture) -> RunCommandTool {
    let mut config = fixture.config();
    config.policy = SandboxPolicy::BestEffort;
    RunCommandTool::new(config)
}

#[test]
fn declaration() {
    let fixture = Fixture::new();
    let tool = best_effort(&fixture);
    assert_eq!(tool.name(), "run_command");
    assert_eq!(tool.risk().as_str(), "execute");
    assert!(!tool.concurrency_safe());
    assert_eq!(
        tool.capabilities(),
        CapabilityDeclaration::Declared(vec![Capability::ProcessExecute])
    );
    let schema = tool.input_schema();
    assert_eq!(schema["required"], json!(["command"]));
    assert_eq!(schema["additionalProperties"], json!(false));
    for property in ["command", "cwd", "timeoutMs"] {
        assert!(
            schema["properties"][property].is_object(),
            "{property}: {schema}"
        );
    }
    assert_eq!(
        tool.summarize(&json!({"command": "ls -la"})),
        "run_command: ls -la"
    );
    assert_eq!(tool.summarize(&json!(42)), "run_command");

    let mut config = fixture.config();
    config.network_allowed = true;
    assert_eq!(
        RunCommandTool::new(config).capabilities(),
        CapabilityDeclaration::Declared(vec![Capability::ProcessExecute, Capability::Network])
    );
}

#[tokio::test]
async fn refusals() {
    let fixture = Fixture::new();
    let tool = best_effort(&fixture);
    let marker = fixture.workspace.join("marker");
    let touch = format!("touch {}", marker.display());

    // (input, context authorized?, status, code)
    let cases = [
        (
            json!({"command": touch}),
            false,
            ToolStatus::Denied,
            "permission_denied",
        ),
        (
            json!({"command": format!("{touch}; sudo true")}),
            true,
            ToolStatus::Denied,
            "command_blocked",
        ),
        (
            json!({"command": format!("{touch} && rm -rf /")}),
            true,
            ToolStatus::Denied,
            "command_blocked",
        ),
        (
            json!({"command": touch, "extra": 1}),
            true,
            ToolStatus::Error,
            "invalid_arguments",
        ),
        (
            json!({"command": touch, "cwd": "../outside"}),
            true,
            ToolStatus::Error,
            "invalid_arguments",
        ),
        (
            json!({"command": touch, "timeoutMs": 600001}),
            true,
            ToolStatus::Error,
            "invalid_arguments",
        ),
        (
            json!({"cmd": touch}),
            true,
            ToolStatus::Error,
            "invalid_arguments",
        ),
    ];
    for (input, authorized_context, status, code) in cases {
        let context = if authorized_context {
            authorized()
        } else {
            ToolExecutionContext::new("s", "t", "c")
        };
        let result = call(&tool, input.clone(), context).await;
        assert_eq!(result.status(), status, "{input}: {}", result.content);
        assert_eq!(result.code().unwrap().as_str(), code, "{input}");
        assert!(!marker.exists(), "{input} spawned a process");
    }
    let result = call(
        &tool,
        json!({"command": touch}),
        ToolExecutionContext::new("s", "t", "c"),
    )
    .await;
    assert_eq!(
        result.content,
        "Denied: Tool run_command requires explicit authorization"
    );

    let result = call(&tool, json!({"command": "sudo id"}), authorized()).await;
    assert_eq!(result.metadata.retryable, Some(false));
    assert!(
        result.content.contains("privilege_escalation"),
        "{}",
        result.content
    );
    assert_eq!(field(&result, "rule"), Some("privilege_escalation"));
}

#[tokio::test]
async fn results_carry_exit_code_and_sandbox() {
    let fixture = Fixture::new();
    let tool = best_effort(&fixture);
    let result = call(
        &tool,
        json!({"command": "echo out; echo err >&2; exit 4"}),
        authorized(),
    )
    .await;
    assert_eq!(result.status(), ToolStatus::Success);
    assert!(
        result.content.starts_with("out\nerr\n[exit code 4]"),
        "{}",
        result.content
    );
    assert_eq!(field(&result, "exit"), Some("exit code 4"));
    assert!(field(&result, "sandbox").is_some());
    assert_eq!(field(&result, "sandbox policy"), Some("best-effort"));

    let result = call(
        &tool,
        json!({"command": "sleep 5", "timeoutMs": 300}),
        authorized(),
    )
    .await;
    assert_eq!(result.status(), ToolStatus::Error, "a timeout is an error");
    assert_eq!(result.code().unwrap().as_str(), "timeout");
    assert!(
        result.content.contains("timed out after 300 ms"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn unconfined_runs_say_so() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.kernel_support = Some(KernelSupport::NONE);
    let tool = RunCommandTool::new(config.clone());
    let result = call(&tool, json!({"command": "true"}), authorized()).await;
    assert_eq!(result.status(), ToolStatus::Error);
    assert_eq!(result.code().unwrap().as_str(), "sandbox_unavailable");
    assert!(
        result.content.contains("Landlock is not available"),
        "{}",
        result.content
    );

    config.policy = SandboxPolicy::BestEffort;
    let tool = RunCommandTool::new(config);
    let result = call(&tool, json!({"command": "true"}), authorized()).await;
    assert_eq!(result.status(), ToolStatus::Success);
    assert!(result.content.contains("unconfined"), "{}", result.content);
    assert_eq!(field(&result, "sandbox"), Some("unconfined"));
}

#[tokio::test]
async fn cancellation_is_reported() {
    let fixture = Fixture::new();
    let tool = best_effort(&fixture);
    let cancel = CancellationSignal::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let result = call(
        &tool,
        json!({"command": "sleep 100"}),
        authorized().with_cancellation(cancel),
    )
    .await;
    assert_eq!(result.status(), ToolStatus::Cancelled);
    assert_eq!(result.code().unwrap().as_str(), "cancelled");
}
