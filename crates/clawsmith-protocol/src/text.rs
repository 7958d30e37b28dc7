//! Bounding text by bytes and locating a byte offset: the helpers every crate uses to cut a
//! string at a character boundary (with a marker or without, keeping its head or its tail) and
//! to turn a parser's byte span into a line and column.
//!
//! A cut with no marker is `str::floor_char_boundary` (a head) or `str::ceil_char_boundary` (a
//! tail) at the call site; what lives here is a cut that does more: it adds a marker, and the
//! two ways a marker meets the byte budget are two functions, so a caller picks one by name.

/// The marker a cut text ends with.
const CUT_MARKER: &str = "…";

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut with `…`: the
/// marker counts toward `max` (a bounded field stays within its bound).
pub fn truncate_to_boundary(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let cut = text.floor_char_boundary(max.saturating_sub(CUT_MARKER.len()));
    text.truncate(cut);
    text.push_str(CUT_MARKER);
    text
}

/// The first `max` bytes of `text` (fewer, to end on a character boundary), followed by `…` when
/// anything was cut: the marker comes on top of `max` (a message shows `max` bytes of its text).
pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}{CUT_MARKER}", &text[..text.floor_char_boundary(max)])
}

/// 1-based line and column (in characters) of byte `offset` of `text`. An offset inside a
/// character is that character's start; one past the end is the end.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |last| last.chars().count())
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_within_the_budget() {
        // (text, max, expected)
        let table = [
            ("hello", 5, "hello"),
            ("hello", 4, "h…"),
            ("hello", 2, "…"),
            ("héllo", 5, "h…"),
            ("ééé", 6, "ééé"),
            ("éééé", 7, "éé…"),
            ("éééé", 6, "é…"),
            ("", 0, ""),
        ];
        for (text, max, expected) in table {
            assert_eq!(
                truncate_to_boundary(text.to_owned(), max),
                expected,
                "{text:?} {max}"
            );
        }
    }

    #[test]
    fn clip_adds_the_marker_after_the_budget() {
        // (text, max, expected)
        let table = [
            ("hello", 5, "hello"),
            ("hello", 4, "hell…"),
            ("héllo", 2, "h…"),
            ("héllo", 3, "hé…"),
            ("hello", 0, "…"),
        ];
        for (text, max, expected) in table {
            assert_eq!(clip(text, max), expected, "{text:?} {max}");
        }
    }

    #[test]
    fn line_and_column_of_an_offset() {
        // (text, offset, (line, column))
        let table = [
            ("abc", 0, (1, 1)),
            ("abc", 2, (1, 3)),
            ("a\nbc", 2, (2, 1)),
            ("a\nbc", 3, (2, 2)),
            ("é\nxé", 6, (2, 3)),
            // Inside the second `é` (bytes 4–5): that character's start.
            ("é\nxé", 5, (2, 2)),
            ("ab", 99, (1, 3)),
        ];
        for (text, offset, expected) in table {
            assert_eq!(line_column(text, offset), expected, "{text:?} {offset}");
        }
    }
}
