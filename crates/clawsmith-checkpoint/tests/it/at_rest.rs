//! What the store writes to disk and who may write a session:
//! secrets masked in every row but the blobs, the legacy `output` stored once, arguments bounded,
//! the database private, and the session lease.

use std::os::unix::fs::MetadataExt;

use clawsmith_checkpoint::{
    JournalStart, LeaseWait, MAX_STORED_ARGUMENT_BYTES, PendingApproval, Store, StoreError,
};
use clawsmith_protocol::{
    EventPayload, ModelMessage, Role, ToolCall, ToolCompleted, ToolExecutionResult,
};

const TOKEN: &str = "ghp_Zq8Lm2Xv7Rt4Np1Ks9Wd3Fh6Jb5Gc0Ya2Ue7Qo";

/// Every byte of the database file and its WAL, except what sits in blob rows (none here).
fn database_bytes(dir: &std::path::Path) -> Vec<u8> {
    ["db", "db-wal"]
        .iter()
        .filter_map(|name| std::fs::read(dir.join(name)).ok())
        .flatten()
        .collect()
}

/// Writes a row through the store and reads it back as stored.
type WriteAndRead<'a> = Box<dyn Fn() -> String + 'a>;

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn secrets_are_masked_in_every_row_the_store_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("db")).unwrap();
    store.create_session("s", "/w").unwrap();
    let secret_text = format!("GITHUB_TOKEN={TOKEN}");
    let arguments = serde_json::json!({"command": format!("echo {TOKEN}")}).to_string();
    // (what is written, how it is read back)
    let writes: Vec<(&str, WriteAndRead<'_>)> = vec![
        ("a user message", {
            let (store, text) = (&store, secret_text.clone());
            Box::new(move || {
                store
                    .append_message("s", &ModelMessage::text(Role::User, text.clone()))
                    .unwrap();
                store.messages("s").unwrap().last().unwrap().content.clone()
            })
        }),
        ("assistant call arguments", {
            let (store, arguments) = (&store, arguments.clone());
            Box::new(move || {
                let call = ToolCall {
                    id: "c1".into(),
                    name: "run_command".into(),
                    arguments: arguments.clone(),
                };
                store
                    .append_message("s", &ModelMessage::assistant_with_calls("", vec![call]))
                    .unwrap();
                store.messages("s").unwrap().last().unwrap().tool_calls[0]
                    .arguments
                    .clone()
            })
        }),
        ("journal arguments", {
            let (store, arguments) = (&store, arguments.clone());
            Box::new(move || {
                store
                    .journal_start(&JournalStart {
                        session_id: "s".into(),
                        turn_id: "t".into(),
                        call_id: "c1".into(),
                        tool_name: "run_command".into(),
                        args_json: arguments.clone(),
                    })
                    .unwrap();
                store.journal("s").unwrap()[0].args_json.clone()
            })
        }),
        ("a tool result and its event", {
            let (store, text) = (&store, secret_text.clone());
            Box::new(move || {
                let result = ToolExecutionResult::success(text.clone());
                store
                    .close_call(
                        "s",
                        Some(("c1", clawsmith_protocol::ToolStatus::Success)),
                        EventPayload::ToolCompleted(ToolCompleted::new(
                            "c1",
                            "t",
                            "run_command",
                            &result,
                        )),
                        5,
                        &ModelMessage::tool_result(
                            "c1",
                            "run_command",
                            text.clone(),
                            result.summary(),
                        ),
                    )
                    .unwrap();
                let events = store.events("s").unwrap();
                let EventPayload::ToolCompleted(done) = &events.last().unwrap().payload else {
                    panic!("{events:?}")
                };
                // Served: derived from the (masked) tool message.
                assert_eq!(
                    done.output,
                    store.messages("s").unwrap().last().unwrap().content
                );
                done.output.clone()
            })
        }),
        ("an approval request", {
            let (store, text) = (&store, secret_text.clone());
            Box::new(move || {
                store
                    .add_pending_approval(
                        "s",
                        &PendingApproval {
                            approval_id: "a".into(),
                            turn_id: "t".into(),
                            call_id: "c2".into(),
                            request: serde_json::json!({"summary": text}),
                        },
                    )
                    .unwrap();
                store.pending_approvals("s").unwrap()[0].request.to_string()
            })
        }),
        ("an artifact", {
            let (store, text) = (&store, secret_text.clone());
            Box::new(move || {
                let artifact = store.put_artifact("s", text.as_bytes()).unwrap();
                String::from_utf8(
                    store
                        .read_artifact("s", &artifact.artifact_id)
                        .unwrap()
                        .unwrap(),
                )
                .unwrap()
            })
        }),
    ];
    for (what, write_and_read) in writes {
        let stored = write_and_read();
        assert!(!stored.contains(TOKEN), "{what}: {stored}");
        assert!(stored.contains("[REDACTED]"), "{what}: {stored}");
    }
    assert!(
        !contains(&database_bytes(dir.path()), TOKEN),
        "a secret reached the file"
    );
    assert_eq!(
        std::fs::metadata(dir.path().join("db")).unwrap().mode() & 0o777,
        0o600
    );
}

#[test]
fn the_legacy_output_is_stored_once_and_arguments_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("db")).unwrap();
    store.create_session("s", "/w").unwrap();
    let marker = "only-once-".repeat(30); // within one page of the file
    let result = ToolExecutionResult::success(marker.clone());
    store
        .close_call(
            "s",
            None,
            EventPayload::ToolCompleted(ToolCompleted::new("r", "t", "read_file", &result)),
            1,
            &ModelMessage::tool_result("r", "read_file", marker.clone(), result.summary()),
        )
        .unwrap();
    // Providers number calls per turn: each `tool.completed` gets its own turn's text back.
    for (turn, text) in [("t1", "first answer"), ("t2", "second answer")] {
        let result = ToolExecutionResult::success(text);
        let completed = ToolCompleted::new("call_0", turn, "read_file", &result);
        let message = ModelMessage::tool_result("call_0", "read_file", text, result.summary());
        let closed = EventPayload::ToolCompleted(completed);
        store.close_call("s", None, closed, 2, &message).unwrap();
    }
    let outputs: Vec<String> = store
        .events_page("s", 1, 10)
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.payload {
            EventPayload::ToolCompleted(done) => Some(done.output),
            _ => None,
        })
        .collect();
    assert_eq!(outputs, ["first answer", "second answer"]);
    // The WAL keeps every version of a rewritten page; the main file holds each row once.
    store.checkpoint_wal().unwrap();
    drop(store);
    let bytes = database_bytes(dir.path());
    let copies = bytes
        .windows(marker.len())
        .filter(|w| *w == marker.as_bytes())
        .count();
    assert_eq!(copies, 1, "the output is stored beside its message");
    let store = Store::open(dir.path().join("db")).unwrap();
    let huge = format!(
        "{{\"content\":\"{}\"}}",
        "y".repeat(3 * MAX_STORED_ARGUMENT_BYTES)
    );
    let call = ToolCall {
        id: "w".into(),
        name: "write_file".into(),
        arguments: huge,
    };
    store
        .append_message("s", &ModelMessage::assistant_with_calls("", vec![call]))
        .unwrap();
    let messages = store.messages("s").unwrap();
    let stored = &messages.last().unwrap().tool_calls[0].arguments;
    assert!(
        stored.len() < MAX_STORED_ARGUMENT_BYTES + 100,
        "{}",
        stored.len()
    );
    assert!(stored.ends_with("bytes]"));
}

/// A read's display body is the file's text, as is its tool message: the log holds the text
/// once and every reader (a page of events, a fork) gets the body back; a body that differs
/// from the text (clipped, or masked where the model's copy is not) is stored as it is. The event
/// handed back (to the sinks) keeps its body and legacy output.
#[test]
fn a_display_body_equal_to_the_tool_message_is_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("db")).unwrap();
    store.create_session("s", "/w").unwrap();
    let text = "body-once-".repeat(30); // within one page of the file
    let clipped = format!("{}…", &text[..50]);
    let secret = format!("token {TOKEN}\n");
    // (call id, the model's text, the display body)
    let cases = [
        ("same", text.clone(), text.clone()),
        ("clipped", text.clone(), clipped.clone()),
        ("masked", secret.clone(), "token [REDACTED]\n".to_owned()),
    ];
    for (id, content, body) in &cases {
        let display = clawsmith_protocol::Display::new(clawsmith_protocol::DisplayKind::Text)
            .with_title(format!("read {id}"))
            .with_body(body.clone());
        let result = ToolExecutionResult::success(content.clone()).with_display(display);
        let completed = ToolCompleted::new(*id, "t", "read_file", &result);
        let message =
            ModelMessage::tool_result(*id, "read_file", content.clone(), result.summary());
        let given = EventPayload::ToolCompleted(completed);
        let stored = store
            .close_call("s", None, given.clone(), 1, &message)
            .unwrap();
        // What the sinks get is the event as given: the texts left out of the row are back.
        assert_eq!(stored.payload, given, "{id}");
    }
    store.fork_session("s", "f").unwrap();
    for session in ["s", "f"] {
        let bodies: Vec<(String, Option<String>)> = store
            .events(session)
            .unwrap()
            .into_iter()
            .filter_map(|event| match event.payload {
                EventPayload::ToolCompleted(done) => Some((
                    done.tool_call_id,
                    done.result.display.and_then(|display| display.body),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(
            bodies,
            [
                ("same".to_owned(), Some(text.clone())),
                ("clipped".to_owned(), Some(clipped.clone())),
                // Not the text: stored beside it, masked.
                ("masked".to_owned(), Some("token [REDACTED]\n".to_owned())),
            ],
            "session {session}"
        );
    }
    store.checkpoint_wal().unwrap();
    drop(store);
    let bytes = database_bytes(dir.path());
    let copies = bytes
        .windows(text.len())
        .filter(|w| *w == text.as_bytes())
        .count();
    // One in the first message, one in the clipped case's message; the fork copies both rows.
    assert_eq!(
        copies, 4,
        "the body equal to its message is not stored again"
    );
    assert!(!contains(&bytes, TOKEN));
}

#[test]
fn a_symlink_at_the_database_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "not yours\n").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("db")).unwrap();
    let error = Store::open(dir.path().join("db")).unwrap_err();
    assert!(matches!(error, StoreError::Open { .. }), "{error}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "not yours\n");
}

#[test]
fn a_session_lease_is_one_os_lock_shared_inside_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("db")).unwrap();
    let other_store = Store::open(dir.path().join("db")).unwrap();
    let first = store.lease_session("s").unwrap();
    assert!(first.is_fresh());
    // (a second holder in this process, fresh?)
    let cases = [
        (other_store.lease_session("s").unwrap(), false),
        (store.lease_session("t").unwrap(), true),
    ];
    for (lease, fresh) in &cases {
        assert_eq!(lease.is_fresh(), *fresh);
    }
    let lock = lock_file_of(dir.path(), "s");
    assert_eq!(std::fs::metadata(&lock).unwrap().mode() & 0o777, 0o600);
    let outsider = std::fs::File::open(&lock).unwrap();
    assert!(outsider.try_lock().is_err(), "the OS lock is held");
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap().trim(),
        std::process::id().to_string()
    );
    drop(cases);
    assert!(
        outsider.try_lock().is_err(),
        "still held by the first lease"
    );
    drop(first);
    assert!(outsider.try_lock().is_ok(), "released with the last holder");
}

#[test]
fn another_process_holding_the_session_is_named_or_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("db")).unwrap();
    drop(store.lease_session("s").unwrap());
    let lock = lock_file_of(dir.path(), "s");
    // Tests may spawn helpers (clippy.toml); util-linux flock(1) takes the same flock(2) lock; the shell writes its pid like a holder.
    std::fs::write(&lock, "").unwrap();
    #[allow(clippy::disallowed_methods)]
    let mut holder = std::process::Command::new("flock")
        .arg(&lock)
        .args(["sh", "-c"])
        .arg(format!("echo $$ > {}; exec sleep 1", lock.display()))
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(&lock)
        .unwrap_or_default()
        .trim()
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let error = store.lease_session("s").unwrap_err();
    assert!(
        matches!(error, StoreError::SessionInUse { pid: Some(_), .. }),
        "{error}"
    );
    assert!(
        error.to_string().starts_with("session s is in use by pid "),
        "{error}"
    );
    store.set_lease_wait(LeaseWait::Wait);
    let lease = store.lease_session("s").unwrap();
    assert!(lease.is_fresh());
    holder.wait().unwrap();
}

/// A holder killed by a signal can leave its lock in children that have not closed what they
/// inherited yet (they die within milliseconds): the pid it wrote is dead, so the next writer
/// waits for the lock instead of refusing (crash recovery must not fail on a dead holder), and
/// refuses at once when the writer is alive.
#[test]
fn a_lock_left_in_a_dead_holders_children_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("db")).unwrap();
    drop(store.lease_session("s").unwrap());
    let lock = lock_file_of(dir.path(), "s");
    #[allow(clippy::disallowed_methods)]
    let dead = {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    // The lock is held (by flock(1), standing in for a dying child) while the file names a
    // process that no longer exists.
    std::fs::write(&lock, format!("{dead}\n")).unwrap();
    let marker = dir.path().join("locked");
    // The holder's last act with the lock held: the lock is released only after it, when the
    // shell and flock(1) exit.
    let done = dir.path().join("done");
    #[allow(clippy::disallowed_methods)]
    let mut holder = std::process::Command::new("flock")
        .arg(&lock)
        .args(["sh", "-c"])
        .arg(format!(
            "touch {}; sleep 0.5; touch {}",
            marker.display(),
            done.display()
        ))
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !marker.exists() {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let lease = store.lease_session("s").unwrap();
    assert!(lease.is_fresh());
    // The holder had to be done for the lease to be taken. (Not `try_wait`: an exiting
    // process releases its locks before its parent can reap it.)
    assert!(done.exists(), "the lease was taken while the lock was held");
    drop(lease);
    holder.wait().unwrap();
}

#[test]
fn threads_of_one_process_share_the_lease_without_refusing_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let stores: Vec<Store> = (0..8)
        .map(|_| Store::open(dir.path().join("db")).unwrap())
        .collect();
    let barrier = std::sync::Barrier::new(stores.len());
    let leases: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = stores
            .iter()
            .map(|store| {
                scope.spawn(|| {
                    barrier.wait();
                    store.lease_session("s")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let fresh = leases
        .iter()
        .map(|lease| lease.as_ref().map(|l| l.is_fresh()))
        .collect::<Result<Vec<bool>, _>>()
        .unwrap();
    assert_eq!(fresh.iter().filter(|f| **f).count(), 1, "{fresh:?}");
}

/// The lock file of session `id` in a state dir (as the store names it).
fn lock_file_of(dir: &std::path::Path, id: &str) -> std::path::PathBuf {
    dir.join(clawsmith_checkpoint::LOCK_DIR).join(format!(
        "{}.lock",
        clawsmith_checkpoint::hash_hex(&clawsmith_checkpoint::sha256(id.as_bytes()))
    ))
}
