//! In-process pairs for `cargo xtask bench`, measured alternately in one run:
//! - the real `edit_file` tool on a 1 MB file with the [`CheckpointRecorder`] against the same
//!   tool with the [`NoopRecorder`] (each edit in a turn of its own, so every edit stores a
//!   fresh 1 MB prior blob: the worst case);
//! - undo of a turn that touched 1,000 files (500 edited, 500 created);
//! - `prune` of a store holding ≥ 1 GiB of distinct blobs (`--quick`: 128 MiB).
//!
//! The edit pair runs with the product's default durability (`synchronous = NORMAL`); the undo
//! and prune fixtures are filled with `NORMAL` (setup, not measured) and reopened with `FULL`
//! (`--fsync`) for the measured part. Prints one `CLAWSMITH-BENCH {json}` line per pair.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use clawsmith_checkpoint::{
    CheckpointRecorder, Durability, RetentionPolicy, Store, StoreOptions, TurnOpening, UndoScope,
};
use clawsmith_fs::{
    ChangeOrigin, ChangeRecorder, NoopRecorder, PostState, Workspace, builtin_tools,
};
use clawsmith_protocol::{
    Authorization, PermissionDecision, Tool, ToolExecutionContext, ToolOutput, ToolStatus, Verdict,
};
use serde_json::{Value, json};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // `-- edit` (or `undo`, `prune`) runs one group (profiling); nothing named runs all.
    let named: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wants = |group: &str| named.is_empty() || named.iter().any(|n| n == group);
    if wants("edit") {
        edit_pair(quick, Durability::default());
    }
    // Only when named (not a row of `cargo xtask bench`): the same pair under `--fsync`.
    if named.iter().any(|n| n == "edit-fsync") {
        edit_pair(quick, Durability::Full);
    }
    if wants("undo") {
        undo_row(quick);
    }
    if wants("prune") {
        prune_row(quick);
    }
}

fn alternate(
    rounds: usize,
    mut ours: impl FnMut() -> f64,
    mut theirs: impl FnMut() -> f64,
) -> (Vec<f64>, Vec<f64>) {
    ours();
    theirs();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(ours());
        b.push(theirs());
    }
    (a, b)
}

fn print_row(fields: Value) {
    println!("CLAWSMITH-BENCH {fields}");
}

fn open_store(path: &Path, durability: Durability) -> Arc<Store> {
    let options = StoreOptions {
        durability,
        ..StoreOptions::default()
    };
    Arc::new(Store::open_with(path, options).unwrap())
}

fn authorized(session: &str, turn: &str, call: &str) -> ToolExecutionContext {
    let decision = PermissionDecision {
        verdict: Verdict::Allow,
        reason: "bench".into(),
        rule: None,
    };
    ToolExecutionContext::new(session, turn, call)
        .with_authorization(Authorization::from_decision(&decision).unwrap())
}

/// Runs a file tool; they complete in one poll.
fn run_tool(tool: &dyn Tool, input: Value, context: ToolExecutionContext) {
    let future = tool.execute(input, context);
    let mut future = std::pin::pin!(future);
    let mut waker_context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut waker_context) {
        std::task::Poll::Ready(ToolOutput::Result(result)) => {
            assert_eq!(result.status(), ToolStatus::Success, "{}", result.content);
        }
        _ => panic!("file tools complete in one poll"),
    }
}

/// A 1 MB source-like file with one `COUNTER-0 ` marker line near the middle.
fn megabyte_file(path: &Path) {
    let line = "fn example(value: usize) -> usize { value.wrapping_mul(31).rotate_left(7) }\n";
    let mut body = line.repeat(1_000_000 / line.len() / 2);
    body.push_str("// COUNTER-0 \n");
    while body.len() < 1_000_000 {
        body.push_str(line);
    }
    std::fs::write(path, body).unwrap();
}

struct EditSide {
    _dir: tempfile::TempDir,
    edit: Arc<dyn Tool>,
    store: Option<Arc<Store>>,
    counter: u64,
}

impl EditSide {
    fn new(with_recorder: bool, durability: Durability) -> EditSide {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        megabyte_file(&root.join("big.rs"));
        let workspace = Arc::new(Workspace::open(&root).unwrap());
        let (recorder, store): (Arc<dyn ChangeRecorder>, _) = if with_recorder {
            // The product's default durability, or `Full` (`clawsmith --fsync`).
            let store = open_store(&dir.path().join("state.db"), durability);
            store.create_session("s", "ws").unwrap();
            (
                Arc::new(CheckpointRecorder::new(store.clone())),
                Some(store),
            )
        } else {
            (Arc::new(NoopRecorder), None)
        };
        let edit = builtin_tools(workspace, recorder)
            .into_iter()
            .find(|tool| tool.name() == "edit_file")
            .unwrap();
        EditSide {
            _dir: dir,
            edit,
            store,
            counter: 0,
        }
    }

    /// One edit in a turn of its own; every edit makes new content (no blob deduplication).
    fn edit_once(&mut self) {
        let turn = format!("t{}", self.counter);
        if let Some(store) = &self.store {
            store
                .begin_turn("s", &turn, TurnOpening::default())
                .unwrap();
        }
        let input = json!({
            "path": "big.rs",
            "oldText": format!("COUNTER-{} ", self.counter),
            "newText": format!("COUNTER-{} ", self.counter + 1),
        });
        run_tool(self.edit.as_ref(), input, authorized("s", &turn, "c"));
        self.counter += 1;
    }
}

fn edit_pair(quick: bool, durability: Durability) {
    let (rounds, batch) = if quick { (3, 5) } else { (9, 10) };
    let mut ours = EditSide::new(true, durability);
    let mut theirs = EditSide::new(false, durability);
    let timed_batch = |side: &mut EditSide| {
        let started = Instant::now();
        for _ in 0..batch {
            side.edit_once();
        }
        started.elapsed().as_secs_f64()
    };
    let (a, b) = alternate(
        rounds,
        || timed_batch(&mut ours),
        || timed_batch(&mut theirs),
    );
    let (suffix, durability_note) = match durability {
        Durability::Normal => ("", "the default durability (synchronous = NORMAL)"),
        Durability::Full => (
            ", --fsync",
            "--fsync (synchronous = FULL; blob files fsynced with their directory)",
        ),
    };
    print_row(json!({
        "name": format!("edit_file on a 1 MB file, with vs without checkpoint recorder ({batch} edits per sample{suffix})"),
        "ours": "CheckpointRecorder",
        "theirs": "NoopRecorder",
        "oursSamples": a,
        "theirsSamples": b,
        "unit": "seconds",
        "target": {"ratioAtMost": 1.5},
        "note": format!("the real edit_file tool; a new turn per edit (begin_turn included), so each edit stores a fresh 1 MB prior blob (a file beside the database: over FILE_THRESHOLD); {durability_note}"),
    }));
}

/// A store with one finished turn that edited 500 files and created 500.
fn thousand_file_turn(dir: &Path) -> Workspace {
    let root = dir.join("ws");
    std::fs::create_dir(&root).unwrap();
    let workspace = Workspace::open(&root).unwrap();
    let store = open_store(&dir.join("state.db"), Durability::Normal);
    store.create_session("s", "ws").unwrap();
    let recorder = CheckpointRecorder::new(store.clone());
    let origin = ChangeOrigin {
        session_id: "s".into(),
        turn_id: "t".into(),
        tool_call_id: "c".into(),
    };
    for index in 0..500 {
        let path = workspace
            .resolve(&format!("dir{}/keep-{index}.txt", index % 10))
            .unwrap();
        workspace
            .restore_file(&path, format!("before {index}\n").as_bytes(), 0o644, true)
            .unwrap();
    }
    store.begin_turn("s", "t", TurnOpening::default()).unwrap();
    for index in 0..500 {
        for name in [
            format!("dir{}/keep-{index}.txt", index % 10),
            format!("dir{}/new-{index}.txt", index % 10),
        ] {
            let path = workspace.resolve(&name).unwrap();
            let prior = workspace.read_state(&path).unwrap();
            recorder.before_change(&origin, &name, &prior).unwrap();
            let content = format!("after {name}\n");
            workspace
                .restore_file(&path, content.as_bytes(), 0o644, true)
                .unwrap();
            let post = PostState::File {
                sha256: clawsmith_checkpoint::sha256(content.as_bytes()),
                size: content.len() as u64,
                mode: 0o644,
            };
            recorder.after_change(&origin, &name, &post).unwrap();
        }
    }
    store.finish_turn("s", "t", &workspace).unwrap();
    workspace
}

fn undo_row(quick: bool) {
    let rounds = if quick { 2 } else { 5 };
    let samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            let workspace = thousand_file_turn(dir.path());
            let store = open_store(&dir.path().join("state.db"), Durability::Full);
            let started = Instant::now();
            let report = store.undo("s", "t", UndoScope::Files, &workspace).unwrap();
            let elapsed = started.elapsed().as_secs_f64();
            assert_eq!(report.restored.len() + report.removed.len(), 1000);
            elapsed
        })
        .collect();
    print_row(json!({
        "name": "undo of a turn that touched 1,000 files",
        "ours": "Store::undo (files)",
        "theirs": "",
        "oursSamples": samples,
        "theirsSamples": [],
        "unit": "seconds",
        "target": {"secondsAtMost": 1.0},
        "note": "500 files restored and 500 created files removed, SQLite synchronous = FULL",
    }));
}

fn prune_row(quick: bool) {
    let mebibytes: usize = if quick { 128 } else { 1024 };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let workspace = Workspace::open(dir.path().join("ws")).unwrap();
    let path = dir.path().join("state.db");
    {
        let store = open_store(&path, Durability::Normal);
        store.create_session("s", "ws").unwrap();
        let chunk: Vec<u8> = (0..1024 * 1024u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        for index in 0..mebibytes {
            let turn = format!("t{index}");
            let file = format!("f{}", index % 64);
            store
                .begin_turn("s", &turn, TurnOpening::default())
                .unwrap();
            let mut content = chunk.clone();
            content[..8].copy_from_slice(&(index as u64).to_le_bytes());
            store
                .record_before("s", &turn, &file, Some((&content, 0o644)))
                .unwrap();
            store.record_after("s", &turn, &file, None).unwrap();
            store.finish_turn("s", &turn, &workspace).unwrap();
        }
    }
    let store = open_store(&path, Durability::Full);
    let policy = RetentionPolicy {
        keep_last: 0,
        ..RetentionPolicy::default()
    };
    let far_future = store.now_ms() + 365 * 24 * 3600 * 1000;
    let started = Instant::now();
    let report = store.prune(&policy, far_future, false).unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert!(report.bytes_freed >= (mebibytes as u64) << 20);
    let note = if quick {
        format!("--quick: a {mebibytes} MiB store, not 1 GiB; everything expired")
    } else {
        format!("{mebibytes} MiB of distinct 1 MiB blobs in {mebibytes} turns, everything expired")
    };
    print_row(json!({
        "name": format!("prune of a {mebibytes} MiB store"),
        "ours": "Store::prune",
        "theirs": "",
        "oursSamples": [elapsed],
        "theirsSamples": [],
        "unit": "seconds",
        "target": {"secondsAtMost": 10.0},
        "note": note,
    }));
}
