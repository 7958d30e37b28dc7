//! Turn checkpoints through the recorder (K1, K7).

use std::sync::Arc;

use clawsmith_checkpoint::{
    ChangeKind, CheckpointRecorder, CheckpointState, Store, StoreError, Todo, TodoStatus,
    TurnOpening,
};
use clawsmith_fs::{ChangeRecorder, PriorState};

use crate::support::{Fixture, turn_started, user};

#[test]
fn begin_turn_records_counts_and_todos() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    store.append_message("s", &user("hello")).unwrap();
    store.append_event("s", turn_started("t0"), 1).unwrap();
    let todos = vec![Todo {
        id: "1".into(),
        content: "x".into(),
        status: TodoStatus::InProgress,
    }];
    store.set_todos("s", todos.clone()).unwrap();
    let checkpoint = store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap()
        .checkpoint;
    assert_eq!(
        (checkpoint.message_count, checkpoint.event_sequence),
        (1, 1)
    );
    assert_eq!(checkpoint.todos, todos);
    assert_eq!(checkpoint.state, CheckpointState::Open);
    assert!(matches!(
        store.begin_turn("s", "t1", TurnOpening::default()),
        Err(StoreError::TurnExists { .. })
    ));
    assert!(matches!(
        store.checkpoint("s", "nope"),
        Err(StoreError::UnknownTurn { .. })
    ));
}

#[test]
fn the_recorder_keeps_the_first_prior_state_and_the_last_post_state() {
    let fixture = Fixture::new();
    fixture.write_initial("a.txt", b"one\ntwo\n", 0o644);
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.edit("t1", "a.txt", b"one\nTWO\n");
    fixture.edit("t1", "a.txt", b"one\nTWO\nthree\n");
    fixture.create("t1", "new.txt", b"fresh\n");
    let manifest = fixture.finish("t1");
    assert_eq!(manifest.files.len(), 2);
    let a = &manifest.files[0];
    assert_eq!((a.path.as_str(), a.kind), ("a.txt", ChangeKind::Modified));
    assert_eq!((a.bytes_before, a.bytes_after), (8, 14));
    assert_eq!((a.lines_added, a.lines_removed), (Some(2), Some(1)));
    let new = &manifest.files[1];
    assert_eq!(
        (new.path.as_str(), new.kind, new.lines_added),
        ("new.txt", ChangeKind::Added, Some(1))
    );
    assert_eq!(
        fixture.store.change_list("s", "t1").unwrap(),
        manifest.files
    );
    let checkpoint = fixture.store.checkpoint("s", "t1").unwrap();
    assert_eq!(
        (checkpoint.state, checkpoint.file_count),
        (CheckpointState::Finished, 2)
    );
    // Finishing again returns the same manifest.
    assert_eq!(fixture.finish("t1"), manifest);
}

#[test]
fn the_recorder_refuses_finished_turns_and_unknown_sessions() {
    let fixture = Fixture::new();
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.finish("t1");
    let recorder = CheckpointRecorder::new(fixture.store.clone());
    let cases = [
        ("s", "t1", "is finished"),
        ("ghost", "t9", "unknown session"),
    ];
    for (session, turn, expected) in cases {
        let error = recorder
            .before_change(
                &crate::support::origin(session, turn),
                "a.txt",
                &PriorState::Absent,
            )
            .unwrap_err();
        assert_eq!(error.path, "a.txt");
        assert!(error.message.contains(expected), "{}", error.message);
    }
}

#[test]
fn a_change_without_begin_turn_opens_the_turn_implicitly() {
    let fixture = Fixture::new();
    fixture.create("implicit", "x.txt", b"x");
    assert_eq!(
        fixture.store.checkpoint("s", "implicit").unwrap().state,
        CheckpointState::Open
    );
    assert_eq!(fixture.finish("implicit").files.len(), 1);
}

#[test]
fn after_change_without_before_change_is_refused() {
    let fixture = Fixture::new();
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    let error = fixture
        .store
        .record_after("s", "t1", "x.txt", None)
        .unwrap_err();
    assert!(
        error.to_string().contains("without its prior state"),
        "{error}"
    );
    let _: &Arc<Store> = CheckpointRecorder::new(fixture.store.clone()).store();
}
