//! Sub-agents: parallel read-only children bounded at four, background tasks and their notices.

use std::sync::Arc;
use std::time::Duration;

use clawsmith_agent::fixture::{RecordedRequest, Scripted, ScriptedReply, ScriptedServer};
use clawsmith_agent::subagent::{SubagentConfig, Subagents, TaskState};
use clawsmith_agent::{Provider, ProviderKind, RunOptions, StopReason, run_task};
use clawsmith_core::{AgentCore, CollectingSink};
use clawsmith_protocol::{Role, ToolStatus};

use crate::support::{Env, assert_sendable, env, provider};

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

/// A server answering the parent (the requests that show `delegate_task`) from `parent` in
/// order, and every child with `child`.
async fn parent_and_children(
    parent: Vec<Scripted>,
    child: impl Fn(&RecordedRequest) -> Scripted + Send + Sync + 'static,
) -> ScriptedServer {
    let parent = std::sync::Mutex::new(std::collections::VecDeque::from(parent));
    ScriptedServer::start(Arc::new(move |request: &RecordedRequest| {
        if !is_parent(request) {
            return child(request);
        }
        parent
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Scripted::Status {
                status: 500,
                body: "the parent's script ended".to_owned(),
                retry_after: None,
            })
    }))
    .await
    .unwrap()
}

/// The provider, the sub-agents (at most `max_concurrent` children) and a parent core with
/// their tools.
fn parent_core(
    env: &Env,
    server: &ScriptedServer,
    kind: ProviderKind,
    max_concurrent: usize,
) -> (Arc<dyn Provider>, Arc<Subagents>, AgentCore) {
    let provider: Arc<dyn Provider> = Arc::new(provider(server, kind));
    let mut config = SubagentConfig::new(Arc::clone(&provider), env.child_core());
    config.max_concurrent = max_concurrent;
    let subagents = Subagents::new(config);
    let core = env.core(subagents.tools(&env.workspace));
    (provider, subagents, core)
}

fn after(delay_ms: u64, script: Scripted) -> Scripted {
    Scripted::Delayed(Duration::from_millis(delay_ms), Box::new(script))
}

fn answer(text: &str) -> Scripted {
    Scripted::Reply(ScriptedReply::answer(text))
}

fn calls(calls: &[(&str, &str)]) -> Scripted {
    Scripted::Reply(ScriptedReply::calls(calls))
}

#[tokio::test]
async fn six_delegations_in_one_batch_run_at_most_four_at_once() {
    let env = env();
    let six: Vec<(String, String)> = (1..=6)
        .map(|n| {
            (
                "delegate_task".to_owned(),
                format!(r#"{{"task":"look at part {n}"}}"#),
            )
        })
        .collect();
    let server = parent_and_children(
        vec![
            Scripted::Reply(ScriptedReply {
                text: String::new(),
                calls: six,
            }),
            answer("all six reported"),
        ],
        |request| after(150, answer(&format!("answer to {}", child_task(request)))),
    )
    .await;
    let (provider, _subagents, core) = parent_core(&env, &server, ProviderKind::Openai, 4);
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
    let server = parent_and_children(
        vec![
            calls(&[
                ("delegate_task", r#"{"task":"one"}"#),
                ("delegate_task", r#"{"task":"two"}"#),
                ("delegate_task", r#"{"task":"three"}"#),
            ]),
            answer("done"),
        ],
        |_| after(100, answer("child done")),
    )
    .await;
    let (provider, _subagents, core) = parent_core(&env, &server, ProviderKind::Anthropic, 1);
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
    let server = parent_and_children(
        vec![
            calls(&[
                ("delegate_task", r#"{"task":"review","agent":"reviewer"}"#),
                ("delegate_task", r#"{"task":"review","agent":"nobody"}"#),
            ]),
            answer("ok"),
        ],
        |request| {
            let system = request.body["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            answer(&format!(
                "system had: {}",
                system.contains("You review code.")
            ))
        },
    )
    .await;
    let (provider, _subagents, core) = parent_core(&env, &server, ProviderKind::Openai, 4);
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
    let tools = tool_messages(&session);
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

/// An agent definition's `tools` narrow its child's table (to read-only tools it names) and
/// its `model` replaces the provider's in the child's requests; other children keep both.
#[tokio::test]
async fn an_agent_definitions_tools_and_model_reach_the_childs_requests() {
    let env = env();
    std::fs::create_dir_all(env.workspace.join(".clawsmith/agents")).unwrap();
    std::fs::write(
        env.workspace.join(".clawsmith/agents/finder.md"),
        "---\nname: finder\ntools: read_file, search_files, write_file, Grep\nmodel: small-model\n---\nFind.\n",
    )
    .unwrap();
    std::fs::write(
        env.workspace.join(".clawsmith/agents/writer.md"),
        "---\nname: writer\ntools: write_file, run_command\n---\nWrite.\n",
    )
    .unwrap();
    let server = parent_and_children(
        vec![
            calls(&[
                (
                    "delegate_task",
                    r#"{"task":"find with finder","agent":"finder"}"#,
                ),
                ("delegate_task", r#"{"task":"find plainly"}"#),
                ("delegate_task", r#"{"task":"write","agent":"writer"}"#),
            ]),
            answer("ok"),
        ],
        |request| {
            answer(&format!(
                "model {} tools {}",
                request.body["model"].as_str().unwrap_or(""),
                request.tool_names().join(",")
            ))
        },
    )
    .await;
    let provider: Arc<dyn Provider> = Arc::new(provider(&server, ProviderKind::Openai));
    let mut config = SubagentConfig::new(Arc::clone(&provider), env.child_core());
    let (workspace, store) = (env.workspace.clone(), Arc::clone(&env.store));
    config.child_config = Some(Arc::new(move || {
        clawsmith_core::CoreConfig::new(&workspace, store.clone())
    }));
    let subagents = Subagents::new(config);
    let core = env.core(subagents.tools(&env.workspace));
    let session = core.open_session(None).unwrap();
    run_task(
        &session,
        provider.as_ref(),
        "find",
        RunOptions::new(),
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    let children: Vec<RecordedRequest> = server
        .requests()
        .into_iter()
        .filter(|request| !is_parent(request))
        .collect();
    assert_eq!(
        children.len(),
        2,
        "the writer was refused before any request"
    );
    let finder = children
        .iter()
        .find(|request| child_task(request) == "find with finder")
        .unwrap();
    assert_eq!(finder.body["model"], "small-model");
    assert_eq!(finder.tool_names(), ["read_file", "search_files"]);
    let plain = children
        .iter()
        .find(|request| child_task(request) == "find plainly")
        .unwrap();
    assert_eq!(plain.body["model"], "scripted-model");
    assert!(plain.tool_names().len() > 2, "{:?}", plain.tool_names());
    assert!(!plain.tool_names().contains(&"write_file".to_owned()));
    let tools = tool_messages(&session);
    assert_eq!(tools[2].tool_status(), Some(ToolStatus::Error));
    assert_eq!(
        tools[2]
            .tool_result
            .as_ref()
            .unwrap()
            .code
            .as_ref()
            .unwrap()
            .as_str(),
        "invalid_arguments"
    );
    assert!(
        tools[2]
            .content
            .contains("none of them is a read-only tool here"),
        "{}",
        tools[2].content
    );
}

fn tool_messages(session: &clawsmith_core::SessionHandle) -> Vec<clawsmith_protocol::ModelMessage> {
    session
        .messages()
        .unwrap()
        .into_iter()
        .filter(|message| message.role == Role::Tool)
        .collect()
}

/// The stored `background_task.completed` events: (taskId, state, answer).
fn completion_events(session: &clawsmith_core::SessionHandle) -> Vec<(String, String, String)> {
    session
        .events()
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.payload {
            clawsmith_protocol::EventPayload::BackgroundTaskCompleted(done) => {
                Some((done.task_id, done.state, done.answer.unwrap_or_default()))
            }
            _ => None,
        })
        .collect()
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
    let server = parent_and_children(
        vec![
            calls(&[("delegate_background", r#"{"task":"scan"}"#)]),
            answer("started; waiting"),
            calls(&[("background_task_list", "{}")]),
            answer("the scan found 2 files"),
        ],
        |_| after(100, answer("scan found 2 files")),
    )
    .await;
    let (provider, subagents, core) = parent_core(&env, &server, ProviderKind::Openai, 4);
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
    // Stored once as an event too.
    let stored = completion_events(&session);
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0].0, "bg_1");
    assert_eq!(stored[0].1, "completed");
    assert!(stored[0].2.contains("scan found 2 files"), "{stored:?}");
    let tasks = subagents.background_tasks(session.id());
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].state, TaskState::Completed);
    assert!(tasks[0].ended_at_ms.is_some());
}

#[tokio::test]
async fn a_cancelled_background_task_never_notifies() {
    let env = env();
    let server = parent_and_children(
        vec![
            calls(&[("delegate_background", r#"{"task":"slow"}"#)]),
            calls(&[("background_task_cancel", r#"{"taskId":"bg_1"}"#)]),
            calls(&[("background_task_cancel", r#"{"taskId":"bg_9"}"#)]),
            answer("cancelled it"),
            answer("cancelled it"),
        ],
        // Held far longer than the test: only the cancel ends this child.
        |_| after(300_000, answer("too late")),
    )
    .await;
    let (provider, subagents, core) = parent_core(&env, &server, ProviderKind::Anthropic, 4);
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
    assert_eq!(completion_events(&session), []);
    let tools = tool_messages(&session);
    assert_eq!(tools[1].tool_status(), Some(ToolStatus::Success));
    assert_eq!(tools[2].tool_status(), Some(ToolStatus::Error));
    assert!(
        tools[2].content.contains("no background task bg_9"),
        "{}",
        tools[2].content
    );
}

#[test]
fn definitions_are_read_beneath_the_workspace_only() {
    let env = env();
    let outside = env._dir.path().join("outside");
    std::fs::create_dir_all(outside.join("agents")).unwrap();
    let definition = |name: &str| format!("---\nname: {name}\n---\nPrompt of {name}.\n");
    std::fs::write(outside.join("secret.md"), definition("leaked")).unwrap();
    std::fs::write(outside.join("agents/far.md"), definition("far")).unwrap();
    let agents = env.workspace.join(".clawsmith/agents");
    std::fs::create_dir_all(agents.join("nested")).unwrap();
    std::fs::write(agents.join("good.md"), definition("good")).unwrap();
    std::fs::write(agents.join("notes.txt"), definition("not-md")).unwrap();
    std::fs::write(agents.join("nested/deep.md"), definition("deep")).unwrap();
    // A definition that is a symlink out, and a definitions folder that is one.
    std::os::unix::fs::symlink(outside.join("secret.md"), agents.join("link.md")).unwrap();
    std::fs::create_dir_all(env.workspace.join(".claude")).unwrap();
    std::os::unix::fs::symlink(outside.join("agents"), env.workspace.join(".claude/agents"))
        .unwrap();
    let names: Vec<String> = clawsmith_agent::subagent::agent_definitions(&env.workspace)
        .into_iter()
        .map(|agent| agent.name)
        .collect();
    assert_eq!(names, ["good"]);
}
