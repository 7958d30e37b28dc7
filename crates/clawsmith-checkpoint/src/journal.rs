//! The journal of side-effecting calls (A8): a row written *before* the side effect and closed
//! after it, so a process killed in between leaves evidence that recovery turns into
//! `unknown` / `interrupted`.

use clawsmith_protocol::{
    Event, EventPayload, ModelMessage, ToolCompleted, ToolResultSummary, ToolStatus,
};
use rusqlite::params;

use crate::error::{JsonContext, SqlContext, StoreError};
use crate::session::{Tail, deferred_event, require_session};
use crate::store::{Deferred, DeferredEvent, Store};

/// What [`Store::journal_start`] records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalStart {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The call id (unique within the turn).
    pub call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The call's arguments as JSON text.
    pub args_json: String,
}

/// One journal row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// The call id.
    pub call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The call's arguments as JSON text.
    pub args_json: String,
    /// When the call was journaled (store clock, ms).
    pub started_at_ms: u64,
    /// When it was closed; `None` while it runs (or after a crash).
    pub closed_at_ms: Option<u64>,
    /// How it was closed.
    pub status: Option<ToolStatus>,
}

impl Store {
    /// Records that a side-effecting call is about to run. Returns once the row is committed
    /// (synchronous = FULL), so the side effect may start only after this returns `Ok`.
    /// Journaling the same call twice is an error (`Sqlite`, a primary-key violation).
    pub fn journal_start(&self, start: &JournalStart) -> Result<(), StoreError> {
        let now = self.now_ms();
        self.write("journaling a call", |tx| {
            require_session(tx, &start.session_id)?;
            insert_entry(tx, start, now)
        })
    }

    /// Starts a call in one transaction: the batch's assistant message when `assistant` is given
    /// (the first store write of a batch carries it), the journal entry of a side-effecting call
    /// when `journal` is given, and its `tool.started` event (with the session's next sequence).
    /// Returns once all of it is committed, so the side effect may start only after this returns
    /// `Ok`; on `Err` nothing of it was stored. One commit where there were up to three. Without
    /// a journal entry nothing is guarded, and under `Durability::Full` the commit is not fsynced
    /// on its own: the call's close fsyncs it.
    pub fn start_call(
        &self,
        session_id: &str,
        assistant: Option<&ModelMessage>,
        journal: Option<&JournalStart>,
        started: EventPayload,
        timestamp_ms: u64,
    ) -> Result<Event, StoreError> {
        let assistant = assistant.map(crate::at_rest::message_json).transpose()?;
        let now = self.now_ms();
        let body = |tx: &rusqlite::Transaction<'_>| {
            let mut tail = Tail::taken_or_of(tx, session_id)?;
            if let Some(json) = &assistant {
                tail.insert_message(tx, json)?;
            }
            if let Some(start) = journal {
                if start.session_id != session_id {
                    return Err(StoreError::UnknownSession(start.session_id.clone()));
                }
                insert_entry(tx, start, now)?;
            }
            tail.insert_event(tx, started, timestamp_ms, None)
        };
        // Only a journal entry guards a side effect; a read's start rides on its close's fsync.
        if journal.is_some() {
            self.write("starting a call", body)
        } else {
            self.write_unsynced("starting a call", body)
        }
    }

    /// [`Store::start_call`] of a call that guards no side effect (no journal entry), deferred
    /// to the store's next commit: the batch's assistant message when `assistant` is given, and
    /// `tool.started`. The call's close ([`Store::close_call`]) then writes its start and close
    /// in one commit, after the call ran; a process killed while it runs leaves none of it. A
    /// side-effecting call must use [`Store::start_call`]: its journal entry is durable before
    /// its side effect. Fails only when the message cannot be encoded (nothing is deferred).
    pub fn defer_call_start(
        &self,
        session_id: &str,
        assistant: Option<&ModelMessage>,
        started: EventPayload,
        timestamp_ms: u64,
    ) -> Result<DeferredEvent, StoreError> {
        let assistant = assistant.map(crate::at_rest::message_json).transpose()?;
        let (event, handle) = deferred_event(session_id, started, timestamp_ms, None);
        let message = assistant.map(|json| Deferred::Message {
            session_id: session_id.to_owned(),
            json,
        });
        self.defer(message.into_iter().chain([event]));
        Ok(handle)
    }

    /// [`Store::close_call`] of a call without a journal entry, deferred to the store's next
    /// commit: for a host that commits right after (a turn's finish), so a turn of reads is
    /// one commit. Fails only when the message cannot be encoded (nothing is deferred).
    pub fn defer_call_close(
        &self,
        session_id: &str,
        completed: EventPayload,
        timestamp_ms: u64,
        message: &ModelMessage,
    ) -> Result<DeferredEvent, StoreError> {
        let json = tool_message_json(&completed, message)?;
        // Linked to the message only when it holds the `output` (as `close_call` links it);
        // otherwise the message is a record of its own just before the event.
        let linked = output_in_message(&completed, message);
        let (result, lone) = if linked {
            (Some((json, message.content.clone())), None)
        } else {
            (
                None,
                Some(Deferred::Message {
                    session_id: session_id.to_owned(),
                    json,
                }),
            )
        };
        let (event, handle) = deferred_event(session_id, completed, timestamp_ms, result);
        self.defer(lone.into_iter().chain([event]));
        Ok(handle)
    }

    /// Closes a journaled call. Returns `false` if no open entry matched (unknown or already
    /// closed), which changes nothing.
    pub fn journal_close(
        &self,
        session_id: &str,
        call_id: &str,
        status: ToolStatus,
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        self.write("closing a journaled call", |tx| {
            close_entry(tx, session_id, call_id, status, now)
        })
    }

    /// Closes a call in one transaction: its journal entry (when `journaled`), its
    /// `tool.completed` event (with the session's next sequence) and its tool message. One commit
    /// instead of three, and no crash can leave a completion event without its message.
    pub fn close_call(
        &self,
        session_id: &str,
        journaled: Option<(&str, ToolStatus)>,
        completed: EventPayload,
        timestamp_ms: u64,
        message: &ModelMessage,
    ) -> Result<Event, StoreError> {
        let json = tool_message_json(&completed, message)?;
        let linked = output_in_message(&completed, message).then_some(message.content.as_str());
        self.close_in_one_commit(
            session_id,
            journaled,
            completed,
            timestamp_ms,
            &json,
            linked,
        )
    }

    /// [`Store::close_call`] of the tool message made from `completed` itself: its call id, its
    /// tool name, its `output` as the text, and `summary` — the text lent to the message while
    /// both are stored, not copied (a copy would give the tool message a second copy of a read
    /// file at every call). Stores what [`Store::close_call`] stores for that message, and
    /// returns the event as given.
    pub fn close_call_with_message(
        &self,
        session_id: &str,
        journaled: Option<(&str, ToolStatus)>,
        mut completed: ToolCompleted,
        timestamp_ms: u64,
        summary: ToolResultSummary,
    ) -> Result<Event, StoreError> {
        let message = ModelMessage::tool_result(
            completed.tool_call_id.clone(),
            completed.tool_name.clone(),
            std::mem::take(&mut completed.output),
            summary,
        );
        // The event's `output` is the message's text: written once, in the message (as
        // `close_call` links an `output` equal to its message's text).
        let completed = EventPayload::ToolCompleted(completed);
        let json = tool_message_json(&completed, &message)?;
        let mut event = self.close_in_one_commit(
            session_id,
            journaled,
            completed,
            timestamp_ms,
            &json,
            Some(&message.content),
        )?;
        if let EventPayload::ToolCompleted(done) = &mut event.payload {
            done.output = message.content;
        }
        Ok(event)
    }

    /// The commit of [`Store::close_call`]: the journal entry's close (when `journaled`), the
    /// tool message (`json`) and the event, linked to the message when `linked` (the message's
    /// text, which the event's `output` then repeats).
    fn close_in_one_commit(
        &self,
        session_id: &str,
        journaled: Option<(&str, ToolStatus)>,
        completed: EventPayload,
        timestamp_ms: u64,
        json: &str,
        linked: Option<&str>,
    ) -> Result<Event, StoreError> {
        self.write("closing a call", |tx| {
            // Where the deferred records just written left the session (a read's start).
            let mut tail = Tail::taken_or_of(tx, session_id)?;
            if let Some((call_id, status)) = journaled {
                close_entry(tx, session_id, call_id, status, timestamp_ms)?;
            }
            let index = tail.insert_message(tx, json)?;
            tail.insert_event(
                tx,
                completed,
                timestamp_ms,
                linked.map(|content| (index, content)),
            )
        })
    }

    /// Whether the journal already holds `call_id` in this turn (open or closed): a provider's
    /// call id names one call per turn (many number them `call_0`, `call_1` in every turn).
    pub fn journal_has_call(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
    ) -> Result<bool, StoreError> {
        self.read_committed("looking up a journaled call", |tx| {
            let found: i64 = tx
                .prepare_cached(
                    "SELECT COUNT(*) FROM journal
                     WHERE session_id = ?1 AND turn_id = ?2 AND call_id = ?3",
                )
                .and_then(|mut statement| {
                    statement.query_row(params![session_id, turn_id, call_id], |row| row.get(0))
                })
                .ctx("looking up a journaled call")?;
            Ok(found > 0)
        })
    }

    /// Calls of the session that were started and never closed, oldest first.
    pub fn unfinished_calls(&self, session_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.journal_query(session_id, "AND closed_at IS NULL")
    }

    /// The whole journal of the session, oldest first.
    pub fn journal(&self, session_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.journal_query(session_id, "")
    }

    fn journal_query(
        &self,
        session_id: &str,
        filter: &str,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let sql = format!(
            "SELECT session_id, turn_id, call_id, tool_name, args_json, started_at, closed_at, status
             FROM journal WHERE session_id = ?1 {filter} ORDER BY started_at, rowid"
        );
        self.read("reading the journal", |tx| {
            require_session(tx, session_id)?;
            let mut statement = tx.prepare(&sql).ctx("reading the journal")?;
            let rows = statement
                .query_map([session_id], |row| {
                    Ok((
                        JournalEntry {
                            session_id: row.get(0)?,
                            turn_id: row.get(1)?,
                            call_id: row.get(2)?,
                            tool_name: row.get(3)?,
                            args_json: row.get(4)?,
                            started_at_ms: row.get(5)?,
                            closed_at_ms: row.get(6)?,
                            status: None,
                        },
                        row.get::<_, Option<String>>(7)?,
                    ))
                })
                .ctx("reading the journal")?;
            let mut entries = Vec::new();
            for row in rows {
                let (mut entry, status) = row.ctx("reading the journal")?;
                if let Some(status) = status {
                    entry.status = Some(
                        serde_json::from_value(serde_json::Value::String(status))
                            .json_ctx("reading a journal status")?,
                    );
                }
                entries.push(entry);
            }
            Ok(entries)
        })
    }
}

/// Whether the tool message holds the text `completed`'s legacy `output` repeats (then stored
/// once, in the message).
/// The tool message of `completed` as stored ([`crate::at_rest::message_json`]), without
/// scanning its text a second time when the core already did (masking a read file's text
/// twice per call was ~5% of the pipeline pair's samples). The `tool.completed` display
/// body is the core's masked copy of the result (`redact_display`, the same detector); when it
/// equals the message's text, that text is what masking gives back, and masking it again
/// changes nothing — so only the message's other fields are masked here.
fn tool_message_json(
    completed: &EventPayload,
    message: &ModelMessage,
) -> Result<String, StoreError> {
    let masked_already = matches!(completed, EventPayload::ToolCompleted(done)
        if done.result.display.as_ref().and_then(|display| display.body.as_deref())
            == Some(message.content.as_str()));
    if !masked_already || !message.tool_calls.is_empty() {
        return crate::at_rest::message_json(message);
    }
    clawsmith_protocol::redact::to_redacted_json_except(message, "content", &message.content)
        .json_ctx("storing a message")
}

fn output_in_message(completed: &EventPayload, message: &ModelMessage) -> bool {
    matches!(completed, EventPayload::ToolCompleted(done)
        if message.tool_call_id.as_deref() == Some(done.tool_call_id.as_str())
            && message.content == done.output)
}

/// Closes an open journal entry; `false` when there was none (unknown or already closed).
fn close_entry(
    tx: &rusqlite::Transaction<'_>,
    session_id: &str,
    call_id: &str,
    status: ToolStatus,
    closed_at_ms: u64,
) -> Result<bool, StoreError> {
    let changed = tx
        .prepare_cached(
            "UPDATE journal SET closed_at = ?3, status = ?4
             WHERE session_id = ?1 AND call_id = ?2 AND closed_at IS NULL",
        )
        .and_then(|mut statement| {
            statement.execute(params![session_id, call_id, closed_at_ms, status.as_str()])
        })
        .ctx("closing a journaled call")?;
    Ok(changed > 0)
}

/// Inserts a journal row (masked, bounded arguments).
fn insert_entry(
    tx: &rusqlite::Transaction<'_>,
    start: &JournalStart,
    now: u64,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO journal (session_id, call_id, turn_id, tool_name, args_json, started_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            start.session_id,
            start.call_id,
            start.turn_id,
            start.tool_name,
            crate::at_rest::arguments(&start.args_json),
            now
        ])
    })
    .ctx("journaling a call")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawsmith_protocol::{Display, DisplayKind, ToolCall, ToolExecutionResult, TurnStarted};

    fn completed_with_body(body: &str) -> EventPayload {
        let mut result = ToolExecutionResult::success(body);
        result.metadata.display = Some(Display::new(DisplayKind::Text).with_body(body));
        EventPayload::ToolCompleted(ToolCompleted::new("c1", "t", "read_file", &result))
    }

    fn tool_message(content: &str) -> ModelMessage {
        ModelMessage::tool_result(
            "c1",
            "read_file",
            content.to_owned(),
            ToolExecutionResult::success(content).summary(),
        )
    }

    #[test]
    fn a_text_the_core_masked_is_stored_as_the_full_masking_stores_it() {
        let text = "fn main() {}\nlet x = 1;\n".repeat(100);
        let message = tool_message(&text);
        let stored = tool_message_json(&completed_with_body(&text), &message).unwrap();
        assert_eq!(stored, crate::at_rest::message_json(&message).unwrap());
        let back: ModelMessage = serde_json::from_str(&stored).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn a_text_whose_display_body_differs_is_masked_by_the_store() {
        let secret = "password=hunter2-very-secret-value";
        let text = format!("config:\n{secret}\n");
        let message = tool_message(&text);
        // The core's masked body differs from the raw text: the store masks the text itself.
        let masked_body = clawsmith_protocol::redact::redact_text(&text);
        assert_ne!(masked_body, text);
        let stored = tool_message_json(&completed_with_body(&masked_body), &message).unwrap();
        assert!(!stored.contains("hunter2"), "{stored}");
        assert_eq!(stored, crate::at_rest::message_json(&message).unwrap());
        // No display body at all: the same.
        let plain = EventPayload::ToolCompleted(ToolCompleted::new(
            "c1",
            "t",
            "read_file",
            &ToolExecutionResult::success(text.clone()),
        ));
        let stored = tool_message_json(&plain, &message).unwrap();
        assert!(!stored.contains("hunter2"), "{stored}");
    }

    /// A read's records, as the pipeline writes them: `rounds` calls, each a deferred start
    /// (its batch's message and `tool.started`) and a close, through `close_call` (`lent`
    /// false: the event holds a copy of the text) or `close_call_with_message`.
    fn reads(store: &Store, session: &str, rounds: usize, lent: bool) {
        for round in 0..rounds {
            let id = format!("c{round}");
            let text = format!("line {round}\n").repeat(400);
            let result = ToolExecutionResult::success(text.clone())
                .with_display(Display::new(DisplayKind::Text).with_body(text));
            let call = ToolCall {
                id: id.clone(),
                name: "read_file".into(),
                arguments: "{}".into(),
            };
            let assistant = ModelMessage::assistant_with_calls(String::new(), vec![call]);
            let started = EventPayload::TurnStarted(TurnStarted {
                turn_id: id.clone(),
            });
            store
                .defer_call_start(session, Some(&assistant), started, 1)
                .unwrap();
            let completed = ToolCompleted::new(id.as_str(), "t", "read_file", &result);
            let event = if lent {
                store
                    .close_call_with_message(session, None, completed.clone(), 2, result.summary())
                    .unwrap()
            } else {
                let message = ModelMessage::tool_result(
                    id.as_str(),
                    "read_file",
                    result.content.clone(),
                    result.summary(),
                );
                let payload = EventPayload::ToolCompleted(completed.clone());
                store
                    .close_call(session, None, payload, 2, &message)
                    .unwrap()
            };
            // The event comes back as given, its text included.
            assert_eq!(event.payload, EventPayload::ToolCompleted(completed));
        }
    }

    fn history(store: &Store, session: &str) -> (Vec<(u64, EventPayload)>, Vec<ModelMessage>) {
        let events = store.events(session).unwrap();
        let events = events
            .into_iter()
            .map(|event| (event.sequence, event.payload))
            .collect();
        (events, store.messages(session).unwrap())
    }

    /// How many times each lookup of a session's tail has run on `store`'s connection.
    fn lookups(store: &Store) -> [u64; 3] {
        let connection = store.connection();
        [
            "SELECT number FROM sessions WHERE id = ?1",
            crate::session::MESSAGE_COUNT_SQL,
            crate::session::LAST_EVENT_SEQUENCE_SQL,
        ]
        .map(|sql| {
            let statement = connection.prepare_cached(sql).unwrap();
            u64::try_from(statement.get_status(rusqlite::StatementStatus::Run)).unwrap()
        })
    }

    #[test]
    fn a_close_after_deferred_records_counts_on_where_they_left_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("db")).unwrap();
        for session in ["copied", "lent"] {
            store.create_session(session, "/w").unwrap();
        }
        reads(&store, "copied", 1, false);
        reads(&store, "lent", 1, true);
        let before = lookups(&store);
        reads(&store, "copied", 4, false);
        reads(&store, "lent", 4, true);
        // One commit a call, each looking up its session, message count and event sequence
        // once: the close counts on what its deferred start just wrote.
        let after = lookups(&store);
        assert_eq!(after, before.map(|count| count + 8));
        // Stored the same way either way: indices and sequences gap-free, texts whole.
        let copied = history(&store, "copied");
        assert_eq!(history(&store, "lent"), copied);
        assert_eq!(
            copied
                .0
                .iter()
                .map(|(sequence, _)| *sequence)
                .collect::<Vec<_>>(),
            (1..=10).collect::<Vec<u64>>()
        );
        assert_eq!(copied.1.len(), 10);
        assert_eq!(copied.1[9].content, "line 3\n".repeat(400));
        match &copied.0[9].1 {
            EventPayload::ToolCompleted(done) => assert_eq!(done.output, copied.1[9].content),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn where_one_commit_left_a_session_is_looked_up_again_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = Store::open(&path).unwrap();
        let other = Store::open(&path).unwrap();
        store.create_session("s", "/w").unwrap();
        // A commit of deferred records alone leaves where they ended (index 1, sequence 2);
        // another connection then appends a message and an event.
        reads(&store, "s", 1, true);
        let user = ModelMessage::text(clawsmith_protocol::Role::User, "from elsewhere");
        store.defer_message("s", &user).unwrap();
        store.flush_deferred().unwrap();
        other.append_message("s", &user).unwrap();
        let started = EventPayload::TurnStarted(TurnStarted {
            turn_id: "t2".into(),
        });
        other.append_event("s", started, 3).unwrap();
        // The next commit of this store (a close with nothing deferred before it) writes after
        // them, not over them.
        let result = ToolExecutionResult::success("done");
        let completed = ToolCompleted::new("c9", "t", "read_file", &result);
        store
            .close_call_with_message("s", None, completed, 4, result.summary())
            .unwrap();
        let (events, messages) = history(&store, "s");
        assert_eq!(
            events
                .iter()
                .map(|(sequence, _)| *sequence)
                .collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(messages.len(), 5);
        assert_eq!(messages[2..4], [user.clone(), user]);
        assert_eq!(messages[4].content, "done");
    }
}
