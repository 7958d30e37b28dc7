//! The acceptance round trip through the real fs tools: `write_file`, `edit_file`,
//! `rename_file` and `delete_file` record into a [`CheckpointRecorder`]; undo restores the tree
//! byte for byte (modes included) and `all` also restores messages, events and todos.

use std::sync::Arc;

use clawsmith_checkpoint::{
    CheckpointRecorder, Todo, TodoStatus, TurnOpening, UndoOutcome, UndoScope,
};
use clawsmith_fs::Workspace;
use clawsmith_protocol::{
    Authorization, PermissionDecision, Tool, ToolExecutionContext, ToolOutput, ToolStatus, Verdict,
};
use serde_json::json;

use crate::support::{Fixture, turn_started, user};

/// Runs a future that never waits (the file tools complete in their first poll).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("file tools complete without waiting"),
    }
}

fn call(tools: &[Arc<dyn Tool>], turn: &str, name: &str, input: serde_json::Value) {
    let decision = PermissionDecision {
        verdict: Verdict::Allow,
        reason: "test".into(),
        rule: None,
    };
    let context = ToolExecutionContext::new("s", turn, format!("{name}-call"))
        .with_authorization(Authorization::from_decision(&decision).unwrap());
    let tool = tools.iter().find(|tool| tool.name() == name).unwrap();
    match block_on(tool.execute(input.clone(), context)) {
        ToolOutput::Result(result) => {
            assert_eq!(
                result.status(),
                ToolStatus::Success,
                "{name} {input}: {}",
                result.content
            );
        }
        other => panic!("unexpected output {other:?}"),
    }
}

#[test]
fn the_real_tools_round_trip_through_undo_all() {
    let fixture = Fixture::new();
    fixture.write_initial("edit.txt", b"keep\nchange me\nkeep\n", 0o640);
    fixture.write_initial("bin/tool.sh", b"#!/bin/sh\n", 0o755);
    fixture.write_initial("gone.txt", b"bye\n", 0o600);
    std::fs::create_dir(fixture.root().join("src")).unwrap();
    let store = &fixture.store;
    store.append_message("s", &user("before")).unwrap();
    store.append_event("s", turn_started("t0"), 1).unwrap();
    store
        .set_todos(
            "s",
            vec![Todo {
                id: "1".into(),
                content: "x".into(),
                status: TodoStatus::Pending,
            }],
        )
        .unwrap();
    let (tree, messages, events, todos) = (
        fixture.tree(),
        store.messages("s").unwrap(),
        store.events("s").unwrap(),
        store.todos("s").unwrap(),
    );

    let workspace = Arc::new(Workspace::open(fixture.root()).unwrap());
    let tools =
        clawsmith_fs::builtin_tools(workspace, Arc::new(CheckpointRecorder::new(store.clone())));
    store.begin_turn("s", "t1", TurnOpening::default()).unwrap();
    call(
        &tools,
        "t1",
        "write_file",
        json!({"path": "src/new.rs", "content": "fn main() {}\n"}),
    );
    call(
        &tools,
        "t1",
        "edit_file",
        json!({"path": "edit.txt", "oldText": "change me", "newText": "changed"}),
    );
    call(
        &tools,
        "t1",
        "rename_file",
        json!({"from": "bin/tool.sh", "to": "bin/renamed.sh"}),
    );
    call(&tools, "t1", "delete_file", json!({"path": "gone.txt"}));
    call(
        &tools,
        "t1",
        "edit_file",
        json!({"path": "src/new.rs", "oldText": "{}", "newText": "{ println!(); }"}),
    );
    store.append_message("s", &user("during")).unwrap();
    store.append_event("s", turn_started("t1"), 2).unwrap();
    store.set_todos("s", Vec::new()).unwrap();
    let manifest = fixture.finish("t1");
    let paths: Vec<&str> = manifest
        .files
        .iter()
        .map(|file| file.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "src/new.rs",
            "edit.txt",
            "bin/tool.sh",
            "bin/renamed.sh",
            "gone.txt"
        ]
    );
    assert_ne!(fixture.tree(), tree);

    let report = store
        .undo("s", "t1", UndoScope::All, &fixture.workspace)
        .unwrap();
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert_eq!(fixture.tree(), tree, "files and modes byte for byte");
    assert_eq!(store.messages("s").unwrap(), messages);
    assert_eq!(store.events("s").unwrap(), events);
    assert_eq!(store.todos("s").unwrap(), todos);
}

#[test]
fn a_recorder_refusal_stops_the_real_tool() {
    let fixture = Fixture::new();
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.finish("t1");
    let workspace = Arc::new(Workspace::open(fixture.root()).unwrap());
    let tools = clawsmith_fs::builtin_tools(
        workspace,
        Arc::new(CheckpointRecorder::new(fixture.store.clone())),
    );
    let decision = PermissionDecision {
        verdict: Verdict::Allow,
        reason: "test".into(),
        rule: None,
    };
    let context = ToolExecutionContext::new("s", "t1", "late-call")
        .with_authorization(Authorization::from_decision(&decision).unwrap());
    let tool = tools
        .iter()
        .find(|tool| tool.name() == "write_file")
        .unwrap();
    let ToolOutput::Result(result) =
        block_on(tool.execute(json!({"path": "late.txt", "content": "x"}), context))
    else {
        panic!("typed result expected");
    };
    assert_ne!(result.status(), ToolStatus::Success, "{}", result.content);
    assert!(
        !fixture.root().join("late.txt").exists(),
        "a finished turn takes no more changes"
    );
}
