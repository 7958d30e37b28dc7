//! In-process pair for `cargo xtask bench`: `read_file` calls per second through the
//! full pipeline (validation, permission, journal, events, messages — persistence on, the
//! default durability, one call per `run_batch`) against the same reads called directly on the
//! tool; then the same with `synchronous = FULL` (`--fsync`). Each sample is the
//! throughput of a batch of calls; the two sides alternate per round. Prints one
//! `CLAWSMITH-BENCH {json}` line per row. A last pair runs `run_command` on a 20,000-file
//! workspace with and without the undo capture.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use clawsmith_checkpoint::{Durability, Store, StoreOptions, system_clock};
use clawsmith_core::{AgentCore, BatchOptions, CoreConfig, NullSink, TurnOptions};
use clawsmith_protocol::{ToolCall, ToolExecutionContext, ToolOutput, ToolStatus};
use serde_json::json;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // `-- pipeline` or `-- capture` runs one group (profiling); nothing named runs all.
    // `-- pipeline-default` or `-- pipeline-fsync` runs one row of the pipeline group.
    let named: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wants = |group: &str| named.is_empty() || named.iter().any(|n| n == group);
    if wants("pipeline") || wants("pipeline-default") {
        pair(quick, Durability::Normal);
    }
    if wants("pipeline") || wants("pipeline-fsync") {
        pair(quick, Durability::Full);
    }
    if wants("capture") {
        capture_pair(quick);
    }
}

/// Files in the tree of the capture pair (the workspace size its target is set for).
const CAPTURE_TREE_FILES: usize = 20_000;

/// `run_command "true"` through the pipeline on a 20,000-file workspace with the undo capture
/// (a manifest before and a walk after, nothing changed: the incremental case) against the same
/// without it. Each sample is one call; the first call of each side (which reads and stores
/// every file once) is the warm-up.
fn capture_pair(quick: bool) {
    let rounds = if quick { 5 } else { 15 };
    let temp = tempfile::tempdir().unwrap();
    let workspace = temp.path().join("workspace");
    for index in 0..CAPTURE_TREE_FILES {
        let directory = workspace.join(format!("d{:03}", index / 100));
        if index % 100 == 0 {
            std::fs::create_dir_all(&directory).unwrap();
        }
        let body = format!("fn f{index}() -> usize {{ {index} }}\n").repeat(8);
        std::fs::write(directory.join(format!("f{index}.rs")), body).unwrap();
    }
    let store = Arc::new(Store::open(temp.path().join("state.db")).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let core = |capture_commands: bool| {
        let mut config = CoreConfig::new(&workspace, store.clone());
        config.policy = clawsmith_core::security::PermissionPolicy::new(
            clawsmith_core::security::PermissionMode::Full,
        );
        config.capture_commands = capture_commands;
        AgentCore::new(config).unwrap()
    };
    let (with, without) = (core(true), core(false));
    let (with_session, without_session) = (
        with.open_session(None).unwrap(),
        without.open_session(None).unwrap(),
    );
    let mut counter = 0u64;
    let mut command = |session: &clawsmith_core::SessionHandle| {
        counter += 1;
        let call = ToolCall {
            id: format!("c{counter}"),
            name: "run_command".into(),
            arguments: r#"{"command": "true"}"#.into(),
        };
        let started = Instant::now();
        let outcome = runtime
            .block_on(session.run_turn(vec![call], &NullSink))
            .unwrap();
        let elapsed = started.elapsed().as_secs_f64();
        assert_eq!(outcome.results[0].1.status(), ToolStatus::Success);
        elapsed
    };
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    command(&with_session);
    command(&without_session);
    for _ in 0..rounds {
        ours.push(command(&with_session));
        theirs.push(command(&without_session));
    }
    let median = |samples: &[f64]| {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    };
    let added_ms = (median(&ours) - median(&theirs)) * 1000.0;
    let passes = with.capture_passes();
    let note = format!(
        "run_command \"true\", one per turn, on {CAPTURE_TREE_FILES} files in 200 folders with \
         nothing changed (the manifest is incremental: no file read; a long-lived core: from its \
         second command on, refreshes come from the workspace's inotify watch — {} of {} here, \
         the rest full passes); the capture adds {added_ms:.1} ms per command at the median \
         (issue 16's target: at most 15 ms: {})",
        passes.from_events,
        passes.from_events + passes.full,
        if added_ms <= 15.0 { "met" } else { "not met" }
    );
    println!(
        "CLAWSMITH-BENCH {}",
        json!({
            "name": format!("run_command with undo capture vs without ({CAPTURE_TREE_FILES}-file workspace)"),
            "ours": "capture on",
            "theirs": "capture off",
            "oursSamples": ours,
            "theirsSamples": theirs,
            "unit": "seconds",
            // About +15 ms on the ~30 ms a sandboxed command costs here: the capture's target.
            "target": {"ratioAtMost": 1.5},
            "note": note,
        })
    );
}

/// One row: the pipeline with `durability` against direct calls.
fn pair(quick: bool, durability: Durability) {
    let (rounds, batch) = if quick { (3, 100) } else { (7, 300) };

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

    let session = core.open_session(None).unwrap();
    let mut turn = session
        .begin_turn(&NullSink, TurnOptions::default())
        .unwrap();
    let tool = core.tools().get("read_file").unwrap().tool().clone();
    let mut pipeline_counter = 0u64;
    let mut direct_counter = 0u64;

    let pipeline = || {
        let started = Instant::now();
        for _ in 0..batch {
            pipeline_counter += 1;
            // Distinct ids and arguments: the turn's duplicate check must not refuse the call.
            let call = ToolCall {
                id: format!("c{pipeline_counter}"),
                name: "read_file".into(),
                arguments: format!(
                    r#"{{"path": "file.rs", "limit": {}}}"#,
                    100 + pipeline_counter
                ),
            };
            let results = runtime
                .block_on(turn.run_batch(vec![call], &NullSink, BatchOptions::default()))
                .unwrap();
            assert_eq!(results[0].1.status(), ToolStatus::Success);
        }
        f64::from(batch) / started.elapsed().as_secs_f64()
    };
    let direct = || {
        let started = Instant::now();
        for _ in 0..batch {
            direct_counter += 1;
            let input = json!({"path": "file.rs", "limit": 100 + direct_counter});
            let context = ToolExecutionContext::new("s", "t", format!("c{direct_counter}"));
            match runtime.block_on(tool.execute(input, context)) {
                ToolOutput::Result(result) => assert_eq!(result.status(), ToolStatus::Success),
                _ => panic!("read_file returns a result"),
            }
        }
        f64::from(batch) / started.elapsed().as_secs_f64()
    };
    let (ours, theirs) = alternate(rounds, pipeline, direct);

    let mut sorted = ours.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    // Targets: the default durability at least 10,000 calls/s and 0.2× direct; `--fsync`
    // (synchronous = FULL) at least 2,000 calls/s.
    let (name, sync, target) = match durability {
        Durability::Normal => (
            ", default durability",
            "NORMAL (the default: WAL commits survive a killed process)",
            json!({"ratioAtLeast": 0.2, "perSecondAtLeast": 10_000}),
        ),
        Durability::Full => (
            ", --fsync",
            "FULL (`--fsync`: every commit fsynced)",
            json!({"perSecondAtLeast": 2_000}),
        ),
    };
    let note = format!(
        "one read_file per run_batch (assistant message, tool.started, tool.completed and the \
         tool message), committed with synchronous = {sync}; absolute median {median:.0} calls/s"
    );
    println!(
        "CLAWSMITH-BENCH {}",
        json!({
            "name": format!("read_file calls/s, full pipeline with persistence vs direct ({batch} calls per sample{name})"),
            "ours": "AgentCore pipeline",
            "theirs": "tool.execute",
            "oursSamples": ours,
            "theirsSamples": theirs,
            "unit": "per-second",
            "target": target,
            "note": note,
        })
    );
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
