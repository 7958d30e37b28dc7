//! Traces of the loop: an `invoke_agent` span per loop and per sub-agent, the turn
//! and its tool calls beneath it, and the span's `traceparent` on every provider request.

use std::sync::Arc;

use clawsmith_agent::fixture::{RecordedRequest, Scripted, ScriptedReply, ScriptedServer};
use clawsmith_agent::subagent::{SubagentConfig, Subagents};
use clawsmith_agent::{Provider, ProviderKind, RunOptions, run_task};
use clawsmith_core::{AgentCore, CollectingSink};
use clawsmith_trace::{AttributeValue, FinishedSpan, MemorySink, Tracer, semconv};

use crate::support::{env, provider};

fn attribute<'a>(span: &'a FinishedSpan, key: &str) -> Option<&'a AttributeValue> {
    span.attributes
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, value)| value)
}

fn text(value: &str) -> Option<AttributeValue> {
    Some(AttributeValue::String(value.to_owned().into()))
}

fn named<'a>(spans: &'a [FinishedSpan], name: &str) -> &'a FinishedSpan {
    spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
            panic!("no span {name}: {names:?}")
        })
}

/// `00-<trace>-<span>-01` of a span, as a child is given it.
fn traceparent(span: &FinishedSpan) -> String {
    span.context.traceparent().to_string()
}

#[tokio::test]
async fn a_loop_and_its_sub_agent_are_invoke_agent_spans_and_requests_carry_them() {
    let env = env();
    let sink = Arc::new(MemorySink::default());
    let tracer = Tracer::new(sink.clone());
    let parent_steps = std::sync::Mutex::new(vec![
        Scripted::Reply(ScriptedReply::answer("the child says hi")),
        Scripted::Reply(ScriptedReply::calls(&[(
            "delegate_task",
            r#"{"task":"say hi"}"#,
        )])),
    ]);
    let server = ScriptedServer::start(Arc::new(move |request: &RecordedRequest| {
        if request.tool_names().contains(&"delegate_task".to_owned()) {
            parent_steps.lock().unwrap().pop().unwrap()
        } else {
            Scripted::Reply(ScriptedReply::answer("hi"))
        }
    }))
    .await
    .unwrap();
    let provider: Arc<dyn Provider> = Arc::new(provider(&server, ProviderKind::Openai));
    let mut child = env.config();
    child.read_only_tools = true;
    child.tracer = tracer.clone();
    let subagents = Subagents::new(SubagentConfig::new(
        Arc::clone(&provider),
        AgentCore::new(child).unwrap(),
    ));
    let mut parent = env.config();
    parent.extension_tools = subagents.tools(&env.workspace);
    parent.tracer = tracer;
    let core = AgentCore::new(parent).unwrap();
    let session = core.open_session(None).unwrap();
    let outcome = run_task(
        &session,
        provider.as_ref(),
        "delegate",
        RunOptions::new(),
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.answer, "the child says hi");

    let spans = sink.spans();
    let run = named(&spans, "invoke_agent clawsmith");
    let call = named(&spans, "execute_tool delegate_task");
    let child = named(&spans, "invoke_agent delegate_task");
    let turns: Vec<&FinishedSpan> = spans
        .iter()
        .filter(|span| span.name == semconv::TURN_SPAN)
        .collect();
    assert_eq!(turns.len(), 2);
    // invoke_agent clawsmith → turn → execute_tool delegate_task → invoke_agent delegate_task
    // → the child's turn, all in one trace.
    assert_eq!(run.parent_span_id, None);
    let parent_turn = turns
        .iter()
        .find(|turn| turn.parent_span_id == Some(run.context.span_id))
        .expect("the run's turn is a child of its invoke_agent span");
    assert_eq!(call.parent_span_id, Some(parent_turn.context.span_id));
    assert_eq!(child.parent_span_id, Some(call.context.span_id));
    assert!(
        turns
            .iter()
            .any(|turn| turn.parent_span_id == Some(child.context.span_id)),
        "the child's turn is a child of the child's invoke_agent span"
    );
    for span in [run, call, child] {
        assert_eq!(span.context.trace_id, run.context.trace_id, "{}", span.name);
    }
    assert_eq!(
        attribute(run, semconv::GEN_AI_OPERATION_NAME).cloned(),
        text("invoke_agent")
    );
    assert_eq!(
        attribute(run, semconv::GEN_AI_AGENT_NAME).cloned(),
        text("clawsmith")
    );
    assert_eq!(
        attribute(run, semconv::CLAWSMITH_STOP_REASON).cloned(),
        text("answered")
    );
    assert_eq!(
        attribute(run, semconv::CLAWSMITH_REQUESTS).cloned(),
        Some(AttributeValue::Int(2))
    );
    assert_eq!(
        attribute(run, semconv::GEN_AI_USAGE_INPUT_TOKENS).cloned(),
        Some(AttributeValue::Int(
            i64::try_from(outcome.usage.input_tokens).unwrap()
        ))
    );
    assert_eq!(
        attribute(child, semconv::GEN_AI_CONVERSATION_ID).cloned(),
        text(
            &session
                .messages()
                .unwrap()
                .iter()
                .find_map(|message| {
                    let value: serde_json::Value = serde_json::from_str(&message.content).ok()?;
                    value["sessionId"].as_str().map(str::to_owned)
                })
                .unwrap()
        )
    );

    // Every request carries the traceparent of the loop that made it.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        let expected = if request.tool_names().contains(&"delegate_task".to_owned()) {
            traceparent(run)
        } else {
            traceparent(child)
        };
        assert_eq!(request.headers.get("traceparent"), Some(&expected));
    }
}

#[tokio::test]
async fn an_untraced_loop_sends_no_traceparent() {
    let env = env();
    let server = ScriptedServer::queue(vec![Scripted::Reply(ScriptedReply::answer("ok"))])
        .await
        .unwrap();
    let core = env.core(Vec::new());
    let session = core.open_session(None).unwrap();
    run_task(
        &session,
        &provider(&server, ProviderKind::Anthropic),
        "task",
        RunOptions::new(),
        &CollectingSink::new(),
    )
    .await
    .unwrap();
    let request = &server.requests()[0];
    assert!(!request.headers.contains_key("traceparent"));
    assert!(!request.headers.contains_key("tracestate"));
}
