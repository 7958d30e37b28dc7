//! Checkpoint benchmarks: the recorder's overhead on a 1 MB edit, undo of a turn that
//! touched 1,000 files, and pruning a large store.
//!
//! The prune benchmark builds a store of `CLAWSMITH_BENCH_PRUNE_MIB` MiB (default 1024) of
//! distinct blob content in a temp dir first; set it lower for a quick run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clawsmith_checkpoint::{
    CheckpointRecorder, Durability, RetentionPolicy, Store, StoreOptions, TurnOpening, UndoScope,
};
use clawsmith_fs::{ChangeOrigin, ChangeRecorder, PostState, Workspace};

fn main() {
    divan::main();
}

struct Bench {
    _dir: tempfile::TempDir,
    store: Arc<Store>,
    workspace: Workspace,
}

fn bench_setup() -> Bench {
    bench_setup_with(Durability::Full)
}

/// A store and an empty workspace in a temp dir.
fn bench_setup_with(durability: Durability) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let options = StoreOptions {
        durability,
        ..StoreOptions::default()
    };
    let store = Arc::new(Store::open_with(dir.path().join("state.db"), options).unwrap());
    let workspace = Workspace::open(dir.path().join("ws")).unwrap();
    store.create_session("s", "ws").unwrap();
    Bench {
        _dir: dir,
        store,
        workspace,
    }
}

fn megabyte(seed: u8) -> Vec<u8> {
    (0..1_000_000u32)
        .map(|i| b'a' + ((i / 80 + u32::from(seed)) % 26) as u8)
        .collect()
}

/// One `edit_file`-like change of a 1 MB file, with or without the recorder (a new turn per
/// edit, so the prior content is stored every time).
#[divan::bench(args = [false, true], sample_count = 20)]
fn edit_1mb_file(bencher: divan::Bencher<'_, '_>, with_recorder: bool) {
    let bench = bench_setup();
    let path = bench.workspace.resolve("big.txt").unwrap();
    bench
        .workspace
        .restore_file(&path, &megabyte(0), 0o644, false)
        .unwrap();
    let recorder = CheckpointRecorder::new(bench.store.clone());
    let counter = AtomicU64::new(0);
    bencher.bench_local(|| {
        let index = counter.fetch_add(1, Ordering::Relaxed);
        let turn = format!("t{index}");
        let origin = ChangeOrigin {
            session_id: "s".into(),
            turn_id: turn.clone(),
            tool_call_id: "c".into(),
        };
        let prior = bench.workspace.read_state(&path).unwrap();
        let new = megabyte((index % 26) as u8 + 1);
        if with_recorder {
            bench
                .store
                .begin_turn("s", &turn, TurnOpening::default())
                .unwrap();
            recorder.before_change(&origin, "big.txt", &prior).unwrap();
        }
        bench
            .workspace
            .restore_file(&path, &new, 0o644, false)
            .unwrap();
        if with_recorder {
            let post = PostState::File {
                sha256: clawsmith_checkpoint::sha256(&new),
                size: new.len() as u64,
                mode: 0o644,
            };
            recorder.after_change(&origin, "big.txt", &post).unwrap();
        }
        divan::black_box(prior);
    });
}

/// Undo (`files`) of one turn that edited 500 files and created 500.
#[divan::bench(sample_count = 5, sample_size = 1)]
fn undo_turn_of_1000_files(bencher: divan::Bencher<'_, '_>) {
    bencher
        .with_inputs(|| {
            let bench = bench_setup();
            let recorder = CheckpointRecorder::new(bench.store.clone());
            let origin = ChangeOrigin {
                session_id: "s".into(),
                turn_id: "t".into(),
                tool_call_id: "c".into(),
            };
            for index in 0..500 {
                let path = bench
                    .workspace
                    .resolve(&format!("dir{}/keep-{index}.txt", index % 10))
                    .unwrap();
                bench
                    .workspace
                    .restore_file(&path, format!("before {index}\n").as_bytes(), 0o644, true)
                    .unwrap();
            }
            bench
                .store
                .begin_turn("s", "t", TurnOpening::default())
                .unwrap();
            for index in 0..500 {
                for name in [
                    format!("dir{}/keep-{index}.txt", index % 10),
                    format!("dir{}/new-{index}.txt", index % 10),
                ] {
                    let path = bench.workspace.resolve(&name).unwrap();
                    let prior = bench.workspace.read_state(&path).unwrap();
                    recorder.before_change(&origin, &name, &prior).unwrap();
                    let content = format!("after {name}\n");
                    bench
                        .workspace
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
            bench.store.finish_turn("s", "t", &bench.workspace).unwrap();
            bench
        })
        .bench_local_values(|bench| {
            let report = bench
                .store
                .undo("s", "t", UndoScope::Files, &bench.workspace)
                .unwrap();
            assert_eq!(report.restored.len() + report.removed.len(), 1000);
            bench
        });
}

/// Pruning (everything expired) a store holding `CLAWSMITH_BENCH_PRUNE_MIB` MiB of blobs.
#[divan::bench(sample_count = 1, sample_size = 1)]
fn prune_large_store(bencher: divan::Bencher<'_, '_>) {
    let mebibytes: usize = std::env::var("CLAWSMITH_BENCH_PRUNE_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    bencher
        .with_inputs(|| {
            // Filling the store is setup, not measured: skip the per-commit fsync.
            let bench = bench_setup_with(Durability::Normal);
            let chunk: Vec<u8> = (0..1024 * 1024u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
                .collect();
            for index in 0..mebibytes {
                let turn = format!("t{index}");
                bench
                    .store
                    .begin_turn("s", &turn, TurnOpening::default())
                    .unwrap();
                let mut content = chunk.clone();
                content[..8].copy_from_slice(&(index as u64).to_le_bytes());
                bench
                    .store
                    .record_before(
                        "s",
                        &turn,
                        &format!("f{}", index % 64),
                        Some((&content, 0o644)),
                    )
                    .unwrap();
                bench
                    .store
                    .record_after("s", &turn, &format!("f{}", index % 64), None)
                    .unwrap();
                bench
                    .store
                    .finish_turn("s", &turn, &bench.workspace)
                    .unwrap();
            }
            bench
        })
        .bench_local_values(|bench| {
            let policy = RetentionPolicy {
                keep_last: 0,
                ..RetentionPolicy::default()
            };
            let far_future = bench.store.now_ms() + 365 * 24 * 3600 * 1000;
            let report = bench.store.prune(&policy, far_future, false).unwrap();
            assert!(report.bytes_freed >= (mebibytes as u64) << 20);
            bench
        });
}
