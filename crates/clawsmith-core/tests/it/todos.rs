//! A2: `todo_write` replaces the whole list, `todo_list` reads it, persisted in
//! `session_todos`, restored by a session undo.

use clawsmith_checkpoint::{TodoStatus, UndoScope};
use clawsmith_protocol::ToolStatus;

use crate::support::*;

#[tokio::test]
async fn write_replaces_the_list_and_list_reads_it() {
    let fixture = Fixture::new();
    let core = fixture.core(|_| {});
    let session = core.open_session(None).unwrap();
    let result = one(
        &session,
        "todo_write",
        r#"{"todos": [{"id": "1", "content": "read spec", "status": "completed"},
                      {"id": "2", "content": "write code", "status": "in_progress"}]}"#,
    )
    .await;
    assert_status(&result, ToolStatus::Success, None);
    let listed = one(&session, "todo_list", "{}").await;
    assert!(listed.content.contains("[x] read spec"));
    assert!(listed.content.contains("[~] write code"));
    // Replace, not merge.
    one(
        &session,
        "todo_write",
        r#"{"todos": [{"id": "3", "content": "ship", "status": "pending"}]}"#,
    )
    .await;
    let todos = fixture.store.todos(session.id()).unwrap();
    assert_eq!(todos.len(), 1);
    assert_eq!(todos[0].status, TodoStatus::Pending);
    // Persisted: another core over the same database file sees it.
    let reopened = fixture
        .core(|_| {})
        .open_session(Some(session.id().to_owned()))
        .unwrap();
    assert!(
        one(&reopened, "todo_list", "{}")
            .await
            .content
            .contains("[ ] ship")
    );
}

#[tokio::test]
async fn refusals() {
    let fixture = Fixture::new();
    let session = fixture.core(|_| {}).open_session(None).unwrap();
    let two_in_progress = r#"{"todos": [{"id": "1", "content": "a", "status": "in_progress"},
                                        {"id": "2", "content": "b", "status": "in_progress"}]}"#;
    let cases = [
        (two_in_progress, "in_progress"),
        (
            r#"{"todos": [{"id": "1", "content": "a", "status": "pending"}, {"id": "1", "content": "b", "status": "pending"}]}"#,
            "duplicate",
        ),
        (r#"{"todos": [{"id": "1", "content": "a"}]}"#, "status"),
        (r#"{"todos": "nope"}"#, "todos"),
    ];
    for (input, mentions) in cases {
        let result = one(&session, "todo_write", input).await;
        assert_status(&result, ToolStatus::Error, Some("invalid_arguments"));
        assert!(
            result.content.contains(mentions),
            "{input}: {}",
            result.content
        );
    }
    assert!(
        fixture.store.todos(session.id()).unwrap().is_empty(),
        "nothing was written"
    );
}

#[tokio::test]
async fn a_session_undo_restores_the_todos() {
    let fixture = Fixture::new();
    let core = fixture.core(|_| {});
    let session = core.open_session(None).unwrap();
    one(
        &session,
        "todo_write",
        r#"{"todos": [{"id": "1", "content": "first", "status": "pending"}]}"#,
    )
    .await;
    let sink = clawsmith_core::NullSink;
    let outcome = session
        .run_turn(
            vec![call(
                "c1",
                "todo_write",
                r#"{"todos": [{"id": "2", "content": "second", "status": "pending"}]}"#,
            )],
            &sink,
        )
        .await
        .unwrap();
    assert_eq!(
        fixture.store.todos(session.id()).unwrap()[0].content,
        "second"
    );
    let workspace = clawsmith_fs::Workspace::open(&fixture.workspace).unwrap();
    fixture
        .store
        .undo(
            session.id(),
            &outcome.turn_id,
            UndoScope::Session,
            &workspace,
        )
        .unwrap();
    assert_eq!(
        fixture.store.todos(session.id()).unwrap()[0].content,
        "first"
    );
}
