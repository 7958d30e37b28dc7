//! Two stores on one file, writing at once from threads: no "database is locked".

use std::sync::{Arc, Barrier};

use clawsmith_checkpoint::{Store, TurnOpening};

use crate::support::{turn_started, user};

#[test]
fn two_stores_on_one_file_write_concurrently() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    Store::open(&path)
        .unwrap()
        .create_session("shared", "/w")
        .unwrap();
    const WRITERS: usize = 4;
    const EVENTS: u64 = 40;
    let barrier = Arc::new(Barrier::new(WRITERS));
    let handles: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let path = path.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                // Each thread opens its own store: separate connections, like separate processes.
                let store = Store::open(&path).unwrap();
                store
                    .create_session(&format!("own-{writer}"), "/w")
                    .unwrap();
                barrier.wait();
                for index in 0..EVENTS {
                    store
                        .append_event("shared", turn_started(&format!("{writer}-{index}")), index)
                        .unwrap();
                    store
                        .append_message(&format!("own-{writer}"), &user("x"))
                        .unwrap();
                    let _ = store.events("shared").unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let sequences: Vec<u64> = store
        .events("shared")
        .unwrap()
        .iter()
        .map(|e| e.sequence)
        .collect();
    assert_eq!(
        sequences,
        (1..=WRITERS as u64 * EVENTS).collect::<Vec<_>>(),
        "gap-free under contention"
    );
    for writer in 0..WRITERS {
        assert_eq!(
            store.messages(&format!("own-{writer}")).unwrap().len() as u64,
            EVENTS
        );
    }
}

/// Like an MCP server recording turns while a CLI undoes turns of another session, each with its
/// own `Store` on the same file.
#[test]
fn recording_and_undoing_at_once_from_two_stores() {
    use clawsmith_checkpoint::{UndoOutcome, UndoScope};
    use clawsmith_fs::Workspace;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let setup = Store::open(&path).unwrap();
    for (session, folder) in [("server", "ws-server"), ("cli", "ws-cli")] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
        setup.create_session(session, folder).unwrap();
    }
    const TURNS: usize = 15;
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = [("server", "ws-server", false), ("cli", "ws-cli", true)]
        .into_iter()
        .map(|(session, folder, undo)| {
            let (path, root, barrier) = (path.clone(), dir.path().join(folder), barrier.clone());
            std::thread::spawn(move || {
                let store = Store::open(&path).unwrap();
                let workspace = Workspace::open(&root).unwrap();
                barrier.wait();
                for index in 0..TURNS {
                    let turn = format!("t{index}");
                    let name = format!("f{}.txt", index % 3);
                    let file = workspace.resolve(&name).unwrap();
                    store
                        .begin_turn(session, &turn, TurnOpening::default())
                        .unwrap();
                    let prior = match workspace.read_state(&file).unwrap() {
                        clawsmith_fs::PriorState::Absent => None,
                        clawsmith_fs::PriorState::File { content, mode } => Some((content, mode)),
                    };
                    let prior = prior
                        .as_ref()
                        .map(|(content, mode)| (content.as_slice(), *mode));
                    store.record_before(session, &turn, &name, prior).unwrap();
                    let content = format!("{session} {index}");
                    workspace
                        .restore_file(&file, content.as_bytes(), 0o644, false)
                        .unwrap();
                    let post = (
                        clawsmith_checkpoint::sha256(content.as_bytes()),
                        content.len() as u64,
                        0o644,
                    );
                    store
                        .record_after(session, &turn, &name, Some(post))
                        .unwrap();
                    store.finish_turn(session, &turn, &workspace).unwrap();
                    if undo {
                        let report = store
                            .undo(session, &turn, UndoScope::All, &workspace)
                            .unwrap();
                        assert_eq!(report.outcome, UndoOutcome::Undone);
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.checkpoints("server").unwrap().len(), TURNS);
    assert!(
        store
            .checkpoints("cli")
            .unwrap()
            .iter()
            .all(|checkpoint| checkpoint.files_undone)
    );
    assert!(
        std::fs::read_dir(dir.path().join("ws-cli"))
            .unwrap()
            .next()
            .is_none(),
        "every cli turn was undone"
    );
}

/// Several processes starting at once on a file that does not exist yet: one creates and
/// migrates it, the others wait and find it ready.
#[test]
fn concurrent_first_opens_of_a_new_file() {
    for _round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fresh.db");
        let barrier = Arc::new(Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|index| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let store = Store::open(&path).unwrap();
                    store.create_session(&format!("s{index}"), "/w").unwrap();
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(
            Store::open(&path).unwrap().list_sessions().unwrap().len(),
            4
        );
    }
}
