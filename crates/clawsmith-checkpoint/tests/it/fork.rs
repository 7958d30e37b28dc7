//! Fork (K6): a child copies the parent's history and checkpoint metadata and shares blobs.

use clawsmith_checkpoint::{CheckpointState, StoreError, TurnOpening, UndoOutcome, UndoScope};

use crate::support::{Fixture, turn_started, user};

#[test]
fn a_fork_copies_history_todos_and_checkpoints() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    store.append_message("s", &user("hi")).unwrap();
    store.append_event("s", turn_started("t1"), 5).unwrap();
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.create("t1", "a.txt", b"a");
    fixture.finish("t1");
    let child = store.fork_session("s", "child").unwrap();
    assert_eq!(child.parent_id.as_deref(), Some("s"));
    assert_eq!(
        store.messages("child").unwrap(),
        store.messages("s").unwrap()
    );
    let events = store.events("child").unwrap();
    assert_eq!(
        (
            events.len(),
            events[0].session_id.as_str(),
            events[0].sequence
        ),
        (1, "child", 1)
    );
    assert_eq!(
        store
            .append_event("child", turn_started("c"), 6)
            .unwrap()
            .sequence,
        2
    );
    assert_eq!(
        store.change_list("child", "t1").unwrap(),
        store.change_list("s", "t1").unwrap()
    );
    assert!(matches!(
        store.fork_session("s", "child"),
        Err(StoreError::SessionExists(_))
    ));
    assert!(matches!(
        store.fork_session("ghost", "x"),
        Err(StoreError::UnknownSession(_))
    ));
}

#[test]
fn undo_in_the_child_leaves_the_parents_restore_points_alone() {
    let fixture = Fixture::new();
    fixture.write_initial("a.txt", b"base\n", 0o644);
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.edit("t1", "a.txt", b"agent\n");
    fixture.finish("t1");
    fixture.store.fork_session("s", "child").unwrap();
    let report = fixture
        .store
        .undo("child", "t1", UndoScope::Files, &fixture.workspace)
        .unwrap();
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert_eq!(
        std::fs::read(fixture.root().join("a.txt")).unwrap(),
        b"base\n"
    );
    assert_eq!(
        fixture.store.checkpoint("child", "t1").unwrap().state,
        CheckpointState::Undone
    );
    assert_eq!(
        fixture.store.checkpoint("s", "t1").unwrap().state,
        CheckpointState::Finished
    );
    // The parent's undo meets a file the child's undo already put back: it holds what the
    // parent's undo would write, so it is no conflict and nothing is written to it.
    let report = fixture
        .store
        .undo("s", "t1", UndoScope::Files, &fixture.workspace)
        .unwrap();
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert_eq!(report.already_as_before, ["a.txt"]);
    assert!(report.restored.is_empty(), "{report:?}");
    assert_eq!(
        std::fs::read(fixture.root().join("a.txt")).unwrap(),
        b"base\n"
    );
}

#[test]
fn a_file_changed_by_a_sibling_branch_is_refused() {
    let fixture = Fixture::new();
    fixture.write_initial("a.txt", b"base\n", 0o644);
    fixture.store.fork_session("s", "child").unwrap();
    fixture
        .store
        .begin_turn("s", "p1", TurnOpening::default())
        .unwrap();
    fixture.edit("p1", "a.txt", b"parent\n");
    fixture.finish("p1");
    // The child's turn works in the same directory after the parent's.
    fixture
        .store
        .begin_turn("child", "c1", TurnOpening::default())
        .unwrap();
    {
        use clawsmith_fs::ChangeRecorder;
        let origin = crate::support::origin("child", "c1");
        let path = fixture.workspace.resolve("a.txt").unwrap();
        let prior = fixture.workspace.read_state(&path).unwrap();
        fixture
            .recorder
            .before_change(&origin, "a.txt", &prior)
            .unwrap();
        fixture
            .workspace
            .restore_file(&path, b"child\n", 0o644, false)
            .unwrap();
        let post = clawsmith_fs::PostState::File {
            sha256: clawsmith_checkpoint::sha256(b"child\n"),
            size: 6,
            mode: 0o644,
        };
        fixture
            .recorder
            .after_change(&origin, "a.txt", &post)
            .unwrap();
    }
    fixture
        .store
        .finish_turn("child", "c1", &fixture.workspace)
        .unwrap();
    let report = fixture
        .store
        .undo("s", "p1", UndoScope::Files, &fixture.workspace)
        .unwrap();
    assert!(
        matches!(report.outcome, UndoOutcome::Conflicts(_)),
        "{:?}",
        report.outcome
    );
    assert_eq!(
        std::fs::read(fixture.root().join("a.txt")).unwrap(),
        b"child\n"
    );
}
