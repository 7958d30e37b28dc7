//! The loop over a real core and store: evidence, stop reasons, cancellation, resume.

use clawsmith_agent::fixture::{Scripted, ScriptedReply, ScriptedServer};
use clawsmith_agent::{AgentError, ProviderError, ProviderKind, RunOptions, StopReason, run_task};
use clawsmith_core::{CollectingSink, EventSink};
use clawsmith_protocol::{Event, EventPayload, Role, ToolStatus};

use crate::support::{
    DEPLOY_PREVIEW, KEY, WAIT_FOR_CANCEL, assert_absent_from_files, assert_sendable, env,
    extension, provider,
};

fn model_requests(events: &[Event]) -> Vec<clawsmith_protocol::ModelRequest> {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::ModelRequest(request) => Some(request.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn tool_calls_run_through_the_core_until_the_model_answers() {
    for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
        let env = env();
        let server = ScriptedServer::queue(vec![
            Scripted::Reply(ScriptedReply::calls(&[
                ("read_file", r#"{"path":"a.txt"}"#),
                ("read_file", r#"{"path":"b.txt"}"#),
            ])),
            Scripted::Stream(ScriptedReply::answer("a says alpha, b says beta")),
        ])
        .await
        .unwrap();
        let core = env.core(Vec::new());
        let session = core.open_session(None).unwrap();
        let sink = CollectingSink::new();
        let outcome = run_task(
            &session,
            &provider(&server, kind),
            "what do the files say?",
            RunOptions::new(),
            &sink,
        )
        .await
        .unwrap();
        assert_eq!(outcome.answer, "a says alpha, b says beta", "{kind:?}");
        assert_eq!(outcome.turns, 2);
        assert_eq!(outcome.stop_reason, StopReason::Answered);
        assert_eq!(outcome.usage.input_tokens, 22);

        // Evidence: one `model.request` per request, its id sent as the request's header and
        // its tool list exactly the list sent.
        let events = session.events().unwrap();
        let evidence = model_requests(&events);
        let sent = server.requests();
        assert_eq!(evidence.len(), 2);
        for (recorded, request) in evidence.iter().zip(&sent) {
            assert_eq!(request.headers["x-request-id"], recorded.request_id);
            assert_eq!(request.tool_names(), recorded.tool_names);
            assert_eq!(recorded.turn_id.as_deref(), Some(outcome.turn_id.as_str()));
        }
        assert!(evidence[0].tool_names.contains(&"read_file".to_owned()));
        // The second request carried the results the core produced.
        let texts = sent[1].message_texts();
        assert!(texts.iter().any(|text| text.contains("alpha")), "{texts:?}");
        assert!(texts.iter().any(|text| text.contains("beta")), "{texts:?}");
        let completed: Vec<ToolStatus> = events
            .iter()
            .filter_map(|event| match &event.payload {
                EventPayload::ToolCompleted(done) => Some(done.status),
                _ => None,
            })
            .collect();
        assert_eq!(completed, [ToolStatus::Success, ToolStatus::Success]);
        let messages = session.messages().unwrap();
        assert_sendable(&messages);
        assert_eq!(messages.first().unwrap().content, "what do the files say?");
        assert_eq!(messages.last().unwrap().role, Role::Assistant);
        assert_eq!(
            messages.last().unwrap().content,
            "a says alpha, b says beta"
        );
        // The sink saw what the store holds.
        assert_eq!(sink.events(), events);
        assert_absent_from_files(&env.state, KEY);
    }
}

#[tokio::test]
async fn max_turns_ends_a_model_that_keeps_calling() {
    let env = env();
    let server = ScriptedServer::queue(vec![
        Scripted::Reply(ScriptedReply::calls(&[(
            "read_file",
            r#"{"path":"a.txt"}"#,
        )])),
        Scripted::Reply(ScriptedReply::calls(&[(
            "read_file",
            r#"{"path":"b.txt"}"#,
        )])),
        Scripted::Reply(ScriptedReply::answer("never asked")),
    ])
    .await
    .unwrap();
    let core = env.core(Vec::new());
    let session = core.open_session(None).unwrap();
    let mut options = RunOptions::new();
    options.max_turns = 2;
    let outcome = run_task(
        &session,
        &provider(&server, ProviderKind::Openai),
        "loop",
        options,
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.stop_reason, StopReason::MaxTurns);
    assert_eq!(outcome.turns, 2);
    assert_eq!(server.requests().len(), 2);
    assert_sendable(&session.messages().unwrap());
}

#[tokio::test]
async fn search_tools_activations_are_shown_in_the_next_request() {
    let env = env();
    let server = ScriptedServer::queue(vec![
        Scripted::Reply(ScriptedReply::calls(&[(
            "search_tools",
            r#"{"query":"deploy preview"}"#,
        )])),
        Scripted::Reply(ScriptedReply::calls(&[("deploy_preview", "{}")])),
        Scripted::Reply(ScriptedReply::answer("deployed")),
    ])
    .await
    .unwrap();
    let core = env.core(vec![extension(DEPLOY_PREVIEW)]);
    let session = core.open_session(None).unwrap();
    let outcome = run_task(
        &session,
        &provider(&server, ProviderKind::Anthropic),
        "deploy a preview",
        RunOptions::new(),
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.answer, "deployed");
    let sent = server.requests();
    assert!(!sent[0].tool_names().contains(&"deploy_preview".to_owned()));
    assert!(sent[1].tool_names().contains(&"deploy_preview".to_owned()));
    let evidence = model_requests(&session.events().unwrap());
    assert!(evidence[0].composition.activated_tools.is_empty());
    assert_eq!(evidence[1].composition.activated_tools, ["deploy_preview"]);
    assert_ne!(
        evidence[0].tool_schema_sha256,
        evidence[1].tool_schema_sha256
    );
}

/// Cancels the run as soon as a call starts: the Ctrl-C of a terminal, mid-batch.
struct CancelOnStart(clawsmith_protocol::CancellationSignal);

impl EventSink for CancelOnStart {
    fn event(&self, event: &Event) {
        if matches!(event.payload, EventPayload::ToolStarted(_)) {
            self.0.cancel();
        }
    }
}

#[tokio::test]
async fn cancelling_mid_batch_closes_every_call_and_the_session_goes_on() {
    let env = env();
    let server = ScriptedServer::queue(vec![
        Scripted::Reply(ScriptedReply::calls(&[
            ("wait_for_cancel", r#"{"n":1}"#),
            ("wait_for_cancel", r#"{"n":2}"#),
            ("read_file", r#"{"path":"a.txt"}"#),
        ])),
        Scripted::Reply(ScriptedReply::answer("after the interruption")),
    ])
    .await
    .unwrap();
    let core = env.core(vec![extension(WAIT_FOR_CANCEL)]);
    let session = core.open_session(None).unwrap();
    let provider = provider(&server, ProviderKind::Openai);
    let mut options = RunOptions::new();
    let cancel = options.cancellation.clone();
    options.cancellation = cancel.clone();
    let outcome = run_task(&session, &provider, "wait", options, &CancelOnStart(cancel))
        .await
        .unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    let messages = session.messages().unwrap();
    assert_sendable(&messages);
    let statuses: Vec<ToolStatus> = messages
        .iter()
        .filter_map(|message| message.tool_status())
        .collect();
    assert_eq!(statuses.len(), 3);
    assert!(
        statuses[..2]
            .iter()
            .all(|status| *status == ToolStatus::Cancelled),
        "{statuses:?}"
    );
    let events = session.events().unwrap();
    assert!(matches!(
        events.last().unwrap().payload,
        EventPayload::TurnCompleted(_)
    ));

    // The same session continues: the provider gets the whole history, results included.
    let outcome = run_task(
        &session,
        &provider,
        "go on",
        RunOptions::new(),
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.answer, "after the interruption");
    let last = server.requests().pop().unwrap();
    let roles: Vec<&str> = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "tool", "user"]);
}

#[tokio::test]
async fn a_resumed_session_sends_the_stored_history() {
    let env = env();
    let server = ScriptedServer::queue(vec![
        // The text beside the calls is stored with them and sent again.
        Scripted::Reply(ScriptedReply {
            text: "Let me read a.txt first.".to_owned(),
            calls: vec![("read_file".to_owned(), r#"{"path":"a.txt"}"#.to_owned())],
        }),
        Scripted::Reply(ScriptedReply::answer("first answer")),
        Scripted::Reply(ScriptedReply::answer("second answer")),
    ])
    .await
    .unwrap();
    let session_id = {
        let core = env.core(Vec::new());
        let session = core.open_session(None).unwrap();
        run_task(
            &session,
            &provider(&server, ProviderKind::Anthropic),
            "first task",
            RunOptions::new(),
            &CollectingSink::new(),
        )
        .await
        .unwrap();
        session.id().to_owned()
    };
    // A new core over the same database file: another process would do the same.
    let core = env.core(Vec::new());
    let session = core.open_session(Some(session_id)).unwrap();
    run_task(
        &session,
        &provider(&server, ProviderKind::Anthropic),
        "second task",
        RunOptions::new(),
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    let resumed = &server.requests()[2];
    assert_eq!(
        resumed.message_texts(),
        [
            "first task",
            "Let me read a.txt first.",
            "alpha\n",
            "first answer",
            "second task"
        ]
    );
    // Anthropic: the text block precedes the tool_use block of the same assistant message.
    let assistant = &resumed.body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0]["type"], "text");
    assert_eq!(assistant["content"][1]["type"], "tool_use");
}

/// `agent.stopped` as stored: (stopReason, turns, inputTokens, error).
fn stopped(events: &[Event]) -> Vec<(String, u32, u64, Option<String>)> {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::AgentStopped(stopped) => Some((
                stopped.stop_reason.clone(),
                stopped.turns,
                stopped.usage.input_tokens,
                stopped.error.clone(),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_stop_reason_is_stored_in_the_turn() {
    let env = env();
    let server = ScriptedServer::queue(vec![
        Scripted::Reply(ScriptedReply::calls(&[(
            "read_file",
            r#"{"path":"a.txt"}"#,
        )])),
        Scripted::Reply(ScriptedReply::answer("done")),
        Scripted::Reply(ScriptedReply::calls(&[(
            "read_file",
            r#"{"path":"b.txt"}"#,
        )])),
        Scripted::Status {
            status: 400,
            body: r#"{"error":{"message":"context too long"}}"#.to_owned(),
            retry_after: None,
        },
    ])
    .await
    .unwrap();
    let core = env.core(Vec::new());
    let session = core.open_session(None).unwrap();
    let sink = CollectingSink::new();
    let provider = provider(&server, ProviderKind::Openai);
    let outcome = run_task(&session, &provider, "one", RunOptions::new(), &sink)
        .await
        .unwrap();
    let mut options = RunOptions::new();
    options.max_turns = 1;
    run_task(&session, &provider, "two", options, &sink)
        .await
        .unwrap();
    run_task(&session, &provider, "three", RunOptions::new(), &sink)
        .await
        .unwrap_err();
    let events = session.events().unwrap();
    let usage = outcome.usage.input_tokens;
    assert_eq!(
        stopped(&events),
        [
            ("answered".to_owned(), 2, usage, None),
            ("max_turns".to_owned(), 1, usage / 2, None),
            (
                "error".to_owned(),
                1,
                0,
                Some(
                    "openai:scripted-model refused the request (HTTP 400): context too long"
                        .to_owned()
                )
            ),
        ]
    );
    // Each is the last event of its turn before `turn.completed`, and the sink saw them too.
    for (index, event) in events.iter().enumerate() {
        if let EventPayload::AgentStopped(stopped) = &event.payload {
            let EventPayload::TurnCompleted(completed) = &events[index + 1].payload else {
                panic!("agent.stopped is not followed by turn.completed");
            };
            assert_eq!(stopped.turn_id.as_deref(), Some(completed.turn_id.as_str()));
        }
    }
    assert_eq!(stopped(&sink.events()).len(), 3);
}

#[tokio::test]
async fn a_provider_failure_finishes_the_turn_and_leaves_the_history_sendable() {
    let env = env();
    let server = ScriptedServer::queue(vec![
        Scripted::Reply(ScriptedReply::calls(&[(
            "read_file",
            r#"{"path":"a.txt"}"#,
        )])),
        Scripted::Status {
            status: 404,
            body: r#"{"error":{"message":"no such model"}}"#.to_owned(),
            retry_after: None,
        },
    ])
    .await
    .unwrap();
    let core = env.core(Vec::new());
    let session = core.open_session(None).unwrap();
    let error = run_task(
        &session,
        &provider(&server, ProviderKind::Openai),
        "task",
        RunOptions::new(),
        &CollectingSink::new(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            &error,
            AgentError::Provider(ProviderError::Refused { status: 404, .. })
        ),
        "{error}"
    );
    assert!(error.to_string().contains("no such model"));
    let events = session.events().unwrap();
    assert!(matches!(
        events.last().unwrap().payload,
        EventPayload::TurnCompleted(_)
    ));
    assert_sendable(&session.messages().unwrap());
}
