//! Drives the disaster check with `tests/data/commands.txt`. Nothing in the corpus is executed.

use clawsmith_sandbox::classify::check_command;

const CORPUS: &str = include_str!("../data/commands.txt");

#[test]
fn corpus_verdicts_match() {
    let mut blocked = 0;
    let mut allowed = 0;
    let mut mismatches = Vec::new();
    for (number, line) in CORPUS.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut columns = line.splitn(3, '\t');
        let (Some(expected), Some(rule), Some(command)) =
            (columns.next(), columns.next(), columns.next())
        else {
            panic!(
                "line {}: expected verdict<TAB>rule<TAB>command: {line:?}",
                number + 1
            );
        };
        let command = command.replace('⏎', "\n");
        let verdict = check_command(&command);
        let ok = match expected {
            "blocked" => {
                blocked += 1;
                verdict.is_blocked() && verdict.rule == Some(rule)
            }
            "allowed" => {
                allowed += 1;
                !verdict.is_blocked()
            }
            other => panic!("line {}: unknown verdict {other:?}", number + 1),
        };
        if !ok {
            mismatches.push(format!(
                "line {}: {command:?}: expected {expected} {rule}, got {} {:?} ({})",
                number + 1,
                serde_json::to_value(verdict.verdict).unwrap(),
                verdict.rule,
                verdict.reason
            ));
        }
    }
    assert!(blocked >= 150, "only {blocked} disaster variants");
    assert!(allowed >= 100, "only {allowed} everyday commands");
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
