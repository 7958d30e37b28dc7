//! Read calls through the full pipeline (validation, permission, events, messages — persistence
//! on, SQLite `synchronous = FULL`) against the same `read_file` called directly on the tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use clawsmith_checkpoint::{Durability, Store, StoreOptions, system_clock};
use clawsmith_core::{AgentCore, BatchOptions, CoreConfig, NullSink, TurnOptions};
use clawsmith_protocol::{ToolCall, ToolExecutionContext};

fn main() {
    divan::main();
}

struct Setup {
    _temp: tempfile::TempDir,
    core: AgentCore,
    runtime: tokio::runtime::Runtime,
}

fn setup() -> Setup {
    setup_with(Durability::Full)
}

fn setup_with(durability: Durability) -> Setup {
    let temp = tempfile::tempdir().unwrap();
    let workspace = temp.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let line = "fn example(value: usize) -> usize { value.wrapping_mul(31).rotate_left(7) }\n";
    std::fs::write(workspace.join("file.rs"), line.repeat(50)).unwrap();
    let options = StoreOptions {
        clock: system_clock(),
        durability,
    };
    let store = Arc::new(Store::open_with(temp.path().join("state.db"), options).unwrap());
    let core = AgentCore::new(CoreConfig::new(&workspace, store)).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    Setup {
        _temp: temp,
        core,
        runtime,
    }
}

/// One `read_file` call per iteration through `Turn::run_batch` (assistant message, events,
/// tool message: all stored, each commit fsynced).
#[divan::bench(sample_count = 30, sample_size = 20)]
fn read_file_through_pipeline(bencher: divan::Bencher<'_, '_>) {
    through_pipeline(bencher, Durability::Full);
}

/// The same with `synchronous = NORMAL`: what the pipeline costs without the fsyncs.
#[divan::bench(sample_count = 30, sample_size = 20)]
fn read_file_through_pipeline_without_fsync(bencher: divan::Bencher<'_, '_>) {
    through_pipeline(bencher, Durability::Normal);
}

fn through_pipeline(bencher: divan::Bencher<'_, '_>, durability: Durability) {
    let setup = setup_with(durability);
    let session = setup.core.open_session(None).unwrap();
    let mut turn = session
        .begin_turn(&NullSink, TurnOptions::default())
        .unwrap();
    let mut counter = 0u64;
    bencher.bench_local(|| {
        counter += 1;
        // Distinct ids and arguments: the turn's duplicate check must not refuse the call.
        let call = ToolCall {
            id: format!("c{counter}"),
            name: "read_file".into(),
            arguments: format!(r#"{{"path": "file.rs", "limit": {}}}"#, 100 + counter),
        };
        let results = setup
            .runtime
            .block_on(turn.run_batch(vec![call], &NullSink, BatchOptions::default()))
            .unwrap();
        assert_eq!(
            results[0].1.status(),
            clawsmith_protocol::ToolStatus::Success
        );
    });
}

/// The same read, called directly on the tool: the floor the pipeline adds to.
#[divan::bench(sample_count = 30, sample_size = 20)]
fn read_file_direct(bencher: divan::Bencher<'_, '_>) {
    let setup = setup();
    let tool = setup.core.tools().get("read_file").unwrap().tool().clone();
    let mut counter = 0u64;
    bencher.bench_local(|| {
        counter += 1;
        let input = serde_json::json!({"path": "file.rs", "limit": 100 + counter});
        let context = ToolExecutionContext::new("s", "t", format!("c{counter}"));
        divan::black_box(setup.runtime.block_on(tool.execute(input, context)));
    });
}
