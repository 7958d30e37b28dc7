//! Sessions and their history: messages, events, todos and pending approvals.

use clawsmith_protocol::{Event, EventPayload, ModelMessage};
use rusqlite::{OptionalExtension, Transaction, params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::checkpoint::CheckpointInfo;
use crate::error::{JsonContext, SqlContext, StoreError};
use crate::store::{Deferred, DeferredEvent, Store};

/// One session row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// The session it was forked from.
    pub parent_id: Option<String>,
    /// Creation time (ms since the epoch, store clock).
    pub created_at_ms: u64,
    /// The workspace root the session works in, as given at creation.
    pub workspace_root: String,
}

/// One item of a session's todo list (A2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Todo {
    /// Stable id chosen by the model.
    pub id: String,
    /// What to do.
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
}

/// The state of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (at most one item at a time).
    InProgress,
    /// Done.
    Completed,
}

/// An approval request waiting for a person (cleared by a `session` undo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingApproval {
    /// The approval's id.
    pub approval_id: String,
    /// The turn that asked.
    pub turn_id: String,
    /// The call waiting for the answer.
    pub call_id: String,
    /// The request as the core shows it (opaque JSON).
    pub request: serde_json::Value,
}

/// What [`Store::begin_turn`] stores with a turn's checkpoint. The default: no events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnOpening {
    /// Events appended after the checkpoint in the same commit, in order (the turn's
    /// `turn.started`, then e.g. its `model.request`).
    pub events: Vec<EventPayload>,
    /// The events' timestamp (ms since the epoch).
    pub timestamp_ms: u64,
}

/// What [`Store::begin_turn`] stored.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenedTurn {
    /// The turn's checkpoint.
    pub checkpoint: CheckpointInfo,
    /// The events of [`TurnOpening::events`], with their sequences.
    pub events: Vec<Event>,
}

impl Store {
    /// Creates a session.
    pub fn create_session(
        &self,
        id: &str,
        workspace_root: &str,
    ) -> Result<SessionInfo, StoreError> {
        let now = self.now_ms();
        self.write("creating a session", |tx| {
            if session_exists(tx, id)? {
                return Err(StoreError::SessionExists(id.to_string()));
            }
            tx.execute(
                "INSERT INTO sessions (id, parent_id, created_at, workspace_root) VALUES (?1, NULL, ?2, ?3)",
                params![id, now, workspace_root],
            )
            .ctx("creating a session")?;
            Ok(SessionInfo {
                id: id.to_string(),
                parent_id: None,
                created_at_ms: now,
                workspace_root: workspace_root.to_string(),
            })
        })
    }

    /// Creates a session linked to `parent_id` (a sub-agent's session): unlike a fork it starts
    /// empty; the link is what `session show` and `list_sessions` report as `parent_id`.
    pub fn create_child_session(
        &self,
        id: &str,
        parent_id: &str,
        workspace_root: &str,
    ) -> Result<SessionInfo, StoreError> {
        let now = self.now_ms();
        self.write("creating a child session", |tx| {
            if session_exists(tx, id)? {
                return Err(StoreError::SessionExists(id.to_string()));
            }
            if !session_exists(tx, parent_id)? {
                return Err(StoreError::UnknownSession(parent_id.to_string()));
            }
            tx.execute(
                "INSERT INTO sessions (id, parent_id, created_at, workspace_root) VALUES (?1, ?2, ?3, ?4)",
                params![id, parent_id, now, workspace_root],
            )
            .ctx("creating a child session")?;
            Ok(SessionInfo {
                id: id.to_string(),
                parent_id: Some(parent_id.to_string()),
                created_at_ms: now,
                workspace_root: workspace_root.to_string(),
            })
        })
    }

    /// One session, `None` if unknown.
    pub fn get_session(&self, id: &str) -> Result<Option<SessionInfo>, StoreError> {
        self.read("reading a session", |tx| {
            tx.query_row(
                "SELECT id, parent_id, created_at, workspace_root FROM sessions WHERE id = ?1",
                [id],
                session_row,
            )
            .optional()
            .ctx("reading a session")
        })
    }

    /// Every session, newest first.
    pub fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.read("listing sessions", |tx| {
            let mut statement = tx
                .prepare(
                    "SELECT id, parent_id, created_at, workspace_root FROM sessions
                     ORDER BY created_at DESC, rowid DESC",
                )
                .ctx("listing sessions")?;
            let rows = statement
                .query_map([], session_row)
                .ctx("listing sessions")?;
            rows.collect::<Result<Vec<_>, _>>().ctx("listing sessions")
        })
    }

    /// Appends a message; returns its index (from 0).
    pub fn append_message(
        &self,
        session_id: &str,
        message: &ModelMessage,
    ) -> Result<u64, StoreError> {
        let json = crate::at_rest::message_json(message)?;
        self.write("appending a message", |tx| {
            let rows = require_session(tx, session_id)?;
            insert_message(tx, rows, &json)
        })
    }

    /// [`Store::append_message`] deferred to the store's next commit (see
    /// [`Store::defer_turn_start`]). Fails only when the message cannot be encoded.
    pub fn defer_message(
        &self,
        session_id: &str,
        message: &ModelMessage,
    ) -> Result<(), StoreError> {
        let json = crate::at_rest::message_json(message)?;
        self.defer([Deferred::Message {
            session_id: session_id.to_owned(),
            json,
        }]);
        Ok(())
    }

    /// Begins turn `turn_id` of the session: its checkpoint records the message count, the last
    /// event sequence and a snapshot of the todo list (K7), and the events of `opening` (its
    /// `turn.started`, then e.g. the turn's `model.request`) are appended after it, in order, in
    /// the same commit. A turn id can be begun once per session.
    ///
    /// A turn opened with events guards nothing yet, so under `Durability::Full` that commit is
    /// not fsynced on its own: the first commit that guards a change (a prior state, a journal
    /// entry) or the turn's end fsyncs it. One opened without events is fsynced as any write.
    pub fn begin_turn(
        &self,
        session_id: &str,
        turn_id: &str,
        opening: TurnOpening,
    ) -> Result<OpenedTurn, StoreError> {
        let now = self.now_ms();
        let TurnOpening {
            events,
            timestamp_ms,
        } = opening;
        let unsynced = !events.is_empty();
        let open = |tx: &Transaction<'_>| {
            let mut tail = Tail::of(tx, session_id)?;
            crate::checkpoint::begin_turn_at_tail(tx, &mut tail, turn_id, now)?;
            let events = events
                .into_iter()
                .map(|payload| tail.insert_event(tx, payload, timestamp_ms, None))
                .collect::<Result<Vec<Event>, StoreError>>()?;
            Ok(OpenedTurn {
                checkpoint: crate::checkpoint::checkpoint_info(tx, session_id, turn_id)?,
                events,
            })
        };
        if unsynced {
            self.write_unsynced("beginning a turn", open)
        } else {
            self.write("beginning a turn", open)
        }
    }

    /// [`Store::begin_turn`] deferred to the store's next commit
    /// ([`Store::flush_deferred`]): the turn exists for others, and for a crash, only once a
    /// later write of this store commits (any write does, taking the deferred records first).
    /// A turn of reads only then costs no commit of its own: its start rides on its first
    /// write. Returns the events, which get their sequences when written.
    pub fn defer_turn_start(
        &self,
        session_id: &str,
        turn_id: &str,
        events: Vec<EventPayload>,
        timestamp_ms: u64,
    ) -> Vec<DeferredEvent> {
        let mut records = vec![Deferred::BeginTurn {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            at_ms: self.now_ms(),
        }];
        let mut handles = Vec::with_capacity(events.len());
        for payload in events {
            let (record, handle) = deferred_event(session_id, payload, timestamp_ms, None);
            records.push(record);
            handles.push(handle);
        }
        self.defer(records);
        handles
    }

    /// The session's messages in order.
    pub fn messages(&self, session_id: &str) -> Result<Vec<ModelMessage>, StoreError> {
        self.messages_page(session_id, 0, u64::MAX)
    }

    /// Appends an event, assigning the session's next sequence (gap-free from 1) inside the
    /// insert transaction.
    pub fn append_event(
        &self,
        session_id: &str,
        payload: EventPayload,
        timestamp_ms: u64,
    ) -> Result<Event, StoreError> {
        self.write("appending an event", |tx| {
            let rows = require_session(tx, session_id)?;
            insert_event(tx, rows, session_id, payload, timestamp_ms, None)
        })
    }

    /// The session's events in sequence order.
    pub fn events(&self, session_id: &str) -> Result<Vec<Event>, StoreError> {
        self.events_page(session_id, 0, u64::MAX)
    }

    /// At most `limit` events of the session with a sequence above `after_sequence`, in order:
    /// a page of a long history, in memory bounded by the page.
    pub fn events_page(
        &self,
        session_id: &str,
        after_sequence: u64,
        limit: u64,
    ) -> Result<Vec<Event>, StoreError> {
        self.read("reading events", |tx| {
            let session = require_session(tx, session_id)?;
            events_in(tx, session, after_sequence, limit)
        })
    }

    /// At most `limit` messages of the session from index `from_index` on, in order.
    pub fn messages_page(
        &self,
        session_id: &str,
        from_index: u64,
        limit: u64,
    ) -> Result<Vec<ModelMessage>, StoreError> {
        self.read("reading messages", |tx| {
            let session = require_session(tx, session_id)?;
            messages_in(tx, session, from_index, limit)
        })
    }

    /// The session's latest event of `kind` (`model.request`, …), by index: what opening a
    /// session reads instead of its whole history.
    pub fn last_event_of_kind(
        &self,
        session_id: &str,
        kind: &str,
    ) -> Result<Option<Event>, StoreError> {
        // Without statistics SQLite walks the primary key backwards, through the whole history
        // when the kind is rare. The index holds only the kinds a session has few of (schema
        // V13: a turn's start, model request and end, not the calls' events), in key order
        // since V15, so this walks the session's range of the index backwards over those few
        // kinds to the last one of `kind` (a `model.request` is among a turn's three entries).
        // The kinds every call writes are not in it: the walk of the table finds them among the
        // last events.
        let sql = if UNINDEXED_KINDS.contains(&kind) {
            "SELECT event_json FROM event_rows
             WHERE key >= ?1 AND key < ?2 AND type = ?3 ORDER BY key DESC LIMIT 1"
        } else {
            "SELECT event_json FROM event_rows INDEXED BY events_kind
             WHERE key >= ?1 AND key < ?2 AND type = ?3
                 AND type NOT IN ('tool.started', 'tool.completed')
             ORDER BY key DESC LIMIT 1"
        };
        self.read("reading the last event of a kind", |tx| {
            let Some(session) = session_rows(tx, session_id)? else {
                return Ok(None);
            };
            let json: Option<String> = tx
                .query_row(sql, params![session.first(), session.end(), kind], |row| {
                    row.get(0)
                })
                .optional()
                .ctx("reading the last event of a kind")?;
            json.map(|json| serde_json::from_str(&json).json_ctx("reading an event"))
                .transpose()
        })
    }

    /// Whether a process that died could have left anything in this session for recovery: an
    /// open turn, an open journal entry, a pending approval or a restore plan. Each is an index
    /// lookup; a session without any of them needs no scan of its history. (Every call of a turn
    /// is answered before its checkpoint closes, so unanswered calls imply an open turn.)
    pub fn has_unfinished_work(&self, session_id: &str) -> Result<bool, StoreError> {
        self.read("looking for unfinished work", |tx| {
            tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE session_id = ?1 AND state = 'open')
                     OR EXISTS (SELECT 1 FROM journal WHERE session_id = ?1 AND closed_at IS NULL)
                     OR EXISTS (SELECT 1 FROM pending_approvals WHERE session_id = ?1)
                     OR EXISTS (SELECT 1 FROM restore_plans WHERE session_id = ?1)",
                [session_id],
                |row| row.get(0),
            )
            .ctx("looking for unfinished work")
        })
    }

    /// The session's last event sequence (0 before its first event): one index lookup.
    pub fn last_event_sequence(&self, session_id: &str) -> Result<u64, StoreError> {
        self.read("reading the event sequence", |tx| {
            match session_rows(tx, session_id)? {
                Some(session) => last_event_sequence(tx, session),
                None => Ok(0),
            }
        })
    }

    /// Replaces the session's todo list. Ids must be non-empty and unique and at most one item
    /// may be `in_progress`; otherwise [`StoreError::InvalidTodos`] and nothing changes.
    pub fn set_todos(&self, session_id: &str, todos: Vec<Todo>) -> Result<(), StoreError> {
        validate_todos(&todos)?;
        let json = serde_json::to_string(&todos).json_ctx("storing todos")?;
        self.write("storing todos", |tx| {
            require_session(tx, session_id)?;
            write_todos_json(tx, session_id, &json)
        })
    }

    /// The session's todo list (empty if never set).
    pub fn todos(&self, session_id: &str) -> Result<Vec<Todo>, StoreError> {
        self.read("reading todos", |tx| {
            require_session(tx, session_id)?;
            let json = todos_json(tx, session_id)?;
            serde_json::from_str(&json).json_ctx("reading todos")
        })
    }

    /// Records an approval request waiting for a person.
    pub fn add_pending_approval(
        &self,
        session_id: &str,
        approval: &PendingApproval,
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        let json = crate::at_rest::redacted_json(&approval.request, "storing an approval")?;
        self.write("storing an approval", |tx| {
            require_session(tx, session_id)?;
            tx.execute(
                "INSERT OR REPLACE INTO pending_approvals
                 (session_id, approval_id, turn_id, call_id, request_json, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    session_id,
                    approval.approval_id,
                    approval.turn_id,
                    approval.call_id,
                    json,
                    now
                ],
            )
            .ctx("storing an approval")?;
            Ok(())
        })
    }

    /// Removes an answered approval; `false` if it was not pending.
    pub fn resolve_pending_approval(
        &self,
        session_id: &str,
        approval_id: &str,
    ) -> Result<bool, StoreError> {
        self.write("resolving an approval", |tx| {
            let removed = tx
                .execute(
                    "DELETE FROM pending_approvals WHERE session_id = ?1 AND approval_id = ?2",
                    params![session_id, approval_id],
                )
                .ctx("resolving an approval")?;
            Ok(removed > 0)
        })
    }

    /// The session's pending approvals, oldest first.
    pub fn pending_approvals(&self, session_id: &str) -> Result<Vec<PendingApproval>, StoreError> {
        self.read("reading approvals", |tx| {
            require_session(tx, session_id)?;
            let mut statement = tx
                .prepare(
                    "SELECT approval_id, turn_id, call_id, request_json FROM pending_approvals
                     WHERE session_id = ?1 ORDER BY created_at, rowid",
                )
                .ctx("reading approvals")?;
            let rows = statement
                .query_map([session_id], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        row.get::<_, String>(3)?,
                    ))
                })
                .ctx("reading approvals")?;
            let mut approvals = Vec::new();
            for row in rows {
                let (approval_id, turn_id, call_id, json) = row.ctx("reading approvals")?;
                approvals.push(PendingApproval {
                    approval_id,
                    turn_id,
                    call_id,
                    request: serde_json::from_str(&json).json_ctx("reading approvals")?,
                });
            }
            Ok(approvals)
        })
    }

    /// Forks `parent_id` into a new session `new_id` (K6): the child gets a copy of the parent's
    /// messages, events (renumbered identically, `sessionId` rewritten), todos and checkpoint
    /// metadata, and its artifacts; file contents stay shared through the content-addressed
    /// blobs. Journals and pending approvals belong to the parent's running calls and are not
    /// copied.
    pub fn fork_session(&self, parent_id: &str, new_id: &str) -> Result<SessionInfo, StoreError> {
        let now = self.now_ms();
        self.write("forking a session", |tx| {
            let parent = tx
                .query_row(
                    "SELECT id, parent_id, created_at, workspace_root FROM sessions WHERE id = ?1",
                    [parent_id],
                    session_row,
                )
                .optional()
                .ctx("forking a session")?
                .ok_or_else(|| StoreError::UnknownSession(parent_id.to_string()))?;
            if session_exists(tx, new_id)? {
                return Err(StoreError::SessionExists(new_id.to_string()));
            }
            tx.execute(
                "INSERT INTO sessions (id, parent_id, created_at, workspace_root) VALUES (?1, ?2, ?3, ?4)",
                params![new_id, parent_id, now, parent.workspace_root],
            )
            .ctx("forking a session")?;
            let from = require_session(tx, parent_id)?;
            let to = require_session(tx, new_id)?;
            tx.execute(
                "INSERT INTO message_rows (key, message_json)
                 SELECT key - ?1 + ?3, message_json FROM message_rows
                 WHERE key >= ?1 AND key < ?2 ORDER BY key",
                params![from.first(), from.end(), to.first()],
            )
            .ctx("forking messages")?;
            copy_events(tx, from, to, new_id)?;
            tx.execute(
                "INSERT INTO session_todos (session_id, todos_json)
                 SELECT ?2, todos_json FROM session_todos WHERE session_id = ?1",
                params![parent_id, new_id],
            )
            .ctx("forking todos")?;
            crate::checkpoint::copy_checkpoints(tx, parent_id, new_id)?;
            // The copied events name the parent's artifacts: the fork can read them.
            tx.execute(
                "INSERT INTO artifacts (session_id, artifact_id, blob_hash, size, lines, created_at)
                 SELECT ?2, artifact_id, blob_hash, size, lines, created_at
                 FROM artifacts WHERE session_id = ?1",
                params![parent_id, new_id],
            )
            .ctx("forking artifacts")?;
            Ok(SessionInfo {
                id: new_id.to_string(),
                parent_id: Some(parent_id.to_string()),
                created_at_ms: now,
                workspace_root: parent.workspace_root,
            })
        })
    }
}

/// Inserts `message` (already JSON) as the session's next message; returns its index.
pub(crate) fn insert_message(
    tx: &Transaction<'_>,
    session: SessionRows,
    json: &str,
) -> Result<u64, StoreError> {
    let index = message_count(tx, session)?;
    insert_message_at(tx, session, index, json)?;
    Ok(index)
}

/// Inserts `message` (already JSON) at `index`, which must be the session's next.
fn insert_message_at(
    tx: &Transaction<'_>,
    session: SessionRows,
    index: u64,
    json: &str,
) -> Result<u64, StoreError> {
    let key = session.key(index, "appending a message")?;
    tx.prepare_cached("INSERT INTO message_rows (key, message_json) VALUES (?1, ?2)")
        .and_then(|mut statement| statement.execute(params![key, json]))
        .ctx("appending a message")?;
    Ok(index)
}

/// Inserts an event with the session's next sequence. `output_message`: the index and text of
/// the tool message that holds the legacy `output` of this `tool.completed`, which is then not
/// stored again, nor its display body when that is the same text
/// ([`crate::at_rest::event_json`]). Returns the event as given (unmasked, for sinks).
pub(crate) fn insert_event(
    tx: &Transaction<'_>,
    session: SessionRows,
    session_id: &str,
    payload: EventPayload,
    timestamp_ms: u64,
    output_message: Option<(u64, &str)>,
) -> Result<Event, StoreError> {
    let mut event = Event {
        session_id: session_id.to_string(),
        sequence: 0,
        timestamp_ms,
        payload,
    };
    write_event(tx, session, &mut event, output_message)?;
    Ok(event)
}

/// [`insert_event`] for an event already built (of the session at `session`): its `sequence`
/// becomes the session's next.
pub(crate) fn write_event(
    tx: &Transaction<'_>,
    session: SessionRows,
    event: &mut Event,
    output_message: Option<(u64, &str)>,
) -> Result<(), StoreError> {
    let sequence = last_event_sequence(tx, session)? + 1;
    write_event_at(tx, session, event, sequence, output_message)
}

/// [`write_event`] at `sequence`, which must be the session's next.
fn write_event_at(
    tx: &Transaction<'_>,
    session: SessionRows,
    event: &mut Event,
    sequence: u64,
    output_message: Option<(u64, &str)>,
) -> Result<(), StoreError> {
    event.sequence = sequence;
    let key = session.key(event.sequence, "appending an event")?;
    let (json, body_in_message) =
        crate::at_rest::event_json(event, output_message.map(|(_, content)| content))?;
    tx.prepare_cached(
        "INSERT INTO event_rows
         (key, type, timestamp_ms, event_json, message_idx, display_body_in_message)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            key,
            event.payload.kind(),
            event.timestamp_ms,
            json,
            output_message.map(|(index, _)| index),
            body_in_message
        ])
    })
    .ctx("appending an event")?;
    Ok(())
}

/// Where a session's next message and next event go, as one write transaction learns them: each
/// is looked up once (a seek in its table's key) and then counted on, so records written one
/// after another in a transaction (a call's deferred start, then its close) do not look up what
/// the previous one just wrote (three statements of a read's twelve).
#[derive(Debug)]
pub(crate) struct Tail {
    session_id: String,
    session: SessionRows,
    /// The session's next message index, once known in this transaction.
    next_index: Option<u64>,
    /// The session's next event sequence, once known in this transaction.
    next_sequence: Option<u64>,
}

impl Tail {
    /// The tail of `session_id`, nothing known yet ([`StoreError::UnknownSession`] unless the
    /// session exists).
    pub(crate) fn of(tx: &Transaction<'_>, session_id: &str) -> Result<Tail, StoreError> {
        Ok(Tail {
            session_id: session_id.to_owned(),
            session: require_session(tx, session_id)?,
            next_index: None,
            next_sequence: None,
        })
    }

    /// The tail of `session_id` in `slot`, put there first unless it holds it already.
    pub(crate) fn in_slot<'s>(
        slot: &'s mut Option<Tail>,
        tx: &Transaction<'_>,
        session_id: &str,
    ) -> Result<&'s mut Tail, StoreError> {
        if !slot.as_ref().is_some_and(|tail| tail.is_of(session_id)) {
            *slot = Some(Tail::of(tx, session_id)?);
        }
        slot.as_mut()
            .ok_or_else(|| StoreError::UnknownSession(session_id.to_owned()))
    }

    /// Whether this is the tail of `session_id`.
    pub(crate) fn is_of(&self, session_id: &str) -> bool {
        self.session_id == session_id
    }

    /// The session's id.
    pub(crate) fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The session's next message index (its message count), looked up once per tail.
    pub(crate) fn next_index(&mut self, tx: &Transaction<'_>) -> Result<u64, StoreError> {
        match self.next_index {
            Some(index) => Ok(index),
            None => {
                let index = message_count(tx, self.session)?;
                self.next_index = Some(index);
                Ok(index)
            }
        }
    }

    /// The session's next event sequence (its last one + 1), looked up once per tail.
    pub(crate) fn next_sequence(&mut self, tx: &Transaction<'_>) -> Result<u64, StoreError> {
        match self.next_sequence {
            Some(sequence) => Ok(sequence),
            None => {
                let sequence = last_event_sequence(tx, self.session)? + 1;
                self.next_sequence = Some(sequence);
                Ok(sequence)
            }
        }
    }

    /// [`insert_message`] at the session's next index.
    pub(crate) fn insert_message(
        &mut self,
        tx: &Transaction<'_>,
        json: &str,
    ) -> Result<u64, StoreError> {
        let index = self.next_index(tx)?;
        insert_message_at(tx, self.session, index, json)?;
        self.next_index = Some(index + 1);
        Ok(index)
    }

    /// [`write_event`] at the session's next sequence.
    pub(crate) fn write_event(
        &mut self,
        tx: &Transaction<'_>,
        event: &mut Event,
        output_message: Option<(u64, &str)>,
    ) -> Result<(), StoreError> {
        let sequence = self.next_sequence(tx)?;
        write_event_at(tx, self.session, event, sequence, output_message)?;
        self.next_sequence = Some(sequence + 1);
        Ok(())
    }

    /// [`insert_event`] at the session's next sequence.
    pub(crate) fn insert_event(
        &mut self,
        tx: &Transaction<'_>,
        payload: EventPayload,
        timestamp_ms: u64,
        output_message: Option<(u64, &str)>,
    ) -> Result<Event, StoreError> {
        let mut event = Event {
            session_id: self.session_id.clone(),
            sequence: 0,
            timestamp_ms,
            payload,
        };
        self.write_event(tx, &mut event, output_message)?;
        Ok(event)
    }

    /// Hands this tail to the body of the same transaction ([`Tail::taken_or_of`]). The
    /// deferred records of a commit are written first, by `store::write_deferred`, which
    /// forgets any tail left before it starts and leaves its last one when it is done; the body
    /// that follows in that transaction takes it. `tx` and the connection's count of changes
    /// name the transaction and the point in it.
    pub(crate) fn leave(self, tx: &Transaction<'_>) {
        let mark = (std::ptr::from_ref(tx) as usize, tx.total_changes());
        LEFT_TAIL.with(|left| *left.borrow_mut() = Some((mark, self)));
    }

    /// Forgets the tail left by an earlier transaction of this thread, if any.
    pub(crate) fn forget_left() {
        LEFT_TAIL.with(|left| left.borrow_mut().take());
    }

    /// The tail of `session_id` the deferred records of this transaction left ([`Tail::leave`],
    /// taken: used once) when nothing changed since, otherwise [`Tail::of`].
    pub(crate) fn taken_or_of(tx: &Transaction<'_>, session_id: &str) -> Result<Tail, StoreError> {
        let mark = (std::ptr::from_ref(tx) as usize, tx.total_changes());
        let left = LEFT_TAIL.with(|left| left.borrow_mut().take());
        match left {
            Some((left_mark, tail)) if left_mark == mark && tail.is_of(session_id) => Ok(tail),
            _ => Tail::of(tx, session_id),
        }
    }
}

thread_local! {
    /// The tail the last deferred records of this thread's write transaction left, with the
    /// transaction's address and the connection's count of changes when they left it.
    static LEFT_TAIL: std::cell::RefCell<Option<((usize, u64), Tail)>> =
        const { std::cell::RefCell::new(None) };
}

/// A deferred event record and its handle. `result`: the tool message it completes.
pub(crate) fn deferred_event(
    session_id: &str,
    payload: EventPayload,
    timestamp_ms: u64,
    result: Option<(String, String)>,
) -> (Deferred, DeferredEvent) {
    let stored = std::sync::Arc::new(std::sync::OnceLock::new());
    let record = Deferred::Event {
        event: Event {
            session_id: session_id.to_owned(),
            sequence: 0,
            timestamp_ms,
            payload,
        },
        result,
        stored: stored.clone(),
    };
    (record, DeferredEvent::new(stored))
}

fn session_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionInfo> {
    Ok(SessionInfo {
        id: row.get(0)?,
        parent_id: row.get(1)?,
        created_at_ms: row.get(2)?,
        workspace_root: row.get(3)?,
    })
}

fn session_exists(tx: &Transaction<'_>, id: &str) -> Result<bool, StoreError> {
    Ok(session_rows(tx, id)?.is_some())
}

/// Where a session's messages and events are (schema V14): the keys of `message_rows` and
/// `event_rows` from `number << 32` (index or sequence 0) up to the next session's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionRows {
    /// The key of index (or sequence) 0.
    base: i64,
}

/// Keys a session has: its indices and sequences are the low 32 bits of a key.
const KEYS_PER_SESSION: i64 = 1 << 32;

impl SessionRows {
    /// The key of index (or sequence) 0.
    pub(crate) fn first(self) -> i64 {
        self.base
    }

    /// The first key past the session's rows.
    pub(crate) fn end(self) -> i64 {
        self.base + KEYS_PER_SESSION
    }

    /// The key of index (or sequence) `index`; a session that would pass the last one fails
    /// as SQLite does when a table has no rowid left (`SQLITE_FULL`).
    pub(crate) fn key(self, index: u64, context: &'static str) -> Result<i64, StoreError> {
        match i64::try_from(index) {
            Ok(index) if index < KEYS_PER_SESSION => Ok(self.base + index),
            _ => Err(StoreError::Sqlite {
                context,
                cause: rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                    Some(format!(
                        "a session holds at most {KEYS_PER_SESSION} messages and as many events"
                    )),
                ),
            }),
        }
    }

    /// The key of `index`, or the session's end when `index` is past its last key (a bound of
    /// a range: nothing of the session lies beyond it).
    pub(crate) fn key_at_most(self, index: u64) -> i64 {
        i64::try_from(index)
            .ok()
            .filter(|index| *index < KEYS_PER_SESSION)
            .map_or(self.end(), |index| self.base + index)
    }

    /// The index (or sequence) of a key of this session.
    fn index(self, key: i64) -> u64 {
        u64::try_from(key - self.base).unwrap_or(0)
    }
}

/// The session's rows, `None` if the session is unknown.
pub(crate) fn session_rows(
    tx: &Transaction<'_>,
    id: &str,
) -> Result<Option<SessionRows>, StoreError> {
    let number: Option<i64> = tx
        .prepare_cached("SELECT number FROM sessions WHERE id = ?1")
        .and_then(|mut statement| statement.query_row([id], |row| row.get(0)).optional())
        .ctx("looking up a session")?;
    match number {
        None => Ok(None),
        // Numbers are given from 1 up (the trigger of V14); one past 2^31 would not shift.
        Some(number) if (1..=i64::from(i32::MAX)).contains(&number) => {
            Ok(Some(SessionRows { base: number << 32 }))
        }
        Some(number) => Err(StoreError::Sqlite {
            context: "looking up a session",
            cause: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                Some(format!(
                    "session {id} has the number {number}, out of range"
                )),
            ),
        }),
    }
}

/// The session's rows; [`StoreError::UnknownSession`] unless the session exists.
/// At most `limit` events of `session` with a sequence above `after_sequence`, in order, each
/// with its display body filled in from the message that holds it.
pub(crate) fn events_in(
    tx: &Transaction<'_>,
    session: SessionRows,
    after_sequence: u64,
    limit: u64,
) -> Result<Vec<Event>, StoreError> {
    let mut statement = tx
        .prepare(
            "SELECT e.event_json, json_extract(m.message_json, '$.content'),
                 e.display_body_in_message
             FROM event_rows e LEFT JOIN message_rows m ON m.key = ?1 + e.message_idx
             WHERE e.key > ?2 AND e.key < ?3
             ORDER BY e.key LIMIT ?4",
        )
        .ctx("reading events")?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = statement
        .query_map(
            params![
                session.first(),
                session.key_at_most(after_sequence),
                session.end(),
                limit
            ],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, bool>(2)?,
                ))
            },
        )
        .ctx("reading events")?;
    let mut events = Vec::new();
    for row in rows {
        let (json, output, body_in_message) = row.ctx("reading events")?;
        let mut event: Event = serde_json::from_str(&json).json_ctx("reading events")?;
        if let Some(output) = output {
            if body_in_message {
                crate::at_rest::fill_display_body(&mut event, &output);
            }
            crate::at_rest::fill_legacy_output(&mut event, output);
        }
        events.push(event);
    }
    Ok(events)
}

/// At most `limit` messages of `session` from index `from_index` on, in order.
pub(crate) fn messages_in(
    tx: &Transaction<'_>,
    session: SessionRows,
    from_index: u64,
    limit: u64,
) -> Result<Vec<ModelMessage>, StoreError> {
    let mut statement = tx
        .prepare(
            "SELECT message_json FROM message_rows WHERE key >= ?1 AND key < ?2
             ORDER BY key LIMIT ?3",
        )
        .ctx("reading messages")?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let from = session.key_at_most(from_index);
    let rows = statement
        .query_map(params![from, session.end(), limit], |row| {
            row.get::<_, String>(0)
        })
        .ctx("reading messages")?;
    let mut messages = Vec::new();
    for json in rows {
        let json = json.ctx("reading messages")?;
        messages.push(serde_json::from_str(&json).json_ctx("reading messages")?);
    }
    Ok(messages)
}

pub(crate) fn require_session(tx: &Transaction<'_>, id: &str) -> Result<SessionRows, StoreError> {
    session_rows(tx, id)?.ok_or_else(|| StoreError::UnknownSession(id.to_string()))
}

/// The event kinds `events_kind` leaves out (schema V13: every call writes one of each); its
/// `WHERE` and [`Store::last_event_of_kind`]'s name the same list.
pub(crate) const UNINDEXED_KINDS: [&str; 2] = ["tool.started", "tool.completed"];

/// The statement of [`last_event_sequence`]: each call's event runs it.
pub(crate) const LAST_EVENT_SEQUENCE_SQL: &str =
    "SELECT key FROM event_rows WHERE key >= ?1 AND key < ?2 ORDER BY key DESC LIMIT 1";

/// The statement of [`message_count`]: each call's message runs it.
pub(crate) const MESSAGE_COUNT_SQL: &str =
    "SELECT key FROM message_rows WHERE key >= ?1 AND key < ?2 ORDER BY key DESC LIMIT 1";

/// The highest event sequence of the session, 0 if none: one seek in the key's b-tree.
pub(crate) fn last_event_sequence(
    tx: &Transaction<'_>,
    session: SessionRows,
) -> Result<u64, StoreError> {
    let last = last_index(
        tx,
        LAST_EVENT_SEQUENCE_SQL,
        session,
        "reading the event sequence",
    )?;
    Ok(last.unwrap_or(0))
}

/// The number of messages of the session. Indices are gap-free from 0 (appends take the count,
/// rewinds cut a tail, forks copy all), so this is the last index + 1: one seek in the key's
/// b-tree, where `count(*)` walked every row of the session (the rows hold whole tool results,
/// so a long session made each append slower).
pub(crate) fn message_count(tx: &Transaction<'_>, session: SessionRows) -> Result<u64, StoreError> {
    let last = last_index(tx, MESSAGE_COUNT_SQL, session, "counting messages")?;
    Ok(last.map_or(0, |index| index + 1))
}

/// The index (or sequence) of the session's last row that `sql` (the last key in a range)
/// finds, `None` when it has none.
fn last_index(
    tx: &Transaction<'_>,
    sql: &str,
    session: SessionRows,
    context: &'static str,
) -> Result<Option<u64>, StoreError> {
    let last: Option<i64> = tx
        .prepare_cached(sql)
        .and_then(|mut statement| {
            statement
                .query_row([session.first(), session.end()], |row| row.get(0))
                .optional()
        })
        .ctx(context)?;
    Ok(last.map(|key| session.index(key)))
}

/// The todo list as stored JSON (`[]` if never set).
pub(crate) fn todos_json(tx: &Transaction<'_>, session_id: &str) -> Result<String, StoreError> {
    Ok(tx
        .prepare_cached("SELECT todos_json FROM session_todos WHERE session_id = ?1")
        .and_then(|mut statement| statement.query_row([session_id], |row| row.get(0)))
        .optional()
        .ctx("reading todos")?
        .unwrap_or_else(|| "[]".to_string()))
}

pub(crate) fn write_todos_json(
    tx: &Transaction<'_>,
    session_id: &str,
    json: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO session_todos (session_id, todos_json) VALUES (?1, ?2)
         ON CONFLICT(session_id) DO UPDATE SET todos_json = excluded.todos_json",
        params![session_id, json],
    )
    .ctx("storing todos")?;
    Ok(())
}

/// Checks a todo list as every session store does before keeping it: ids non-empty and unique,
/// at most one item `in_progress`; [`StoreError::InvalidTodos`] says which rule failed.
pub fn validate_todos(todos: &[Todo]) -> Result<(), StoreError> {
    let mut seen = std::collections::HashSet::new();
    for todo in todos {
        if todo.id.trim().is_empty() {
            return Err(StoreError::InvalidTodos(
                "a todo has an empty id".to_string(),
            ));
        }
        if !seen.insert(todo.id.as_str()) {
            return Err(StoreError::InvalidTodos(format!(
                "duplicate todo id {:?}",
                todo.id
            )));
        }
    }
    let in_progress = todos
        .iter()
        .filter(|todo| todo.status == TodoStatus::InProgress)
        .count();
    if in_progress > 1 {
        return Err(StoreError::InvalidTodos(format!(
            "{in_progress} items are in_progress; at most one may be"
        )));
    }
    Ok(())
}

fn copy_events(
    tx: &Transaction<'_>,
    from: SessionRows,
    to: SessionRows,
    new_id: &str,
) -> Result<(), StoreError> {
    let mut statement = tx
        .prepare(
            "SELECT event_json, message_idx, display_body_in_message FROM event_rows
             WHERE key >= ?1 AND key < ?2 ORDER BY key",
        )
        .ctx("forking events")?;
    let rows = statement
        .query_map([from.first(), from.end()], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, Option<u64>>(1)?,
                row.get::<_, bool>(2)?,
            ))
        })
        .ctx("forking events")?;
    let mut insert = tx
        .prepare(
            "INSERT INTO event_rows
             (key, type, timestamp_ms, event_json, message_idx, display_body_in_message)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .ctx("forking events")?;
    for row in rows {
        // Messages are copied with the same indices, so the link to them holds in the fork.
        let (json, message_idx, body_in_message) = row.ctx("forking events")?;
        let mut event: Event = serde_json::from_str(&json).json_ctx("forking events")?;
        event.session_id = new_id.to_string();
        let json = serde_json::to_string(&event).json_ctx("forking events")?;
        insert
            .execute(params![
                to.key(event.sequence, "forking events")?,
                event.payload.kind(),
                event.timestamp_ms,
                json,
                message_idx,
                body_in_message
            ])
            .ctx("forking events")?;
    }
    Ok(())
}
