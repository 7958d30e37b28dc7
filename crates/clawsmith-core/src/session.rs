//! Sessions and turns: opening (with recovery, A8), batches, model requests (A9 evidence) and
//! turn checkpoints (K1).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clawsmith_protocol::id::{IdKind, new_id};
use clawsmith_protocol::{
    CancellationSignal, ErrorCode, Event, EventPayload, ModelMessage, ModelRequest,
    RequestComposition, Role, ToolCall, ToolCompleted, ToolExecutionResult, ToolStatus,
    TurnCompleted, TurnStarted,
};
use clawsmith_store::{CheckpointState, Lease, TurnManifest};

use crate::approval::{EventSink, NullSink};
use crate::error::CoreError;
use crate::pipeline::{CallResult, DuplicateTracker, Outbox, TurnContext, emit, run_batch};
use crate::shared::Shared;
use crate::table::ShownTool;

/// What recovery did when the session was opened (A8).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Calls that had started without a trusted completion: closed `unknown` / `interrupted`.
    pub interrupted: Vec<String>,
    /// Calls of an assistant message that never started: closed `cancelled`.
    pub never_ran: Vec<String>,
    /// Turns whose checkpoint was still open and was finished.
    pub finished_turns: Vec<String>,
    /// Approval requests left unanswered by the previous process, now dropped.
    pub dropped_approvals: Vec<String>,
    /// Undos of this session that a crash interrupted mid-restore, rolled forward (turn ids).
    pub finished_restores: Vec<String>,
    /// Temp files that an interrupted write left beside its target, removed (relative paths).
    pub swept_temp_files: Vec<String>,
    /// Paths an interrupted command changed, recorded as its changes (undoable).
    pub command_changes: Vec<String>,
}

impl RecoveryReport {
    /// Whether recovery changed anything.
    pub fn is_empty(&self) -> bool {
        self.interrupted.is_empty()
            && self.never_ran.is_empty()
            && self.finished_turns.is_empty()
            && self.dropped_approvals.is_empty()
            && self.finished_restores.is_empty()
            && self.swept_temp_files.is_empty()
            && self.command_changes.is_empty()
    }
}

/// What one model request showed (A9 evidence), also stored as a `model.request` event.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestEvidence {
    /// Identifies the request.
    pub request_id: String,
    /// The turn, when the request belongs to one.
    pub turn_id: Option<String>,
    /// The tools shown, in order, with their schemas: what to send to the provider.
    pub tools: Vec<ShownTool>,
    /// Their names.
    pub tool_names: Vec<String>,
    /// SHA-256 of the canonical JSON of `tools`.
    pub tool_schema_sha256: String,
    /// Deferred tools shown because they were activated.
    pub activated_tools: Vec<String>,
}

/// What [`SessionHandle::run_turn`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// One result per call, in call order: (toolCallId, result).
    pub results: Vec<CallResult>,
    /// The turn's checkpoint manifest (paths and stats of changed files).
    pub manifest: TurnManifest,
}

/// How [`SessionHandle::begin_turn`] begins a turn. The default: the turn's span is a child
/// of [`CoreConfig::trace_parent`], and no model request is stored with its start.
///
/// [`CoreConfig::trace_parent`]: crate::CoreConfig::trace_parent
#[derive(Debug, Clone, Copy, Default)]
pub struct TurnOptions<'a> {
    /// The parent of the turn's span instead of [`CoreConfig::trace_parent`]: a caller's
    /// `traceparent` (an MCP request's `_meta`), or a span of the host's own around its turns
    /// (clawsmith-agent's `invoke_agent`, started with [`SessionHandle::tracer`]).
    ///
    /// [`CoreConfig::trace_parent`]: crate::CoreConfig::trace_parent
    pub parent: Option<&'a clawsmith_trace::SpanContext>,
    /// Whether the turn's start also stores a model request.
    pub request: OpeningRequest,
}

/// Whether a turn's start stores a model request ([`TurnOptions::request`]). One stored with the
/// start is what [`Turn::model_request`] stores, written by the same commit as `turn.started`:
/// a host that makes one request per turn (the MCP server, `clawsmith call`: one call per
/// turn) saves a commit per turn. Its evidence is [`Turn::take_opening_request`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OpeningRequest {
    /// No request: the host records its requests with [`Turn::model_request`].
    #[default]
    None,
    /// A request whose evidence carries the shown tools with their schemas: the list to send to
    /// the provider.
    WithTools,
    /// A request whose evidence leaves `tools` empty (its names and hash are still right), for
    /// a host that does not send the tool list anywhere (the MCP server, whose client listed the
    /// tools before): the same `model.request` is stored without copying every tool's schema
    /// (the copy and its drop were ~12% of an MCP `read_file` call's processor time).
    NamesOnly,
}

/// How [`Turn::run_batch`] runs a batch. The default: an assistant message of calls alone, with
/// more batches or requests of the turn to come.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchOptions {
    /// What the model wrote beside its calls: the stored assistant message carries it, so a
    /// resumed session sends it back.
    pub text: String,
    /// The batch is the turn's last and [`Turn::finish`] follows at once (the MCP server: one
    /// call per turn): the records of calls that guard no side effect are then written by the
    /// finish's commit, so a turn of reads is one commit. The results are durable once `finish`
    /// returns, not before; a host that drops the turn instead leaves them to the store's next
    /// commit (or to nothing, if the process ends first: as if it was killed).
    pub last: bool,
}

/// An open session of a core.
pub struct SessionHandle {
    shared: Arc<Shared>,
    id: String,
    recovery: RecoveryReport,
    /// One writer per session: the lease taken to open (and recover) the session, kept until
    /// the first turn takes it over. Each later turn takes the lease again and holds it until it
    /// ends, so a long-lived host does not hold its session while idle: a CLI `undo` of its last
    /// turn can run between its calls. A host that calls
    /// [`SessionHandle::keep_lease_between_turns`] (the MCP server) gets it back here when a turn
    /// finishes, yields it at its next turn when another process waits for it, and lets go of it
    /// with [`SessionHandle::release_lease`] when idle.
    lease: Arc<std::sync::Mutex<Option<Lease>>>,
    /// Whether finished turns hand the lease back to `lease` instead of dropping it.
    keep_lease: std::sync::atomic::AtomicBool,
    /// The last event sequence this handle knows the session reached; when a turn finds
    /// another, someone else wrote (or a process died) and recovery runs first.
    known_sequence: Arc<AtomicU64>,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SessionHandle")
            .field("id", &self.id)
            .field("recovery", &self.recovery)
            .finish_non_exhaustive()
    }
}

impl SessionHandle {
    pub(crate) fn open(
        shared: Arc<Shared>,
        session_id: Option<String>,
    ) -> Result<SessionHandle, CoreError> {
        let id = session_id.unwrap_or_else(|| new_id(IdKind::Session));
        // The lease comes first: recovery below closes calls left open, which is only right
        // when their owner is dead — and a process that could not take the lease is alive.
        let lease = shared.store.lease_session(&id)?;
        match shared.store.get_session(&id)? {
            Some(info) if info.workspace_root != shared.workspace_root_text => {
                return Err(CoreError::WorkspaceMismatch {
                    session_id: id,
                    found: info.workspace_root,
                    expected: shared.workspace_root_text.clone(),
                });
            }
            Some(_) => {}
            None => {
                shared
                    .store
                    .create_session(&id, &shared.workspace_root_text)?;
            }
        }
        let fresh = lease.is_fresh();
        let mut handle = SessionHandle {
            shared,
            id,
            recovery: RecoveryReport::default(),
            lease: Arc::new(std::sync::Mutex::new(Some(lease))),
            keep_lease: std::sync::atomic::AtomicBool::new(false),
            known_sequence: Arc::new(AtomicU64::new(0)),
        };
        // A lease shared with another handle of this process means the owner of any open call
        // is alive (it is us): nothing to recover.
        if fresh {
            handle.recovery = handle.recover()?;
        }
        handle.note_sequence()?;
        handle.restore_activations()?;
        Ok(handle)
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What recovery did when the session was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The core's tracer: a host that wraps its turns in spans of its own
    /// (clawsmith-agent's `invoke_agent`) starts them with it, then passes the span to
    /// [`SessionHandle::begin_turn`] as [`TurnOptions::parent`].
    pub fn tracer(&self) -> &clawsmith_trace::Tracer {
        &self.shared.tracer
    }

    /// The parent turns get by default ([`crate::CoreConfig::trace_parent`]).
    pub fn trace_parent(&self) -> Option<&clawsmith_trace::SpanContext> {
        self.shared.trace_parent.as_ref()
    }

    /// The session's messages.
    pub fn messages(&self) -> Result<Vec<ModelMessage>, CoreError> {
        Ok(self.shared.store.messages(&self.id)?)
    }

    /// The session's events in sequence order.
    pub fn events(&self) -> Result<Vec<Event>, CoreError> {
        Ok(self.shared.store.events(&self.id)?)
    }

    /// Appends a message that is not a tool call or result (system, user, assistant text).
    pub fn append_message(&self, message: &ModelMessage) -> Result<u64, CoreError> {
        self.with_lease(|| Ok(self.shared.store.append_message(&self.id, message)?))
    }

    /// The tools the next request would show (without promoting pending activations).
    pub fn shown_tools(&self) -> Vec<ShownTool> {
        self.shared
            .table
            .shown(&self.shared.activations.active(&self.id))
    }

    /// Records a model request outside a turn; see [`Turn::model_request`].
    pub fn model_request(&self, sink: &dyn EventSink) -> Result<RequestEvidence, CoreError> {
        self.with_lease(|| {
            let evidence = model_request(&self.shared, &self.id, None, sink)?;
            self.note_sequence()?;
            Ok(evidence)
        })
    }

    /// Runs a write outside a turn under the session's lease: the one kept from opening (which
    /// stays kept for the first turn), else one taken for this write alone.
    fn with_lease<T>(&self, write: impl FnOnce() -> Result<T, CoreError>) -> Result<T, CoreError> {
        let kept = self
            .lease
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.is_some() {
            return write();
        }
        drop(kept);
        let _lease = self.lease_for_turn()?;
        write()
    }

    /// Remembers the session's last event sequence as known to this handle.
    fn note_sequence(&self) -> Result<(), CoreError> {
        let last = self.shared.store.last_event_sequence(&self.id)?;
        self.known_sequence.store(last, Ordering::SeqCst);
        Ok(())
    }

    /// Finished turns give the session's lease back to this handle instead of letting go of it
    /// (taking a lease is an `open`, `flock`, `ftruncate` and `write`, and its `close`
    /// starts a writeback: ~8% of an MCP `read_file` call). Another process that wants the lease
    /// still gets it: the next turn yields it when a waiter announced itself
    /// ([`clawsmith_store::Lease::is_wanted`]), and the host calls
    /// [`SessionHandle::release_lease`] when it goes idle (a waiter that would fail waits
    /// [`clawsmith_checkpoint::LINGERING_HOLDER`] for that).
    pub fn keep_lease_between_turns(&self) {
        self.keep_lease.store(true, Ordering::SeqCst);
    }

    /// Lets go of the lease this handle keeps between turns, if it keeps one (none while a turn
    /// runs: the turn has it). Returns whether one was let go of. The next turn takes it again
    /// (and runs recovery first if someone else wrote the session meanwhile).
    pub fn release_lease(&self) -> bool {
        self.lease
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .is_some()
    }

    /// The lease for a turn: the one kept (from opening, or from the last turn), else a new one.
    /// A kept lease another process waits for is yielded first. A new lease over a session that
    /// changed since this handle last wrote it (another process, or a turn of ours dropped
    /// unfinished) runs recovery first: whoever left a call open is gone now.
    fn lease_for_turn(&self) -> Result<Lease, CoreError> {
        let kept = self
            .lease
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let lease = match kept {
            Some(lease) if !lease.is_wanted() => return Ok(lease),
            Some(wanted) => self.shared.store.yield_lease(wanted)?,
            None => self.shared.store.lease_session(&self.id)?,
        };
        let last = self.shared.store.last_event_sequence(&self.id)?;
        if lease.is_fresh() && last != self.known_sequence.load(Ordering::SeqCst) {
            self.recover()?;
            self.note_sequence()?;
        }
        Ok(lease)
    }

    /// Begins a turn: takes the session's lease for the turn's life, opens its checkpoint (K1,
    /// K7) and stores `turn.started`, both written by the turn's first commit (a turn's start
    /// guards nothing, so it rides on the next write; the sink gets `turn.started` then). The
    /// opening is deferred to the store's next commit (the turn's first write, or its finish):
    /// a process killed before that commit leaves no trace of the turn.
    ///
    /// `options` say where the turn's span hangs ([`TurnOptions::parent`]) and whether the
    /// turn's start also stores a model request ([`TurnOptions::request`]).
    pub fn begin_turn(
        &self,
        sink: &dyn EventSink,
        options: TurnOptions<'_>,
    ) -> Result<Turn, CoreError> {
        let lease = self.lease_for_turn()?;
        let turn_id = new_id(IdKind::Turn);
        // The checkpoint, `turn.started` and the opening request commit together, with the
        // turn's first write.
        let store = &self.shared.store;
        let mut payloads = vec![EventPayload::TurnStarted(TurnStarted {
            turn_id: turn_id.clone(),
        })];
        let show = match options.request {
            OpeningRequest::None => None,
            OpeningRequest::WithTools => Some(ShowTools::Clone),
            OpeningRequest::NamesOnly => Some(ShowTools::NamesOnly),
        };
        let opening_request = show.map(|show| {
            let (payload, evidence) = compose_request(&self.shared, &self.id, Some(&turn_id), show);
            payloads.push(payload);
            evidence
        });
        let outbox = Outbox::default();
        outbox.push(store.defer_turn_start(&self.id, &turn_id, payloads, store.now_ms())?);
        // A turn boundary: background commands' changes since the last capture.
        crate::capture::settle_background(&self.shared, &self.id, &turn_id);
        outbox.deliver(sink);
        let mut span = self
            .shared
            .tracer
            .start(options.parent.or(self.shared.trace_parent.as_ref()), || {
                clawsmith_trace::semconv::TURN_SPAN.to_owned()
            });
        span.set_attribute(clawsmith_trace::semconv::CLAWSMITH_TURN_ID, turn_id.clone());
        span.set_attribute(
            clawsmith_trace::semconv::GEN_AI_CONVERSATION_ID,
            self.id.clone(),
        );
        Ok(Turn {
            span,
            shared: Arc::clone(&self.shared),
            session_id: self.id.clone(),
            turn_id,
            batches: 0,
            duplicates: DuplicateTracker::default(),
            cancellation: CancellationSignal::new(),
            closed_calls: 0,
            known_sequence: Arc::clone(&self.known_sequence),
            outbox,
            lease: Some(lease),
            lease_home: self
                .keep_lease
                .load(Ordering::SeqCst)
                .then(|| Arc::clone(&self.lease)),
            opening_request,
        })
    }

    /// A whole turn with one batch: begin, run `calls`, finish.
    pub async fn run_turn(
        &self,
        calls: Vec<ToolCall>,
        sink: &dyn EventSink,
    ) -> Result<TurnOutcome, CoreError> {
        let mut turn = self.begin_turn(sink, TurnOptions::default())?;
        let results = turn.run_batch(calls, sink, BatchOptions::default()).await?;
        let turn_id = turn.id().to_owned();
        let manifest = turn.finish(sink)?;
        Ok(TurnOutcome {
            session_id: self.id.clone(),
            turn_id,
            results,
            manifest,
        })
    }

    /// The activations of the last model request, read by index (not the whole history).
    fn restore_activations(&self) -> Result<(), CoreError> {
        let last = self
            .shared
            .store
            .last_event_of_kind(&self.id, "model.request")?;
        if let Some(Event {
            payload: EventPayload::ModelRequest(request),
            ..
        }) = &last
        {
            let active: BTreeSet<String> = request
                .composition
                .activated_tools
                .iter()
                .filter(|name| {
                    self.shared
                        .table
                        .get(name)
                        .is_some_and(crate::table::ToolEntry::is_deferred)
                })
                .cloned()
                .collect();
            self.shared.activations.restore(&self.id, active);
        }
        Ok(())
    }

    /// A8: every assistant tool call without a result gets exactly one: `unknown` /
    /// `interrupted` if it had started (a `tool.started` event or an open journal entry),
    /// `cancelled` if it never started. Open journal entries are closed as `unknown`; nothing is
    /// re-run. Turns whose checkpoint is still open are finished.
    fn recover(&self) -> Result<RecoveryReport, CoreError> {
        let store = &self.shared.store;
        let mut report = RecoveryReport::default();
        // The common case costs a few index lookups, whatever the history's length.
        if !store.has_unfinished_work(&self.id)? {
            return Ok(report);
        }
        // An undo killed mid-restore left its plan; finish it before any new turn touches the
        // workspace (it only rewrites paths still in the state the plan recorded).
        // A store that cannot undo left no plan.
        if let Ok(undo) = store.undo_store() {
            for restore in undo.recover_session_restores(&self.shared.workspace, &self.id)? {
                report.finished_restores.push(restore.turn_id);
            }
        }
        let open_entries = store.unfinished_calls(&self.id)?;
        // A write killed between its temp file and its rename leaves the temp file beside its
        // target; the target itself is whole. Sweep beside every path an open call named (paths
        // that do not resolve inside the workspace are skipped, never followed).
        for entry in &open_entries {
            let Ok(arguments) = serde_json::from_str::<serde_json::Value>(&entry.args_json) else {
                continue;
            };
            for key in ["path", "from", "to"] {
                let Some(requested) = arguments.get(key).and_then(serde_json::Value::as_str) else {
                    continue;
                };
                let Ok(path) = self.shared.workspace.resolve(requested) else {
                    continue;
                };
                // Best effort: a directory that cannot be listed keeps its leftovers, which never
                // replace a real file.
                match self.shared.workspace.sweep_stale_temp_files(&path) {
                    Ok(removed) => report.swept_temp_files.extend(removed),
                    Err(error) => {
                        tracing::debug!(%error, path = requested, "stale temp files not swept");
                    }
                }
            }
        }
        let messages = store.messages(&self.id)?;
        let events = store.events(&self.id)?;
        // Call ids repeat across turns (providers number them per turn): a start names the
        // latest turn of its id, a completion is keyed by turn and id.
        let mut started_turn: HashMap<&str, &str> = HashMap::new();
        let mut completed: HashSet<(&str, &str)> = HashSet::new();
        for event in &events {
            match &event.payload {
                EventPayload::ToolStarted(started) => {
                    started_turn.insert(&started.tool_call_id, &started.turn_id);
                }
                EventPayload::ToolCompleted(done) => {
                    completed.insert((&done.turn_id, &done.tool_call_id));
                }
                _ => {}
            }
        }
        let journal_turn: HashMap<&str, &str> = open_entries
            .iter()
            .map(|entry| (entry.call_id.as_str(), entry.turn_id.as_str()))
            .collect();
        // Results owed: per call id, calls minus results. Results follow their calls in order,
        // so the unanswered calls of an id are its *last* ones: a reused id's earlier, answered
        // calls are skipped.
        let mut owed: HashMap<&str, i64> = HashMap::new();
        let mut total: HashMap<&str, i64> = HashMap::new();
        let mut order: Vec<&ToolCall> = Vec::new();
        for message in &messages {
            match message.role {
                Role::Assistant => {
                    for call in &message.tool_calls {
                        *owed.entry(&call.id).or_default() += 1;
                        *total.entry(&call.id).or_default() += 1;
                        order.push(call);
                    }
                }
                Role::Tool => {
                    if let Some(id) = &message.tool_call_id {
                        *owed.entry(id).or_default() -= 1;
                    }
                }
                Role::System | Role::User => {}
            }
        }
        // Only used when neither the journal nor the events name the call's turn.
        let last_turn: String = store.checkpoints(&self.id)?.last().map_or_else(
            || "recovered".to_owned(),
            |checkpoint| checkpoint.turn_id.clone(),
        );
        let mut journal_closed: HashSet<&str> = HashSet::new();
        let mut seen: HashMap<&str, i64> = HashMap::new();
        for call in order {
            let occurrence = seen.entry(call.id.as_str()).or_default();
            *occurrence += 1;
            let answered = total.get(call.id.as_str()).copied().unwrap_or(0)
                - owed.get(call.id.as_str()).copied().unwrap_or(0).max(0);
            if *occurrence <= answered {
                continue;
            }
            let turn_id = journal_turn
                .get(call.id.as_str())
                .or_else(|| started_turn.get(call.id.as_str()))
                .copied()
                .unwrap_or(last_turn.as_str());
            let started = journal_turn.contains_key(call.id.as_str())
                || started_turn.contains_key(call.id.as_str());
            let result = if started {
                report.interrupted.push(call.id.clone());
                interrupted_result(&call.name)
            } else {
                report.never_ran.push(call.id.clone());
                ToolExecutionResult::failure(
                    ErrorCode::CANCELLED,
                    format!(
                        "{} did not run: the process ended before the call started.",
                        call.name
                    ),
                )
            };
            if journal_turn.contains_key(call.id.as_str())
                && journal_closed.insert(call.id.as_str())
            {
                store.journal_close(&self.id, &call.id, ToolStatus::Unknown)?;
            }
            self.close_recovered(
                call,
                turn_id,
                &result,
                !completed.contains(&(turn_id, call.id.as_str())),
            )?;
        }
        // Journal entries without an unanswered call (their result message exists): close them.
        for entry in &open_entries {
            if journal_closed.contains(entry.call_id.as_str()) {
                continue;
            }
            store.journal_close(&self.id, &entry.call_id, ToolStatus::Unknown)?;
            if !completed.contains(&(entry.turn_id.as_str(), entry.call_id.as_str())) {
                let result = interrupted_result(&entry.tool_name);
                emit(
                    &self.shared,
                    &self.id,
                    EventPayload::ToolCompleted(ToolCompleted::new(
                        entry.call_id.clone(),
                        entry.turn_id.clone(),
                        entry.tool_name.clone(),
                        &result,
                    )),
                    &NullSink,
                )?;
                report.interrupted.push(entry.call_id.clone());
            }
        }
        // Questions asked by a process that is gone can no longer be answered.
        for approval in store.pending_approvals(&self.id)? {
            store.resolve_pending_approval(&self.id, &approval.approval_id)?;
            report.dropped_approvals.push(approval.approval_id);
        }
        // Before the turns are finished: a command killed mid-run gets its changes recorded.
        report.command_changes = crate::capture::recover_interrupted(&self.shared, &self.id);
        for checkpoint in store.checkpoints(&self.id)? {
            if checkpoint.state == CheckpointState::Open {
                store.finish_turn_without_event(
                    &self.id,
                    &checkpoint.turn_id,
                    &current_content(&self.shared.workspace),
                )?;
                report.finished_turns.push(checkpoint.turn_id);
            }
        }
        Ok(report)
    }

    fn close_recovered(
        &self,
        call: &ToolCall,
        turn_id: &str,
        result: &ToolExecutionResult,
        emit_completed: bool,
    ) -> Result<(), CoreError> {
        if emit_completed {
            emit(
                &self.shared,
                &self.id,
                EventPayload::ToolCompleted(ToolCompleted::new(
                    call.id.clone(),
                    turn_id,
                    call.name.clone(),
                    result,
                )),
                &NullSink,
            )?;
        }
        self.shared.store.append_message(
            &self.id,
            &ModelMessage::tool_result(
                call.id.clone(),
                call.name.clone(),
                result.content.clone(),
                result.summary(),
            ),
        )?;
        Ok(())
    }
}

fn interrupted_result(tool_name: &str) -> ToolExecutionResult {
    ToolExecutionResult::failure(
        ErrorCode::INTERRUPTED,
        format!(
            "{tool_name} was interrupted: the process ended while the call ran, so its effects are \
             unknown. It was not re-run; check the current state before trying again."
        ),
    )
}

fn model_request(
    shared: &Shared,
    session_id: &str,
    turn_id: Option<&str>,
    sink: &dyn EventSink,
) -> Result<RequestEvidence, CoreError> {
    let (payload, evidence) = compose_request(shared, session_id, turn_id, ShowTools::Clone);
    emit(shared, session_id, payload, sink)?;
    Ok(evidence)
}

/// Whether [`compose_request`]'s evidence carries the shown tools with their schemas.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ShowTools {
    /// The evidence's `tools` is the list to send to a provider.
    Clone,
    /// The evidence's `tools` is left empty (its names and hash are still right).
    NamesOnly,
}

/// What a model request shows now (promoting pending activations), as its `model.request`
/// payload and the evidence handed back.
fn compose_request(
    shared: &Shared,
    session_id: &str,
    turn_id: Option<&str>,
    show: ShowTools,
) -> (EventPayload, RequestEvidence) {
    let active = shared.activations.promote(session_id);
    let (tools, tool_names): (Vec<ShownTool>, Vec<String>) = match show {
        ShowTools::Clone => {
            let tools = shared.table.shown(&active);
            let names = tools.iter().map(|tool| tool.name.clone()).collect();
            (tools, names)
        }
        ShowTools::NamesOnly => (Vec::new(), shared.table.shown_names(&active)),
    };
    let tool_schema_sha256 = shared.table.tool_schema_sha256(&active);
    let activated_tools: Vec<String> = tool_names
        .iter()
        .filter(|name| {
            shared
                .table
                .get(name)
                .is_some_and(crate::table::ToolEntry::is_deferred)
        })
        .cloned()
        .collect();
    let request_id = new_id(IdKind::Request);
    let payload = EventPayload::ModelRequest(ModelRequest {
        request_id: request_id.clone(),
        turn_id: turn_id.map(str::to_owned),
        tool_names: tool_names.clone(),
        tool_schema_sha256: tool_schema_sha256.clone(),
        composition: RequestComposition {
            activated_tools: activated_tools.clone(),
        },
    });
    let evidence = RequestEvidence {
        request_id,
        turn_id: turn_id.map(str::to_owned),
        tools,
        tool_names,
        tool_schema_sha256,
        activated_tools,
    };
    (payload, evidence)
}

/// A running turn. Dropping it without [`Turn::finish`] leaves its checkpoint open; the next
/// open of the session finishes it.
pub struct Turn {
    /// The turn's span (ends when the turn finishes or is dropped).
    span: clawsmith_trace::Span,
    shared: Arc<Shared>,
    session_id: String,
    turn_id: String,
    batches: u32,
    duplicates: DuplicateTracker,
    cancellation: CancellationSignal,
    closed_calls: u64,
    /// Where the turn reports the sequence it ended at, so its handle knows it wrote it.
    known_sequence: Arc<AtomicU64>,
    /// The turn's events whose write waits for a later commit, sent to the sink once stored.
    outbox: Outbox,
    /// One writer per session: held until the turn ends (finished or dropped).
    lease: Option<Lease>,
    /// Where a finished turn gives its lease back, when its handle keeps it between turns; a
    /// dropped (unfinished) turn lets go of it, so the next turn's recovery check runs.
    lease_home: Option<Arc<std::sync::Mutex<Option<Lease>>>>,
    /// The evidence of the model request stored with the turn's start ([`OpeningRequest`]),
    /// until the host takes it.
    opening_request: Option<RequestEvidence>,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Turn")
            .field("session_id", &self.session_id)
            .field("turn_id", &self.turn_id)
            .field("batches", &self.batches)
            .finish_non_exhaustive()
    }
}

impl Turn {
    /// The turn id.
    pub fn id(&self) -> &str {
        &self.turn_id
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The turn's cancellation: firing it cancels running calls (each gets `cancel_grace` to
    /// stop) and every call not started yet.
    pub fn cancellation(&self) -> CancellationSignal {
        self.cancellation.clone()
    }

    /// Records a model request of this turn (A9 evidence): pending activations become active
    /// now, and the returned list is exactly what the provider should be sent.
    pub fn model_request(&self, sink: &dyn EventSink) -> Result<RequestEvidence, CoreError> {
        let (payload, evidence) = compose_request(
            &self.shared,
            &self.session_id,
            Some(&self.turn_id),
            ShowTools::Clone,
        );
        self.record_event(payload, sink)?;
        Ok(evidence)
    }

    /// The evidence of the model request stored with the turn's start ([`TurnOptions::request`]),
    /// taken out: `None` when none was asked for, or once taken.
    pub fn take_opening_request(&mut self) -> Option<RequestEvidence> {
        self.opening_request.take()
    }

    /// Runs the calls of one assistant message: stores the assistant message (with
    /// [`BatchOptions::text`]), then exactly one result per call in call order (A6, A7). `Err`
    /// only when the store fails.
    pub async fn run_batch(
        &mut self,
        calls: Vec<ToolCall>,
        sink: &dyn EventSink,
        options: BatchOptions,
    ) -> Result<Vec<CallResult>, CoreError> {
        let context = TurnContext {
            shared: &self.shared,
            session_id: &self.session_id,
            turn_id: &self.turn_id,
            cancellation: &self.cancellation,
            sink,
            assistant: std::sync::Mutex::new(None),
            spans: crate::spans::CallSpans::new(
                &self.shared.tracer,
                self.span.context(),
                (&self.session_id, &self.turn_id),
            ),
            outbox: &self.outbox,
            last_batch: options.last,
        };
        let index = self.batches;
        self.batches += 1;
        let results = run_batch(&context, options.text, calls, index, &mut self.duplicates).await?;
        self.closed_calls += results.len() as u64;
        Ok(results)
    }

    /// Stores an event of the turn's host (an agent loop's `agent.stopped`, a background task's
    /// `background_task.completed`) with the session's next sequence and hands it to `sink`.
    pub fn record_event(
        &self,
        payload: EventPayload,
        sink: &dyn EventSink,
    ) -> Result<Event, CoreError> {
        let store = &self.shared.store;
        let event = store.append_event(&self.session_id, payload, store.now_ms())?;
        self.outbox.deliver_with(sink, &event);
        Ok(event)
    }

    /// Finishes the turn: closes its checkpoint (K1) and stores `turn.completed`.
    pub fn finish(self, sink: &dyn EventSink) -> Result<TurnManifest, CoreError> {
        // A turn boundary: background commands' changes since the last capture.
        crate::capture::settle_background(&self.shared, &self.session_id, &self.turn_id);
        // The checkpoint's close and `turn.completed` commit together.
        let store = &self.shared.store;
        let (manifest, completed) = store.finish_turn_reading(
            &self.session_id,
            &self.turn_id,
            &current_content(&self.shared.workspace),
            EventPayload::TurnCompleted(TurnCompleted {
                turn_id: self.turn_id.clone(),
                tool_calls: self.closed_calls,
            }),
            store.now_ms(),
        )?;
        self.outbox.deliver_with(sink, &completed);
        // The lease is held until here: nothing after `turn.completed` was written by another.
        self.known_sequence
            .store(completed.sequence, Ordering::SeqCst);
        if let (Some(home), Some(lease)) = (self.lease_home, self.lease) {
            *home
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(lease);
        }
        Ok(manifest)
    }
}

/// What a finished turn reads of each changed path: its current bytes in the workspace (`None`
/// when absent or unreadable).
fn current_content(workspace: &clawsmith_fs::Workspace) -> impl Fn(&str) -> Option<Vec<u8>> + '_ {
    |path: &str| {
        let path = workspace.resolve(path).ok()?;
        match workspace.read_state(&path).ok()? {
            clawsmith_fs::PriorState::File { content, .. } => Some(content),
            clawsmith_fs::PriorState::Absent => None,
        }
    }
}
