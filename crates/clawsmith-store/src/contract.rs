//! The contract every session store keeps, as checks that panic with what broke. The tests of
//! each implementation run them: `clawsmith-store`'s against the SQLite store, and
//! `clawsmith-store-postgres`'s against the same checks on PostgreSQL.
//!
//! `open` gives a new handle on the same store each time (a second process, or another host):
//! two handles see each other's writes at once. Session ids get `prefix`, so runs against a
//! shared database do not meet.

// These are test checks: a panic with the failing value is how a check reports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use clawsmith_protocol::{EventPayload, ModelMessage, Role, ToolStatus, TurnStarted};

use crate::{BlobStore, JournalStart, SessionStore, StoreError};

/// A new handle on the store under test.
pub type Open<'a> = &'a (dyn Fn() -> Arc<dyn SessionStore> + Sync);

fn started(turn: &str) -> EventPayload {
    EventPayload::TurnStarted(TurnStarted {
        turn_id: turn.to_owned(),
    })
}

/// Runs every check of the session contract.
pub fn sessions(open: Open<'_>, prefix: &str) {
    creating_and_listing(open, prefix);
    history_is_gap_free_and_paged(open, prefix);
    concurrent_writers_leave_no_gap_and_no_duplicate(open, prefix);
    a_started_call_is_journaled_until_closed(open, prefix);
    secrets_are_masked_at_rest(open, prefix);
    a_lease_is_fresh_once_per_holder(open, prefix);
    artifacts_are_kept_once_per_session_and_masked(open, prefix);
}

/// Sessions are created once, found by id and listed newest first.
pub fn creating_and_listing(open: Open<'_>, prefix: &str) {
    let store = open();
    let (first, second) = (format!("{prefix}-list-1"), format!("{prefix}-list-2"));
    let made = store.create_session(&first, "/ws/one").unwrap();
    assert_eq!(made.id, first);
    assert_eq!(made.workspace_root, "/ws/one");
    assert_eq!(made.parent_id, None);
    std::thread::sleep(std::time::Duration::from_millis(5));
    store.create_session(&second, "/ws/two").unwrap();
    assert!(matches!(
        store.create_session(&first, "/elsewhere"),
        Err(StoreError::SessionExists(id)) if id == first
    ));
    let other = open();
    assert_eq!(other.get_session(&first).unwrap(), Some(made));
    assert_eq!(other.get_session(&format!("{prefix}-none")).unwrap(), None);
    let listed: Vec<String> = other
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|session| session.id)
        .filter(|id| id.starts_with(&format!("{prefix}-list-")))
        .collect();
    assert_eq!(listed, [second, first], "newest first");
}

/// Messages are numbered from 0 and events from 1, without gaps; pages start where asked; an
/// unknown session is an error, not an empty page.
pub fn history_is_gap_free_and_paged(open: Open<'_>, prefix: &str) {
    let store = open();
    let id = format!("{prefix}-history");
    store.create_session(&id, "/ws").unwrap();
    assert_eq!(store.last_event_sequence(&id).unwrap(), 0);
    for index in 0..5_u64 {
        let message = ModelMessage::text(Role::User, format!("message {index}"));
        assert_eq!(store.append_message(&id, &message).unwrap(), index);
    }
    for sequence in 1..=7_u64 {
        let event = store
            .append_event(&id, started(&format!("t{sequence}")), 1_000 + sequence)
            .unwrap();
        assert_eq!(event.sequence, sequence);
        assert_eq!(event.session_id, id);
    }
    let other = open();
    assert_eq!(other.last_event_sequence(&id).unwrap(), 7);
    let page = other.events_page(&id, 3, 2).unwrap();
    let sequences: Vec<u64> = page.iter().map(|event| event.sequence).collect();
    assert_eq!(sequences, [4, 5]);
    assert_eq!(page[0].payload, started("t4"));
    assert_eq!(page[0].timestamp_ms, 1_004);
    assert!(other.events_page(&id, 7, 10).unwrap().is_empty());
    let messages = other.messages_page(&id, 3, 10).unwrap();
    let texts: Vec<&str> = messages
        .iter()
        .map(|message| message.content.as_str())
        .collect();
    assert_eq!(texts, ["message 3", "message 4"]);
    let unknown = format!("{prefix}-unknown");
    // A follower may ask before the session exists: nothing yet.
    assert_eq!(other.last_event_sequence(&unknown).unwrap(), 0);
    for result in [
        other.events_page(&unknown, 0, 10).map(drop),
        other.messages_page(&unknown, 0, 10).map(drop),
        other.append_event(&unknown, started("t"), 1).map(drop),
        other
            .append_message(&unknown, &ModelMessage::text(Role::User, "x"))
            .map(drop),
    ] {
        assert!(
            matches!(result, Err(StoreError::UnknownSession(ref id)) if *id == unknown),
            "{result:?}"
        );
    }
}

/// Eight writers on two handles append to one session at once: the sequences are exactly
/// 1..=N, and the message indexes 0..M.
pub fn concurrent_writers_leave_no_gap_and_no_duplicate(open: Open<'_>, prefix: &str) {
    const WRITERS: usize = 8;
    const EACH: usize = 25;
    let id = format!("{prefix}-race");
    let handles = [open(), open()];
    handles[0].create_session(&id, "/ws").unwrap();
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            let store = Arc::clone(&handles[writer % 2]);
            let id = id.clone();
            scope.spawn(move || {
                for n in 0..EACH {
                    store
                        .append_event(&id, started(&format!("w{writer}-{n}")), 1)
                        .unwrap();
                    if n % 5 == 0 {
                        store
                            .append_message(&id, &ModelMessage::text(Role::User, "m"))
                            .unwrap();
                    }
                }
            });
        }
    });
    let total = (WRITERS * EACH) as u64;
    let events = handles[1].events_page(&id, 0, total + 10).unwrap();
    let sequences: Vec<u64> = events.iter().map(|event| event.sequence).collect();
    assert_eq!(sequences, (1..=total).collect::<Vec<u64>>());
    let mut turns: Vec<String> = events
        .iter()
        .map(|event| match &event.payload {
            EventPayload::TurnStarted(started) => started.turn_id.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    turns.sort();
    turns.dedup();
    assert_eq!(turns.len(), WRITERS * EACH, "every append landed once");
    let messages = handles[0].messages_page(&id, 0, 1_000).unwrap();
    assert_eq!(messages.len(), WRITERS * EACH / 5);
    assert_eq!(handles[0].last_event_sequence(&id).unwrap(), total);
}

/// A started call's journal row, assistant message and event land together; the row stays
/// open (and is listed) until it is closed, and closes once.
pub fn a_started_call_is_journaled_until_closed(open: Open<'_>, prefix: &str) {
    let store = open();
    let id = format!("{prefix}-journal");
    store.create_session(&id, "/ws").unwrap();
    let assistant = ModelMessage::text(Role::Assistant, "running it");
    let journal = JournalStart {
        session_id: id.clone(),
        turn_id: "t1".to_owned(),
        call_id: "c1".to_owned(),
        tool_name: "run_command".to_owned(),
        args_json: "{\"command\":\"make\"}".to_owned(),
    };
    let event = store
        .start_call(&id, Some(&assistant), Some(&journal), started("t1"), 5)
        .unwrap();
    assert_eq!(event.sequence, 1);
    store
        .start_call(&id, None, None, started("t1-read"), 6)
        .unwrap();
    let other = open();
    let open_calls = other.unfinished_calls(&id).unwrap();
    assert_eq!(open_calls.len(), 1);
    assert_eq!(
        (
            open_calls[0].call_id.as_str(),
            open_calls[0].turn_id.as_str(),
            open_calls[0].tool_name.as_str(),
            open_calls[0].args_json.as_str()
        ),
        ("c1", "t1", "run_command", "{\"command\":\"make\"}")
    );
    assert_eq!(other.messages_page(&id, 0, 10).unwrap(), [assistant]);
    assert!(other.journal_close(&id, "c1", ToolStatus::Unknown).unwrap());
    assert!(!other.journal_close(&id, "c1", ToolStatus::Success).unwrap());
    assert!(
        !other
            .journal_close(&id, "never", ToolStatus::Success)
            .unwrap()
    );
    assert!(store.unfinished_calls(&id).unwrap().is_empty());
    assert_eq!(store.last_event_sequence(&id).unwrap(), 2);
    // A call on an unknown session stores nothing.
    let unknown = format!("{prefix}-journal-unknown");
    assert!(matches!(
        store.start_call(&unknown, None, None, started("t"), 1),
        Err(StoreError::UnknownSession(_))
    ));
}

/// What the secret detector finds never reaches the store: messages and journaled arguments
/// are masked.
pub fn secrets_are_masked_at_rest(open: Open<'_>, prefix: &str) {
    let store = open();
    let id = format!("{prefix}-secrets");
    store.create_session(&id, "/ws").unwrap();
    let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    store
        .append_message(
            &id,
            &ModelMessage::text(Role::User, format!("my token is {token}")),
        )
        .unwrap();
    let journal = JournalStart {
        session_id: id.clone(),
        turn_id: "t1".to_owned(),
        call_id: "c1".to_owned(),
        tool_name: "run_command".to_owned(),
        args_json: format!("{{\"command\":\"curl -H 'Authorization: token {token}'\"}}"),
    };
    store
        .start_call(&id, None, Some(&journal), started("t1"), 1)
        .unwrap();
    let other = open();
    let message = &other.messages_page(&id, 0, 1).unwrap()[0];
    assert!(
        message.content.starts_with("my token is "),
        "{}",
        message.content
    );
    assert!(!message.content.contains(token), "{}", message.content);
    let call = &other.unfinished_calls(&id).unwrap()[0];
    assert!(!call.args_json.contains(token), "{}", call.args_json);
    assert!(call.args_json.contains("curl"), "{}", call.args_json);
}

/// The first lease in a process is fresh, a second one while it is held is not; once every
/// holder is gone, the next one is fresh again.
pub fn a_lease_is_fresh_once_per_holder(open: Open<'_>, prefix: &str) {
    let store = open();
    let id = format!("{prefix}-lease");
    store.create_session(&id, "/ws").unwrap();
    let first = store.lease_session(&id).unwrap();
    assert!(first.is_fresh());
    assert_eq!(first.session_id(), id);
    let second = store.lease_session(&id).unwrap();
    assert!(!second.is_fresh());
    assert_eq!(first.epoch(), second.epoch());
    // The holder writes.
    store.append_event(&id, started("t1"), 1).unwrap();
    drop(first);
    drop(second);
    let again = store.lease_session(&id).unwrap();
    assert!(again.is_fresh());
    store.append_event(&id, started("t2"), 2).unwrap();
}

/// An artifact is kept once per content per session, masked when it is text, counted in bytes
/// and lines, and read back only through its own session.
pub fn artifacts_are_kept_once_per_session_and_masked(open: Open<'_>, prefix: &str) {
    let store = open();
    let (one, two) = (
        format!("{prefix}-artifacts-1"),
        format!("{prefix}-artifacts-2"),
    );
    store.create_session(&one, "/ws").unwrap();
    store.create_session(&two, "/ws").unwrap();
    let text = b"line one\nline two\nno newline at the end".to_vec();
    let kept = store.put_artifact(&one, &text).unwrap();
    assert_eq!((kept.bytes, kept.lines), (text.len() as u64, Some(3)));
    assert_eq!(
        store.put_artifact(&one, &text).unwrap(),
        kept,
        "once per content"
    );
    let elsewhere = store.put_artifact(&two, &text).unwrap();
    assert_ne!(elsewhere.artifact_id, kept.artifact_id);
    let other = open();
    assert_eq!(
        other.read_artifact(&one, &kept.artifact_id).unwrap(),
        Some(text.clone())
    );
    assert_eq!(other.read_artifact(&two, &kept.artifact_id).unwrap(), None);
    assert_eq!(other.read_artifact(&one, "art_none").unwrap(), None);
    // Large, binary: kept as it is.
    let large: Vec<u8> = (0..200_000_u32).map(|n| (n % 256) as u8).collect();
    let big = store.put_artifact(&one, &large).unwrap();
    assert_eq!(
        other.read_artifact(&one, &big.artifact_id).unwrap(),
        Some(large)
    );
    // Text with a secret: masked before it is kept.
    let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let secret = store
        .put_artifact(&one, format!("curl -H 'token {token}'").as_bytes())
        .unwrap();
    let read = other
        .read_artifact(&one, &secret.artifact_id)
        .unwrap()
        .unwrap();
    let read = String::from_utf8(read).unwrap();
    assert!(
        read.starts_with("curl -H") && !read.contains(token),
        "{read}"
    );
    assert!(matches!(
        store.put_artifact(&format!("{prefix}-artifacts-none"), b"x"),
        Err(StoreError::UnknownSession(_))
    ));
}

/// Runs every check of the blob contract.
pub fn blobs(store: &dyn BlobStore) {
    let small = b"small blob".to_vec();
    let large: Vec<u8> = (0..300_000_u32).map(|n| (n % 251) as u8).collect();
    let names = store.put_blobs(&[&small, &large, &small]).unwrap();
    assert_eq!(names.len(), 3);
    assert_eq!(names[0], names[2], "one name per content");
    assert_eq!(
        names[0],
        clawsmith_checkpoint::hash_hex(&clawsmith_checkpoint::sha256(&small))
    );
    // Stored again: success, the same name.
    assert_eq!(store.put_blobs(&[&large]).unwrap(), [names[1].clone()]);
    for content in [&small, &large] {
        let name = clawsmith_checkpoint::sha256(content);
        assert_eq!(store.get_blob(&name).unwrap().as_ref(), Some(content));
    }
    assert_eq!(store.get_blob(&[7; 32]).unwrap(), None);
    assert_eq!(store.put_blobs(&[]).unwrap(), Vec::<String>::new());
}
