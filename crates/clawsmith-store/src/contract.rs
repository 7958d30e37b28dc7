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

use clawsmith_protocol::{
    EventPayload, ModelMessage, Role, ToolStatus, TurnCompleted, TurnStarted,
};

use crate::{
    BlobStore, ChangeKind, CheckpointState, JournalStart, PendingApproval, SessionStore,
    StoreError, Todo, TodoStatus, TurnOpening,
};

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
    a_child_session_starts_empty_under_its_parent(open, prefix);
    a_fork_copies_its_parent_as_it_stands(open, prefix);
    deferred_records_are_written_in_order_by_the_next_write(open, prefix);
    history_is_gap_free_and_paged(open, prefix);
    concurrent_writers_leave_no_gap_and_no_duplicate(open, prefix);
    a_started_call_is_journaled_until_closed(open, prefix);
    secrets_are_masked_at_rest(open, prefix);
    a_lease_is_fresh_once_per_holder(open, prefix);
    artifacts_are_kept_once_per_session_and_masked(open, prefix);
    a_turn_keeps_its_files_before_and_lists_them_after(open, prefix);
    a_turns_refusals_change_nothing(open, prefix);
    todos_and_approvals_live_with_the_session(open, prefix);
    unfinished_work_and_the_last_event_of_a_kind(open, prefix);
    a_commands_notes_are_kept_until_it_ends(open, prefix);
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

fn completed(turn: &str) -> EventPayload {
    EventPayload::TurnCompleted(TurnCompleted {
        turn_id: turn.to_owned(),
        tool_calls: 0,
    })
}

fn todo(id: &str, status: TodoStatus) -> Todo {
    Todo {
        id: id.to_owned(),
        content: format!("do {id}"),
        status,
    }
}

/// A turn's checkpoint records where the session stood and its todos (K7); each path's state
/// before its first change is kept (a second record changes nothing), its state after is a
/// hash; finishing keeps the current contents that still match, counts lines (K4) and appends
/// the event with the next sequence; another handle lists the same.
pub fn a_turn_keeps_its_files_before_and_lists_them_after(open: Open<'_>, prefix: &str) {
    let store = open();
    let id = format!("{prefix}-turn");
    store.create_session(&id, "/ws").unwrap();
    store
        .append_message(&id, &ModelMessage::text(Role::User, "edit two files"))
        .unwrap();
    store.append_event(&id, started("t0"), 1).unwrap();
    store
        .set_todos(&id, vec![todo("a", TodoStatus::InProgress)])
        .unwrap();
    let opened = store
        .begin_turn(
            &id,
            "t1",
            TurnOpening {
                events: vec![started("t1")],
                timestamp_ms: 7,
            },
        )
        .unwrap();
    assert_eq!(opened.events.len(), 1);
    assert_eq!(
        opened.events[0].sequence, 2,
        "after the one event before it"
    );
    let checkpoint = &opened.checkpoint;
    assert_eq!(
        (checkpoint.message_count, checkpoint.event_sequence),
        (1, 1),
        "where the session stood"
    );
    assert_eq!(checkpoint.state, CheckpointState::Open);
    assert_eq!(checkpoint.todos, [todo("a", TodoStatus::InProgress)]);
    assert_eq!(checkpoint.file_count, 0);

    let old = b"one\ntwo\nthree\n".as_slice();
    let new = b"one\n2\nthree\nfour\n".as_slice();
    let made = b"fresh\n".as_slice();
    store
        .record_before(&id, "t1", "src/a.txt", Some((old, 0o644)))
        .unwrap();
    store.record_before(&id, "t1", "src/b.txt", None).unwrap();
    // A later prior state of the same path in the same turn changes nothing.
    store
        .record_before(&id, "t1", "src/a.txt", Some((b"other", 0o600)))
        .unwrap();
    let hash = clawsmith_checkpoint::sha256;
    store
        .record_after(
            &id,
            "t1",
            "src/a.txt",
            Some((hash(new), new.len() as u64, 0o644)),
        )
        .unwrap();
    store
        .record_after(
            &id,
            "t1",
            "src/b.txt",
            Some((hash(made), made.len() as u64, 0o644)),
        )
        .unwrap();
    let current = |path: &str| -> Option<Vec<u8>> {
        match path {
            "src/a.txt" => Some(new.to_vec()),
            "src/b.txt" => Some(made.to_vec()),
            _ => None,
        }
    };
    let (manifest, event) = store
        .finish_turn_reading(&id, "t1", &current, completed("t1"), 9)
        .unwrap();
    assert_eq!(event.sequence, 3);
    assert_eq!(manifest.turn_id, "t1");
    type Row<'a> = (&'a str, ChangeKind, u64, u64, Option<u64>, Option<u64>);
    let files: Vec<Row<'_>> = manifest
        .files
        .iter()
        .map(|file| {
            (
                file.path.as_str(),
                file.kind,
                file.bytes_before,
                file.bytes_after,
                file.lines_added,
                file.lines_removed,
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("src/a.txt", ChangeKind::Modified, 14, 17, Some(2), Some(1)),
            ("src/b.txt", ChangeKind::Added, 0, 6, Some(1), Some(0)),
        ],
        "in first-change order, the first prior state kept"
    );
    // The prior content is kept by its hash; so is the post content that still matched.
    let other = open();
    assert_eq!(other.change_list(&id, "t1").unwrap(), manifest.files);
    let listed = other.checkpoints(&id).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, CheckpointState::Finished);
    assert!(listed[0].finished_at_ms.is_some());
    assert_eq!(listed[0].file_count, 2);
    // Finishing again changes no checkpoint and still appends the event.
    let (again, event) = other
        .finish_turn_reading(&id, "t1", &|_| None, completed("t1"), 10)
        .unwrap();
    assert_eq!(again.files, manifest.files);
    assert_eq!(event.sequence, 4);
    assert_eq!(other.last_event_sequence(&id).unwrap(), 4);

    // A post state that no longer matches the file (changed again since) is not counted.
    store.begin_turn(&id, "t2", TurnOpening::default()).unwrap();
    store
        .record_before(&id, "t2", "src/a.txt", Some((new, 0o644)))
        .unwrap();
    store
        .record_after(&id, "t2", "src/a.txt", Some((hash(b"x\n"), 2, 0o644)))
        .unwrap();
    let (manifest, _) = store
        .finish_turn_reading(
            &id,
            "t2",
            &|_| Some(b"changed since\n".to_vec()),
            completed("t2"),
            11,
        )
        .unwrap();
    assert_eq!(manifest.files[0].kind, ChangeKind::Modified);
    assert_eq!(
        (
            manifest.files[0].lines_added,
            manifest.files[0].lines_removed
        ),
        (None, None)
    );
    // A turn never begun is begun by its first prior state.
    store
        .record_before(&id, "t3", "gone.txt", Some((b"bye", 0o644)))
        .unwrap();
    store.record_after(&id, "t3", "gone.txt", None).unwrap();
    let (manifest, _) = store
        .finish_turn_reading(&id, "t3", &|_| None, completed("t3"), 12)
        .unwrap();
    assert_eq!(manifest.files[0].kind, ChangeKind::Deleted);
    assert_eq!(
        (
            manifest.files[0].lines_added,
            manifest.files[0].lines_removed
        ),
        (Some(0), Some(1))
    );
    let turns: Vec<String> = store
        .checkpoints(&id)
        .unwrap()
        .into_iter()
        .map(|checkpoint| checkpoint.turn_id)
        .collect();
    assert_eq!(turns, ["t1", "t2", "t3"], "oldest first");
    a_turns_diffs_read_back_what_it_recorded(&*open(), &id);
}

/// Diffs of the turns [`a_turn_keeps_its_files_before_and_lists_them_after`] recorded, read
/// by another handle: both sides and the unified diff of a modified file, an added file against
/// nothing, a post state that was not kept, a deletion, and what is not there.
fn a_turns_diffs_read_back_what_it_recorded(store: &dyn SessionStore, id: &str) {
    use crate::DiffSide;
    let text = |text: &str| DiffSide::Text {
        text: text.to_owned(),
        truncated: false,
        total_bytes: text.len() as u64,
    };
    let diff = store.diff(id, "t1", "src/a.txt").unwrap().unwrap();
    assert_eq!(diff.kind, ChangeKind::Modified);
    assert_eq!(
        diff.before,
        text("one\ntwo\nthree\n"),
        "the first prior state"
    );
    assert_eq!(diff.after, text("one\n2\nthree\nfour\n"));
    assert!(
        diff.unified.contains("-two\n+2\n") && diff.unified.contains("+four\n"),
        "{}",
        diff.unified
    );
    assert!(!diff.unified_truncated);
    let added = store.diff(id, "t1", "src/b.txt").unwrap().unwrap();
    assert_eq!(
        (added.kind, added.before),
        (ChangeKind::Added, DiffSide::Absent)
    );
    assert_eq!(added.after, text("fresh\n"));
    assert!(added.unified.contains("+fresh"), "{}", added.unified);
    // The file changed again before t2 finished: its post content was not kept.
    let changed = store.diff(id, "t2", "src/a.txt").unwrap().unwrap();
    assert_eq!(changed.before, text("one\n2\nthree\nfour\n"));
    assert!(
        matches!(changed.after, DiffSide::Unavailable { .. }),
        "{:?}",
        changed.after
    );
    assert_eq!(
        changed.unified, "",
        "no diff against a side that is not kept"
    );
    let deleted = store.diff(id, "t3", "gone.txt").unwrap().unwrap();
    assert_eq!(
        (deleted.before, deleted.after),
        (text("bye"), DiffSide::Absent)
    );
    // A path the turn did not change is no diff; an unknown turn is named.
    assert_eq!(store.diff(id, "t1", "gone.txt").unwrap(), None);
    assert!(matches!(
        store.diff(id, "t9", "src/a.txt"),
        Err(StoreError::UnknownTurn { .. })
    ));
}

/// Each refusal of a turn's records names what is wrong and changes nothing: a turn begun
/// twice, a prior or post state for a finished turn, a post state without its prior state, an
/// unknown turn or session.
pub fn a_turns_refusals_change_nothing(open: Open<'_>, prefix: &str) {
    let store = open();
    let id = format!("{prefix}-turn-refusals");
    store.create_session(&id, "/ws").unwrap();
    store.begin_turn(&id, "t1", TurnOpening::default()).unwrap();
    let events_before = store.last_event_sequence(&id).unwrap();
    assert!(matches!(
        store.begin_turn(&id, "t1", TurnOpening { events: vec![started("t1")], timestamp_ms: 1 }),
        Err(StoreError::TurnExists { turn_id, .. }) if turn_id == "t1"
    ));
    assert_eq!(
        store.last_event_sequence(&id).unwrap(),
        events_before,
        "a refused opening appends none of its events"
    );
    assert!(matches!(
        store.record_after(&id, "t1", "never.txt", None),
        Err(StoreError::Workspace { path, .. }) if path == "never.txt"
    ));
    store
        .finish_turn_reading(&id, "t1", &|_| None, completed("t1"), 2)
        .unwrap();
    assert!(matches!(
        store.record_before(&id, "t1", "late.txt", None),
        Err(StoreError::TurnClosed { state, .. }) if state == "finished"
    ));
    assert!(matches!(
        store.record_after(&id, "t1", "late.txt", None),
        Err(StoreError::TurnClosed { .. })
    ));
    assert!(store.change_list(&id, "t1").unwrap().is_empty());
    assert!(matches!(
        store.record_after(&id, "nope", "a.txt", None),
        Err(StoreError::UnknownTurn { turn_id, .. }) if turn_id == "nope"
    ));
    assert!(matches!(
        store.finish_turn_reading(&id, "nope", &|_| None, completed("nope"), 3),
        Err(StoreError::UnknownTurn { .. })
    ));
    assert!(matches!(
        store.change_list(&id, "nope"),
        Err(StoreError::UnknownTurn { .. })
    ));
    let ghost = format!("{prefix}-no-such-session");
    assert!(matches!(
        store.begin_turn(&ghost, "t1", TurnOpening::default()),
        Err(StoreError::UnknownSession(_))
    ));
    assert!(matches!(
        store.record_before(&ghost, "t1", "a.txt", None),
        Err(StoreError::UnknownSession(_))
    ));
    assert!(matches!(
        store.checkpoints(&ghost),
        Err(StoreError::UnknownSession(_))
    ));
    assert_eq!(store.checkpoints(&id).unwrap().len(), 1);
}

/// Todos are replaced whole and checked first; approvals are kept masked, oldest first, until
/// answered once.
pub fn todos_and_approvals_live_with_the_session(open: Open<'_>, prefix: &str) {
    let store = open();
    let id = format!("{prefix}-todos");
    store.create_session(&id, "/ws").unwrap();
    assert!(store.todos(&id).unwrap().is_empty());
    let list = vec![
        todo("a", TodoStatus::Completed),
        todo("b", TodoStatus::InProgress),
    ];
    store.set_todos(&id, list.clone()).unwrap();
    for bad in [
        vec![todo("", TodoStatus::Pending)],
        vec![
            todo("a", TodoStatus::Pending),
            todo("a", TodoStatus::Pending),
        ],
        vec![
            todo("a", TodoStatus::InProgress),
            todo("b", TodoStatus::InProgress),
        ],
    ] {
        assert!(matches!(
            store.set_todos(&id, bad),
            Err(StoreError::InvalidTodos(_))
        ));
    }
    assert_eq!(
        open().todos(&id).unwrap(),
        list,
        "a refused list changes nothing"
    );
    let ghost = format!("{prefix}-no-such-session");
    assert!(matches!(
        store.todos(&ghost),
        Err(StoreError::UnknownSession(_))
    ));
    assert!(matches!(
        store.set_todos(&ghost, Vec::new()),
        Err(StoreError::UnknownSession(_))
    ));

    let secret = "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    let approval = |approval_id: &str| PendingApproval {
        approval_id: approval_id.to_owned(),
        turn_id: "t1".to_owned(),
        call_id: format!("call-{approval_id}"),
        request: serde_json::json!({"command": format!("curl -H 'x-api-key: {secret}'")}),
    };
    store.add_pending_approval(&id, &approval("p1")).unwrap();
    store.add_pending_approval(&id, &approval("p2")).unwrap();
    let pending = open().pending_approvals(&id).unwrap();
    let ids: Vec<&str> = pending.iter().map(|a| a.approval_id.as_str()).collect();
    assert_eq!(ids, ["p1", "p2"], "oldest first");
    assert_eq!(pending[0].call_id, "call-p1");
    let shown = pending[0].request.to_string();
    assert!(!shown.contains(secret), "masked at rest: {shown}");
    assert!(store.resolve_pending_approval(&id, "p1").unwrap());
    assert!(
        !store.resolve_pending_approval(&id, "p1").unwrap(),
        "answered once"
    );
    let ids: Vec<String> = store
        .pending_approvals(&id)
        .unwrap()
        .into_iter()
        .map(|a| a.approval_id)
        .collect();
    assert_eq!(ids, ["p2"]);
    assert!(matches!(
        store.add_pending_approval(&ghost, &approval("p3")),
        Err(StoreError::UnknownSession(_))
    ));
}

/// A session has unfinished work while a turn is open, a journaled call is open or an
/// approval waits, and none once all are closed; the last event of a kind is found by kind.
pub fn unfinished_work_and_the_last_event_of_a_kind(open: Open<'_>, prefix: &str) {
    let store = open();
    let id = format!("{prefix}-unfinished");
    store.create_session(&id, "/ws").unwrap();
    assert!(!store.has_unfinished_work(&id).unwrap());
    assert_eq!(store.last_event_of_kind(&id, "turn.started").unwrap(), None);
    store
        .begin_turn(
            &id,
            "t1",
            TurnOpening {
                events: vec![started("t1")],
                timestamp_ms: 1,
            },
        )
        .unwrap();
    assert!(store.has_unfinished_work(&id).unwrap(), "an open turn");
    store
        .finish_turn_reading(&id, "t1", &|_| None, completed("t1"), 2)
        .unwrap();
    assert!(!store.has_unfinished_work(&id).unwrap());
    let journal = JournalStart {
        session_id: id.clone(),
        turn_id: "t2".to_owned(),
        call_id: "c1".to_owned(),
        tool_name: "run_command".to_owned(),
        args_json: "{}".to_owned(),
    };
    store
        .start_call(&id, None, Some(&journal), started("t2"), 3)
        .unwrap();
    assert!(store.has_unfinished_work(&id).unwrap(), "an open call");
    store.journal_close(&id, "c1", ToolStatus::Success).unwrap();
    assert!(!store.has_unfinished_work(&id).unwrap());
    store
        .add_pending_approval(
            &id,
            &PendingApproval {
                approval_id: "p".to_owned(),
                turn_id: "t2".to_owned(),
                call_id: "c2".to_owned(),
                request: serde_json::json!({}),
            },
        )
        .unwrap();
    assert!(
        store.has_unfinished_work(&id).unwrap(),
        "a waiting approval"
    );
    store.resolve_pending_approval(&id, "p").unwrap();
    assert!(!store.has_unfinished_work(&id).unwrap());

    let last = store
        .last_event_of_kind(&id, "turn.started")
        .unwrap()
        .unwrap();
    assert_eq!(last.payload, started("t2"));
    assert_eq!(last.sequence, 3);
    let finished = store
        .last_event_of_kind(&id, "turn.completed")
        .unwrap()
        .unwrap();
    assert_eq!(finished.sequence, 2);
    assert_eq!(
        store
            .last_event_of_kind(&format!("{prefix}-no-such-session"), "turn.started")
            .unwrap(),
        None
    );
}

/// Around a command: a note of the manifest it runs against, kept until it ends (an unstored
/// manifest is refused and notes nothing), oldest first for the next writer; the workspace's
/// last manifest; what undo cannot give back (the last reason per path) and the directories it
/// made (once each), by path; who made a recorded change; which contents are stored.
pub fn a_commands_notes_are_kept_until_it_ends(open: Open<'_>, prefix: &str) {
    let store = open();
    let blobs: &dyn BlobStore = &*store;
    let id = format!("{prefix}-capture");
    store.create_session(&id, "/ws").unwrap();
    let (first, second) = (b"manifest one".as_slice(), b"manifest two".as_slice());
    blobs.put_blobs(&[first, second]).unwrap();
    let name = clawsmith_checkpoint::sha256;
    let unstored = name(b"never stored");
    let found = blobs
        .stored_hashes(&[name(first), unstored, name(second)])
        .unwrap();
    assert_eq!(found, [name(first), name(second)].into_iter().collect());

    let root = format!("/{prefix}/workspace");
    assert_eq!(store.workspace_manifest(&root).unwrap(), None);
    store
        .remember_workspace_manifest(&root, &name(first))
        .unwrap();
    store
        .remember_workspace_manifest(&root, &name(second))
        .unwrap();
    assert_eq!(
        open().workspace_manifest(&root).unwrap().as_deref(),
        Some(second),
        "the last one"
    );
    assert_eq!(
        store.workspace_manifest(&format!("{root}-other")).unwrap(),
        None
    );

    store.begin_turn(&id, "t1", TurnOpening::default()).unwrap();
    store
        .begin_command_capture(&id, "t1", "c1", &name(first))
        .unwrap();
    store
        .begin_command_capture(&id, "t1", "c2", &name(second))
        .unwrap();
    assert!(matches!(
        store.begin_command_capture(&id, "t1", "c3", &unstored),
        Err(StoreError::MissingBlob(_))
    ));
    let interrupted = open().interrupted_captures(&id).unwrap();
    let seen: Vec<(&str, &[u8])> = interrupted
        .iter()
        .map(|capture| (capture.call_id.as_str(), capture.manifest.as_slice()))
        .collect();
    assert_eq!(
        seen,
        [("c1", first), ("c2", second)],
        "oldest first, c3 not noted"
    );
    store.end_command_capture(&id, "t1", "c1").unwrap();
    store.end_command_capture(&id, "t1", "never").unwrap();
    let left: Vec<String> = store
        .interrupted_captures(&id)
        .unwrap()
        .into_iter()
        .map(|capture| capture.call_id)
        .collect();
    assert_eq!(left, ["c2"]);

    let entries = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(path, reason)| ((*path).to_owned(), (*reason).to_owned()))
            .collect()
    };
    store
        .record_uncaptured(
            &id,
            "t1",
            "c2",
            &entries(&[("z.bin", "too large"), ("a.sock", "a socket")]),
        )
        .unwrap();
    store
        .record_uncaptured(&id, "t1", "c4", &entries(&[("z.bin", "changed again")]))
        .unwrap();
    store.record_uncaptured(&id, "t1", "c5", &[]).unwrap();
    let noted: Vec<(String, String, String)> = open()
        .uncaptured_changes(&id, "t1")
        .unwrap()
        .into_iter()
        .map(|change| (change.path, change.reason, change.call_id))
        .collect();
    assert_eq!(
        noted,
        [
            ("a.sock".to_owned(), "a socket".to_owned(), "c2".to_owned()),
            (
                "z.bin".to_owned(),
                "changed again".to_owned(),
                "c4".to_owned()
            ),
        ]
    );
    assert!(store.uncaptured_changes(&id, "t2").unwrap().is_empty());
    let dirs = |paths: &[&str]| -> Vec<String> { paths.iter().map(|p| (*p).to_owned()).collect() };
    store
        .record_created_directories(&id, "t1", "c2", &dirs(&["b/c", "b"]))
        .unwrap();
    store
        .record_created_directories(&id, "t1", "c4", &dirs(&["b", "a"]))
        .unwrap();
    assert_eq!(
        open().created_directories(&id, "t1").unwrap(),
        dirs(&["a", "b", "b/c"])
    );

    store.record_before(&id, "t1", "made.txt", None).unwrap();
    store
        .attribute_change(&id, "t1", "made.txt", "command", "c2")
        .unwrap();
    let changes = store.change_list(&id, "t1").unwrap();
    assert_eq!(
        (changes[0].origin.as_deref(), changes[0].call_id.as_deref()),
        (Some("command"), Some("c2"))
    );
    assert!(matches!(
        store.attribute_change(&id, "nope", "made.txt", "command", "c2"),
        Err(StoreError::UnknownTurn { .. })
    ));
    store
        .finish_turn_reading(&id, "t1", &|_| None, completed("t1"), 1)
        .unwrap();
    assert!(matches!(
        store.attribute_change(&id, "t1", "made.txt", "command", "c9"),
        Err(StoreError::TurnClosed { .. })
    ));
}

/// A child session (a sub-agent's) starts empty and lists with its parent; a taken id or an
/// unknown parent is refused and creates nothing; whole-history reads are the pages without end.
pub fn a_child_session_starts_empty_under_its_parent(open: Open<'_>, prefix: &str) {
    let store = open();
    let (parent, child) = (format!("{prefix}-parent"), format!("{prefix}-child"));
    store.create_session(&parent, "/ws").unwrap();
    store
        .append_message(&parent, &ModelMessage::text(Role::User, "delegate"))
        .unwrap();
    store.append_event(&parent, started("t1"), 1).unwrap();
    let made = store
        .create_child_session(&child, &parent, "/ws/sub")
        .unwrap();
    assert_eq!(made.parent_id.as_deref(), Some(parent.as_str()));
    assert_eq!(made.workspace_root, "/ws/sub");
    let other = open();
    assert_eq!(other.get_session(&child).unwrap(), Some(made));
    assert!(other.messages(&child).unwrap().is_empty());
    assert!(other.events(&child).unwrap().is_empty());
    let listed = other
        .list_sessions()
        .unwrap()
        .into_iter()
        .find(|session| session.id == child)
        .unwrap();
    assert_eq!(listed.parent_id.as_deref(), Some(parent.as_str()));
    assert!(matches!(
        store.create_child_session(&child, &parent, "/ws"),
        Err(StoreError::SessionExists(id)) if id == child
    ));
    let orphan = format!("{prefix}-orphan");
    let missing = format!("{prefix}-missing-parent");
    assert!(matches!(
        store.create_child_session(&orphan, &missing, "/ws"),
        Err(StoreError::UnknownSession(id)) if id == missing
    ));
    assert_eq!(store.get_session(&orphan).unwrap(), None);
    assert_eq!(
        other.messages(&parent).unwrap(),
        other.messages_page(&parent, 0, 10).unwrap()
    );
    assert_eq!(other.events(&parent).unwrap().len(), 1);
    assert!(matches!(
        other.events(&missing),
        Err(StoreError::UnknownSession(_))
    ));
}

/// A fork (K6) copies the parent's history with the same numbers (each event naming the fork),
/// its todos, checkpoints with their change lists and diffs, and artifacts; not the journal or
/// pending approvals. Both then grow apart. An unknown parent or a taken id creates nothing.
pub fn a_fork_copies_its_parent_as_it_stands(open: Open<'_>, prefix: &str) {
    let store = open();
    let (parent, fork) = (format!("{prefix}-fork-parent"), format!("{prefix}-fork"));
    store.create_session(&parent, "/ws/forked").unwrap();
    store
        .append_message(&parent, &ModelMessage::text(Role::User, "fork me"))
        .unwrap();
    store
        .begin_turn(
            &parent,
            "t1",
            TurnOpening {
                events: vec![started("t1")],
                timestamp_ms: 3,
            },
        )
        .unwrap();
    let (old, new) = (b"a\n".as_slice(), b"b\n".as_slice());
    store
        .record_before(&parent, "t1", "f.txt", Some((old, 0o644)))
        .unwrap();
    let post = (clawsmith_checkpoint::sha256(new), new.len() as u64, 0o644);
    store
        .record_after(&parent, "t1", "f.txt", Some(post))
        .unwrap();
    store
        .finish_turn_reading(&parent, "t1", &|_| Some(new.to_vec()), completed("t1"), 4)
        .unwrap();
    store
        .set_todos(&parent, vec![todo("x", TodoStatus::Pending)])
        .unwrap();
    let artifact = store.put_artifact(&parent, b"a long output").unwrap();
    let journal = JournalStart {
        session_id: parent.clone(),
        turn_id: "t2".to_owned(),
        call_id: "c1".to_owned(),
        tool_name: "run_command".to_owned(),
        args_json: "{}".to_owned(),
    };
    store
        .start_call(&parent, None, Some(&journal), started("t2"), 5)
        .unwrap();
    store
        .add_pending_approval(
            &parent,
            &PendingApproval {
                approval_id: "p1".to_owned(),
                turn_id: "t2".to_owned(),
                call_id: "c1".to_owned(),
                request: serde_json::json!({"command": "make"}),
            },
        )
        .unwrap();

    let made = open().fork_session(&parent, &fork).unwrap();
    assert_eq!(
        (
            made.id.as_str(),
            made.parent_id.as_deref(),
            made.workspace_root.as_str()
        ),
        (fork.as_str(), Some(parent.as_str()), "/ws/forked")
    );
    let other = open();
    assert_eq!(
        other.messages(&fork).unwrap(),
        other.messages(&parent).unwrap()
    );
    let (copied, original) = (other.events(&fork).unwrap(), other.events(&parent).unwrap());
    assert_eq!(copied.len(), 3);
    for (copy, event) in copied.iter().zip(&original) {
        assert_eq!(copy.session_id, fork, "each copied event names the fork");
        assert_eq!(
            (copy.sequence, copy.timestamp_ms, &copy.payload),
            (event.sequence, event.timestamp_ms, &event.payload)
        );
    }
    assert_eq!(
        other.todos(&fork).unwrap(),
        [todo("x", TodoStatus::Pending)]
    );
    let checkpoints = other.checkpoints(&fork).unwrap();
    assert_eq!(checkpoints.len(), 1);
    assert_eq!(
        (checkpoints[0].turn_id.as_str(), checkpoints[0].state),
        ("t1", CheckpointState::Finished)
    );
    assert_eq!(
        other.change_list(&fork, "t1").unwrap(),
        other.change_list(&parent, "t1").unwrap()
    );
    assert_eq!(
        other.diff(&fork, "t1", "f.txt").unwrap(),
        other.diff(&parent, "t1", "f.txt").unwrap()
    );
    assert_eq!(
        other
            .read_artifact(&fork, &artifact.artifact_id)
            .unwrap()
            .as_deref(),
        Some(b"a long output".as_slice())
    );
    assert!(
        other.unfinished_calls(&fork).unwrap().is_empty(),
        "not the journal"
    );
    assert!(
        other.pending_approvals(&fork).unwrap().is_empty(),
        "nor approvals"
    );
    assert_eq!(other.unfinished_calls(&parent).unwrap().len(), 1);

    // They grow apart, each numbering on from where the fork was made.
    assert_eq!(
        store.append_event(&fork, started("f"), 6).unwrap().sequence,
        4
    );
    assert_eq!(
        store
            .append_event(&parent, started("p"), 6)
            .unwrap()
            .sequence,
        4
    );
    assert_eq!(
        store
            .append_message(&fork, &ModelMessage::text(Role::User, "on the fork"))
            .unwrap(),
        1
    );
    assert_eq!(store.messages(&parent).unwrap().len(), 1);

    // Refusals create nothing.
    assert!(matches!(
        store.fork_session(&format!("{prefix}-no-parent"), &format!("{prefix}-fork-2")),
        Err(StoreError::UnknownSession(_))
    ));
    assert!(
        store
            .get_session(&format!("{prefix}-fork-2"))
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        store.fork_session(&parent, &fork),
        Err(StoreError::SessionExists(_))
    ));
    assert_eq!(
        store.events(&fork).unwrap().len(),
        4,
        "the taken fork is unchanged"
    );
}

/// Records that guard nothing may wait for the store's next write, but no longer: after it,
/// another handle reads them in the order given, numbered on from the history before them,
/// with the turn's checkpoint where the session stood; their handles then know their
/// sequences. A call's close deferred after its start lands after it.
pub fn deferred_records_are_written_in_order_by_the_next_write(open: Open<'_>, prefix: &str) {
    use clawsmith_protocol::ToolCompleted;

    let store = open();
    let id = format!("{prefix}-deferred");
    store.create_session(&id, "/ws").unwrap();
    store.append_event(&id, started("before"), 1).unwrap();
    store
        .defer_message(&id, &ModelMessage::text(Role::User, "read it"))
        .unwrap();
    let opening = store
        .defer_turn_start(&id, "t1", vec![started("t1")], 2)
        .unwrap();
    let assistant = ModelMessage::text(Role::Assistant, "reading");
    let start = store
        .defer_call_start(&id, Some(&assistant), started("t1-call"), 3)
        .unwrap();
    let result = clawsmith_protocol::ToolExecutionResult::success("contents");
    let done = ToolCompleted::new("c1", "t1", "read_file", &result);
    let message = ModelMessage::tool_result("c1", "read_file", "contents", result.summary());
    let close = store
        .defer_call_close(&id, EventPayload::ToolCompleted(done), 4, &message)
        .unwrap();
    // The next write of any kind writes them first.
    let after = store.append_event(&id, completed("t1"), 5).unwrap();
    assert_eq!(after.sequence, 5, "after the four records before it");
    let other = open();
    let kinds: Vec<(u64, &'static str)> = other
        .events(&id)
        .unwrap()
        .iter()
        .map(|event| (event.sequence, event.payload.kind()))
        .collect();
    assert_eq!(
        kinds,
        [
            (1, "turn.started"),
            (2, "turn.started"),
            (3, "turn.started"),
            (4, "tool.completed"),
            (5, "turn.completed"),
        ]
    );
    let roles: Vec<Role> = other
        .messages(&id)
        .unwrap()
        .iter()
        .map(|message| message.role)
        .collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);
    let checkpoint = &other.checkpoints(&id).unwrap()[0];
    assert_eq!(checkpoint.turn_id, "t1");
    assert_eq!(
        (checkpoint.message_count, checkpoint.event_sequence),
        (1, 1),
        "where the session stood when the turn was deferred"
    );
    let sequences = |handles: &[crate::DeferredEvent]| -> Vec<Option<u64>> {
        handles
            .iter()
            .map(|handle| handle.stored().map(|event| event.sequence))
            .collect()
    };
    assert_eq!(sequences(&opening), [Some(2)]);
    assert_eq!(sequences(&[start, close]), [Some(3), Some(4)]);
    // Nothing waits any more: flushing writes nothing.
    store.flush_deferred().unwrap();
    assert_eq!(other.last_event_sequence(&id).unwrap(), 5);
}

/// Undo (K2, K6, K7) through [`SessionStore::undo_store`], in a workspace made under
/// `scratch`: the preview names what would change and writes nothing; a file changed since the
/// turns wrote it refuses the undo with nothing changed; a files undo puts the newest turn's
/// prior content back; an undo of an earlier turn in scope `all` rewinds every later turn not
/// yet undone, removes the files they created and the directory born with them, and takes the
/// session back to its checkpoint (history kept in the undone history, numbering resumed from
/// there, approvals cleared, todos restored); undoing again changes nothing.
pub fn undo(open: Open<'_>, prefix: &str, scratch: &std::path::Path) {
    use crate::{UndoOutcome, UndoScope};
    let root = scratch.join(format!("{prefix}-undo-ws"));
    std::fs::create_dir_all(&root).unwrap();
    let workspace = clawsmith_fs::Workspace::open(&root).unwrap();
    let store = open();
    let id = format!("{prefix}-undo");
    store
        .create_session(&id, &root.display().to_string())
        .unwrap();
    let hash = clawsmith_checkpoint::sha256;
    let (old, first, second) = (
        b"old\n".as_slice(),
        b"first\n".as_slice(),
        b"second\n".as_slice(),
    );
    let made = b"made\n".as_slice();
    std::fs::write(root.join("a.txt"), old).unwrap();
    store
        .append_message(&id, &ModelMessage::text(Role::User, "change a, make b"))
        .unwrap();
    store.append_event(&id, started("t0"), 1).unwrap();
    let before_todos = vec![todo("a", TodoStatus::InProgress)];
    store.set_todos(&id, before_todos.clone()).unwrap();
    let read = |path: &str| std::fs::read(root.join(path)).ok();

    // Turn 1 changes a.txt and creates dir/b.txt (its directory born with it).
    let opened = store
        .begin_turn(
            &id,
            "t1",
            TurnOpening {
                events: vec![started("t1")],
                timestamp_ms: 2,
            },
        )
        .unwrap();
    let standing = (
        opened.checkpoint.message_count,
        opened.checkpoint.event_sequence,
    );
    // A tool's change: the prior state recorded, the file written, the post state recorded.
    let change = |turn: &str, path: &str, before: Option<&[u8]>, after: &[u8]| {
        store
            .record_before(&id, turn, path, before.map(|bytes| (bytes, 0o644)))
            .unwrap();
        std::fs::write(root.join(path), after).unwrap();
        store
            .record_after(
                &id,
                turn,
                path,
                Some((hash(after), after.len() as u64, 0o644)),
            )
            .unwrap();
    };
    change("t1", "a.txt", Some(old), first);
    // File systems stamp births with a clock that lags the system's by a few milliseconds:
    // the directory must be born visibly after the turn began.
    std::thread::sleep(std::time::Duration::from_millis(30));
    std::fs::create_dir(root.join("dir")).unwrap();
    change("t1", "dir/b.txt", None, made);
    store
        .append_message(&id, &ModelMessage::text(Role::Assistant, "done one"))
        .unwrap();
    store
        .set_todos(&id, vec![todo("a", TodoStatus::Completed)])
        .unwrap();
    store
        .finish_turn_reading(&id, "t1", &read, completed("t1"), 3)
        .unwrap();
    // Turn 2 changes a.txt again and leaves an approval waiting.
    store.begin_turn(&id, "t2", TurnOpening::default()).unwrap();
    change("t2", "a.txt", Some(first), second);
    store
        .add_pending_approval(
            &id,
            &PendingApproval {
                approval_id: "p".to_owned(),
                turn_id: "t2".to_owned(),
                call_id: "c".to_owned(),
                request: serde_json::json!({"command": "make"}),
            },
        )
        .unwrap();
    store
        .finish_turn_reading(&id, "t2", &read, completed("t2"), 4)
        .unwrap();
    let undoer = store.undo_store().unwrap();

    // The preview names both turns and writes nothing.
    let preview = undoer
        .undo_preview(&id, "t1", UndoScope::All, &workspace)
        .unwrap();
    assert_eq!(preview.turns, ["t2", "t1"], "newest first");
    assert_eq!(preview.restore, ["a.txt"]);
    assert_eq!(preview.remove, ["dir/b.txt"]);
    assert!(preview.conflicts.is_empty() && !preview.already_undone);
    assert_eq!(read("a.txt").unwrap(), second);

    // A file changed by hand since refuses the undo, with nothing changed anywhere.
    std::fs::write(root.join("a.txt"), b"by hand\n").unwrap();
    let last = store.last_event_sequence(&id).unwrap();
    let refused = undoer.undo(&id, "t1", UndoScope::All, &workspace).unwrap();
    let UndoOutcome::Conflicts(conflicts) = &refused.outcome else {
        panic!("a changed file must refuse the undo: {refused:?}");
    };
    assert_eq!(conflicts.len(), 1);
    assert_eq!(
        (conflicts[0].path.as_str(), conflicts[0].turn_id.as_str()),
        ("a.txt", "t2")
    );
    assert_eq!(
        conflicts[0].expected_sha256.as_deref(),
        Some(clawsmith_checkpoint::hash_hex(&hash(second)).as_str())
    );
    assert_eq!(read("a.txt").unwrap(), b"by hand\n");
    assert_eq!(read("dir/b.txt").unwrap(), made);
    assert_eq!(store.last_event_sequence(&id).unwrap(), last);
    assert!(
        store
            .checkpoints(&id)
            .unwrap()
            .iter()
            .all(|checkpoint| checkpoint.state == CheckpointState::Finished)
    );
    assert_eq!(
        undoer
            .undo_preview(&id, "t1", UndoScope::Files, &workspace)
            .unwrap()
            .conflicts,
        *conflicts
    );
    std::fs::write(root.join("a.txt"), second).unwrap();

    // The newest turn's files: a.txt back to what turn 2 found.
    let report = undoer
        .undo(&id, "t2", UndoScope::Files, &workspace)
        .unwrap();
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert_eq!(
        (report.turns.as_slice(), report.restored.as_slice()),
        (&["t2".to_owned()][..], &["a.txt".to_owned()][..])
    );
    assert_eq!(read("a.txt").unwrap(), first);
    assert_eq!(store.last_event_sequence(&id).unwrap(), last, "files only");

    // Turn 1 in scope all: its files, and the session of both turns.
    let other = open();
    let report = other
        .undo_store()
        .unwrap()
        .undo(&id, "t1", UndoScope::All, &workspace)
        .unwrap();
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert_eq!(report.turns, ["t2", "t1"]);
    assert_eq!(report.restored, ["a.txt"]);
    assert_eq!(report.removed, ["dir/b.txt"]);
    assert_eq!(report.removed_directories, ["dir"]);
    assert_eq!(read("a.txt").unwrap(), old);
    assert!(!root.join("dir").exists());
    let states: Vec<(String, CheckpointState)> = store
        .checkpoints(&id)
        .unwrap()
        .into_iter()
        .map(|checkpoint| (checkpoint.turn_id, checkpoint.state))
        .collect();
    assert_eq!(
        states,
        [
            ("t1".to_owned(), CheckpointState::Undone),
            ("t2".to_owned(), CheckpointState::Undone)
        ]
    );
    assert_eq!(store.messages(&id).unwrap().len() as u64, standing.0);
    assert_eq!(store.last_event_sequence(&id).unwrap(), standing.1);
    assert_eq!(store.todos(&id).unwrap(), before_todos);
    assert!(store.pending_approvals(&id).unwrap().is_empty());
    assert!(!store.has_unfinished_work(&id).unwrap());
    let history = open().undo_store().unwrap().undone_history(&id).unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].turn_id.as_str(), history[0].scope.as_str()),
        ("t1", "all")
    );
    assert_eq!(
        history[0].messages,
        [ModelMessage::text(Role::Assistant, "done one")]
    );
    let sequences: Vec<u64> = history[0]
        .events
        .iter()
        .map(|event| event.sequence)
        .collect();
    assert_eq!(
        sequences,
        (standing.1 + 1..=last).collect::<Vec<_>>(),
        "every event after the checkpoint, as it was"
    );
    // The session goes on from where the checkpoint stood.
    let next = store.append_event(&id, started("t3"), 5).unwrap();
    assert_eq!(next.sequence, standing.1 + 1);
    store
        .append_message(&id, &ModelMessage::text(Role::User, "again"))
        .unwrap();
    assert_eq!(store.messages(&id).unwrap().len() as u64, standing.0 + 1);

    // Again: nothing to do. An unknown turn or session is an error.
    let again = undoer.undo(&id, "t1", UndoScope::All, &workspace).unwrap();
    assert_eq!(again.outcome, UndoOutcome::AlreadyUndone);
    assert!(
        undoer
            .undo_preview(&id, "t2", UndoScope::Session, &workspace)
            .unwrap()
            .already_undone
    );
    assert!(matches!(
        undoer.undo(&id, "t9", UndoScope::All, &workspace),
        Err(StoreError::UnknownTurn { .. })
    ));
    assert!(matches!(
        undoer.undo(
            &format!("{prefix}-undo-ghost"),
            "t1",
            UndoScope::All,
            &workspace
        ),
        Err(StoreError::UnknownSession(_))
    ));
    assert!(matches!(
        undoer.undone_history(&format!("{prefix}-undo-ghost")),
        Err(StoreError::UnknownSession(_))
    ));
}
