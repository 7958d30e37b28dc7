//! Forward migrations keep what an older file holds.

use clawsmith_checkpoint::{JournalStart, Store, StoreError};
use clawsmith_protocol::ToolStatus;
use rusqlite::Connection;

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
             DROP INDEX events_kind; DROP INDEX restore_plans_session;
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
