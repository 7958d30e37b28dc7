//! Crash tests with a real child process killed by SIGKILL: during a turn and during a restore.
//!
//! The test binary re-executes itself (`current_exe`) running only [`crash_child_entry`], with an
//! environment variable that selects what the child does. Without the variable that test is a
//! no-op.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use clawsmith_checkpoint::{
    Durability, JournalStart, Store, StoreOptions, TurnOpening, UndoOutcome, UndoScope,
};
use clawsmith_fs::{PriorState, Workspace};

const MODE_VAR: &str = "CLAWSMITH_CHECKPOINT_CRASH_CHILD";
const DB_VAR: &str = "CLAWSMITH_CHECKPOINT_CRASH_DB";
const WS_VAR: &str = "CLAWSMITH_CHECKPOINT_CRASH_WS";
const MARKER_VAR: &str = "CLAWSMITH_CHECKPOINT_CRASH_MARKER";

const TURN_FILES: usize = 8;
const PROCESS_EVENTS: u64 = 40;
const RESTORE_FILES: usize = 300;

/// The child's body. Does nothing in a normal test run.
#[test]
fn crash_child_entry() {
    let Ok(mode) = std::env::var(MODE_VAR) else {
        return;
    };
    let store = Store::open(std::env::var(DB_VAR).unwrap()).unwrap();
    let workspace = Workspace::open(std::env::var(WS_VAR).unwrap()).unwrap();
    match mode.as_str() {
        "turn" => child_turn(&store, &workspace, false),
        "turn-hang" => child_turn(&store, &workspace, true),
        "restore" => {
            store.undo("s", "big", UndoScope::All, &workspace).unwrap();
            // Stay alive so the parent decides when we die.
            std::thread::sleep(Duration::from_secs(600));
        }
        "events" => {
            for index in 0..PROCESS_EVENTS {
                let payload = clawsmith_protocol::EventPayload::TurnStarted(
                    clawsmith_protocol::TurnStarted {
                        turn_id: format!("child-{index}"),
                    },
                );
                store.append_event("s", payload, index).unwrap();
            }
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// Content of write number `index`: a line repeated, so a torn write is recognisable.
fn content_of(index: usize) -> Vec<u8> {
    format!("write number {index:06}\n")
        .repeat(2000)
        .into_bytes()
}

fn is_complete_write(content: &[u8]) -> bool {
    let line_length = "write number 000000\n".len();
    content.len() == line_length * 2000
        && content
            .chunks(line_length)
            .all(|chunk| chunk == &content[..line_length])
}

fn child_turn(store: &Store, workspace: &Workspace, hang: bool) {
    store
        .begin_turn("s", "crash-turn", TurnOpening::default())
        .unwrap();
    for index in 0.. {
        let path_text = format!("f{}.txt", index % TURN_FILES);
        let path = workspace.resolve(&path_text).unwrap();
        let call_id = format!("call-{index}");
        store
            .journal_start(&JournalStart {
                session_id: "s".into(),
                turn_id: "crash-turn".into(),
                call_id: call_id.clone(),
                tool_name: "write_file".into(),
                args_json: format!(r#"{{"path":"{path_text}"}}"#),
            })
            .unwrap();
        let prior = workspace.read_state(&path).unwrap();
        let prior = match &prior {
            PriorState::Absent => None,
            PriorState::File { content, mode } => Some((content.as_slice(), *mode)),
        };
        store
            .record_before("s", "crash-turn", &path_text, prior)
            .unwrap();
        if hang {
            std::fs::write(std::env::var(MARKER_VAR).unwrap(), &call_id).unwrap();
            std::thread::sleep(Duration::from_secs(600));
        }
        let content = content_of(index);
        workspace
            .restore_file(&path, &content, 0o644, true)
            .unwrap();
        let post = (
            clawsmith_checkpoint::sha256(&content),
            content.len() as u64,
            0o644,
        );
        store
            .record_after("s", "crash-turn", &path_text, Some(post))
            .unwrap();
        store
            .journal_close("s", &call_id, clawsmith_protocol::ToolStatus::Success)
            .unwrap();
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    db: PathBuf,
    ws: PathBuf,
    marker: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = std::fs::canonicalize(ws).unwrap();
    let db = dir.path().join("state.db");
    Store::open(&db)
        .unwrap()
        .create_session("s", &ws.display().to_string())
        .unwrap();
    let marker = dir.path().join("marker");
    Setup {
        _dir: dir,
        db,
        ws,
        marker,
    }
}

#[allow(clippy::disallowed_methods)] // Tests may spawn; here the test binary re-runs itself.
fn spawn_child(setup: &Setup, mode: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash::crash_child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(MODE_VAR, mode)
        .env(DB_VAR, &setup.db)
        .env(WS_VAR, &setup.ws)
        .env(MARKER_VAR, &setup.marker)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Polls until `ready` (or the child exited by itself), then SIGKILLs the child.
fn kill_when(mut child: Child, mut ready: impl FnMut() -> bool) {
    loop {
        if ready() {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child exited by itself: {status}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap(); // SIGKILL on Unix.
    child.wait().unwrap();
}

/// The workspace's files, without the temp files of atomic writes that a SIGKILL can leave
/// behind (`clawsmith-fs` names them `.clawsmith-tmp-*`; the target file is never torn).
fn files(ws: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(ws)
        .unwrap()
        .filter(|entry| {
            !entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".clawsmith-tmp-")
        })
        .map(|entry| {
            let entry = entry.unwrap();
            (
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn sigkill_during_a_turn_leaves_whole_files_and_an_open_journal() {
    for threshold in [1usize, 4, 9, 17] {
        let setup = setup();
        let child = spawn_child(&setup, "turn");
        let watcher = Store::open(&setup.db).unwrap();
        kill_when(child, || watcher.journal("s").unwrap().len() >= threshold);

        let store = Store::open(&setup.db).expect("the database opens after SIGKILL");
        for (name, content) in files(&setup.ws) {
            assert!(
                name.starts_with('f') && is_complete_write(&content),
                "torn file {name}"
            );
        }
        let unfinished = store.unfinished_calls("s").unwrap();
        assert!(
            unfinished.len() <= 1,
            "at most the call in flight: {unfinished:?}"
        );
        // Undo of the interrupted turn: everything back, except possibly the one path whose
        // write happened without its post hash (the precheck refuses to guess).
        let workspace = Workspace::open(&setup.ws).unwrap();
        let report = store
            .undo("s", "crash-turn", UndoScope::Files, &workspace)
            .unwrap();
        match report.outcome {
            UndoOutcome::Undone => assert!(files(&setup.ws).is_empty(), "threshold {threshold}"),
            UndoOutcome::Conflicts(conflicts) => {
                assert_eq!(conflicts.len(), 1, "{conflicts:?}");
                assert_eq!(
                    unfinished.len(),
                    1,
                    "a conflict only comes from the call in flight"
                );
            }
            UndoOutcome::AlreadyUndone => panic!("nothing was undone before"),
        }
    }
}

#[test]
fn sigkill_after_journal_start_leaves_the_unfinished_call() {
    let setup = setup();
    let child = spawn_child(&setup, "turn-hang");
    kill_when(child, || setup.marker.exists());
    let store = Store::open(&setup.db).unwrap();
    let unfinished = store.unfinished_calls("s").unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(
        (
            unfinished[0].call_id.as_str(),
            unfinished[0].tool_name.as_str()
        ),
        ("call-0", "write_file")
    );
    assert_eq!(unfinished[0].closed_at_ms, None);
    assert_eq!(
        store.checkpoint("s", "crash-turn").unwrap().state,
        clawsmith_checkpoint::CheckpointState::Open
    );
}

/// A finished turn "big" that edited `RESTORE_FILES / 2` files and created as many; returns the
/// tree before it.
fn big_turn(setup: &Setup, workspace: &Workspace) -> Vec<(String, Vec<u8>)> {
    // Setting up needs no fsync per commit; the child under test uses the default (full).
    let options = StoreOptions {
        durability: Durability::Normal,
        ..StoreOptions::default()
    };
    let store = Store::open_with(&setup.db, options).unwrap();
    let half = RESTORE_FILES / 2;
    for index in 0..half {
        std::fs::write(
            setup.ws.join(format!("keep-{index}")),
            format!("before {index}"),
        )
        .unwrap();
    }
    let initial = files(&setup.ws);
    store
        .begin_turn("s", "big", TurnOpening::default())
        .unwrap();
    for index in 0..half {
        for (name, content) in [
            (format!("keep-{index}"), format!("after {index}")),
            (format!("new-{index}"), format!("new {index}")),
        ] {
            let path = workspace.resolve(&name).unwrap();
            let prior = match workspace.read_state(&path).unwrap() {
                PriorState::Absent => None,
                PriorState::File { content, mode } => Some((content, mode)),
            };
            let prior = prior
                .as_ref()
                .map(|(content, mode)| (content.as_slice(), *mode));
            store.record_before("s", "big", &name, prior).unwrap();
            workspace
                .restore_file(&path, content.as_bytes(), 0o644, false)
                .unwrap();
            let post = (
                clawsmith_checkpoint::sha256(content.as_bytes()),
                content.len() as u64,
                0o644,
            );
            store.record_after("s", "big", &name, Some(post)).unwrap();
        }
    }
    store.finish_turn("s", "big", workspace).unwrap();
    initial
}

/// Runs the undo of "big" in a child and SIGKILLs it once `threshold` created files are gone
/// (or once it finished).
fn kill_restore_at(setup: &Setup, threshold: usize) {
    let half = RESTORE_FILES / 2;
    let child = spawn_child(setup, "restore");
    let watcher = Store::open(&setup.db).unwrap();
    let ws = setup.ws.clone();
    kill_when(child, || {
        let created_left = (0..half)
            .filter(|index| ws.join(format!("new-{index}")).exists())
            .count();
        let restored = half - created_left;
        !watcher.pending_restores().unwrap().is_empty() && restored >= threshold.min(half)
            || watcher.checkpoint("s", "big").unwrap().files_undone
    });
}

/// No half-written file: each is its before or its after content.
fn assert_whole_files(setup: &Setup) {
    for (name, content) in files(&setup.ws) {
        let text = String::from_utf8(content).unwrap();
        let index = name.rsplit('-').next().unwrap();
        let allowed = if name.starts_with("keep-") {
            vec![format!("before {index}"), format!("after {index}")]
        } else {
            vec![format!("new {index}")]
        };
        assert!(allowed.contains(&text), "{name}: {text}");
    }
}

#[test]
fn sigkill_during_a_restore_is_completed_on_recovery() {
    for threshold in [0usize, 40, 100, RESTORE_FILES] {
        let setup = setup();
        let workspace = Workspace::open(&setup.ws).unwrap();
        let initial = big_turn(&setup, &workspace);
        kill_restore_at(&setup, threshold);
        assert_whole_files(&setup);
        let store = Store::open(&setup.db).unwrap();
        let pending = store.pending_restores().unwrap();
        if !pending.is_empty() {
            assert_eq!(pending[0].turn_id, "big");
            let refused = store
                .undo("s", "big", UndoScope::Files, &workspace)
                .unwrap_err();
            assert!(
                matches!(
                    refused,
                    clawsmith_checkpoint::StoreError::RestoreInProgress(_)
                ),
                "{refused}"
            );
        }
        // A workspace elsewhere does not pick up this plan.
        let elsewhere = tempfile::tempdir().unwrap();
        assert!(
            store
                .recover_restores(&Workspace::open(elsewhere.path()).unwrap())
                .unwrap()
                .is_empty()
        );
        let recovered = store.recover_restores(&workspace).unwrap();
        assert_eq!(recovered.len(), pending.len());
        for restore in &recovered {
            assert!(restore.skipped.is_empty(), "{:?}", restore.skipped);
            assert_eq!(
                restore.completed.len() + restore.already_done.len(),
                RESTORE_FILES
            );
        }
        assert_eq!(files(&setup.ws), initial, "threshold {threshold}");
        assert!(store.pending_restores().unwrap().is_empty());
        let checkpoint = store.checkpoint("s", "big").unwrap();
        assert!(
            checkpoint.files_undone && checkpoint.session_undone,
            "scope all completes both"
        );
        assert_eq!(
            store
                .undo("s", "big", UndoScope::All, &workspace)
                .unwrap()
                .outcome,
            UndoOutcome::AlreadyUndone
        );
    }
}

#[test]
fn recovery_leaves_alone_a_file_changed_after_the_crash() {
    let mut caught = false;
    for _attempt in 0..5 {
        let setup = setup();
        let workspace = Workspace::open(&setup.ws).unwrap();
        big_turn(&setup, &workspace);
        kill_restore_at(&setup, 5);
        let store = Store::open(&setup.db).unwrap();
        let last = format!("new-{}", RESTORE_FILES / 2 - 1);
        if store.pending_restores().unwrap().is_empty() || !setup.ws.join(&last).exists() {
            continue; // The child finished before the kill landed; try again.
        }
        caught = true;
        std::fs::write(setup.ws.join(&last), "the user's edit after the crash").unwrap();
        let recovered = store.recover_restores(&workspace).unwrap();
        assert_eq!(recovered[0].skipped.len(), 1);
        assert_eq!(recovered[0].skipped[0].path, last);
        assert_eq!(
            std::fs::read_to_string(setup.ws.join(&last)).unwrap(),
            "the user's edit after the crash"
        );
        assert!(!setup.ws.join("new-0").exists());
        break;
    }
    assert!(caught, "no attempt interrupted the restore mid-way");
}

/// Real processes (not threads) appending to one session at once: no "database is locked", and
/// the sequence stays gap-free.
#[test]
fn three_processes_append_events_at_once() {
    let setup = setup();
    let children: Vec<Child> = (0..2).map(|_| spawn_child(&setup, "events")).collect();
    let store = Store::open(&setup.db).unwrap();
    for index in 0..PROCESS_EVENTS {
        let payload =
            clawsmith_protocol::EventPayload::TurnStarted(clawsmith_protocol::TurnStarted {
                turn_id: format!("parent-{index}"),
            });
        store.append_event("s", payload, index).unwrap();
    }
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a child failed to write");
    }
    let sequences: Vec<u64> = store
        .events("s")
        .unwrap()
        .iter()
        .map(|event| event.sequence)
        .collect();
    assert_eq!(sequences, (1..=3 * PROCESS_EVENTS).collect::<Vec<_>>());
}
