//! The per-call pipeline (A7) and batches (A6).
//!
//! Order per call: unknown tool → inactive deferred tool → JSON parse → schema validation →
//! duplicate check → hooks → permission (→ approver) → journal start (side-effecting calls) →
//! `tool.started` → authorized execute → normalize (A3) → artifact (A4) → redact and bound the
//! display (A5) → journal close → `tool.completed` → tool message. Every step that refuses ends
//! the call with its P6 code, and the call still gets its `tool.completed` and its message.
//!
//! Commits. A side-effecting call's start (the journal entry, `tool.started`, and the
//! batch's assistant message if still unstored) commits before it runs. A call that guards no
//! side effect (effective risk `read`, concurrency-safe: `read_file`, `search_files`, …) defers
//! its start to the store's next commit ([`clawsmith_store::DeferredRecords::defer_call_start`])
//! and runs; its close then writes start and close in one commit, after it ran. A read still
//! running after [`READ_RECORD_WINDOW`] gets its start committed while it runs (a long read, a
//! sub-agent, is visible and survives a crash as `interrupted`). A non-journaled call's close is
//! deferred too when a later call of the batch follows (whose start or close commits it) or
//! when the host finishes the turn right after ([`crate::BatchOptions::last`]), so a batch of
//! reads, and an MCP turn of one read, is one commit. Deferring never reorders: any commit of the
//! store writes every deferred record first, so a journal entry is never durable ahead of the
//! records before it, and a process killed mid-read leaves a history without that read at all.

// A refusal *is* a `ToolExecutionResult` (data for the model), in an `Err` or in a step's
// outcome enum; it is built once per call and moved, so boxing it would only add an allocation.
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use clawsmith_checkpoint::{DeferredEvent, JournalStart, PendingApproval};
use clawsmith_protocol::{
    BatchInfo, CancellationSignal, Capability, Display, DisplayKind, ErrorCode, Event,
    EventPayload, ModelMessage, PermissionDecision, Risk, ToolCall, ToolCompleted,
    ToolExecutionContext, ToolExecutionResult, ToolStarted, Verdict,
};
use clawsmith_security::{Explanation, HookInput, HookVerdict, authorize};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::approval::{ApprovalAnswer, ApprovalRequest, EventSink};
use crate::capture::execute_with_capture;
use crate::error::CoreError;
use crate::execute::execute_tool;
use crate::normalize::{ARTIFACT_THRESHOLD_BYTES, artifact_preview, truncate_without_artifact};
use crate::real_paths::resolved_paths;
use crate::redact::{redact_display, redact_json, redact_text};
use crate::shared::Shared;
use crate::table::{ToolEntry, canonical_json};
use clawsmith_protocol::redact::redact_owned;

/// What one batch call ended with: the call id and its result.
pub type CallResult = (String, ToolExecutionResult);

/// How long a read's start may wait, by default, for its close to be committed with it
/// ([`crate::CoreConfig::read_record_window`]). A read that takes longer gets its `tool.started`
/// committed (and sent to the sink) while it runs.
pub const READ_RECORD_WINDOW: Duration = Duration::from_millis(50);

/// Events whose write was deferred, in order: each goes to the sink once a commit stored it,
/// before any event stored after it.
#[derive(Debug, Default)]
pub(crate) struct Outbox(std::sync::Mutex<VecDeque<DeferredEvent>>);

impl Outbox {
    pub(crate) fn push(&self, events: impl IntoIterator<Item = DeferredEvent>) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(events);
    }

    /// Hands every stored event at the front to `sink`, in order.
    pub(crate) fn deliver(&self, sink: &dyn EventSink) {
        let mut queue = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while let Some(event) = queue.front().and_then(DeferredEvent::stored) {
            sink.event(event);
            queue.pop_front();
        }
    }

    /// Hands `event` (just stored) to `sink`, after every deferred event stored before it.
    pub(crate) fn deliver_with(&self, sink: &dyn EventSink, event: &Event) {
        self.deliver(sink);
        sink.event(event);
    }
}

/// Calls already seen in the turn (duplicate check).
#[derive(Debug, Default)]
pub(crate) struct DuplicateTracker {
    ids: HashSet<String>,
    calls: HashSet<(String, String)>,
}

/// The ids and sinks a batch runs with.
pub(crate) struct TurnContext<'a> {
    pub shared: &'a Arc<Shared>,
    pub session_id: &'a str,
    pub turn_id: &'a str,
    pub cancellation: &'a CancellationSignal,
    pub sink: &'a dyn EventSink,
    /// The batch's assistant message until a store write carries it: the first call's start
    /// commits it with its `tool.started` (and journal entry), so a batch costs one commit less.
    pub assistant: std::sync::Mutex<Option<ModelMessage>>,
    /// The batch's call spans.
    pub spans: crate::spans::CallSpans<'a>,
    /// The turn's deferred events, sent to `sink` once stored.
    pub outbox: &'a Outbox,
    /// Whether the host finishes the turn right after this batch ([`crate::BatchOptions::last`]):
    /// the last call's close may then be deferred to the finish's commit.
    pub last_batch: bool,
}

impl TurnContext<'_> {
    /// Takes the assistant message if no write has stored it yet.
    fn take_assistant(&self) -> Option<ModelMessage> {
        self.assistant
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Gives the message back after a write that would have carried it failed (nothing of
    /// that write was stored).
    fn restore_assistant(&self, message: Option<ModelMessage>) {
        if message.is_some() {
            *self
                .assistant
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = message;
        }
    }

    /// Stores the assistant message now if no write has carried it yet: before anything that
    /// names the batch's calls without starting one (an approval question, a refusal's result).
    fn store_assistant(&self) -> Result<(), CoreError> {
        if let Some(message) = self.take_assistant()
            && let Err(error) = self.shared.store.append_message(self.session_id, &message)
        {
            self.restore_assistant(Some(message));
            return Err(error.into());
        }
        Ok(())
    }
}

/// Stores an event with the session's next sequence, then hands it to the sink.
pub(crate) fn emit(
    shared: &Shared,
    session_id: &str,
    payload: EventPayload,
    sink: &dyn EventSink,
) -> Result<Event, CoreError> {
    let now = shared.store.now_ms();
    let event = shared.store.append_event(session_id, payload, now)?;
    sink.event(&event);
    Ok(event)
}

/// A call that passed the steps before hooks.
struct Prepared<'s> {
    entry: &'s ToolEntry,
    input: serde_json::Value,
}

/// Steps 1–5: unknown → inactive → JSON → schema → duplicate.
fn prepare<'s>(
    shared: &'s Shared,
    (session_id, turn_id): (&str, &str),
    call: &ToolCall,
    duplicates: &mut DuplicateTracker,
) -> Result<Prepared<'s>, ToolExecutionResult> {
    // Every call's id counts as seen, even when the call fails earlier.
    let fresh_id = duplicates.ids.insert(call.id.clone());
    let Some(entry) = shared.table.get(&call.name) else {
        let shown: Vec<String> = shared
            .table
            .shown(&shared.activations.active(session_id))
            .into_iter()
            .map(|tool| tool.name)
            .collect();
        return Err(ToolExecutionResult::failure(
            ErrorCode::UNKNOWN_TOOL,
            format!(
                "Unknown tool: {}. Available tools: {}",
                truncated_name(&call.name),
                shown.join(", ")
            ),
        ));
    };
    if entry.is_deferred() && !shared.activations.is_active(session_id, entry.name()) {
        let message = if shared.activations.is_pending(session_id, entry.name()) {
            format!(
                "Tool {} was just activated by search_tools; it can be called from your next request.",
                entry.name()
            )
        } else {
            format!(
                "Tool {} is not active yet. Call search_tools to find and activate it, then call it in your next request.",
                entry.name()
            )
        };
        return Err(ToolExecutionResult::failure(
            ErrorCode::INACTIVE_TOOL,
            message,
        ));
    }
    let raw = call.arguments.trim();
    let input: serde_json::Value = if raw.is_empty() {
        serde_json::Value::Object(serde_json::Map::new())
    } else {
        serde_json::from_str(raw).map_err(|error| {
            ToolExecutionResult::failure(
                ErrorCode::INVALID_JSON,
                format!(
                    "The arguments of {} are not valid JSON: {error}. Send one JSON object.",
                    entry.name()
                ),
            )
        })?
    };
    entry.validate(&input).map_err(|problems| {
        ToolExecutionResult::failure(
            ErrorCode::INVALID_ARGUMENTS,
            format!("Invalid arguments for {}: {problems}", entry.name()),
        )
    })?;
    if !fresh_id {
        return Err(ToolExecutionResult::failure(
            ErrorCode::DUPLICATE_CALL,
            format!(
                "Duplicate tool call id {} in this turn; the call was not run.",
                truncated_name(&call.id)
            ),
        ));
    }
    // A side-effecting call is journaled under (turn, id). The tracker above knows this
    // process's calls of the turn; the journal also knows a turn's calls made elsewhere. An id
    // reused in a *later* turn is fine: providers number calls `call_0`, `call_1` every turn.
    if entry.facts().side_effect() {
        let used = shared
            .store
            .journal_has_call(session_id, turn_id, &call.id)
            .map_err(|error| {
                ToolExecutionResult::tool_failed(format!(
                    "Could not check the session journal for call id {}: {error}",
                    truncated_name(&call.id)
                ))
            })?;
        if used {
            return Err(ToolExecutionResult::failure(
                ErrorCode::DUPLICATE_CALL,
                format!(
                    "Duplicate tool call id {} in this turn; the call was not run.",
                    truncated_name(&call.id)
                ),
            ));
        }
    }
    if !duplicates
        .calls
        .insert((entry.name().to_owned(), canonical_json(&input)))
    {
        return Err(ToolExecutionResult::failure(
            ErrorCode::DUPLICATE_CALL,
            format!(
                "Duplicate call: {} was already called with identical arguments in this turn; use that result.",
                entry.name()
            ),
        ));
    }
    Ok(Prepared { entry, input })
}

fn truncated_name(text: &str) -> String {
    clawsmith_protocol::truncate_to_boundary(text.to_owned(), 128)
}

/// What [`authorize_call`] decided for a call.
enum Authorization {
    /// The call may run: its permission decision, with its masked summary (which its
    /// `tool.started` carries too: computed once a call).
    Granted {
        decision: PermissionDecision,
        summary: String,
    },
    /// A hook, the policy, the approver or a cancellation refused it: the result the call ends
    /// with.
    Refused(ToolExecutionResult),
}

/// Steps 6–7: hooks, then the permission policy, then the approver for `ask`. `Err` only when
/// the store fails.
async fn authorize_call(
    context: &TurnContext<'_>,
    call: &ToolCall,
    prepared: &Prepared<'_>,
) -> Result<Authorization, CoreError> {
    let shared = context.shared;
    let entry = prepared.entry;
    let facts = entry.facts();
    let summary = redact_owned(entry.tool().summarize(&prepared.input));
    let mut hook_asks: Option<String> = None;
    if !shared.hooks.is_empty() {
        let hook_input = HookInput::new(
            facts,
            (context.session_id, context.turn_id, &call.id),
            prepared.input.clone(),
            summary.clone(),
        );
        for hook in &shared.hooks {
            let decision = hook.check(&hook_input).await;
            context
                .spans
                .event(&call.id, clawsmith_trace::semconv::EVENT_HOOK, || {
                    vec![
                        ("hook", hook.name().to_owned().into()),
                        (
                            "decision",
                            format!("{:?}", decision.decision).to_lowercase().into(),
                        ),
                    ]
                });
            let reason = decision
                .reason
                .as_deref()
                .map(redact_text)
                .unwrap_or_else(|| "no reason given".to_owned());
            match decision.decision {
                HookVerdict::Deny => {
                    return Ok(Authorization::Refused(ToolExecutionResult::failure(
                        ErrorCode::HOOK_DENIED,
                        format!(
                            "{} was refused by hook `{}`: {reason}",
                            entry.name(),
                            hook.name()
                        ),
                    )));
                }
                HookVerdict::Ask => {
                    hook_asks
                        .get_or_insert_with(|| format!("hook `{}` asks: {reason}", hook.name()));
                }
                HookVerdict::Allow => {}
            }
        }
    }
    let mut decision = decide(shared, prepared);
    context
        .spans
        .event(&call.id, clawsmith_trace::semconv::EVENT_PERMISSION, || {
            vec![(
                "verdict",
                format!("{:?}", decision.verdict).to_lowercase().into(),
            )]
        });
    if decision.verdict == Verdict::Allow
        && let Some(reason) = hook_asks
    {
        decision = PermissionDecision {
            verdict: Verdict::Ask,
            reason,
            rule: None,
        };
    }
    let answer = match decision.verdict {
        Verdict::Allow => return Ok(Authorization::Granted { decision, summary }),
        Verdict::Deny => {
            return Ok(Authorization::Refused(ToolExecutionResult::failure(
                ErrorCode::PERMISSION_DENIED,
                format!("{} is not allowed: {}", entry.name(), decision.reason),
            )));
        }
        Verdict::Ask => {
            let Some(approver) = &shared.approver else {
                return Ok(Authorization::Refused(
                    crate::approval::refused_without_approver(entry.name(), &decision.reason),
                ));
            };
            let request = ApprovalRequest {
                session_id: context.session_id.to_owned(),
                turn_id: context.turn_id.to_owned(),
                tool_call_id: call.id.clone(),
                tool_name: entry.name().to_owned(),
                summary: summary.clone(),
                risk: facts.effective_risk,
                capabilities: facts.capabilities.to_vec(),
                reason: decision.reason.clone(),
            };
            // The open question is stored while a person thinks, so a `session` undo or a
            // recovery can clear it (K7).
            let pending = PendingApproval {
                approval_id: clawsmith_protocol::id::new_id(
                    clawsmith_protocol::id::IdKind::Approval,
                ),
                turn_id: context.turn_id.to_owned(),
                call_id: call.id.clone(),
                request: serde_json::to_value(&request).unwrap_or(serde_json::Value::Null),
            };
            context.store_assistant()?;
            shared
                .store
                .add_pending_approval(context.session_id, &pending)?;
            let answer = tokio::select! {
                answer = approver.approve(&request) => Some(answer),
                () = context.cancellation.cancelled() => None,
            };
            shared
                .store
                .resolve_pending_approval(context.session_id, &pending.approval_id)?;
            answer
        }
    };
    Ok(match answer {
        None => Authorization::Refused(cancelled_before_start(call)),
        Some(ApprovalAnswer::Approve) => Authorization::Granted {
            decision: PermissionDecision {
                verdict: Verdict::Allow,
                reason: format!("approved ({})", decision.reason),
                rule: decision.rule,
            },
            summary,
        },
        Some(ApprovalAnswer::Decline(reason)) => {
            Authorization::Refused(ToolExecutionResult::failure(
                ErrorCode::PERMISSION_DENIED,
                format!("{} was declined: {}", entry.name(), redact_text(&reason)),
            ))
        }
    })
}

/// The policy's decision, holding the call's paths to where they really lead as well.
fn decide(shared: &Shared, prepared: &Prepared<'_>) -> PermissionDecision {
    explain(shared, prepared.entry, &prepared.input).decision
}

/// [`decide`] with what decided it (for [`crate::AgentCore::explain_call`]).
pub(crate) fn explain(
    shared: &Shared,
    entry: &ToolEntry,
    input: &serde_json::Value,
) -> Explanation {
    let real = resolved_paths(&shared.workspace, input);
    let subjects = shared
        .policy
        .subjects(input)
        .with_resolved_paths(real, shared.policy.workspace_root.as_deref());
    shared.policy.explain_subjects(entry.facts(), &subjects)
}

fn cancelled_before_start(call: &ToolCall) -> ToolExecutionResult {
    ToolExecutionResult::failure(
        ErrorCode::CANCELLED,
        format!(
            "{} was cancelled before it ran.",
            truncated_name(&call.name)
        ),
    )
}

/// How a call was started.
#[derive(Debug, Clone, Copy)]
struct Started {
    /// It has a journal entry (a side-effecting call).
    journaled: bool,
    /// Its start waits for a later commit (a call that guards no side effect).
    deferred: bool,
}

/// What [`start_call`] did with a call.
enum CallStart {
    /// Started: run it.
    Started(Started),
    /// Its journal entry could not be written, so it is not run: the result it ends with.
    NotJournaled(ToolExecutionResult),
}

/// Steps 8–9: journal start for side-effecting calls (durable before anything runs), then
/// `tool.started` (deferred for a call that guards no side effect: see the module docs).
/// `summary`: the call's masked summary when [`authorize_call`] made it already. `Err` when the
/// store fails for a call that has no journal entry to lose.
fn start_call(
    context: &TurnContext<'_>,
    call: &ToolCall,
    prepared: &Prepared<'_>,
    batch: BatchInfo,
    summary: Option<String>,
) -> Result<CallStart, CoreError> {
    let entry = prepared.entry;
    let facts = entry.facts();
    let side_effect = facts.side_effect();
    // A call that hands work to a sub-agent is not deferred: the child's session is written
    // while it runs, and must never exist without its parent's call on record.
    let deferred = !side_effect
        && entry.tool().concurrency_safe()
        && !facts.capabilities.contains(Capability::AgentDelegate);
    let journal = side_effect.then(|| JournalStart {
        session_id: context.session_id.to_owned(),
        turn_id: context.turn_id.to_owned(),
        call_id: call.id.clone(),
        tool_name: entry.name().to_owned(),
        args_json: prepared.input.to_string(),
    });
    let (trace_id, span_id) = context.spans.ids(&call.id);
    let started = EventPayload::ToolStarted(ToolStarted {
        tool_call_id: call.id.clone(),
        turn_id: context.turn_id.to_owned(),
        tool_name: entry.name().to_owned(),
        risk: facts.effective_risk,
        capabilities: facts.capabilities.to_vec(),
        side_effect,
        summary: Some(
            summary.unwrap_or_else(|| redact_owned(entry.tool().summarize(&prepared.input))),
        ),
        tool_schema: context
            .shared
            .record_tool_schemas
            .then(|| redact_json(entry.input_schema())),
        batch: Some(batch),
        trace_id,
        span_id,
    });
    // The batch's assistant message (if still unstored), the journal entry and `tool.started`
    // commit together, before anything runs.
    let assistant = context.take_assistant();
    let store = &context.shared.store;
    if deferred {
        return match store.defer_call_start(
            context.session_id,
            assistant.as_ref(),
            started,
            store.now_ms(),
        ) {
            Ok(event) => {
                context.outbox.push([event]);
                Ok(CallStart::Started(Started {
                    journaled: false,
                    deferred: true,
                }))
            }
            Err(error) => {
                context.restore_assistant(assistant);
                Err(error.into())
            }
        };
    }
    match store.start_call(
        context.session_id,
        assistant.as_ref(),
        journal.as_ref(),
        started,
        store.now_ms(),
    ) {
        Ok(event) => {
            context.outbox.deliver_with(context.sink, &event);
            Ok(CallStart::Started(Started {
                journaled: side_effect,
                deferred: false,
            }))
        }
        Err(error) => {
            context.restore_assistant(assistant);
            if side_effect {
                Ok(CallStart::NotJournaled(ToolExecutionResult::tool_failed(
                    format!(
                        "{} was not run: the call could not be journaled ({error}).",
                        entry.name()
                    ),
                )))
            } else {
                Err(error.into())
            }
        }
    }
}

/// Awaits `work`; when `deferred` records wait and it runs past the core's
/// [`read_record_window`](crate::CoreConfig::read_record_window), commits
/// them meanwhile (and sends their events), so a long read is recorded as started.
async fn within_record_window<T>(
    context: &TurnContext<'_>,
    deferred: bool,
    work: impl Future<Output = T>,
) -> T {
    if !deferred {
        return work.await;
    }
    tokio::pin!(work);
    tokio::select! {
        biased;
        done = &mut work => return done,
        () = tokio::time::sleep(context.shared.read_record_window) => {}
    }
    match context.shared.store.flush_deferred() {
        Ok(()) => context.outbox.deliver(context.sink),
        // Not fatal for a read: the records stay deferred and its close writes them.
        Err(error) => tracing::warn!(%error, "a running read's start could not be committed"),
    }
    work.await
}

/// Steps 12–16: artifact, redaction, journal close, `tool.completed`, tool message. With
/// `defer` (a call without a journal entry that a later commit follows), its records wait for
/// that commit.
fn close_call(
    context: &TurnContext<'_>,
    call: &ToolCall,
    journaled: bool,
    defer: bool,
    mut result: ToolExecutionResult,
) -> Result<ToolExecutionResult, CoreError> {
    let shared = context.shared;
    let defer = defer && !journaled;
    // A batch whose calls were all refused before starting stores its message here.
    if defer {
        if let Some(message) = context.take_assistant()
            && let Err(error) = shared.store.defer_message(context.session_id, &message)
        {
            context.restore_assistant(Some(message));
            return Err(error.into());
        }
    } else {
        context.store_assistant()?;
    }
    if result.content.len() > ARTIFACT_THRESHOLD_BYTES {
        let stored = if shared.artifacts_enabled {
            shared
                .store
                .put_artifact(context.session_id, result.content.as_bytes())
                .ok()
        } else {
            None
        };
        match stored {
            Some(artifact) => {
                result.content = artifact_preview(&result.content, &artifact);
                // Display data never copies the artifact body (A4).
                let display = match result.metadata.display.take() {
                    Some(mut display) => {
                        display.body = None;
                        display
                    }
                    None => Display::new(DisplayKind::Artifact)
                        .with_title(format!("{} output stored as an artifact", call.name)),
                };
                result.metadata.display = Some(
                    display
                        .with_field("artifact", &artifact.artifact_id)
                        .with_field("bytes", artifact.bytes),
                );
                result.metadata.artifact = Some(artifact);
            }
            None => result.content = truncate_without_artifact(&result.content),
        }
    }
    result.metadata.display = result.metadata.display.take().map(redact_display);
    // Journal close, `tool.completed` and the tool message commit together (one fsync when the
    // store syncs, and never a completion without its message).
    let (trace_id, span_id) = context.spans.ids(&call.id);
    context.spans.close(&call.id, &result);
    let status = result.status();
    let summary = result.summary();
    if defer {
        let mut completed =
            ToolCompleted::new(call.id.clone(), context.turn_id, call.name.clone(), &result);
        (completed.trace_id, completed.span_id) = (trace_id, span_id);
        // The message borrows the result's text while it is stored, and gives it back (no
        // copy).
        let message = ModelMessage::tool_result(
            call.id.clone(),
            call.name.clone(),
            std::mem::take(&mut result.content),
            summary,
        );
        let stored = shared
            .store
            .defer_call_close(
                context.session_id,
                EventPayload::ToolCompleted(completed),
                shared.store.now_ms(),
                &message,
            )
            .map(|event| context.outbox.push([event]));
        result.content = message.content;
        stored?;
        return Ok(result);
    }
    // The event takes the result's text and metadata (the tool message is made from it), and
    // gives them back once stored and sent: no copy of either.
    let mut completed = ToolCompleted::taking(
        call.id.clone(),
        context.turn_id,
        call.name.clone(),
        &mut result,
    );
    (completed.trace_id, completed.span_id) = (trace_id, span_id);
    let mut event = shared.store.close_call_with_message(
        context.session_id,
        journaled.then_some((call.id.as_str(), status)),
        completed,
        shared.store.now_ms(),
        summary,
    )?;
    context.outbox.deliver_with(context.sink, &event);
    if let EventPayload::ToolCompleted(completed) = &mut event.payload {
        completed.give_back(&mut result);
    }
    Ok(result)
}

fn context_for(
    context: &TurnContext<'_>,
    call: &ToolCall,
    decision: &PermissionDecision,
) -> Option<ToolExecutionContext> {
    let authorization = authorize(decision)?;
    Some(
        ToolExecutionContext::new(context.session_id, context.turn_id, call.id.clone())
            .with_authorization(authorization)
            .with_trace(context.spans.headers(&call.id)),
    )
}

fn not_authorized(call: &ToolCall) -> ToolExecutionResult {
    ToolExecutionResult::failure(
        ErrorCode::PERMISSION_DENIED,
        format!("{} has no authorization to run.", call.name),
    )
}

/// Runs one batch (the calls of one assistant message): the assistant message first, then one
/// result per call, in call order.
pub(crate) async fn run_batch(
    context: &TurnContext<'_>,
    text: String,
    calls: Vec<ToolCall>,
    batch_index: u32,
    duplicates: &mut DuplicateTracker,
) -> Result<Vec<CallResult>, CoreError> {
    let shared = context.shared;
    if calls.is_empty() {
        return Ok(Vec::new());
    }
    // Stored by the first call's start (or by the first result when no call starts).
    *context
        .assistant
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) =
        Some(ModelMessage::assistant_with_calls(text, calls.clone()));
    let plans: Vec<(ToolCall, Result<Prepared<'_>, ToolExecutionResult>)> = calls
        .into_iter()
        .map(|call| {
            let plan = prepare(
                shared,
                (context.session_id, context.turn_id),
                &call,
                duplicates,
            );
            context
                .spans
                .start(&call, plan.as_ref().map(|prepared| prepared.entry));
            (call, plan)
        })
        .collect();
    let size = u32::try_from(plans.len()).unwrap_or(u32::MAX);
    match parallel_decisions(shared, &plans) {
        Some(decisions) => run_parallel(context, plans, decisions, batch_index, size).await,
        None => run_serial(context, plans, batch_index, size).await,
    }
}

/// The A6 conditions: at least two calls; every call passed the steps before hooks (known,
/// active, valid JSON, valid arguments, not a duplicate); every tool concurrency-safe with
/// effective risk `read`; no hooks configured; and the policy allows every call
/// outright. Returns the decisions when the batch may run in parallel.
fn parallel_decisions(
    shared: &Shared,
    plans: &[(ToolCall, Result<Prepared<'_>, ToolExecutionResult>)],
) -> Option<Vec<PermissionDecision>> {
    if plans.len() < 2 || !shared.parallel_allowed() {
        return None;
    }
    plans
        .iter()
        .map(|(_, plan)| {
            let prepared = plan.as_ref().ok()?;
            let entry = prepared.entry;
            if !entry.tool().concurrency_safe() || entry.facts().effective_risk != Risk::Read {
                return None;
            }
            let decision = decide(shared, prepared);
            (decision.verdict == Verdict::Allow).then_some(decision)
        })
        .collect()
}

async fn run_serial(
    context: &TurnContext<'_>,
    plans: Vec<(ToolCall, Result<Prepared<'_>, ToolExecutionResult>)>,
    batch_index: u32,
    size: u32,
) -> Result<Vec<CallResult>, CoreError> {
    let batch = BatchInfo {
        index: batch_index,
        size,
        parallel: false,
    };
    let mut results = Vec::with_capacity(plans.len());
    let count = plans.len();
    for (index, (call, plan)) in plans.into_iter().enumerate() {
        // A later call's commit (or the turn's finish) writes this one's close.
        let defer_close = index + 1 < count || context.last_batch;
        let ran = run_serial_call(context, &call, plan, batch).await?;
        let result = close_call(context, &call, ran.journaled, defer_close, ran.result)?;
        results.push((call.id, result));
    }
    Ok(results)
}

/// How a call of a serial batch ended, before its close.
struct SerialCall {
    /// It has a journal entry to close.
    journaled: bool,
    result: ToolExecutionResult,
}

impl SerialCall {
    /// A call that ended before it started: nothing journaled.
    fn not_run(result: ToolExecutionResult) -> SerialCall {
        SerialCall {
            journaled: false,
            result,
        }
    }
}

/// Steps 6–11 of one call of a serial batch: authorize, start and run it, unless a step
/// refuses it first (or the turn was cancelled). `Err` only when the store fails.
async fn run_serial_call(
    context: &TurnContext<'_>,
    call: &ToolCall,
    plan: Result<Prepared<'_>, ToolExecutionResult>,
    batch: BatchInfo,
) -> Result<SerialCall, CoreError> {
    let prepared = match plan {
        Ok(prepared) => prepared,
        Err(failure) => return Ok(SerialCall::not_run(failure)),
    };
    if context.cancellation.is_cancelled() {
        return Ok(SerialCall::not_run(cancelled_before_start(call)));
    }
    let (decision, summary) = match authorize_call(context, call, &prepared).await? {
        Authorization::Granted { decision, summary } => (decision, summary),
        Authorization::Refused(refusal) => return Ok(SerialCall::not_run(refusal)),
    };
    if context.cancellation.is_cancelled() {
        return Ok(SerialCall::not_run(cancelled_before_start(call)));
    }
    let Some(tool_context) = context_for(context, call, &decision) else {
        return Ok(SerialCall::not_run(not_authorized(call)));
    };
    let started = match start_call(context, call, &prepared, batch, Some(summary))? {
        CallStart::Started(started) => started,
        CallStart::NotJournaled(failure) => return Ok(SerialCall::not_run(failure)),
    };
    let running = execute_with_capture(
        context.shared,
        prepared.entry,
        prepared.input,
        tool_context,
        context.cancellation,
    );
    let result = within_record_window(context, started.deferred, running).await;
    Ok(SerialCall {
        journaled: started.journaled,
        result,
    })
}

async fn run_parallel(
    context: &TurnContext<'_>,
    plans: Vec<(ToolCall, Result<Prepared<'_>, ToolExecutionResult>)>,
    decisions: Vec<PermissionDecision>,
    batch_index: u32,
    size: u32,
) -> Result<Vec<CallResult>, CoreError> {
    let batch = BatchInfo {
        index: batch_index,
        size,
        parallel: true,
    };
    let semaphore = Arc::new(Semaphore::new(context.shared.max_parallel));
    enum Slot {
        Done(ToolExecutionResult),
        Running(JoinHandle<ToolExecutionResult>),
    }
    let mut slots: Vec<(ToolCall, Slot)> = Vec::with_capacity(plans.len());
    let mut any_deferred = false;
    for ((call, plan), decision) in plans.into_iter().zip(decisions) {
        let prepared = match plan {
            Ok(prepared) => prepared,
            Err(failure) => {
                slots.push((call, Slot::Done(failure)));
                continue;
            }
        };
        context
            .spans
            .event(&call.id, clawsmith_trace::semconv::EVENT_PERMISSION, || {
                vec![(
                    "verdict",
                    format!("{:?}", decision.verdict).to_lowercase().into(),
                )]
            });
        if context.cancellation.is_cancelled() {
            let result = cancelled_before_start(&call);
            slots.push((call, Slot::Done(result)));
            continue;
        }
        let Some(tool_context) = context_for(context, &call, &decision) else {
            let result = not_authorized(&call);
            slots.push((call, Slot::Done(result)));
            continue;
        };
        match start_call(context, &call, &prepared, batch, None)? {
            CallStart::NotJournaled(failure) => {
                slots.push((call, Slot::Done(failure)));
                continue;
            }
            CallStart::Started(started) => any_deferred |= started.deferred,
        }
        // Each call runs in its own task, bounded by the semaphore. The task needs owned data:
        // the shared state is reached again through the table by name.
        let shared = Arc::clone(context.shared);
        let semaphore = Arc::clone(&semaphore);
        let cancellation = context.cancellation.clone();
        let name = prepared.entry.name().to_owned();
        let input = prepared.input;
        let handle = tokio::spawn(async move {
            let _permit = semaphore.acquire_owned().await;
            match shared.table.get(&name) {
                Some(entry) => {
                    execute_tool(shared.execution, entry, input, tool_context, &cancellation).await
                }
                None => ToolExecutionResult::tool_failed(format!("{name} vanished from the table")),
            }
        });
        slots.push((call, Slot::Running(handle)));
    }
    let finished = within_record_window(context, any_deferred, async {
        let mut finished = Vec::with_capacity(slots.len());
        for (call, slot) in slots {
            let result = match slot {
                Slot::Done(result) => result,
                Slot::Running(handle) => match handle.await {
                    Ok(result) => result,
                    Err(error) => ToolExecutionResult::tool_failed(format!(
                        "{} failed in the core: {error}",
                        call.name
                    )),
                },
            };
            finished.push((call, result));
        }
        finished
    })
    .await;
    let mut results = Vec::with_capacity(finished.len());
    let count = finished.len();
    for (index, (call, result)) in finished.into_iter().enumerate() {
        // Parallel calls are reads: nothing was journaled, and the batch is one commit.
        let defer_close = index + 1 < count || context.last_batch;
        let result = close_call(context, &call, false, defer_close, result)?;
        results.push((call.id, result));
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    //! The at-rest masking guarantee through every way a call's records reach the store (the
    //! store masks a text once, and not again when the core's masked display body shows
    //! it had nothing to mask): a secret in a tool's result, display or arguments is found in no
    //! byte of the database or its log.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::path::Path;
    use std::sync::Arc;

    use clawsmith_checkpoint::Store;
    use clawsmith_protocol::{
        Capability, CapabilityDeclaration, Display, DisplayKind, Risk, Role, Tool,
        ToolExecutionContext, ToolExecutionResult, ToolFuture, ToolOutput, ToolStatus,
    };
    use clawsmith_security::{PermissionMode, PermissionPolicy};

    use crate::{AgentCore, BatchOptions, CoreConfig, ExtensionTool, NullSink, TurnOptions};
    use clawsmith_protocol::ToolCall;

    /// Pieces of secrets that must reach no stored byte.
    const SECRETS: &[&str] = &[
        "hunter2-in-a-file",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "pa55word-in-a-url",
        "MIIBsecretKeyMaterial",
        "xoxb-tool-result-token-123456",
        "sk-argumentsecretabcdefghijkl",
        "display-title-hunter3",
        "field-value-hunter4",
    ];

    /// A side-effecting tool (its call is journaled and committed before it runs) whose result,
    /// display title and a field hold secrets.
    struct Leaky;

    impl Tool for Leaky {
        fn name(&self) -> &str {
            "leaky_write"
        }
        fn description(&self) -> &str {
            "answers with secrets"
        }
        fn risk(&self) -> Risk {
            Risk::WorkspaceWrite
        }
        fn capabilities(&self) -> CapabilityDeclaration {
            CapabilityDeclaration::Declared(vec![Capability::FilesystemWrite])
        }
        fn concurrency_safe(&self) -> bool {
            false
        }
        fn input_schema(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        fn summarize(&self, input: &serde_json::Value) -> String {
            format!("leaky_write {input}")
        }
        fn execute<'a>(
            &'a self,
            _input: serde_json::Value,
            _context: ToolExecutionContext,
        ) -> ToolFuture<'a> {
            Box::pin(async {
                let text = "deployed; SLACK_BOT=xoxb-tool-result-token-123456 done";
                let display = Display::new(DisplayKind::Text)
                    .with_title("token=display-title-hunter3")
                    .with_body(text)
                    .with_field("api token", "field-value-hunter4");
                ToolOutput::Result(ToolExecutionResult::success(text).with_display(display))
            })
        }
    }

    /// A read of `path`; `limit` keeps a turn's reads of one file distinct (the duplicate
    /// check refuses a call repeated with the same arguments).
    fn read(id: &str, path: &str, limit: u32) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: serde_json::json!({ "path": path, "limit": limit }).to_string(),
        }
    }

    /// Every file of the store (database, log, anything beside them), as bytes.
    fn stored_bytes(dir: &Path) -> Vec<u8> {
        let mut bytes = Vec::new();
        for entry in walk(dir) {
            bytes.extend(std::fs::read(entry).unwrap());
        }
        bytes
    }

    fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files.extend(walk(&path));
            } else {
                files.push(path);
            }
        }
        files
    }

    fn contains(haystack: &[u8], needle: &str) -> bool {
        haystack
            .windows(needle.len())
            .any(|window| window == needle.as_bytes())
    }

    #[test]
    fn a_secret_in_a_result_reaches_no_stored_byte_by_any_path() {
        let temp = tempfile::tempdir().unwrap();
        let workspace = temp.path().join("workspace");
        let state = temp.path().join("state");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(
            workspace.join("secrets.env"),
            "DB_PASSWORD=hunter2-in-a-file\n\
             export GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789\n\
             git clone https://bob:pa55word-in-a-url@example.com/x\n\
             -----BEGIN RSA PRIVATE KEY-----\nMIIBsecretKeyMaterial\n-----END RSA PRIVATE KEY-----\n",
        )
        .unwrap();
        // A clean file: its text is stored through the path that does not mask it again.
        std::fs::write(workspace.join("clean.rs"), "fn main() {}\n".repeat(40)).unwrap();
        let store = Arc::new(Store::open(state.join("state.db")).unwrap());
        let mut config = CoreConfig::new(&workspace, store.clone());
        config.policy = PermissionPolicy::new(PermissionMode::Full);
        // The undo capture keeps the workspace's files as they are (checkpoint contents are the
        // one thing stored unmasked: undo gives back exact bytes), so it is off here.
        config.capture_commands = false;
        config.extension_tools.push(ExtensionTool {
            source: "test".into(),
            tool: Arc::new(Leaky),
            deferred: false,
        });
        let core = AgentCore::new(config).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let session = core.open_session(None).unwrap();
        let leaky = |id: &str| ToolCall {
            id: id.into(),
            name: "leaky_write".into(),
            arguments: serde_json::json!({
                "note": "key sk-argumentsecretabcdefghijkl",
                "password": "hunter2-in-a-file",
                "call": id,
            })
            .to_string(),
        };
        runtime.block_on(async {
            // A read alone in its batch (start deferred, start and close in one commit), a
            // journaled call, a parallel batch of reads, and a last batch whose close waits for
            // the turn's finish (deferred records).
            let mut turn = session
                .begin_turn(&NullSink, TurnOptions::default())
                .unwrap();
            let results = turn
                .run_batch(
                    vec![read("r1", "secrets.env", 100)],
                    &NullSink,
                    BatchOptions::default(),
                )
                .await
                .unwrap();
            assert_eq!(results[0].1.status(), ToolStatus::Success);
            let results = turn
                .run_batch(vec![leaky("w1")], &NullSink, BatchOptions::default())
                .await
                .unwrap();
            assert_eq!(results[0].1.status(), ToolStatus::Success);
            let results = turn
                .run_batch(
                    vec![read("r2", "secrets.env", 101), read("r3", "clean.rs", 100)],
                    &NullSink,
                    BatchOptions::default(),
                )
                .await
                .unwrap();
            assert!(
                results
                    .iter()
                    .all(|(_, r)| r.status() == ToolStatus::Success)
            );
            turn.run_batch(
                vec![read("r4", "secrets.env", 102), leaky("w2")],
                &NullSink,
                BatchOptions {
                    last: true,
                    ..BatchOptions::default()
                },
            )
            .await
            .unwrap();
            turn.finish(&NullSink).unwrap();
        });
        // The records are there, masked rather than dropped.
        let messages = store.messages(session.id()).unwrap();
        let tool_texts: Vec<&str> = messages
            .iter()
            .filter(|message| message.role == Role::Tool)
            .map(|message| message.content.as_str())
            .collect();
        assert_eq!(tool_texts.len(), 6);
        assert!(
            tool_texts
                .iter()
                .any(|text| text.contains("DB_PASSWORD=[REDACTED]"))
        );
        assert!(
            tool_texts
                .iter()
                .any(|text| text.contains("SLACK_BOT=[REDACTED]"))
        );
        assert!(
            tool_texts
                .iter()
                .any(|text| *text == "fn main() {}\n".repeat(40))
        );
        assert_eq!(store.journal(session.id()).unwrap().len(), 2);
        let events = store.events(session.id()).unwrap();
        assert!(events.len() >= 12, "{} events", events.len());
        drop(core);
        drop(session);
        drop(store);
        let bytes = stored_bytes(&state);
        assert!(contains(&bytes, "DB_PASSWORD=[REDACTED]"));
        for secret in SECRETS {
            assert!(!contains(&bytes, secret), "{secret} was stored");
        }
    }
}
