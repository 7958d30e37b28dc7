//! Comments say what the code does and why, in words that stand on their own. A reference to an
//! issue number (the word *issue* or *issues*, then a number, with or without `#`) points at a
//! tracker the reader of the code may not have, and it ages: the history of a change and the
//! issue it answers belong in the commit message, where `git log` and `git blame` find them.
//!
//! Only comments are read (`//`, `///`, `//!` and block comments), through the lexer of
//! `lex.rs`: a string literal that holds such words is data, and an identifier is code. A
//! reference wrapped across two comment lines (the word at the end of one, the number at the
//! start of the next) is reported at its first line.

use super::lex::lex;

/// Problems for each line of `text` (`shown` is its path for messages) whose comment cites an
/// issue number.
pub fn check_issue_references(shown: &str, text: &str) -> Vec<String> {
    let lines = lex(text);
    let mut problems = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if line.comment.is_empty() {
            continue;
        }
        // The start of the next line's comment, for a reference wrapped after its word.
        let next = lines
            .get(index + 1)
            .filter(|next| next.code.trim().is_empty())
            .map(|next| comment_body(&next.comment))
            .unwrap_or_default();
        if cites_issue(&line.comment, next) {
            problems.push(format!(
                "{shown}:{}: comment cites an issue number; say what the code does and why, and \
                 put history and issue numbers in the commit message",
                index + 1
            ));
        }
    }
    problems
}

/// A comment's text without its markers (`//`, `///`, `//!`, a block comment's `*`) and the
/// spaces after them.
fn comment_body(comment: &str) -> &str {
    comment.trim_start_matches(|c: char| matches!(c, '/' | '!' | '*') || c.is_whitespace())
}

/// Whether `comment` holds *issue* or *issues* as a word followed by a number (spaces and one
/// `#` allowed between), the number possibly being the start of `next`, the comment of the line
/// below.
fn cites_issue(comment: &str, next: &str) -> bool {
    let lower = comment.to_ascii_lowercase();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(found) = lower[from..].find("issue") {
        let at = from + found;
        from = at + "issue".len();
        if lower[..at].chars().next_back().is_some_and(is_word) {
            continue;
        }
        let mut rest = &lower[from..];
        rest = rest.strip_prefix('s').unwrap_or(rest);
        // A letter makes it another word (`issued`); a digit is the number, written close.
        if rest.starts_with(|c: char| c.is_alphabetic() || c == '_') {
            continue;
        }
        let mut rest = rest.trim_start();
        if rest.is_empty() {
            // The word ends the line: the number, if any, starts the next one.
            rest = next;
        }
        let rest = rest.strip_prefix('#').unwrap_or(rest).trim_start();
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_citing_an_issue_number_are_flagged() {
        // (source, problems)
        let table = [
            ("// see issue 15", 1),
            ("// See Issue 15.", 1),
            ("/// Fixed for issue #3.", 1),
            ("/// Fixed for issue # 3.", 1),
            ("//! Issue 35's profile put the cost in the WAL.", 1),
            ("// issues 14 and 15", 1),
            ("// (issue 15: a copy per call)", 1),
            ("// ISSUE15", 1),
            ("let x = 1; // issue 22", 1),
            ("/* issue 7 */", 1),
            ("/* a block comment,\n   over issue 7 */", 1),
            // A reference wrapped after its word: reported once, at its first line.
            ("// taken per turn (issue\n// 15: an open and a flock)", 1),
            ("/// taken per turn (issues\n/// #14 and 15)", 1),
            ("// issue 15\n// issue 16", 2),
            // Not a reference: code, literals, the word in prose, other words.
            ("let issue = 15;", 0),
            ("fn issue_15() {}", 0),
            ("let s = \"issue 15\";", 0),
            ("let s = \"// issue 15\";", 0),
            ("let s = r#\"see issue 15\"#;", 0),
            ("assert_eq!(name, \"issue 15\"); // the name is data", 0),
            ("// the issue is that the lock is held", 0),
            ("// two issues: the lock and the copy", 0),
            ("// the issue\nlet x = 15;", 0),
            ("// tissue 15", 0),
            ("// issued 3 times", 0),
            ("// jira_create: tag `issues` 4 + description 1", 0),
            ("// only issue system calls over data prepared for them", 0),
        ];
        for (source, problems) in table {
            let found = check_issue_references("a.rs", source);
            assert_eq!(found.len(), problems, "{source:?}: {found:?}");
        }
    }

    #[test]
    fn the_problem_names_the_line_and_what_to_do() {
        let found = check_issue_references("src/a.rs", "fn f() {}\n\n// see issue 15\nfn g() {}\n");
        assert_eq!(
            found,
            [
                "src/a.rs:3: comment cites an issue number; say what the code does and why, and \
                 put history and issue numbers in the commit message"
            ]
        );
    }
}
