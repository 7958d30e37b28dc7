//! The journal of side-effecting calls (A8): a row written *before* the side effect and closed
//! after it, so a process killed in between leaves evidence that recovery turns into
//! `unknown` / `interrupted`.

use clawsmith_protocol::{Event, EventPayload, ModelMessage, ToolStatus};
use rusqlite::params;

use crate::error::{JsonContext, SqlContext, StoreError};
use crate::session::{deferred_event, insert_event, insert_message, require_session};
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
            let session = require_session(tx, session_id)?;
            if let Some(json) = &assistant {
                insert_message(tx, session, json)?;
            }
            if let Some(start) = journal {
                if start.session_id != session_id {
                    return Err(StoreError::UnknownSession(start.session_id.clone()));
                }
                insert_entry(tx, start, now)?;
            }
            insert_event(tx, session, session_id, started, timestamp_ms, None)
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
        let output_in_message = output_in_message(&completed, message);
        self.write("closing a call", |tx| {
            let session = require_session(tx, session_id)?;
            if let Some((call_id, status)) = journaled {
                close_entry(tx, session_id, call_id, status, timestamp_ms)?;
            }
            let index = insert_message(tx, session, &json)?;
            insert_event(
                tx,
                session,
                session_id,
                completed,
                timestamp_ms,
                output_in_message.then_some((index, message.content.as_str())),
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
/// scanning its text a second time when the core already did (issue 15: a read file's text was
/// masked twice per call, ~5% of the pipeline pair's samples). The `tool.completed` display
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
    clawsmith_protocol::redact::to_redacted_json_except(message, "content", message.content.len())
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
    use clawsmith_protocol::{Display, DisplayKind, ToolCompleted, ToolExecutionResult};

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
}
