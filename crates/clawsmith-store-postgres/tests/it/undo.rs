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

/// Two hosts undo the same turn at once, without the lease the CLI would take: the checkpoints'
/// row locks serialize their plans, so exactly one restores and the other is told the turn is
/// already undone (or that an undo is in progress); no plan is left and the file holds its
/// prior content. Raced over several sessions.
#[test]
fn two_hosts_undoing_one_turn_at_once_restore_it_once() {
    let Some(base) = postgres("two_hosts_undoing_one_turn_at_once_restore_it_once") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    let workspace = clawsmith_fs::Workspace::open(&root).unwrap();
    let setup = open();
    let (old, new) = (b"old\n".as_slice(), b"new\n".as_slice());
    const ROUNDS: usize = 12;
    for round in 0..ROUNDS {
        let (id, path) = (format!("race-{round}"), format!("f{round}.txt"));
        setup
            .create_session(&id, &root.display().to_string())
            .unwrap();
        setup.begin_turn(&id, "t1", TurnOpening::default()).unwrap();
        setup
            .record_before(&id, "t1", &path, Some((old, 0o644)))
            .unwrap();
        std::fs::write(root.join(&path), new).unwrap();
        setup
            .record_after(&id, "t1", &path, Some((sha256(new), 4, 0o644)))
            .unwrap();
    }
    let hosts = [open(), open()];
    let mut undone = 0;
    for round in 0..ROUNDS {
        let id = format!("race-{round}");
        let barrier = std::sync::Barrier::new(2);
        let outcomes: Vec<Result<clawsmith_store::UndoOutcome, StoreError>> =
            std::thread::scope(|scope| {
                let racers: Vec<_> = hosts
                    .iter()
                    .map(|host| {
                        let (barrier, id, workspace) = (&barrier, &id, &workspace);
                        scope.spawn(move || {
                            barrier.wait();
                            host.undo_store()
                                .unwrap()
                                .undo(id, "t1", UndoScope::Files, workspace)
                                .map(|report| report.outcome)
                        })
                    })
                    .collect();
                racers
                    .into_iter()
                    .map(|racer| racer.join().unwrap())
                    .collect()
            });
        let restored = outcomes
            .iter()
            .filter(|outcome| matches!(outcome, Ok(clawsmith_store::UndoOutcome::Undone)))
            .count();
        assert_eq!(restored, 1, "round {round}: {outcomes:?}");
        for outcome in &outcomes {
            assert!(
                matches!(
                    outcome,
                    Ok(clawsmith_store::UndoOutcome::Undone
                        | clawsmith_store::UndoOutcome::AlreadyUndone)
                        | Err(StoreError::RestoreInProgress(_))
                ),
                "round {round}: {outcomes:?}"
            );
        }
        undone += restored;
        assert_eq!(
            std::fs::read(root.join(format!("f{round}.txt"))).unwrap(),
            old
        );
    }
    assert_eq!(undone, ROUNDS);
    assert_eq!(
        query_text(&url, "SELECT count(*)::text FROM clawsmith_restore_plans"),
        "0"
    );
    assert_eq!(
        query_text(
            &url,
            "SELECT count(*)::text FROM clawsmith_checkpoints WHERE state = 'undone'"
        ),
        ROUNDS.to_string()
    );
}
