//! The model loop over the core's turn API.

use std::sync::{Arc, Mutex, PoisonError};

use clawsmith_core::{BatchOptions, EventSink, SessionHandle, Turn, TurnOptions};
use clawsmith_protocol::{
    AgentStopped, BackgroundTaskCompleted, CancellationSignal, EventPayload, ModelMessage, Role,
    TokenUsage,
};
use clawsmith_trace::{SpanContext, semconv};
use serde::Serialize;

use crate::error::AgentError;
use crate::provider::{Provider, ProviderRequest, TextSink, Usage};
use crate::subagent::Subagents;

/// Default bound on model requests of one run.
pub const DEFAULT_MAX_TURNS: u32 = 50;

/// The `gen_ai.agent.name` of a run that names none.
pub const DEFAULT_AGENT_NAME: &str = "clawsmith";

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered without calling tools.
    Answered,
    /// `max_turns` model requests were made and the last one still called tools.
    MaxTurns,
    /// The run was cancelled (Ctrl-C, SIGTERM, a parent's cancel, a deadline).
    Cancelled,
}

impl StopReason {
    /// `answered`, `max_turns`, `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Answered => "answered",
            StopReason::MaxTurns => "max_turns",
            StopReason::Cancelled => "cancelled",
        }
    }
}

/// Messages waiting to be shown to the model at its next request (background-task notices).
#[derive(Debug, Default)]
pub struct Inbox {
    pending: Mutex<Vec<(String, Option<BackgroundTaskCompleted>)>>,
}

impl Inbox {
    /// Queues a message.
    pub fn push(&self, text: String) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((text, None));
    }

    /// Queues a background task's notice: the loop that picks it up stores `event` as a
    /// `background_task.completed` event, then `text` as the user message the model sees.
    pub fn push_notice(&self, text: String, event: BackgroundTaskCompleted) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((text, Some(event)));
    }

    pub(crate) fn drain(&self) -> Vec<(String, Option<BackgroundTaskCompleted>)> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// How far a run got: what `agent.stopped` and the outcome report, also after a failure.
#[derive(Debug, Default)]
struct Progress {
    requests: u32,
    usage: Usage,
    last_text: String,
}

/// How a run goes.
pub struct RunOptions<'a> {
    /// Most model requests.
    pub max_turns: u32,
    /// Instructions sent with every request (not stored).
    pub system: Option<String>,
    /// Fires to cancel: a request in flight is dropped, a running batch is cancelled through the
    /// turn (its calls close `cancelled`), and the turn is finished.
    pub cancellation: CancellationSignal,
    /// Receives the answer's text as it streams; `None` asks for whole answers.
    pub text_sink: Option<&'a dyn TextSink>,
    /// Overrides the provider's configured model for every request of this run (an agent
    /// definition's `model`).
    pub model: Option<String>,
    /// The agent's name on its `invoke_agent` span (`clawsmith` by default).
    pub agent_name: String,
    /// The parent of the run's `invoke_agent` span (a sub-agent: its tool call's span); `None`:
    /// the core's configured parent, else a new trace.
    pub trace_parent: Option<SpanContext>,
    /// The host's sub-agents: their notices for this session are appended as user messages
    /// before each request, and an answer given while background tasks still run waits for
    /// them, so their notices reach a next request.
    pub subagents: Option<Arc<Subagents>>,
}

impl RunOptions<'_> {
    /// [`DEFAULT_MAX_TURNS`], no system text, a fresh signal, no streaming, no inbox.
    pub fn new() -> RunOptions<'static> {
        RunOptions {
            max_turns: DEFAULT_MAX_TURNS,
            system: None,
            cancellation: CancellationSignal::new(),
            text_sink: None,
            model: None,
            agent_name: DEFAULT_AGENT_NAME.to_owned(),
            trace_parent: None,
            subagents: None,
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunOutcome {
    /// The session.
    pub session_id: String,
    /// The run's turn (one checkpoint: `clawsmith undo` takes the whole run back).
    pub turn_id: String,
    /// The final answer (for `max_turns` and `cancelled`: the last text the model wrote).
    pub answer: String,
    /// Model requests made.
    pub turns: u32,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// Tokens over all requests.
    pub usage: Usage,
}

/// Runs `task` in `session`: appends it as a user message, then asks the model, runs its calls
/// through the core and feeds the results back until it answers without calls, `max_turns` is
/// reached or the run is cancelled. All of it is one turn of the core.
///
/// A provider failure finishes the turn (the history stays sendable) and is returned as `Err`.
pub async fn run_task(
    session: &SessionHandle,
    provider: &dyn Provider,
    task: &str,
    options: RunOptions<'_>,
    sink: &dyn EventSink,
) -> Result<RunOutcome, AgentError> {
    session.append_message(&ModelMessage::text(Role::User, task))?;
    // One `invoke_agent` span per loop; the turn (and so every tool call) is its child, and its
    // context travels to the provider as `traceparent`.
    let mut span = session.tracer().start(
        options.trace_parent.as_ref().or(session.trace_parent()),
        || semconv::invoke_agent_span_name(&options.agent_name),
    );
    span.set_attribute(semconv::GEN_AI_OPERATION_NAME, semconv::INVOKE_AGENT);
    span.set_attribute(semconv::GEN_AI_AGENT_NAME, options.agent_name.clone());
    span.set_attribute(semconv::GEN_AI_CONVERSATION_ID, session.id().to_owned());
    let mut turn = session.begin_turn(
        sink,
        TurnOptions {
            parent: span.context(),
            ..TurnOptions::default()
        },
    )?;
    // The caller's signal reaches the turn's own: a batch sees it as a turn cancellation.
    let forward = {
        let outer = options.cancellation.clone();
        let inner = turn.cancellation();
        tokio::spawn(async move {
            outer.cancelled().await;
            inner.cancel();
        })
    };
    let mut progress = Progress::default();
    let trace = span.context().map(|context| {
        (
            context.traceparent().to_string(),
            context.trace_state.as_ref().map(ToString::to_string),
        )
    });
    let result = drive(
        session,
        &mut turn,
        provider,
        (&options, trace),
        &mut progress,
        sink,
    )
    .await;
    forward.abort();
    let turn_id = turn.id().to_owned();
    // Why the loop ended is stored in its turn, also when the provider failed.
    let stopped = AgentStopped {
        turn_id: Some(turn_id.clone()),
        stop_reason: match &result {
            Ok(reason) => reason.as_str().to_owned(),
            Err(_) => "error".to_owned(),
        },
        turns: progress.requests,
        usage: TokenUsage {
            input_tokens: progress.usage.input_tokens,
            output_tokens: progress.usage.output_tokens,
        },
        error: result.as_ref().err().map(ToString::to_string),
    };
    span.set_attribute(semconv::CLAWSMITH_STOP_REASON, stopped.stop_reason.clone());
    span.set_attribute(semconv::CLAWSMITH_REQUESTS, i64::from(progress.requests));
    span.set_attribute(
        semconv::GEN_AI_USAGE_INPUT_TOKENS,
        i64::try_from(progress.usage.input_tokens).unwrap_or(i64::MAX),
    );
    span.set_attribute(
        semconv::GEN_AI_USAGE_OUTPUT_TOKENS,
        i64::try_from(progress.usage.output_tokens).unwrap_or(i64::MAX),
    );
    if let Some(error) = &stopped.error {
        span.set_attribute(semconv::ERROR_TYPE, "provider");
        span.set_error(error.clone());
    }
    let recorded = turn.record_event(EventPayload::AgentStopped(stopped), sink);
    turn.finish(sink)?;
    span.end();
    let stop_reason = result?;
    recorded?;
    Ok(RunOutcome {
        session_id: session.id().to_owned(),
        turn_id,
        answer: progress.last_text,
        turns: progress.requests,
        stop_reason,
        usage: progress.usage,
    })
}

async fn drive(
    session: &SessionHandle,
    turn: &mut Turn,
    provider: &dyn Provider,
    (options, trace): (&RunOptions<'_>, Option<(String, Option<String>)>),
    progress: &mut Progress,
    sink: &dyn EventSink,
) -> Result<StopReason, AgentError> {
    let (traceparent, tracestate) = trace.unzip();
    let cancellation = &options.cancellation;
    while progress.requests < options.max_turns.max(1) {
        if cancellation.is_cancelled() {
            return Ok(StopReason::Cancelled);
        }
        if let Some(subagents) = &options.subagents {
            for (notice, event) in subagents.inbox(session.id()).drain() {
                if let Some(event) = event {
                    turn.record_event(EventPayload::BackgroundTaskCompleted(event), sink)?;
                }
                session.append_message(&ModelMessage::text(Role::User, notice))?;
            }
        }
        let evidence = turn.model_request(sink)?;
        let request = ProviderRequest {
            request_id: evidence.request_id,
            system: options.system.clone(),
            messages: session.messages()?,
            tools: evidence.tools,
            model: options.model.clone(),
            traceparent: traceparent.clone(),
            tracestate: tracestate.clone().flatten(),
        };
        progress.requests += 1;
        let reply = tokio::select! {
            reply = provider.complete(&request, options.text_sink) => reply?,
            () = cancellation.cancelled() => return Ok(StopReason::Cancelled),
        };
        progress.usage.add(reply.usage);
        if reply.tool_calls.is_empty() {
            session.append_message(&ModelMessage::text(Role::Assistant, reply.text.clone()))?;
            progress.last_text = reply.text;
            let waiting = options.subagents.as_ref().filter(|subagents| {
                subagents
                    .background_tasks(session.id())
                    .iter()
                    .any(|task| task.state == crate::subagent::TaskState::Running)
            });
            let Some(subagents) = waiting else {
                return Ok(StopReason::Answered);
            };
            tokio::select! {
                () = subagents.wait_background(session.id()) => continue,
                () = cancellation.cancelled() => return Ok(StopReason::Cancelled),
            }
        }
        if !reply.text.is_empty() {
            progress.last_text.clone_from(&reply.text);
        }
        // The core stores the assistant message with its text and calls, then one result per
        // call.
        turn.run_batch(
            reply.tool_calls,
            sink,
            BatchOptions {
                text: reply.text,
                ..BatchOptions::default()
            },
        )
        .await?;
        if cancellation.is_cancelled() {
            return Ok(StopReason::Cancelled);
        }
    }
    Ok(StopReason::MaxTurns)
}
