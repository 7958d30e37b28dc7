//! The one escaping function for names (and matched lines) that reach an output.
//!
//! A file name is chosen by whoever can create files in the workspace; a newline in it would add a
//! fake line to a listing, a carriage return or an escape sequence would rewrite what a terminal
//! shows. Every listing, search line and message that names a path passes through
//! [`escape_control`], so a name can never forge output.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character written as a visible escape: `\n`, `\r`, `\t`, `\xNN` for
/// the other C0 controls and DEL, `\u{NN}` for the C1 controls, and `\u{NNNN}` for the Unicode
/// line and paragraph separators and the bidirectional overrides (which reorder what a reader
/// sees). Other characters, the backslash included, are kept as they are: the escape makes
/// forging impossible, it is not meant to be reversible. Borrowed when nothing needed escaping.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        match character {
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            '\0'..='\u{1f}' | '\u{7f}' => {
                // Writing to a String cannot fail.
                let _ = write!(escaped, "\\x{:02x}", u32::from(character));
            }
            other if needs_escape(other) => {
                let _ = write!(escaped, "\\u{{{:x}}}", u32::from(other));
            }
            other => escaped.push(other),
        }
    }
    Cow::Owned(escaped)
}

fn needs_escape(character: char) -> bool {
    character.is_control()
        || matches!(
            character,
            '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::escape_control;

    fn check(text: &str, expected: &str) {
        assert_eq!(escape_control(text), expected, "{text:?}");
    }

    #[test]
    fn escape_table() {
        check("src/main.rs", "src/main.rs");
        check("", "");
        check("a\nb", "a\\nb");
        check("a\r\n", "a\\r\\n");
        check("tab\there", "tab\\there");
        check("\u{1b}[31mred", "\\x1b[31mred");
        check("nul\0", "nul\\x00");
        check("del\u{7f}", "del\\x7f");
        check("csi\u{9b}", "csi\\u{9b}");
        check("nel\u{85}", "nel\\u{85}");
        check("line\u{2028}sep", "line\\u{2028}sep");
        check("rlo\u{202e}txt.exe", "rlo\\u{202e}txt.exe");
        check("isolate\u{2066}", "isolate\\u{2066}");
        check("back\\slash é ü 日本", "back\\slash é ü 日本");
    }
}
