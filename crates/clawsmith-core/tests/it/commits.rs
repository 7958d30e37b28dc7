//! When a call's records are committed: a call that guards no side effect is written
//! after it ran, its start and close in one commit (a turn of such calls, finished at once, in
//! the finish's commit); a side-effecting call's journal entry and start are committed before it
//! runs. The tools here look at the database through a second connection while they run, so
//! they see exactly what was committed at that moment.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawsmith_checkpoint::Store;
use clawsmith_core::{BatchOptions, CollectingSink, ExtensionTool, TurnOptions};
use clawsmith_protocol::{
    Capability, CapabilityDeclaration, EventPayload, Risk, Role, ToolOutput, ToolStatus,
};
use clawsmith_security::{PermissionMode, PermissionPolicy};

use crate::support::*;

const SESSION: &str = "commits";

/// What another connection sees of the session: event kinds, message count, open journal
/// entries.
fn committed(db: &Path) -> serde_json::Value {
    let store = Store::open(db).unwrap();
    let events: Vec<String> = store
        .events(SESSION)
        .unwrap()
        .iter()
        .map(|event| event.payload.kind().to_owned())
        .collect();
    serde_json::json!({
        "events": events,
        "messages": store.messages(SESSION).unwrap().len(),
        "open_calls": store.unfinished_calls(SESSION).unwrap().len(),
    })
}

/// A tool of `risk` that answers with what another connection sees while it runs; with
/// `until_started`, it first waits (up to 30 s) until its own `tool.started` is committed.
fn peek(name: &str, risk: Risk, db: &Path, until_started: bool) -> ExtensionTool {
    let db: PathBuf = db.to_path_buf();
    let mut tool = TestTool::read(
        name,
        Arc::new(move |_, context| {
            let db = db.clone();
            Box::pin(async move {
                if until_started {
                    let deadline = Instant::now() + Duration::from_secs(30);
                    while Instant::now() < deadline {
                        let started = Store::open(&db)
                            .unwrap()
                            .events(SESSION)
                            .unwrap()
                            .iter()
                            .any(|event| {
                                matches!(&event.payload, EventPayload::ToolStarted(started)
                                if started.tool_call_id == context.tool_call_id)
                            });
                        if started {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                ToolOutput::Text(committed(&db).to_string())
            })
        }),
    );
    tool.risk = risk;
    if risk != Risk::Read {
        tool.capabilities = CapabilityDeclaration::Declared(vec![Capability::FilesystemWrite]);
        tool.concurrency_safe = false;
    }
    ExtensionTool {
        source: "test".into(),
        tool: tool.shared(),
        deferred: false,
    }
}

fn seen(result: &clawsmith_protocol::ToolExecutionResult) -> serde_json::Value {
    assert_eq!(result.status(), ToolStatus::Success, "{}", result.content);
    serde_json::from_str(&result.content).unwrap()
}

fn kinds(db: &Path) -> Vec<String> {
    committed(db)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|kind| kind.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_read_is_written_after_it_ran_and_a_write_is_journaled_before() {
    let fixture = Fixture::new();
    let core = fixture.core(|config| {
        config.policy = PermissionPolicy::new(PermissionMode::Full);
        // However slow this machine is, a read's records wait for its close.
        config.read_record_window = Duration::from_secs(3600);
        config
            .extension_tools
            .push(peek("peek", Risk::Read, &fixture.db, false));
        config
            .extension_tools
            .push(peek("poke", Risk::WorkspaceWrite, &fixture.db, false));
    });
    let session = core.open_session(Some(SESSION.into())).unwrap();
    // A turn of one read: nothing of the turn or the call is committed while it runs.
    let (results, sink_events) = turn(&session, vec![call("r1", "peek", "{}")]).await;
    assert_eq!(
        seen(&results[0].1),
        serde_json::json!({"events": [], "messages": 0, "open_calls": 0})
    );
    let after = [
        "turn.started",
        "tool.started",
        "tool.completed",
        "turn.completed",
    ];
    assert_eq!(kinds(&fixture.db), after);
    // The sink got every event once, stored, in order.
    let stored = session.events().unwrap();
    assert_sequences(&stored);
    assert_eq!(sink_events, stored);
    // A batch of a read then a write: the write runs after its journal entry, its start, the
    // batch's message and the read before it are committed.
    let (results, _) = turn(
        &session,
        vec![call("r2", "peek", r#"{"n": 2}"#), call("w1", "poke", "{}")],
    )
    .await;
    assert_eq!(
        seen(&results[0].1),
        serde_json::json!({"events": after, "messages": 2, "open_calls": 0})
    );
    let before_write = [
        after.as_slice(),
        &[
            "turn.started",
            "tool.started",
            "tool.completed",
            "tool.started",
        ],
    ]
    .concat();
    assert_eq!(
        seen(&results[1].1),
        serde_json::json!({"events": before_write, "messages": 4, "open_calls": 1})
    );
    let messages = session.messages().unwrap();
    assert_history_paired(&messages);
    assert_eq!(messages.len(), 5);
    assert_sequences(&session.events().unwrap());
    assert!(fixture.store.unfinished_calls(SESSION).unwrap().is_empty());
}

#[tokio::test]
async fn a_read_running_past_the_window_is_recorded_as_started_while_it_runs() {
    let fixture = Fixture::new();
    let core = fixture.core(|config| {
        config.read_record_window = Duration::from_millis(20);
        config
            .extension_tools
            .push(peek("long_read", Risk::Read, &fixture.db, true));
    });
    let session = core.open_session(Some(SESSION.into())).unwrap();
    let sink = CollectingSink::new();
    let mut turn = session.begin_turn(&sink, TurnOptions::default()).unwrap();
    let results = turn
        .run_batch(
            vec![call("r1", "long_read", "{}")],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    turn.finish(&sink).unwrap();
    // It saw its own start (and the turn's) committed while it ran, and nothing more.
    assert_eq!(
        seen(&results[0].1),
        serde_json::json!({"events": ["turn.started", "tool.started"], "messages": 1, "open_calls": 0})
    );
    let stored = session.events().unwrap();
    assert_sequences(&stored);
    assert_eq!(sink.events(), stored);
}

#[tokio::test]
async fn a_parallel_batch_of_reads_and_a_last_batch_are_each_one_commit() {
    let fixture = Fixture::new();
    let core = fixture.core(|config| {
        config.read_record_window = Duration::from_secs(3600);
        config
            .extension_tools
            .push(peek("peek", Risk::Read, &fixture.db, false));
    });
    let session = core.open_session(Some(SESSION.into())).unwrap();
    let sink = CollectingSink::new();
    let mut turn = session.begin_turn(&sink, TurnOptions::default()).unwrap();
    turn.model_request(&sink).unwrap();
    let results = turn
        .run_batch(
            vec![
                call("p1", "peek", r#"{"n": 1}"#),
                call("p2", "peek", r#"{"n": 2}"#),
                call("p3", "peek", r#"{"n": 3}"#),
            ],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    // Every call of the parallel batch saw only the turn's start and its request.
    for (_, result) in &results {
        assert_eq!(
            seen(result),
            serde_json::json!({"events": ["turn.started", "model.request"], "messages": 0, "open_calls": 0})
        );
    }
    // After the batch, all of it is committed: starts, then completions, with the messages.
    let batch = [
        "turn.started",
        "model.request",
        "tool.started",
        "tool.started",
        "tool.started",
        "tool.completed",
        "tool.completed",
        "tool.completed",
    ];
    assert_eq!(kinds(&fixture.db), batch);
    // The last batch's records wait for the finish.
    let results = turn
        .run_batch(
            vec![call("l1", "peek", r#"{"n": 4}"#)],
            &sink,
            BatchOptions {
                last: true,
                ..BatchOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(seen(&results[0].1)["events"].as_array().unwrap().len(), 8);
    assert_eq!(kinds(&fixture.db), batch);
    turn.finish(&sink).unwrap();
    let stored = session.events().unwrap();
    assert_sequences(&stored);
    assert_eq!(stored.len(), 11);
    assert_eq!(sink.events(), stored);
    let messages = session.messages().unwrap();
    assert_history_paired(&messages);
    assert_eq!(
        messages
            .iter()
            .filter(|message| message.role == Role::Tool)
            .count(),
        4
    );
}

/// A read that delegates to a sub-agent (`agent.delegate`, like `delegate_background`) has its
/// start committed before it runs, however long the window: the child's session is written
/// while it runs and must never exist without its parent's call on record. A read declaring
/// only `filesystem.read` in the same turn is still deferred.
#[tokio::test]
async fn a_delegating_read_is_recorded_as_started_before_it_runs() {
    let fixture = Fixture::new();
    let db = fixture.db.clone();
    let mut tool = TestTool::read(
        "delegate",
        Arc::new(move |_, _| {
            let db = db.clone();
            Box::pin(async move { ToolOutput::Text(committed(&db).to_string()) })
        }),
    );
    tool.capabilities = CapabilityDeclaration::Declared(vec![
        Capability::AgentDelegate,
        Capability::FilesystemRead,
    ]);
    let delegate = ExtensionTool {
        source: "test".into(),
        tool: tool.shared(),
        deferred: false,
    };
    let core = fixture.core(|config| {
        config.read_record_window = Duration::from_secs(3600);
        config.extension_tools.push(delegate);
        config
            .extension_tools
            .push(peek("peek", Risk::Read, &fixture.db, false));
    });
    let session = core.open_session(Some(SESSION.into())).unwrap();
    let (results, _) = turn(&session, vec![call("d1", "delegate", "{}")]).await;
    assert_eq!(
        seen(&results[0].1),
        serde_json::json!({"events": ["turn.started", "tool.started"], "messages": 1, "open_calls": 0})
    );
    let (results, _) = turn(&session, vec![call("r1", "peek", "{}")]).await;
    assert_eq!(
        seen(&results[0].1)["events"].as_array().unwrap().len(),
        4,
        "the plain read's own records wait for its close"
    );
    assert_sequences(&session.events().unwrap());
    assert_history_paired(&session.messages().unwrap());
}
