//! An error prints its cause once. A `thiserror` variant whose message quotes a field (`{0}`,
//! `{source}`) that is also its source (`#[source]`, `#[from]`, or a field named `source`) says
//! the cause twice to anything that prints the chain (`error: memory index: disk full: disk
//! full`): the CLI, `anyhow`'s `{:#}`, a tracing layer. The message embeds the cause, or the
//! field is the source; not both.
//!
//! The check reads each `#[error("…")]` attribute and the variant after it (tuple or struct
//! fields, their attributes and names); `#[error(transparent)]` forwards both message and source
//! and is fine.

/// Problems in one source file (`shown` is its path for messages).
pub fn check_error_causes(shown: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find("#[error(") {
        let start = from + found;
        from = start + "#[error(".len();
        // An attribute starts its line; the same characters inside a literal are data.
        let line_start = text[..start].rfind('\n').map_or(0, |newline| newline + 1);
        if !text[line_start..start].trim().is_empty() {
            continue;
        }
        let Some(message) = first_string_literal(&text[from..]) else {
            continue;
        };
        let Some(fields) = variant_fields(&text[from..]) else {
            continue;
        };
        for field in fields.iter().filter(|field| field.is_source) {
            if quotes(&message, &field.name) {
                let line = text[..start].matches('\n').count() + 1;
                problems.push(format!(
                    "{shown}:{line}: the error message quotes `{}`, which is also the error's \
                     source: the cause prints twice. Keep it in the message and make it a plain \
                     field (a hand-written `From` instead of `#[from]`), or drop it from the \
                     message",
                    field.name
                ));
            }
        }
    }
    problems
}

/// One field of a variant: its name (`0`, `1`… for a tuple) and whether it is the source.
#[derive(Debug, PartialEq)]
struct Field {
    name: String,
    is_source: bool,
}

/// The text of the first `"…"` literal in `text`, escapes left as written. `None` when the
/// attribute has none before its end (`transparent`).
fn first_string_literal(text: &str) -> Option<String> {
    let end = text.find(")]")?;
    let open = text[..end].find('"')?;
    let mut literal = String::new();
    let mut chars = text[open + 1..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                literal.push(c);
                literal.extend(chars.next());
            }
            '"' => return Some(literal),
            _ => literal.push(c),
        }
    }
    None
}

/// The fields of the variant that follows an `#[error(…)]` attribute: the text after the
/// attribute skips its end, further attributes and doc comments, then reads the variant name
/// and its `(…)` or `{…}`.
fn variant_fields(text: &str) -> Option<Vec<Field>> {
    let mut rest = &text[text.find(")]")? + 2..];
    loop {
        rest = rest.trim_start();
        if rest.starts_with("///") || rest.starts_with("//") {
            rest = &rest[rest.find('\n')? + 1..];
        } else if rest.starts_with("#[") {
            rest = &rest[closing(rest, '[', ']')? + 1..];
        } else {
            break;
        }
    }
    let name_end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    let after = rest[name_end..].trim_start();
    let (open, close, tuple) = match after.chars().next()? {
        '(' => ('(', ')', true),
        '{' => ('{', '}', false),
        _ => return Some(Vec::new()),
    };
    let body = &after[1..closing(after, open, close)?];
    Some(
        split_top_level(body)
            .into_iter()
            .filter(|field| !field.trim().is_empty())
            .enumerate()
            .map(|(index, field)| parse_field(index, field, tuple))
            .collect(),
    )
}

/// A field's name and whether thiserror takes it as the source.
fn parse_field(index: usize, field: &str, tuple: bool) -> Field {
    // Doc comments are left out: `/// the source of…` is prose.
    let code: String = field
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let marked = code.contains("#[from]") || code.contains("#[source]");
    if tuple {
        return Field {
            name: index.to_string(),
            is_source: marked,
        };
    }
    let declaration = code
        .rsplit(']')
        .next()
        .unwrap_or_default()
        .split(':')
        .next()
        .unwrap_or_default();
    let name = declaration
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_owned();
    let is_source = marked || name == "source";
    Field { name, is_source }
}

/// Whether the format string `message` interpolates `name` (`{name}`, `{name:?}`, `{0}`).
fn quotes(message: &str, name: &str) -> bool {
    let mut rest = message;
    while let Some(open) = rest.find('{') {
        rest = &rest[open + 1..];
        if rest.starts_with('{') {
            // `{{` is a literal brace.
            rest = &rest[1..];
            continue;
        }
        let Some(close) = rest.find('}') else {
            return false;
        };
        let argument = rest[..close].split(':').next().unwrap_or_default();
        if argument == name {
            return true;
        }
        rest = &rest[close + 1..];
    }
    false
}

/// The index in `text` (which starts with `open`) of the matching `close`.
fn closing(text: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (index, c) in text.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(index);
            }
        }
    }
    None
}

/// `body` split at the commas outside brackets, angle brackets and parentheses.
fn split_top_level(body: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (index, c) in body.char_indices() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attribute_inside_a_string_is_not_read() {
        let text = "let s = \"#[error(\\\"{0}\\\")] Index(#[from] Error)\";";
        assert_eq!(check_error_causes("e.rs", text), Vec::<String>::new());
    }

    #[test]
    fn variants_table() {
        // (enum body, prints its cause twice)
        let table = [
            (
                "  #[error(\"index: {0}\")]\n Index(#[from] StoreError),",
                true,
            ),
            (
                "#[error(\"index: {0}\")]\n Index(#[source] StoreError),",
                true,
            ),
            ("#[error(\"index: {0}\")]\n Index(StoreError),", false),
            (
                "#[error(\"index failed\")]\n Index(#[from] StoreError),",
                false,
            ),
            ("#[error(transparent)]\n Store(#[from] StoreError),", false),
            (
                "#[error(\"cannot read {path}: {source}\")]\n Read { path: PathBuf, source: Error },",
                true,
            ),
            (
                "#[error(\"cannot read {path}\")]\n Read { path: PathBuf, source: Error },",
                false,
            ),
            (
                "#[error(\"cannot read {path}: {why:?}\")]\n Read {\n /// Why.\n \
                 #[source]\n why: Error,\n path: PathBuf },",
                true,
            ),
            (
                "#[error(\"{1} of {0}\")]\n Pair(String, #[from] Error),",
                true,
            ),
            (
                "#[error(\"{0} of {{1}}\")]\n Pair(String, #[source] Error),",
                false,
            ),
            (
                "#[error(\"at {at}: {message}\")]\n /// More docs.\n #[allow(dead_code)]\n \
                 Bad { at: Position<u8, u8>, message: String },",
                false,
            ),
        ];
        for (text, twice) in table {
            let problems = check_error_causes("e.rs", text);
            assert_eq!(!problems.is_empty(), twice, "{text}: {problems:?}");
        }
    }
}
