//! What the store puts on disk: every message, event, journal argument, approval request and
//! artifact is masked with the one secret detector (`clawsmith_protocol::redact`) before it is
//! written; stored call arguments are bounded; and the legacy `output` of a `tool.completed` is
//! not stored a second time beside its tool message, it is derived from it when read.
//!
//! Checkpoint blobs are the exception: undo must give back the exact bytes a turn replaced, so
//! they are kept as they are and protected by the file's permissions (the front end makes the
//! state directory 0700 and the database 0600). The same holds for the blob files beside the
//! database (contents over `FILE_THRESHOLD`, see `blob.rs`): their directories are created 0700
//! and the files 0600 whatever the umask, never through a symlink.

use std::borrow::Cow;

use clawsmith_protocol::redact::{redact, redact_text, to_redacted_json};
use clawsmith_protocol::{Event, EventPayload, ModelMessage};
use serde::Serialize;

use crate::error::{JsonContext, StoreError};

/// Longest call arguments stored (in an assistant message or a journal row), in bytes; longer
/// ones are cut at a character boundary and marked. A refused 500 MB argument must not become
/// a 500 MB row.
pub const MAX_STORED_ARGUMENT_BYTES: usize = 1024 * 1024;

/// `value` as JSON with every string masked, written in one pass (no `serde_json::Value` tree
/// between).
pub(crate) fn redacted_json<T: Serialize>(
    value: &T,
    context: &'static str,
) -> Result<String, StoreError> {
    to_redacted_json(value).json_ctx(context)
}

/// A message as stored: masked, its calls' arguments bounded.
pub(crate) fn message_json(message: &ModelMessage) -> Result<String, StoreError> {
    // Arguments with nothing to mask and within the bound are stored as they are: the message is
    // then written without a copy of it (which would copy every call's id, name and arguments
    // at every batch).
    let as_they_are = message.tool_calls.iter().all(|call| {
        call.arguments.len() <= MAX_STORED_ARGUMENT_BYTES
            && matches!(redact(&call.arguments), Cow::Borrowed(_))
    });
    if as_they_are {
        return redacted_json(message, "storing a message");
    }
    let mut message = message.clone();
    for call in &mut message.tool_calls {
        call.arguments = arguments(&call.arguments);
    }
    redacted_json(&message, "storing a message")
}

/// Call arguments as stored: masked, then bounded (masking first, so a cut never leaves the
/// readable start of a secret).
pub(crate) fn arguments(text: &str) -> String {
    let masked = redact_text(text);
    if masked.len() <= MAX_STORED_ARGUMENT_BYTES {
        return masked;
    }
    let end = masked.floor_char_boundary(MAX_STORED_ARGUMENT_BYTES);
    format!(
        "{}…[clawsmith stored only the first {end} of {} bytes]",
        &masked[..end],
        masked.len()
    )
}

/// An event as stored, and whether its display body was left out. `message_content`: the text
/// of the tool message stored with it. A `tool.completed` then leaves out its legacy `output`
/// (the same text; [`fill_legacy_output`] puts it back), and its display body too when that is
/// the same text (a whole file read: [`fill_display_body`] puts it back). What is left is masked.
pub(crate) fn event_json(
    event: &mut Event,
    message_content: Option<&str>,
) -> Result<(String, bool), StoreError> {
    let (output, body) = match (&mut event.payload, message_content) {
        (EventPayload::ToolCompleted(completed), Some(content)) => {
            // The texts left out are taken out while the rest is written and put back after
            // (the caller hands the event on whole): no copy of a result's text.
            let output = std::mem::take(&mut completed.output);
            // The body as the core left it is masked already; when it equals the message's text,
            // that text had nothing to mask, and the message holds it (masked by the store).
            let body = match &mut completed.result.display {
                Some(display) if display.body.as_deref() == Some(content) => display.body.take(),
                _ => None,
            };
            (Some(output), body)
        }
        _ => (None, None),
    };
    let body_in_message = body.is_some();
    let json = redacted_json(&*event, "storing an event");
    if let EventPayload::ToolCompleted(completed) = &mut event.payload {
        if let Some(output) = output {
            completed.output = output;
        }
        if let (Some(body), Some(display)) = (body, &mut completed.result.display) {
            display.body = Some(body);
        }
    }
    Ok((json?, body_in_message))
}

/// A message as every session store keeps it (this one and the fleet store): masked with the
/// one secret detector, its calls' arguments bounded.
pub fn stored_message_json(message: &ModelMessage) -> Result<String, StoreError> {
    message_json(message)
}

/// An event as a session store that keeps it whole keeps it: masked.
pub fn stored_event_json(event: &Event) -> Result<String, StoreError> {
    redacted_json(event, "storing an event")
}

/// An approval request as every session store keeps it: every string masked.
pub fn stored_request_json(request: &serde_json::Value) -> Result<String, StoreError> {
    redacted_json(request, "storing an approval")
}

/// Journaled call arguments as every session store keeps them: masked, then bounded.
pub fn stored_arguments(text: &str) -> String {
    arguments(text)
}

/// Gives a stored `tool.completed` whose `output` was left out the content of its tool message.
pub(crate) fn fill_legacy_output(event: &mut Event, content: String) {
    if let EventPayload::ToolCompleted(completed) = &mut event.payload
        && completed.output.is_empty()
    {
        completed.output = content;
    }
}

/// Gives a stored `tool.completed` whose display body was left out the content of its tool
/// message (see [`event_json`]).
pub(crate) fn fill_display_body(event: &mut Event, content: &str) {
    if let EventPayload::ToolCompleted(completed) = &mut event.payload
        && let Some(display) = &mut completed.result.display
        && display.body.is_none()
    {
        display.body = Some(content.to_owned());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use clawsmith_protocol::{ModelMessage, ToolCall};

    use super::*;

    /// The message as stored by copying it and bounding every call's arguments (what
    /// `message_json` always did).
    fn through_a_copy(message: &ModelMessage) -> String {
        let mut message = message.clone();
        for call in &mut message.tool_calls {
            call.arguments = arguments(&call.arguments);
        }
        redacted_json(&message, "test").unwrap()
    }

    #[test]
    fn a_message_whose_arguments_need_nothing_is_stored_as_a_copy_would_be() {
        let call = |arguments: String| ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments,
        };
        let clean = r#"{"path": "src/main.rs", "limit": 100}"#.to_owned();
        let secret = r#"{"command": "curl -H 'Authorization: Bearer abc.def'"}"#.to_owned();
        let long = format!(
            "{{\"text\": \"{}\"}}",
            "x".repeat(MAX_STORED_ARGUMENT_BYTES)
        );
        for calls in [
            vec![],
            vec![call(clean.clone())],
            vec![call(clean.clone()), call(secret)],
            vec![call(long), call(clean)],
        ] {
            let message = ModelMessage::assistant_with_calls("password=hunter2", calls);
            let stored = message_json(&message).unwrap();
            assert_eq!(stored, through_a_copy(&message));
            assert!(!stored.contains("hunter2") && !stored.contains("abc.def"));
            assert!(stored.len() < MAX_STORED_ARGUMENT_BYTES + 1024);
        }
    }
}
