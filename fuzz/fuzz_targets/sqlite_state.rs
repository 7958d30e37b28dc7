//! SQLite state opened from a mutated database file: a real database (a session with turns,
//! blobs, checkpoints, journal rows and events) has bytes overwritten and is cut; opening it
//! and every read, recovery and undo must answer data or an error, never panic, and never
//! touch anything outside the scratch workspace.
#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use clawsmith_core::checkpoint::{Durability, Store, StoreOptions, UndoScope};
use clawsmith_core::fs::Workspace;
use clawsmith_core::security::{PermissionMode, PermissionPolicy};
use clawsmith_core::{AgentCore, CoreConfig, NullSink};
use clawsmith_protocol::ToolCall;
use libfuzzer_sys::fuzz_target;

struct Harness {
    _dir: tempfile::TempDir,
    base: PathBuf,
    seed: Vec<u8>,
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let root = base.join("ws");
        std::fs::create_dir_all(&root).expect("ws");
        std::fs::create_dir_all(base.join("outside")).expect("outside");
        std::fs::write(base.join("outside/secret"), "OUTSIDE").expect("secret");
        std::fs::write(root.join("a.txt"), "alpha\nbeta\n").expect("a.txt");
        let path = base.join("seed.db");
        {
            let mut options = StoreOptions::default();
            options.durability = Durability::Normal;
            let store = Arc::new(Store::open_with(&path, options).expect("store"));
            let mut config = CoreConfig::new(&root, store);
            config.policy = PermissionPolicy::new(PermissionMode::AcceptEdits);
            let core = AgentCore::new(config).expect("core");
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let session = core.open_session(Some("s".to_owned())).expect("session");
            let turns = [
                vec![
                    call(
                        "c1",
                        "edit_file",
                        r#"{"path":"a.txt","oldText":"beta","newText":"BETA"}"#,
                    ),
                    call(
                        "c2",
                        "write_file",
                        r#"{"path":"new.txt","content":"fresh\n"}"#,
                    ),
                ],
                vec![
                    call(
                        "c3",
                        "rename_file",
                        r#"{"from":"new.txt","to":"moved.txt"}"#,
                    ),
                    call("c4", "read_file", r#"{"path":"a.txt"}"#),
                ],
                vec![call("c5", "delete_file", r#"{"path":"moved.txt"}"#)],
            ];
            for calls in turns {
                runtime
                    .block_on(session.run_turn(calls, &NullSink))
                    .expect("seed turn");
            }
        }
        let seed = std::fs::read(&path).expect("seed bytes");
        Harness {
            _dir: dir,
            base,
            seed,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let harness = harness();
    let mut bytes = harness.seed.clone();
    // Each 3-byte chunk overwrites one byte: a 16-bit position scaled to the file, then a value.
    let (cut, edits) = data
        .split_first()
        .map_or((0, &[][..]), |(c, rest)| (*c, rest));
    for chunk in edits.chunks_exact(3) {
        let position = usize::from(u16::from_le_bytes([chunk[0], chunk[1]]));
        let index = position * bytes.len() / 65_536;
        bytes[index] = chunk[2];
    }
    if cut & 1 == 1 {
        let keep = bytes.len() * usize::from(cut) / 256;
        bytes.truncate(keep);
    }
    let path = harness.base.join("mutated.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    std::fs::write(&path, &bytes).expect("write the mutated file");
    let root = harness.base.join("scratch");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("scratch");
    std::fs::write(root.join("a.txt"), "alpha\nBETA\n").expect("scratch a.txt");
    let Ok(workspace) = Workspace::open(&root) else {
        return;
    };
    if let Ok(store) = Store::open(&path) {
        let _ = store.list_sessions();
        let _ = store.messages("s");
        let _ = store.events("s");
        let _ = store.todos("s");
        let _ = store.unfinished_calls("s");
        let _ = store.pending_restores();
        let _ = store.recover_restores(&workspace);
        if let Ok(checkpoints) = store.checkpoints("s") {
            for checkpoint in checkpoints.iter().take(4) {
                if let Ok(changes) = store.change_list("s", &checkpoint.turn_id) {
                    for change in changes.iter().take(4) {
                        let _ = store.diff("s", &checkpoint.turn_id, &change.path);
                    }
                }
            }
            if let Some(first) = checkpoints.first() {
                let _ = store.undo("s", &first.turn_id, UndoScope::All, &workspace);
            }
        }
    }
    assert_eq!(
        std::fs::read(harness.base.join("outside/secret")).expect("outside"),
        b"OUTSIDE"
    );
});
