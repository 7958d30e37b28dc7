//! Sessions, messages, events, todos, approvals, journal and artifacts.

use clawsmith_checkpoint::{
    JournalStart, PendingApproval, StoreError, Todo, TodoStatus, TurnOpening,
};
use clawsmith_protocol::{Event, ToolStatus};

use crate::support::{ManualClock, memory_store, turn_started, user};

fn todo(id: &str, status: TodoStatus) -> Todo {
    Todo {
        id: id.to_string(),
        content: format!("do {id}"),
        status,
    }
}

#[test]
fn sessions_are_listed_newest_first() {
    let clock = ManualClock::at(1_000);
    let store = clawsmith_checkpoint::Store::open_in_memory_with_clock(clock.clock()).unwrap();
    store.create_session("a", "/w").unwrap();
    clock.advance(10);
    store.create_session("b", "/w").unwrap();
    store.create_session("c", "/w").unwrap();
    let ids: Vec<String> = store
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["c", "b", "a"]);
    assert_eq!(
        store.get_session("a").unwrap().unwrap().created_at_ms,
        1_000
    );
    assert!(store.get_session("zzz").unwrap().is_none());
    assert!(matches!(
        store.create_session("a", "/w"),
        Err(StoreError::SessionExists(_))
    ));
}

#[test]
fn unknown_sessions_are_refused_everywhere() {
    let store = memory_store();
    let unknown = |result: Result<(), StoreError>| {
        assert!(
            matches!(result, Err(StoreError::UnknownSession(ref id)) if id == "nope"),
            "{result:?}"
        );
    };
    unknown(store.append_message("nope", &user("hi")).map(drop));
    unknown(store.messages("nope").map(drop));
    unknown(store.append_event("nope", turn_started("t"), 1).map(drop));
    unknown(store.events("nope").map(drop));
    unknown(store.set_todos("nope", Vec::new()));
    unknown(store.todos("nope").map(drop));
    unknown(
        store
            .begin_turn("nope", "t", TurnOpening::default())
            .map(drop),
    );
    unknown(store.put_artifact("nope", b"x").map(drop));
    unknown(store.fork_session("nope", "child").map(drop));
    unknown(store.journal_start(&JournalStart {
        session_id: "nope".into(),
        turn_id: "t".into(),
        call_id: "c".into(),
        tool_name: "write_file".into(),
        args_json: "{}".into(),
    }));
}

#[test]
fn messages_keep_order_and_tool_result_metadata() {
    let store = memory_store();
    store.create_session("s", "/w").unwrap();
    let tool_message: clawsmith_protocol::ModelMessage =
        serde_json::from_value(serde_json::json!({
            "role": "tool", "content": "Error: boom", "toolCallId": "c1", "toolName": "write_file",
            "toolResult": {"version": 1, "status": "error", "code": "tool_failed"}
        }))
        .unwrap();
    assert_eq!(store.append_message("s", &user("one")).unwrap(), 0);
    assert_eq!(store.append_message("s", &tool_message).unwrap(), 1);
    assert_eq!(
        store.messages("s").unwrap(),
        vec![user("one"), tool_message]
    );
}

#[test]
fn message_indices_are_gap_free_per_session_and_continue_after_a_fork() {
    let store = memory_store();
    store.create_session("a", "/w").unwrap();
    store.create_session("b", "/w").unwrap();
    let big = user(&"x".repeat(20_000));
    for expected in 0..50 {
        assert_eq!(store.append_message("a", &big).unwrap(), expected);
        if expected % 10 == 0 {
            assert_eq!(
                store.append_message("b", &user("b")).unwrap(),
                expected / 10
            );
        }
    }
    store.fork_session("a", "child").unwrap();
    assert_eq!(store.append_message("child", &user("next")).unwrap(), 50);
    assert_eq!(store.append_message("a", &user("next")).unwrap(), 50);
    assert_eq!(store.messages("child").unwrap().len(), 51);
    assert_eq!(store.messages("b").unwrap().len(), 5);
}

#[test]
fn events_get_gap_free_sequences_per_session() {
    let store = memory_store();
    store.create_session("a", "/w").unwrap();
    store.create_session("b", "/w").unwrap();
    for index in 0..3 {
        let event = store
            .append_event("a", turn_started(&format!("t{index}")), 100 + index)
            .unwrap();
        assert_eq!(event.sequence, index + 1);
        assert_eq!(event.session_id, "a");
    }
    assert_eq!(
        store
            .append_event("b", turn_started("x"), 7)
            .unwrap()
            .sequence,
        1
    );
    let events: Vec<Event> = store.events("a").unwrap();
    assert_eq!(
        events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(events[2].timestamp_ms, 102);
    assert_eq!(events[0].payload, turn_started("t0"));
}

#[test]
fn todos_round_trip_and_invalid_lists_are_refused() {
    let store = memory_store();
    store.create_session("s", "/w").unwrap();
    assert!(store.todos("s").unwrap().is_empty());
    let list = vec![
        todo("1", TodoStatus::Completed),
        todo("2", TodoStatus::InProgress),
        todo("3", TodoStatus::Pending),
    ];
    store.set_todos("s", list.clone()).unwrap();
    assert_eq!(store.todos("s").unwrap(), list);
    let invalid = [
        vec![
            todo("1", TodoStatus::InProgress),
            todo("2", TodoStatus::InProgress),
        ],
        vec![
            todo("1", TodoStatus::Pending),
            todo("1", TodoStatus::Pending),
        ],
        vec![todo("  ", TodoStatus::Pending)],
    ];
    for bad in invalid {
        assert!(
            matches!(
                store.set_todos("s", bad.clone()),
                Err(StoreError::InvalidTodos(_))
            ),
            "{bad:?}"
        );
        assert_eq!(
            store.todos("s").unwrap(),
            list,
            "a refused list changes nothing"
        );
    }
    let json = serde_json::to_value(todo("9", TodoStatus::InProgress)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"id": "9", "content": "do 9", "status": "in_progress"})
    );
}

#[test]
fn pending_approvals_are_stored_and_resolved() {
    let store = memory_store();
    store.create_session("s", "/w").unwrap();
    let approval = PendingApproval {
        approval_id: "ap1".into(),
        turn_id: "t1".into(),
        call_id: "c1".into(),
        request: serde_json::json!({"tool": "run_command"}),
    };
    store.add_pending_approval("s", &approval).unwrap();
    assert_eq!(store.pending_approvals("s").unwrap(), vec![approval]);
    assert!(store.resolve_pending_approval("s", "ap1").unwrap());
    assert!(!store.resolve_pending_approval("s", "ap1").unwrap());
    assert!(store.pending_approvals("s").unwrap().is_empty());
}

#[test]
fn the_journal_records_start_before_close() {
    let clock = ManualClock::at(50);
    let store = clawsmith_checkpoint::Store::open_in_memory_with_clock(clock.clock()).unwrap();
    store.create_session("s", "/w").unwrap();
    let start = |call: &str| JournalStart {
        session_id: "s".into(),
        turn_id: "t1".into(),
        call_id: call.into(),
        tool_name: "run_command".into(),
        args_json: r#"{"command":"make"}"#.into(),
    };
    store.journal_start(&start("c1")).unwrap();
    store.journal_start(&start("c2")).unwrap();
    assert!(
        store.journal_start(&start("c1")).is_err(),
        "a call is journaled once"
    );
    clock.advance(5);
    assert!(store.journal_close("s", "c1", ToolStatus::Success).unwrap());
    assert!(
        !store.journal_close("s", "c1", ToolStatus::Error).unwrap(),
        "closing twice changes nothing"
    );
    assert!(
        !store
            .journal_close("s", "unknown", ToolStatus::Error)
            .unwrap()
    );
    let unfinished = store.unfinished_calls("s").unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].call_id, "c2");
    assert_eq!(unfinished[0].args_json, r#"{"command":"make"}"#);
    let all = store.journal("s").unwrap();
    assert_eq!(all[0].status, Some(ToolStatus::Success));
    assert_eq!((all[0].started_at_ms, all[0].closed_at_ms), (50, Some(55)));
}

#[test]
fn close_call_closes_the_journal_stores_the_event_and_the_message_together() {
    use clawsmith_protocol::{EventPayload, ModelMessage, ToolCompleted, ToolExecutionResult};
    let store = memory_store();
    store.create_session("s", "/w").unwrap();
    store
        .journal_start(&JournalStart {
            session_id: "s".into(),
            turn_id: "t1".into(),
            call_id: "w1".into(),
            tool_name: "write_file".into(),
            args_json: "{}".into(),
        })
        .unwrap();
    store.append_event("s", turn_started("t1"), 1).unwrap();
    let result = ToolExecutionResult::success("written");
    let close = |call: &str, journaled: Option<(&str, ToolStatus)>| {
        store.close_call(
            "s",
            journaled,
            EventPayload::ToolCompleted(ToolCompleted::new(call, "t1", "write_file", &result)),
            7,
            &ModelMessage::tool_result(call, "write_file", "written", result.summary()),
        )
    };
    let event = close("w1", Some(("w1", ToolStatus::Success))).unwrap();
    assert_eq!(event.sequence, 2);
    assert!(store.unfinished_calls("s").unwrap().is_empty());
    assert_eq!(store.journal("s").unwrap()[0].closed_at_ms, Some(7));
    // A read call has no journal entry.
    assert_eq!(close("r1", None).unwrap().sequence, 3);
    let messages = store.messages("s").unwrap();
    let ids: Vec<_> = messages
        .iter()
        .map(|m| m.tool_call_id.clone().unwrap())
        .collect();
    assert_eq!(ids, ["w1", "r1"]);
    assert_eq!(store.events("s").unwrap().len(), 3);
    // An unknown session changes nothing.
    assert!(
        store
            .close_call(
                "nope",
                None,
                EventPayload::ToolCompleted(ToolCompleted::new("x", "t1", "write_file", &result)),
                7,
                &ModelMessage::tool_result("x", "write_file", "", result.summary()),
            )
            .is_err()
    );
    assert_eq!(store.messages("s").unwrap().len(), 2);
}

#[test]
fn start_call_stores_the_message_the_journal_entry_and_the_event_in_one_commit() {
    use clawsmith_protocol::{ModelMessage, ToolCall};
    let store = memory_store();
    store.create_session("s", "/w").unwrap();
    let call = |id: &str| ToolCall {
        id: id.into(),
        name: "write_file".into(),
        arguments: "{}".into(),
    };
    let assistant = ModelMessage::assistant_with_calls("", vec![call("w1"), call("w2")]);
    let journal = |id: &str| JournalStart {
        session_id: "s".into(),
        turn_id: "t1".into(),
        call_id: id.into(),
        tool_name: "write_file".into(),
        args_json: "{}".into(),
    };
    let event = store
        .start_call(
            "s",
            Some(&assistant),
            Some(&journal("w1")),
            turn_started("t1"),
            3,
        )
        .unwrap();
    assert_eq!((event.sequence, event.timestamp_ms), (1, 3));
    assert_eq!(
        store.messages("s").unwrap(),
        std::slice::from_ref(&assistant)
    );
    assert_eq!(store.unfinished_calls("s").unwrap()[0].call_id, "w1");
    // A second call of the batch: no message, a read (no journal entry).
    let event = store
        .start_call("s", None, None, turn_started("t1"), 4)
        .unwrap();
    assert_eq!(event.sequence, 2);
    // A journal entry that cannot be written (the call id again) stores nothing of the start:
    // neither the message it carried nor the event.
    let refused = store.start_call(
        "s",
        Some(&user("never stored")),
        Some(&journal("w1")),
        turn_started("t1"),
        5,
    );
    assert!(
        matches!(refused, Err(StoreError::Sqlite { .. })),
        "{refused:?}"
    );
    assert_eq!(store.messages("s").unwrap().len(), 1);
    assert_eq!(store.last_event_sequence("s").unwrap(), 2);
    assert_eq!(store.journal("s").unwrap().len(), 1);
    // A journal entry naming another session is refused the same way.
    let mut elsewhere = journal("w2");
    elsewhere.session_id = "other".into();
    assert!(matches!(
        store.start_call("s", None, Some(&elsewhere), turn_started("t1"), 6),
        Err(StoreError::UnknownSession(id)) if id == "other"
    ));
    assert!(matches!(
        store.start_call("nope", None, None, turn_started("t1"), 6),
        Err(StoreError::UnknownSession(_))
    ));
    assert_eq!(store.last_event_sequence("s").unwrap(), 2);
}

#[test]
fn a_turn_begins_and_finishes_with_its_events_in_the_same_commits() {
    use clawsmith_protocol::{EventPayload, TurnCompleted};
    let fixture = crate::support::Fixture::new();
    let store = &fixture.store;
    store.append_message("s", &user("hello")).unwrap();
    let started = store
        .begin_turn(
            "s",
            "t1",
            TurnOpening {
                events: vec![turn_started("t1")],
                timestamp_ms: 9,
            },
        )
        .unwrap()
        .events
        .remove(0);
    let checkpoint = store.checkpoint("s", "t1").unwrap();
    // The checkpoint records the history before its own `turn.started`: undo removes both.
    assert_eq!(checkpoint.event_sequence + 1, started.sequence);
    assert_eq!(checkpoint.message_count, 1);
    // A turn id is begun once: the refusal stores no event either.
    assert!(matches!(
        store.begin_turn(
            "s",
            "t1",
            TurnOpening {
                events: vec![turn_started("t1")],
                timestamp_ms: 10
            }
        ),
        Err(StoreError::TurnExists { .. })
    ));
    assert_eq!(store.last_event_sequence("s").unwrap(), started.sequence);
    fixture.write_initial("a.txt", b"one\n", 0o644);
    fixture.edit("t1", "a.txt", b"one\ntwo\n");
    let completed = EventPayload::TurnCompleted(TurnCompleted {
        turn_id: "t1".into(),
        tool_calls: 1,
    });
    let (manifest, event) = store
        .finish_turn_with_event("s", "t1", &fixture.workspace, completed.clone(), 11)
        .unwrap();
    assert_eq!(event.sequence, started.sequence + 1);
    assert_eq!(manifest.files.len(), 1);
    assert_eq!(
        (
            manifest.files[0].lines_added,
            manifest.files[0].lines_removed
        ),
        (Some(1), Some(0))
    );
    assert_eq!(
        store.checkpoint("s", "t1").unwrap().state,
        clawsmith_checkpoint::CheckpointState::Finished
    );
    // An unknown turn fails and stores no event.
    assert!(
        store
            .finish_turn_with_event("s", "t9", &fixture.workspace, completed, 12)
            .is_err()
    );
    assert_eq!(store.last_event_sequence("s").unwrap(), event.sequence);
}

#[test]
fn artifacts_are_session_scoped() {
    let store = memory_store();
    store.create_session("a", "/w").unwrap();
    store.create_session("b", "/w").unwrap();
    let content = b"line 1\nline 2\nline 3";
    let reference = store.put_artifact("a", content).unwrap();
    assert_eq!(reference.bytes, content.len() as u64);
    assert_eq!(reference.lines, Some(3));
    assert_eq!(
        reference.sha256.as_deref(),
        Some(clawsmith_checkpoint::hash_hex(&clawsmith_checkpoint::sha256(content)).as_str())
    );
    assert_eq!(
        store.put_artifact("a", content).unwrap(),
        reference,
        "same content, same reference"
    );
    assert_eq!(
        store
            .read_artifact("a", &reference.artifact_id)
            .unwrap()
            .as_deref(),
        Some(&content[..])
    );
    assert_eq!(
        store.read_artifact("b", &reference.artifact_id).unwrap(),
        None,
        "other sessions are refused"
    );
    assert_eq!(store.read_artifact("a", "art_unknown").unwrap(), None);
}
