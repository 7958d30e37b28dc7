//! One test per row of the P6 result table: each code from a real input through the pipeline,
//! with its status, `retryable`, its `tool.completed` event and its tool message.

use std::sync::Arc;

use clawsmith_core::{BatchOptions, CollectingSink, ExtensionTool, Hook, HookFuture, TurnOptions};
use clawsmith_protocol::{
    ErrorCode, EventPayload, ModelMessage, Role, SearchMetadata, ToolCall, ToolExecutionResult,
    ToolOutput, ToolStatus,
};
use clawsmith_security::{HookDecision, HookInput, HookVerdict, PermissionMode, PermissionPolicy};

use crate::support::*;

/// Asserts code, status and retryable, and that the call was closed in events and history.
async fn check(
    session: &clawsmith_core::SessionHandle,
    name: &str,
    arguments: &str,
    code: &str,
    status: ToolStatus,
    retryable: bool,
) -> ToolExecutionResult {
    let (results, events) = turn(session, vec![call("c1", name, arguments)]).await;
    let result = &results[0].1;
    assert_status(result, status, Some(code));
    assert_eq!(result.metadata.retryable, Some(retryable), "{code}");
    assert_eq!(ErrorCode::new(code).status(), status);
    let done = completed(&events);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].result, result.metadata);
    assert_eq!(done[0].status, status);
    let messages = session.messages().unwrap();
    assert_history_paired(&messages);
    let last = messages.last().unwrap();
    assert_eq!(last.tool_result.as_ref().unwrap().status, status);
    assert_eq!(last.content, result.content);
    result.clone()
}

#[tokio::test]
async fn unknown_tool() {
    let fixture = Fixture::new();
    let session = fixture.core(|_| {}).open_session(None).unwrap();
    let result = check(
        &session,
        "no_such_tool",
        "{}",
        "unknown_tool",
        ToolStatus::Error,
        false,
    )
    .await;
    assert!(
        result.content.contains("read_file"),
        "lists the available tools"
    );
}

#[tokio::test]
async fn inactive_tool() {
    let fixture = Fixture::new();
    let mut tool = TestTool::answering("lsp_diagnostics", ToolOutput::Text("ok".into()));
    tool.deferred = Some(SearchMetadata::default());
    let core = fixture.core(|config| {
        config.extension_tools.push(ExtensionTool {
            source: "lsp".into(),
            tool: tool.shared(),
            deferred: true,
        });
    });
    let session = core.open_session(None).unwrap();
    let result = check(
        &session,
        "lsp_diagnostics",
        "{}",
        "inactive_tool",
        ToolStatus::Error,
        true,
    )
    .await;
    assert!(result.content.contains("search_tools"));
}

#[tokio::test]
async fn invalid_json() {
    let fixture = Fixture::new();
    let session = fixture.core(|_| {}).open_session(None).unwrap();
    check(
        &session,
        "read_file",
        "{\"path\": ",
        "invalid_json",
        ToolStatus::Error,
        true,
    )
    .await;
}

#[tokio::test]
async fn invalid_arguments_name_the_field() {
    let fixture = Fixture::new();
    let session = fixture.core(|_| {}).open_session(None).unwrap();
    let result = check(
        &session,
        "read_file",
        r#"{"path": 5}"#,
        "invalid_arguments",
        ToolStatus::Error,
        true,
    )
    .await;
    assert!(result.content.contains("`path`"), "{}", result.content);
    let result = check(
        &session,
        "read_file",
        r#"{}"#,
        "invalid_arguments",
        ToolStatus::Error,
        true,
    )
    .await;
    assert!(result.content.contains("path"), "{}", result.content);
    let result = check(
        &session,
        "todo_write",
        r#"{"todos": [{"id": "1", "content": "x", "status": "done"}]}"#,
        "invalid_arguments",
        ToolStatus::Error,
        true,
    )
    .await;
    assert!(
        result.content.contains("todos[0].status"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn duplicate_call_by_arguments_and_by_id() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    let session = fixture.core(|_| {}).open_session(None).unwrap();
    // Same tool, identical arguments (different key order and spacing).
    let (results, events) = turn(
        &session,
        vec![
            call("c1", "read_file", r#"{"path": "a.txt", "limit": 5}"#),
            call("c2", "read_file", r#"{"limit":5,"path":"a.txt"}"#),
        ],
    )
    .await;
    assert_status(&results[0].1, ToolStatus::Success, None);
    assert_status(&results[1].1, ToolStatus::Error, Some("duplicate_call"));
    assert_eq!(results[1].1.metadata.retryable, Some(false));
    assert_eq!(started_ids(&events), ["c1"], "the duplicate never started");
    // Same id twice.
    let (results, _) = turn(
        &session,
        vec![
            call("d1", "read_file", r#"{"path": "a.txt"}"#),
            call("d1", "todo_list", "{}"),
        ],
    )
    .await;
    assert_status(&results[1].1, ToolStatus::Error, Some("duplicate_call"));
    assert_history_paired(&session.messages().unwrap());
}

#[tokio::test]
async fn call_ids_are_unique_per_turn_not_per_session() {
    let fixture = Fixture::new();
    let session = fixture
        .core(|config| config.policy = PermissionPolicy::new(PermissionMode::Full))
        .open_session(None)
        .unwrap();
    // Providers that number calls per turn send `call_0`, `call_1` in every turn: (turn's calls,
    // expected status and code per call).
    let write = |id: &str, path: &str| {
        call(
            id,
            "write_file",
            &format!(r#"{{"path":"{path}","content":"{path}"}}"#),
        )
    };
    let table = [
        (
            vec![write("call_0", "one.txt"), write("call_1", "two.txt")],
            vec![(ToolStatus::Success, None), (ToolStatus::Success, None)],
        ),
        (
            vec![write("call_0", "three.txt"), write("call_1", "four.txt")],
            vec![(ToolStatus::Success, None), (ToolStatus::Success, None)],
        ),
        // A repeat *within* a turn is still a duplicate, whatever the tool.
        (
            vec![write("call_0", "five.txt"), write("call_0", "six.txt")],
            vec![
                (ToolStatus::Success, None),
                (ToolStatus::Error, Some("duplicate_call")),
            ],
        ),
    ];
    for (calls, expected) in table {
        let (results, _) = turn(&session, calls).await;
        for ((_, result), (status, code)) in results.iter().zip(expected) {
            assert_status(result, status, code);
        }
    }
    for (path, written) in [
        ("one.txt", true),
        ("two.txt", true),
        ("three.txt", true),
        ("four.txt", true),
        ("five.txt", true),
        ("six.txt", false),
    ] {
        assert_eq!(fixture.workspace.join(path).exists(), written, "{path}");
    }
    let journal = fixture.store.journal(session.id()).unwrap();
    assert_eq!(journal.len(), 5, "every write journaled under (turn, id)");
    assert_history_paired(&session.messages().unwrap());
}

struct DenyAll;

impl Hook for DenyAll {
    fn name(&self) -> &str {
        "deny-all"
    }
    fn check<'a>(&'a self, _input: &'a HookInput) -> HookFuture<'a> {
        Box::pin(async {
            HookDecision {
                decision: HookVerdict::Deny,
                reason: Some("no reads today".into()),
            }
        })
    }
}

#[tokio::test]
async fn hook_denied() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    let session = fixture
        .core(|config| config.hooks.push(Arc::new(DenyAll)))
        .open_session(None)
        .unwrap();
    let result = check(
        &session,
        "read_file",
        r#"{"path": "a.txt"}"#,
        "hook_denied",
        ToolStatus::Denied,
        false,
    )
    .await;
    assert!(result.content.contains("no reads today"));
    assert!(result.content.contains("deny-all"));
}

#[tokio::test]
async fn permission_denied_without_approver_and_in_read_only() {
    let fixture = Fixture::new();
    // Ask mode, no approver: ask becomes permission_denied.
    let session = fixture.core(|_| {}).open_session(None).unwrap();
    let result = check(
        &session,
        "write_file",
        r#"{"path": "new.txt", "content": "x"}"#,
        "permission_denied",
        ToolStatus::Denied,
        false,
    )
    .await;
    assert!(
        !fixture.workspace.join("new.txt").exists(),
        "the tool never ran"
    );
    // A front end tells "no one to ask" from a rule that denies without reading the message.
    assert!(clawsmith_core::needs_an_approver(&result), "{result:?}");
    // read-only mode denies outright.
    let session = fixture
        .core(|config| config.policy = PermissionPolicy::new(PermissionMode::ReadOnly))
        .open_session(None)
        .unwrap();
    let result = check(
        &session,
        "write_file",
        r#"{"path": "new.txt", "content": "x"}"#,
        "permission_denied",
        ToolStatus::Denied,
        false,
    )
    .await;
    assert!(result.content.contains("read-only"), "{}", result.content);
    assert!(!clawsmith_core::needs_an_approver(&result), "{result:?}");
    assert!(!fixture.workspace.join("new.txt").exists());
}

#[tokio::test]
async fn permission_uses_effective_risk() {
    // A tool declaring `read` but holding `network` is execute by the floor (S1): accept-edits
    // asks, so without an approver it is denied.
    let fixture = Fixture::new();
    let mut tool = TestTool::answering("fetch", ToolOutput::Text("page".into()));
    tool.capabilities =
        clawsmith_protocol::CapabilityDeclaration::Raw(serde_json::json!(["network"]));
    let session = fixture
        .core(|config| {
            config.policy = PermissionPolicy::new(PermissionMode::AcceptEdits);
            config.extension_tools.push(ExtensionTool {
                source: "plugin".into(),
                tool: tool.shared(),
                deferred: false,
            });
        })
        .open_session(None)
        .unwrap();
    check(
        &session,
        "fetch",
        "{}",
        "permission_denied",
        ToolStatus::Denied,
        false,
    )
    .await;
}

#[tokio::test]
async fn cancelled() {
    let fixture = Fixture::new();
    let tool = TestTool::read(
        "wait_forever",
        Arc::new(|_, context| {
            Box::pin(async move {
                context.cancellation.cancelled().await;
                ToolOutput::Result(ToolExecutionResult::failure(
                    ErrorCode::CANCELLED,
                    "stopped on request",
                ))
            })
        }),
    );
    let session = fixture
        .core(|config| {
            config.extension_tools.push(ExtensionTool {
                source: "test".into(),
                tool: tool.shared(),
                deferred: false,
            });
        })
        .open_session(None)
        .unwrap();
    let sink = CollectingSink::new();
    let mut running = session.begin_turn(&sink, TurnOptions::default()).unwrap();
    let signal = running.cancellation();
    let canceller = tokio::spawn(async move {
        // Cancel once the call is running: wait for its tool.started event.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        signal.cancel();
    });
    let results = running
        .run_batch(
            vec![
                call("c1", "wait_forever", "{}"),
                // todo_write is not concurrency-safe: the batch is serial.
                call("c2", "todo_write", r#"{"todos": []}"#),
            ],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    canceller.await.unwrap();
    running.finish(&sink).unwrap();
    assert_status(&results[0].1, ToolStatus::Cancelled, Some("cancelled"));
    assert_eq!(results[0].1.metadata.retryable, Some(false));
    // The next call of the serial batch never ran.
    assert_status(&results[1].1, ToolStatus::Cancelled, Some("cancelled"));
    assert_eq!(started_ids(&sink.events()), ["c1"]);
    assert_history_paired(&session.messages().unwrap());
}

#[tokio::test]
async fn cancelling_a_tool_that_ignores_it_abandons_it() {
    let fixture = Fixture::new();
    let tool = TestTool::read(
        "stubborn",
        Arc::new(|_, _| Box::pin(std::future::pending())),
    );
    let session = fixture
        .core(|config| {
            config.cancel_grace = std::time::Duration::from_millis(20);
            config.extension_tools.push(ExtensionTool {
                source: "test".into(),
                tool: tool.shared(),
                deferred: false,
            });
        })
        .open_session(None)
        .unwrap();
    let sink = CollectingSink::new();
    let mut running = session.begin_turn(&sink, TurnOptions::default()).unwrap();
    running.cancellation().cancel();
    let results = running
        .run_batch(
            vec![call("c1", "stubborn", "{}")],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    assert_status(&results[0].1, ToolStatus::Cancelled, Some("cancelled"));
    // Cancelled mid-run.
    let mut running = session.begin_turn(&sink, TurnOptions::default()).unwrap();
    let signal = running.cancellation();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        signal.cancel();
    });
    let results = running
        .run_batch(
            vec![call("c2", "stubborn", "{}")],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    assert_status(&results[0].1, ToolStatus::Cancelled, Some("cancelled"));
    assert!(results[0].1.content.contains("abandoned"));
}

#[tokio::test]
async fn tool_failed_from_a_panic_and_the_core_survives() {
    let fixture = Fixture::new();
    let tool = TestTool::read(
        "explode",
        Arc::new(|_, _| Box::pin(async { panic!("kaboom") })),
    );
    let session = fixture
        .core(|config| {
            config.extension_tools.push(ExtensionTool {
                source: "test".into(),
                tool: tool.shared(),
                deferred: false,
            });
        })
        .open_session(None)
        .unwrap();
    let result = check(
        &session,
        "explode",
        "{}",
        "tool_failed",
        ToolStatus::Error,
        false,
    )
    .await;
    assert!(result.content.contains("kaboom"));
    // The same core keeps working.
    assert_status(
        &one(&session, "todo_list", "{}").await,
        ToolStatus::Success,
        None,
    );
}

#[tokio::test]
async fn tool_failed_from_a_timeout() {
    let fixture = Fixture::new();
    let tool = TestTool::read("hang", Arc::new(|_, _| Box::pin(std::future::pending())));
    let session = fixture
        .core(|config| {
            config.call_timeout = Some(std::time::Duration::from_millis(30));
            config.cancel_grace = std::time::Duration::from_millis(10);
            config.extension_tools.push(ExtensionTool {
                source: "test".into(),
                tool: tool.shared(),
                deferred: false,
            });
        })
        .open_session(None)
        .unwrap();
    let result = check(
        &session,
        "hang",
        "{}",
        "tool_failed",
        ToolStatus::Error,
        false,
    )
    .await;
    assert!(result.content.contains("did not finish"));
}

#[tokio::test]
async fn interrupted_on_recovery() {
    // A crash is simulated by writing what a killed process leaves: the assistant message, the
    // journal entry and `tool.started`, and no result. (The real SIGKILL test is in `crash`.)
    let fixture = Fixture::new();
    let core = fixture.core(|_| {});
    let session = core.open_session(Some("s1".into())).unwrap();
    drop(session);
    let store = &fixture.store;
    let calls = vec![
        ToolCall {
            id: "w1".into(),
            name: "write_file".into(),
            arguments: r#"{"path":"x","content":"y"}"#.into(),
        },
        ToolCall {
            id: "r2".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"x"}"#.into(),
        },
    ];
    store
        .begin_turn(
            "s1",
            "t1",
            clawsmith_core::checkpoint::TurnOpening::default(),
        )
        .unwrap();
    store
        .append_message("s1", &ModelMessage::assistant_with_calls("", calls))
        .unwrap();
    store
        .journal_start(&clawsmith_checkpoint::JournalStart {
            session_id: "s1".into(),
            turn_id: "t1".into(),
            call_id: "w1".into(),
            tool_name: "write_file".into(),
            args_json: r#"{"path":"sub/x","content":"y"}"#.into(),
        })
        .unwrap();
    // What the killed write left beside its target (a pid above the kernel's maximum is dead).
    fixture.write("sub/.clawsmith-tmp-999999999-7-0", "torn");
    fixture.write("sub/keep.txt", "kept");
    store
        .add_pending_approval(
            "s1",
            &clawsmith_checkpoint::PendingApproval {
                approval_id: "a1".into(),
                turn_id: "t1".into(),
                call_id: "w1".into(),
                request: serde_json::json!({}),
            },
        )
        .unwrap();
    let session = core.open_session(Some("s1".into())).unwrap();
    assert_eq!(session.recovery().interrupted, ["w1"]);
    assert_eq!(session.recovery().never_ran, ["r2"]);
    assert_eq!(session.recovery().finished_turns, ["t1"]);
    assert_eq!(session.recovery().dropped_approvals, ["a1"]);
    assert_eq!(
        session.recovery().swept_temp_files,
        ["sub/.clawsmith-tmp-999999999-7-0"]
    );
    assert!(
        !fixture
            .workspace
            .join("sub/.clawsmith-tmp-999999999-7-0")
            .exists()
    );
    assert_eq!(fixture.read("sub/keep.txt"), "kept");
    assert!(store.pending_approvals("s1").unwrap().is_empty());
    let messages = session.messages().unwrap();
    assert_history_paired(&messages);
    let results: Vec<&ModelMessage> = messages.iter().filter(|m| m.role == Role::Tool).collect();
    let w1 = results[0].tool_result.as_ref().unwrap();
    assert_eq!(w1.status, ToolStatus::Unknown);
    assert_eq!(w1.code.as_ref().unwrap().as_str(), "interrupted");
    assert_eq!(w1.retryable, Some(false));
    assert_eq!(
        results[1].tool_result.as_ref().unwrap().status,
        ToolStatus::Cancelled
    );
    assert!(store.unfinished_calls("s1").unwrap().is_empty());
    let events = session.events().unwrap();
    assert_sequences(&events);
    let done = completed(&events);
    assert_eq!(done.len(), 2);
    assert_eq!(done[0].status, ToolStatus::Unknown);
    // Reopening again changes nothing.
    let again = core.open_session(Some("s1".into())).unwrap();
    assert!(again.recovery().is_empty());
    assert_eq!(again.messages().unwrap().len(), messages.len());
    assert!(
        !fixture.workspace.join("x").exists(),
        "nothing was replayed"
    );
}

#[tokio::test]
async fn success_with_events_in_order() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    let session = fixture
        .core(|config| config.policy = PermissionPolicy::new(PermissionMode::AcceptEdits))
        .open_session(None)
        .unwrap();
    let (results, events) = turn(
        &session,
        vec![
            call("c1", "read_file", r#"{"path": "a.txt"}"#),
            call(
                "c2",
                "edit_file",
                r#"{"path": "a.txt", "oldText": "alpha", "newText": "beta"}"#,
            ),
        ],
    )
    .await;
    assert_status(&results[0].1, ToolStatus::Success, None);
    assert_status(&results[1].1, ToolStatus::Success, None);
    assert_eq!(fixture.read("a.txt"), "beta\n");
    let kinds: Vec<&str> = events.iter().map(|event| event.payload.kind()).collect();
    assert_eq!(
        kinds,
        [
            "turn.started",
            "tool.started",
            "tool.completed",
            "tool.started",
            "tool.completed",
            "turn.completed"
        ]
    );
    assert_sequences(&session.events().unwrap());
    // The edit was journaled and closed; the read was not journaled.
    let journal = fixture.store.journal(session.id()).unwrap();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0].call_id, "c2");
    assert_eq!(journal[0].status, Some(ToolStatus::Success));
    if let EventPayload::ToolStarted(started) = &events[3].payload {
        assert!(started.side_effect);
        assert_eq!(started.risk, clawsmith_protocol::Risk::WorkspaceWrite);
    } else {
        panic!("expected tool.started");
    }
    // The turn's checkpoint recorded the edit (K1).
    let checkpoints = fixture.store.checkpoints(session.id()).unwrap();
    assert_eq!(checkpoints.len(), 1);
    assert_eq!(checkpoints[0].file_count, 1);
    assert_eq!(
        checkpoints[0].state,
        clawsmith_checkpoint::CheckpointState::Finished
    );
}

#[tokio::test]
async fn run_command_through_the_pipeline() {
    let fixture = Fixture::new();
    let session = fixture
        .core(|config| {
            config.policy = PermissionPolicy::new(PermissionMode::Full);
            config.sandbox.policy = clawsmith_sandbox::SandboxPolicy::BestEffort;
        })
        .open_session(None)
        .unwrap();
    let (results, events) = turn(
        &session,
        vec![
            call("c1", "run_command", r#"{"command": "echo hello; exit 3"}"#),
            call("c2", "run_command", r#"{"command": "sudo rm -rf /"}"#),
        ],
    )
    .await;
    // A non-zero exit is still a successful observation (P7).
    assert_status(&results[0].1, ToolStatus::Success, None);
    assert!(results[0].1.content.contains("hello"));
    // The disaster check refuses even in full mode.
    assert_status(&results[1].1, ToolStatus::Denied, Some("command_blocked"));
    // Both were started (they passed hooks and permission) and journaled as side effects.
    assert_eq!(started_ids(&events), ["c1", "c2"]);
    let journal = fixture.store.journal(session.id()).unwrap();
    assert_eq!(journal.len(), 2);
    assert!(journal.iter().all(|entry| entry.closed_at_ms.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_is_shareable_across_tasks() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    let core = fixture.core(|config| config.record_tool_schemas = true);
    send_sync(&core);
    let session = std::sync::Arc::new(core.open_session(None).unwrap());
    send_sync(&*session);
    // run_turn's future is Send: it can be spawned.
    let spawned = {
        let session = session.clone();
        tokio::spawn(async move {
            let sink = CollectingSink::new();
            let outcome = session
                .run_turn(vec![call("c1", "read_file", r#"{"path": "a.txt"}"#)], &sink)
                .await
                .unwrap();
            (outcome, sink.events())
        })
    };
    let (outcome, events) = spawned.await.unwrap();
    assert_status(&outcome.results[0].1, ToolStatus::Success, None);
    let schema = events
        .iter()
        .find_map(|event| match &event.payload {
            EventPayload::ToolStarted(started) => started.tool_schema.clone(),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        &schema,
        core.tools().get("read_file").unwrap().input_schema()
    );
    // An empty batch stores nothing.
    let before = session.messages().unwrap().len();
    let outcome = session
        .run_turn(Vec::new(), &CollectingSink::new())
        .await
        .unwrap();
    assert!(outcome.results.is_empty());
    assert_eq!(session.messages().unwrap().len(), before);
}

#[tokio::test]
async fn the_journal_entry_is_durable_before_a_side_effect_runs() {
    let fixture = Fixture::new();
    let store = fixture.store.clone();
    let mut tool = TestTool::read(
        "deploy",
        Arc::new(move |_, context| {
            let store = store.clone();
            Box::pin(async move {
                // Read back through a second connection to the same file: committed, not cached.
                let other = clawsmith_checkpoint::Store::open(store.path().unwrap()).unwrap();
                let open: Vec<String> = other
                    .unfinished_calls(&context.session_id)
                    .unwrap()
                    .into_iter()
                    .map(|entry| entry.call_id)
                    .collect();
                assert!(
                    context.authorized(),
                    "side-effecting tools get an authorized context"
                );
                ToolOutput::Text(format!("open: {open:?}"))
            })
        }),
    );
    tool.capabilities = clawsmith_protocol::CapabilityDeclaration::Declared(vec![
        clawsmith_protocol::Capability::ExternalSideEffect,
    ]);
    let session = fixture
        .core(|config| {
            config.policy = PermissionPolicy::new(PermissionMode::Full);
            config.extension_tools.push(ExtensionTool {
                source: "test".into(),
                tool: tool.shared(),
                deferred: false,
            });
        })
        .open_session(None)
        .unwrap();
    let result = one(&session, "deploy", "{}").await;
    assert_status(&result, ToolStatus::Success, None);
    assert_eq!(result.content, r#"open: ["c1"]"#);
    assert!(
        fixture
            .store
            .unfinished_calls(session.id())
            .unwrap()
            .is_empty()
    );
}
