//! Repositories survive commands: a command that would destroy a repository's history is asked
//! about in every mode that would run it, unless an allow rule names it.

use clawsmith_protocol::Verdict;
use clawsmith_security::*;

use crate::{policy_at, run_command};
use serde_json::json;

/// Rules of one table row.
type Rules<'a> = &'a [(RuleEffect, &'a str)];

fn policy(mode: PermissionMode, rules: Rules<'_>) -> PermissionPolicy {
    policy_at("/work/ws", mode, rules)
}

fn explain(policy: &PermissionPolicy, command: &str) -> Explanation {
    policy.explain(&run_command(), &json!({ "command": command }))
}

/// Commands that destroy the history, in every mode: `read-only` refuses, the others ask.
#[test]
fn history_destroyers_are_asked_about_in_every_mode() {
    // (command, what the reason says it reaches)
    let table = [
        ("rm -rf .git", "history (.git)"),
        ("rm -rf ./.git/", "history (.git)"),
        ("rm -r .git/objects", "history (.git)"),
        ("rm -f .git/HEAD", "history (.git)"),
        ("rm -rf sub/.git", "history (.git)"),
        ("rm -rf .g*", "history (.git)"),
        ("\\rm -rf .git", "history (.git)"),
        ("bash -c 'rm -rf .git'", "history (.git)"),
        ("timeout 5 rm -rf -- .git", "history (.git)"),
        ("echo .git | xargs rm -rf", "history (.git)"),
        ("unlink .git", "history (.git)"),
        ("shred -u .git/index", "history (.git)"),
        ("mv .git x", "history (.git)"),
        ("mv .git/refs /tmp/r", "history (.git)"),
        ("truncate -s 0 .git/HEAD", "history (.git)"),
        ("> .git/HEAD", "history (.git)"),
        ("echo x > .git/HEAD", "history (.git)"),
        ("cp /dev/null .git/index", "history (.git)"),
        ("dd if=/dev/zero of=.git/HEAD", "history (.git)"),
        ("find .git -delete", "history (.git)"),
        ("rm -rf /work/ws/.git", "history (.git)"),
        ("rm -rf *", "workspace root"),
        ("rm -rf .", "workspace root"),
        ("rm -rf ./", "workspace root"),
        ("rm -rf ./*", "workspace root"),
        ("rm -Rf -- *", "workspace root"),
        ("rm --recursive .", "workspace root"),
        ("rm -rf \"$PWD\"", "workspace root"),
        ("rm -rf $(pwd)/*", "workspace root"),
        ("rm -rf ..", "workspace root"),
        ("rm -rf ../ws", "workspace root"),
        ("rm -rf /work/ws", "workspace root"),
        ("rm -rf /work/*", "workspace root"),
        ("rm -rf \"$X\"", "workspace root"),
        ("rm -rf $X/*", "workspace root"),
        ("ls | xargs rm -rf", "workspace root"),
        ("find . -delete", "workspace root"),
        ("find -delete", "workspace root"),
        ("find . -type f -delete", "workspace root"),
        ("find . -exec rm -rf {} +", "workspace root"),
        ("find . -name '*' -delete", "workspace root"),
        ("find . -name '*.o' -o -name x -delete", "workspace root"),
        ("cd / && rm -rf *", "after `cd /`"),
        ("cd /work && rm -rf *", "after `cd /work`"),
        ("cd .. && rm -rf *", "after `cd ..`"),
        ("cd $X && rm -rf *", "after `cd $X`"),
        ("cd - ; rm -rf .", "after `cd -`"),
        ("cd; rm -rf *", "after `cd`"),
        ("cd src && cd ../.. && rm -rf *", "after `cd ../..`"),
        ("pushd /; rm -rf *", "after `pushd /`"),
        ("cd / && find . -delete", "after `cd /`"),
        ("bash -c 'cd / && rm -rf *'", "after `cd /`"),
    ];
    for (command, reach) in table {
        for mode in PermissionMode::ALL {
            let explanation = explain(&policy(mode, &[]), command);
            let decision = &explanation.decision;
            let (verdict, by) = match mode {
                PermissionMode::ReadOnly => (Verdict::Deny, DecidedBy::Mode),
                _ => (Verdict::Ask, DecidedBy::Repository),
            };
            assert_eq!(
                (decision.verdict, explanation.decided_by),
                (verdict, by),
                "{command:?} in {} mode: {}",
                mode.as_str(),
                decision.reason
            );
            if by == DecidedBy::Repository {
                assert!(
                    decision.reason.contains(reach)
                        && decision
                            .reason
                            .contains("mode asks before a command ends a repository"),
                    "{command:?}: {}",
                    decision.reason
                );
            }
        }
        // An allow rule for every command does not name it.
        let broad = policy(
            PermissionMode::Full,
            &[(RuleEffect::Allow, "run_command(*)")],
        );
        assert_eq!(
            explain(&broad, command).decision.verdict,
            Verdict::Ask,
            "{command:?}"
        );
    }
}

#[test]
fn commands_that_leave_the_history_alone_keep_the_mode() {
    let table = [
        "rm -rf build",
        "rm -rf ./target/",
        "rm -f *.o",
        "rm *",
        "rm -rf src/*",
        "rm -rf $TMPDIR/x",
        "cd src && rm -rf *",
        "cd /work/ws/src && rm -rf *",
        "cd /tmp && rm -rf *",
        "find . -name '*.o' -delete",
        "find build -delete",
        "find . -name x -exec ls {} \\;",
        "git clean -xdf",
        "git status",
        "cat .git/HEAD",
        // The disaster check refuses these in every mode; the permission layer leaves them to it.
        "rm -rf /",
        "rm -rf /*",
        "sudo rm -rf ~",
        "rm -rf \"$HOME\"/",
        "cp .git/HEAD /tmp/head",
        "mv a b",
        "echo > notes.txt",
    ];
    for command in table {
        let explanation = explain(&policy(PermissionMode::Full, &[]), command);
        assert_eq!(
            (explanation.decision.verdict, explanation.decided_by),
            (Verdict::Allow, DecidedBy::Mode),
            "{command:?}: {}",
            explanation.decision.reason
        );
    }
}

#[test]
fn only_an_allow_rule_naming_it_lifts_the_question() {
    use PermissionMode as M;
    use RuleEffect as R;
    // (mode, rules, command, expected)
    let table: &[(M, Rules<'_>, &str, Verdict)] = &[
        (
            M::Full,
            &[(R::Allow, "run_command(rm -rf .git)")],
            "rm -rf .git",
            Verdict::Allow,
        ),
        (
            M::Ask,
            &[(R::Allow, "run_command(rm -rf .git)")],
            "rm -rf .git",
            Verdict::Allow,
        ),
        (
            M::Full,
            &[(R::Allow, "run_command(rm -rf \\*)")],
            "rm -rf *",
            Verdict::Allow,
        ),
        (
            M::Full,
            &[(R::Allow, "run_command(mv .git *)")],
            "mv .git x",
            Verdict::Allow,
        ),
        (
            M::Full,
            &[(R::Allow, "run_command(rm *)")],
            "rm -rf .git",
            Verdict::Ask,
        ),
        (
            M::Full,
            &[(R::Allow, "run_command(rm -rf *)")],
            "rm -rf *",
            Verdict::Ask,
        ),
        (
            M::Full,
            &[(R::Allow, "run_command(*.git*)")],
            "rm -rf .git",
            Verdict::Ask,
        ),
        (
            M::Full,
            &[(R::Allow, "run_command(rm -rf \\*)")],
            "cd / && rm -rf *",
            Verdict::Ask,
        ),
        // Read-only stays a ceiling; deny and ask rules decide as usual.
        (
            M::ReadOnly,
            &[(R::Allow, "run_command(rm -rf .git)")],
            "rm -rf .git",
            Verdict::Deny,
        ),
        (
            M::Full,
            &[(R::Deny, "run_command(rm *)")],
            "rm -rf .git",
            Verdict::Deny,
        ),
        (
            M::Full,
            &[(R::Ask, "run_command(rm *)")],
            "rm -rf .git",
            Verdict::Ask,
        ),
    ];
    for (mode, rules, command, expected) in table {
        let decision = explain(&policy(*mode, rules), command).decision;
        assert_eq!(
            decision.verdict,
            *expected,
            "{command:?} in {} mode with {rules:?}: {}",
            mode.as_str(),
            decision.reason
        );
    }
}

#[test]
fn the_decision_says_why() {
    let explanation = explain(&policy(PermissionMode::Full, &[]), "rm -rf .git");
    assert_eq!(
        explanation.decision.reason,
        "`rm -rf .git` deletes the repository's history (.git); full mode asks before a command \
         ends a repository, even one undo can put back (an allow rule naming it, e.g. `allow \
         run_command(rm -rf .git)`, allows it)"
    );
    let explanation = explain(&policy(PermissionMode::Full, &[]), "cd / && rm -rf *");
    assert_eq!(
        explanation.decision.reason,
        "`rm -rf *` deletes everything under the workspace root, the repository's history \
         (.git) with it (after `cd /` the working directory is the workspace, above it or \
         unknown); full mode asks before a command ends a repository, even one undo can put \
         back (an allow rule naming it, e.g. `allow run_command(rm -rf \\*)`, allows it)"
    );
}
