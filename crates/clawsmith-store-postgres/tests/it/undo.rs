//! Undo on PostgreSQL beyond the shared contract: a plan a killed writer left behind blocks the
//! session's next undo until the next holder rolls it forward in the same workspace, and a plan
//! is data, not a promise (a path outside the workspace is reported, never acted on).

use clawsmith_checkpoint::{hash_hex, sha256};
use clawsmith_store::{
    CheckpointState, SessionStore, StoreError, TurnOpening, TurnStore, UndoScope,
};
use clawsmith_store_postgres::PgOptions;

use crate::{migrated, postgres, query_text, run_sql};

#[test]
fn a_plan_left_by_a_killed_undo_is_rolled_forward_by_the_next_holder_in_its_workspace() {
    let Some(base) = postgres("a_plan_left_by_a_killed_undo_is_rolled_forward") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(scratch.path().join("outside.txt"), b"keep\n").unwrap();
    let workspace = clawsmith_fs::Workspace::open(&root).unwrap();
    let store = open();
    store
        .create_session("s", &root.display().to_string())
        .unwrap();
    let (old, new) = (b"old\n".as_slice(), b"new\n".as_slice());
    store.begin_turn("s", "t1", TurnOpening::default()).unwrap();
    store
        .record_before("s", "t1", "a.txt", Some((old, 0o644)))
        .unwrap();
    std::fs::write(root.join("a.txt"), new).unwrap();
    store
        .record_after("s", "t1", "a.txt", Some((sha256(new), 4, 0o644)))
        .unwrap();
    let read = |path: &str| std::fs::read(root.join(path)).ok();
    store
        .finish_turn_reading(
            "s",
            "t1",
            &read,
            clawsmith_protocol::EventPayload::TurnCompleted(clawsmith_protocol::TurnCompleted {
                turn_id: "t1".to_owned(),
                tool_calls: 0,
            }),
            1,
        )
        .unwrap();
    let checkpoint = query_text(
        &url,
        "SELECT id::text FROM clawsmith_checkpoints WHERE turn_id = 't1'",
    );
    // What a writer killed after committing its plan leaves: the plan row, nothing restored.
    let plan = serde_json::json!({
        "session_id": "s",
        "turn_id": "t1",
        "scope": "files",
        "turns": ["t1"],
        "files_checkpoints": [checkpoint.parse::<i64>().unwrap()],
        "session_checkpoints": [],
        "session_target": null,
        "actions": [
            {"path": "a.txt", "current": hash_hex(&sha256(new)),
             "target": {"sha256": hash_hex(&sha256(old)), "mode": 0o644}},
            {"path": "../outside.txt", "current": null, "target": null},
        ],
    });
    run_sql(
        &url,
        &[&format!(
            "INSERT INTO clawsmith_restore_plans
               (session_id, workspace_root, created_at_ms, plan_json, epoch)
             VALUES ('s', '{}', 0, '{plan}', 0)",
            root.display()
        )],
    );
    let undoer = store.undo_store().unwrap();
    assert!(matches!(
        undoer.undo("s", "t1", UndoScope::Files, &workspace),
        Err(StoreError::RestoreInProgress(_))
    ));
    assert!(
        store.has_unfinished_work("s").unwrap(),
        "a pending plan is unfinished work"
    );
    // Another workspace root is another workspace: its plans are not this one's to finish.
    let elsewhere = scratch.path().join("other");
    std::fs::create_dir(&elsewhere).unwrap();
    let other = clawsmith_fs::Workspace::open(&elsewhere).unwrap();
    assert!(
        undoer
            .recover_session_restores(&other, "s")
            .unwrap()
            .is_empty()
    );
    assert_eq!(read("a.txt").unwrap(), new);

    let recovered = open()
        .undo_store()
        .unwrap()
        .recover_session_restores(&workspace, "s")
        .unwrap();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].completed, ["a.txt"]);
    assert_eq!(recovered[0].skipped.len(), 1);
    assert_eq!(recovered[0].skipped[0].path, "../outside.txt");
    assert_eq!(read("a.txt").unwrap(), old);
    assert_eq!(
        std::fs::read(scratch.path().join("outside.txt")).unwrap(),
        b"keep\n",
        "a path outside the workspace is never acted on"
    );
    assert_eq!(
        store.checkpoints("s").unwrap()[0].state,
        CheckpointState::Undone
    );
    assert!(!store.has_unfinished_work("s").unwrap());
    assert!(
        undoer
            .recover_session_restores(&workspace, "s")
            .unwrap()
            .is_empty()
    );
}
