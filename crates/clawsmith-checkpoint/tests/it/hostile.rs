//! Corrupt or hostile state: rows written by a damaged file or by hand. A blob that no longer
//! matches its hash and a checkpoint row, restore plan or journal row that points outside the
//! workspace are each refused with a clear error or reported as a skipped path; nothing outside
//! the workspace is read or written, and nothing damaged is written inside it.

use std::path::{Path, PathBuf};

use clawsmith_checkpoint::{
    JournalStart, Store, StoreError, TurnOpening, UndoOutcome, UndoScope, hash_hex, sha256,
};
use rusqlite::{Connection, params};

use crate::support::Fixture;

const ORIGINAL: &[u8] = b"original content\n";
const EDITED: &[u8] = b"edited content\n";

/// A file-backed fixture whose turn `t1` edited `a.txt` from [`ORIGINAL`] to [`EDITED`], plus a
/// raw connection to the same file for the damage, and a directory outside the workspace holding
/// `victim.txt` with the turn's post content (so a path that escaped would pass the precheck).
struct Damaged {
    fixture: Fixture,
    raw: Connection,
    outside: PathBuf,
}

fn damaged() -> Damaged {
    let fixture = Fixture::with_store(|dir| Store::open(dir.join("state.db")).unwrap());
    fixture.write_initial("a.txt", ORIGINAL, 0o644);
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.edit("t1", "a.txt", EDITED);
    fixture.finish("t1");
    #[allow(clippy::disallowed_methods)] // The test plays the part of a damaged or edited file.
    let raw = Connection::open(fixture.dir.path().join("state.db")).unwrap();
    raw.busy_timeout(std::time::Duration::from_secs(15))
        .unwrap();
    let outside = fixture.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("victim.txt"), EDITED).unwrap();
    Damaged {
        fixture,
        raw,
        outside,
    }
}

fn hex(content: &[u8]) -> String {
    hash_hex(&sha256(content))
}

impl Damaged {
    fn corrupt_blob(&self, content: &[u8], replacement: &[u8]) {
        let changed = self
            .raw
            .execute(
                "UPDATE blobs SET content = ?1 WHERE hash = ?2",
                params![replacement, hex(content)],
            )
            .unwrap();
        assert_eq!(changed, 1);
    }

    fn file(&self, path: &str) -> Vec<u8> {
        std::fs::read(self.fixture.root().join(path)).unwrap()
    }

    fn victim(&self) -> Vec<u8> {
        std::fs::read(self.outside.join("victim.txt")).unwrap()
    }

    fn checkpoint_id(&self) -> i64 {
        self.raw
            .query_row(
                "SELECT id FROM checkpoints WHERE session_id = 's' AND turn_id = 't1'",
                [],
                |row| row.get(0),
            )
            .unwrap()
    }

    /// Inserts a restore plan as a crashed undo would have left it.
    fn insert_plan(&self, actions: serde_json::Value) {
        let plan = serde_json::json!({
            "session_id": "s",
            "turn_id": "t1",
            "scope": "files",
            "turns": ["t1"],
            "files_checkpoints": [self.checkpoint_id()],
            "session_checkpoints": [],
            "session_target": null,
            "actions": actions,
        });
        self.raw
            .execute(
                "INSERT INTO restore_plans (session_id, workspace_root, created_at, plan_json)
                 VALUES ('s', ?1, 0, ?2)",
                params![self.fixture.root().display().to_string(), plan.to_string()],
            )
            .unwrap();
    }
}

/// Replacement contents for a damaged blob: a flipped byte, a cut, nothing, someone else's bytes.
fn damage_cases() -> Vec<(&'static str, Vec<u8>)> {
    let mut flipped = ORIGINAL.to_vec();
    flipped[3] ^= 0x20;
    vec![
        ("flipped byte", flipped),
        ("truncated", ORIGINAL[..5].to_vec()),
        ("empty", Vec::new()),
        ("other content", b"rm -rf ~\n".to_vec()),
    ]
}

#[test]
fn undo_refuses_a_damaged_prior_blob_and_changes_nothing() {
    for (name, replacement) in damage_cases() {
        for scope in [UndoScope::Files, UndoScope::All] {
            let damaged = damaged();
            damaged.corrupt_blob(ORIGINAL, &replacement);
            let store = &damaged.fixture.store;
            let error = store
                .undo("s", "t1", scope, &damaged.fixture.workspace)
                .unwrap_err();
            assert!(
                matches!(&error, StoreError::CorruptBlob(hash) if *hash == hex(ORIGINAL)),
                "{name}: {error:?}"
            );
            let message = error.to_string();
            assert!(
                message.contains("no longer matches its SHA-256"),
                "{message}"
            );
            assert_eq!(damaged.file("a.txt"), EDITED, "{name}");
            assert!(store.pending_restores().unwrap().is_empty(), "{name}");
            let checkpoint = store.checkpoint("s", "t1").unwrap();
            assert!(
                !checkpoint.files_undone && !checkpoint.session_undone,
                "{name}"
            );
        }
    }
}

#[test]
fn undo_of_a_deleted_file_refuses_a_damaged_prior_blob() {
    let damaged = damaged();
    let fixture = &damaged.fixture;
    fixture.write_initial("b.txt", b"bee\n", 0o600);
    fixture
        .store
        .begin_turn("s", "t2", TurnOpening::default())
        .unwrap();
    fixture.delete("t2", "b.txt");
    fixture.finish("t2");
    damaged.corrupt_blob(b"bee\n", b"wasp\n");
    let error = fixture
        .store
        .undo("s", "t2", UndoScope::Files, &fixture.workspace)
        .unwrap_err();
    assert!(matches!(error, StoreError::CorruptBlob(_)), "{error:?}");
    assert!(!fixture.root().join("b.txt").exists());
    // Undoing t1 rewinds t2 as well: the same damaged blob refuses it too.
    let error = fixture
        .store
        .undo("s", "t1", UndoScope::Files, &fixture.workspace)
        .unwrap_err();
    assert!(matches!(error, StoreError::CorruptBlob(_)), "{error:?}");
    assert_eq!(damaged.file("a.txt"), EDITED);
}

#[test]
fn diff_refuses_a_damaged_blob_on_either_side() {
    for (side, content) in [("before", ORIGINAL), ("after", EDITED)] {
        let damaged = damaged();
        damaged.corrupt_blob(content, b"tampered\n");
        let error = damaged.fixture.store.diff("s", "t1", "a.txt").unwrap_err();
        assert!(
            matches!(&error, StoreError::CorruptBlob(hash) if *hash == hex(content)),
            "{side}: {error:?}"
        );
    }
    // Undamaged, the same diff works.
    let damaged = damaged();
    assert!(
        damaged
            .fixture
            .store
            .diff("s", "t1", "a.txt")
            .unwrap()
            .is_some()
    );
}

#[test]
fn recovery_never_writes_a_damaged_blob() {
    let damaged = damaged();
    damaged.insert_plan(serde_json::json!([{
        "path": "a.txt",
        "current": hex(EDITED),
        "target": {"sha256": hex(ORIGINAL), "mode": 0o644},
    }]));
    damaged.corrupt_blob(ORIGINAL, b"tampered\n");
    let store = &damaged.fixture.store;
    let recovered = store.recover_restores(&damaged.fixture.workspace).unwrap();
    assert_eq!(recovered.len(), 1);
    assert!(recovered[0].completed.is_empty());
    assert_eq!(recovered[0].skipped.len(), 1);
    assert_eq!(recovered[0].skipped[0].path, "a.txt");
    assert!(
        recovered[0].skipped[0]
            .reason
            .contains("no longer matches its SHA-256"),
        "{}",
        recovered[0].skipped[0].reason
    );
    assert_eq!(damaged.file("a.txt"), EDITED);
    assert!(store.pending_restores().unwrap().is_empty());
}

/// Paths a hostile row may carry, each naming `victim.txt` outside the workspace.
fn escaping_paths(damaged: &Damaged) -> Vec<(String, &'static str)> {
    let root = damaged.fixture.root();
    std::os::unix::fs::symlink(&damaged.outside, root.join("link")).unwrap();
    let absolute = damaged.outside.join("victim.txt").display().to_string();
    vec![
        ("../outside/victim.txt".to_string(), "parent"),
        (
            "sub/../../outside/victim.txt".to_string(),
            "parent after a name",
        ),
        (absolute, "absolute"),
        ("link/victim.txt".to_string(), "through a symlink"),
        (
            format!("{}/../outside/victim.txt", root.display()),
            "absolute with parent",
        ),
        ("".to_string(), "empty"),
        ("a.txt\0../x".to_string(), "NUL byte"),
    ]
}

fn assert_outside_untouched(damaged: &Damaged, name: &str) {
    assert_eq!(damaged.victim(), EDITED, "{name}: the victim was written");
    let entries: Vec<_> = std::fs::read_dir(&damaged.outside)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(entries.len(), 1, "{name}: {entries:?}");
}

#[test]
fn undo_refuses_checkpoint_rows_that_point_outside_the_workspace() {
    for case in 0..escaping_paths(&damaged()).len() {
        let damaged = damaged();
        let (path, name) = escaping_paths(&damaged).swap_remove(case);
        damaged
            .raw
            .execute(
                "UPDATE checkpoint_files SET path = ?1 WHERE path = 'a.txt'",
                [&path],
            )
            .unwrap();
        let store = &damaged.fixture.store;
        let report = store
            .undo("s", "t1", UndoScope::All, &damaged.fixture.workspace)
            .unwrap();
        match &report.outcome {
            UndoOutcome::Conflicts(conflicts) => {
                assert_eq!(conflicts.len(), 1, "{name}: {conflicts:?}");
                assert_eq!(conflicts[0].path, path, "{name}");
                assert!(!conflicts[0].reason.is_empty(), "{name}");
            }
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
        assert!(report.restored.is_empty() && report.removed.is_empty());
        assert_outside_untouched(&damaged, name);
        assert_eq!(damaged.file("a.txt"), EDITED, "{name}");
        // Diff reads only stored blobs: it never opens the path.
        let _ = store.diff("s", "t1", &path);
        assert_outside_untouched(&damaged, name);
    }
}

#[test]
fn recovery_never_acts_on_plan_actions_outside_the_workspace() {
    for remove in [false, true] {
        for case in 0..escaping_paths(&damaged()).len() {
            let damaged = damaged();
            let (path, name) = escaping_paths(&damaged).swap_remove(case);
            let target = if remove {
                serde_json::Value::Null
            } else {
                serde_json::json!({"sha256": hex(ORIGINAL), "mode": 0o644})
            };
            damaged.insert_plan(serde_json::json!([
                {"path": path, "current": hex(EDITED), "target": target},
                {"path": "a.txt", "current": hex(EDITED), "target": {"sha256": hex(ORIGINAL), "mode": 0o644}},
            ]));
            let store = &damaged.fixture.store;
            // Undo is refused while the plan is pending.
            assert!(matches!(
                store.undo("s", "t1", UndoScope::Files, &damaged.fixture.workspace),
                Err(StoreError::RestoreInProgress(_))
            ));
            let recovered = store.recover_restores(&damaged.fixture.workspace).unwrap();
            assert_eq!(recovered.len(), 1, "{name}");
            let skipped: Vec<&str> = recovered[0]
                .skipped
                .iter()
                .map(|conflict| conflict.path.as_str())
                .collect();
            assert_eq!(skipped, [path.as_str()], "{name} (remove: {remove})");
            // The legitimate action of the same plan is still carried out.
            assert_eq!(recovered[0].completed, ["a.txt"], "{name}");
            assert_eq!(damaged.file("a.txt"), ORIGINAL, "{name}");
            assert_outside_untouched(&damaged, name);
            assert!(store.pending_restores().unwrap().is_empty(), "{name}");
        }
    }
}

#[test]
fn a_plan_for_another_workspace_is_left_for_that_workspace() {
    let damaged = damaged();
    let other = damaged.fixture.dir.path().join("other-ws");
    std::fs::create_dir(&other).unwrap();
    let other_workspace = clawsmith_fs::Workspace::open(&other).unwrap();
    damaged.insert_plan(serde_json::json!([{
        "path": "a.txt",
        "current": hex(EDITED),
        "target": {"sha256": hex(ORIGINAL), "mode": 0o644},
    }]));
    let store = &damaged.fixture.store;
    assert!(store.recover_restores(&other_workspace).unwrap().is_empty());
    assert!(!other.join("a.txt").exists());
    assert_eq!(store.pending_restores().unwrap().len(), 1);
}

#[test]
fn hostile_journal_rows_are_listed_never_acted_on() {
    let damaged = damaged();
    let store = &damaged.fixture.store;
    let victim = damaged.outside.join("victim.txt").display().to_string();
    let arguments = [
        serde_json::json!({"path": "../outside/victim.txt", "content": "pwned"}).to_string(),
        serde_json::json!({"path": victim}).to_string(),
        serde_json::json!({"command": "rm -rf ../outside"}).to_string(),
        "not json at all {".to_string(),
    ];
    for (index, args_json) in arguments.iter().enumerate() {
        store
            .journal_start(&JournalStart {
                session_id: "s".into(),
                turn_id: "t1".into(),
                call_id: format!("hostile-{index}"),
                tool_name: ["write_file", "delete_file", "run_command", "edit_file"][index].into(),
                args_json: args_json.clone(),
            })
            .unwrap();
    }
    assert!(
        store
            .recover_restores(&damaged.fixture.workspace)
            .unwrap()
            .is_empty()
    );
    let open = store.unfinished_calls("s").unwrap();
    assert_eq!(open.len(), arguments.len());
    for entry in &open {
        assert!(arguments.contains(&entry.args_json), "{entry:?}");
    }
    assert_outside_untouched(&damaged, "journal");
    assert_eq!(damaged.file("a.txt"), EDITED);
}

#[test]
fn a_damaged_page_in_a_used_database_is_an_error_not_a_panic() {
    let Damaged { fixture, raw, .. } = damaged();
    let Fixture {
        dir,
        store,
        recorder,
        ..
    } = fixture;
    // Fold the WAL into the main file (closing does not), then close.
    store.checkpoint_wal().unwrap();
    drop((raw, recorder, store));
    let path: &Path = &dir.path().join("state.db");
    let clean = std::fs::read(path).unwrap();
    // Scribble over every page after the first in turn; each open either fails with a clear
    // error or answers (data or an error), never panics or hangs.
    let page = 4096;
    for start in (page..clean.len()).step_by(page) {
        let mut bytes = clean.clone();
        for (offset, byte) in bytes[start..(start + page).min(clean.len())]
            .iter_mut()
            .enumerate()
        {
            *byte = (offset as u8).wrapping_mul(31) ^ 0xa5;
        }
        let copy = path.with_file_name(format!("damaged-{start}.db"));
        std::fs::write(&copy, &bytes).unwrap();
        if let Ok(store) = Store::open(&copy) {
            let _ = store.list_sessions();
            let _ = store.checkpoints("s");
            let _ = store.change_list("s", "t1");
            let _ = store.diff("s", "t1", "a.txt");
            let _ = store.events("s");
        }
    }
}

#[test]
fn recovery_sweeps_the_temp_files_a_killed_undo_left() {
    let damaged = damaged();
    damaged.insert_plan(serde_json::json!([{
        "path": "a.txt",
        "current": hex(EDITED),
        "target": {"sha256": hex(ORIGINAL), "mode": 0o644},
    }]));
    // (temp file beside the target, whether recovery removes it): a dead writer's goes, a live
    // writer's (this process) and anything not named like ours stay.
    let own = format!(".clawsmith-tmp-{}-7-0", std::process::id());
    let cases = [
        (".clawsmith-tmp-999999999-7-0", true),
        (own.as_str(), false),
        ("notes.txt", false),
    ];
    for (name, _) in &cases {
        std::fs::write(damaged.fixture.root().join(name), "torn").unwrap();
    }
    let store = &damaged.fixture.store;
    let recovered = store
        .recover_session_restores(&damaged.fixture.workspace, "s")
        .unwrap();
    assert_eq!(recovered[0].completed, ["a.txt"]);
    assert_eq!(damaged.file("a.txt"), ORIGINAL);
    for (name, swept) in cases {
        assert_eq!(
            recovered[0].swept_temp_files.contains(&name.to_string()),
            swept,
            "{name}: {:?}",
            recovered[0].swept_temp_files
        );
        assert_eq!(damaged.fixture.root().join(name).exists(), !swept, "{name}");
    }
}

/// An undo killed after its plan, with the repository half put back (`.git/HEAD` written, the
/// branch and the deleted object not yet): recovery rolls the repository forward too — what was
/// already back is left alone and not named as changed since, the rest is put back — and a
/// second undo finds the turn undone. The same with nothing of the repository put back yet.
#[test]
fn recovery_rolls_the_repository_forward() {
    const HEAD: &[u8] = b"ref: refs/heads/main\n";
    const BRANCH: &[u8] = b"1111111111111111111111111111111111111111\n";
    const OBJECT: &str = ".git/objects/ab/cdef0123456789abcdef0123456789abcdef01";
    for head_already_back in [true, false] {
        let damaged = damaged();
        let fixture = &damaged.fixture;
        let store = &fixture.store;
        fixture.write_initial(".git/HEAD", HEAD, 0o644);
        fixture.write_initial(".git/refs/heads/main", BRANCH, 0o644);
        fixture.write_initial(OBJECT, b"object bytes", 0o444);
        let before_tree = fixture.tree();
        let before = store.keep_repository(&fixture.workspace).unwrap();
        // The command of turn t1: HEAD deleted, the branch moved, an object deleted.
        std::fs::remove_file(fixture.root().join(".git/HEAD")).unwrap();
        std::fs::write(
            fixture.root().join(".git/refs/heads/main"),
            "2222222222222222222222222222222222222222\n",
        )
        .unwrap();
        std::fs::remove_file(fixture.root().join(OBJECT)).unwrap();
        let after = store.keep_repository(&fixture.workspace).unwrap();
        assert_eq!(
            store
                .record_repository_changes("s", "t1", "c1", &before, &after, &[])
                .unwrap(),
            3
        );
        // The killed undo's plan; it had put HEAD back before it died (or nothing).
        damaged.insert_plan(serde_json::json!([{
            "path": "a.txt",
            "current": hex(EDITED),
            "target": {"sha256": hex(ORIGINAL), "mode": 0o644},
        }]));
        if head_already_back {
            std::fs::write(fixture.root().join(".git/HEAD"), HEAD).unwrap();
        }
        let recovered = store.recover_restores(&fixture.workspace).unwrap();
        assert_eq!(recovered.len(), 1);
        let repository = &recovered[0].repository;
        assert!(repository.kept.is_empty(), "{repository:?}");
        assert_eq!(repository.objects_restored, 1);
        let mut expected = vec![".git/refs/heads/main"];
        if !head_already_back {
            expected.insert(0, ".git/HEAD");
        }
        assert_eq!(repository.restored, expected);
        assert_eq!(recovered[0].completed, ["a.txt"]);
        let mut expected_tree = before_tree.clone();
        expected_tree.insert("a.txt".into(), (ORIGINAL.to_vec(), 0o644));
        assert_eq!(
            fixture.tree(),
            expected_tree,
            "HEAD already back: {head_already_back}"
        );
        assert!(store.pending_restores().unwrap().is_empty());
        assert_eq!(
            store
                .undo("s", "t1", UndoScope::Files, &fixture.workspace)
                .unwrap()
                .outcome,
            UndoOutcome::AlreadyUndone
        );
    }
}
