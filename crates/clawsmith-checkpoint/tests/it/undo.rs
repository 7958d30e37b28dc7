//! Safe undo (K2, K7): round trips, conflicts, scopes, repeated undo.

use clawsmith_checkpoint::{
    CheckpointState, PendingApproval, Todo, TodoStatus, TurnOpening, UndoOutcome, UndoScope,
};

use crate::support::{Fixture, turn_started, user};

fn todo(id: &str, status: TodoStatus) -> Todo {
    Todo {
        id: id.into(),
        content: id.into(),
        status,
    }
}

/// A tree with an executable script, a read-only file and a nested file.
fn seeded() -> Fixture {
    let fixture = Fixture::new();
    fixture.write_initial("edit.txt", b"alpha\nbeta\n", 0o644);
    fixture.write_initial("bin/run.sh", b"#!/bin/sh\necho hi\n", 0o755);
    fixture.write_initial("docs/old-name.md", b"# Title\n", 0o600);
    fixture.write_initial("gone.txt", b"delete me\n", 0o640);
    fixture
}

/// One turn that creates, edits (twice), renames and deletes.
fn busy_turn(fixture: &Fixture, turn: &str) {
    fixture
        .store
        .begin_turn("s", turn, TurnOpening::default())
        .unwrap();
    fixture.create(turn, "src/new.rs", b"fn main() {}\n");
    fixture.edit(turn, "edit.txt", b"alpha\nBETA\n");
    fixture.edit(turn, "bin/run.sh", b"#!/bin/sh\necho bye\n");
    fixture.edit(turn, "edit.txt", b"alpha\nBETA\ngamma\n");
    fixture.rename(turn, "docs/old-name.md", "docs/new-name.md");
    fixture.delete(turn, "gone.txt");
    fixture.finish(turn);
}

#[test]
fn files_undo_restores_the_tree_byte_for_byte_with_modes() {
    let fixture = seeded();
    let before = fixture.tree();
    busy_turn(&fixture, "t1");
    assert_ne!(fixture.tree(), before);
    let report = fixture
        .store
        .undo("s", "t1", UndoScope::Files, &fixture.workspace)
        .unwrap();
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert_eq!(report.turns, ["t1"]);
    assert_eq!(fixture.tree(), before);
    let mut removed = report.removed.clone();
    removed.sort();
    assert_eq!(removed, ["docs/new-name.md", "src/new.rs"]);
    let checkpoint = fixture.store.checkpoint("s", "t1").unwrap();
    assert_eq!(checkpoint.state, CheckpointState::Undone);
    assert!(checkpoint.files_undone && !checkpoint.session_undone);
    // History is kept: the change list still shows what happened.
    assert_eq!(fixture.store.change_list("s", "t1").unwrap().len(), 6);
}

#[test]
fn all_undo_also_restores_messages_events_todos_and_clears_approvals() {
    let fixture = seeded();
    let store = &fixture.store;
    store.append_message("s", &user("first")).unwrap();
    store.append_event("s", turn_started("t0"), 1).unwrap();
    store
        .set_todos("s", vec![todo("a", TodoStatus::InProgress)])
        .unwrap();
    let before_tree = fixture.tree();
    let (messages, events, todos) = (
        store.messages("s").unwrap(),
        store.events("s").unwrap(),
        store.todos("s").unwrap(),
    );

    assert!(store.undone_history("s").unwrap().is_empty());
    busy_turn(&fixture, "t1");
    store.append_message("s", &user("do things")).unwrap();
    store.append_event("s", turn_started("t1"), 2).unwrap();
    let (turn_messages, turn_events) = (
        store.messages("s").unwrap()[messages.len()..].to_vec(),
        store.events("s").unwrap()[events.len()..].to_vec(),
    );
    store
        .set_todos(
            "s",
            vec![
                todo("a", TodoStatus::Completed),
                todo("b", TodoStatus::InProgress),
            ],
        )
        .unwrap();
    store
        .add_pending_approval(
            "s",
            &PendingApproval {
                approval_id: "ap".into(),
                turn_id: "t1".into(),
                call_id: "c".into(),
                request: serde_json::json!({}),
            },
        )
        .unwrap();

    let report = store
        .undo("s", "t1", UndoScope::All, &fixture.workspace)
        .unwrap();
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert_eq!(fixture.tree(), before_tree);
    assert_eq!(store.messages("s").unwrap(), messages);
    assert_eq!(store.events("s").unwrap(), events);
    assert_eq!(store.todos("s").unwrap(), todos);
    assert!(store.pending_approvals("s").unwrap().is_empty());
    // What the rewind took out is kept for the audit trail, as it was, with how it was undone.
    let undone = store.undone_history("s").unwrap();
    assert_eq!(undone.len(), 1);
    assert_eq!(
        (undone[0].turn_id.as_str(), undone[0].scope.as_str()),
        ("t1", "all")
    );
    assert_eq!(undone[0].messages, turn_messages);
    assert_eq!(undone[0].events, turn_events);
    assert_eq!(undone[0].events[0].sequence, 2);
    // The next event continues the sequence without a gap.
    assert_eq!(
        store
            .append_event("s", turn_started("t2"), 3)
            .unwrap()
            .sequence,
        2
    );
    let checkpoint = store.checkpoint("s", "t1").unwrap();
    assert!(checkpoint.files_undone && checkpoint.session_undone);
}

#[test]
fn session_undo_leaves_files_alone() {
    let fixture = seeded();
    fixture.store.append_message("s", &user("first")).unwrap();
    busy_turn(&fixture, "t1");
    fixture.store.append_message("s", &user("second")).unwrap();
    let after_turn = fixture.tree();
    let report = fixture
        .store
        .undo("s", "t1", UndoScope::Session, &fixture.workspace)
        .unwrap();
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert_eq!(fixture.tree(), after_turn);
    assert_eq!(fixture.store.messages("s").unwrap(), vec![user("first")]);
    // Files can still be undone afterwards; the session part is already done.
    let again = fixture
        .store
        .undo("s", "t1", UndoScope::Session, &fixture.workspace)
        .unwrap();
    assert_eq!(again.outcome, UndoOutcome::AlreadyUndone);
    // The history the rewind took out is kept once (the repeated undo changed nothing); a files
    // undo rewinds no history and keeps none.
    let kept = |fixture: &Fixture| fixture.store.undone_history("s").unwrap();
    assert_eq!(kept(&fixture).len(), 1);
    assert_eq!(kept(&fixture)[0].messages, vec![user("second")]);
    assert_eq!(kept(&fixture)[0].scope, "session");
    let files = fixture
        .store
        .undo("s", "t1", UndoScope::All, &fixture.workspace)
        .unwrap();
    assert_eq!(files.outcome, UndoOutcome::Undone);
    assert!(files.restored.contains(&"edit.txt".to_string()));
    assert_eq!(kept(&fixture).len(), 1);
}

#[test]
fn a_user_edit_after_the_turn_refuses_the_whole_undo() {
    let fixture = seeded();
    busy_turn(&fixture, "t1");
    // The user edits one file the turn wrote and recreates the one it deleted.
    fixture.write_initial("edit.txt", b"user's own words\n", 0o644);
    fixture.write_initial("gone.txt", b"back again\n", 0o644);
    let before_undo = fixture.tree();
    let report = fixture
        .store
        .undo("s", "t1", UndoScope::All, &fixture.workspace)
        .unwrap();
    let UndoOutcome::Conflicts(conflicts) = &report.outcome else {
        panic!("expected conflicts, got {:?}", report.outcome);
    };
    let mut paths: Vec<&str> = conflicts
        .iter()
        .map(|conflict| conflict.path.as_str())
        .collect();
    paths.sort();
    assert_eq!(paths, ["edit.txt", "gone.txt"]);
    let gone = conflicts.iter().find(|c| c.path == "gone.txt").unwrap();
    assert_eq!(gone.expected_sha256, None);
    assert!(gone.reason.contains("created after"), "{}", gone.reason);
    assert_eq!(fixture.tree(), before_undo, "no file changed");
    assert!(report.restored.is_empty() && report.removed.is_empty());
    assert_eq!(
        fixture.store.checkpoint("s", "t1").unwrap().state,
        CheckpointState::Finished
    );
    assert!(fixture.store.pending_restores().unwrap().is_empty());
}

#[test]
fn a_directory_in_place_of_a_file_is_a_conflict() {
    let fixture = seeded();
    busy_turn(&fixture, "t1");
    std::fs::remove_file(fixture.root().join("src/new.rs")).unwrap();
    std::fs::create_dir(fixture.root().join("src/new.rs")).unwrap();
    let report = fixture
        .store
        .undo("s", "t1", UndoScope::Files, &fixture.workspace)
        .unwrap();
    let UndoOutcome::Conflicts(conflicts) = report.outcome else {
        panic!("expected a conflict")
    };
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].path, "src/new.rs");
}

#[test]
fn undo_rewinds_every_later_turn_newest_first() {
    let fixture = seeded();
    let initial = fixture.tree();
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.edit("t1", "edit.txt", b"one\n");
    fixture.finish("t1");
    let after_t1 = fixture.tree();
    fixture
        .store
        .begin_turn("s", "t2", TurnOpening::default())
        .unwrap();
    fixture.edit("t2", "edit.txt", b"two\n");
    fixture.create("t2", "t2.txt", b"2");
    fixture.finish("t2");
    fixture
        .store
        .begin_turn("s", "t3", TurnOpening::default())
        .unwrap();
    fixture.delete("t3", "edit.txt");
    fixture.finish("t3");

    let report = fixture
        .store
        .undo("s", "t2", UndoScope::Files, &fixture.workspace)
        .unwrap();
    assert_eq!(report.turns, ["t3", "t2"]);
    assert_eq!(fixture.tree(), after_t1);
    assert_eq!(
        fixture
            .store
            .undo("s", "t3", UndoScope::Files, &fixture.workspace)
            .unwrap()
            .outcome,
        UndoOutcome::AlreadyUndone
    );
    let report = fixture
        .store
        .undo("s", "t1", UndoScope::Files, &fixture.workspace)
        .unwrap();
    assert_eq!(report.turns, ["t1"], "undone turns are not undone twice");
    assert_eq!(fixture.tree(), initial);
}

#[test]
fn a_user_edit_between_two_turns_is_never_overwritten() {
    let fixture = seeded();
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.edit("t1", "edit.txt", b"agent one\n");
    fixture.finish("t1");
    fixture.write_initial("edit.txt", b"user between\n", 0o644);
    fixture
        .store
        .begin_turn("s", "t2", TurnOpening::default())
        .unwrap();
    fixture.edit("t2", "edit.txt", b"agent two\n");
    fixture.finish("t2");
    let before = fixture.tree();
    let report = fixture
        .store
        .undo("s", "t1", UndoScope::Files, &fixture.workspace)
        .unwrap();
    let UndoOutcome::Conflicts(conflicts) = report.outcome else {
        panic!("expected a conflict")
    };
    assert_eq!(
        (conflicts[0].path.as_str(), conflicts[0].turn_id.as_str()),
        ("edit.txt", "t1")
    );
    assert_eq!(fixture.tree(), before);
    // Undoing only t2 brings the user's text back.
    fixture
        .store
        .undo("s", "t2", UndoScope::Files, &fixture.workspace)
        .unwrap();
    assert_eq!(
        std::fs::read(fixture.root().join("edit.txt")).unwrap(),
        b"user between\n"
    );
}

#[test]
fn unknown_turns_and_sessions_are_errors() {
    let fixture = seeded();
    assert!(
        fixture
            .store
            .undo("s", "nope", UndoScope::Files, &fixture.workspace)
            .is_err()
    );
    assert!(
        fixture
            .store
            .undo("ghost", "t1", UndoScope::Files, &fixture.workspace)
            .is_err()
    );
    assert!(matches!(
        fixture.store.undone_history("ghost"),
        Err(clawsmith_checkpoint::StoreError::UnknownSession(_))
    ));
}
