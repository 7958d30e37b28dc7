//! Every `unsafe` says why it is sound: a `// SAFETY:` comment directly above it (only
//! attributes and other comment lines between), or for an `unsafe fn` or `unsafe trait` its
//! `/// # Safety` docs. The compiler allows `unsafe` in one module of the workspace
//! (`[workspace.lints]` denies `unsafe_code` elsewhere); this check keeps each use there
//! justified where it is written, so a reviewer of a change reads the reason next to the code.
//!
//! The source is read with a small lexer (comments, strings, raw strings, character literals),
//! so the word in a string, a comment or an identifier (`unsafe_code`) is not a use.

/// Problems for each line of `text` (`shown` is its path for messages) that uses the `unsafe`
/// keyword without its justification directly above.
pub fn check_unsafe_comments(shown: &str, text: &str) -> Vec<String> {
    let lines = lex(text);
    let mut problems = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let Some(item) = unsafe_item(&line.code) else {
            continue;
        };
        if !justified(&lines[..index], item) {
            let wanted = match item {
                Item::Declaration => "a `// SAFETY:` comment or `/// # Safety` docs",
                Item::Use => "a `// SAFETY:` comment",
            };
            problems.push(format!(
                "{shown}:{}: `unsafe` without {wanted} directly above it",
                index + 1
            ));
        }
    }
    problems
}

/// One line of source: its code (string and character literals left out) and its comments.
#[derive(Debug, Default)]
struct Line {
    code: String,
    comment: String,
}

/// What the first `unsafe` of a line introduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    /// `unsafe fn` or `unsafe trait`: its `# Safety` docs say what callers must uphold.
    Declaration,
    /// A block, an `impl` or an `extern` block: a `SAFETY:` comment says why it is sound.
    Use,
}

/// The kind of the first `unsafe` keyword in `code`, if there is one.
fn unsafe_item(code: &str) -> Option<Item> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut rest = code;
    while let Some(at) = rest.find("unsafe") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "unsafe".len()..];
        if !before.is_some_and(is_word) && !after.starts_with(is_word) {
            let next = after.trim_start();
            let declaration = ["fn", "trait"]
                .iter()
                .any(|word| next.starts_with(word) && !next[word.len()..].starts_with(is_word));
            return Some(if declaration {
                Item::Declaration
            } else {
                Item::Use
            });
        }
        rest = &rest[at + "unsafe".len()..];
    }
    None
}

/// Line endings that continue a statement onto the next line, as rustfmt splits one
/// (`let read =` / `unsafe { … };`): the comment above the statement's first line is the one
/// directly above. A `,` is not among them: the arms of a `match` or the arguments of a call
/// each need their own comment.
const CONTINUED: &[&str] = &["=", "(", "[", "=>"];

/// Whether the lines directly above (`above`, nearest last) justify an `unsafe` of `item`:
/// walking up over attributes, comment lines and the first lines of the statement it is in,
/// one of the comments says `SAFETY:` (or, for a declaration, `# Safety`). Any other line
/// (code, or a blank line) ends the walk.
fn justified(above: &[Line], item: Item) -> bool {
    for line in above.iter().rev() {
        let code = line.code.trim();
        let comment = line.comment.as_str();
        if comment.contains("SAFETY:") || item == Item::Declaration && comment.contains("# Safety")
        {
            return code.is_empty() || code.starts_with("#[");
        }
        let attribute = code.starts_with("#[") && comment.is_empty();
        let comment_only = code.is_empty() && !comment.is_empty();
        let continued = comment.is_empty() && CONTINUED.iter().any(|end| code.ends_with(end));
        if !attribute && !comment_only && !continued {
            return false;
        }
    }
    false
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
fn lex(text: &str) -> Vec<Line> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_needs_its_safety_comment_directly_above() {
        // (source, problems)
        let table = [
            ("// SAFETY: a local set.\nunsafe { f() }", 0),
            ("unsafe { f() }", 1),
            (
                "fn g() {\n    // SAFETY: why.\n    let x = unsafe { f() };\n}",
                0,
            ),
            ("// SAFETY: why.\nlet a = 1;\nunsafe { f() }", 1),
            ("// SAFETY: why.\n\nunsafe { f() }", 1),
            ("// SAFETY: why,\n// over two lines.\nunsafe { f() }", 0),
            (
                "// Why, at length.\n// SAFETY: why.\n// More.\nunsafe { f() }",
                0,
            ),
            (
                "// SAFETY: why.\n#[allow(clippy::x)]\nunsafe impl Send for X {}",
                0,
            ),
            ("/* SAFETY: why. */\nunsafe { f() }", 0),
            ("// Safety: why.\nunsafe { f() }", 1),
            ("// SAFETY (whole function): why.\nunsafe { f() }", 1),
            ("let x = f(); // SAFETY: why.\nunsafe { f() }", 1),
            ("unsafe impl Sync for X {}", 1),
            ("// SAFETY: why.\nunsafe impl Sync for X {}", 0),
            (
                "/// Does.\n///\n/// # Safety\n/// `p` is valid.\nunsafe fn f(p: *const u8) {}",
                0,
            ),
            (
                "/// # Safety\n/// Callers hold the lock.\npub unsafe trait T {}",
                0,
            ),
            (
                "/// # Safety\n/// docs of a block are no reason.\nunsafe { f() }",
                1,
            ),
            ("unsafe fn f() {}", 1),
            ("// SAFETY: why.\nunsafe extern \"C\" {}", 0),
            ("// SAFETY: one reason.\nunsafe { f() }\nunsafe { g() }", 1),
            // A statement rustfmt split: the comment above its first line.
            ("// SAFETY: why.\nlet read =\n    unsafe { f() };", 0),
            ("// SAFETY: why.\nlet x = g(\n    unsafe { f() });", 0),
            (
                "// SAFETY: why.\nlet a = unsafe { f() };\nlet b =\n    unsafe { g() };",
                1,
            ),
            (
                "// SAFETY: why.\nlet x = g(\n    a,\n    unsafe { f() });",
                1,
            ),
            (
                "match x {\n    // SAFETY: why.\n    A => unsafe { f() },\n    B => unsafe { g() },\n}",
                1,
            ),
            ("// SAFETY: why.\nif x {\n    unsafe { f() }\n}", 1),
            // Not the keyword: identifiers, strings, comments, character literals.
            ("#![allow(unsafe_code)]", 0),
            ("let unsafe_code = 1; let not_unsafe = 2;", 0),
            ("let s = \"unsafe { f() }\";", 0),
            ("assert!(!h.contains(\"unsafe-inline\"));", 0),
            ("let s = r#\"unsafe \" { f() }\"#;", 0),
            ("let s = br\"unsafe\";", 0),
            ("let s = \"a \\\" unsafe { f() }\";", 0),
            ("let s = \"line one\nunsafe { f() }\nline three\";", 0),
            ("/// `unsafe` lives in one module.\nfn f() {}", 0),
            ("/* unsafe {\n f() } */", 0),
            ("let c = '\"'; unsafe { f() }", 1),
            ("let q = '\\''; let s = \"unsafe\";", 0),
            ("fn f<'a>(x: &'a str) { unsafe { g() } }", 1),
        ];
        for (source, problems) in table {
            let found = check_unsafe_comments("a.rs", source);
            assert_eq!(found.len(), problems, "{source:?}: {found:?}");
        }
    }

    #[test]
    fn the_problem_names_the_line() {
        let found = check_unsafe_comments("src/child.rs", "fn f() {}\n\nunsafe { g() }\n");
        assert_eq!(
            found,
            ["src/child.rs:3: `unsafe` without a `// SAFETY:` comment directly above it"]
        );
    }
}
