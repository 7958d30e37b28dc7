//! Every `unsafe` says why it is sound: a `// SAFETY:` comment directly above it (only
//! attributes and other comment lines between), or for an `unsafe fn` or `unsafe trait` its
//! `/// # Safety` docs. The compiler allows `unsafe` in one module of the workspace
//! (`[workspace.lints]` denies `unsafe_code` elsewhere); this check keeps each use there
//! justified where it is written, so a reviewer of a change reads the reason next to the code.
//!
//! The source is read with the small lexer of `lex.rs` (comments, strings, raw strings,
//! character literals), so the word in a string, a comment or an identifier (`unsafe_code`) is
//! not a use.

use super::lex::{Line, lex};

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
