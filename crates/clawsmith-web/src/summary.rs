//! What the session list says of a session, so a person can tell sessions apart without opening
//! them: its first request (or, for a session driven without a model, its first tool call), how
//! many turns and file changes it holds, and when it last did anything.

use clawsmith_protocol::{EventPayload, Role, truncate_to_boundary};
use clawsmith_store::{SessionInfo, SessionStore, StoreError};
use serde::Serialize;

/// The most bytes of a title (one line of the list).
pub(crate) const TITLE_MAX_BYTES: usize = 160;

/// How many of a session's first messages are searched for the person's request (a system
/// prompt and instructions may come first).
const FIRST_MESSAGES: u64 = 16;

/// How many of a session's first events are searched for a tool call.
const FIRST_EVENTS: u64 = 64;

/// One session as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionSummary {
    /// The first line of the first request, or `tool: summary` of the first tool call.
    pub(crate) title: Option<String>,
    /// Where the title comes from: `request` or `tool`.
    pub(crate) title_source: Option<&'static str>,
    /// Turns with a checkpoint.
    pub(crate) turns: usize,
    /// Paths changed, summed over the turns.
    pub(crate) changes: u64,
    /// The time of the last event, else of the last checkpoint, else the session's creation.
    pub(crate) last_activity_ms: u64,
}

/// Reads the summary of one session: a few indexed reads, never its whole history.
pub(crate) fn summarize(
    store: &dyn SessionStore,
    session: &SessionInfo,
) -> Result<SessionSummary, StoreError> {
    let (title, title_source) = match first_request(store, &session.id)? {
        Some(request) => (Some(request), Some("request")),
        None => match first_tool_call(store, &session.id)? {
            Some(call) => (Some(call), Some("tool")),
            None => (None, None),
        },
    };
    let checkpoints = store.checkpoints(&session.id)?;
    let last_event = match store.last_event_sequence(&session.id)? {
        0 => None,
        last => store
            .events_page(&session.id, last - 1, 1)?
            .first()
            .map(|event| event.timestamp_ms),
    };
    let last_checkpoint = checkpoints
        .iter()
        .map(|c| c.finished_at_ms.unwrap_or(c.created_at_ms))
        .max();
    Ok(SessionSummary {
        title,
        title_source,
        turns: checkpoints.len(),
        changes: checkpoints.iter().map(|c| c.file_count).sum(),
        last_activity_ms: last_event
            .or(last_checkpoint)
            .unwrap_or(session.created_at_ms),
    })
}

/// The first non-empty line of the session's first message from the person.
fn first_request(store: &dyn SessionStore, session_id: &str) -> Result<Option<String>, StoreError> {
    Ok(store
        .messages_page(session_id, 0, FIRST_MESSAGES)?
        .into_iter()
        .find(|message| message.role == Role::User)
        .and_then(|message| one_line(&message.content)))
}

/// `tool: summary` (or the tool's name) of the session's first tool call.
fn first_tool_call(
    store: &dyn SessionStore,
    session_id: &str,
) -> Result<Option<String>, StoreError> {
    Ok(store
        .events_page(session_id, 0, FIRST_EVENTS)?
        .into_iter()
        .find_map(|event| match event.payload {
            EventPayload::ToolStarted(started) => Some(match started.summary {
                Some(summary) if !summary.trim().is_empty() => {
                    format!("{}: {}", started.tool_name, summary.trim())
                }
                _ => started.tool_name,
            }),
            _ => None,
        })
        .and_then(|text| one_line(&text)))
}

/// The first non-empty line, trimmed and cut to [`TITLE_MAX_BYTES`].
fn one_line(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|line| !line.is_empty())?;
    Some(truncate_to_boundary(line.to_owned(), TITLE_MAX_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawsmith_checkpoint::Store;
    use clawsmith_protocol::ModelMessage;

    #[test]
    fn titles_are_one_short_line() {
        for (text, title) in [
            ("fix the build\nthen run the tests", Some("fix the build")),
            ("\n\n   \n  rename foo  \n", Some("rename foo")),
            ("", None),
            ("  \n \t\n", None),
        ] {
            assert_eq!(one_line(text).as_deref(), title, "{text:?}");
        }
        let long = "é".repeat(200);
        let title = one_line(&long).unwrap();
        assert!(
            title.len() <= TITLE_MAX_BYTES && title.ends_with('…'),
            "{title}"
        );
    }

    #[test]
    fn a_session_is_named_by_its_first_request() {
        let store = Store::open_in_memory().unwrap();
        store.create_session("s", "/ws").unwrap();
        for message in [
            ModelMessage::text(Role::System, "you are an agent"),
            ModelMessage::text(Role::User, "add a --verbose flag\nto the CLI"),
            ModelMessage::text(Role::User, "a later request"),
        ] {
            store.append_message("s", &message).unwrap();
        }
        let session = store.get_session("s").unwrap().unwrap();
        let summary = summarize(&store, &session).unwrap();
        assert_eq!(summary.title.as_deref(), Some("add a --verbose flag"));
        assert_eq!(summary.title_source, Some("request"));
        assert_eq!((summary.turns, summary.changes), (0, 0));
        assert_eq!(summary.last_activity_ms, session.created_at_ms);
    }

    #[test]
    fn a_session_without_a_request_is_named_by_its_first_tool_call() {
        let store = Store::open_in_memory().unwrap();
        store.create_session("s", "/ws").unwrap();
        let session = store.get_session("s").unwrap().unwrap();
        assert_eq!(summarize(&store, &session).unwrap().title, None);
        for (payload, at) in [
            (
                serde_json::json!({"type": "turn.started", "turnId": "t1"}),
                5,
            ),
            (
                serde_json::json!({"type": "tool.started", "toolCallId": "c1", "turnId": "t1",
                    "toolName": "run_command", "risk": "execute", "sideEffect": true,
                    "summary": "cargo test\nmore"}),
                7,
            ),
        ] {
            let payload = serde_json::from_value(payload).unwrap();
            store.append_event("s", payload, at).unwrap();
        }
        let summary = summarize(&store, &session).unwrap();
        assert_eq!(summary.title.as_deref(), Some("run_command: cargo test"));
        assert_eq!(summary.title_source, Some("tool"));
        assert_eq!(summary.last_activity_ms, 7, "the last event's time");
    }
}
