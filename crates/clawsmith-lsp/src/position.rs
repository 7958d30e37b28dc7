//! 1-based character lines and columns (the model's) ⇄ LSP positions (0-based lines, columns
//! in the negotiated encoding's code units).

use lsp_types::Position;

/// The position encoding negotiated in `initialize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionEncoding {
    /// UTF-16 code units: the protocol's default, used unless the server offers UTF-8.
    Utf16,
    /// Bytes.
    Utf8,
}

impl PositionEncoding {
    /// From the server's `positionEncoding` capability (absent ⇒ UTF-16).
    pub fn from_server(kind: Option<&lsp_types::PositionEncodingKind>) -> PositionEncoding {
        match kind {
            Some(kind) if *kind == lsp_types::PositionEncodingKind::UTF8 => PositionEncoding::Utf8,
            _ => PositionEncoding::Utf16,
        }
    }

    fn units(self, character: char) -> u32 {
        match self {
            PositionEncoding::Utf16 => character.len_utf16() as u32,
            PositionEncoding::Utf8 => character.len_utf8() as u32,
        }
    }
}

/// The lines of `text` as LSP counts them (`\n` or `\r\n` end a line), without terminators.
pub(crate) fn lines(text: &str) -> Vec<&str> {
    text.split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect()
}

/// `column` (1-based characters; past the end means the end) on `line_text` as LSP units.
pub(crate) fn to_lsp_character(line_text: &str, column: u32, encoding: PositionEncoding) -> u32 {
    line_text
        .chars()
        .take(column.saturating_sub(1) as usize)
        .map(|c| encoding.units(c))
        .sum()
}

/// LSP `character` units on `line_text` as a 1-based character column. A position inside a
/// character (half a surrogate pair) counts as that character; past the end is the end.
pub(crate) fn from_lsp_character(
    line_text: &str,
    character: u32,
    encoding: PositionEncoding,
) -> u32 {
    let mut units = 0;
    let mut column = 1;
    for c in line_text.chars() {
        if units >= character {
            break;
        }
        units += encoding.units(c);
        column += 1;
    }
    column
}

/// A 1-based `(line, column)` as an LSP position on `text`; `None` when the line does not exist.
pub(crate) fn to_lsp(
    text: &str,
    line: u32,
    column: u32,
    encoding: PositionEncoding,
) -> Option<Position> {
    let lines = lines(text);
    let line_text = lines.get(line.checked_sub(1)? as usize)?;
    Some(Position::new(
        line - 1,
        to_lsp_character(line_text, column, encoding),
    ))
}

/// An LSP position on `text` as a 1-based `(line, column)` (past the last line: that line + 1).
pub(crate) fn from_lsp(text: &str, position: Position, encoding: PositionEncoding) -> (u32, u32) {
    let lines = lines(text);
    let column = lines
        .get(position.line as usize)
        .map_or(position.character + 1, |line_text| {
            from_lsp_character(line_text, position.character, encoding)
        });
    (position.line + 1, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_convert_both_ways_in_each_encoding() {
        // (line text, 1-based column, UTF-16 units, UTF-8 units)
        let cases = [
            ("abc", 1, 0, 0),
            ("abc", 3, 2, 2),
            ("abc", 9, 3, 3),
            ("é = 1", 3, 2, 3),
            ("s = '😀'; x", 10, 10, 12),
            ("", 1, 0, 0),
        ];
        for (line, column, utf16, utf8) in cases {
            assert_eq!(
                to_lsp_character(line, column, PositionEncoding::Utf16),
                utf16,
                "{line}"
            );
            assert_eq!(
                to_lsp_character(line, column, PositionEncoding::Utf8),
                utf8,
                "{line}"
            );
            let end = line.chars().count() as u32 + 1;
            assert_eq!(
                from_lsp_character(line, utf16, PositionEncoding::Utf16),
                column.min(end)
            );
            assert_eq!(
                from_lsp_character(line, utf8, PositionEncoding::Utf8),
                column.min(end)
            );
        }
        // Inside the surrogate pair of 😀 (UTF-16 unit 6 of `s = '😀'`): that character.
        assert_eq!(
            from_lsp_character("s = '😀'", 6, PositionEncoding::Utf16),
            7
        );
    }

    #[test]
    fn lines_count_crlf_and_lf_alike() {
        let text = "a\r\nbé\nc";
        assert_eq!(lines(text), ["a", "bé", "c"]);
        assert_eq!(
            to_lsp(text, 2, 3, PositionEncoding::Utf8),
            Some(Position::new(1, 3))
        );
        assert_eq!(to_lsp(text, 4, 1, PositionEncoding::Utf8), None);
        assert_eq!(to_lsp(text, 0, 1, PositionEncoding::Utf8), None);
        assert_eq!(
            from_lsp(text, Position::new(1, 3), PositionEncoding::Utf8),
            (2, 3)
        );
    }
}
