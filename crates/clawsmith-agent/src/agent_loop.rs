//! The model loop over the core's turn API.

use std::sync::{Arc, Mutex, PoisonError};

use clawsmith_core::{EventSink, SessionHandle, Turn};
use clawsmith_protocol::{CancellationSignal, ModelMessage, Role};
use serde::Serialize;

use crate::error::AgentError;
use crate::provider::{Provider, ProviderRequest, TextSink, Usage};
use crate::subagent::Subagents;

/// Default bound on model requests of one run.
pub const DEFAULT_MAX_TURNS: u32 = 50;

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
    pending: Mutex<Vec<String>>,
}

impl Inbox {
    /// Queues a message.
    pub fn push(&self, text: String) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(text);
    }

    pub(crate) fn drain(&self) -> Vec<String> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }
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
    let mut turn = session.begin_turn(sink)?;
    // The caller's signal reaches the turn's own: a batch sees it as a turn cancellation.
    let forward = {
        let outer = options.cancellation.clone();
        let inner = turn.cancellation();
        tokio::spawn(async move {
            outer.cancelled().await;
            inner.cancel();
        })
    };
    let result = drive(session, &mut turn, provider, &options, sink).await;
    forward.abort();
    let turn_id = turn.id().to_owned();
    turn.finish(sink)?;
    let (answer, turns, stop_reason, usage) = result?;
    Ok(RunOutcome {
        session_id: session.id().to_owned(),
        turn_id,
        answer,
        turns,
        stop_reason,
        usage,
    })
}

async fn drive(
    session: &SessionHandle,
    turn: &mut Turn,
    provider: &dyn Provider,
    options: &RunOptions<'_>,
    sink: &dyn EventSink,
) -> Result<(String, u32, StopReason, Usage), AgentError> {
    let mut usage = Usage::default();
    let mut last_text = String::new();
    let mut requests = 0;
    let cancellation = &options.cancellation;
    while requests < options.max_turns.max(1) {
        if cancellation.is_cancelled() {
            return Ok((last_text, requests, StopReason::Cancelled, usage));
        }
        if let Some(subagents) = &options.subagents {
            for notice in subagents.inbox(session.id()).drain() {
                session.append_message(&ModelMessage::text(Role::User, notice))?;
            }
        }
        let evidence = turn.model_request(sink)?;
        let request = ProviderRequest {
            request_id: evidence.request_id,
            system: options.system.clone(),
            messages: session.messages()?,
            tools: evidence.tools,
        };
        requests += 1;
        let reply = tokio::select! {
            reply = provider.complete(&request, options.text_sink) => reply?,
            () = cancellation.cancelled() => {
                return Ok((last_text, requests, StopReason::Cancelled, usage));
            }
        };
        usage.add(reply.usage);
        if reply.tool_calls.is_empty() {
            session.append_message(&ModelMessage::text(Role::Assistant, reply.text.clone()))?;
            let waiting = options.subagents.as_ref().filter(|subagents| {
                subagents
                    .background_tasks(session.id())
                    .iter()
                    .any(|task| task.state == crate::subagent::TaskState::Running)
            });
            let Some(subagents) = waiting else {
                return Ok((reply.text, requests, StopReason::Answered, usage));
            };
            last_text = reply.text;
            tokio::select! {
                () = subagents.wait_background(session.id()) => continue,
                () = cancellation.cancelled() => {
                    return Ok((last_text, requests, StopReason::Cancelled, usage));
                }
            }
        }
        if !reply.text.is_empty() {
            last_text = reply.text;
        }
        // The core stores the assistant message with its calls, then one result per call.
        turn.run_batch(reply.tool_calls, sink).await?;
        if cancellation.is_cancelled() {
            return Ok((last_text, requests, StopReason::Cancelled, usage));
        }
    }
    Ok((last_text, requests, StopReason::MaxTurns, usage))
}
