//! Comments and docs cite the requirements of `docs/REQUIREMENTS.md` by id (`(A8)`, `K1–K7`): a
//! letter of the requirement groups (P, S, F, C, K, A, X) and a number. A citation of an id that
//! file does not define points nowhere, so tidy fails on it.
//!
//! In Rust files only comments are read (through `lex.rs`: an id-shaped word in a string literal
//! is data); in Markdown files the whole text is. A word is a citation when it is the group
//! letter, one or two digits and nothing more (`A10`, not `A10x`, `FA1` or `A100`).

use std::collections::BTreeSet;

use super::lex::lex;

/// The letters of the requirement groups.
const GROUPS: &str = "PSFCKAX";

/// Id-shaped words that name something else: `C0` is the ASCII control-character set (its
/// sibling `C1`, the Unicode control set, happens to be a requirement id too).
const NOT_CITATIONS: &[&str] = &["C0"];

/// The ids `docs/REQUIREMENTS.md` defines: each requirement is a list item opening with its id
/// in bold (`- **A8 Crash recovery.**`).
pub fn defined_ids(requirements: &str) -> BTreeSet<String> {
    requirements
        .lines()
        .filter_map(|line| line.strip_prefix("- **"))
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_alphanumeric()).next())
        .filter(|word| is_id(word))
        .map(str::to_owned)
        .collect()
}

/// Problems for each line of the Rust file `text` (`shown` is its path for messages) whose
/// comment cites an id not in `defined`.
pub fn check_rust(shown: &str, text: &str, defined: &BTreeSet<String>) -> Vec<String> {
    lex(text)
        .iter()
        .enumerate()
        .flat_map(|(index, line)| undefined(shown, index + 1, &line.comment, defined))
        .collect()
}

/// Problems for each line of the Markdown file `text` that cites an id not in `defined`.
pub fn check_markdown(shown: &str, text: &str, defined: &BTreeSet<String>) -> Vec<String> {
    text.lines()
        .enumerate()
        .flat_map(|(index, line)| undefined(shown, index + 1, line, defined))
        .collect()
}

fn undefined(shown: &str, number: usize, text: &str, defined: &BTreeSet<String>) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| is_id(word) && !NOT_CITATIONS.contains(word) && !defined.contains(*word))
        .map(|word| {
            format!(
                "{shown}:{number}: `{word}` looks like a requirement id but docs/REQUIREMENTS.md \
                 does not define it"
            )
        })
        .collect()
}

/// Whether `word` has the shape of a requirement id: a group letter and one or two digits.
fn is_id(word: &str) -> bool {
    let mut chars = word.chars();
    let Some(group) = chars.next() else {
        return false;
    };
    let digits = chars.as_str();
    GROUPS.contains(group)
        && (1..=2).contains(&digits.len())
        && digits.bytes().all(|byte| byte.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defined() -> BTreeSet<String> {
        defined_ids("## A\n\n- **A1 Table.** text\n- **A8 Crash recovery.** more\n- **X2 Extra**\n")
    }

    #[test]
    fn ids_are_read_from_the_requirement_items() {
        let ids: Vec<String> = defined().into_iter().collect();
        assert_eq!(ids, ["A1", "A8", "X2"]);
    }

    #[test]
    fn citations_table() {
        // (comment, cites an undefined id)
        let table = [
            ("// recovery (A8) closes calls", false),
            ("// K1–K7 and A1", true),
            ("// A9: deferred tools", true),
            ("/// see A8, X2", false),
            ("// C0 and C1 controls are escaped", true),
            ("// C0 controls only", false),
            ("// A100 is a number, FA1 and A1x are words", false),
            ("// SHA256 and P2P are not ids", false),
            ("// an id in a word: KA8 or A8b", false),
        ];
        for (comment, bad) in table {
            let problems = check_rust("x.rs", comment, &defined());
            assert_eq!(!problems.is_empty(), bad, "{comment}: {problems:?}");
        }
    }

    #[test]
    fn string_literals_are_not_read_in_rust_but_markdown_is_read_whole() {
        let rust = r#"let s = "K7"; // fine"#;
        assert!(check_rust("x.rs", rust, &defined()).is_empty());
        let markdown = "A table row citing K7 and A8.";
        let problems = check_markdown("x.md", markdown, &defined());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("x.md:1: `K7`"), "{problems:?}");
    }
}
