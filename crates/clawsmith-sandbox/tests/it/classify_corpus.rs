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

mod properties {
    use clawsmith_sandbox::classify::check_command;
    use proptest::prelude::*;
    use proptest::sample::select;

    const WRAPPERS: &[&str] = &[
        "env",
        "env A=1",
        "nohup",
        "nice",
        "nice -n 5",
        "timeout 5",
        "timeout -s KILL 5",
        "command",
        "exec",
        "time",
        "stdbuf -oL",
        "setsid",
        "xargs",
        "xargs -0",
        "busybox",
    ];
    const DISASTERS: &[&str] = &[
        "rm -rf /",
        "rm -r -f ~",
        "sudo id",
        "mkfs.ext4 /dev/sda",
        "shutdown now",
        "dd if=/dev/zero of=/dev/sda",
        "chmod -R 777 /",
        "kill -9 -1",
        "reboot",
    ];
    const FRAMES: &[&str] = &[
        "{}",
        "true && {}",
        "false || {}",
        "echo a; {}",
        "ls | {}",
        "( {} )",
        "{ {}; }",
        "echo $({})",
        "echo `{}`",
        "bash -c '{}'",
        "sh -c \"{}\"",
        "if true; then {}; fi",
        "for i in 1; do {}; done",
        "eval '{}'",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn never_panics(text in "\\PC{0,200}") {
            let _ = check_command(&text);
        }

        #[test]
        fn quoted_text_is_data(word in "[a-z0-9 /~*.:-]{0,40}") {
            for command in [format!("echo '{word}'"), format!("grep -rn '{word}' docs")] {
                prop_assert!(!check_command(&command).is_blocked(), "{}", command);
            }
        }

        #[test]
        fn disasters_stay_blocked_in_any_frame(
            wrapper in select(WRAPPERS),
            disaster in select(DISASTERS),
            frame in select(FRAMES),
        ) {
            let command = frame.replacen("{}", &format!("{wrapper} {disaster}"), 1);
            let verdict = check_command(&command);
            prop_assert!(verdict.is_blocked(), "{}: {:?}", command, verdict);
        }
    }
}
