//! Undo on PostgreSQL beyond the shared contract: a plan a killed writer left behind blocks the
//! session's next undo until the next holder rolls it forward in the same workspace, and a plan
//! is data, not a promise (a path outside the workspace is reported, never acted on); two hosts
//! racing to undo one turn restore it once; a host killed by SIGKILL inside an undo (the test
//! binary re-runs itself as that host) leaves whole files and a plan the next holder finishes.

use std::time::Duration;

use clawsmith_checkpoint::{hash_hex, sha256};
use clawsmith_store::{
    CheckpointState, SessionStore, StoreError, TurnOpening, TurnStore, UndoScope,
};
use clawsmith_store_postgres::{PgOptions, PgStore};

use crate::{migrated, postgres, query_text, run_sql};

#[test]
fn a_plan_left_by_a_killed_undo_is_rolled_forward_by_the_next_holder_in_its_workspace() {
    let Some(base) = postgres("a_plan_left_by_a_killed_undo_is_rolled_forward") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(scratch.path().join("outside.txt"), b"keep\n").unwrap();
    let workspace = clawsmith_fs::Workspace::open(&root).unwrap();
    let store = open();
    store
        .create_session("s", &root.display().to_string())
        .unwrap();
    let (old, new) = (b"old\n".as_slice(), b"new\n".as_slice());
    store.begin_turn("s", "t1", TurnOpening::default()).unwrap();
    store
        .record_before("s", "t1", "a.txt", Some((old, 0o644)))
        .unwrap();
    std::fs::write(root.join("a.txt"), new).unwrap();
    store
        .record_after("s", "t1", "a.txt", Some((sha256(new), 4, 0o644)))
        .unwrap();
    let read = |path: &str| std::fs::read(root.join(path)).ok();
    store
        .finish_turn_reading(
            "s",
            "t1",
            &read,
            clawsmith_protocol::EventPayload::TurnCompleted(clawsmith_protocol::TurnCompleted {
                turn_id: "t1".to_owned(),
                tool_calls: 0,
            }),
            1,
        )
        .unwrap();
    let checkpoint = query_text(
        &url,
        "SELECT id::text FROM clawsmith_checkpoints WHERE turn_id = 't1'",
    );
    // What a writer killed after committing its plan leaves: the plan row, nothing restored.
    let plan = serde_json::json!({
        "session_id": "s",
        "turn_id": "t1",
        "scope": "files",
        "turns": ["t1"],
        "files_checkpoints": [checkpoint.parse::<i64>().unwrap()],
        "session_checkpoints": [],
        "session_target": null,
        "actions": [
            {"path": "a.txt", "current": hash_hex(&sha256(new)),
             "target": {"sha256": hash_hex(&sha256(old)), "mode": 0o644}},
            {"path": "../outside.txt", "current": null, "target": null},
        ],
    });
    run_sql(
        &url,
        &[&format!(
            "INSERT INTO clawsmith_restore_plans
               (session_id, workspace_root, created_at_ms, plan_json, epoch)
             VALUES ('s', '{}', 0, '{plan}', 0)",
            root.display()
        )],
    );
    let undoer = store.undo_store().unwrap();
    assert!(matches!(
        undoer.undo("s", "t1", UndoScope::Files, &workspace),
        Err(StoreError::RestoreInProgress(_))
    ));
    assert!(
        store.has_unfinished_work("s").unwrap(),
        "a pending plan is unfinished work"
    );
    // Another workspace root is another workspace: its plans are not this one's to finish.
    let elsewhere = scratch.path().join("other");
    std::fs::create_dir(&elsewhere).unwrap();
    let other = clawsmith_fs::Workspace::open(&elsewhere).unwrap();
    assert!(
        undoer
            .recover_session_restores(&other, "s")
            .unwrap()
            .is_empty()
    );
    assert_eq!(read("a.txt").unwrap(), new);

    let recovered = open()
        .undo_store()
        .unwrap()
        .recover_session_restores(&workspace, "s")
        .unwrap();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].completed, ["a.txt"]);
    assert_eq!(recovered[0].skipped.len(), 1);
    assert_eq!(recovered[0].skipped[0].path, "../outside.txt");
    assert_eq!(read("a.txt").unwrap(), old);
    assert_eq!(
        std::fs::read(scratch.path().join("outside.txt")).unwrap(),
        b"keep\n",
        "a path outside the workspace is never acted on"
    );
    assert_eq!(
        store.checkpoints("s").unwrap()[0].state,
        CheckpointState::Undone
    );
    assert!(!store.has_unfinished_work("s").unwrap());
    assert!(
        undoer
            .recover_session_restores(&workspace, "s")
            .unwrap()
            .is_empty()
    );
}

/// Two hosts undo the same turn at once, without the lease the CLI would take: the checkpoints'
/// row locks serialize their plans, so exactly one restores and the other is told the turn is
/// already undone (or that an undo is in progress); no plan is left and the file holds its
/// prior content. Raced over several sessions.
#[test]
fn two_hosts_undoing_one_turn_at_once_restore_it_once() {
    let Some(base) = postgres("two_hosts_undoing_one_turn_at_once_restore_it_once") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    let workspace = clawsmith_fs::Workspace::open(&root).unwrap();
    let setup = open();
    let (old, new) = (b"old\n".as_slice(), b"new\n".as_slice());
    const ROUNDS: usize = 12;
    for round in 0..ROUNDS {
        let (id, path) = (format!("race-{round}"), format!("f{round}.txt"));
        setup
            .create_session(&id, &root.display().to_string())
            .unwrap();
        setup.begin_turn(&id, "t1", TurnOpening::default()).unwrap();
        setup
            .record_before(&id, "t1", &path, Some((old, 0o644)))
            .unwrap();
        std::fs::write(root.join(&path), new).unwrap();
        setup
            .record_after(&id, "t1", &path, Some((sha256(new), 4, 0o644)))
            .unwrap();
    }
    let hosts = [open(), open()];
    let mut undone = 0;
    for round in 0..ROUNDS {
        let id = format!("race-{round}");
        let barrier = std::sync::Barrier::new(2);
        let outcomes: Vec<Result<clawsmith_store::UndoOutcome, StoreError>> =
            std::thread::scope(|scope| {
                let racers: Vec<_> = hosts
                    .iter()
                    .map(|host| {
                        let (barrier, id, workspace) = (&barrier, &id, &workspace);
                        scope.spawn(move || {
                            barrier.wait();
                            host.undo_store()
                                .unwrap()
                                .undo(id, "t1", UndoScope::Files, workspace)
                                .map(|report| report.outcome)
                        })
                    })
                    .collect();
                racers
                    .into_iter()
                    .map(|racer| racer.join().unwrap())
                    .collect()
            });
        let restored = outcomes
            .iter()
            .filter(|outcome| matches!(outcome, Ok(clawsmith_store::UndoOutcome::Undone)))
            .count();
        assert_eq!(restored, 1, "round {round}: {outcomes:?}");
        for outcome in &outcomes {
            assert!(
                matches!(
                    outcome,
                    Ok(clawsmith_store::UndoOutcome::Undone
                        | clawsmith_store::UndoOutcome::AlreadyUndone)
                        | Err(StoreError::RestoreInProgress(_))
                ),
                "round {round}: {outcomes:?}"
            );
        }
        undone += restored;
        assert_eq!(
            std::fs::read(root.join(format!("f{round}.txt"))).unwrap(),
            old
        );
    }
    assert_eq!(undone, ROUNDS);
    assert_eq!(
        query_text(&url, "SELECT count(*)::text FROM clawsmith_restore_plans"),
        "0"
    );
    assert_eq!(
        query_text(
            &url,
            "SELECT count(*)::text FROM clawsmith_checkpoints WHERE state = 'undone'"
        ),
        ROUNDS.to_string()
    );
}

const CRASH_CHILD: &str = "CLAWSMITH_PG_UNDO_CRASH_CHILD";
const CRASH_URL: &str = "CLAWSMITH_PG_UNDO_CRASH_URL";
const CRASH_WS: &str = "CLAWSMITH_PG_UNDO_CRASH_WS";
const RESTORE_FILES: usize = 200;
const CRASH_LEASE: Duration = Duration::from_millis(1500);

fn crash_options() -> PgOptions {
    PgOptions {
        lease_ttl: CRASH_LEASE,
        wait_for_lease: true,
        ..PgOptions::default()
    }
}

/// The child's body: under the session's lease, undo turn "big" in scope all, then stay alive
/// until killed. Does nothing in a normal test run.
#[test]
fn undo_crash_child() {
    let Ok(_) = std::env::var(CRASH_CHILD) else {
        return;
    };
    let store = PgStore::connect(&std::env::var(CRASH_URL).unwrap(), crash_options()).unwrap();
    let workspace = clawsmith_fs::Workspace::open(std::env::var(CRASH_WS).unwrap()).unwrap();
    let _lease = store.lease_session("s").unwrap();
    store
        .undo_store()
        .unwrap()
        .undo("s", "big", UndoScope::All, &workspace)
        .unwrap();
    std::thread::sleep(Duration::from_secs(600));
}

/// The workspace's files, without the temp files a killed atomic write leaves.
fn files(root: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(root)
        .unwrap()
        .map(Result::unwrap)
        .filter(|entry| {
            !entry
                .file_name()
                .to_string_lossy()
                .starts_with(".clawsmith-tmp-")
        })
        .map(|entry| {
            (
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// A host killed (SIGKILL) at several points of an undo that restores 100 files and removes 100:
/// every file is whole (its content before or after the turn); once the dead host's lease has
/// expired, the next holder rolls the plan forward and the tree is exactly as before the turn,
/// the session rewound and the turn undone in both parts, with nothing skipped.
#[test]
fn a_host_killed_during_an_undo_leaves_whole_files_and_the_next_holder_finishes_it() {
    let Some(base) = postgres("a_host_killed_during_an_undo") else {
        return;
    };
    let half = RESTORE_FILES / 2;
    let mut interrupted = 0;
    for threshold in [0, 10, 40, RESTORE_FILES] {
        let (url, _) = migrated(&base, PgOptions::default());
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        let workspace = clawsmith_fs::Workspace::open(&root).unwrap();
        let setup = PgStore::connect(&url, crash_options()).unwrap();
        setup
            .create_session("s", &root.display().to_string())
            .unwrap();
        for index in 0..half {
            std::fs::write(
                root.join(format!("keep-{index}")),
                format!("before {index}"),
            )
            .unwrap();
        }
        let initial = files(&root);
        setup
            .begin_turn("s", "big", TurnOpening::default())
            .unwrap();
        for index in 0..half {
            for (name, before, after) in [
                (
                    format!("keep-{index}"),
                    Some(format!("before {index}")),
                    format!("after {index}"),
                ),
                (format!("new-{index}"), None, format!("new {index}")),
            ] {
                setup
                    .record_before(
                        "s",
                        "big",
                        &name,
                        before.as_ref().map(|text| (text.as_bytes(), 0o644)),
                    )
                    .unwrap();
                std::fs::write(root.join(&name), &after).unwrap();
                let post = (sha256(after.as_bytes()), after.len() as u64, 0o644);
                setup.record_after("s", "big", &name, Some(post)).unwrap();
            }
        }
        let read = |path: &str| std::fs::read(root.join(path)).ok();
        setup
            .finish_turn_reading(
                "s",
                "big",
                &read,
                clawsmith_protocol::EventPayload::TurnCompleted(
                    clawsmith_protocol::TurnCompleted {
                        turn_id: "big".to_owned(),
                        tool_calls: 0,
                    },
                ),
                1,
            )
            .unwrap();
        drop(setup);

        #[allow(clippy::disallowed_methods)] // The test binary re-runs itself as the host.
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "undo::undo_crash_child", "--nocapture"])
            .env(CRASH_CHILD, "1")
            .env(CRASH_URL, &url)
            .env(CRASH_WS, &root)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            // A file is removed only once the plan is committed: the files tell, and only the
            // first point asks the database.
            let removed = (0..half)
                .filter(|index| !root.join(format!("new-{index}")).exists())
                .count();
            let ready = match threshold {
                0 => query_text(&url, "SELECT count(*)::text FROM clawsmith_restore_plans") != "0",
                _ => removed >= threshold.min(half),
            };
            if ready || removed == half {
                break;
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "the child exited by itself"
            );
            assert!(std::time::Instant::now() < deadline, "the undo never began");
            std::thread::sleep(Duration::from_millis(1));
        }
        child.kill().unwrap();
        child.wait().unwrap();

        // Whole files only.
        for (name, content) in files(&root) {
            let text = String::from_utf8(content).unwrap();
            let index = name.rsplit('-').next().unwrap();
            let allowed = if name.starts_with("keep-") {
                vec![format!("before {index}"), format!("after {index}")]
            } else {
                vec![format!("new {index}")]
            };
            assert!(allowed.contains(&text), "{name}: {text}");
        }
        // The next holder waits out the dead host's lease, then finishes its plan.
        let next = PgStore::connect(&url, crash_options()).unwrap();
        let lease = next.lease_session("s").unwrap();
        assert!(lease.is_fresh());
        let recovered = next
            .undo_store()
            .unwrap()
            .recover_session_restores(&workspace, "s")
            .unwrap();
        interrupted += recovered.len();
        for restore in &recovered {
            assert!(restore.skipped.is_empty(), "{:?}", restore.skipped);
            assert_eq!(
                restore.completed.len() + restore.already_done.len(),
                RESTORE_FILES,
                "threshold {threshold}"
            );
        }
        assert_eq!(files(&root), initial, "threshold {threshold}");
        let checkpoint = &next.checkpoints("s").unwrap()[0];
        assert!(
            checkpoint.files_undone && checkpoint.session_undone,
            "threshold {threshold}: scope all completes both"
        );
        assert_eq!(next.last_event_sequence("s").unwrap(), 0);
        assert!(!next.has_unfinished_work("s").unwrap());
        assert_eq!(
            next.undo_store()
                .unwrap()
                .undo("s", "big", UndoScope::All, &workspace)
                .unwrap()
                .outcome,
            clawsmith_store::UndoOutcome::AlreadyUndone
        );
    }
    assert!(
        interrupted > 0,
        "no kill landed inside an undo: the test exercised no recovery"
    );
}
