//! Sub-agents: parallel read-only children bounded at four, background tasks and their notices.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clawsmith_agent::fixture::{RecordedRequest, Scripted, ScriptedReply, ScriptedServer};
use clawsmith_agent::subagent::{SubagentConfig, Subagents, TaskState};
use clawsmith_agent::{Provider, ProviderKind, RunOptions, StopReason, run_task};
use clawsmith_core::CollectingSink;
use clawsmith_protocol::{Role, ToolStatus};

use crate::support::{assert_sendable, env, provider};

fn is_parent(request: &RecordedRequest) -> bool {
    request.tool_names().contains(&"delegate_task".to_owned())
}

/// The child's task: its first user message.
fn child_task(request: &RecordedRequest) -> String {
    request.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|message| message["role"] == "user")
        .and_then(|message| message["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn six_delegations_in_one_batch_run_at_most_four_at_once() {
    let env = env();
    let parent_requests = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&parent_requests);
    let server = ScriptedServer::start(Arc::new(move |request: &RecordedRequest| {
        if !is_parent(request) {
            let task = child_task(request);
            return Scripted::Delayed(
                Duration::from_millis(150),
                Box::new(Scripted::Reply(ScriptedReply::answer(&format!(
                    "answer to {task}"
                )))),
            );
        }
        match counter.fetch_add(1, Ordering::SeqCst) {
            0 => {
                let calls: Vec<(String, String)> = (1..=6)
                    .map(|n| {
                        (
                            "delegate_task".to_owned(),
                            format!(r#"{{"task":"look at part {n}"}}"#),
                        )
                    })
                    .collect();
                Scripted::Reply(ScriptedReply {
                    text: String::new(),
                    calls,
                })
            }
            _ => Scripted::Reply(ScriptedReply::answer("all six reported")),
        }
    }))
    .await
    .unwrap();
    let provider: Arc<dyn Provider> = Arc::new(provider(&server, ProviderKind::Openai));
    let subagents = Subagents::new(SubagentConfig::new(Arc::clone(&provider), env.child_core()));
    let core = env.core(subagents.tools(&env.workspace));
    let session = core.open_session(None).unwrap();
    let outcome = run_task(
        &session,
        provider.as_ref(),
        "survey",
        RunOptions::new(),
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.answer, "all six reported");
    assert!(
        server.max_in_flight() <= 4,
        "{} requests in flight",
        server.max_in_flight()
    );

    let messages = session.messages().unwrap();
    assert_sendable(&messages);
    let results: Vec<serde_json::Value> = messages
        .iter()
        .filter(|message| message.role == Role::Tool)
        .map(|message| {
            assert_eq!(
                message.tool_status(),
                Some(ToolStatus::Success),
                "{}",
                message.content
            );
            serde_json::from_str(&message.content).unwrap()
        })
        .collect();
    assert_eq!(results.len(), 6);
    for (n, result) in results.iter().enumerate() {
        assert_eq!(
            result["answer"],
            format!("answer to look at part {}", n + 1)
        );
        assert_eq!(result["stopReason"], "answered");
    }
    // Each child is a session of its own, linked to its parent.
    let children: Vec<String> = env
        .store
        .list_sessions()
        .unwrap()
        .into_iter()
        .filter(|info| info.parent_id.as_deref() == Some(session.id()))
        .map(|info| info.id)
        .collect();
    assert_eq!(children.len(), 6);
    for result in &results {
        assert!(children.contains(&result["sessionId"].as_str().unwrap().to_owned()));
    }
    // Children saw read-only tools and no delegate tools (depth 1).
    for request in server
        .requests()
        .iter()
        .filter(|request| !is_parent(request))
    {
        let names = request.tool_names();
        assert!(names.contains(&"read_file".to_owned()), "{names:?}");
        for forbidden in [
            "write_file",
            "edit_file",
            "run_command",
            "delegate_task",
            "delegate_background",
        ] {
            assert!(
                !names.contains(&forbidden.to_owned()),
                "{forbidden} shown to a child"
            );
        }
    }
}

#[tokio::test]
async fn the_pool_bound_holds_across_batches_and_children_wait_rather_than_fail() {
    let env = env();
    let parent_requests = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&parent_requests);
    let server = ScriptedServer::start(Arc::new(move |request: &RecordedRequest| {
        if !is_parent(request) {
            return Scripted::Delayed(
                Duration::from_millis(100),
                Box::new(Scripted::Reply(ScriptedReply::answer("child done"))),
            );
        }
        match counter.fetch_add(1, Ordering::SeqCst) {
            0 => Scripted::Reply(ScriptedReply::calls(&[
                ("delegate_task", r#"{"task":"one"}"#),
                ("delegate_task", r#"{"task":"two"}"#),
                ("delegate_task", r#"{"task":"three"}"#),
            ])),
            _ => Scripted::Reply(ScriptedReply::answer("done")),
        }
    }))
    .await
    .unwrap();
    let provider: Arc<dyn Provider> = Arc::new(provider(&server, ProviderKind::Anthropic));
    let mut config = SubagentConfig::new(Arc::clone(&provider), env.child_core());
    config.max_concurrent = 1;
    let subagents = Subagents::new(config);
    let core = env.core(subagents.tools(&env.workspace));
    let session = core.open_session(None).unwrap();
    run_task(
        &session,
        provider.as_ref(),
        "serial",
        RunOptions::new(),
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    assert_eq!(server.max_in_flight(), 1);
    let successes = session
        .messages()
        .unwrap()
        .iter()
        .filter(|message| message.tool_status() == Some(ToolStatus::Success))
        .count();
    assert_eq!(successes, 3);
}

#[tokio::test]
async fn an_unknown_agent_definition_is_refused_with_the_known_names() {
    let env = env();
    std::fs::create_dir_all(env.workspace.join(".claude/agents")).unwrap();
    std::fs::write(
        env.workspace.join(".claude/agents/reviewer.md"),
        "---\nname: reviewer\ndescription: reviews\nmax_turns: 2\n---\nYou review code.\n",
    )
    .unwrap();
    let server = ScriptedServer::start(Arc::new(|request: &RecordedRequest| {
        if is_parent(request) {
            if request.message_texts().len() == 1 {
                Scripted::Reply(ScriptedReply::calls(&[
                    ("delegate_task", r#"{"task":"review","agent":"reviewer"}"#),
                    ("delegate_task", r#"{"task":"review","agent":"nobody"}"#),
                ]))
            } else {
                Scripted::Reply(ScriptedReply::answer("ok"))
            }
        } else {
            let system = request.body["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            Scripted::Reply(ScriptedReply::answer(&format!(
                "system had: {}",
                system.contains("You review code.")
            )))
        }
    }))
    .await
    .unwrap();
    let provider: Arc<dyn Provider> = Arc::new(provider(&server, ProviderKind::Openai));
    let subagents = Subagents::new(SubagentConfig::new(Arc::clone(&provider), env.child_core()));
    let core = env.core(subagents.tools(&env.workspace));
    let session = core.open_session(None).unwrap();
    run_task(
        &session,
        provider.as_ref(),
        "review",
        RunOptions::new(),
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    let tools: Vec<_> = session
        .messages()
        .unwrap()
        .into_iter()
        .filter(|message| message.role == Role::Tool)
        .collect();
    assert_eq!(tools[0].tool_status(), Some(ToolStatus::Success));
    assert!(
        tools[0].content.contains("system had: true"),
        "{}",
        tools[0].content
    );
    assert_eq!(tools[1].tool_status(), Some(ToolStatus::Error));
    let code = tools[1]
        .tool_result
        .as_ref()
        .unwrap()
        .code
        .as_ref()
        .unwrap();
    assert_eq!(code.as_str(), "invalid_arguments");
    assert!(
        tools[1].content.contains("known: reviewer"),
        "{}",
        tools[1].content
    );
}

fn notices(session: &clawsmith_core::SessionHandle) -> usize {
    session
        .messages()
        .unwrap()
        .iter()
        .filter(|message| {
            message.role == Role::User && message.content.contains("background_task.completed")
        })
        .count()
}

#[tokio::test]
async fn a_background_task_notifies_its_parent_exactly_once() {
    let env = env();
    let parent_requests = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&parent_requests);
    let server = ScriptedServer::start(Arc::new(move |request: &RecordedRequest| {
        if !is_parent(request) {
            return Scripted::Delayed(
                Duration::from_millis(100),
                Box::new(Scripted::Reply(ScriptedReply::answer("scan found 2 files"))),
            );
        }
        match counter.fetch_add(1, Ordering::SeqCst) {
            0 => Scripted::Reply(ScriptedReply::calls(&[(
                "delegate_background",
                r#"{"task":"scan"}"#,
            )])),
            1 => Scripted::Reply(ScriptedReply::answer("started; waiting")),
            2 => Scripted::Reply(ScriptedReply::calls(&[("background_task_list", "{}")])),
            _ => Scripted::Reply(ScriptedReply::answer("the scan found 2 files")),
        }
    }))
    .await
    .unwrap();
    let provider: Arc<dyn Provider> = Arc::new(provider(&server, ProviderKind::Openai));
    let subagents = Subagents::new(SubagentConfig::new(Arc::clone(&provider), env.child_core()));
    let core = env.core(subagents.tools(&env.workspace));
    let session = core.open_session(None).unwrap();
    let mut options = RunOptions::new();
    options.subagents = Some(Arc::clone(&subagents));
    let outcome = run_task(
        &session,
        provider.as_ref(),
        "scan in the background",
        options,
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.answer, "the scan found 2 files");
    assert_eq!(outcome.stop_reason, StopReason::Answered);
    assert_eq!(notices(&session), 1);
    let parent: Vec<RecordedRequest> = server.requests().into_iter().filter(is_parent).collect();
    assert_eq!(parent.len(), 4);
    // The notice reached the request after the task ended, carrying the child's answer only.
    let notice_texts: Vec<String> = parent[2]
        .message_texts()
        .into_iter()
        .filter(|text| text.contains("background_task.completed"))
        .collect();
    assert_eq!(notice_texts.len(), 1);
    assert!(notice_texts[0].contains("scan found 2 files"));
    let tasks = subagents.background_tasks(session.id());
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].state, TaskState::Completed);
    assert!(tasks[0].ended_at_ms.is_some());
}

#[tokio::test]
async fn a_cancelled_background_task_never_notifies() {
    let env = env();
    let parent_requests = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&parent_requests);
    let server = ScriptedServer::start(Arc::new(move |request: &RecordedRequest| {
        if !is_parent(request) {
            // Held far longer than the test: only the cancel ends this child.
            return Scripted::Delayed(
                Duration::from_secs(300),
                Box::new(Scripted::Reply(ScriptedReply::answer("too late"))),
            );
        }
        match counter.fetch_add(1, Ordering::SeqCst) {
            0 => Scripted::Reply(ScriptedReply::calls(&[(
                "delegate_background",
                r#"{"task":"slow"}"#,
            )])),
            1 => Scripted::Reply(ScriptedReply::calls(&[(
                "background_task_cancel",
                r#"{"taskId":"bg_1"}"#,
            )])),
            2 => Scripted::Reply(ScriptedReply::calls(&[(
                "background_task_cancel",
                r#"{"taskId":"bg_9"}"#,
            )])),
            _ => Scripted::Reply(ScriptedReply::answer("cancelled it")),
        }
    }))
    .await
    .unwrap();
    let provider: Arc<dyn Provider> = Arc::new(provider(&server, ProviderKind::Anthropic));
    let subagents = Subagents::new(SubagentConfig::new(Arc::clone(&provider), env.child_core()));
    let core = env.core(subagents.tools(&env.workspace));
    let session = core.open_session(None).unwrap();
    let mut options = RunOptions::new();
    options.subagents = Some(Arc::clone(&subagents));
    let outcome = run_task(
        &session,
        provider.as_ref(),
        "start and stop",
        options,
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.answer, "cancelled it");
    subagents.wait_background(session.id()).await;
    let tasks = subagents.background_tasks(session.id());
    assert_eq!(tasks[0].state, TaskState::Cancelled);
    assert_eq!(notices(&session), 0);
    let tools: Vec<_> = session
        .messages()
        .unwrap()
        .into_iter()
        .filter(|message| message.role == Role::Tool)
        .collect();
    assert_eq!(tools[1].tool_status(), Some(ToolStatus::Success));
    assert_eq!(tools[2].tool_status(), Some(ToolStatus::Error));
    assert!(
        tools[2].content.contains("no background task bg_9"),
        "{}",
        tools[2].content
    );
}
