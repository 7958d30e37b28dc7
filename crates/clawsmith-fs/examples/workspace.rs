//! A workspace and its file tools, on clawsmith-fs alone: open a folder as a boundary-checked
//! `Workspace`, let the tools read, create and edit files in it, and see a path that leaves it
//! refused. Everything happens in a temporary folder.
//!
//! Run it with `cargo run -p clawsmith-fs --example workspace`.

use std::error::Error;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use clawsmith_fs::{NoopRecorder, Workspace, builtin_tools};
use clawsmith_protocol::{
    Authorization, PermissionDecision, Tool, ToolExecutionContext, ToolExecutionResult, ToolFuture,
    ToolOutput, ToolStatus, Verdict,
};
use serde_json::{Value, json};

fn main() -> Result<(), Box<dyn Error>> {
    let folder = tempfile::tempdir()?;
    std::fs::write(folder.path().join("notes.txt"), "hello\nworld\n")?;

    // The handle: the root is canonicalized once and every open is checked by the kernel
    // beneath it.
    let workspace = Arc::new(Workspace::open(folder.path())?);

    // The lexical check alone, before anything is opened: a path that leaves the root is an
    // error naming it, never a file outside.
    let inside = workspace.resolve("./docs/../notes.txt")?;
    println!("resolved: {inside}");
    match workspace.resolve("../outside.txt") {
        Err(refusal) => println!("refused: {refusal}"),
        Ok(path) => return Err(format!("{path} should be outside the workspace").into()),
    }

    // The seven tools over that handle. A runtime would record changes for undo; this example
    // records nothing (`NoopRecorder`).
    let tools = builtin_tools(workspace.clone(), Arc::new(NoopRecorder));
    let names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    println!("tools: {}", names.join(", "));

    // Writes need a context that a permission decision of `allow` authorized; deciding is the
    // job of the layer above (clawsmith-security and the core).
    let allow = PermissionDecision {
        verdict: Verdict::Allow,
        reason: "the example allows its own edits".to_owned(),
        rule: None,
    };
    let authorization = Authorization::from_decision(&allow).ok_or("an allow authorizes")?;
    let context = ToolExecutionContext::new("ses_example", "turn_example", "call_example")
        .with_authorization(authorization);

    let read = call(&tools, "read_file", json!({"path": "notes.txt"}), &context)?;
    println!("read_file:\n{}", read.content);

    let created = call(
        &tools,
        "write_file",
        json!({"path": "new.txt", "content": "created by the example\n"}),
        &context,
    )?;
    println!("write_file: {}", created.content);

    let edited = call(
        &tools,
        "edit_file",
        json!({"path": "notes.txt", "oldText": "world", "newText": "workspace"}),
        &context,
    )?;
    println!("edit_file: {}", edited.content);
    let after = std::fs::read_to_string(folder.path().join("notes.txt"))?;
    assert_eq!(after, "hello\nworkspace\n");

    // A failure is a result the model reads, not an `Err`.
    let escape = call_raw(
        &tools,
        "read_file",
        json!({"path": "../../etc/passwd"}),
        &context,
    )?;
    assert_eq!(escape.status(), ToolStatus::Error);
    println!("read_file outside: {}", escape.content);
    Ok(())
}

/// Calls the tool `name` and insists that it succeeded.
fn call(
    tools: &[Arc<dyn Tool>],
    name: &str,
    input: Value,
    context: &ToolExecutionContext,
) -> Result<ToolExecutionResult, Box<dyn Error>> {
    let result = call_raw(tools, name, input, context)?;
    if result.status() != ToolStatus::Success {
        return Err(format!("{name} failed: {}", result.content).into());
    }
    Ok(result)
}

fn call_raw(
    tools: &[Arc<dyn Tool>],
    name: &str,
    input: Value,
    context: &ToolExecutionContext,
) -> Result<ToolExecutionResult, Box<dyn Error>> {
    let tool = tools
        .iter()
        .find(|tool| tool.name() == name)
        .ok_or_else(|| format!("no tool {name}"))?;
    match run_now(tool.execute(input, context.clone()))? {
        ToolOutput::Result(result) => Ok(result),
        other => Err(format!("{name} answered {other:?}, not a result").into()),
    }
}

/// The file tools do their bounded work inside `execute` and are ready on the first poll, so no
/// async runtime is needed to drive them.
fn run_now(future: ToolFuture<'_>) -> Result<ToolOutput, Box<dyn Error>> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => Ok(output),
        Poll::Pending => Err("the file tools never wait".into()),
    }
}
