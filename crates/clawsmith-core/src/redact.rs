//! Redaction of display data (A5): secrets never reach a UI or an event log through `display`.
//! The detector is `clawsmith_protocol::redact`, shared with the store (which masks what it
//! writes to disk with the same rules); this module applies it to a [`Display`] and bounds it.

use clawsmith_protocol::redact::redact_owned;
pub use clawsmith_protocol::redact::{REDACTED, is_secret_key, redact_json, redact_text};
use clawsmith_protocol::{Display, DisplayField};

/// Redacts and re-bounds a display (title, body, field labels and values). A text with nothing
/// to mask is kept as it is, not copied.
pub fn redact_display(display: Display) -> Display {
    let Display {
        kind,
        title,
        body,
        fields,
    } = display;
    Display {
        kind,
        title: title.map(redact_owned),
        body: body.map(redact_owned),
        fields: fields
            .into_iter()
            .map(|field| {
                let value = if is_secret_key(&field.label) {
                    REDACTED.to_owned()
                } else {
                    redact_owned(field.value)
                };
                DisplayField {
                    label: redact_owned(field.label),
                    value,
                }
            })
            .collect(),
    }
    .bounded()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawsmith_protocol::DisplayKind;

    #[test]
    fn display_fields_with_secret_labels_are_masked() {
        let display = Display::new(DisplayKind::Command)
            .with_title("curl -H 'Authorization: Bearer xyz123'")
            .with_field("api token", "plain-looking")
            .with_field("exit code", 0);
        let redacted = redact_display(display);
        assert_eq!(
            redacted.title.as_deref(),
            Some("curl -H 'Authorization: Bearer [REDACTED]'")
        );
        assert_eq!(redacted.fields[0].value, REDACTED);
        assert_eq!(redacted.fields[1].value, "0");
    }
}
