//! A small lexer for the checks that read Rust source: it splits each line into its code and
//! its comments, leaving string, raw-string and character literals out of both, so a word in a
//! literal is neither code nor comment, and a word in a comment is not code.

/// One line of source: its code (string and character literals left out) and its comments.
#[derive(Debug, Default)]
pub struct Line {
    pub code: String,
    /// The line's comments, `//` included for a line comment (so `///` and `//!` keep their
    /// third character); a block comment's text without its delimiters.
    pub comment: String,
}

/// Where the lexer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Code,
    LineComment,
    /// Nesting depth of `/* */`.
    BlockComment(usize),
    /// A `"…"` string (escapes apply).
    Str,
    /// A raw string closed by `"` and this many `#`.
    RawStr(usize),
}

/// `text` split into lines, each with its code and its comments apart.
pub fn lex(text: &str) -> Vec<Line> {
    let chars: Vec<char> = text.chars().collect();
    let mut lines = Vec::new();
    let mut line = Line::default();
    let mut state = State::Code;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            lines.push(std::mem::take(&mut line));
            if state == State::LineComment {
                state = State::Code;
            }
            i += 1;
            continue;
        }
        match state {
            State::Code => {
                let word = |at: usize| chars[at].is_alphanumeric() || chars[at] == '_';
                // `r` opens a raw string at the start of a word, or after a `b` that does.
                let after_word =
                    i > 0 && word(i - 1) && !(chars[i - 1] == 'b' && (i < 2 || !word(i - 2)));
                if c == '/' && next == Some('/') {
                    state = State::LineComment;
                    line.comment.push_str("//");
                    i += 2;
                    continue;
                }
                if c == '/' && next == Some('*') {
                    state = State::BlockComment(1);
                    i += 2;
                    continue;
                }
                if c == '"' {
                    state = State::Str;
                } else if let Some(hashes) = raw_string_start(&chars, i).filter(|_| !after_word) {
                    state = State::RawStr(hashes);
                    // `r`, the hashes and the quote.
                    i += hashes + 2;
                    continue;
                } else if c == '\'' {
                    i = after_char_literal(&chars, i);
                    continue;
                } else {
                    line.code.push(c);
                }
            }
            State::LineComment => line.comment.push(c),
            State::BlockComment(depth) => {
                if c == '*' && next == Some('/') {
                    state = if depth == 1 {
                        State::Code
                    } else {
                        State::BlockComment(depth - 1)
                    };
                    i += 2;
                    continue;
                }
                if c == '/' && next == Some('*') {
                    state = State::BlockComment(depth + 1);
                    i += 2;
                    continue;
                }
                line.comment.push(c);
            }
            State::Str => {
                if c == '\\' {
                    // The escaped character (a quote, a backslash; a newline stays a newline).
                    if next != Some('\n') {
                        i += 1;
                    }
                } else if c == '"' {
                    state = State::Code;
                }
            }
            State::RawStr(hashes) => {
                if c == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                    state = State::Code;
                    i += hashes + 1;
                    continue;
                }
            }
        }
        i += 1;
    }
    lines.push(line);
    lines
}

/// When `chars[at]` opens a raw string (`r"`, `r#"`, …; a `b` before it is code already
/// read), the number of its `#`.
fn raw_string_start(chars: &[char], at: usize) -> Option<usize> {
    if chars[at] != 'r' {
        return None;
    }
    let hashes = chars[at + 1..].iter().take_while(|c| **c == '#').count();
    (chars.get(at + 1 + hashes) == Some(&'"')).then_some(hashes)
}

/// The index after the character literal that starts at `chars[at]` (a `'`), or after the `'`
/// alone when it starts a lifetime or a label.
fn after_char_literal(chars: &[char], at: usize) -> usize {
    match chars.get(at + 1) {
        Some('\\') => {
            // An escape: up to the closing quote.
            let mut i = at + 2;
            while i < chars.len() && chars[i] != '\'' && chars[i] != '\n' {
                i += 1;
            }
            i + 1
        }
        Some(_) if chars.get(at + 2) == Some(&'\'') => at + 3,
        _ => at + 1,
    }
}
