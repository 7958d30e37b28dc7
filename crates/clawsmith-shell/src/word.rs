//! Quote removal and what program a command name runs.

use crate::{UnknownProgram, Word};

/// The program a command name runs: `/usr/bin/rm` → `rm`. A relative path (`./init`) names a
/// program of the workspace, not the system's, and is kept whole.
pub fn program_name(name: &str) -> &str {
    if name.starts_with('/') {
        name.rsplit('/').next().unwrap_or(name)
    } else {
        name
    }
}

/// `$(which rm)`, `` `command -v rm` ``, `$(type -P rm)`: the name looked up.
pub(crate) fn looked_up_name(text: &str) -> Option<String> {
    let inner = text
        .strip_prefix("$(")
        .and_then(|t| t.strip_suffix(')'))
        .or_else(|| text.strip_prefix('`').and_then(|t| t.strip_suffix('`')))?;
    let words: Vec<&str> = inner.split_whitespace().collect();
    match words.as_slice() {
        ["which" | "whereis", name] | ["command", "-v" | "-V", name] => Some(unescape_word(name)),
        ["type", "-P" | "-p" | "-fP" | "-Pf", name] => Some(unescape_word(name)),
        _ => None,
    }
}

/// An unquoted word: a backslash keeps the next character (`\rm` → `rm`), a backslash-newline
/// joins lines.
pub(crate) fn unescape_word(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push(next),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Inside `"…"` a backslash only escapes `"`, `\`, `$`, `` ` `` and newline.
pub(crate) fn unescape_double_quoted(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('"' | '\\' | '$' | '`' | '\n')) {
            if let Some(next) = chars.next()
                && next != '\n'
            {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The body of `$'…'`: `\n`, `\t`, `\xHH`, and a backslash keeping anything else.
pub(crate) fn unescape_ansi_c(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('x') => {
                let mut hex = String::new();
                while hex.len() < 2 && chars.peek().is_some_and(char::is_ascii_hexdigit) {
                    hex.extend(chars.next());
                }
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// Why the command name `name` (after quote removal) does not say which program runs: an
/// expansion only resolved at run time. `[` and `[[` are the test commands, not globs.
pub(crate) fn unknown_name(name: &Word) -> Option<UnknownProgram> {
    let text = name.text.as_str();
    if name.dynamic {
        return Some(if text.contains("$(") || text.contains('`') {
            UnknownProgram::CommandSubstitution
        } else if text.contains("${") {
            UnknownProgram::ParameterExpansion
        } else if text.contains("$((") || text.contains("$[") || !text.contains('$') {
            UnknownProgram::Expansion
        } else {
            UnknownProgram::Variable
        });
    }
    let expands = !matches!(text, "[" | "[[") && text.contains(['*', '?', '[', '{', '}']);
    expands.then_some(UnknownProgram::Expansion)
}
