//! Forward migrations keep what an older file holds.

use std::time::Duration;

use clawsmith_checkpoint::{JournalStart, RetentionPolicy, Store, StoreError, TurnOpening};
use clawsmith_protocol::{
    Event, EventPayload, ModelMessage, ToolCompleted, ToolExecutionResult, ToolStatus,
};
use rusqlite::Connection;

use crate::support::{BEFORE_VERSION_14, EVENTS_KIND_13, turn_started, user};

fn start(turn: &str, call: &str) -> JournalStart {
    JournalStart {
        session_id: "s".to_owned(),
        turn_id: turn.to_owned(),
        call_id: call.to_owned(),
        tool_name: "write_file".to_owned(),
        args_json: "{}".to_owned(),
    }
}

/// A version-2 file (journal keyed by session and call id) with one closed and one open entry
/// opens as the current version with both entries kept, and then takes the same call id in a
/// later turn (providers number calls per turn) but not twice in one turn.
#[test]
fn version_2_journal_rows_survive_and_call_ids_become_per_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let store = Store::open(&path).unwrap();
        store.create_session("s", "/w").unwrap();
        store.journal_start(&start("t1", "call_0")).unwrap();
        store
            .journal_close("s", "call_0", ToolStatus::Success)
            .unwrap();
        store.journal_start(&start("t1", "call_1")).unwrap();
    }
    {
        // Turn the file back into version 2: the journal's old key, no later indexes or columns,
        // the old version number. The
        // migrations after V3 run again on this file; they only add indexes `IF NOT EXISTS`. A
        // later migration that cannot run twice must be undone here as well.
        #[allow(clippy::disallowed_methods)] // The test plays the part of an older build.
        let raw = Connection::open(&path).unwrap();
        raw.execute_batch(BEFORE_VERSION_14).unwrap();
        raw.execute_batch(
            "CREATE TABLE journal_v2 (
                 session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                 call_id TEXT NOT NULL, turn_id TEXT NOT NULL, tool_name TEXT NOT NULL,
                 args_json TEXT NOT NULL, started_at INTEGER NOT NULL, closed_at INTEGER,
                 status TEXT, PRIMARY KEY (session_id, call_id));
             INSERT INTO journal_v2 SELECT session_id, call_id, turn_id, tool_name, args_json,
                 started_at, closed_at, status FROM journal ORDER BY rowid;
             DROP TABLE journal;
             ALTER TABLE journal_v2 RENAME TO journal;
             DROP INDEX restore_plans_session;
             DROP INDEX checkpoints_state; ALTER TABLE events DROP COLUMN message_idx;
             ALTER TABLE checkpoint_files DROP COLUMN origin;
             ALTER TABLE checkpoint_files DROP COLUMN call_id;
             ALTER TABLE events DROP COLUMN display_body_in_message;
             ALTER TABLE blobs DROP COLUMN in_file;
             PRAGMA user_version = 2;",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let journal = store.journal("s").unwrap();
    let kept: Vec<(&str, &str, Option<ToolStatus>)> = journal
        .iter()
        .map(|entry| (entry.turn_id.as_str(), entry.call_id.as_str(), entry.status))
        .collect();
    assert_eq!(
        kept,
        [
            ("t1", "call_0", Some(ToolStatus::Success)),
            ("t1", "call_1", None)
        ]
    );
    assert_eq!(store.unfinished_calls("s").unwrap().len(), 1);
    // (turn, call id, accepted)
    let table = [
        ("t2", "call_0", true),
        ("t2", "call_1", true),
        ("t2", "call_0", false),
    ];
    for (turn, call, accepted) in table {
        let outcome = store.journal_start(&start(turn, call));
        assert_eq!(outcome.is_ok(), accepted, "{turn} {call}: {outcome:?}");
        if let Err(error) = outcome {
            assert!(matches!(error, StoreError::Sqlite { .. }), "{error:?}");
        }
        assert!(store.journal_has_call("s", turn, call).unwrap());
    }
    assert!(!store.journal_has_call("s", "t3", "call_0").unwrap());
}

/// Every message and event of a session, as the store reads them.
fn history(store: &Store, session: &str) -> (Vec<ModelMessage>, Vec<Event>) {
    (
        store.messages(session).unwrap(),
        store.events(session).unwrap(),
    )
}

/// A read call's close: its `tool.completed` stored with its tool message (linked to it).
fn close_read(store: &Store, session: &str, call: &str, text: &str) {
    let result = ToolExecutionResult::success(text.to_owned());
    let completed =
        EventPayload::ToolCompleted(ToolCompleted::new(call, "t1", "read_file", &result));
    let message =
        ModelMessage::tool_result(call, "read_file", result.content.clone(), result.summary());
    store
        .close_call(session, None, completed, 7, &message)
        .unwrap();
}

/// A version-13 file (messages and events keyed by `(session_id, idx/sequence)` with a separate
/// key index) opens as version 14 with every session's history as it was — messages, events, a
/// `tool.completed`'s text from its message, pages, the last event of a kind — and the moved
/// rows take appends, a fork and a session's removal; the old tables' shape is still there to
/// query by hand (views).
#[test]
fn version_13_histories_move_to_tables_keyed_by_one_integer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let store = Store::open(&path).unwrap();
        for (session, size) in [("a", 5_000), ("b", 12_000)] {
            store.create_session(session, "/w").unwrap();
            store.append_message(session, &user("hello")).unwrap();
            close_read(&store, session, "c1", &"x".repeat(size));
            store.append_event(session, turn_started("t2"), 8).unwrap();
            close_read(&store, session, "c2", "short");
        }
        store
            .begin_turn(
                "a",
                "t3",
                TurnOpening {
                    events: vec![turn_started("t3")],
                    timestamp_ms: 9,
                },
            )
            .unwrap();
    }
    let before: Vec<_> = {
        let store = Store::open(&path).unwrap();
        ["a", "b"].map(|session| history(&store, session)).into()
    };
    assert_eq!(before[0].1.len(), 4);
    assert_eq!(before[1].0[1].content.len(), 12_000);
    {
        #[allow(clippy::disallowed_methods)] // The test plays the part of an older build.
        let raw = Connection::open(&path).unwrap();
        raw.execute_batch(&format!(
            "{BEFORE_VERSION_14} {EVENTS_KIND_13} PRAGMA user_version = 13;"
        ))
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(
        ["a", "b"].map(|session| history(&store, session)).to_vec(),
        before
    );
    assert_eq!(store.events_page("b", 1, 2).unwrap(), before[1].1[1..3]);
    assert_eq!(store.messages_page("b", 1, 1).unwrap(), before[1].0[1..2]);
    let last = |session: &str, kind: &str| {
        store
            .last_event_of_kind(session, kind)
            .unwrap()
            .map(|event| event.sequence)
    };
    // (session, kind, sequence): by the partial index, and by the walk of the key.
    let table = [
        ("a", "turn.started", Some(4)),
        ("a", "tool.completed", Some(3)),
        ("b", "turn.started", Some(2)),
        ("b", "model.request", None),
        ("nobody", "turn.started", None),
    ];
    for (session, kind, sequence) in table {
        assert_eq!(last(session, kind), sequence, "{session} {kind}");
    }
    assert_eq!(store.last_event_sequence("b").unwrap(), 3);
    // Appends continue each session's numbering.
    assert_eq!(store.append_message("b", &user("more")).unwrap(), 3);
    assert_eq!(
        store
            .append_event("b", turn_started("t4"), 10)
            .unwrap()
            .sequence,
        4
    );
    assert_eq!(store.messages("a").unwrap(), before[0].0);
    // A fork copies the moved rows; the new session gets a number of its own.
    store.fork_session("a", "c").unwrap();
    let (messages, events) = history(&store, "c");
    assert_eq!(messages, before[0].0);
    assert_eq!(events.len(), before[0].1.len());
    assert!(events.iter().all(|event| event.session_id == "c"));
    assert_eq!(history(&store, "a"), before[0]);
    // Removing a session (prune: "b" has no open turn) removes its rows and nothing else.
    let report = store
        .prune(
            &RetentionPolicy {
                keep_last: 0,
                max_age: Duration::ZERO,
                ..RetentionPolicy::default()
            },
            store.now_ms() + 1000,
            false,
        )
        .unwrap();
    assert!(report.sessions.contains(&"b".to_owned()), "{report:?}");
    assert!(store.get_session("b").unwrap().is_none());
    assert_eq!(history(&store, "a"), before[0]);
    drop(store);
    #[allow(clippy::disallowed_methods)] // The file is inspected as a person would.
    let raw = Connection::open(&path).unwrap();
    let count = |sql: &str| -> i64 { raw.query_row(sql, [], |row| row.get(0)).unwrap() };
    assert_eq!(
        count("SELECT count(*) FROM messages WHERE session_id = 'b'"),
        0
    );
    assert_eq!(
        count("SELECT count(*) FROM events WHERE session_id = 'b'"),
        0
    );
    assert_eq!(
        count("SELECT count(*) FROM message_rows") + count("SELECT count(*) FROM event_rows"),
        count("SELECT count(*) FROM messages") + count("SELECT count(*) FROM events"),
        "no row is left without its session"
    );
    assert_eq!(
        count("SELECT max(idx) FROM messages WHERE session_id = 'a'"),
        i64::try_from(before[0].0.len()).unwrap() - 1
    );
}

/// The views `messages` and `events` take rows as the tables of versions 1 to 13 did (scripts
/// and tests write them by hand), refusing a row the keys cannot hold.
#[test]
fn the_old_table_shapes_take_rows_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = Store::open(&path).unwrap();
    store.create_session("s", "/w").unwrap();
    store.append_message("s", &user("first")).unwrap();
    #[allow(clippy::disallowed_methods)] // The file is written as a script would.
    let raw = Connection::open(&path).unwrap();
    let message = serde_json::to_string(&user("by hand")).unwrap();
    raw.execute(
        "INSERT INTO messages (session_id, idx, message_json) VALUES ('s', 1, ?1)",
        [&message],
    )
    .unwrap();
    raw.execute(
        "INSERT INTO events (session_id, sequence, type, timestamp_ms, event_json)
         VALUES ('s', 1, 'turn.started', 5, ?1)",
        [r#"{"sessionId":"s","sequence":1,"timestampMs":5,"type":"turn.started","turnId":"t"}"#],
    )
    .unwrap();
    raw.execute(
        "UPDATE events SET timestamp_ms = 4 WHERE session_id = 's'",
        [],
    )
    .unwrap();
    assert_eq!(
        store.messages("s").unwrap(),
        [user("first"), user("by hand")]
    );
    let events = store.events("s").unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(
        store
            .append_event("s", turn_started("t2"), 6)
            .unwrap()
            .sequence,
        2
    );
    // (statement, the refusal's message)
    let refused = [
        (
            "INSERT INTO messages (session_id, idx, message_json) VALUES ('nobody', 0, '{}')",
            "messages: no such session",
        ),
        (
            "INSERT INTO messages (session_id, idx, message_json) VALUES ('s', -1, '{}')",
            "messages: idx must be an integer from 0 to 4294967295",
        ),
        (
            "INSERT INTO events (session_id, sequence, type, timestamp_ms, event_json)
             VALUES ('s', 4294967296, 'turn.started', 1, '{}')",
            "events: sequence must be an integer from 0 to 4294967295",
        ),
        (
            "UPDATE events SET sequence = 9 WHERE session_id = 's'",
            "events: session_id and sequence cannot be changed",
        ),
    ];
    for (sql, message) in refused {
        let error = raw.execute(sql, []).unwrap_err();
        assert!(error.to_string().contains(message), "{sql}: {error}");
    }
    assert_eq!(store.messages("s").unwrap().len(), 2);
    assert_eq!(store.events("s").unwrap().len(), 2);
    raw.execute(
        "DELETE FROM messages WHERE session_id = 's' AND idx = 1",
        [],
    )
    .unwrap();
    assert_eq!(store.messages("s").unwrap(), [user("first")]);
}
